// The official TypeScript SDK v1's WebSocketClientTransport (subprotocol
// "mcp", one JSON-RPC message per text frame) driving scripts/demo over a
// WebSocket: every primitive (demo_walk.mjs), a question to the client
// (delete_note asks for confirmation by elicitation; this client says
// yes), a cancelled call, and, given a folder luamcp dev serves, a
// reload's notifications/tools/list_changed on the same socket after this
// client edits a file there. Prints one JSON object; websocket_spec.lua
// checks it.
//
// Usage: node sdk_websocket.mjs URL [DEV_FOLDER]
import { appendFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { walkDemo } from "./demo_walk.mjs";

const [url, devFolder] = process.argv.slice(2);
const out = { elicitations: [] };
const client = new Client({ name: "sdk-websocket", version: "1.0.0" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  out.elicitations.push(request.params.message);
  return { action: "accept", content: { confirm: true } };
});
let listChanged = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { listChanged++; });

try {
  const transport = new WebSocketClientTransport(new URL(url));
  await client.connect(transport);
  out.protocol = client.getServerVersion()?.name ?? null;
  await walkDemo(client, out);
  out.write = await client.callTool({ name: "write_note", arguments: { name: "scratch", text: "to go" } });
  out.del = await client.callTool({ name: "delete_note", arguments: { name: "scratch" } });
  // Cancellation: the countdown (one step per 100 ms) is aborted after its
  // first progress; the SDK sends notifications/cancelled and rejects.
  const abort = new AbortController();
  const started = Date.now();
  try {
    await client.callTool({ name: "countdown", arguments: { n: 50 } }, undefined, {
      signal: abort.signal,
      onprogress: () => abort.abort("enough"),
    });
    out.cancelled = "not cancelled";
  } catch (e) {
    out.cancelled = String(e?.message ?? e);
  }
  out.cancelMs = Date.now() - started;
  out.afterCancel = await client.callTool({ name: "add", arguments: { a: 1, b: 1 } });
  if (devFolder) {
    appendFileSync(`${devFolder}/math.lua`,
      '\nmcp.tool { name = "added_by_ws_spec", description = "new", handler = function() return "hi" end }\n');
    const deadline = Date.now() + 90000;
    while (!listChanged && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    out.listChanged = listChanged;
    out.toolsAfter = (await client.listTools()).tools.map((t) => t.name).sort();
  }
  await client.close();
} catch (e) {
  out.error = String(e?.stack ?? e);
}
console.log(JSON.stringify(out));
process.exit(0);

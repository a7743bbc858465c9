// The official TypeScript SDK v1's SSEClientTransport (the 2024-11-05
// HTTP+SSE transport) against luamcp's /sse. Prints one JSON object with
// what each step returned; legacy_sse_spec.lua checks it.
//
// Usage: node sdk_legacy_sse.mjs demo URL DIR   every primitive of scripts/demo
//                                               (served by `luamcp dev DIR`),
//                                               progress, logging, a
//                                               subscription, then a reload's
//                                               list_changed (a file written in DIR)
//        node sdk_legacy_sse.mjs asking URL     sampling, elicitation and roots
//                                               (spec/fixtures/asking)
//        node sdk_legacy_sse.mjs calls URL CLIENTS CALLS
//                                               CLIENTS clients calling `whoami`
//                                               CALLS times each (spec/fixtures/scaleout)
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { walkDemo } from "./demo_walk.mjs";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, url, ...rest] = process.argv.slice(2);
const out = { mode };

function waitFor(predicate, what, ms = 30000) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      if (predicate()) return resolve();
      if (Date.now() - started > ms) return reject(new Error(`no ${what}`));
      setTimeout(tick, 20);
    };
    tick();
  });
}

async function demo(dir) {
  const client = new Client({ name: "sdk-sse", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  const transport = new SSEClientTransport(new URL(url));
  const logs = [], updates = [], asked = [];
  // delete_note asks before it deletes: say no to the first, yes after.
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message);
    return asked.length === 1 ? { action: "decline" } : { action: "accept", content: { confirm: true } };
  });
  let listChanged = 0;
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri); });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { listChanged++; });
  try {
    await client.connect(transport);
    out.sessionId = transport.sessionId ?? null;
    out.serverVersion = client.getServerVersion();
    out.protocolVersion = transport.protocolVersion ?? null;
    out.capabilities = client.getServerCapabilities();
    await walkDemo(client, out, () => client.setLoggingLevel("debug"));
    // A subscription: writing the note updates its resource.
    await client.subscribeResource({ uri: "notes://sse" });
    out.write = await client.callTool({ name: "write_note", arguments: { name: "sse", text: "over SSE" } });
    await waitFor(() => updates.includes("notes://sse"), "resources/updated");
    out.updates = updates;
    // An elicitation round trip: declined (kept), then confirmed (deleted).
    out.kept = await client.callTool({ name: "delete_note", arguments: { name: "sse" } });
    out.deleted = await client.callTool({ name: "delete_note", arguments: { name: "sse" } });
    out.asked = asked;
    // Cancellation: a long countdown cancelled by the client; the session
    // goes on.
    const controller = new AbortController();
    const cancelled = client.callTool({ name: "countdown", arguments: { n: 50 } }, undefined, {
      signal: controller.signal, onprogress: () => controller.abort("enough"),
    }).then(() => "finished", (e) => `rejected: ${e.message}`);
    out.cancelled = await cancelled;
    out.afterCancel = await client.callTool({ name: "add", arguments: { a: 1, b: 1 } });
    out.logs = logs.length;
    // A reload: a new tool in the watched folder; the client hears of it.
    writeFileSync(`${dir}/zz_sse_added.lua`,
      'local mcp = require "mcp"\nmcp.tool{ name = "sse_added", description = "Added by a reload", ' +
      'handler = function() return "added" end }\n');
    await waitFor(() => listChanged > 0, "notifications/tools/list_changed");
    out.listChanged = listChanged;
    const after = await client.listTools();
    out.toolsAfter = after.tools.map((t) => t.name);
    out.added = await client.callTool({ name: "sse_added", arguments: {} });
    await client.ping();
    out.ok = true;
  } catch (e) {
    out.error = String((e && e.stack) || e);
  } finally {
    await client.close().catch(() => {});
  }
}

async function asking() {
  const client = new Client(
    { name: "sdk-sse-asking", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
  );
  out.received = { sampling: 0, elicitation: [], roots: 0 };
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    out.received.sampling++;
    return { role: "assistant", model: "test-model", stopReason: "endTurn",
             content: { type: "text", text: `echo: ${request.params.messages[0].content.text}` } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    out.received.elicitation.push(request.params.message);
    return { action: "accept", content: { name: "Ada", age: 36 } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    out.received.roots++;
    return { roots: [{ uri: "file:///tmp/project", name: "project" }] };
  });
  try {
    await client.connect(new SSEClientTransport(new URL(url)));
    out.elicit = await client.callTool({ name: "elicit", arguments: { message: "Who are you?" } });
    out.sample = await client.callTool({ name: "sample", arguments: { prompt: "What is 2+2?" } });
    out.roots = await client.callTool({ name: "roots", arguments: {} });
    out.ok = true;
  } catch (e) {
    out.error = String((e && e.stack) || e);
  } finally {
    await client.close().catch(() => {});
  }
}

async function calls(clientCount, callCount) {
  out.clients = [];
  out.failures = [];
  async function one(n) {
    const record = { n, answeredBy: [] };
    const client = new Client({ name: `sse-${n}`, version: "1.0.0" });
    const transport = new SSEClientTransport(new URL(url));
    try {
      await client.connect(transport, { timeout: 15000 });
      record.sessionId = transport.sessionId ?? null;
      for (let i = 0; i < callCount; i++) {
        const r = await client.callTool({ name: "whoami", arguments: {} }, undefined, { timeout: 15000 });
        record.answeredBy.push(r.content?.[0]?.text);
      }
    } catch (e) {
      out.failures.push({ n, error: String((e && e.stack) || e) });
    } finally {
      await client.close().catch(() => {});
    }
    out.clients.push(record);
  }
  await Promise.all(Array.from({ length: clientCount }, (_, n) => one(n)));
}

if (mode === "demo") await demo(rest[0]);
else if (mode === "asking") await asking();
else await calls(Number(rest[0]), Number(rest[1]));
process.stdout.write(JSON.stringify(out) + "\n");

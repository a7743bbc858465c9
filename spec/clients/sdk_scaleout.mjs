// Many official TypeScript SDK clients at once against one URL (nginx in
// front of several luamcp instances, in spec/scaleout_spec.lua): v1
// (@modelcontextprotocol/sdk, legacy sessions) or v2 (@modelcontextprotocol/client
// pinned to 2026-07-28, no sessions). Each client connects, calls `whoami`
// CALLS times, and v2 clients also call `ask`, whose question the client
// answers (an input_required round and its retry). Prints one JSON object:
// per client its session id (v1) and who answered each call.
//
// Usage: node sdk_scaleout.mjs v1|v2 URL CLIENTS CALLS
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as HttpV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from "@modelcontextprotocol/client";

const [sdk, url, clientCount, callCount] = process.argv.slice(2);
const out = { sdk, clients: [], failures: [] };

function textOf(result) {
  return result.content?.[0]?.text;
}

async function oneClient(n) {
  const record = { n, answeredBy: [] };
  let client, transport;
  if (sdk === "v1") {
    client = new ClientV1({ name: `scaleout-v1-${n}`, version: "1.0.0" }, { capabilities: {} });
    transport = new HttpV1(new URL(url));
  } else {
    client = new ClientV2({ name: `scaleout-v2-${n}`, version: "2.0.0" }, {
      versionNegotiation: { mode: { pin: "2026-07-28" } },
      capabilities: { elicitation: { form: {} } },
    });
    client.setRequestHandler("elicitation/create", async () => ({ action: "accept", content: { name: `client ${n}` } }));
    transport = new HttpV2(new URL(url));
  }
  try {
    await client.connect(transport, { timeout: 15000 });
    record.sessionId = transport.sessionId ?? null;
    for (let i = 0; i < Number(callCount); i++) {
      const r = await client.callTool({ name: "whoami", arguments: {} }, undefined, { timeout: 15000 });
      record.answeredBy.push(textOf(r));
    }
    if (sdk === "v2") {
      const r = await client.callTool({ name: "ask", arguments: {} }, undefined, { timeout: 15000 });
      record.ask = r.structuredContent ?? JSON.parse(textOf(r));
    }
    if (sdk === "v1") await transport.terminateSession();
  } catch (e) {
    out.failures.push({ n, error: String((e && e.stack) || e) });
  } finally {
    await client.close().catch(() => {});
  }
  out.clients.push(record);
}

await Promise.all(Array.from({ length: Number(clientCount) }, (_, n) => oneClient(n)));
process.stdout.write(JSON.stringify(out) + "\n");

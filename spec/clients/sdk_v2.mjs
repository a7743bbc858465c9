// The official TypeScript SDK v2 client (@modelcontextprotocol/client, pinned
// in spec/package.json) against luamcp in one of its three version modes,
// over stdio or Streamable HTTP. Prints one JSON object: what each step
// returned, what the client says it negotiated, and every message that
// crossed the wire; sdk_v2_spec.lua checks it.
//
// Usage: node sdk_v2.mjs MODE JOB WIRE stdio LUAMCP SCRIPTS
//        node sdk_v2.mjs MODE JOB WIRE http URL
//   MODE  pin (2026-07-28), auto, or legacy
//   JOB   demo (every primitive of scripts/demo) or greet (spec/fixtures/modern)
//   WIRE  a path prefix: over stdio the server's input and output are copied
//         to WIRE.in and WIRE.out by tee, so the log is the bytes themselves
//         (the SDK's probe process included); over HTTP a wrapped fetch
//         records each exchange's headers, body, status and messages.
import { readFileSync, existsSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [mode, job, wirePath, transportKind, target, scripts] = process.argv.slice(2);
const versionNegotiation =
  mode === "pin" ? { mode: { pin: "2026-07-28" } } : mode === "auto" ? { mode: "auto" } : { mode: "legacy" };

const out = { mode, job, transport: transportKind, asked: { elicitation: [], sampling: [] } };
const exchanges = [];
const pending = [];

// Every message of a response body, whether JSON or SSE.
function messagesOf(contentType, text) {
  if (!text) return [];
  if (contentType.startsWith("application/json")) return [].concat(JSON.parse(text));
  const found = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
    if (!data.length) continue;
    try { found.push(JSON.parse(data.join("\n"))); } catch { /* an event cut short by an abort */ }
  }
  return found;
}

async function recordingFetch(url, init) {
  const exchange = { method: init?.method ?? "GET", headers: Object.fromEntries(new Headers(init?.headers).entries()) };
  if (typeof init?.body === "string") exchange.body = JSON.parse(init.body);
  exchanges.push(exchange);
  const res = await fetch(url, init);
  exchange.status = res.status;
  exchange.responseHeaders = Object.fromEntries(res.headers.entries());
  exchange.messages = [];
  if (!res.body) return res;
  // Read a copy of the body as it arrives: a listen stream stays open
  // until the client aborts it, so nothing waits for its end.
  const [mine, copy] = res.body.tee();
  const contentType = res.headers.get("content-type") ?? "";
  pending.push((async () => {
    let text = "";
    try {
      for await (const chunk of copy) text += Buffer.from(chunk).toString("utf8");
    } catch { /* aborted by the client */ }
    exchange.messages = messagesOf(contentType, text);
  })());
  return new Response(mine, { status: res.status, statusText: res.statusText, headers: res.headers });
}

function transport() {
  if (transportKind === "http") return new StreamableHTTPClientTransport(new URL(target), { fetch: recordingFetch });
  return new StdioClientTransport({
    command: "sh",
    args: ["-c", 'tee -a "$0.in" | "$1" run "$2" | tee -a "$0.out"', wirePath, target, scripts],
    stderr: "pipe",
  });
}

// { sent, received }: the messages each way; over HTTP also the exchanges.
function wire() {
  if (transportKind === "http") {
    return { exchanges, sent: exchanges.filter((e) => e.body).map((e) => e.body),
             received: exchanges.flatMap((e) => e.messages ?? []) };
  }
  const lines = (file) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);
  return { sent: lines(wirePath + ".in"), received: lines(wirePath + ".out") };
}

const client = new Client({ name: "sdk-v2-spec", version: "2.0.0" }, {
  versionNegotiation,
  capabilities: job === "greet" ? { elicitation: { form: {} }, sampling: {} } : {},
});
if (job === "greet") {
  // The same two handlers answer a legacy server's requests and a modern
  // input_required result.
  client.setRequestHandler("elicitation/create", async (request) => {
    out.asked.elicitation.push(request.params);
    return { action: "accept", content: { name: "Ada" } };
  });
  client.setRequestHandler("sampling/createMessage", async (request) => {
    out.asked.sampling.push(request.params);
    const asked = request.params.messages[0].content.text;
    return { role: "assistant", model: "test-model", content: { type: "text", text: `(${asked})` } };
  });
}

async function failure(promise) {
  try {
    await promise;
    return { resolved: true };
  } catch (e) {
    return { code: e.code, message: e.message, data: e.data, uri: e.uri, name: e.constructor?.name };
  }
}

async function demo() {
  out.tools = await client.listTools();
  out.add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  out.dice = await client.callTool({ name: "roll_dice", arguments: { count: 2, sides: 6 } });
  const progress = [];
  out.countdown = await client.callTool({ name: "countdown", arguments: { n: 3 } }, {
    onprogress: (p) => progress.push(p),
  });
  out.progress = progress;
  out.badArgs = await client.callTool({ name: "add", arguments: { a: "two", b: 3 } });
  out.note = await client.callTool({ name: "write_note", arguments: { name: `sdk_${mode}`, text: `written in ${mode} mode` } });
  out.resources = await client.listResources();
  out.index = await client.readResource({ uri: "notes://index" });
  out.templates = await client.listResourceTemplates();
  out.welcome = await client.readResource({ uri: "notes://welcome" });
  out.written = await client.readResource({ uri: `notes://sdk_${mode}` });
  out.prompts = await client.listPrompts();
  out.prompt = await client.getPrompt({ name: "summarize_note", arguments: { name: "welcome" } });
  out.complete = await client.complete({
    ref: { type: "ref/prompt", name: "summarize_note" },
    argument: { name: "name", value: "wel" },
  });
  out.missing = await failure(client.readResource({ uri: "notes://missing" }));
  out.unknownTool = await failure(client.callTool({ name: "no_such_tool", arguments: {} }));
  if (client.getProtocolEra() === "modern") {
    const sub = await client.listen({ toolsListChanged: true, resourceSubscriptions: ["notes://welcome"] }, { timeout: 10000 });
    out.listen = { honoredFilter: sub.honoredFilter };
    await sub.close();
    out.listen.closed = await sub.closed;
  } else {
    out.ping = await client.ping();
  }
}

async function greet() {
  out.greet = await client.callTool({ name: "greet", arguments: { lang: "French" } });
  out.sideEffects = await client.callTool({ name: "side_effects", arguments: {} });
}

const chosen = transport();
// luamcp's stderr, shown when a spec fails.
out.stderr = "";
chosen.stderr?.on("data", (chunk) => { out.stderr += chunk; });
try {
  await client.connect(chosen, { timeout: 10000 });
  out.negotiated = client.getNegotiatedProtocolVersion();
  out.era = client.getProtocolEra();
  out.serverVersion = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = client.getInstructions();
  out.discover = client.getDiscoverResult() ?? null;
  await (job === "greet" ? greet() : demo());
  out.ok = true;
} catch (e) {
  out.error = String((e && e.stack) || e);
} finally {
  await client.close().catch(() => {});
}
await Promise.race([Promise.all(pending), new Promise((r) => setTimeout(r, 2000))]);
out.wire = wire();
process.stdout.write(JSON.stringify(out) + "\n");

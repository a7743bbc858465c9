// The official TypeScript SDK client answering what luamcp's tools ask:
// sampling/createMessage, elicitation/create and roots/list, over stdio or
// Streamable HTTP, against spec/fixtures/asking. Prints one JSON object with
// what each step returned and what each handler received; asking_spec.lua
// checks it.
//
// Usage: node sdk_asking.mjs stdio LUAMCP SCRIPTS
//        node sdk_asking.mjs http URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, target, scripts] = process.argv.slice(2);

function transport() {
  if (mode === "stdio") return new StdioClientTransport({ command: target, args: ["run", scripts], stderr: "pipe" });
  return new StreamableHTTPClientTransport(new URL(target));
}

// A client error the Lua side must see as is: a code other than the SDK's
// default -32603, and a message.
function refusal(message) {
  const e = new Error(message);
  e.code = -32042;
  return e;
}

const out = { mode, received: { sampling: [], elicitation: [], roots: 0 }, bareRequests: [] };
const full = new Client(
  { name: "sdk-asking", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
);
let failRoots = false;
full.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  out.received.sampling.push(request.params);
  const text = request.params.messages[0].content.text;
  if (text === "fail") throw refusal("no model here");
  return { role: "assistant", model: "test-model", stopReason: "endTurn",
           content: { type: "text", text: `echo: ${text}` } };
});
full.setRequestHandler(ElicitRequestSchema, async (request) => {
  out.received.elicitation.push(request.params);
  if (request.params.message === "fail") throw refusal("the user walked away");
  if (request.params.message === "decline") return { action: "decline" };
  return { action: "accept", content: { name: "Ada", age: 36 } };
});
full.setRequestHandler(ListRootsRequestSchema, async () => {
  out.received.roots++;
  if (failRoots) throw refusal("roots are private");
  return { roots: [{ uri: "file:///tmp/project", name: "project" }, { uri: "file:///home/ada" }] };
});

// No capabilities at all: the server must not ask this one anything.
const bare = new Client({ name: "sdk-bare", version: "1.0.0" });
bare.fallbackRequestHandler = async (request) => {
  out.bareRequests.push(request.method);
  throw refusal("bare client");
};

try {
  await full.connect(transport());
  out.sample = await full.callTool({ name: "sample", arguments: { prompt: "What is 2+2?" } });
  out.sampleFail = await full.callTool({ name: "sample_caught", arguments: { prompt: "fail" } });
  out.sampleUncaught = await full.callTool({ name: "sample", arguments: { prompt: "fail" } });
  out.elicit = await full.callTool({ name: "elicit", arguments: { message: "Who are you?" } });
  out.elicitDecline = await full.callTool({ name: "elicit", arguments: { message: "decline" } });
  out.elicitFail = await full.callTool({ name: "elicit_caught", arguments: { message: "fail" } });
  out.roots = await full.callTool({ name: "roots", arguments: {} });
  failRoots = true;
  out.rootsFail = await full.callTool({ name: "roots_caught", arguments: {} });
  failRoots = false;
  await full.sendRootsListChanged();
  out.askAll = await full.callTool({ name: "ask_all", arguments: {} });
  if (mode === "http") {
    // The server ends this call's SSE stream at once; the SDK resumes it
    // with Last-Event-ID after the advertised retry delay.
    out.closeStream = await full.callTool({ name: "close_stream", arguments: { ms: 100 } });
  }
  await full.ping();

  await bare.connect(transport());
  out.bareSample = await bare.callTool({ name: "sample", arguments: { prompt: "x" } });
  out.bareSampleCaught = await bare.callTool({ name: "sample_caught", arguments: { prompt: "x" } });
  out.bareElicit = await bare.callTool({ name: "elicit", arguments: {} });
  out.bareRoots = await bare.callTool({ name: "roots_caught", arguments: {} });
  out.bareAdd = await bare.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  out.ok = true;
} catch (e) {
  out.error = String((e && e.stack) || e);
} finally {
  await full.close().catch(() => {});
  await bare.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");

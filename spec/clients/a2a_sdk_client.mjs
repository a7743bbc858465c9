// The official A2A SDK's client (@a2a-js/sdk 1.3.0) driving a luamcp agent
// (spec/fixtures/a2a/agent.lua) in one protocol version:
//   node a2a_sdk_client.mjs BASE_URL 1.0|0.3 [TOKEN]
// (TOKEN: an OAuth access token sent with every JSON-RPC request)
// 1.0 reads the card (ClientFactory.createFromUrl) and speaks JSON-RPC 1.0;
// 0.3 uses the SDK's 0.3 transport (LegacyJsonRpcTransport) on the card's
// url. Prints one JSON object: what each step saw.
import http from "node:http";
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { LegacyJsonRpcTransport } from "@a2a-js/sdk/compat/v0_3/client";
import { SendMessageRequest, TaskState } from "@a2a-js/sdk";

const [base, version, token] = process.argv.slice(2);
const fetchImpl = token
  ? (url, init) => fetch(url, { ...init, headers: { ...init?.headers, Authorization: `Bearer ${token}` } })
  : undefined;
const out = { version };
const state = (t) => TaskState[t.status.state];
const text = (m) => (m?.parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
let n = 0;
const request = (words, extra = {}) =>
  SendMessageRequest.fromJSON({
    message: { messageId: `m${++n}`, role: "ROLE_USER", parts: [{ text: words }], ...extra.message },
    configuration: extra.configuration,
  });

// A push receiver on a run-time port.
const pushes = [];
const receiver = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    pushes.push({ token: req.headers["x-a2a-notification-token"], auth: req.headers.authorization, body: JSON.parse(body) });
    res.end("ok");
  });
});
await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
const pushUrl = `http://127.0.0.1:${receiver.address().port}/push`;

try {
  const card = await new DefaultAgentCardResolver().resolve(base);
  out.card = { name: card.name, skills: card.skills.map((s) => s.id), streaming: card.capabilities?.streaming,
               interfaces: card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`) };
  const url = card.supportedInterfaces[0].url;
  const client = version === "1.0"
    ? await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default,
        { transports: [new JsonRpcTransportFactory({ fetchImpl })] })).createFromUrl(base)
    : new LegacyJsonRpcTransport({ endpoint: url, fetchImpl });
  out.security = Object.keys(card.securitySchemes ?? {});

  // send: a message answered with a message
  const echo = await client.sendMessage(request("echo hello"));
  out.echo = text(echo);

  // stream: a task with status and artifact chunks
  const events = [];
  for await (const e of client.sendMessageStream(request("count 3"))) {
    const p = e.payload ?? e;
    events.push(p.$case === "statusUpdate" ? `status:${TaskState[p.value.status.state]}`
      : p.$case === "artifactUpdate" ? `artifact:${text(p.value.artifact)}${p.value.lastChunk ? ":last" : ""}`
      : p.$case);
  }
  out.stream = events;

  // a task that asks for input, and resumes with the next message
  const asked = await client.sendMessage(request("ask"));
  out.asked = { state: state(asked), question: text(asked.status.message) };
  const answered = await client.sendMessage(request("Ada", { message: { taskId: asked.id, contextId: asked.contextId } }));
  out.answered = { state: state(answered), reply: text(answered.status.message) };

  // cancel a working task
  const waiting = await client.sendMessage(request("wait 60000", { configuration: { returnImmediately: true, blocking: false } }));
  const cancelled = await client.cancelTask({ id: waiting.id });
  out.cancelled = state(cancelled);
  out.got = state(await client.getTask({ id: waiting.id }));
  try { await client.cancelTask({ id: waiting.id }); } catch (e) { out.cancel_again = e.constructor.name; }

  // resubscribe after a dropped stream
  const abort = new AbortController();
  let taskId;
  try {
    for await (const e of client.sendMessageStream(request("count 8"), { signal: abort.signal })) {
      const p = e.payload ?? e;
      if (p.$case === "task") taskId = p.value.id;
      if (p.$case === "statusUpdate" && !taskId) taskId = p.value.taskId;
      if (taskId) { abort.abort(); }
    }
  } catch { /* the abort */ }
  const again = [];
  for await (const e of client.resubscribeTask({ id: taskId })) {
    const p = e.payload ?? e;
    again.push(p.$case === "statusUpdate" ? `status:${TaskState[p.value.status.state]}` : p.$case);
  }
  out.resubscribed = again;

  // list (1.0 only: 0.3 has no tasks/list)
  if (version === "1.0") {
    const list = await client.listTasks({ pageSize: 50 });
    out.listed = list.tasks.length;
    out.listed_states = [...new Set(list.tasks.map(state))].sort();
  }

  // a push notification to a local receiver
  const pushed = await client.sendMessage(request("count 2", { configuration: {
    returnImmediately: true, blocking: false,
    taskPushNotificationConfig: { url: pushUrl, token: "tok-1", authentication: { scheme: "Bearer", credentials: "cred-1" } } } }));
  for (let i = 0; i < 200 && !pushes.some((p) => JSON.stringify(p.body).includes("COMPLETED") || JSON.stringify(p.body).includes("completed")); i++)
    await new Promise((r) => setTimeout(r, 50));
  out.push = { count: pushes.length, token: pushes[0]?.token, auth: pushes[0]?.auth,
               completed: pushes.some((p) => JSON.stringify(p.body).match(/COMPLETED|"completed"/) != null),
               task: pushed.id };

  // unknown task
  try { await client.getTask({ id: "no-such-task" }); } catch (e) { out.unknown = e.constructor.name; }
} catch (e) {
  out.error = String(e?.stack ?? e);
}
receiver.close();
console.log(JSON.stringify(out));
process.exit(0);

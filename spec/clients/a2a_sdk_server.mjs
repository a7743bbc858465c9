// An agent written with the official A2A SDK (@a2a-js/sdk 1.3.0, Express),
// for luamcp's Lua client (mcp.a2a) to talk to, and for `make bench`:
//   node a2a_sdk_server.mjs [--port N]      (or PORT=N in the environment)
// Listens on 127.0.0.1 at port N (a run-time port when none is given) and
// prints {"port": N}. It speaks A2A 1.0 and, through the SDK's compat
// layer, 0.3 (a card request without an A2A-Version header gets the 0.3
// card), and sends push notifications. The same words as
// spec/fixtures/a2a/agent.lua: "echo X" answers a message, "ask" asks a
// name and greets, "count N" streams N artifact chunks, "wait" works until
// cancelled; and "hold" works (an artifact "1") until "release TASK_ID"
// arrives, then completes. A request with the header X-Drop-Stream has
// its connection cut 300 ms after its first bytes (a dropped stream).
import express from "express";
import { AGENT_CARD_PATH, TaskState, Role } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryPushNotificationStore, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { createLegacyAwarePushNotificationSender } from "@a2a-js/sdk/compat/v0_3/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const text = (m) => (m?.parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const part = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });
const message = (value, taskId = "", contextId = "") => ({
  role: Role.ROLE_AGENT, messageId: crypto.randomUUID(), parts: [part(value)], taskId, contextId,
  extensions: [], metadata: {}, referenceTaskIds: [],
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Executor {
  cancelled = new Set();
  released = new Set();
  cancelTask = async (taskId) => { this.cancelled.add(taskId); };
  async execute(ctx, bus) {
    const words = text(ctx.userMessage);
    const [word, ...rest] = words.split(" ");
    const { taskId, contextId } = ctx;
    const status = (state, msg, final) => bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: {},
      status: { state, timestamp: new Date().toISOString(), message: msg && message(msg, taskId, contextId) } }));
    if (!ctx.task && (word === "echo" || word === "release")) {
      if (word === "release") this.released.add(rest[0]);
      bus.publish(AgentEvent.message(message(word === "echo" ? `echo: ${rest.join(" ")}` : `released ${rest[0]}`, "", contextId)));
      bus.finished();
      return;
    }
    if (!ctx.task) {
      bus.publish(AgentEvent.task({ id: taskId, contextId, artifacts: [], history: [ctx.userMessage], metadata: {},
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined } }));
    }
    if (ctx.task) { // the answer to "ask"
      status(TaskState.TASK_STATE_COMPLETED, `hello, ${words}`);
    } else if (word === "ask") {
      status(TaskState.TASK_STATE_INPUT_REQUIRED, "what is your name?");
    } else if (word === "count") {
      const n = Number(rest[0] ?? 3);
      status(TaskState.TASK_STATE_WORKING, `counting to ${n}`);
      for (let i = 1; i <= n; i++) {
        bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: i > 1, lastChunk: i === n, metadata: {},
          artifact: { artifactId: "numbers", name: "numbers", description: "", parts: [part(String(i))], metadata: {}, extensions: [] } }));
        await sleep(20);
      }
      status(TaskState.TASK_STATE_COMPLETED, `counted to ${n}`);
    } else if (word === "hold") {
      status(TaskState.TASK_STATE_WORKING, "holding");
      const chunk = (value, last) => bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: value !== "1",
        lastChunk: last, metadata: {},
        artifact: { artifactId: "held", name: "held", description: "", parts: [part(value)], metadata: {}, extensions: [] } }));
      chunk("1", false);
      while (!this.released.has(taskId) && !this.cancelled.has(taskId)) await sleep(20);
      chunk("2", true);
      status(TaskState.TASK_STATE_COMPLETED, "released");
    } else if (word === "wait") {
      status(TaskState.TASK_STATE_WORKING, "waiting");
      while (!this.cancelled.has(taskId)) await sleep(20);
      status(TaskState.TASK_STATE_CANCELED);
    } else {
      status(TaskState.TASK_STATE_COMPLETED, `unknown request: ${words}`);
    }
    bus.finished();
  }
}

const argPort = process.argv.indexOf("--port");
const listenPort = Number(argPort > 0 ? process.argv[argPort + 1] : process.env.PORT ?? 0);
const app = express();
app.use((req, res, next) => {
  if (req.headers["x-drop-stream"]) {
    const write = res.write.bind(res);
    let armed = false;
    res.write = (...args) => {
      if (!armed) { armed = true; setTimeout(() => req.socket.destroy(), 300); }
      return write(...args);
    };
  }
  next();
});
const server = app.listen(listenPort, "127.0.0.1", () => {
  const port = server.address().port;
  const card = {
    name: "SDK agent", description: "an agent written with @a2a-js/sdk", version: "1.0.0",
    supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
                          { url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" }],
    provider: { organization: "spec", url: "https://example.com" },
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text"], defaultOutputModes: ["text"],
    skills: [{ id: "echo", name: "Echo", description: "echoes", tags: ["echo"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    documentationUrl: "", signatures: [],
  };
  const pushStore = new InMemoryPushNotificationStore();
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor(), undefined,
    pushStore, createLegacyAwarePushNotificationSender(pushStore));
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat: { enabled: true } }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  console.log(JSON.stringify({ port }));
});

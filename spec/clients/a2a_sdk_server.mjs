// An agent written with the official A2A SDK (@a2a-js/sdk 1.3.0, Express),
// for luamcp's Lua client (mcp.a2a) to talk to, and for `make bench`:
//   node a2a_sdk_server.mjs
// Listens on 127.0.0.1 at a run-time port and prints {"port": N}. The same
// words as spec/fixtures/a2a/agent.lua: "echo X" answers a message, "ask"
// asks a name and greets, "count N" streams N artifact chunks, "wait" works
// until cancelled.
import express from "express";
import { AGENT_CARD_PATH, TaskState, Role } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
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
  cancelTask = async (taskId) => { this.cancelled.add(taskId); };
  async execute(ctx, bus) {
    const words = text(ctx.userMessage);
    const [word, ...rest] = words.split(" ");
    const { taskId, contextId } = ctx;
    const status = (state, msg, final) => bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: {},
      status: { state, timestamp: new Date().toISOString(), message: msg && message(msg, taskId, contextId) } }));
    if (!ctx.task && word === "echo") {
      bus.publish(AgentEvent.message(message(`echo: ${rest.join(" ")}`, "", contextId)));
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

const app = express();
const server = app.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const card = {
    name: "SDK agent", description: "an agent written with @a2a-js/sdk", version: "1.0.0",
    supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: { organization: "spec", url: "https://example.com" },
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text"], defaultOutputModes: ["text"],
    skills: [{ id: "echo", name: "Echo", description: "echoes", tags: ["echo"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    documentationUrl: "", signatures: [],
  };
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  console.log(JSON.stringify({ port }));
});

// An A2A agent written with the official A2A SDK (@a2a-js/sdk, Express):
// answers any text in capitals.
//
//   npm install            (in scripts/a2a: @a2a-js/sdk and express, pinned)
//   node shouter.mjs 8102
import express from "express";
import { AGENT_CARD_PATH, Role } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const port = Number(process.argv[2] ?? 8102);
const card = {
  name: "Shouter", description: "Answers in capitals", version: "1.0.0",
  supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
  provider: { organization: "luamcp examples", url: "https://github.com/luamcp" },
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
  skills: [{ id: "shout", name: "Shout", description: "the text in capitals", tags: ["text"], examples: ["hello"],
             inputModes: [], outputModes: [], securityRequirements: [] }],
  documentationUrl: "", signatures: [],
};

class Shouter {
  cancelTask = async () => {};
  async execute(ctx, bus) {
    const text = ctx.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
    bus.publish(AgentEvent.message({
      role: Role.ROLE_AGENT, messageId: crypto.randomUUID(), taskId: "", contextId: ctx.contextId,
      parts: [{ content: { $case: "text", value: text.toUpperCase() }, metadata: undefined, filename: "", mediaType: "text/plain" }],
      extensions: [], metadata: {}, referenceTaskIds: [],
    }));
    bus.finished();
  }
}

const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Shouter());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, "127.0.0.1", () => console.log(JSON.stringify({ port })));

// Benchmark peer: an A2A agent on the official A2A SDK (@a2a-js/sdk 1.3.0)
// with its Express server (DefaultRequestHandler, InMemoryTaskStore,
// jsonRpcHandler), answering SendMessage "add A B" with a message whose
// text is the sum, as bench/servers/a2a/main.lua does.
//
//   node a2a-sdk.mjs [--port N] [--host 127.0.0.1]
// Prints "listening <host>:<port>" on stderr once bound.
import { nm, arg } from './nm.mjs';

const { default: express } = await import(nm('express/index.js'));
const { AGENT_CARD_PATH, Role } = await import(nm('@a2a-js/sdk/dist/index.js'));
const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } = await import(nm('@a2a-js/sdk/dist/server/index.js'));
const { agentCardHandler, jsonRpcHandler, UserBuilder } = await import(nm('@a2a-js/sdk/dist/server/express/index.js'));

const host = arg('--host', '127.0.0.1');
const port = Number(arg('--port', '3000'));

class Adder {
  cancelTask = async () => {};
  async execute(ctx, bus) {
    const words = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    const [, a, b] = words.match(/^add (-?\d+) (-?\d+)$/) ?? [];
    bus.publish(AgentEvent.message({
      role: Role.ROLE_AGENT, messageId: crypto.randomUUID(), taskId: '', contextId: ctx.contextId,
      parts: [{ content: { $case: 'text', value: String(Number(a) + Number(b)) }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
      extensions: [], metadata: {}, referenceTaskIds: [],
    }));
    bus.finished();
  }
}

const card = {
  name: 'Adder', description: 'adds two numbers', version: '1.0.0',
  supportedInterfaces: [{ url: `http://${host}:${port}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text'], defaultOutputModes: ['text'],
  skills: [{ id: 'add', name: 'Add', description: 'add A B', tags: ['math'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  documentationUrl: '', signatures: [],
};
const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Adder());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
app.use('/a2a', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, host, () => process.stderr.write(`listening ${host}:${port}\n`));

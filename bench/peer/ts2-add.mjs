// The `add` tool on the official TypeScript SDK v2, written as the v2
// documentation shows (McpServer + registerTool + z.object): one factory
// for the v2 peers, stdio and both HTTP set-ups.
import { nm } from './nm.mjs';

const { McpServer } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { z } = await import(nm('zod/index.js'));

export function makeServer() {
  const server = new McpServer({ name: 'bench-ts2', version: '1.0.0' });
  server.registerTool(
    'add',
    {
      description: 'Add two integers',
      inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
    },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
  );
  return server;
}

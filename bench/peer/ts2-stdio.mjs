// Benchmark peer: the `add` tool on the official TypeScript SDK v2
// (@modelcontextprotocol/server, pinned in spec/package.json), over stdio.
// Written as the v2 documentation shows: McpServer + registerTool + z.object.
import { nm } from './nm.mjs';

const { McpServer } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { StdioServerTransport } = await import(nm('@modelcontextprotocol/server/dist/stdio.mjs'));
const { z } = await import(nm('zod/index.js'));

const server = new McpServer({ name: 'bench-ts2', version: '1.0.0' });
server.registerTool(
  'add',
  {
    description: 'Add two integers',
    inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
  },
  async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
);
await server.connect(new StdioServerTransport());

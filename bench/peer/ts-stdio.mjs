// Benchmark peer: the `add` tool on the official TypeScript SDK v1
// (@modelcontextprotocol/sdk, pinned in spec/package.json), over stdio.
// Written as the SDK's documentation shows: McpServer + registerTool + zod.
import { nm } from './nm.mjs';

const { McpServer } = await import(nm('@modelcontextprotocol/sdk/dist/esm/server/mcp.js'));
const { StdioServerTransport } = await import(nm('@modelcontextprotocol/sdk/dist/esm/server/stdio.js'));
const { z } = await import(nm('zod/index.js'));

const server = new McpServer({ name: 'bench-ts', version: '1.0.0' });
server.registerTool(
  'add',
  {
    description: 'Add two integers',
    inputSchema: { a: z.number().int(), b: z.number().int() },
  },
  async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
);
await server.connect(new StdioServerTransport());

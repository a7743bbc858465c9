// Benchmark peer for mcp.http: a `fetch` tool on the official TypeScript
// SDK v2 over stdio that GETs ORIGIN_URL with Node 22's fetch and returns
// the body, as bench/servers/fetch does with mcp.http.
import { nm } from './nm.mjs';

const { McpServer } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { StdioServerTransport } = await import(nm('@modelcontextprotocol/server/dist/stdio.mjs'));
const { z } = await import(nm('zod/index.js'));

const url = process.env.ORIGIN_URL;
if (!url) throw new Error('set ORIGIN_URL');
const server = new McpServer({ name: 'bench-ts2-fetch', version: '1.0.0' });
server.registerTool(
  'fetch',
  { description: 'GET the origin', inputSchema: z.object({}).passthrough() },
  async () => {
    const res = await fetch(url);
    return { content: [{ type: 'text', text: await res.text() }] };
  },
);
await server.connect(new StdioServerTransport());

// The `add` tool on the official TypeScript SDK v2, written as the v2
// documentation shows (McpServer + registerTool + z.object): one factory
// for the v2 peers, stdio and both HTTP set-ups.
import { nm } from './nm.mjs';

const { McpServer } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { z } = await import(nm('zod/index.js'));

// cpuMs > 0 (the scale-out bench): burn that much of the process's CPU time
// before adding, as bench/servers/cpu does in Lua.
function burn(cpuMs) {
  const start = process.cpuUsage();
  const limit = start.user + start.system + cpuMs * 1000;
  let s = 0;
  for (;;) {
    for (let i = 1; i <= 200; i++) s += i % 7;
    const now = process.cpuUsage();
    if (now.user + now.system >= limit) return s - s;
  }
}

export function makeServer(cpuMs = 0) {
  const server = new McpServer({ name: 'bench-ts2', version: '1.0.0' });
  server.registerTool(
    'add',
    {
      description: 'Add two integers',
      inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
    },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b + (cpuMs > 0 ? burn(cpuMs) : 0)) }] }),
  );
  return server;
}

// Benchmark peer: the `add` tool on the official TypeScript SDK v1
// (@modelcontextprotocol/sdk), over Streamable HTTP, stateful sessions
// (one McpServer + StreamableHTTPServerTransport per session, as in the SDK's
// own examples), JSON responses (enableJsonResponse: true).
//
//   node ts-http.mjs [--port N] [--host 127.0.0.1] [--sse]
// Serves POST/GET/DELETE on /mcp. --sse turns JSON responses off (SSE streams).
// Prints "listening <host>:<port>" on stderr once bound.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { nm, arg } from './nm.mjs';

const { McpServer } = await import(nm('@modelcontextprotocol/sdk/dist/esm/server/mcp.js'));
const { StreamableHTTPServerTransport } = await import(nm('@modelcontextprotocol/sdk/dist/esm/server/streamableHttp.js'));
const { isInitializeRequest } = await import(nm('@modelcontextprotocol/sdk/dist/esm/types.js'));
const { z } = await import(nm('zod/index.js'));

const host = arg('--host', '127.0.0.1');
const port = Number(arg('--port', '3000'));
const jsonResponse = !process.argv.includes('--sse');

function makeServer() {
  const server = new McpServer({ name: 'bench-ts', version: '1.0.0' });
  server.registerTool(
    'add',
    {
      description: 'Add two integers',
      inputSchema: { a: z.number().int(), b: z.number().int() },
    },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
  );
  return server;
}

const transports = new Map(); // Mcp-Session-Id -> transport

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function jsonError(res, status, code, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

const httpServer = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://x');
    if (url.pathname !== '/mcp') return jsonError(res, 404, -32000, 'Not found');
    const sid = req.headers['mcp-session-id'];
    if (req.method === 'POST') {
      let body;
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        return jsonError(res, 400, -32700, 'Parse error');
      }
      let transport = sid ? transports.get(sid) : undefined;
      if (!transport) {
        if (sid || !isInitializeRequest(body)) {
          return jsonError(res, sid ? 404 : 400, -32000, sid ? 'Session not found' : 'No valid session ID provided');
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: jsonResponse,
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => {
          if (transport.sessionId) transports.delete(transport.sessionId);
        };
        await makeServer().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    } else if (req.method === 'GET' || req.method === 'DELETE') {
      const transport = sid && transports.get(sid);
      if (!transport) return jsonError(res, sid ? 404 : 400, -32000, 'Invalid or missing session ID');
      await transport.handleRequest(req, res);
    } else {
      res.writeHead(405, { Allow: 'GET, POST, DELETE' }).end();
    }
  } catch (e) {
    if (!res.headersSent) jsonError(res, 500, -32603, 'Internal error');
    process.stderr.write(`ts-http: ${e && e.stack}\n`);
  }
});
httpServer.keepAliveTimeout = 60_000;
httpServer.headersTimeout = 65_000;
httpServer.listen(port, host, () => {
  const a = httpServer.address();
  process.stderr.write(`listening ${a.address}:${a.port}\n`);
});
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => process.exit(0));

// Benchmark peer: the `add` tool on the official TypeScript SDK v2 serving
// the 2026-07-28 era statelessly over Streamable HTTP, as the SDK documents
// it: createMcpHandler (a fresh McpServer per request from one factory,
// legacy requests rejected) mounted on node:http with toNodeHandler from
// @modelcontextprotocol/node. Responses are JSON unless the handler emits
// something before its result (responseMode 'auto', the default).
//
//   node ts2-http-modern.mjs [--port N] [--host 127.0.0.1] [--cpu-ms N]
// --cpu-ms: the tool first burns N ms of CPU (bench/scale.sh).
// Serves /mcp. Prints "listening <host>:<port>" on stderr once bound.
import http from 'node:http';
import { nm, arg } from './nm.mjs';
import { makeServer } from './ts2-add.mjs';

const { createMcpHandler } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { toNodeHandler } = await import(nm('@modelcontextprotocol/node/dist/index.mjs'));

const host = arg('--host', '127.0.0.1');
const port = Number(arg('--port', '3000'));

const cpuMs = Number(arg('--cpu-ms', '0'));
const handler = toNodeHandler(createMcpHandler(() => makeServer(cpuMs), { legacy: 'reject' }));
const httpServer = http.createServer((req, res) => {
  if (new URL(req.url, 'http://x').pathname !== '/mcp') return res.writeHead(404).end();
  handler(req, res).catch((e) => {
    process.stderr.write(`ts2-http-modern: ${e && e.stack}\n`);
    if (!res.headersSent) res.writeHead(500).end();
  });
});
httpServer.keepAliveTimeout = 60_000;
httpServer.headersTimeout = 65_000;
httpServer.listen(port, host, () => {
  const a = httpServer.address();
  process.stderr.write(`listening ${a.address}:${a.port}\n`);
});
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => process.exit(0));

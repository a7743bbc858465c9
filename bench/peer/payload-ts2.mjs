// The payload sweep's peer on the TypeScript SDK v2 (@modelcontextprotocol/server),
// over stdio: the tools and resource of bench/servers/payload (payload-data.mjs).
import { nm } from './nm.mjs';
import { registerPayload } from './payload-data.mjs';

const { McpServer, ResourceTemplate } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { StdioServerTransport } = await import(nm('@modelcontextprotocol/server/dist/stdio.mjs'));
const { z } = await import(nm('zod/index.js'));

const server = new McpServer({ name: 'bench-payload-ts2', version: '1.0.0' });
registerPayload(server, z, (shape) => z.object(shape), ResourceTemplate);
await server.connect(new StdioServerTransport());

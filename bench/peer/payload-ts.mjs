// The payload sweep's peer on the TypeScript SDK v1 (@modelcontextprotocol/sdk),
// over stdio: the tools and resource of bench/servers/payload (payload-data.mjs).
import { nm } from './nm.mjs';
import { registerPayload } from './payload-data.mjs';

const { McpServer, ResourceTemplate } = await import(nm('@modelcontextprotocol/sdk/dist/esm/server/mcp.js'));
const { StdioServerTransport } = await import(nm('@modelcontextprotocol/sdk/dist/esm/server/stdio.js'));
const { z } = await import(nm('zod/index.js'));

const server = new McpServer({ name: 'bench-payload-ts', version: '1.0.0' });
registerPayload(server, z, (shape) => shape, ResourceTemplate);
await server.connect(new StdioServerTransport());

// Benchmark peer: the `add` tool on the official TypeScript SDK v2
// (@modelcontextprotocol/server, pinned in spec/package.json), over stdio
// (the tool: ts2-add.mjs).
import { nm } from './nm.mjs';
import { makeServer } from './ts2-add.mjs';

const { StdioServerTransport } = await import(nm('@modelcontextprotocol/server/dist/stdio.mjs'));

await makeServer().connect(new StdioServerTransport());

// Benchmark peer for mcp.sqlite: the `add` tool on the official TypeScript
// SDK v2 over stdio, through node:sqlite (Node 22's built-in SQLite,
// synchronous), as bench/servers/sqlite does: insert the two integers as a
// row, read it back by its id, answer the sum.
import { nm } from './nm.mjs';
import { DatabaseSync } from 'node:sqlite';

const { McpServer } = await import(nm('@modelcontextprotocol/server/dist/index.mjs'));
const { StdioServerTransport } = await import(nm('@modelcontextprotocol/server/dist/stdio.mjs'));
const { z } = await import(nm('zod/index.js'));

// In memory, or a file in WAL mode with synchronous=NORMAL (bench/sqlite.lua).
const file = process.env.BENCH_SQLITE_FILE;
const db = new DatabaseSync(file || ':memory:');
if (file) db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL');
db.exec('CREATE TABLE pairs(id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER NOT NULL)');
const insert = db.prepare('INSERT INTO pairs(a, b) VALUES (?, ?)');
const select = db.prepare('SELECT a + b AS sum FROM pairs WHERE id = ?');

const server = new McpServer({ name: 'bench-ts2-sqlite', version: '1.0.0' });
server.registerTool(
  'add',
  {
    description: 'Add two integers, through a SQLite row',
    inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
  },
  async ({ a, b }) => {
    const { lastInsertRowid } = insert.run(a, b);
    return { content: [{ type: 'text', text: String(select.get(lastInsertRowid).sum) }] };
  },
);
await server.connect(new StdioServerTransport());

// The payload sweep's payloads, built by the same rules as
// bench/servers/payload/payload.lua (and checked by bench/loadclient.c),
// made once per size and kept.
const line = (s, fill) => {
  const pad = 63 - Buffer.byteLength(s);
  return s + fill.repeat(pad) + '\n';
};
const BLOCK = line('The quick brown fox said "hello" to the lazy dog at the café', '.') +
  line('    return value + 1 -- plain code, nothing to escape here', ' ');
const BLOCK_BYTES = Buffer.from(BLOCK);
if (BLOCK_BYTES.length !== 128) throw new Error('block is not 128 bytes');

const texts = new Map(), blobs = new Map(), tables = new Map();

export function textOf(n) {
  let t = texts.get(n);
  if (t === undefined) {
    const b = Buffer.alloc(n);
    for (let o = 0; o < n; o += 128) BLOCK_BYTES.copy(b, o, 0, Math.min(128, n - o));
    t = b.toString('utf8');
    texts.set(n, t);
  }
  return t;
}

export function blobOf(n) {
  let b = blobs.get(n);
  if (b === undefined) {
    b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = Math.imul(i, 2654435761 | 0) >>> 24; // bits 24..31 of i * 2654435761
    blobs.set(n, b);
  }
  return b;
}

export function tableOf(n) {
  let t = tables.get(n);
  if (t === undefined) {
    t = {};
    const m = Math.max(1, Math.floor(n / 16));
    for (let i = 1; i <= m; i++) {
      const key = 'k' + String(i).padStart(6, '0');
      const kind = i % 4;
      t[key] = kind === 0 ? i : kind === 1 ? 'v' + i : kind === 2 ? i % 8 === 2 : i + 0.5;
    }
    tables.set(n, t);
  }
  return t;
}

// The four things served, on either SDK's McpServer (z: that SDK's zod;
// objectSchema: how the SDK wants an inputSchema, a raw shape for v1 or
// z.object for v2).
export function registerPayload(server, z, objectSchema, ResourceTemplate) {
  const size = objectSchema({ bytes: z.number().int().min(0).max(16777216) });
  server.registerTool('text', { description: 'Return `bytes` bytes of text', inputSchema: size },
    async ({ bytes }) => ({ content: [{ type: 'text', text: textOf(bytes) }] }));
  server.registerTool('echo', { description: 'Return the text it was given',
    inputSchema: objectSchema({ text: z.string().max(16777216) }) },
  async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerTool('structured', { description: 'Return an object of many small fields', inputSchema: size },
    async ({ bytes }) => {
      const t = tableOf(bytes);
      return { content: [{ type: 'text', text: JSON.stringify(t) }], structuredContent: t };
    });
  server.registerResource('blob', new ResourceTemplate('blob://{bytes}', { list: undefined }),
    { mimeType: 'application/octet-stream' },
    async (uri, { bytes }) => ({
      contents: [{ uri: uri.href, mimeType: 'application/octet-stream', blob: blobOf(Number(bytes)).toString('base64') }],
    }));
}

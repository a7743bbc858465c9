// The official TypeScript SDK clients, v1 (@modelcontextprotocol/sdk) and v2
// (@modelcontextprotocol/client), over Streamable HTTP at URL: in
// unix_socket_spec.lua that is nginx, which proxies to luamcp on a Unix
// socket. Each lists the tools and calls the demo's add. Prints one JSON
// object: { v1: {tools, sum, protocol}, v2: {...} }.
//
// Usage: node sdk_unix_proxy.mjs URL
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as HttpV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from "@modelcontextprotocol/client";

const [url] = process.argv.slice(2);

async function drive(Client, Transport) {
  const client = new Client({ name: "unix-proxy", version: "1.0.0" });
  const transport = new Transport(new URL(url));
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: "add", arguments: { a: 40, b: 2 } });
  const out = {
    tools: tools.map((t) => t.name).sort(),
    sum: result.content?.[0]?.text,
    protocol: transport.protocolVersion ?? null,
  };
  await client.close();
  return out;
}

const out = {};
try {
  out.v1 = await drive(ClientV1, HttpV1);
  out.v2 = await drive(ClientV2, HttpV2);
} catch (e) {
  out.error = String(e?.stack ?? e);
}
console.log(JSON.stringify(out));
process.exit(0);

// The official TypeScript SDK client against the example server over stdio.
// Prints one JSON object with what each step returned; sdk_client_spec.lua
// checks it. Usage: node sdk_stdio_demo.mjs LUAMCP SCRIPTS
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { walkDemo } from "./demo_walk.mjs";

const [luamcp, scripts] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: luamcp, args: ["run", scripts], stderr: "pipe" });
const client = new Client({ name: "sdk-spec", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  out.serverVersion = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = client.getInstructions();
  await walkDemo(client, out);
  await client.ping();
  out.ok = true;
} catch (e) {
  out.error = String(e && e.stack || e);
} finally {
  await client.close();
}
process.stdout.write(JSON.stringify(out) + "\n");

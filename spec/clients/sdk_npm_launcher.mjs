// The official TypeScript SDK client against a server started the way an
// MCP client configuration starts one: a command, its args, an environment
// and a folder (the npm package's bin, npx, or a launcher run by Node under
// qemu or wine). Lists the tools and calls add; prints one JSON object that
// spec/release_npm_spec.lua checks. Usage: node sdk_npm_launcher.mjs JSON
// with JSON = {"command": ..., "args": [...], "env": {...}, "cwd": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const how = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({
  command: how.command,
  args: how.args,
  env: { ...process.env, ...(how.env || {}) },
  cwd: how.cwd,
  stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (d) => (stderr += d));
const client = new Client({ name: "npm-spec", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  out.serverVersion = client.getServerVersion();
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.add = await client.callTool({ name: "add", arguments: { a: 20, b: 22 } });
  out.ok = true;
} catch (e) {
  out.error = String((e && e.stack) || e);
} finally {
  await client.close();
}
out.stderr = stderr;
process.stdout.write(JSON.stringify(out) + "\n");

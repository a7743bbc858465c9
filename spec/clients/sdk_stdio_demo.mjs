// The official TypeScript SDK client against the example server over stdio.
// Prints one JSON object with what each step returned; sdk_client_spec.lua
// checks it. Usage: node sdk_stdio_demo.mjs LUAMCP SCRIPTS
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [luamcp, scripts] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: luamcp, args: ["run", scripts], stderr: "pipe" });
const client = new Client({ name: "sdk-spec", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  out.serverVersion = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = client.getInstructions();
  out.tools = await client.listTools();
  out.add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  out.dice = await client.callTool({ name: "roll_dice", arguments: { count: 2, sides: 6 } });
  const progress = [];
  out.countdown = await client.callTool({ name: "countdown", arguments: { n: 3 } }, undefined, {
    onprogress: (p) => progress.push(p),
  });
  out.progress = progress;
  out.resources = await client.listResources();
  out.index = await client.readResource({ uri: "notes://index" });
  out.templates = await client.listResourceTemplates();
  out.welcome = await client.readResource({ uri: "notes://welcome" });
  out.prompts = await client.listPrompts();
  out.prompt = await client.getPrompt({ name: "summarize_note", arguments: { name: "welcome" } });
  out.complete = await client.complete({
    ref: { type: "ref/prompt", name: "summarize_note" },
    argument: { name: "name", value: "wel" },
  });
  try {
    await client.readResource({ uri: "notes://missing" });
  } catch (e) {
    out.missing = { code: e.code, message: e.message };
  }
  await client.ping();
  out.ok = true;
} catch (e) {
  out.error = String(e && e.stack || e);
} finally {
  await client.close();
}
process.stdout.write(JSON.stringify(out) + "\n");

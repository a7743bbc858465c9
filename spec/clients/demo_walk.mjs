// The walk through scripts/demo's primitives that every SDK client spec
// makes, whatever carries it (stdio, HTTP+SSE): each step's answer goes
// into out under the step's name, for the spec to check. Between the
// calls and the lists, between() runs (e.g. a setLoggingLevel).
export async function walkDemo(client, out, between = async () => {}) {
  out.tools = await client.listTools();
  out.add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  out.dice = await client.callTool({ name: "roll_dice", arguments: { count: 2, sides: 6 } });
  await between();
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
}

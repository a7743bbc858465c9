// Debian's Chromium, headless, opening ws_page.html (served here on
// 127.0.0.1, so the page's Origin is a loopback one) with ?ws=URL: the
// page speaks MCP through the browser's own WebSocket. Driven over the
// DevTools protocol with Node 22's WebSocket (no npm package). Prints one
// JSON object: what the page wrote, or { error }.
//
// Usage: node chromium_ws.mjs WS_URL
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [wsUrl] = process.argv.slice(2);
const page = readFileSync(new URL("./ws_page.html", import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let chrome, profile, server;

async function main() {
  server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(page);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const pageUrl = `http://127.0.0.1:${server.address().port}/?ws=${encodeURIComponent(wsUrl)}`;
  profile = mkdtempSync(join(tmpdir(), "luamcp-chromium-"));
  chrome = spawn("chromium", ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
    `--user-data-dir=${profile}`, "--remote-debugging-port=0", "about:blank"], { stdio: "ignore" });
  const portFile = join(profile, "DevToolsActivePort");
  for (let i = 0; i < 1200 && !existsSync(portFile); i++) await sleep(100);
  const [port, path] = readFileSync(portFile, "utf8").split("\n");
  const cdp = new WebSocket(`ws://127.0.0.1:${port}${path}`);
  await new Promise((resolve, reject) => { cdp.onopen = resolve; cdp.onerror = () => reject(new Error("no DevTools")); });
  let next = 1;
  const pending = new Map();
  cdp.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.id && pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); }
  };
  const call = (method, params = {}, sessionId) => new Promise((resolve) => {
    const id = next++;
    pending.set(id, resolve);
    cdp.send(JSON.stringify({ id, method, params, sessionId }));
  });
  const { result: { targetId } } = await call("Target.createTarget", { url: pageUrl });
  const { result: { sessionId } } = await call("Target.attachToTarget", { targetId, flatten: true });
  for (let i = 0; i < 1200; i++) { // up to 2 minutes on a loaded machine
    const r = await call("Runtime.evaluate", { expression: "document.title === 'done' ? document.getElementById('out').textContent : ''",
                                               returnByValue: true }, sessionId);
    const text = r.result?.result?.value;
    if (text) return JSON.parse(text);
    await sleep(100);
  }
  return { error: "the page did not finish" };
}

let out;
try {
  out = await main();
} catch (e) {
  out = { error: String(e?.stack ?? e) };
}
chrome?.kill("SIGKILL");
server?.close();
if (profile) { await sleep(200); rmSync(profile, { recursive: true, force: true }); }
console.log(JSON.stringify(out));
process.exit(0);

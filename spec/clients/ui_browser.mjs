// Drives luamcp's inspector page (runtime/ui) in Debian's Chromium,
// headless, through puppeteer-core, the way a user does: clicks, keys,
// forms. spec/ui_spec.lua starts luamcp with --ui, gives this the address
// the server printed, and checks the JSON object printed as the last line.
// Screenshots of each view go to ARTIFACTS/NAME.png.
//
// Usage: node ui_browser.mjs CHROMIUM URL ARTIFACTS SCENARIO [JSON-ARGS]
//   SCENARIO dev:     the tool form (add), pairing, validation, elicitation
//                     (delete_note), reload (a tool added to ARGS.dir's
//                     math.lua), failed reload, filters, replay, a page
//                     refresh keeping the history, keyboard-only use
//   SCENARIO inspect: the lists, one tool called through its form
//                     (ARGS.tool with ARGS.args), ARGS.sampling answered
import puppeteer from "puppeteer-core";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";

const [chromium, url, artifacts, scenario, argsJSON] = process.argv.slice(2);
const args = argsJSON ? JSON.parse(argsJSON) : {};
const WAIT = 30000;
const out = { scenario, shots: [], steps: [] };
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "luamcp-ui-chromium-"));
let browser;

// Whatever happens, the browser is killed and its profile removed: a hung
// test must not leave a Chromium behind.
const hardStop = setTimeout(() => finish(new Error("the scenario took longer than 240 s")), 240000);
async function finish(err) {
  clearTimeout(hardStop);
  if (err) { out.error = String(err && err.stack || err); }
  try { if (browser) { const p = browser.process(); await Promise.race([browser.close(), new Promise((r) => setTimeout(r, 5000))]); if (p && p.exitCode === null) p.kill("SIGKILL"); } } catch { /* already gone */ }
  fs.rmSync(profile, { recursive: true, force: true });
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(err ? 1 : 0);
}

async function shot(page, name) {
  const file = path.join(artifacts, name + ".png");
  await page.screenshot({ path: file });
  out.shots.push(file);
}
// A row of the virtual list is in the DOM only while visible: scroll to the
// newest rows while waiting for one.
async function waitRow(page, sel, pred = "") {
  await page.waitForFunction((sel, pred) => {
    const list = document.getElementById("tl-list");
    list.scrollTop = list.scrollHeight;
    const found = [...list.querySelectorAll(sel)];
    return found.some((r) => !pred || new RegExp(pred).test(r.textContent));
  }, { timeout: WAIT, polling: 200 }, sel, pred);
}
const texts = (page, sel) => page.$$eval(sel, (xs) => xs.map((x) => x.textContent));
const rows = (page) => page.$$eval("#tl-list .tl-row", (xs) => xs.map((x) => ({ ...x.dataset, text: x.textContent })));

async function callToolInForm(page, name, values) {
  await page.click(`.item[data-tool="${name}"]`);
  await page.waitForSelector(`#tool-form[data-tool="${name}"]`, { timeout: WAIT });
  for (const [k, v] of Object.entries(values)) {
    const sel = `#tool-form [data-path="/${k}"]`;
    await page.$eval(sel, (e) => { e.value = ""; });
    await page.type(sel, String(v));
  }
  await page.click("#tool-call");
  await page.waitForSelector("#tool-result[data-state=done], #tool-result[data-state=error], #tool-result[data-state=invalid]", { timeout: WAIT });
  return page.$eval("#tool-result", (e) => ({ state: e.dataset.state, text: e.textContent }));
}

async function dev(page) {
  // The tool form: add 2 + 3, the response paired with its request.
  out.toolNames = await page.$$eval(".item[data-tool]", (xs) => xs.map((x) => x.dataset.tool));
  await shot(page, "timeline");
  out.add = await callToolInForm(page, "add", { a: 2, b: 3 });
  await waitRow(page, '.tl-row[data-method="tools/call"][data-tool="add"][data-paired="true"]');
  out.addRow = (await rows(page)).find((r) => r.method === "tools/call" && r.tool === "add" && r.conn === "ui");
  await shot(page, "tool-form");

  // Checked in the page before sending: a missing b is shown next to b.
  await page.$eval('#tool-form [data-path="/b"]', (e) => { e.value = ""; });
  await page.click("#tool-call");
  await page.waitForSelector('#tool-result[data-state=invalid]', { timeout: WAIT });
  out.invalid = await page.$eval('.field-error[data-error-for="/b"]', (e) => e.textContent);
  out.callsAfterInvalid = (await rows(page)).filter((r) => r.tool === "add" && r.conn === "ui").length;

  // An elicitation answered in the page: delete_note asks to confirm.
  await page.click('.item[data-tool="delete_note"]');
  await page.waitForSelector('#tool-form[data-tool="delete_note"]', { timeout: WAIT });
  await page.type('#tool-form [data-path="/name"]', "welcome");
  await page.click("#tool-call");
  await page.waitForSelector('.question[data-kind=elicitation]', { timeout: WAIT });
  out.elicitationMessage = await page.$eval(".question .q-message", (e) => e.textContent);
  await page.click('.question [data-path="/confirm"]');
  await shot(page, "elicitation");
  await page.click("#q-accept");
  await page.waitForSelector("#tool-result[data-state=done]", { timeout: WAIT });
  out.deleted = await page.$eval("#tool-result", (e) => e.textContent);

  // Replay the add call: same params, a new id.
  await page.$eval("#filter-tool", (e) => { e.value = "add"; e.dispatchEvent(new Event("input")); });
  await page.waitForFunction(() => [...document.querySelectorAll("#tl-list .tl-row")].every((r) => r.dataset.tool === "add"), { timeout: WAIT });
  await page.click('#tl-list .tl-row[data-tool="add"][data-conn="ui"]');
  await page.waitForSelector("#replay:not([hidden])", { timeout: WAIT });
  const before = (await rows(page)).filter((r) => r.tool === "add" && r.conn === "ui").length;
  await page.click("#replay");
  await page.waitForFunction((n) => [...document.querySelectorAll('#tl-list .tl-row[data-tool="add"][data-conn="ui"][data-paired="true"]')].length > n, { timeout: WAIT }, before);
  const adds = (await rows(page)).filter((r) => r.tool === "add" && r.conn === "ui");
  out.replayIds = adds.map((r) => r.id);
  out.replayTexts = adds.map((r) => r.text);
  await page.$eval("#filter-tool", (e) => { e.value = ""; e.dispatchEvent(new Event("input")); });

  // A saved file: the reload entry lists the tool added.
  const file = path.join(args.dir, "math.lua");
  const original = fs.readFileSync(file, "utf8");
  fs.writeFileSync(file, original + '\nmcp.tool { name = "shout", description = "Say it louder", args = { text = "string" }, handler = function(a) return a.text:upper() end }\n');
  await waitRow(page, '.tl-row[data-kind=reload][data-ok="true"]', "shout");
  out.reload = (await rows(page)).filter((r) => r.kind === "reload").map((r) => r.text);
  await page.waitForSelector('.item[data-tool="shout"]', { timeout: WAIT });
  await page.click('#tl-list .tl-row[data-kind=reload][data-ok="true"]');
  out.reloadDetail = await page.$eval("#detail-body", (e) => e.textContent);
  await shot(page, "reload");

  // A failed reload: file and line, still serving.
  fs.writeFileSync(file, original + "\nthis is not lua\n");
  await waitRow(page, '.tl-row[data-kind=reload][data-ok="false"]');
  out.reloadFailed = (await rows(page)).filter((r) => r.kind === "reload" && r.ok === "false").map((r) => r.text);
  await page.click('#tl-list .tl-row[data-kind=reload][data-ok="false"]');
  await shot(page, "reload-failed");

  // Filters: by method and by tool.
  await page.type("#filter-method", "tools/call");
  await page.type("#filter-tool", "add");
  await page.waitForFunction(() => { const r = [...document.querySelectorAll("#tl-list .tl-row")]; return r.length > 0 && r.every((x) => x.dataset.method === "tools/call" && x.dataset.tool === "add"); }, { timeout: WAIT });
  out.filtered = (await rows(page)).map((r) => ({ method: r.method, tool: r.tool, conn: r.conn }));
  out.count = await page.$eval("#count", (e) => e.textContent);
  await shot(page, "filter");
  out.conns = await page.$$eval("#filter-conn option", (xs) => xs.map((x) => x.value).filter(Boolean));

  // A page refresh keeps the history (replayed by /events).
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: WAIT });
  await waitRow(page, '.tl-row[data-tool="add"][data-paired="true"]');
  out.afterRefresh = { rows: await page.$eval("#count", (e) => e.textContent) };

  // Keyboard only: Tab to the add tool, Enter, type, Enter.
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  let reached = false;
  for (let i = 0; i < 40 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = await page.evaluate(() => document.activeElement && document.activeElement.dataset.tool === "add");
  }
  out.keyboardReached = reached;
  if (reached) {
    await page.keyboard.press("Enter");
    await page.waitForSelector('#tool-form[data-tool="add"]', { timeout: WAIT });
    await page.keyboard.type("40"); // the form's first field (a) has the focus
    await page.keyboard.press("Tab"); // to b
    await page.keyboard.type("2");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#tool-result[data-state=done]", { timeout: WAIT });
    out.keyboardResult = await page.$eval("#tool-result", (e) => e.textContent);
    // "/" focuses the search, arrows move in the list
    await page.keyboard.press("Escape");
    await page.focus("#tl-list");
    await page.keyboard.press("End");
    await page.keyboard.press("ArrowUp");
    out.keyboardSelected = await page.$eval("#tl-list", (e) => e.getAttribute("aria-activedescendant"));
    await page.evaluate(() => document.activeElement.blur());
    await page.keyboard.press("/");
    out.slashFocus = await page.evaluate(() => document.activeElement.id);
    await shot(page, "keyboard");
  }
}

async function inspect(page) {
  await page.waitForSelector(".item[data-tool]", { timeout: WAIT });
  out.toolNames = await page.$$eval(".item[data-tool]", (xs) => xs.map((x) => x.dataset.tool));
  out.resources = await page.$$eval(".item[data-resource], .item[data-template]", (xs) => xs.map((x) => x.dataset.resource || x.dataset.template));
  out.prompts = await page.$$eval(".item[data-prompt]", (xs) => xs.map((x) => x.dataset.prompt));
  await shot(page, `inspect-${args.name}-lists`);
  await page.click(`.item[data-tool="${args.tool}"]`);
  await page.waitForSelector(`#tool-form[data-tool="${args.tool}"]`, { timeout: WAIT });
  for (const [k, v] of Object.entries(args.args || {})) await page.type(`#tool-form [data-path="/${k}"]`, String(v));
  await page.click("#tool-call");
  if (args.sampling) {
    await page.waitForSelector(".question[data-kind=sampling]", { timeout: WAIT });
    out.samplingShown = await page.$eval(".question", (e) => e.textContent);
    await page.type("#q-text", args.sampling);
    await shot(page, `inspect-${args.name}-sampling`);
    await page.click("#q-accept");
  }
  await page.waitForSelector("#tool-result[data-state=done], #tool-result[data-state=error]", { timeout: WAIT * 2 });
  out.result = await page.$eval("#tool-result", (e) => ({ state: e.dataset.state, text: e.textContent }));
  await waitRow(page, '.tl-row[data-method="tools/call"][data-paired="true"]');
  await shot(page, `inspect-${args.name}-result`);
}

try {
  fs.mkdirSync(artifacts, { recursive: true });
  browser = await puppeteer.launch({
    executablePath: chromium, headless: true, userDataDir: profile, timeout: WAIT, protocolTimeout: 60000,
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check"],
    defaultViewport: { width: 1400, height: 860 },
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  out.problems = problems;
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready=true]", { timeout: WAIT });
  out.addressAfterLoad = await page.evaluate(() => location.href);
  if (scenario === "dev") await dev(page);
  else if (scenario === "inspect") await inspect(page);
  else throw new Error("unknown scenario " + scenario);
  await finish();
} catch (e) {
  await finish(e);
}

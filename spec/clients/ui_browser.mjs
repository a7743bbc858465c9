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
//   SCENARIO big:     a timeline of ARGS.calls stdio calls made before the
//                     page loaded: the count, the window of rows drawn,
//                     Home/End, a filter, then a call through the form
//   SCENARIO features: progress and cancel (countdown), every kind of
//                     result (spec/fixtures/ui/media.lua), resources,
//                     templates and prompts with completions, roots,
//                     an elicitation answered and tabs switched with keys
//                     only, then the 2026-07-28 era: add, a task (report),
//                     a new connection without initialize
import puppeteer from "puppeteer-core";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";

const [chromium, url, artifacts, scenario, argsJSON] = process.argv.slice(2);
const args = argsJSON ? JSON.parse(argsJSON) : {};
const WAIT = 60000; // generous: the machine may be loaded (never a bound on speed)
const out = { scenario, shots: [], steps: [] };
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "luamcp-ui-chromium-"));
let browser;

// Whatever happens, the browser is killed and its profile removed: a hung
// test must not leave a Chromium behind.
const hardStop = setTimeout(() => finish(new Error("the scenario took longer than 420 s")), 420000);
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


const countOf = (page) => page.$eval("#count", (e) => e.textContent);
const numbers = (s) => (s.match(/[\d,.\u202f\u00a0]+/g) || []).map((x) => Number(x.replace(/[^\d]/g, ""))).filter((n) => !Number.isNaN(n));

async function big(page) {
  // Every call made before the page loaded is a row (a request and its
  // response paired); wait until the replay is all in.
  await page.waitForFunction((n) => {
    const m = (document.getElementById("count").textContent.match(/[\d,.\u202f\u00a0]+/g) || []).map((x) => Number(x.replace(/[^\d]/g, "")));
    return m.length >= 2 && m[1] >= n;
  }, { timeout: WAIT * 4, polling: 500 }, args.calls);
  out.count = await countOf(page);
  out.domRows = await page.$$eval("#tl-list .tl-row", (xs) => xs.length);
  // Home and End in the list: the first and the last row are drawn.
  await page.focus("#tl-list");
  await page.keyboard.press("Home");
  await page.waitForSelector('#tl-list .tl-row[data-pos="0"]', { timeout: WAIT });
  out.first = await page.$eval('#tl-list .tl-row[data-pos="0"]', (x) => ({ ...x.dataset, text: x.textContent }));
  out.domRowsAtHome = await page.$$eval("#tl-list .tl-row", (xs) => xs.length);
  await page.keyboard.press("End");
  const n = numbers(await countOf(page))[0];
  await page.waitForSelector(`#tl-list .tl-row[data-pos="${n - 1}"]`, { timeout: WAIT });
  out.last = await page.$eval(`#tl-list .tl-row[data-pos="${n - 1}"]`, (x) => ({ ...x.dataset, text: x.textContent }));
  out.shown = n;
  // The newest stdio call, found by its id: the count narrows to it.
  await page.type("#filter-id", String(args.lastId));
  await page.waitForFunction(() => /^1 of /.test(document.getElementById("count").textContent), { timeout: WAIT });
  out.filteredCount = await countOf(page);
  out.filtered = await rows(page);
  await page.$eval("#filter-id", (e) => { e.value = ""; e.dispatchEvent(new Event("input")); });
  await page.waitForFunction((n) => !/^1 of /.test(document.getElementById("count").textContent), { timeout: WAIT });
  // Still answers: a call through the form completes.
  out.add = await callToolInForm(page, "add", { a: 7, b: 8 });
  await waitRow(page, '.tl-row[data-method="tools/call"][data-tool="add"][data-conn="ui"][data-paired="true"]');
  out.domRowsAtEnd = await page.$$eval("#tl-list .tl-row", (xs) => xs.length);
  await shot(page, "timeline-100k");
}

// The rows of the timeline that match pred, brought into view by the
// filters (the list draws only what is visible), cleared after.
const FILTERS = ["search", "filter-method", "filter-tool", "filter-id", "filter-dir", "filter-conn"];
async function setFilters(page, filters) {
  for (const id of FILTERS) await page.$eval("#" + id, (e, v) => { e.value = v; e.dispatchEvent(new Event(e.tagName === "SELECT" ? "change" : "input")); }, filters[id] || "");
  const want = FILTERS.map((id) => filters[id] || "").join("|");
  await page.waitForFunction((want) => document.getElementById("tl-list").dataset.filter === want, { timeout: WAIT }, want);
}
async function findRows(page, filters, pred) {
  await setFilters(page, filters);
  // pred: {dataset key: value, ...} every one must hold, text: a regexp
  await page.waitForFunction((pred) => [...document.querySelectorAll("#tl-list .tl-row")].some((x) =>
    Object.entries(pred).every(([k, v]) => (k === "text" ? new RegExp(v).test(x.textContent) : x.dataset[k] === v))), { timeout: WAIT, polling: 200 }, pred);
  const found = (await rows(page)).filter((r) => Object.entries(pred).every(([k, v]) => (k === "text" ? new RegExp(v).test(r.text) : r[k] === v)));
  await setFilters(page, {});
  return found;
}

async function features(page) {
  // ---- progress and cancel: countdown 50 takes 5 s
  await page.click('.item[data-tool="countdown"]');
  await page.waitForSelector('#tool-form[data-tool="countdown"]');
  await page.$eval('#tool-form [data-path="/n"]', (e) => { e.value = ""; });
  await page.type('#tool-form [data-path="/n"]', "50");
  await page.click("#tool-call");
  await page.waitForFunction(() => { const b = document.getElementById("tool-progress"); return b && b.value > 0; }, { timeout: WAIT });
  const v1 = await page.$eval("#tool-progress", (b) => ({ value: b.value, max: b.max, now: b.getAttribute("aria-valuenow") }));
  await page.waitForFunction((v) => document.getElementById("tool-progress").value > v, { timeout: WAIT }, v1.value);
  const v2 = await page.$eval("#tool-progress", (b) => ({ value: b.value, max: b.max, now: b.getAttribute("aria-valuenow") }));
  out.progress = [v1, v2];
  await shot(page, "progress");
  await page.click("#tool-cancel");
  await page.waitForFunction(() => { const r = document.getElementById("tool-result"); return r.dataset.state !== "running"; }, { timeout: WAIT });
  out.cancelled = await page.$eval("#tool-result", (e) => ({ state: e.dataset.state, text: e.textContent }));
  out.callEnabledAfterCancel = await page.$eval("#tool-call", (b) => !b.disabled);
  out.cancelRows = await findRows(page, { "filter-tool": "countdown" }, { tool: "countdown", text: "cancelled" });
  await page.click('#tl-list .tl-row[data-tool="countdown"]');
  out.cancelDetail = await page.$eval("#detail-body", (e) => e.textContent);
  await shot(page, "cancel");

  // ---- every kind of result
  out.media = await callToolInForm(page, "media", {});
  out.mediaShown = await page.$eval("#tool-result", (r) => ({
    img: (r.querySelector("img") || {}).src || "", imgLoaded: !!(r.querySelector("img") && r.querySelector("img").naturalWidth > 0),
    audio: (r.querySelector("audio") || {}).src || "",
    link: (r.querySelector('[data-type="resource_link"] a, [data-type="resource_link"] button') || {}).textContent || "",
    structured: (r.querySelector("pre.json") || {}).textContent || "" }));
  await shot(page, "media");
  // the link opens the resource it names
  await page.click('#tool-result [data-type="resource_link"] a, #tool-result [data-type="resource_link"] button');
  await page.waitForSelector("#resource-result[data-state=done]", { timeout: WAIT });
  out.linkOpened = await page.$eval("#resource-result", (e) => e.textContent);

  // ---- resources, templates (with a completion), prompts
  await page.click("#tab-resources");
  await page.click('.item[data-resource="notes://index"]');
  await page.waitForFunction(() => { const r = document.querySelector("#resource-view h3"); return r && r.textContent === "notes://index" && document.querySelector("#resource-result[data-state=done]"); }, { timeout: WAIT });
  out.index = await page.$eval("#resource-result", (e) => e.textContent);
  await page.click('.item[data-template="notes://{name}"]');
  await page.waitForSelector("#tpl-name");
  await page.type("#tpl-name", "wel");
  await page.waitForFunction(() => [...document.querySelectorAll("#tpl-name-options option")].some((o) => o.value === "welcome"), { timeout: WAIT });
  out.templateSuggestions = await page.$$eval("#tpl-name-options option", (xs) => xs.map((x) => x.value));
  await page.type("#tpl-name", "come");
  await page.click('#template-form button[type=submit]');
  await page.waitForFunction(() => { const r = document.querySelector("#resource-view h3"); return r && r.textContent === "notes://welcome" && document.querySelector("#resource-result[data-state=done]"); }, { timeout: WAIT });
  out.note = await page.$eval("#resource-result", (e) => e.textContent);
  await shot(page, "resources");
  await page.click("#tab-prompts");
  await page.click('.item[data-prompt="summarize_note"]');
  await page.waitForSelector("#prompt-name");
  await page.type("#prompt-name", "w");
  await page.waitForFunction(() => [...document.querySelectorAll("#prompt-name-options option")].some((o) => o.value === "welcome"), { timeout: WAIT });
  out.promptSuggestions = await page.$$eval("#prompt-name-options option", (xs) => xs.map((x) => x.value));
  await page.$eval("#prompt-name", (e) => { e.value = "welcome"; });
  await page.click("#prompt-get");
  await page.waitForSelector("#prompt-result[data-state=done]", { timeout: WAIT });
  out.prompt = await page.$eval("#prompt-result", (e) => e.textContent);
  await shot(page, "prompt");

  // ---- roots: added in the Roots tab, asked for by a tool
  await page.click("#tab-roots");
  await page.type("#root-uri", "file:///tmp/project");
  await page.type("#root-name", "project");
  await page.click("#root-add");
  out.rootsShown = await page.$$eval("#root-list [data-root]", (xs) => xs.map((x) => x.dataset.root));
  out.rootsChanged = await findRows(page, { "filter-method": "notifications/roots/list_changed" }, { method: "notifications/roots/list_changed", dir: "c2s" });
  await shot(page, "roots");
  await page.click("#tab-tools");
  out.roots = await callToolInForm(page, "list_roots", {});
  out.rootsListRows = await findRows(page, { "filter-method": "roots/list" }, { method: "roots/list", paired: "true" });

  // ---- keys only: tabs with the arrows, an elicitation with Tab/Space/Enter
  await page.focus("#tab-tools");
  const tabs = [];
  for (const key of ["ArrowRight", "ArrowRight", "ArrowRight", "ArrowRight", "ArrowLeft"]) {
    await page.keyboard.press(key);
    tabs.push(await page.evaluate(() => ({ focused: document.activeElement.id, selected: document.querySelector("[role=tab][aria-selected=true]").id,
      visible: [...document.querySelectorAll("[role=tabpanel]")].filter((p) => !p.hidden).map((p) => p.id).join(" ") })));
  }
  out.keyTabs = tabs;
  // back to Tools (Right from Roots wraps), then Tab to delete_note
  await page.keyboard.press("ArrowRight");
  let reached = false;
  for (let i = 0; i < 30 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = await page.evaluate(() => document.activeElement && document.activeElement.dataset.tool === "delete_note");
  }
  out.keyReachedDelete = reached;
  if (reached) {
    await page.keyboard.press("Enter");
    await page.waitForSelector('#tool-form[data-tool="delete_note"]');
    await page.keyboard.type("welcome");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".question[data-kind=elicitation]", { timeout: WAIT });
    out.keyQuestionFocus = await page.evaluate(() => document.activeElement.dataset.path || document.activeElement.id);
    await page.keyboard.press("Space");
    await page.keyboard.press("Tab");
    out.keyAcceptFocus = await page.evaluate(() => document.activeElement.id);
    await shot(page, "keyboard-elicitation");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#tool-result[data-state=done]", { timeout: WAIT });
    out.keyDeleted = await page.$eval("#tool-result", (e) => e.textContent);
    out.focusAfterQuestion = await page.evaluate(() => document.activeElement === document.body ? "body" : (document.activeElement.id || document.activeElement.dataset.path || document.activeElement.tagName));
  }

  // ---- the 2026-07-28 era: no initialize, every request self-describing
  await page.select("#era", "2026-07-28");
  await findRows(page, { "filter-method": "server/discover" }, { method: "server/discover", paired: "true" });
  await page.click('.item[data-tool="add"]');
  await page.waitForFunction(() => document.querySelector(".item[data-tool=add]") && document.querySelector('#tool-form[data-tool="add"]'), { timeout: WAIT });
  out.add2026 = await callToolInForm(page, "add", { a: 2, b: 3 });
  out.add2026Rows = (await findRows(page, { "filter-tool": "add", "filter-conn": "ui" }, { tool: "add", paired: "true", text: "2026-07-28" }))
    .map((r) => ({ text: r.text, paired: r.paired }));
  await shot(page, "era-2026");

  // report with 2 sections takes 2 s: unticked "run as a task", the page
  // does not declare the tasks extension, so the call waits as a call
  out.reportPlain = await callToolInForm(page, "report", { sections: 2 });
  out.reportPlainWasTask = await page.$$eval("#tool-result .task-state", (xs) => xs.length > 0);
  // ticked, it becomes a task after 1 s (3 sections take 3 s)
  await page.$eval('#tool-form [data-path="/sections"]', (e) => { e.value = "3"; });
  await page.click("#as-task");
  await page.click("#tool-call");
  await page.waitForSelector('#tool-result .task-state[data-task-state="working"]', { timeout: WAIT });
  out.taskWorking = await page.$eval("#tool-result", (e) => e.textContent);
  await shot(page, "task-working");
  await page.waitForSelector("#tool-result[data-state=done], #tool-result[data-state=error]", { timeout: WAIT * 2 });
  out.task = await page.$eval("#tool-result", (e) => ({ state: e.dataset.state, text: e.textContent,
    history: (e.querySelector(".task-state") || { dataset: {} }).dataset.taskHistory || "" }));
  out.taskRows = (await findRows(page, { "filter-method": "tasks/get" }, { method: "tasks/get", paired: "true" })).length;
  await shot(page, "task");

  // a new connection in this era: server/discover again, never initialize
  const discovers = (await findRows(page, { "filter-method": "server/discover" }, { method: "server/discover", paired: "true" })).length;
  await page.click("#reset");
  await setFilters(page, { "filter-method": "server/discover" });
  await page.waitForFunction((n) => [...document.querySelectorAll('#tl-list .tl-row[data-method="server/discover"][data-paired="true"]')].length > n,
    { timeout: WAIT, polling: 200 }, discovers);
  await setFilters(page, {});
  out.initializes = (await findRows(page, { "filter-method": "initialize", "filter-conn": "ui" }, { method: "initialize" })).map((r) => ({ seq: Number(r.seq), method: r.method }));
  out.discovers = (await findRows(page, { "filter-method": "server/discover", "filter-conn": "ui" }, { method: "server/discover", paired: "true" })).map((r) => ({ seq: Number(r.seq), era: r.era }));
  out.connEvents = (await findRows(page, { "filter-method": "conn", "filter-conn": "ui" }, { kind: "conn" })).map((r) => ({ seq: Number(r.seq), text: r.text }));
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
  // 100,000 events are replayed before the page is ready: longer on a loaded machine.
  await page.waitForSelector("body[data-ready=true]", { timeout: scenario === "big" ? WAIT * 4 : WAIT });
  out.addressAfterLoad = await page.evaluate(() => location.href);
  if (scenario === "dev") await dev(page);
  else if (scenario === "inspect") await inspect(page);
  else if (scenario === "big") await big(page);
  else if (scenario === "features") await features(page);
  else throw new Error("unknown scenario " + scenario);
  await finish();
} catch (e) {
  await finish(e);
}

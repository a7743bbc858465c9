// luamcp inspector: the page is the MCP client of luamcp's "ui" connection.
// It reads every event of /events into the timeline, sends its own requests
// with POST /send, and answers the server's questions (elicitation,
// sampling, roots, ping). The contract: docs/inspector.md.
import { el, prettyJSON } from "./util.js";
import { Timeline } from "./timeline.js";
import { buildForm } from "./schema_form.js";

const $ = (id) => document.getElementById(id);
const V2026 = "2026-07-28";
const CLIENT_INFO = { name: "luamcp-inspector", version: "1.0.0" };
const CLIENT_CAPS = { roots: { listChanged: true }, sampling: {}, elicitation: { form: {} } };

// ---- the token: from the address, else from sessionStorage ---------------
// It stays in the address: luamcp serves the page itself only to a request
// that carries it, so a refresh (F5) needs it there.
const params = new URLSearchParams(location.search);
let token = params.get("token") || sessionStorage.getItem("luamcp-token") || "";
if (params.get("token")) sessionStorage.setItem("luamcp-token", token);
const api = (path) => `${path}?token=${encodeURIComponent(token)}`;

const state = {
  hello: null, live: false, initialized: false, server: null, era: localStorage.getItem("luamcp-era") || "2025-11-25",
  pending: new Map(),           // id -> {resolve, reject, onProgress}
  answered: new Set(),          // ids of server->client requests the page has answered
  asked: new Map(),             // id -> message: server->client requests seen on "ui"
  lists: { tools: [], resources: [], resourceTemplates: [], prompts: [] },
  roots: JSON.parse(localStorage.getItem("luamcp-roots") || "[]"),
  lastReload: null,
  current: null,                // the selected tool / resource / prompt
};
let nextId = 1;
const idPrefix = "ui-" + Math.random().toString(36).slice(2, 8) + "-";

const timeline = new Timeline({
  list: $("tl-list"), spacer: $("tl-spacer"), detail: $("detail-body"), detailTitle: $("detail-title"), count: $("count"),
  onSelect: (e) => { $("replay").hidden = !(e.kind === "call" && e.dir === "c2s" && e.method !== "initialize"); },
});

// ---- sending --------------------------------------------------------------
async function post(message) {
  const r = await fetch(api("/send"), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(message) });
  if (!r.ok) { let why = r.statusText; try { why = (await r.json()).error || why; } catch { /* not JSON */ } throw new Error(`send refused (${r.status}): ${why}`); }
}

// tasks: declare the tasks extension (a tool call declares it only when
// "run as a task" is ticked: the server makes a task only for a client that
// declared it, so the box decides).
function withMeta(p, tasks = true) {
  if (state.era !== V2026) return p;
  const meta = Object.assign({}, p && p._meta, {
    "io.modelcontextprotocol/protocolVersion": V2026,
    "io.modelcontextprotocol/clientCapabilities": Object.assign(tasks ? { extensions: { "io.modelcontextprotocol/tasks": {} } } : {}, CLIENT_CAPS),
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
  });
  return Object.assign({}, p, { _meta: meta });
}

function request(method, p, { onProgress, raw, tasks } = {}) {
  const id = idPrefix + nextId++;
  const message = { jsonrpc: "2.0", id, method };
  const withEra = raw ? p : withMeta(p, tasks !== false);
  if (withEra !== undefined) message.params = withEra;
  return new Promise((resolve, reject) => {
    state.pending.set(id, { resolve, reject, onProgress, method });
    post(message).catch((e) => { state.pending.delete(id); reject(e); });
  }).then((x) => x, (e) => { throw e; });
}
function notify(method, p) { const m = { jsonrpc: "2.0", method }; if (p) m.params = p; return post(m).catch(showError); }

function showError(e) { setStatus("error", String(e.message || e)); }
function setStatus(s, text) { const st = $("status"); st.dataset.state = s; st.textContent = text; }

// ---- /events --------------------------------------------------------------
const queue = [];
function connect() {
  if (!token) { setStatus("error", "no token: open the address luamcp printed"); return; }
  const es = new EventSource(api("/events"));
  es.onmessage = (m) => { let ev; try { ev = JSON.parse(m.data); } catch { return; } queue.push(ev); if (queue.length === 1) requestAnimationFrame(drain); };
  es.onerror = () => { state.live = false; setStatus("error", "disconnected, reconnecting…"); };
}
function drain() {
  const batch = queue.splice(0, queue.length);
  for (const ev of batch) handle(ev);
}

function handle(ev) {
  if (ev.kind === "hello") {
    state.hello = ev; state.live = false;
    $("target").textContent = `${ev.mode} ${ev.target || ""} · luamcp ${ev.luamcp || ""}`;
    setStatus("connecting", `replaying ${ev.history || 0} events…`);
    if (ev.initialized) { try { adoptInitialize(JSON.parse(ev.initialized).result); } catch { /* keep going */ } }
    return;
  }
  if (ev.kind === "live") {
    state.live = true; setStatus("live", "live");
    start();
    return;
  }
  timeline.add(ev);
  if (ev.kind === "message" && ev.conn === (state.hello && state.hello.ui_conn || "ui")) fromUi(ev);
  if (ev.kind === "reload" && state.live) onReload(timeline.entries[timeline.entries.length - 1]);
  if (ev.kind === "conn" && ev.state === "open" && ev.conn === "ui" && state.live && state.resetting) { state.resetting = false; state.initialized = false; start(); }
  updateConnFilter();
}

function fromUi(ev) {
  if (ev.dir !== "s2c" && ev.dir !== "c2s") return;
  let m; try { m = JSON.parse(ev.text); } catch { return; }
  for (const x of Array.isArray(m) ? m : [m]) {
    if (!x || typeof x !== "object") continue;
    if (ev.dir === "c2s") { if (x.id !== undefined && x.method === undefined) state.answered.add(String(x.id)); continue; }
    if (x.method && x.id !== undefined) { state.asked.set(String(x.id), x); if (state.live) ask(x); }
    else if (x.method === "notifications/progress") {
      for (const p of state.pending.values()) if (p.token !== undefined && p.token === x.params.progressToken && p.onProgress) p.onProgress(x.params);
    } else if (x.method && /list_changed$/.test(x.method) && state.live) refreshLists();
    else if (x.id !== undefined) {
      const p = state.pending.get(String(x.id));
      if (p) { state.pending.delete(String(x.id)); x.error ? p.reject(Object.assign(new Error(x.error.message), { rpc: x.error })) : p.resolve(x.result); }
    }
  }
}

// ---- the session ----------------------------------------------------------
function adoptInitialize(result) { state.initialized = true; state.server = result; }

async function start() {
  try {
    if (state.era === V2026) {
      state.server = await request("server/discover", {});
    } else if (!state.initialized) {
      const r = await request("initialize", { protocolVersion: "2025-11-25", capabilities: CLIENT_CAPS, clientInfo: CLIENT_INFO }, { raw: true });
      adoptInitialize(r);
      await notify("notifications/initialized");
    }
    // questions the server asked while the page was away, still unanswered
    for (const [id, x] of state.asked) if (!state.answered.has(id)) ask(x);
    await refreshLists();
    document.body.dataset.ready = "true";
  } catch (e) { showError(e); }
}

async function listAll(method, key) {
  const all = []; let cursor;
  for (let page = 0; page < 100; page++) {
    const r = await request(method, cursor ? { cursor } : {});
    all.push(...(r[key] || []));
    if (!r.nextCursor) break;
    cursor = r.nextCursor;
  }
  return all;
}

function caps() { return (state.server && (state.server.capabilities || state.server.serverCapabilities)) || {}; }

// One refresh at a time: a reload brings its event and list_changed
// together, and both want the same lists (and the reload, what changed).
let refreshing = null;
function refreshLists() {
  if (!refreshing) refreshing = fetchLists().finally(() => { refreshing = null; });
  return refreshing;
}

async function fetchLists() {
  const c = caps();
  const before = JSON.parse(JSON.stringify(state.lists));
  const get = async (has, method, key) => { if (!has) return []; try { return await listAll(method, key); } catch (e) { return []; } };
  const [tools, resources, resourceTemplates, prompts] = await Promise.all([
    get(c.tools, "tools/list", "tools"), get(c.resources, "resources/list", "resources"),
    get(c.resources, "resources/templates/list", "resourceTemplates"), get(c.prompts, "prompts/list", "prompts")]);
  state.lists = { tools, resources, resourceTemplates, prompts };
  drawLists();
  return diffLists(before, state.lists);
}

function diffLists(a, b) {
  const out = [];
  for (const [type, key] of [["tool", "tools", "name"], ["resource", "resources"], ["template", "resourceTemplates"], ["prompt", "prompts"]]) {
    const nameOf = (x) => x.name || x.uri || x.uriTemplate;
    const A = new Map(a[key].map((x) => [nameOf(x), JSON.stringify(x)])), B = new Map(b[key].map((x) => [nameOf(x), JSON.stringify(x)]));
    for (const [n, s] of B) { if (!A.has(n)) out.push({ how: "added", type, name: n }); else if (A.get(n) !== s) out.push({ how: "changed", type, name: n }); }
    for (const n of A.keys()) if (!B.has(n)) out.push({ how: "removed", type, name: n });
  }
  return out;
}

async function onReload(entry) {
  if (!entry.ok) { timeline.touch(entry); return; }
  const changes = await refreshLists();
  entry.changes = changes;
  const sign = { added: "+", removed: "−", changed: "~" };
  entry.summary = changes.length ? changes.map((c) => `${sign[c.how]}${c.type} ${c.name}`).join(", ") : "no change in the lists";
  timeline.touch(entry);
}

// ---- lists and forms ------------------------------------------------------
function itemButton(kind, name, desc, onClick) {
  const b = el("button", { type: "button", class: "item", "data-kind": kind, [`data-${kind}`]: name }, el("span", { class: "name" }, name), desc ? el("span", { class: "desc" }, desc) : null);
  b.addEventListener("click", () => { for (const x of document.querySelectorAll(".item[aria-current]")) x.removeAttribute("aria-current"); b.setAttribute("aria-current", "true"); onClick(); });
  return el("li", {}, b);
}

function drawLists() {
  const { tools, resources, resourceTemplates, prompts } = state.lists;
  $("tool-list").replaceChildren(...tools.map((t) => itemButton("tool", t.name, t.description, () => showTool(t))));
  $("resource-list").replaceChildren(...resources.map((r) => itemButton("resource", r.uri, r.name, () => readResource(r.uri))));
  $("template-list").replaceChildren(...resourceTemplates.map((r) => itemButton("template", r.uriTemplate, r.name, () => showTemplate(r))));
  $("prompt-list").replaceChildren(...prompts.map((p) => itemButton("prompt", p.name, p.description, () => showPrompt(p))));
  if (state.current && state.current.kind === "tool") {
    const t = tools.find((x) => x.name === state.current.name);
    if (!t) $("tool-view").replaceChildren(el("p", { class: "muted" }, `${state.current.name} is gone (reloaded).`));
  }
}

function showTool(tool) {
  state.current = { kind: "tool", name: tool.name };
  const form = buildForm(tool.inputSchema, { idPrefix: "tool" });
  const f = el("form", { id: "tool-form", class: "schema", "data-tool": tool.name, novalidate: true }, form.root);
  const taskAllowed = tool.execution && tool.execution.taskSupport && tool.execution.taskSupport !== "forbidden";
  const asTask = el("input", { type: "checkbox", id: "as-task" });
  const call = el("button", { type: "submit", id: "tool-call", class: "primary" }, "Call " + tool.name);
  const cancel = el("button", { type: "button", id: "tool-cancel", disabled: true }, "Cancel");
  const result = el("div", { id: "tool-result", class: "result", "data-state": "idle", role: "status", "aria-live": "polite", hidden: true });
  f.append(el("div", { class: "actions" }, call, cancel, taskAllowed || state.era === V2026 ? el("label", {}, asTask, " run as a task") : null), result);
  const ann = tool.annotations ? Object.entries(tool.annotations).map(([k, v]) => el("span", { class: "badge" }, `${k}: ${v}`)) : [];
  $("tool-view").replaceChildren(el("h3", {}, tool.title ? `${tool.title} (${tool.name})` : tool.name), el("p", { class: "muted" }, tool.description || ""), el("div", {}, ann), f,
    tool.outputSchema ? el("details", {}, el("summary", {}, "output schema"), prettyJSON(tool.outputSchema)) : "");
  f.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (form.validate().length) { result.hidden = false; result.dataset.state = "invalid"; result.replaceChildren(el("span", { class: "state" }, "fix the fields marked in red")); const bad = f.querySelector("[aria-invalid=true]"); if (bad) bad.focus(); return; }
    const args = form.value();
    const token = "p-" + Math.random().toString(36).slice(2);
    const bar = el("progress", { id: "tool-progress", max: 1, "aria-label": "progress" });
    const msg = el("span", { class: "muted" });
    result.hidden = false; result.dataset.state = "running"; result.replaceChildren(el("span", { class: "state" }, "running…"), bar, msg);
    call.disabled = true; cancel.disabled = false;
    const p = { name: tool.name, arguments: args, _meta: { progressToken: token } };
    if (asTask.checked && state.era !== V2026) p.task = {};
    const id = idPrefix + nextId;
    // A cancelled request gets no response (the protocol says so): the
    // call ends here, in the page, and a late answer is ignored.
    cancel.onclick = () => {
      if (result.dataset.taskId) { request("tasks/cancel", { taskId: result.dataset.taskId }).catch(showError); return; }
      notify("notifications/cancelled", { requestId: id, reason: "cancelled in the inspector" });
      const pend = state.pending.get(id);
      if (pend) { state.pending.delete(id); pend.reject(Object.assign(new Error("cancelled"), { cancelled: true })); }
    };
    try {
      const pr = request("tools/call", p, { tasks: asTask.checked });
      const pend = state.pending.get(id); if (pend) { pend.token = token; pend.onProgress = (x) => {
        bar.max = x.total || 1; bar.value = x.progress; bar.setAttribute("aria-valuenow", String(x.progress)); bar.setAttribute("aria-valuemax", String(bar.max));
        msg.textContent = ` ${x.progress}${x.total ? "/" + x.total : ""} ${x.message || ""}`; }; }
      let r = await pr;
      r = await followUp(r, "tools/call", p, result, { tasks: asTask.checked });
      showResult(result, r);
    } catch (err) {
      if (err.cancelled) { result.dataset.state = "cancelled"; result.replaceChildren(el("span", { class: "state" }, "cancelled"), el("span", { class: "muted" }, " (notifications/cancelled sent; the server sends no response)")); }
      else showRpcError(result, err);
    }
    finally { call.disabled = false; cancel.disabled = true; delete result.dataset.taskId; }
  });
  // The first field is where a keyboard user goes next (Tab from there).
  const first = f.querySelector("input,select,textarea,button");
  if (first) first.focus();
}

// A 2026-07-28 result may ask questions (input_required) or be a task.
async function followUp(r, method, p, box, opts = {}) {
  for (let round = 0; r && r.resultType === "input_required" && round < 10; round++) {
    const answers = {};
    for (const [key, q] of Object.entries(r.inputRequests || {})) answers[key] = await askInPage({ method: q.method, params: q.params, id: key });
    r = await request(method, Object.assign({}, p, { inputResponses: answers, requestState: r.requestState }), opts);
  }
  if (r && (r.resultType === "task" || (r.task && r.task.taskId))) return await followTask(r.task || r, box);
  return r;
}

async function followTask(task, box) {
  const id = task.taskId;
  // data-task-history: every state seen, in order (repeats folded)
  const st = el("span", { class: "task-state", "data-task-state": task.status, "data-task-history": task.status }, `task ${id.slice(0, 8)}…: ${task.status}`);
  const cancel = el("button", { type: "button", id: "task-cancel" }, "Cancel task");
  cancel.addEventListener("click", () => request("tasks/cancel", { taskId: id }).catch(showError));
  box.dataset.taskId = id; box.taskLine = st;
  box.replaceChildren(st, " ", cancel);
  for (;;) {
    await new Promise((res) => setTimeout(res, Math.min(task.pollIntervalMs || 500, 2000)));
    task = await request("tasks/get", { taskId: id });
    if (st.dataset.taskHistory.split(" ").pop() !== task.status) st.dataset.taskHistory += " " + task.status;
    st.dataset.taskState = task.status; st.textContent = `task ${id.slice(0, 8)}…: ${task.status}${task.statusMessage ? " — " + task.statusMessage : ""}`;
    if (task.status === "input_required" && task.inputRequests) {
      const answers = {};
      for (const [key, q] of Object.entries(task.inputRequests)) answers[key] = await askInPage({ method: q.method, params: q.params, id: key });
      await request("tasks/update", { taskId: id, inputResponses: answers });
    }
    if (task.status === "completed") return task.result || (await request("tasks/result", { taskId: id }));
    if (task.status === "failed") throw Object.assign(new Error("task failed"), { rpc: task.error || { code: 0, message: task.statusMessage || "failed" } });
    if (task.status === "cancelled") throw Object.assign(new Error("task cancelled"), { rpc: { code: 0, message: "cancelled" } });
  }
}

function showRpcError(box, err) {
  box.hidden = false; box.dataset.state = "error";
  const kids = [el("span", { class: "state" }, err.rpc ? `error ${err.rpc.code}: ${err.rpc.message}` : String(err.message || err))];
  if (err.rpc && err.rpc.data !== undefined) kids.push(prettyJSON(err.rpc.data));
  box.replaceChildren(...kids);
}

function showResult(box, r) {
  box.hidden = false;
  box.dataset.state = r && r.isError ? "error" : "done";
  const kids = [el("span", { class: "state" }, r && r.isError ? "tool error" : "done")];
  for (const c of (r && r.content) || []) kids.push(contentBlock(c, r.isError));
  for (const m of (r && r.messages) || []) kids.push(el("div", { class: "block" }, el("strong", {}, m.role + ": "), contentBlock(m.content)));
  for (const c of (r && r.contents) || []) kids.push(contentBlock(c.blob !== undefined ? { type: "resource", resource: c } : { type: "resource", resource: c }));
  if (r && r.structuredContent !== undefined) kids.push(el("h4", {}, "structuredContent"), prettyJSON(r.structuredContent));
  if (r && !r.content && !r.messages && !r.contents) kids.push(prettyJSON(r));
  // a task's result keeps the line saying which task and its last state
  if (box.taskLine) { kids.unshift(box.taskLine, el("br")); box.taskLine = null; }
  box.replaceChildren(...kids);
}

function contentBlock(c, isError) {
  const b = el("div", { class: "block" + (isError ? " isError" : ""), "data-type": c.type });
  if (c.type === "text") b.append(el("pre", { class: "text" }, c.text));
  else if (c.type === "image") b.append(el("img", { src: `data:${c.mimeType};base64,${c.data}`, alt: "image result" }));
  else if (c.type === "audio") b.append(el("audio", { controls: true, src: `data:${c.mimeType};base64,${c.data}` }));
  else if (c.type === "resource_link") {
    const a = el("button", { type: "button", class: "link", title: "Read " + c.uri }, `↗ ${c.name || c.uri} (${c.uri})`);
    a.addEventListener("click", () => { selectTab("resources"); readResource(c.uri); });
    b.append(a);
  } else if (c.type === "resource") {
    const r = c.resource || {};
    b.append(el("div", { class: "muted" }, `${r.uri || ""} ${r.mimeType || ""}`));
    if (r.text !== undefined) b.append(el("pre", {}, r.text));
    else if (r.blob !== undefined && /^image\//.test(r.mimeType || "")) b.append(el("img", { src: `data:${r.mimeType};base64,${r.blob}`, alt: r.uri || "" }));
    else if (r.blob !== undefined) b.append(el("pre", {}, `(${r.blob.length} base64 characters)`));
  } else b.append(prettyJSON(c));
  return b;
}

async function readResource(uri) {
  const box = el("div", { id: "resource-result", class: "result", "data-state": "running" }, "reading…");
  $("resource-view").replaceChildren(el("h3", {}, uri), box);
  try { showResult(box, await request("resources/read", { uri })); } catch (e) { showRpcError(box, e); }
}

function templateVars(t) { return [...t.matchAll(/\{[+#./;?&]?([^}]+)\}/g)].flatMap((m) => m[1].split(",").map((v) => v.replace(/\*$|:\d+$/, ""))); }

function completer(input, ref, argName, others) {
  if (!caps().completions) return;
  const dl = el("datalist", { id: input.id + "-options" });
  input.setAttribute("list", dl.id);
  input.after(dl);
  input.addEventListener("input", async () => {
    try {
      const p = { ref, argument: { name: argName, value: input.value } };
      const ctx = others(); if (Object.keys(ctx).length) p.context = { arguments: ctx };
      const r = await request("completion/complete", p);
      dl.replaceChildren(...((r.completion && r.completion.values) || []).map((v) => el("option", { value: v })));
    } catch { /* no suggestions */ }
  });
}

function showTemplate(t) {
  const vars = templateVars(t.uriTemplate);
  const inputs = vars.map((v) => el("input", { type: "text", id: "tpl-" + v, "data-var": v, required: true }));
  const f = el("form", { id: "template-form", class: "schema" }, ...vars.map((v, i) => el("div", { class: "field" }, el("label", { class: "lbl", for: "tpl-" + v }, v), inputs[i])),
    el("div", { class: "actions" }, el("button", { type: "submit", class: "primary" }, "Read")));
  inputs.forEach((inp, i) => completer(inp, { type: "ref/resource", uri: t.uriTemplate }, vars[i], () => Object.fromEntries(inputs.filter((x) => x !== inp && x.value).map((x) => [x.dataset.var, x.value]))));
  f.addEventListener("submit", (e) => {
    e.preventDefault();
    const uri = t.uriTemplate.replace(/\{[+#./;?&]?([^}]+)\}/g, (_, names) => names.split(",").map((n) => encodeURIComponent((inputs.find((x) => x.dataset.var === n.replace(/\*$|:\d+$/, "")) || {}).value || "")).join(","));
    readResource(uri);
  });
  $("resource-view").replaceChildren(el("h3", {}, t.uriTemplate), el("p", { class: "muted" }, t.description || ""), f);
}

function showPrompt(p) {
  const args = p.arguments || [];
  const inputs = args.map((a) => el("input", { type: "text", id: "prompt-" + a.name, "data-arg": a.name, "aria-required": a.required ? "true" : null }));
  const errs = args.map((a) => el("div", { class: "field-error", "data-error-for": "/" + a.name }));
  const box = el("div", { id: "prompt-result", class: "result", hidden: true });
  const f = el("form", { id: "prompt-form", class: "schema", "data-prompt": p.name, novalidate: true },
    ...args.map((a, i) => el("div", { class: "field" }, el("label", { class: "lbl", for: "prompt-" + a.name }, a.name, a.required ? el("span", { class: "req" }, "*") : null),
      a.description ? el("div", { class: "hint" }, a.description) : null, inputs[i], errs[i])),
    el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", id: "prompt-get" }, "Get prompt")), box);
  inputs.forEach((inp, i) => completer(inp, { type: "ref/prompt", name: p.name }, args[i].name, () => Object.fromEntries(inputs.filter((x) => x !== inp && x.value).map((x) => [x.dataset.arg, x.value]))));
  f.addEventListener("submit", async (e) => {
    e.preventDefault();
    let bad = false;
    args.forEach((a, i) => { errs[i].textContent = a.required && !inputs[i].value ? "required" : ""; if (errs[i].textContent) bad = true; });
    if (bad) return;
    const values = Object.fromEntries(inputs.filter((x) => x.value !== "").map((x) => [x.dataset.arg, x.value]));
    box.hidden = false; box.textContent = "getting…";
    try { showResult(box, await request("prompts/get", { name: p.name, arguments: values })); } catch (err) { showRpcError(box, err); }
  });
  $("prompt-view").replaceChildren(el("h3", {}, p.name), el("p", { class: "muted" }, p.description || ""), f);
}

// ---- questions from the server --------------------------------------------
async function ask(x) {
  const id = String(x.id);
  if (state.answered.has(id) || document.querySelector(`.question[data-request-id="${CSS.escape(id)}"]`)) return;
  if (x.method === "ping") return answer(x.id, { result: {} });
  if (x.method === "roots/list") return answer(x.id, { result: { roots: state.roots } });
  try { answer(x.id, { result: await askInPage(x) }); }
  catch (e) { answer(x.id, { error: { code: -32603, message: String(e.message || e) } }); }
}
function answer(id, body) { state.answered.add(String(id)); return post(Object.assign({ jsonrpc: "2.0", id }, body)).catch(showError); }

// Shows one question; resolves with the result to send back.
function askInPage(x) {
  if (x.method === "roots/list") return Promise.resolve({ roots: state.roots });
  return new Promise((resolve, reject) => {
    const p = x.params || {};
    const box = el("section", { class: "question", role: "dialog", "aria-modal": "false", "aria-labelledby": "q-title-" + x.id, "data-kind": x.method === "elicitation/create" ? "elicitation" : x.method === "sampling/createMessage" ? "sampling" : "other", "data-request-id": String(x.id) });
    // The focus goes back where it was when the question came (a keyboard
    // user answering must not be left on the page's body).
    const before = document.activeElement;
    const leave = () => { box.remove(); if (before && before.isConnected && before !== document.body) before.focus(); else { const r = $("tool-call"); if (r) r.focus(); } };
    const done = (v) => { leave(); resolve(v); };
    if (x.method === "elicitation/create") {
      box.append(el("h2", { id: "q-title-" + x.id }, "The server asks"), el("p", { class: "q-message" }, p.message || ""));
      if (p.mode === "url" || p.url) {
        box.append(el("p", {}, "Open: ", el("a", { href: p.url, target: "_blank", rel: "noopener" }, p.url)));
      }
      const form = buildForm(p.requestedSchema || { type: "object", properties: {} }, { idPrefix: "q" + x.id });
      const f = el("form", { class: "schema", id: "q-form", novalidate: true }, form.root);
      const accept = el("button", { type: "submit", class: "primary", id: "q-accept" }, "Accept");
      const decline = el("button", { type: "button", id: "q-decline" }, "Decline");
      const cancel = el("button", { type: "button", id: "q-cancel" }, "Cancel");
      f.append(el("div", { class: "actions" }, accept, decline, cancel));
      f.addEventListener("submit", (e) => { e.preventDefault(); if (p.mode === "url" || form.validate().length === 0) done(p.mode === "url" ? { action: "accept" } : { action: "accept", content: form.value() }); });
      decline.addEventListener("click", () => done({ action: "decline" }));
      cancel.addEventListener("click", () => done({ action: "cancel" }));
      box.append(f);
    } else if (x.method === "sampling/createMessage") {
      box.append(el("h2", { id: "q-title-" + x.id }, "The server asks for a completion (sampling)"));
      if (p.systemPrompt) box.append(el("p", { class: "muted" }, "system: " + p.systemPrompt));
      for (const m of p.messages || []) box.append(el("div", { class: "block" }, el("strong", {}, m.role + ": "), [].concat(m.content).map((c) => contentBlock(c))));
      const ta = el("textarea", { id: "q-text", rows: 4, "aria-label": "Your answer, as the assistant" });
      const send = el("button", { type: "submit", class: "primary", id: "q-accept" }, "Send answer");
      const refuse = el("button", { type: "button", id: "q-decline" }, "Refuse");
      const f = el("form", { id: "q-form" }, ta, el("div", { class: "actions" }, send, refuse));
      f.addEventListener("submit", (e) => { e.preventDefault(); done({ role: "assistant", content: { type: "text", text: ta.value }, model: "luamcp-inspector (a person)", stopReason: "endTurn" }); });
      refuse.addEventListener("click", () => { leave(); reject(new Error("the user refused the sampling request")); });
      box.append(f);
    } else {
      box.append(el("h2", { id: "q-title-" + x.id }, x.method), prettyJSON(p));
      const ta = el("textarea", { id: "q-text", rows: 4, "aria-label": "The result, as JSON" }, "{}");
      const send = el("button", { type: "button", class: "primary", id: "q-accept" }, "Send result");
      send.addEventListener("click", () => { try { done(JSON.parse(ta.value)); } catch { ta.setAttribute("aria-invalid", "true"); } });
      box.append(ta, send);
    }
    $("questions").append(box);
    const first = box.querySelector("input,select,textarea,button");
    if (first) first.focus();
  });
}

// ---- roots ----------------------------------------------------------------
function drawRoots() {
  $("root-list").replaceChildren(...state.roots.map((r, i) => {
    const rm = el("button", { type: "button", class: "danger", "aria-label": "Remove root " + r.uri }, "remove");
    rm.addEventListener("click", () => { state.roots.splice(i, 1); rootsChanged(); });
    return el("li", { class: "row", "data-root": r.uri }, el("span", { class: "name" }, r.uri), r.name ? el("span", { class: "muted" }, r.name) : null, rm);
  }));
}
function rootsChanged() { localStorage.setItem("luamcp-roots", JSON.stringify(state.roots)); drawRoots(); notify("notifications/roots/list_changed"); }
$("root-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const uri = $("root-uri").value.trim(); if (!uri) return;
  const r = { uri }; if ($("root-name").value) r.name = $("root-name").value;
  state.roots.push(r); $("root-uri").value = ""; $("root-name").value = ""; rootsChanged();
});

// ---- tabs, filters, keys --------------------------------------------------
const TABS = ["tools", "resources", "prompts", "roots"];
function selectTab(name) {
  for (const t of TABS) {
    const on = t === name;
    $("tab-" + t).setAttribute("aria-selected", String(on)); $("tab-" + t).tabIndex = on ? 0 : -1; $("pane-" + t).hidden = !on;
  }
}
for (const t of TABS) {
  $("tab-" + t).addEventListener("click", () => selectTab(t));
  $("tab-" + t).addEventListener("keydown", (e) => {
    const i = TABS.indexOf(t);
    const to = e.key === "ArrowRight" ? TABS[(i + 1) % TABS.length] : e.key === "ArrowLeft" ? TABS[(i + TABS.length - 1) % TABS.length] : null;
    if (to) { selectTab(to); $("tab-" + to).focus(); e.preventDefault(); }
  });
}

let filterTimer = 0;
function readFilters() {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(() => timeline.setFilter({ text: $("search").value, method: $("filter-method").value, tool: $("filter-tool").value,
    id: $("filter-id").value, dir: $("filter-dir").value, conn: $("filter-conn").value }), 120);
}
for (const id of ["search", "filter-method", "filter-tool", "filter-id"]) $(id).addEventListener("input", readFilters);
for (const id of ["filter-dir", "filter-conn"]) $(id).addEventListener("change", readFilters);
$("filters").addEventListener("submit", (e) => e.preventDefault());
$("follow").addEventListener("change", () => { timeline.follow = $("follow").checked; timeline.schedule(true); });

let knownConns = 0, knownMethods = 0;
function updateConnFilter() {
  if (timeline.conns.size !== knownConns) {
    knownConns = timeline.conns.size;
    const sel = $("filter-conn"), v = sel.value;
    sel.replaceChildren(el("option", { value: "" }, "every conn"), ...[...timeline.conns].sort().map((c) => el("option", { value: c }, c)));
    sel.value = v;
  }
  if (timeline.methods.size !== knownMethods) {
    knownMethods = timeline.methods.size;
    $("methods").replaceChildren(...[...timeline.methods].sort().map((m) => el("option", { value: m })));
  }
}

for (const [id, raw] of [["view-pretty", false], ["view-raw", true]]) $(id).addEventListener("click", () => {
  timeline.raw = raw; $("view-pretty").setAttribute("aria-pressed", String(!raw)); $("view-raw").setAttribute("aria-pressed", String(raw));
  if (timeline.detailEntry) timeline.showDetail(timeline.detailEntry);
});

// Replay: the same params, a new id, on the page's own connection.
$("replay").addEventListener("click", async () => {
  const e = timeline.detailEntry; if (!e || !e.req) return;
  const p = e.req.m.params ? JSON.parse(JSON.stringify(e.req.m.params)) : undefined;
  if (p && p._meta && p._meta.progressToken !== undefined) p._meta.progressToken = "replay-" + Math.random().toString(36).slice(2);
  request(e.method, p, { raw: true }).catch(() => { /* shown in the timeline */ });
});

$("era").value = state.era;
$("era").addEventListener("change", () => { state.era = $("era").value; localStorage.setItem("luamcp-era", state.era); if (state.live) start(); });
$("reset").addEventListener("click", async () => {
  try { state.resetting = true; const r = await fetch(api("/reset"), { method: "POST" }); if (!r.ok) throw new Error("reset refused: " + r.status); state.initialized = false; } catch (e) { showError(e); }
});

document.addEventListener("keydown", (e) => {
  if (e.key === "/" && !/INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName)) { e.preventDefault(); $("search").focus(); }
});

drawRoots();
connect();

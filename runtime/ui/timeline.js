// The wire: every event from /events indexed as it arrives (pairs, groups,
// eras, filters), drawn as a virtual list (only the visible rows are in the
// DOM), redrawn at most once per animation frame.
import { el, prettyJSON, fmtTime, fmtDuration, explainCode } from "./util.js";

const ROW_H = 22;
const META_VERSION = "io.modelcontextprotocol/protocolVersion";

export class Timeline {
  constructor({ list, spacer, detail, detailTitle, count, onReplay, onSelect }) {
    Object.assign(this, { list, spacer, detail, detailTitle, count, onReplay, onSelect });
    this.seen = new Set();          // seqs already indexed (EventSource replays after a reconnect)
    this.entries = [];              // one per row, in arrival order
    this.shown = [];                // indexes into entries that pass the filter
    this.calls = new Map();         // conn|requester|id -> entry of a request waiting for (or with) its response
    this.progress = new Map();      // conn|progressToken -> entry
    this.running = new Map();       // conn -> entries of calls still running, newest last
    this.eraOf = new Map();         // conn -> protocol version negotiated by initialize
    this.methods = new Set();
    this.conns = new Set();
    this.filter = { text: "", method: "", tool: "", id: "", dir: "", conn: "" };
    this.selected = -1;             // position in shown
    this.raw = false;
    this.follow = true;
    this.dirty = false;
    this.pool = [];
    // Following the newest rows while the list is scrolled to its end, as a
    // terminal does; scrolling up stops it until the end is reached again.
    this.atEnd = true;
    list.addEventListener("scroll", () => { this.atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - ROW_H; this.schedule(); });
    window.addEventListener("resize", () => this.schedule());
    list.addEventListener("keydown", (e) => this.key(e));
    list.addEventListener("click", (e) => { const r = e.target.closest(".tl-row"); if (r) this.select(Number(r.dataset.pos)); });
  }

  // ---- indexing -----------------------------------------------------------
  add(ev) {
    if (ev.seq !== undefined) { if (this.seen.has(ev.seq)) return; this.seen.add(ev.seq); }
    if (ev.kind === "message") this.addMessage(ev);
    else if (ev.kind === "reload") this.push({ kind: "reload", t: ev.t, ev, ok: ev.ok !== false, changes: null });
    else if (ev.kind === "conn") {
      this.conns.add(ev.conn);
      if (ev.state === "closed") { this.eraOf.delete(ev.conn); this.running.delete(ev.conn); }
      this.push({ kind: "conn", t: ev.t, conn: ev.conn, ev });
    } else if (ev.kind === "stderr") this.push({ kind: "stderr", t: ev.t, ev });
    else if (ev.kind === "transport") this.push({ kind: "transport", t: ev.t, conn: ev.conn, ev, error: true });
    this.schedule();
  }

  addMessage(ev) {
    this.conns.add(ev.conn);
    let msg, bad = false;
    try { msg = JSON.parse(ev.text); } catch { bad = true; }
    if (bad || msg === null || typeof msg !== "object") {
      this.push({ kind: "garbage", t: ev.t, conn: ev.conn, dir: ev.dir, ev, error: true });
      return;
    }
    const parts = Array.isArray(msg) ? msg : [msg];
    const batch = Array.isArray(msg) ? parts.length : 0;
    for (const m of parts) this.addOne(ev, m, batch);
  }

  addOne(ev, m, batch) {
    const { conn, dir } = ev;
    const hasId = m && m.id !== undefined && m.id !== null;
    if (m && typeof m.method === "string" && hasId) {                        // a request
      if (m.method === "initialize" && m.params && m.params.protocolVersion) this.eraOf.set(conn, m.params.protocolVersion);
      const era = this.eraFor(conn, m, ev);
      const e = this.push({ kind: "call", t: ev.t, conn, dir, era, method: m.method, id: m.id, req: { ev, m }, res: null, kids: [], batch,
        tool: m.method === "tools/call" && m.params ? m.params.name : (m.method === "prompts/get" && m.params ? m.params.name : undefined) });
      this.methods.add(m.method);
      this.calls.set(`${conn}|${dir}|${JSON.stringify(m.id)}`, e);
      const token = m.params && m.params._meta && m.params._meta.progressToken;
      if (token !== undefined) this.progress.set(`${conn}|${JSON.stringify(token)}`, e);
      if (!this.running.has(conn)) this.running.set(conn, []);
      this.running.get(conn).push(e);
    } else if (m && typeof m.method === "string") {                           // a notification
      this.methods.add(m.method);
      const p = m.params || {};
      let owner = null;
      if (m.method === "notifications/progress") owner = this.progress.get(`${conn}|${JSON.stringify(p.progressToken)}`);
      else if (m.method === "notifications/cancelled") owner = this.calls.get(`${conn}|${dir}|${JSON.stringify(p.requestId)}`);
      else if (m.method === "notifications/message" && dir === "s2c") { const r = this.running.get(conn); owner = r && r.length ? r[r.length - 1] : null; }
      const era = owner ? owner.era : this.eraFor(conn, m, ev);
      const n = { t: ev.t, dir, method: m.method, m, ev };
      if (owner && !owner.res) { owner.kids.push(n); if (m.method === "notifications/cancelled") owner.cancelled = true; this.touch(owner); return; }
      this.push({ kind: "note", t: ev.t, conn, dir, era, method: m.method, note: n, batch });
    } else if (hasId && (m.result !== undefined || m.error !== undefined)) { // a response
      const other = dir === "s2c" ? "c2s" : "s2c";
      const e = this.calls.get(`${conn}|${other}|${JSON.stringify(m.id)}`);
      if (e && !e.res) {
        e.res = { ev, m };
        e.dur = ev.t - e.t;
        e.error = m.error !== undefined || (m.result && m.result.isError === true);
        if (e.method === "initialize" && m.result && m.result.protocolVersion) this.eraOf.set(conn, m.result.protocolVersion);
        const r = this.running.get(conn); if (r) { const i = r.indexOf(e); if (i >= 0) r.splice(i, 1); }
        this.touch(e);
        return;
      }
      this.push({ kind: "lone", t: ev.t, conn, dir, era: this.eraFor(conn, m, ev), id: m.id, res: { ev, m }, error: m.error !== undefined });
    } else {
      this.push({ kind: "garbage", t: ev.t, conn, dir, ev, m, error: true });
    }
  }

  // A request's own _meta first (2026-07-28), then the version the
  // connection's initialize negotiated, as the page saw it or, when the
  // history no longer holds it, as luamcp says (ev.version).
  eraFor(conn, m, ev) {
    const v = m && m.params && m.params._meta && m.params._meta[META_VERSION];
    if (v) return v;
    if (m && m.method === "server/discover") return "2026-07-28";
    return this.eraOf.get(conn) || (ev && ev.version) || "";
  }

  push(e) {
    e.i = this.entries.length;
    this.entries.push(e);
    if (this.matches(e)) this.shown.push(e.i);
    return e;
  }
  touch() { this.dirty = true; this.schedule(); }

  // The call a result belongs to, for the page's own requests.
  callFor(conn, id) { return this.calls.get(`${conn}|c2s|${JSON.stringify(id)}`); }

  // ---- filtering ----------------------------------------------------------
  setFilter(f) {
    Object.assign(this.filter, f);
    this.shown = [];
    for (const e of this.entries) if (this.matches(e)) this.shown.push(e.i);
    this.selected = Math.min(this.selected, this.shown.length - 1);
    this.schedule(true);
  }

  matches(e) {
    const f = this.filter;
    if (f.dir && e.dir !== f.dir) return false;
    if (f.conn && e.conn !== f.conn) return false;
    if (f.method) {
      const q = f.method.toLowerCase();
      const ms = [e.method || (e.kind === "reload" ? "reload" : e.kind)].concat((e.kids || []).map((k) => k.method));
      if (!ms.some((x) => x && x.toLowerCase().includes(q))) return false;
    }
    if (f.tool && !(e.tool && e.tool.toLowerCase().includes(f.tool.toLowerCase()))) return false;
    if (f.id && !(e.id !== undefined && String(e.id) === f.id)) return false;
    if (f.text) {
      const q = f.text.toLowerCase();
      const texts = [e.req && e.req.ev.text, e.res && e.res.ev.text, e.note && e.note.ev.text, e.ev && (e.ev.text || e.ev.error || e.ev.why), e.summary]
        .concat((e.kids || []).map((k) => k.ev.text));
      if (!texts.some((t) => t && t.toLowerCase().includes(q))) return false;
    }
    return true;
  }

  // ---- drawing ------------------------------------------------------------
  schedule(force) {
    if (force) this.dirty = true;
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = 0; this.render(); });
  }

  render() {
    const n = this.shown.length;
    this.spacer.style.height = n * ROW_H + "px";
    if (this.follow && this.atEnd) this.list.scrollTop = this.list.scrollHeight;
    const top = this.list.scrollTop, h = this.list.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW_H) - 2), last = Math.min(n, Math.ceil((top + h) / ROW_H) + 2);
    let used = 0;
    for (let pos = first; pos < last; pos++) {
      let row = this.pool[used];
      if (!row) { row = el("div", { class: "tl-row", role: "option" }); this.pool.push(row); }
      if (!row.parentNode) this.list.append(row);
      this.fill(row, this.entries[this.shown[pos]], pos);
      used++;
    }
    for (let k = used; k < this.pool.length; k++) if (this.pool[k].parentNode) this.pool[k].remove();
    this.count.textContent = `${n.toLocaleString()} of ${this.entries.length.toLocaleString()} rows`;
    // what the drawn rows are filtered by (a test, or a tool, waits for it)
    const f = this.filter;
    this.list.dataset.filter = [f.text, f.method, f.tool, f.id, f.dir, f.conn].join("|");
    const sel = this.shown[this.selected];
    this.list.setAttribute("aria-activedescendant", sel !== undefined && this.selected >= first && this.selected < last ? `tl-opt-${sel}` : "");
    if (this.detailEntry && this.dirty) this.showDetail(this.detailEntry);
    this.dirty = false;
  }

  fill(row, e, pos) {
    row.id = `tl-opt-${e.i}`;
    row.style.top = pos * ROW_H + "px";
    const d = row.dataset;
    for (const k of Object.keys(d)) delete d[k];
    d.pos = pos; d.seq = (e.req || e.res || e.note || e).ev ? (e.req || e.res || e.note || e).ev.seq : "";
    d.kind = e.kind; d.conn = e.conn || ""; d.dir = e.dir || "";
    if (e.method) d.method = e.method;
    if (e.tool) d.tool = e.tool;
    if (e.id !== undefined) d.id = String(e.id);
    if (e.kind === "call") { d.paired = e.res ? "true" : "false"; d.pending = e.res ? "false" : "true"; if (e.res) d.durationMs = e.dur.toFixed(3); }
    if (e.kind === "reload") d.ok = String(e.ok);
    if (e.error) d.error = "true";
    row.setAttribute("aria-selected", pos === this.selected ? "true" : "false");
    const arrow = e.dir === "c2s" ? "→" : e.dir === "s2c" ? "←" : "";
    row.replaceChildren(
      el("span", { class: "c-time" }, fmtTime(e.t)),
      el("span", { class: "c-conn" }, e.conn || ""),
      el("span", { class: "c-dir dir-" + (e.dir || "") , title: e.dir || "" }, arrow),
      el("span", { class: "c-era", title: "protocol era" }, e.era || ""),
      el("span", { class: "c-what" }, this.summary(e)),
      el("span", { class: "c-dur" }, e.kind === "call" ? (e.res ? fmtDuration(e.dur) : e.cancelled ? "cancelled" : "…") : ""));
  }

  summary(e) {
    switch (e.kind) {
      case "call": {
        let s = `${e.method}${e.tool ? " " + e.tool : ""} #${e.id}`;
        const prog = e.kids.filter((k) => k.method === "notifications/progress").length;
        const logs = e.kids.filter((k) => k.method === "notifications/message").length;
        if (prog) s += ` [${prog} progress]`;
        if (logs) s += ` [${logs} log]`;
        if (e.cancelled) s += " [cancelled]";
        if (e.batch) s += ` [batch of ${e.batch}]`;
        if (e.res) {
          const m = e.res.m;
          if (m.error) s += ` ✗ ${m.error.code} ${m.error.message || ""}`;
          else if (m.result && m.result.isError) s += " ✗ tool error";
          else s += " ✓ " + brief(m.result);
        }
        return s;
      }
      case "note": return `${e.method} ${brief(e.note.m.params)}`;
      case "lone": return `response #${e.id} without a request ${e.res.m.error ? e.res.m.error.code : ""}`;
      case "garbage": return "not JSON-RPC: " + (e.ev.text || "").slice(0, 200);
      case "reload":
        if (!e.ok) return `reload failed: ${e.ev.error || "?"} — still serving the previous version`;
        return `reload #${e.ev.generation}: ${e.ev.why || ""}${e.summary ? " — " + e.summary : ""}`;
      case "conn": return `connection ${e.conn} ${e.ev.state}${e.ev.why ? ": " + e.ev.why : ""}`;
      case "stderr": return "stderr: " + e.ev.text;
      case "transport": return `transport: ${e.ev.error || ""}${e.ev.body ? " — " + e.ev.body.slice(0, 200) : ""}`;
    }
    return "";
  }

  // ---- selection and the detail pane --------------------------------------
  key(e) {
    const n = this.shown.length;
    const page = Math.max(1, Math.floor(this.list.clientHeight / ROW_H) - 1);
    let to = this.selected;
    if (e.key === "ArrowDown") to = Math.min(n - 1, to + 1);
    else if (e.key === "ArrowUp") to = Math.max(0, to < 0 ? n - 1 : to - 1);
    else if (e.key === "Home") to = 0;
    else if (e.key === "End") to = n - 1;
    else if (e.key === "PageDown") to = Math.min(n - 1, to + page);
    else if (e.key === "PageUp") to = Math.max(0, to - page);
    else if (e.key === "Enter" || e.key === " ") { if (to >= 0) { this.select(to); this.detail.focus(); } e.preventDefault(); return; }
    else if (e.key === "Escape") { this.selected = -1; this.detailEntry = null; this.schedule(true); return; }
    else return;
    e.preventDefault();
    this.select(to);
  }

  select(pos) {
    if (pos < 0 || pos >= this.shown.length) return;
    this.selected = pos;
    const y = pos * ROW_H;
    this.atEnd = pos === this.shown.length - 1;
    if (y < this.list.scrollTop) this.list.scrollTop = y;
    else if (y + ROW_H > this.list.scrollTop + this.list.clientHeight) this.list.scrollTop = y + ROW_H - this.list.clientHeight;
    this.showDetail(this.entries[this.shown[pos]]);
    this.schedule(true);
  }

  showDetail(e) {
    this.detailEntry = e;
    const body = [];
    const part = (title, ev, m) => {
      body.push(el("h4", {}, `${title} · ${fmtTime(ev.t)} · ${ev.conn} ${ev.dir}${ev.truncated ? ` · cut from ${ev.truncated} bytes` : ""}`));
      if (this.raw || m === undefined) body.push(el("pre", { class: "raw" }, ev.text));
      else body.push(prettyJSON(m));
    };
    if (e.req) part(`request ${e.method}`, e.req.ev, e.req.m);
    for (const k of e.kids || []) part(k.method, k.ev, k.m);
    if (e.res) {
      part(e.kind === "call" ? `response (${fmtDuration(e.dur)})` : "response", e.res.ev, e.res.m);
      const err = e.res.m.error;
      if (err) {
        body.push(el("p", { class: "err-expl" }, `${err.code}: ${explainCode(err.code)}`));
        const path = err.data && (err.data.path || err.data.schemaPath || err.data.instancePath || err.data.pointer);
        if (path) body.push(el("p", { class: "err-expl" }, `schema path: ${path}`));
        if (err.data && Array.isArray(err.data.errors)) for (const x of err.data.errors) body.push(el("p", { class: "err-expl" }, `${x.path || x.instancePath || ""} ${x.message || JSON.stringify(x)}`));
      }
    } else if (e.kind === "call") body.push(el("p", { class: "muted" }, "waiting for the response…"));
    if (e.note) part(e.method, e.note.ev, e.note.m);
    if (e.kind === "garbage") body.push(el("p", { class: "err-expl" }, "not JSON (shown as it went over the wire)"), el("pre", { class: "raw" }, e.ev.text));
    if (e.kind === "reload" || e.kind === "conn" || e.kind === "stderr" || e.kind === "transport") {
      body.push(el("p", {}, this.summary(e)));
      if (e.changes) body.push(...e.changes.map((c) => el("div", { class: "change", "data-change": c.how, "data-name": c.name }, `${c.how} ${c.type}: ${c.name}`)));
      if (e.kind === "reload" && !e.ok) body.push(el("p", { class: "err-expl" }, "The reload failed; the previous version is still serving."));
      if (!this.raw) body.push(prettyJSON(e.ev)); else body.push(el("pre", { class: "raw" }, JSON.stringify(e.ev)));
    }
    this.detail.replaceChildren(...body);
    this.detailTitle.textContent = e.kind === "call" ? `${e.method} #${e.id}` : e.kind;
    this.onSelect && this.onSelect(e);
  }
}

function brief(v) {
  if (v === undefined) return "";
  let s;
  if (v && Array.isArray(v.content)) s = v.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ");
  else s = JSON.stringify(v);
  return s.length > 160 ? s.slice(0, 160) + "…" : s;
}

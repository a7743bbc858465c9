// Small DOM and JSON helpers shared by the page's modules.
export function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}

// Pretty JSON as DOM (no innerHTML: the text is the server's).
export function prettyJSON(value) {
  const pre = el("pre", { class: "json" });
  const walk = (v, ind) => {
    if (v === null || typeof v === "boolean") pre.append(el("span", { class: "json-lit" }, String(v)));
    else if (typeof v === "number") pre.append(el("span", { class: "json-num" }, String(v)));
    else if (typeof v === "string") pre.append(el("span", { class: "json-str" }, JSON.stringify(v)));
    else if (Array.isArray(v)) {
      if (!v.length) { pre.append("[]"); return; }
      pre.append("[\n");
      v.forEach((x, i) => { pre.append(ind + "  "); walk(x, ind + "  "); pre.append(i < v.length - 1 ? ",\n" : "\n"); });
      pre.append(ind + "]");
    } else {
      const ks = Object.keys(v);
      if (!ks.length) { pre.append("{}"); return; }
      pre.append("{\n");
      ks.forEach((k, i) => { pre.append(ind + "  ", el("span", { class: "json-key" }, JSON.stringify(k)), ": "); walk(v[k], ind + "  "); pre.append(i < ks.length - 1 ? ",\n" : "\n"); });
      pre.append(ind + "}");
    }
  };
  walk(value, "");
  return pre;
}

export function fmtTime(t) {
  const d = new Date(t);
  return d.toTimeString().slice(0, 8) + "." + String(d.getMilliseconds()).padStart(3, "0");
}
export function fmtDuration(ms) {
  if (ms < 1) return ms.toFixed(2) + " ms";
  if (ms < 1000) return ms.toFixed(1) + " ms";
  return (ms / 1000).toFixed(2) + " s";
}

// What an error code means, in words.
const CODES = {
  "-32700": "parse error: the message was not valid JSON",
  "-32600": "invalid request: not a valid JSON-RPC request",
  "-32601": "method not found: the server does not serve this method",
  "-32602": "invalid params: the params did not match what the method (or the tool's schema) expects",
  "-32603": "internal error: the server failed while handling it",
  "-32002": "resource not found (MCP)",
  "-32042": "URL elicitation required (MCP): the user must open a URL first",
  "-32020": "header mismatch (2026-07-28): an Mcp-* header disagrees with the body",
  "-32021": "missing capability (2026-07-28): the request needs a client capability it did not declare",
  "-32022": "unsupported protocol version (2026-07-28)",
  "-32000": "server busy: a limit is full, try again later",
  "-32003": "insufficient scope: the token lacks a scope this needs",
  "-32800": "request cancelled",
};
export function explainCode(code) {
  return CODES[String(code)] || (code >= -32099 && code <= -32000 ? "server error (implementation-defined)" : "application error");
}

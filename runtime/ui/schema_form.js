// A form generated from a JSON Schema, and the checks the page makes before
// sending what it holds. Each field carries data-path (a JSON Pointer such as
// /a or /items/0/name); errors are shown next to the field that has them.
import { el } from "./util.js";

const INPUT_FOR_FORMAT = { date: "date", "date-time": "datetime-local", time: "time", email: "email", uri: "url", "uri-reference": "url", url: "url" };

function typeOf(schema) {
  if (!schema || typeof schema !== "object") return "any";
  let t = schema.type;
  if (Array.isArray(t)) t = t.find((x) => x !== "null") || "any";
  if (!t && schema.properties) t = "object";
  if (!t && schema.enum) t = "enum";
  return t || "any";
}

// build(schema, {idPrefix}) -> {root: HTMLElement, value(): any, validate(): errors[]}
export function buildForm(schema, opts = {}) {
  const prefix = opts.idPrefix || "f";
  const root = el("div", { class: "schema-fields" });
  const getters = [];
  const node = field(schema || { type: "object" }, "", null, true, root, prefix, getters);
  return {
    root,
    value: () => node.get(),
    validate() {
      for (const e of root.querySelectorAll(".field-error")) e.textContent = "";
      for (const e of root.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
      const value = node.get();
      const errors = validate(schema || {}, value === undefined ? {} : value, "");
      for (const err of errors) {
        const box = root.querySelector(`.field-error[data-error-for="${cssEscape(err.path)}"]`) ||
          root.querySelector(`.field-error[data-error-for=""]`);
        if (box) box.textContent = (box.textContent ? box.textContent + "; " : "") + err.message;
        const input = root.querySelector(`[data-path="${cssEscape(err.path)}"]`);
        if (input) input.setAttribute("aria-invalid", "true");
      }
      return errors;
    },
  };
}

function cssEscape(s) { return s.replace(/["\\]/g, "\\$&"); }

let uid = 0;
function field(schema, path, name, required, parent, prefix, getters) {
  const t = typeOf(schema);
  const id = `${prefix}-${++uid}`;
  const wrap = el("div", { class: "field", "data-field": path });
  const label = name !== null
    ? el("label", { class: "lbl", for: id }, name, required ? el("span", { class: "req", title: "required", "aria-hidden": "true" }, "*") : null)
    : null;
  const hint = [schema.title && schema.title !== name ? schema.title : "", schema.description || ""].filter(Boolean).join(" — ");
  const error = el("div", { class: "field-error", "data-error-for": path, role: "alert" });
  let get;
  if (t === "object" && name === null) {
    // the root: its properties, no fieldset
    const props = schema.properties || {};
    const req = new Set(schema.required || []);
    const kids = Object.keys(props).map((k) => [k, field(props[k], `${path}/${k}`, k, req.has(k), wrap, prefix, getters)]);
    if (!kids.length) wrap.append(el("p", { class: "muted" }, "No arguments."));
    wrap.append(error);
    parent.append(wrap);
    get = () => { const o = {}; for (const [k, n] of kids) { const v = n.get(); if (v !== undefined) o[k] = v; } return o; };
    return { get };
  }
  if (label) wrap.append(label);
  if (hint) wrap.append(el("div", { class: "hint", id: id + "-hint" }, hint));
  if (schema.enum || schema.const !== undefined) {
    const values = schema.enum || [schema.const];
    const sel = el("select", { id, "data-path": path, "aria-describedby": hint ? id + "-hint" : null, "aria-required": required ? "true" : null });
    if (!required || schema.default === undefined) sel.append(el("option", { value: "" }, required ? "(choose)" : "(none)"));
    values.forEach((v, i) => sel.append(el("option", { value: String(i) }, JSON.stringify(v))));
    if (schema.default !== undefined) { const i = values.findIndex((v) => JSON.stringify(v) === JSON.stringify(schema.default)); if (i >= 0) sel.value = String(i); }
    wrap.append(sel);
    get = () => (sel.value === "" ? undefined : values[Number(sel.value)]);
  } else if (t === "object") {
    const fs = el("fieldset", { "data-path": path }, el("legend", {}, name));
    wrap.replaceChildren(fs);
    if (hint) fs.append(el("div", { class: "hint" }, hint));
    const props = schema.properties || {};
    const req = new Set(schema.required || []);
    const kids = Object.keys(props).map((k) => [k, field(props[k], `${path}/${k}`, k, req.has(k), fs, prefix, getters)]);
    let extra = null;
    if (!kids.length) { extra = el("textarea", { id, rows: 3, "data-path": path, "aria-label": name + " (JSON object)" }, schema.default ? JSON.stringify(schema.default, null, 1) : ""); fs.append(extra); }
    get = () => {
      if (extra) return parseJSONField(extra);
      const o = {}; let any = false;
      for (const [k, n] of kids) { const v = n.get(); if (v !== undefined) { o[k] = v; any = true; } }
      return any || required ? o : undefined;
    };
  } else if (t === "array") {
    const itemSchema = schema.items || {};
    const list = el("div", { class: "array", "data-path": path });
    const items = [];
    const renumber = () => items.forEach((it, i) => { it.box.dataset.index = String(i); });
    const add = (value) => {
      const box = el("div", { class: "array-item row" });
      const sub = { default: value, ...itemSchema }; if (value !== undefined) sub.default = value;
      const n = field(sub, `${path}/${items.length}`, `${name}[${items.length}]`, true, box, prefix, getters);
      const it = { box, n };
      const rm = el("button", { type: "button", class: "danger", "aria-label": `Remove ${name} item` }, "−");
      rm.addEventListener("click", () => { items.splice(items.indexOf(it), 1); box.remove(); renumber(); });
      box.append(rm); items.push(it); list.append(box);
    };
    const addBtn = el("button", { type: "button", id, "aria-label": `Add an item to ${name}` }, "+ add item");
    addBtn.addEventListener("click", () => add());
    (Array.isArray(schema.default) ? schema.default : []).forEach((v) => add(v));
    wrap.append(list, addBtn);
    get = () => { const a = items.map((it) => it.n.get()).filter((v) => v !== undefined); return a.length || required ? a : undefined; };
  } else if (t === "boolean") {
    if (required) {
      const cb = el("input", { type: "checkbox", id, "data-path": path });
      cb.checked = schema.default === true;
      wrap.append(cb);
      get = () => cb.checked;
    } else {
      const sel = el("select", { id, "data-path": path }, el("option", { value: "" }, "(none)"), el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
      if (typeof schema.default === "boolean") sel.value = String(schema.default);
      wrap.append(sel);
      get = () => (sel.value === "" ? undefined : sel.value === "true");
    }
  } else if (t === "integer" || t === "number") {
    const inp = el("input", { type: "number", id, "data-path": path, step: t === "integer" ? "1" : "any",
      min: schema.minimum, max: schema.maximum, "aria-required": required ? "true" : null });
    if (schema.default !== undefined) inp.value = String(schema.default);
    wrap.append(inp);
    get = () => { if (inp.value.trim() === "") return undefined; const n = Number(inp.value); return Number.isNaN(n) ? inp.value : n; };
  } else if (t === "string") {
    const type = INPUT_FOR_FORMAT[schema.format] || "text";
    const long = !schema.format && !schema.maxLength && /text|body|content|description|message/i.test(name || "");
    const inp = long ? el("textarea", { id, rows: 3, "data-path": path }) : el("input", { type, id, "data-path": path });
    if (schema.maxLength) inp.maxLength = schema.maxLength;
    if (required) inp.setAttribute("aria-required", "true");
    if (schema.default !== undefined) inp.value = String(schema.default);
    wrap.append(inp);
    get = () => {
      if (inp.value === "" && !required) return undefined;
      if (schema.format === "date-time" && inp.value && !/Z|[+-]\d\d:\d\d$/.test(inp.value)) return new Date(inp.value).toISOString();
      return inp.value;
    };
  } else {
    const ta = el("textarea", { id, rows: 2, "data-path": path, placeholder: "JSON" });
    if (schema.default !== undefined) ta.value = JSON.stringify(schema.default);
    wrap.append(ta);
    get = () => parseJSONField(ta);
  }
  wrap.append(error);
  parent.append(wrap);
  const node = { get };
  getters.push(node);
  return node;
}

function parseJSONField(ta) {
  if (ta.value.trim() === "") return undefined;
  try { return JSON.parse(ta.value); } catch { return { __invalidJSON: ta.value }; }
}

function jsType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

// validate(schema, value, path) -> [{path, message}]: the common keywords,
// enough to catch what a form can get wrong before the server does.
export function validate(schema, value, path) {
  const errs = [];
  if (!schema || typeof schema !== "object") return errs;
  if (value && typeof value === "object" && value.__invalidJSON !== undefined) return [{ path, message: "not valid JSON" }];
  const types = schema.type ? [].concat(schema.type) : null;
  const vt = jsType(value);
  if (types && !types.some((t) => t === vt || (t === "number" && vt === "integer"))) {
    errs.push({ path, message: `expected ${types.join(" or ")}, got ${vt === "string" && value === "" ? "nothing" : vt}` });
    return errs;
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) errs.push({ path, message: "must be one of " + schema.enum.map((e) => JSON.stringify(e)).join(", ") });
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value)) errs.push({ path, message: "must be " + JSON.stringify(schema.const) });
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errs.push({ path, message: `must be ≥ ${schema.minimum}` });
    if (schema.maximum !== undefined && value > schema.maximum) errs.push({ path, message: `must be ≤ ${schema.maximum}` });
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) errs.push({ path, message: `must be > ${schema.exclusiveMinimum}` });
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) errs.push({ path, message: `must be < ${schema.exclusiveMaximum}` });
    if (schema.multipleOf && Math.abs(value / schema.multipleOf - Math.round(value / schema.multipleOf)) > 1e-9) errs.push({ path, message: `must be a multiple of ${schema.multipleOf}` });
  }
  if (typeof value === "string") {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) errs.push({ path, message: `at least ${schema.minLength} characters` });
    if (schema.maxLength !== undefined && n > schema.maxLength) errs.push({ path, message: `at most ${schema.maxLength} characters` });
    if (schema.pattern) { try { if (!new RegExp(schema.pattern, "u").test(value)) errs.push({ path, message: `must match ${schema.pattern}` }); } catch { /* a pattern JS cannot read: the server checks it */ } }
    if (schema.format === "email" && !/^[^@\s]+@[^@\s]+$/.test(value)) errs.push({ path, message: "not an email address" });
    if ((schema.format === "uri" || schema.format === "url") && !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(value)) errs.push({ path, message: "not a URI" });
    if (schema.format === "date" && !/^\d{4}-\d\d-\d\d$/.test(value)) errs.push({ path, message: "not a date (YYYY-MM-DD)" });
  }
  if (vt === "array") {
    if (schema.minItems !== undefined && value.length < schema.minItems) errs.push({ path, message: `at least ${schema.minItems} items` });
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errs.push({ path, message: `at most ${schema.maxItems} items` });
    if (schema.items) value.forEach((v, i) => errs.push(...validate(schema.items, v, `${path}/${i}`)));
  }
  if (vt === "object") {
    for (const k of schema.required || []) if (value[k] === undefined) errs.push({ path: `${path}/${k}`, message: "required" });
    const props = schema.properties || {};
    for (const [k, v] of Object.entries(value)) {
      if (props[k]) errs.push(...validate(props[k], v, `${path}/${k}`));
      else if (schema.additionalProperties === false) errs.push({ path, message: `unknown property ${k}` });
    }
  }
  return errs;
}

/*
 * lua_schema.c - compiled JSON Schemas as Lua values, and the check of
 * tools/call arguments, which runs in C on the parsed request before any
 * Lua table is built for it.
 */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "core/luamcp_limits.h"
#include "app/lua_json.h"
#include "core/schema.h"
#include "app/app.h"
#include "app/lua_schema.h"

#define SCHEMA_MT "mcp.Schema"

/* A compiled schema owned by Lua: freed by __gc. */
typedef struct schema_ud {
  schema *compiled;
} schema_ud;

/* What tools/call needs to know about one tool's input. Owner: the vm's
 * tool_inputs map; the schema itself belongs to the tool's schema_ud, which
 * the library keeps alive while the entry exists. */
typedef struct tool_input {
  schema *compiled;
  bool coerce;
  int timeout_ms; /* the tool's own deadline; < 0: the server's default */
  tool_task_mode task;
  int task_after_ms; /* TOOL_TASK_*: become a task after this long (0: at once) */
  int task_poll_ms;  /* the pollIntervalMs it suggests (0: the default) */
  bool has_scopes;
  char scopes[];     /* mcp.tool{scopes = ...}, space-separated: checked before the handler runs */
} tool_input;

/* One report for the whole process: validation runs on the loop thread and
 * a report is 18 KB, too big for a coroutine's C stack to carry lightly. */
static schema_report report;

static int schema_gc(lua_State *L) {
  schema_ud *u = luaL_checkudata(L, 1, SCHEMA_MT);
  schema_free(u->compiled);
  u->compiled = NULL;
  return 0;
}

/* schema_compile(json_text [, what]) -> schema | raises "what /pointer: message" */
int lua_schema_compile(lua_State *L) {
  size_t n;
  const char *text = luaL_checklstring(L, 1, &n);
  const char *what = luaL_optstring(L, 2, "schema");
  json_error jerr;
  json_doc *doc = json_parse(text, n, MAX_JSON_DEPTH, &jerr);
  if (!doc) return luaL_error(L, "%s is not valid JSON: %s", what, jerr.message);
  schema_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->compiled = NULL;
  luaL_setmetatable(L, SCHEMA_MT);
  schema_error err;
  u->compiled = schema_compile(json_doc_root(doc), NULL, &err);
  json_doc_free(doc);
  if (!u->compiled) return luaL_error(L, "%s %s: %s", what, err.pointer[0] ? err.pointer : "/", err.message);
  return 1;
}

static schema *check_schema(lua_State *L, int idx) {
  schema_ud *u = luaL_checkudata(L, idx, SCHEMA_MT);
  if (!u->compiled) luaL_error(L, "this schema was released");
  return u->compiled;
}

/* Push {text = "...", errors = {{path=..., message=...}, ...}}. */
static void push_report(lua_State *L, const schema_report *r) {
  lua_createtable(L, 0, 2);
  buf text = BUF_INIT;
  schema_report_format(r, &text);
  lua_pushlstring(L, text.data ? text.data : "", text.len);
  lua_setfield(L, -2, "text");
  buf_free(&text);
  unsigned count = schema_report_count(r);
  lua_createtable(L, (int)count, 0);
  for (unsigned i = 0; i < count; i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, schema_report_path(r, i));
    lua_setfield(L, -2, "path");
    lua_pushstring(L, schema_report_message(r, i));
    lua_setfield(L, -2, "message");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  luaL_setmetatable(L, LJSON_ARRAY_MT);
  lua_setfield(L, -2, "errors");
}

/* schema_validate(schema, value) -> true | false, report */
int lua_schema_validate(lua_State *L) {
  schema *s = check_schema(L, 1);
  luaL_checkany(L, 2);
  buf text = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, 2, &text, err, sizeof err)) {
    buf_free(&text);
    return luaL_error(L, "cannot validate a value with no JSON form: %s", err);
  }
  json_doc *doc = json_parse(text.data, text.len, MAX_JSON_DEPTH, NULL);
  buf_free(&text);
  if (!doc) return luaL_error(L, "cannot validate a value nested too deeply");
  bool ok = schema_validate(s, json_doc_root(doc), &report);
  json_doc_free(doc);
  lua_pushboolean(L, ok);
  if (ok) return 1;
  push_report(L, &report);
  return 2;
}

/* tool_input(name, schema | nil [, coerce [, timeout_ms [, task, after_ms,
 * poll_ms [, scopes]]]]): what tools/call
 * checks for the tool called name (nil forgets it). */
int lua_schema_tool_input(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  free(strmap_remove(&v->tool_inputs, name));
  if (lua_isnoneornil(L, 2)) return 0;
  size_t scopes_len = 0;
  const char *scopes = luaL_optlstring(L, 8, NULL, &scopes_len);
  schema *compiled = check_schema(L, 2);
  tool_input *in = malloc(sizeof *in + scopes_len + 1);
  if (!in) return luaL_error(L, "not enough memory");
  in->compiled = compiled;
  in->has_scopes = scopes && scopes_len;
  memcpy(in->scopes, scopes ? scopes : "", scopes_len + 1);
  in->coerce = lua_toboolean(L, 3);
  in->timeout_ms = (int)luaL_optinteger(L, 4, -1);
  /* 5: nil | "optional" | "required"; 6: after_ms; 7: poll_ms */
  const char *task = luaL_optstring(L, 5, NULL);
  in->task = !task ? TOOL_TASK_NEVER : strcmp(task, "required") == 0 ? TOOL_TASK_REQUIRED : TOOL_TASK_OPTIONAL;
  in->task_after_ms = (int)luaL_optinteger(L, 6, 0);
  in->task_poll_ms = (int)luaL_optinteger(L, 7, 0);
  strmap_set(&v->tool_inputs, name, in);
  return 0;
}

void lua_schema_register(lua_State *L) {
  luaL_newmetatable(L, SCHEMA_MT);
  lua_pushcfunction(L, schema_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

void lua_schema_forget_tools(vm *v) {
  for (size_t i = 0; i < v->tool_inputs.bucket_count; i++)
    for (strmap_entry *e = v->tool_inputs.buckets[i]; e; e = e->next) free(e->value);
  strmap_free(&v->tool_inputs);
}

void lua_schema_check_call(lua_State *co, vm *v, const json_value *params, int params_idx, tool_plan *plan) {
  const json_value *name = json_object_get(params, "name");
  tool_input *in = name && name->type == JSON_STRING ? strmap_get(&v->tool_inputs, name->u.string) : NULL;
  if (in && in->timeout_ms >= 0) {
    plan->timeout_ms = in->timeout_ms;
    plan->own_timeout = true;
  }
  if (in) {
    plan->known = true;
    if (in->has_scopes) plan->scopes = in->scopes;
    plan->task = in->task;
    plan->task_after_ms = in->task_after_ms;
    plan->task_poll_ms = in->task_poll_ms;
  }
  const json_value *args = json_object_get(params, "arguments");
  if (!in || (args && args->type != JSON_OBJECT)) {
    lua_pushnil(co); /* unknown tool or malformed arguments: dispatch says so */
    return;
  }
  static json_doc *empty;
  if (!args) {
    /* Omitted arguments validate as {}. */
    if (!empty) empty = json_parse("{}", 2, 1, NULL);
    args = json_doc_root(empty);
  }
  if (schema_validate(in->compiled, args, NULL)) {
    lua_pushnil(co);
    return;
  }
  schema_validate(in->compiled, args, &report);
  if (in->coerce) {
    /* Forgive the usual slips ("5" for 5, "true" for true, JSON in a
     * string), but only if that makes the arguments valid. */
    buf fixed = BUF_INIT;
    json_doc *doc = schema_coerce(in->compiled, args, &fixed) ? json_parse(fixed.data, fixed.len, MAX_JSON_DEPTH, NULL)
                                                               : NULL;
    buf_free(&fixed);
    if (doc && schema_validate(in->compiled, json_doc_root(doc), NULL)) {
      ljson_push(co, json_doc_root(doc));
      lua_setfield(co, params_idx, "arguments");
      json_doc_free(doc);
      lua_pushnil(co);
      return;
    }
    json_doc_free(doc);
  }
  push_report(co, &report);
}

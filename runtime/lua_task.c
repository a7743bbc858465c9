/*
 * lua_task.c - every request runs in its own coroutine.
 *
 * The OpenResty pattern: a yielding C API (mcp.sleep, ctx:sample, ...) arms
 * an event, records what the task waits for, and ends with lua_yield; the
 * event's callback resumes the coroutine. A cancelled task is never resumed
 * again: its event is disarmed, its coroutine closed (running its
 * to-be-closed variables) and unanchored.
 */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"
#include "luamcp_limits.h"
#include "log.h"
#include "lua_json.h"
#include "vm.h"

#define CTX_MT "mcp.Context"

/* The ctx userdata a handler receives. Owner: Lua's GC; the task points at
 * it and clears `task` when it ends, so a ctx kept past its request fails
 * cleanly instead of touching freed memory. */
typedef struct ctx_handle {
  task *task;
} ctx_handle;

task *task_of(lua_State *co) { return *(task **)lua_getextraspace(co); }

/* ---- Lifecycle ------------------------------------------------------- */

static void task_release(uv_handle_t *h) { free(h->data); }

/* Stop waiting for the client's reply, and tell the client we no longer
 * need it. */
static void cancel_client_request(task *t) {
  session *s = t->client_session;
  t->wait = TASK_RUNNING_OR_READY;
  if (!s) return;
  session_forget_request(s, t->client_request_id);
  if (s->state != SESSION_CLOSED) {
    char params[96];
    int n = snprintf(params, sizeof params, "{\"requestId\":%lld,\"reason\":\"no longer needed\"}",
                     t->client_request_id);
    session_notify(s, NULL, "notifications/cancelled", params, (size_t)n);
  }
  t->client_session = NULL;
}

static void task_free(task *t) {
  vm *v = t->vm;
  if (t->ctx) t->ctx->task = NULL;
  if (t->call) t->call->app_data = NULL;
  if (t->wait == TASK_WAIT_CLIENT) cancel_client_request(t);
  *(task **)lua_getextraspace(t->co) = NULL;
  /* Close the coroutine so its to-be-closed variables run now. */
  lua_resetthread(t->co);
  luaL_unref(v->L, LUA_REGISTRYINDEX, t->co_ref);
  v->live_tasks--;
  if (t->timer_initialized) {
    t->timer.data = t;
    uv_close((uv_handle_t *)&t->timer, task_release);
  } else {
    free(t);
  }
}

/* Create the coroutine in protected mode: even lua_newthread can fail when
 * the state is at its memory cap. */
static int new_thread(lua_State *L) {
  lua_newthread(L);
  return 1;
}

static task *task_new(vm *v) {
  lua_State *L = v->L;
  lua_pushcfunction(L, new_thread);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    log_write(LOG_ERROR, "cannot start a coroutine: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return NULL;
  }
  task *t = calloc(1, sizeof *t);
  t->vm = v;
  t->co = lua_tothread(L, -1);
  t->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  *(task **)lua_getextraspace(t->co) = t;
  v->live_tasks++;
  return t;
}

/* Turn a Lua error value into the JSON-RPC error that answers the call. */
static void fail_call_with_error(lua_State *co, call *c) {
  if (lua_type(co, -1) == LUA_TTABLE && lua_getmetatable(co, -1)) {
    luaL_getmetatable(co, VM_RPC_ERROR_MT);
    bool is_rpc = lua_rawequal(co, -1, -2);
    lua_pop(co, 2);
    if (is_rpc) {
      lua_getfield(co, -1, "code");
      lua_getfield(co, -2, "message");
      lua_getfield(co, -3, "data");
      int code = (int)lua_tointeger(co, -3);
      const char *message = lua_tostring(co, -2);
      buf data = BUF_INIT;
      char err[160];
      bool has_data = !lua_isnil(co, -1) && ljson_encode(co, -1, &data, err, sizeof err);
      call_fail(c, code, message, has_data ? data.data : NULL, has_data ? data.len : 0);
      buf_free(&data);
      lua_pop(co, 3);
      return;
    }
  }
  const char *message = luaL_tolstring(co, -1, NULL);
  log_write(LOG_ERROR, "%s failed: %s", c->method, message);
  buf text = BUF_INIT;
  buf_printf(&text, "Internal error: %s", message);
  call_fail(c, JSONRPC_INTERNAL_ERROR, text.data, NULL, 0);
  buf_free(&text);
  lua_pop(co, 1);
}

/* A tool's own mistake that escaped the library (a result with no JSON
 * form, a stray yield) reaches the model as a tool error, not a protocol
 * error. */
static bool answer_as_tool_error(call *c, const char *what, const char *detail) {
  if (strcmp(c->method, "tools/call") != 0) return false;
  buf text = BUF_INIT, result = BUF_INIT;
  buf_printf(&text, "%s%s", what, detail);
  buf_puts(&result, "{\"content\":[{\"type\":\"text\",\"text\":");
  json_write_string(&result, text.data, text.len);
  buf_puts(&result, "}],\"isError\":true}");
  call_respond(c, result.data, result.len);
  buf_free(&text);
  buf_free(&result);
  return true;
}

/* Answer the task's call from the coroutine's final status. The call is
 * detached first: answering frees it. */
static void finish(task *t, int status, bool stray_yield) {
  lua_State *co = t->co;
  call *c = t->call;
  if (!c) return;
  t->call = NULL;
  c->app_data = NULL;
  if (stray_yield) {
    static const char message[] =
        "a handler yielded to luamcp with coroutine.yield; yield only inside coroutines you create, and use "
        "mcp.sleep and the ctx methods to wait";
    log_write(LOG_ERROR, "%s: %s", c->method, message);
    if (!answer_as_tool_error(c, message, "")) call_fail(c, JSONRPC_INTERNAL_ERROR, message, NULL, 0);
    return;
  }
  if (status != LUA_OK) {
    fail_call_with_error(co, c);
    return;
  }
  buf out = BUF_INIT;
  char err[200];
  if (ljson_encode(co, -1, &out, err, sizeof err)) {
    call_respond(c, out.data, out.len);
  } else {
    log_write(LOG_ERROR, "%s: the result could not be encoded as JSON: %s", c->method, err);
    if (!answer_as_tool_error(c, "the tool returned something that cannot be sent as JSON: ", err)) {
      buf text = BUF_INIT;
      buf_printf(&text, "Internal error: the result could not be encoded as JSON: %s", err);
      call_fail(c, JSONRPC_INTERNAL_ERROR, text.data, NULL, 0);
      buf_free(&text);
    }
  }
  buf_free(&out);
}

void task_resume(task *t, int nargs) {
  int nres = 0;
  t->running = true;
  t->wait = TASK_RUNNING_OR_READY;
  int status = lua_resume(t->co, t->vm->L, nargs, &nres);
  t->running = false;
  if (t->cancelled) {
    task_free(t);
    return;
  }
  if (status == LUA_YIELD) {
    lua_pop(t->co, nres);
    if (t->wait != TASK_RUNNING_OR_READY) return;
  }
  finish(t, status, status == LUA_YIELD);
  task_free(t);
}

void task_cancel(task *t) {
  t->call = NULL;
  if (t->running) {
    t->cancelled = true; /* freed when lua_resume returns */
    return;
  }
  if (t->timer_initialized) uv_timer_stop(&t->timer);
  task_free(t);
}

/* ---- Starting a call ------------------------------------------------- */

static int entry_continue(lua_State *co, int status, lua_KContext k) {
  (void)co;
  (void)status;
  (void)k;
  return 1;
}

/* The body of a request's coroutine: build params and ctx (in protected
 * mode, since both allocate), check a tool call's arguments, then run
 * mcp._dispatch(method, params, ctx, check). */
static int task_entry(lua_State *co) {
  const json_value *params = lua_touserdata(co, 1);
  task *t = task_of(co);
  lua_settop(co, 0);
  lua_rawgeti(co, LUA_REGISTRYINDEX, t->vm->dispatch_ref);
  lua_pushstring(co, t->call->method);
  if (params) ljson_push(co, params);
  else lua_newtable(co);
  ctx_handle *h = lua_newuserdatauv(co, sizeof *h, 1);
  h->task = t;
  t->ctx = h;
  luaL_setmetatable(co, CTX_MT);
  lua_pushvalue(co, 3);
  lua_setiuservalue(co, -2, 1); /* ctx keeps params, for ctx.meta */
  if (params && params->type == JSON_OBJECT && strcmp(t->call->method, "tools/call") == 0)
    lua_schema_check_call(co, t->vm, params, 3);
  else lua_pushnil(co);
  lua_callk(co, 4, 1, 0, entry_continue);
  return 1;
}

void task_start_call(vm *v, call *c, const json_value *params) {
  task *t = task_new(v);
  if (!t) {
    call_fail(c, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory", NULL, 0);
    return;
  }
  t->call = c;
  c->app_data = t;
  lua_pushcfunction(t->co, task_entry);
  lua_pushlightuserdata(t->co, (void *)params);
  task_resume(t, 1);
}

/* ---- mcp.sleep ------------------------------------------------------- */

static task *check_task(lua_State *co, const char *what) {
  task *t = task_of(co);
  if (!t)
    luaL_error(co, "%s can only be called while handling a request, from the handler's own coroutine (use mcp.spawn "
                   "for concurrent work)",
               what);
  return t;
}

static void on_sleep_done(uv_timer_t *timer) {
  task *t = timer->data;
  task_resume(t, 0);
}

int task_lua_sleep(lua_State *co) {
  lua_Number ms = luaL_checknumber(co, 1);
  task *t = check_task(co, "mcp.sleep");
  if (!(ms > 0)) ms = 0;
  if (ms > 1e12) ms = 1e12;
  if (!t->timer_initialized) {
    uv_timer_init(t->vm->loop, &t->timer);
    t->timer_initialized = true;
  }
  t->timer.data = t;
  uv_timer_start(&t->timer, on_sleep_done, (uint64_t)ms, 0);
  t->wait = TASK_WAIT_TIMER;
  return lua_yield(co, 0);
}

/* ---- Requests to the client (sampling, elicitation, roots) ----------- */

/* How a wait for the client ended, passed to the continuation. The reply
 * itself travels as a pointer into the message's tree, which stays valid
 * while the coroutine is resumed synchronously; the continuation converts
 * it, in protected mode. */
enum { REPLY_RESULT = 1, REPLY_ERROR, REPLY_SESSION_ENDED, REPLY_TIMEOUT };

static void resume_client_wait(task *t, int how, const json_value *value) {
  t->wait = TASK_RUNNING_OR_READY;
  t->client_session = NULL;
  if (t->timer_initialized) uv_timer_stop(&t->timer);
  lua_pushinteger(t->co, how);
  lua_pushlightuserdata(t->co, (void *)value);
  task_resume(t, 2);
}

/* The client answered (result or error), or the session closed (neither). */
static void on_client_reply(void *data, const json_value *result, const json_value *error) {
  task *t = data;
  if (t->wait != TASK_WAIT_CLIENT) return;
  if (result) resume_client_wait(t, REPLY_RESULT, result);
  else if (error) resume_client_wait(t, REPLY_ERROR, error);
  else resume_client_wait(t, REPLY_SESSION_ENDED, NULL);
}

static void on_client_timeout(uv_timer_t *timer) {
  task *t = timer->data;
  if (t->wait != TASK_WAIT_CLIENT) return;
  if (t->client_session) session_forget_request(t->client_session, t->client_request_id);
  resume_client_wait(t, REPLY_TIMEOUT, NULL);
}

/* After the reply: return the result, or raise what went wrong. The method
 * name is in slot 2 of the original call. */
static int client_request_continue(lua_State *co, int status, lua_KContext k) {
  (void)status;
  (void)k;
  const char *method = lua_tostring(co, 2);
  int how = (int)lua_tointeger(co, -2);
  const json_value *value = lua_touserdata(co, -1);
  lua_pop(co, 2);
  switch (how) {
    case REPLY_RESULT: ljson_push(co, value); return 1;
    case REPLY_ERROR: {
      const json_value *code = json_object_get(value, "code"), *message = json_object_get(value, "message");
      return luaL_error(co, "%s failed: the client answered with error %d: %s", method,
                        code && code->type == JSON_INTEGER ? (int)code->u.integer : 0,
                        message && message->type == JSON_STRING ? message->u.string : "(no message)");
    }
    case REPLY_TIMEOUT:
      return luaL_error(co, "%s failed: the client did not answer within %d ms", method,
                        task_of(co)->vm->srv->opts.client_timeout_ms);
    default: return luaL_error(co, "%s failed: the session ended", method);
  }
}

/* ctx:_request(method, params): send a request to the client on the call's
 * stream and wait for its answer. */
static int ctx_request(lua_State *L);

/* ---- ctx ------------------------------------------------------------- */

static ctx_handle *check_ctx(lua_State *L) { return luaL_checkudata(L, 1, CTX_MT); }

/* The live call behind a ctx, or a Lua error if its request has ended. */
static call *ctx_call(lua_State *L) {
  ctx_handle *h = check_ctx(L);
  if (!h->task || !h->task->call) luaL_error(L, "this request has already ended; ctx is only valid during it");
  return h->task->call;
}

static int push_json_text(lua_State *L, const char *json) {
  if (!json) {
    lua_pushnil(L);
    return 1;
  }
  json_doc *doc = json_parse(json, strlen(json), MAX_JSON_DEPTH, NULL);
  if (!doc) {
    lua_pushnil(L);
    return 1;
  }
  ljson_push(L, json_doc_root(doc));
  json_doc_free(doc);
  return 1;
}

static int ctx_log(lua_State *L) {
  call *c = ctx_call(L);
  size_t n;
  const char *name = luaL_checklstring(L, 2, &n);
  int level = log_level_parse(name, n);
  if (level < 0) return luaL_argerror(L, 2, "not a log level (debug, info, notice, warning, error, critical, alert, emergency)");
  luaL_checkany(L, 3);
  const char *logger = luaL_optstring(L, 4, NULL);
  buf data = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, 3, &data, err, sizeof err)) {
    buf_free(&data);
    return luaL_error(L, "ctx:log: %s", err);
  }
  if (lua_type(L, 3) == LUA_TSTRING) log_write(level, "%s: %s", c->method, lua_tostring(L, 3));
  else log_write(level, "%s: %s", c->method, data.data);
  session_log(c->session, c, level, logger, data.data, data.len);
  buf_free(&data);
  return 0;
}

static int ctx_progress(lua_State *L) {
  call *c = ctx_call(L);
  lua_Number progress = luaL_checknumber(L, 2);
  lua_Number total = luaL_optnumber(L, 3, NAN);
  size_t n = 0;
  const char *message = luaL_optlstring(L, 4, NULL, &n);
  const char *problem = call_progress(c, progress, total, message, n);
  if (problem) return luaL_error(L, "ctx:progress: %s", problem);
  return 0;
}

static int ctx_request(lua_State *L) {
  call *c = ctx_call(L);
  const char *method = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  task *t = check_task(L, "ctx:_request");
  buf params = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, 3, &params, err, sizeof err)) {
    buf_free(&params);
    return luaL_error(L, "%s: %s", method, err);
  }
  lua_settop(L, 2);
  t->client_session = c->session;
  t->wait = TASK_WAIT_CLIENT;
  t->client_request_id = session_request(c->session, c, method, params.data, params.len, on_client_reply, t);
  buf_free(&params);
  if (!t->timer_initialized) {
    uv_timer_init(t->vm->loop, &t->timer);
    t->timer_initialized = true;
  }
  t->timer.data = t;
  uv_timer_start(&t->timer, on_client_timeout, (uint64_t)t->vm->srv->opts.client_timeout_ms, 0);
  return lua_yieldk(L, 0, 0, client_request_continue);
}

/* ctx:close_sse_stream(): on HTTP, end this request's SSE stream now; the
 * client resumes it with Last-Event-ID. Returns whether it was closed. */
static int ctx_close_sse_stream(lua_State *L) {
  call *c = ctx_call(L);
  session *s = c->session;
  bool closed = s->transport && s->transport->close_stream && s->transport->close_stream(s, c);
  lua_pushboolean(L, closed);
  return 1;
}

static int ctx_index(lua_State *L) {
  ctx_handle *h = check_ctx(L);
  const char *key = luaL_checkstring(L, 2);
  /* Methods first: they stay callable (and report a clear error) after the
   * request ends. */
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  call *c = h->task ? h->task->call : NULL;
  if (strcmp(key, "cancelled") == 0) {
    lua_pushboolean(L, c == NULL);
    return 1;
  }
  if (!c) return 0;
  if (strcmp(key, "id") == 0) return push_json_text(L, c->id.raw);
  if (strcmp(key, "method") == 0) {
    lua_pushstring(L, c->method);
    return 1;
  }
  if (strcmp(key, "protocol_version") == 0) {
    lua_pushstring(L, c->version ? c->version->name : "");
    return 1;
  }
  if (strcmp(key, "client") == 0) return push_json_text(L, c->session->client_info_json);
  if (strcmp(key, "capabilities") == 0) return push_json_text(L, c->session->client_capabilities_json);
  if (strcmp(key, "meta") == 0) {
    lua_getiuservalue(L, 1, 1);
    if (lua_type(L, -1) != LUA_TTABLE) return 0;
    lua_getfield(L, -1, "_meta");
    return 1;
  }
  if (strcmp(key, "progress_token") == 0) return push_json_text(L, c->progress_token);
  if (strcmp(key, "features") == 0) {
    /* What the request's protocol version offers (from the one table). */
    const protocol_version *v = c->version;
    lua_createtable(L, 0, 5);
    lua_pushboolean(L, v && v->elicitation);
    lua_setfield(L, -2, "elicitation");
    lua_pushboolean(L, v && v->url_elicitation);
    lua_setfield(L, -2, "url_elicitation");
    lua_pushboolean(L, v && v->structured_output);
    lua_setfield(L, -2, "structured_output");
    lua_pushboolean(L, v && v->tool_errors_as_results);
    lua_setfield(L, -2, "tool_errors_as_results");
    lua_pushboolean(L, v && v->batches);
    lua_setfield(L, -2, "batches");
    return 1;
  }
  return 0;
}

static int ctx_tostring(lua_State *L) {
  ctx_handle *h = check_ctx(L);
  call *c = h->task ? h->task->call : NULL;
  if (c) lua_pushfstring(L, "mcp.Context(%s %s)", c->method, c->id.raw);
  else lua_pushliteral(L, "mcp.Context(ended)");
  return 1;
}

void task_register_ctx(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"log", ctx_log},
      {"progress", ctx_progress},
      {"_request", ctx_request},
      {"close_sse_stream", ctx_close_sse_stream},
      {NULL, NULL},
  };
  luaL_newmetatable(L, CTX_MT);
  luaL_newlib(L, methods);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, TASK_CTX_METHODS);
  lua_pushcclosure(L, ctx_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ctx_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

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

static void task_free(task *t) {
  vm *v = t->vm;
  if (t->ctx) t->ctx->task = NULL;
  if (t->call) t->call->app_data = NULL;
  if (t->wait == TASK_WAIT_CLIENT && t->call) session_forget_request(t->call->session, t->client_request_id);
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
 * mode, since both allocate), then run mcp._dispatch(method, params, ctx). */
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
  lua_callk(co, 3, 1, 0, entry_continue);
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
      {NULL, NULL},
  };
  luaL_newmetatable(L, CTX_MT);
  luaL_newlib(L, methods);
  lua_pushcclosure(L, ctx_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ctx_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

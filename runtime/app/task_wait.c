/*
 * task_wait.c - what a task waits on between resumes: mcp.sleep, an
 * operation of another API (mcp.exec, mcp.fs, mcp.http: task_wait_op),
 * another task (mcp.spawn's handles) and the client's reply to a request
 * (sampling, elicitation, roots). Apart from lua_task.c so that a task's
 * life reads without every kind of wait in it: each wait arms its event
 * here and resumes the task through task_resume, which re-checks that the
 * task still waits on that event.
 */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jobs.h"
#include "core/jsonrpc.h"
#include "core/luamcp_limits.h"
#include "core/log.h"
#include "core/observe.h"
#include "core/protocol.h"
#include "core/trace.h"
#include "app/otel.h"
#include "app/lua_json.h"
#include "app/lua_task.h"
#include "app/task_internal.h"

/* ---- Waiting ----------------------------------------------------------- */

/* The first frame of the scripts above the library's (the permission
 * doors wrap mcp.exec and mcp.fs): where a misuse error points. */
int task_script_level(lua_State *co) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(co, level, &ar); level++) {
    if (!lua_getinfo(co, "S", &ar)) break;
    if (strcmp(ar.what, "C") != 0 && strncmp(ar.source, "@[luamcp]", 9) != 0 && strncmp(ar.source, "=[luamcp]", 9) != 0)
      return level;
  }
  return 1;
}

task *task_check(lua_State *co, const char *what) {
  task *t = task_of(co);
  if (!t) {
    luaL_where(co, task_script_level(co));
    lua_pushfstring(co, "%s can only be called while handling a request, from the handler's own coroutine (use "
                        "mcp.spawn for concurrent work)",
                    what);
    lua_concat(co, 2);
    lua_error(co);
  }
  return t;
}

static void on_sleep_done(uv_timer_t *timer) {
  task *t = timer->data;
  if (t->wait == TASK_WAIT_TIMER) task_resume(t, 0);
}

int task_lua_sleep(lua_State *co) {
  lua_Number ms = luaL_checknumber(co, 1);
  task *t = task_check(co, "mcp.sleep");
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

int task_wait_op(lua_State *co, task *t, task_op *op, lua_KFunction k) {
  t->wait = TASK_WAIT_OP;
  t->wait_op = op;
  return lua_yieldk(co, 0, 0, k);
}

/* ---- mcp.spawn and task handles ---------------------------------------- */

/* A root task's handle (ctx:_handle, task_push_root_handle) is never given
 * results (only a spawned task's is, finish_child), so it needs no
 * finalizer: its metatable is mcp.Task's without __gc, which saves the
 * collector a finalizer per A2A request. Same methods, same __name. */
#define TASK_ROOT_HANDLE_MT "mcp.Task.root"

static task_handle *check_handle(lua_State *L) {
  task_handle *h = luaL_testudata(L, 1, TASK_HANDLE_MT);
  if (!h) h = luaL_testudata(L, 1, TASK_ROOT_HANDLE_MT);
  return h ? h : luaL_checkudata(L, 1, TASK_HANDLE_MT); /* neither: mcp.Task's error */
}

static int handle_gc(lua_State *L) {
  task_handle *h = check_handle(L);
  if (h->results_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, h->results_ref);
  h->results_ref = LUA_NOREF;
  return 0;
}

/* Return the finished task's results, or raise its error. */
static int handle_results(lua_State *L, task_handle *h) {
  if (h->state == HANDLE_CANCELLED) return luaL_error(L, "the task was cancelled before it finished");
  if (h->results_ref == LUA_NOREF) return luaL_error(L, "this task's results were already taken by wait()");
  lua_State *from = h->results_co;
  int n = h->nresults;
  luaL_checkstack(L, n + 1, "too many results");
  lua_xmove(from, L, n);
  luaL_unref(L, LUA_REGISTRYINDEX, h->results_ref);
  h->results_ref = LUA_NOREF;
  if (!h->ok) return lua_error(L);
  return n;
}

static int handle_wait_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  lua_settop(L, 1);
  task_handle *h = check_handle(L);
  if (h->state == HANDLE_RUNNING) return luaL_error(L, "the task is still running");
  return handle_results(L, h);
}

/* handle:wait() -> what the task returned (raises what it raised). */
static int handle_wait(lua_State *L) {
  task_handle *h = check_handle(L);
  lua_settop(L, 1);
  if (h->state != HANDLE_RUNNING) return handle_results(L, h);
  task *self = task_check(L, "wait");
  if (h->task == self) return luaL_error(L, "a task cannot wait for itself");
  if (h->task->waiter) return luaL_error(L, "another task is already waiting for this one");
  h->task->waiter = self;
  self->wait = TASK_WAIT_TASK;
  return lua_yieldk(L, 0, 0, handle_wait_continue);
}

static int handle_cancel(lua_State *L) {
  task_handle *h = check_handle(L);
  if (h->state == HANDLE_RUNNING && h->task) task_cancel(h->task);
  return 0;
}

static int handle_done(lua_State *L) {
  lua_pushboolean(L, check_handle(L)->state != HANDLE_RUNNING);
  return 1;
}

void task_register_handle(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"wait", handle_wait}, {"cancel", handle_cancel}, {"done", handle_done}, {NULL, NULL}};
  luaL_newlib(L, methods);
  luaL_newmetatable(L, TASK_HANDLE_MT);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, handle_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, TASK_ROOT_HANDLE_MT);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, TASK_HANDLE_MT);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 2);
}

/* mcp.spawn(fn, ...) -> handle: run fn(...) as a task of the current call,
 * concurrently with it. It starts at once and runs until it first waits. */
int task_lua_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  task *parent = task_check(L, "mcp.spawn");
  vm *v = parent->vm;
  int nargs = lua_gettop(L) - 1;
  task_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  h->results_ref = LUA_NOREF;
  h->vm = v;
  luaL_setmetatable(L, TASK_HANDLE_MT);
  task *t = task_new(v, parent->root);
  if (!t) return luaL_error(L, "not enough memory");
  h->task = t;
  t->handle = h;
  lua_pushvalue(L, -1);
  t->handle_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  /* Move fn and its arguments to the new coroutine, keeping the handle. */
  luaL_checkstack(t->co, nargs + 1, "too many arguments");
  lua_rotate(L, 1, 1); /* handle fn args... */
  lua_pushvalue(L, 2);
  lua_xmove(L, t->co, 1);
  for (int i = 0; i < nargs; i++) {
    lua_pushvalue(L, 3 + i);
    lua_xmove(L, t->co, 1);
  }
  lua_settop(L, 1);
  task_resume(t, nargs);
  return 1;
}

/* ---- Requests to the client (sampling, elicitation, roots) ------------- */

/* How a wait for the client ended, passed to the continuation. The reply
 * travels as JSON text: it is converted in protected mode, and it may have
 * to wait in the deferred queue after its message was freed. */
enum { REPLY_RESULT = 1, REPLY_ERROR, REPLY_SESSION_ENDED, REPLY_TIMEOUT };

/* A request to the client, as a client span under the call's (the
 * semantic conventions' "server initiates the operation"). */
static void start_client_span(task *t, session *s, const char *method) {
  t->client_span = otel_span_start(method, OTEL_KIND_CLIENT, &t->root->trace);
  otel_attr_str(t->client_span, "mcp.method.name", method);
  otel_attr_str(t->client_span, "mcp.session.id", s->name);
}

/* params (a JSON object with no _meta of its own) with _meta.traceparent
 * naming the client span: the client's work joins the trace. */
static void add_traceparent(task *t, buf *params) {
  if (params->len < 2 || params->data[0] != '{') return;
  otel_ids ids;
  otel_span_ids(t->client_span, &ids);
  char tp[TRACEPARENT_LEN + 1];
  otel_traceparent(&ids, tp);
  buf out = BUF_INIT;
  buf_printf(&out, "{\"_meta\":{\"traceparent\":\"%s\"}", tp);
  if (params->len > 2) buf_putc(&out, ',');
  buf_append(&out, params->data + 1, params->len - 1);
  buf_free(params);
  *params = out;
}

static void resume_client_wait(task *t, int how, const json_value *value) {
  t->client_session = NULL;
  if (t->client_span) task_end_client_span(t, how == REPLY_RESULT ? NULL : how == REPLY_ERROR ? "client_error"
                                                                    : how == REPLY_TIMEOUT ? "timeout"
                                                                                           : "session_ended");
  uv_timer_stop(&t->timer);
  lua_pushinteger(t->co, how);
  if (value) {
    buf text = BUF_INIT;
    json_write_value(&text, value);
    lua_pushlstring(t->co, text.data, text.len);
    buf_free(&text);
  } else {
    lua_pushnil(t->co);
  }
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
  task_cancel_client_request(t);
  resume_client_wait(t, REPLY_TIMEOUT, NULL);
}

/* After the reply: return the result, or raise what went wrong. The method
 * name is in slot 2 of the original call. */
static int client_request_continue(lua_State *co, int status, lua_KContext k) {
  (void)status;
  (void)k;
  const char *method = lua_tostring(co, 2);
  int how = (int)lua_tointeger(co, -2);
  size_t n = 0;
  const char *text = lua_tolstring(co, -1, &n);
  json_doc *doc = text ? json_parse(text, n, MAX_JSON_DEPTH, NULL) : NULL;
  const json_value *value = doc ? json_doc_root(doc) : NULL;
  switch (how) {
    case REPLY_RESULT:
      if (!value) break;
      lua_pop(co, 2);
      ljson_push(co, value);
      json_doc_free(doc);
      return 1;
    case REPLY_ERROR: {
      const json_value *code = json_object_get(value, "code"), *message = json_object_get(value, "message");
      lua_pushfstring(co, "%s failed: the client answered with error %d: %s", method,
                      code && code->type == JSON_INTEGER ? (int)code->u.integer : 0,
                      message && message->type == JSON_STRING ? message->u.string : "(no message)");
      json_doc_free(doc);
      return lua_error(co);
    }
    case REPLY_TIMEOUT:
      json_doc_free(doc);
      lua_pushfstring(co, "%s failed: the client did not answer within %d ms", method,
                      task_of(co)->vm->srv->opts.client_timeout_ms);
      return lua_error(co);
    default: break;
  }
  json_doc_free(doc);
  /* No position prefix: the message is about the client, not a line here. */
  lua_pushfstring(co, "%s failed: the session ended", method);
  return lua_error(co);
}

/* ctx:_request's wait (task_internal.h). */
int task_request_client(lua_State *L, task *t, call *c, const char *method, int params_idx) {
  buf params = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, params_idx, &params, err, sizeof err)) {
    buf_free(&params);
    return luaL_error(L, "%s: %s", method, err);
  }
  if (otel_on && t->root->trace.set) {
    start_client_span(t, c->session, method);
    if (lua_getfield(L, params_idx, "_meta") == LUA_TNIL) add_traceparent(t, &params);
  }
  lua_settop(L, 2); /* the method, for client_request_continue */
  t->client_session = c->session;
  t->wait = TASK_WAIT_CLIENT;
  t->client_request_id = session_request(c->session, c, method, params.data, params.len, on_client_reply, t);
  buf_free(&params);
  if (t->client_span) otel_attr_int(t->client_span, "jsonrpc.request.id", t->client_request_id);
  if (!t->timer_initialized) {
    uv_timer_init(t->vm->loop, &t->timer);
    t->timer_initialized = true;
  }
  t->timer.data = t;
  uv_timer_start(&t->timer, on_client_timeout, (uint64_t)t->vm->srv->opts.client_timeout_ms, 0);
  return lua_yieldk(L, 0, 0, client_request_continue);
}

/* ---- Background tasks and signals (agents' tasks, lua/mcp/a2a.lua) ----- */

/* core.background(fn, ...): mcp.spawn's handle, on a root task with no
 * call: what it returns goes nowhere (finish_root drops it), it keeps the
 * identity of the request that started it (ctx.auth in what it calls),
 * and its handle only cancels it (handle:wait sees it end "cancelled"). */
int task_lua_background(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  task *parent = task_of(L); /* none when the bus runs the scripts for another process */
  vm *v = parent ? parent->vm : vm_of(L);
  int nargs = lua_gettop(L) - 1;
  task_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  h->results_ref = LUA_NOREF;
  h->vm = v;
  luaL_setmetatable(L, TASK_HANDLE_MT);
  task *t = task_new(v, NULL);
  if (!t) return luaL_error(L, "not enough memory");
  if (parent) {
    t->identity = auth_identity_ref(parent->root->identity);
    t->trace = parent->root->trace;
  }
  h->task = t;
  t->handle = h;
  lua_pushvalue(L, -1);
  t->handle_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  luaL_checkstack(t->co, nargs + 1, "too many arguments");
  lua_rotate(L, 1, 1); /* handle fn args... */
  lua_pushvalue(L, 2);
  lua_xmove(L, t->co, 1);
  for (int i = 0; i < nargs; i++) {
    lua_pushvalue(L, 3 + i);
    lua_xmove(L, t->co, 1);
  }
  lua_settop(L, 1);
  task_resume(t, nargs);
  return 1;
}

int task_push_root_handle(lua_State *L, task *root) {
  if (root->handle) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, root->handle_ref);
    return 1;
  }
  task_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  h->results_ref = LUA_NOREF;
  h->vm = root->vm;
  luaL_setmetatable(L, TASK_ROOT_HANDLE_MT);
  h->task = root;
  root->handle = h;
  lua_pushvalue(L, -1);
  root->handle_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 1;
}

#define SIGNAL_MT "luamcp.signal"

/* One task waiting on a signal. Owner: the signal's list while it waits;
 * freed when notified, or when its task stops waiting (cancel). */
typedef struct sig_waiter {
  task_op op; /* first: the task's wait_op points here */
  task *t;
  unsigned epoch; /* the signal's epoch when it started waiting */
  struct sig_waiter **list; /* the signal's list head */
  struct sig_waiter *next, *prev;
} sig_waiter;

/* The userdata: the head of its waiters. Every waiter's coroutine holds
 * the signal on its stack, so it outlives them. */
typedef struct lua_signal {
  sig_waiter *waiters;
  unsigned epoch; /* notifications so far */
} lua_signal;

static void signal_unlink(sig_waiter *w) {
  if (w->prev) w->prev->next = w->next;
  else *w->list = w->next;
  if (w->next) w->next->prev = w->prev;
}

static void sig_waiter_cancel(task_op *op) {
  sig_waiter *w = (sig_waiter *)op;
  signal_unlink(w);
  free(w);
}

static int signal_wait_continue(lua_State *L, int status, lua_KContext k) {
  (void)L;
  (void)status;
  (void)k;
  return 0;
}

static int signal_wait(lua_State *L) {
  lua_signal *s = luaL_checkudata(L, 1, SIGNAL_MT);
  task *t = task_check(L, "signal:wait");
  sig_waiter *w = calloc(1, sizeof *w);
  if (!w) return luaL_error(L, "not enough memory");
  w->op.cancel = sig_waiter_cancel;
  w->t = t;
  w->epoch = s->epoch;
  w->list = &s->waiters;
  w->next = s->waiters;
  if (w->next) w->next->prev = w;
  s->waiters = w;
  return task_wait_op(L, t, &w->op, signal_wait_continue);
}

/* Wake every task waiting now (one that waits again while being woken
 * waits for the next notify). */
static int signal_notify(lua_State *L) {
  lua_signal *s = luaL_checkudata(L, 1, SIGNAL_MT);
  unsigned now = ++s->epoch;
  /* One at a time, from the list as it is after each resume: a woken task
   * may cancel another waiter (which unlinks it) or wait again (with this
   * epoch, so it is not woken twice). */
  for (;;) {
    sig_waiter *w = s->waiters;
    while (w && w->epoch == now) w = w->next;
    if (!w) break;
    signal_unlink(w);
    task *t = w->t;
    bool waiting = t->wait == TASK_WAIT_OP && t->wait_op == &w->op;
    free(w);
    if (waiting) {
      t->wait_op = NULL;
      task_resume(t, 0);
    }
  }
  return 0;
}

int task_lua_signal(lua_State *L) {
  lua_signal *s = lua_newuserdatauv(L, sizeof *s, 0);
  s->waiters = NULL;
  s->epoch = 0;
  if (luaL_newmetatable(L, SIGNAL_MT)) {
    static const luaL_Reg methods[] = {{"wait", signal_wait}, {"notify", signal_notify}, {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  return 1;
}

/*
 * lua_task.c - every request runs in its own coroutine, within limits.
 *
 * The OpenResty pattern: a yielding C API (mcp.sleep, ctx:sample, mcp.exec,
 * ...) arms an event, records what the task waits for, and ends with
 * lua_yield; the event's callback resumes the coroutine. A task that ends
 * early (cancelled, or past its deadline) is never resumed again: what it
 * waits for is disarmed, its coroutine closed (running its to-be-closed
 * variables) and unanchored.
 *
 * Code that never yields is stopped the way Redis stops scripts, with a
 * hook that raises an error once the deadline has passed or the call was
 * cancelled, and re-arms itself to raise again on every instruction, so no
 * pcall can swallow it. The hook is only set when needed (watchdog.c: a
 * count hook costs every instruction in Lua 5.4): when a resume passes its
 * deadline, and every TASK_POLL_INTERVAL_MS of a long computation, when the
 * hook lets the loop run one turn (server.nested_poll) so a cancellation
 * sent meanwhile is seen and reported progress is flushed; anything that
 * would run Lua during that turn is queued until the handler stops.
 */
#include <lauxlib.h>
#include <math.h>
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
#include "app/lua_schema.h"
#include "app/lua_task.h"
#include "app/watchdog.h"

#define CTX_MT "mcp.Context"
#define TASK_HANDLE_MT "mcp.Task"

/* The ctx userdata a handler receives. Owner: Lua's GC; the root task
 * points at it and clears `task` when it ends, so a ctx kept past its
 * request fails cleanly instead of touching freed memory; and when the GC
 * takes it first (the handler returned), its __gc clears the task's
 * pointer. */
typedef struct ctx_handle {
  task *task;
} ctx_handle;

typedef enum handle_state { HANDLE_RUNNING, HANDLE_FINISHED, HANDLE_CANCELLED } handle_state;

/* What mcp.spawn returns. Owner: Lua's GC. While the task runs, the task
 * keeps the handle alive (handle_ref); once it has finished, the handle
 * keeps the finished coroutine, whose stack holds the results (results_ref),
 * until they are collected by wait() or the handle is garbage. */
typedef struct task_handle {
  task *task;
  handle_state state;
  bool ok;
  int nresults;
  lua_State *results_co;
  int results_ref;
  vm *vm;
} task_handle;

static void task_free(task *t);
static void collect_big_garbage(vm *v);
static void finish_root(task *t, int status, bool stray_yield);
static void finish_child(task *t, int status, int nres);

/* ---- Deferred events --------------------------------------------------- */

/* An event for t arrived while another task runs (inside its hook's loop
 * turn): run it when that task stops. */
static void defer(task *t, int nargs) {
  vm *v = t->vm;
  t->deferred_nargs += nargs;
  if (t->in_deferred) return;
  t->in_deferred = true;
  t->deferred_next = NULL;
  t->deferred_prev = v->deferred_tail;
  if (v->deferred_tail) v->deferred_tail->deferred_next = t;
  else v->deferred = t;
  v->deferred_tail = t;
}

/* O(1): with tens of thousands of calls in flight, a list scan per freed
 * task made draining quadratic. */
static void unqueue(task *t) {
  if (!t->in_deferred) return;
  vm *v = t->vm;
  if (t->deferred_prev) t->deferred_prev->deferred_next = t->deferred_next;
  else v->deferred = t->deferred_next;
  if (t->deferred_next) t->deferred_next->deferred_prev = t->deferred_prev;
  else v->deferred_tail = t->deferred_prev;
  t->deferred_next = t->deferred_prev = NULL;
  t->in_deferred = false;
}

static void answer_timeout(task *t);

/* Run the events that waited for the running task to stop. One loop, never
 * recursion: a resume it makes ends by calling drain_deferred again, which
 * returns at once (v->draining), and this loop picks up whatever that
 * resume queued. Every queued task is alive: task_free unqueues. */
static void drain_deferred(vm *v) {
  if (v->draining) return;
  v->draining = true;
  while (v->deferred && !v->running && v->srv->nested_poll == 0) {
    task *t = v->deferred;
    unqueue(t);
    int nargs = t->deferred_nargs;
    t->deferred_nargs = 0;
    if (t->cancelled) task_free(t);
    else if (t->root->timed_out && t == t->root) answer_timeout(t);
    else task_resume(t, nargs);
  }
  v->draining = false;
}

/* After a task stops at the top level: the events of every generation, not
 * only its own. The task that computed may belong to an older generation
 * than the one an event is for (a reload happened meanwhile); nothing else
 * would drain that queue. */
static void drain_all_generations(vm *v) {
  lua_app *app = v->app;
  if (!app) {
    drain_deferred(v);
    return;
  }
  if (app->current) drain_deferred(app->current);
  for (vm *g = app->retired; g; g = g->next_retired) drain_deferred(g);
  if (v != app->current && !v->retired) drain_deferred(v); /* not yet, or no longer, in the app's lists */
}

/* ---- Lifecycle --------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h) {
  task *t = h->data;
  if (--t->open_handles == 0) free(t);
}

/* Stop waiting for the client's reply, and tell the client we no longer
 * need it. */
static void cancel_client_request(task *t) {
  session *s = t->client_session;
  t->client_session = NULL;
  if (!s) return;
  session_forget_request(s, t->client_request_id);
  if (s->state != SESSION_CLOSED) {
    char params[96];
    int n = snprintf(params, sizeof params, "{\"requestId\":%lld,\"reason\":\"no longer needed\"}",
                     t->client_request_id);
    session_notify(s, NULL, "notifications/cancelled", params, (size_t)n);
  }
}

static void end_client_span(task *t, const char *error_type);

/* Disarm whatever the task waits for, so nothing resumes it. */
static void stop_waiting(task *t) {
  switch (t->wait) {
    case TASK_WAIT_TIMER: uv_timer_stop(&t->timer); break;
    case TASK_WAIT_CLIENT:
      uv_timer_stop(&t->timer);
      cancel_client_request(t);
      if (t->client_span) end_client_span(t, "cancelled");
      break;
    case TASK_WAIT_OP:
      if (t->wait_op) t->wait_op->cancel(t->wait_op);
      t->wait_op = NULL;
      break;
    case TASK_WAIT_TASK:
      for (task *c = t->root->children; c; c = c->next_child)
        if (c->waiter == t) c->waiter = NULL;
      break;
    case TASK_WAIT_INPUT:
      if (t->timer_initialized) uv_timer_stop(&t->timer);
      if (t->root->job) {
        job_abandon(t->vm->srv, t->root->job, t);
        server_job_changed(t->vm->srv, t->root->job);
      }
      break;
    case TASK_NOT_WAITING: break;
  }
  t->wait = TASK_NOT_WAITING;
}

/* A spawned task that ends without finishing normally: its handle says so
 * and whoever waits on it gets an error. */
static void abandon_handle(task *t) {
  task_handle *h = t->handle;
  if (h) {
    h->task = NULL;
    h->state = HANDLE_CANCELLED;
    t->handle = NULL;
  }
  if (t->handle_ref != LUA_NOREF) luaL_unref(t->vm->L, LUA_REGISTRYINDEX, t->handle_ref);
  t->handle_ref = LUA_NOREF;
  task *w = t->waiter;
  t->waiter = NULL;
  if (w && w->wait == TASK_WAIT_TASK) task_resume(w, 0); /* its continuation sees the cancellation */
}

static void task_free(task *t) {
  vm *v = t->vm;
  bool root = t == t->root;
  unqueue(t);
  stop_waiting(t);
  if (t == t->root) {
    while (t->children) task_cancel(t->children);
    if (t->params_bytes >= LJSON_BORROW_BYTES) v->big_garbage += t->params_bytes;
    if (t->ctx) t->ctx->task = NULL;
    if (t->ctx_ref != LUA_NOREF) luaL_unref(v->L, LUA_REGISTRYINDEX, t->ctx_ref);
    t->ctx_ref = LUA_NOREF;
    if (t->call) t->call->app_data = NULL;
    t->call = NULL;
    if (t->job) {
      /* Its work stopped with no outcome (the client cancelled the task,
       * or the server is stopping): the job says so, if not already. */
      job *j = t->job;
      t->job = NULL;
      bool was_running = !job_terminal(j);
      job_detach(v->srv, j, "the task stopped before it finished (the server is stopping)");
      if (was_running) server_job_changed(v->srv, j);
    }
    if (t->deadline_armed) uv_timer_stop(&t->deadline_timer);
    free(t->tool);
    t->tool = NULL;
    auth_identity_unref(t->identity);
    t->identity = NULL;
  } else {
    task *root = t->root;
    if (t->prev_child) t->prev_child->next_child = t->next_child;
    else root->children = t->next_child;
    if (t->next_child) t->next_child->prev_child = t->prev_child;
    abandon_handle(t);
  }
  if (t->live_prev) t->live_prev->live_next = t->live_next;
  else v->tasks = t->live_next;
  if (t->live_next) t->live_next->live_prev = t->live_prev;
  *(task **)lua_getextraspace(t->co) = NULL;
  lua_sethook(t->co, NULL, 0, 0);
  if (t->co_ref != LUA_NOREF) {
    if (lua_status(t->co) == LUA_OK && v->idle_count < TASK_THREAD_POOL) {
      /* It returned normally (its to-be-closed variables are closed): keep
       * it for the next task. */
      lua_settop(t->co, 0);
      v->idle_threads[v->idle_count] = t->co;
      v->idle_refs[v->idle_count++] = t->co_ref;
    } else {
      /* Close it so its to-be-closed variables run now. */
      lua_resetthread(t->co);
      luaL_unref(v->L, LUA_REGISTRYINDEX, t->co_ref);
    }
  }
  v->live_tasks--;
  if (v->retired && vm_drained(v) && v->on_drained) v->on_drained(v);
  t->open_handles = 0;
  if (t->timer_initialized) {
    t->open_handles++;
    uv_close((uv_handle_t *)&t->timer, on_timer_closed);
  }
  if (t->deadline_timer_initialized) {
    t->open_handles++;
    uv_close((uv_handle_t *)&t->deadline_timer, on_timer_closed);
  }
  if (t->promote_timer_initialized) {
    t->open_handles++;
    uv_close((uv_handle_t *)&t->promote_timer, on_timer_closed);
  }
  if (t->open_handles == 0) free(t);
  if (root && !(v->retired && vm_drained(v))) collect_big_garbage(v);
}

/* Create the coroutine in protected mode: even lua_newthread can fail when
 * the state is at its memory cap. */
static int new_thread(lua_State *L) {
  lua_newthread(L);
  return 1;
}

static task *task_new(vm *v, task *root) {
  lua_State *L = v->L;
  task *t = calloc(1, sizeof *t);
  if (v->idle_count > 0) {
    v->idle_count--;
    t->co = v->idle_threads[v->idle_count];
    t->co_ref = v->idle_refs[v->idle_count];
  } else {
    lua_pushcfunction(L, new_thread);
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
      log_write(LOG_ERROR, "cannot start a coroutine: %s", lua_tostring(L, -1));
      lua_pop(L, 1);
      free(t);
      return NULL;
    }
    t->co = lua_tothread(L, -1);
    t->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  t->vm = v;
  t->handle_ref = LUA_NOREF;
  t->ctx_ref = LUA_NOREF;
  t->root = root ? root : t;
  *(task **)lua_getextraspace(t->co) = t;
  v->live_tasks++;
  t->live_next = v->tasks;
  if (t->live_next) t->live_next->live_prev = t;
  v->tasks = t;
  if (root) {
    t->next_child = root->children;
    if (t->next_child) t->next_child->prev_child = t;
    root->children = t;
  }
  return t;
}

/* ---- Big garbage --------------------------------------------------------- */

/* A payload of megabytes dies when its call ends, or, sent back, when its
 * write ends; Lua's pacing (a cycle once the heap has grown by half since
 * the last) then keeps one or two of them in a small heap: a stream of
 * 4 MiB echoes held 12 MiB over the idle RSS, 8 with this. So once big
 * arguments worth
 * LUA_BIG_GARBAGE_BYTES and a quarter of the heap have died, and no
 * result is being written (it may be one of them), collect at once: a
 * full cycle costs about the heap, less than the calls that made the
 * garbage. Never while Lua runs below us (a task, or a handler that lets
 * the loop turn): then the next call or write does it. */
static void collect_big_garbage(vm *v) {
  if (v->big_garbage < LUA_BIG_GARBAGE_BYTES || v->big_garbage < v->mem_used / 4) return;
  if (v->leases || v->running || v->srv->nested_poll > 0) return;
  lua_gc(v->L, LUA_GCCOLLECT);
  v->big_garbage = 0;
}

/* ---- Leases ------------------------------------------------------------ */

/* A result's long strings, borrowed by its chain (core/chain.h) and
 * anchored in a registry table until the transport has written them: a
 * script keeping and changing its result table cannot free them under the
 * write. Owner: created by finish_root holding it once; freed by its
 * release, when the last holder drops it. The generation counts it
 * (vm.leases) and outlives it; if the generation is freed first (at exit),
 * it is orphaned and frees only itself. */
typedef struct task_lease {
  chain_lease base;
  vm *vm;
  int ref; /* the anchoring table */
  struct task_lease *prev, *next;
} task_lease;

static void lease_release(chain_lease *l) {
  task_lease *tl = (task_lease *)l;
  vm *v = tl->vm;
  if (v) {
    /* Not inside Lua code: a write callback, or finish_root after the
     * answer. luaL_unref runs no Lua, only needs two stack slots. */
    if (lua_checkstack(v->L, 2)) luaL_unref(v->L, LUA_REGISTRYINDEX, tl->ref);
    if (tl->prev) tl->prev->next = tl->next;
    else v->lease_list = tl->next;
    if (tl->next) tl->next->prev = tl->prev;
    v->leases--;
    if (v->retired && vm_drained(v) && v->on_drained) v->on_drained(v);
    else collect_big_garbage(v);
  }
  free(tl);
}

static int lease_ref(lua_State *L) {
  lua_pushinteger(L, luaL_ref(L, LUA_REGISTRYINDEX));
  return 1;
}

/* The lease over the anchoring table on top of co's stack (popped), or
 * NULL when there is no memory for it. The registry may grow: that is an
 * allocation, in a protected call (an error raised here would abort). */
static chain_lease *lease_new(vm *v, lua_State *co) {
  task_lease *tl = lua_checkstack(co, 2) ? malloc(sizeof *tl) : NULL;
  if (!tl) {
    lua_pop(co, 1);
    return NULL;
  }
  lua_pushcfunction(co, lease_ref);
  lua_insert(co, -2);
  if (lua_pcall(co, 1, 1, 0) != LUA_OK) {
    lua_pop(co, 1);
    free(tl);
    return NULL;
  }
  tl->base.holders = 1;
  tl->base.release = lease_release;
  tl->vm = v;
  tl->ref = (int)lua_tointeger(co, -1);
  lua_pop(co, 1);
  tl->prev = NULL;
  tl->next = v->lease_list;
  if (tl->next) tl->next->prev = tl;
  v->lease_list = tl;
  v->leases++;
  return &tl->base;
}

void task_orphan_leases(vm *v) {
  for (task_lease *tl = v->lease_list; tl; tl = tl->next) tl->vm = NULL;
  v->lease_list = NULL;
  v->leases = 0;
}

/* ---- Answers ----------------------------------------------------------- */

/* Does the root still owe an answer (to its call, or to the MCP task its
 * call became)? */
static bool has_destination(const task *root) { return root->call || root->job; }

static const char *answer_method(const task *t) { return t->call ? t->call->method : t->job ? t->job->method : "?"; }

/* What log lines call a request: "tool add" for a tools/call (the author
 * knows their tools, not the method), else its method. */
static const char *answer_subject(const task *t, char *out, size_t cap) {
  const task *root = t->root ? t->root : t;
  if (root->tool) {
    snprintf(out, cap, "tool %s", root->tool);
    return out;
  }
  return answer_method(t);
}

/* The root's outcome goes to its call (which answering frees) or to its
 * job; either way the root owes nothing afterwards. */
static void answer(task *t, bool ok, const char *json, size_t len, int code, const char *message) {
  call *c = t->call;
  job *j = t->job;
  t->call = NULL;
  t->job = NULL;
  if (c) {
    c->app_data = NULL;
    if (ok) call_respond(c, json, len);
    else call_fail(c, code, message, json, len);
  } else if (j) {
    server *srv = t->vm->srv;
    buf err = BUF_INIT;
    if (!ok) {
      /* A failed task carries the JSON-RPC error the call would have had. */
      jsonrpc_write_error_object(&err, code, message, json, len);
      if (!message) message = jsonrpc_code_message(code);
    }
    job_finish(srv, j, ok, ok ? json : err.data, ok ? len : err.len, ok ? NULL : message);
    server_job_changed(srv, j);
    buf_free(&err);
  }
}

static void answer_result(task *t, const char *json, size_t len) { answer(t, true, json, len, 0, NULL); }

/* A result in pieces: to the call as it is, to a job as one text. */
static void answer_chain(task *t, const chain *result) {
  if (t->call) {
    call *c = t->call;
    t->call = NULL;
    c->app_data = NULL;
    call_respond_chain(c, result);
    return;
  }
  buf flat = BUF_INIT;
  chain_flatten(result, &flat);
  answer_result(t, flat.data, flat.len);
  buf_free(&flat);
}

static void answer_error(task *t, int code, const char *message, const char *data_json, size_t data_len) {
  answer(t, false, data_json, data_len, code, message);
}

/* The caller lacks the scopes a primitive needs: the call is refused with
 * call_fail_scope (over HTTP a 403 whose challenge names them). The
 * library raised it as an rpc_error whose data (on top of co's stack) is
 * {requiredScopes = {...}}. */
static void answer_scope(lua_State *co, task *t, const char *message) {
  buf required = BUF_INIT;
  if (lua_type(co, -1) == LUA_TTABLE && lua_checkstack(co, 3)) {
    if (lua_getfield(co, -1, "requiredScopes") == LUA_TTABLE) {
      for (lua_Integer i = 1; lua_rawgeti(co, -1, i) == LUA_TSTRING && i <= 64; i++) {
        if (required.len) buf_putc(&required, ' ');
        buf_append_str(&required, lua_tostring(co, -1));
        lua_pop(co, 1);
      }
      lua_pop(co, 1); /* the value that ended the list */
    }
    lua_pop(co, 1); /* requiredScopes */
  }
  call *c = t->call;
  t->call = NULL;
  c->app_data = NULL;
  call_fail_scope(c, required.len ? required.data : "", message);
  buf_free(&required);
}

/* Turn a Lua error value into the JSON-RPC error that answers the call. */
static void fail_with_error(lua_State *co, task *t) {
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
      if (code == MCP_INSUFFICIENT_SCOPE && t->call) {
        answer_scope(co, t, message);
        lua_pop(co, 3);
        return;
      }
      buf data = BUF_INIT;
      char err[160];
      bool has_data = !lua_isnil(co, -1) && ljson_encode(co, -1, &data, err, sizeof err);
      answer_error(t, code, message, has_data ? data.data : NULL, has_data ? data.len : 0);
      buf_free(&data);
      lua_pop(co, 3);
      return;
    }
  }
  const char *message = lua_type(co, -1) == LUA_TSTRING ? lua_tostring(co, -1) : luaL_typename(co, -1);
  /* error({code = 42}) in a read or get: its JSON, not "table". */
  buf raised = BUF_INIT;
  char encode_err[160];
  if (lua_type(co, -1) == LUA_TTABLE && ljson_encode(co, -1, &raised, encode_err, sizeof encode_err)) {
    buf shown = BUF_INIT;
    buf_printf(&shown, "a table was raised, %.*s (give error() a string, or use mcp.rpc_error(code, message))",
               (int)raised.len, raised.data);
    buf_free(&raised);
    raised = shown;
    message = raised.data;
  }
  char subject[160];
  log_write(LOG_ERROR, "%s failed: %s", answer_subject(t, subject, sizeof subject), message);
  buf text = BUF_INIT;
  buf_printf(&text, "Internal error: %s", message);
  answer_error(t, JSONRPC_INTERNAL_ERROR, text.data, NULL, 0);
  buf_free(&text);
  buf_free(&raised);
}

/* A tool's own mistake that escaped the library (a result with no JSON
 * form, a stray yield, a limit) reaches the model as a tool error, not a
 * protocol error. Other methods get -32603. */
static void answer_problem(task *t, const char *what, const char *detail) {
  buf text = BUF_INIT;
  buf_printf(&text, "%s%s", what, detail);
  if (strcmp(answer_method(t), "tools/call") == 0) {
    if (t->call && t->call->outcome == CALL_OK) call_set_outcome(t->call, CALL_TOOL_ERROR);
    buf result = BUF_INIT;
    buf_puts(&result, "{\"content\":[{\"type\":\"text\",\"text\":");
    json_write_string(&result, text.data, text.len);
    buf_puts(&result, "}],\"isError\":true}");
    answer_result(t, result.data, result.len);
    buf_free(&result);
  } else {
    answer_error(t, JSONRPC_INTERNAL_ERROR, text.data, NULL, 0);
  }
  buf_free(&text);
}

/* The root's deadline passed: answer with an error naming the limit and
 * stop everything it started. */
static void answer_timeout(task *t) {
  if (has_destination(t)) {
    if (t->call) call_set_outcome(t->call, CALL_TIMEOUT);
    char limit[96];
    snprintf(limit, sizeof limit, "%d ms", t->timeout_ms);
    char subject[160];
    log_write(LOG_WARNING, "%s: stopped at its time limit (%s)", answer_subject(t, subject, sizeof subject), limit);
    answer_problem(t, "stopped: the call exceeded its time limit of ", limit);
  }
  task_free(t);
}

/* Answer the root task's call (or its job) from the coroutine's final
 * status. */
static void finish_root(task *t, int status, bool stray_yield) {
  lua_State *co = t->co;
  if (!has_destination(t)) {
    /* Answered before its handler ran (plan_job refused the call). */
    task_free(t);
    return;
  }
  if (t->timed_out) {
    answer_timeout(t);
    return;
  }
  if (stray_yield) {
    static const char message[] =
        "a handler yielded to luamcp with coroutine.yield; yield only inside coroutines you create, and use "
        "mcp.sleep and the ctx methods to wait";
    char subject[160];
    log_write(LOG_ERROR, "%s: %s", answer_subject(t, subject, sizeof subject), message);
    answer_problem(t, message, "");
  } else if (status != LUA_OK) {
    fail_with_error(co, t);
  } else {
    /* One chain for every result (its own bytes are copied on the way);
     * long strings are borrowed, not copied, under a lease that keeps
     * them until the transport has written them. */
    static chain out;
    chain_clear(&out);
    char err[200];
    if (t->call && t->tool && call_observed(t->call) && lua_type(co, -1) == LUA_TTABLE) {
      /* Counted apart: a tool that answered with isError. */
      lua_rawgeti(co, LUA_REGISTRYINDEX, t->vm->is_error_ref); /* "isError" (app.h says why) */
      if (lua_rawget(co, -2) == LUA_TBOOLEAN && lua_toboolean(co, -1)) /* raw: no metatable runs here */
        call_set_outcome(t->call, CALL_TOOL_ERROR);
      lua_pop(co, 1);
    }
    if (ljson_encode_chain(co, -1, &out, err, sizeof err)) {
      if (out.count) out.lease = lease_new(t->vm, co);
      if (out.count && !out.lease) {
        /* No memory to keep the strings past this call: send a copy, made
         * while the result on the stack still holds them. */
        buf flat = BUF_INIT;
        chain_flatten(&out, &flat);
        answer_result(t, flat.data, flat.len);
        buf_free(&flat);
      } else {
        answer_chain(t, &out);
      }
      chain_lease_drop(out.lease);
    } else {
      char subject[160];
      log_write(LOG_ERROR, "%s: the result could not be encoded as JSON: %s", answer_subject(t, subject, sizeof subject),
                err);
      answer_problem(t, "the result cannot be sent as JSON: ", err);
    }
    if (out.own.cap > 1024 * 1024) chain_free(&out);
  }
  task_free(t);
}

/* A spawned task ended: its coroutine (and the results on its stack) moves
 * to the handle, and a task waiting on it goes on. */
static void finish_child(task *t, int status, int nres) {
  task_handle *h = t->handle;
  if (h) {
    h->state = HANDLE_FINISHED;
    h->ok = status == LUA_OK;
    h->nresults = status == LUA_OK ? nres : 1;
    h->results_co = t->co;
    h->results_ref = t->co_ref; /* the handle keeps the coroutine now */
    h->task = NULL;
    t->co_ref = LUA_NOREF;
    t->handle = NULL;
  } else if (status != LUA_OK) {
    log_write(LOG_ERROR, "a task started with mcp.spawn failed: %s",
              lua_type(t->co, -1) == LUA_TSTRING ? lua_tostring(t->co, -1) : "(error object)");
  }
  task *w = t->waiter;
  t->waiter = NULL;
  if (t->handle_ref != LUA_NOREF) luaL_unref(t->vm->L, LUA_REGISTRYINDEX, t->handle_ref);
  t->handle_ref = LUA_NOREF;
  task_free(t);
  if (w && w->wait == TASK_WAIT_TASK) task_resume(w, 0);
}

static void on_deadline(uv_timer_t *timer) {
  task *t = timer->data;
  t->deadline_armed = false;
  if (!has_destination(t) || t->cancelled) return;
  t->timed_out = true;
  if (t->running) return; /* the hook will stop it */
  if (t->vm->srv->nested_poll > 0 || t->vm->running) {
    defer(t, 0);
    return;
  }
  answer_timeout(t);
}

/* --log-format json: lines logged while t runs name its request. */
static void log_context_of(const task *t) {
  const task *root = t->root ? t->root : t;
  const call *c = root->call;
  const char *tool = root->tool;
  if (!tool && c && strcmp(c->method, "tools/call") == 0) tool = call_target(c); /* before the entry sets root->tool */
  /* The call's trace (traces on), so a log line can be found from its span. */
  char trace_id[TRACE_ID_HEX + 1];
  if (root->trace.set) trace_hex(root->trace.trace_id, TRACE_ID_BYTES, trace_id);
  log_set_context(c ? c->session->name : NULL, c ? c->id.raw : NULL, tool, root->trace.set ? trace_id : NULL);
}

void task_resume(task *t, int nargs) {
  vm *v = t->vm;
  if (v->srv->nested_poll > 0) {
    defer(t, nargs);
    return;
  }
  task *outer = v->running;
  int nres = 0;
  v->running = t;
  t->running = true;
  t->wait = TASK_NOT_WAITING;
  lua_State *outer_thread = NULL;
  if (outer) outer_thread = watchdog_switch(t->co);
  else watchdog_enter(t->co, t->root->deadline_ns);
  if (log_json()) log_context_of(t);
  int status = lua_resume(t->co, v->L, nargs, &nres);
  if (log_json()) {
    if (outer) log_context_of(outer);
    else log_set_context(NULL, NULL, NULL, NULL);
  }
  if (outer) watchdog_switch(outer_thread);
  else watchdog_leave();
  t->running = false;
  v->running = outer;
  if (t->cancelled) {
    task_free(t);
  } else if (status == LUA_YIELD && t->wait != TASK_NOT_WAITING) {
    lua_pop(t->co, nres);
    task *root = t->root;
    if (root->deadline_ns && !root->deadline_armed && has_destination(root)) {
      /* Waiting now: the deadline needs a timer, not just the hook. */
      uint64_t now = uv_hrtime();
      uint64_t left_ms = root->deadline_ns > now ? (root->deadline_ns - now) / 1000000 + 1 : 0;
      if (!root->deadline_timer_initialized) {
        uv_timer_init(v->loop, &root->deadline_timer);
        root->deadline_timer.data = root;
        root->deadline_timer_initialized = true;
      }
      root->deadline_armed = true;
      uv_timer_start(&root->deadline_timer, on_deadline, left_ms, 0);
    }
  } else {
    bool stray = status == LUA_YIELD;
    if (stray) lua_pop(t->co, nres);
    if (t == t->root) finish_root(t, status, stray);
    else finish_child(t, status, nres);
  }
  if (!outer) drain_all_generations(v);
}

void task_cancel(task *t) {
  if (t == t->root) t->call = NULL;
  t->cancelled = true;
  if (t->running) return; /* the hook stops it; freed when lua_resume returns */
  if (t->vm->srv->nested_poll > 0 || t->vm->running) {
    /* Closing the coroutine runs Lua: not while another task runs. */
    stop_waiting(t);
    defer(t, 0);
    return;
  }
  task_free(t);
}

void task_stop_all(vm *v) {
  /* Nobody reaps this generation any more: it is being freed. */
  v->on_drained = NULL;
  while (v->tasks) task_free(v->tasks->root); /* a root frees its children; each unlinks itself */
}

/* Is the task behind root's MCP task waiting for the client's answers? */
static bool waits_for_input(const task *root) {
  if (root->wait == TASK_WAIT_INPUT) return true;
  for (const task *c = root->children; c; c = c->next_child)
    if (c->wait == TASK_WAIT_INPUT) return true;
  return false;
}

void task_end_input_waits(vm *v) {
  server *srv = v->srv;
  for (;;) {
    /* One at a time from the start: ending a root frees its children,
     * which may be the next ones in the list. */
    task *root = NULL;
    for (task *t = v->tasks; t && !root; t = t->live_next)
      if (t->root->job && !t->root->cancelled && waits_for_input(t->root)) root = t->root;
    if (!root) return;
    job *j = root->job;
    root->job = NULL;
    job_detach(srv, j, "the server's scripts were reloaded while this task waited for the client's input; "
                       "call the tool again");
    server_job_changed(srv, j);
    task_cancel(root);
  }
}

/* ---- The hook: deadlines and cancellation for code that never yields -- */

static void task_hook(lua_State *L, lua_Debug *ar);

static void rearm_every_instruction(lua_State *L, task *t) {
  lua_sethook(L, task_hook, LUA_MASKCOUNT, 1);
  if (t->co != L) lua_sethook(t->co, task_hook, LUA_MASKCOUNT, 1);
}

/* Set by the watchdog (from its signal) on the thread that runs, when a
 * resume has passed its deadline or computed for TASK_POLL_INTERVAL_MS. */
static void task_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  vm *v = vm_of(L);
  task *t = v->running;
  if (!t) {
    if (v->load_deadline_ns && uv_hrtime() >= v->load_deadline_ns) {
      /* The scripts' top level is still running past its deadline. */
      lua_sethook(L, task_hook, LUA_MASKCOUNT, 1);
      luaL_error(L, "stopped: loading the scripts exceeded their time limit of %d ms (--load-timeout)",
                 v->load_timeout_ms);
    }
    lua_sethook(L, NULL, 0, 0);
    watchdog_rearm();
    /* A reload's load gives the loop a turn here, as a computing handler
     * does, but by yielding (reload.c resumes it), so the current
     * generation keeps serving meanwhile. Only the script's own coroutine,
     * where it can yield (not inside require or a coroutine the script
     * made), and only from a hook: a C function's interrupt point (ar
     * NULL) could not be resumed. */
    if (ar && L == v->load_thread && lua_isyieldable(L)) {
      v->load_paused = true;
      lua_yield(L, 0); /* from a count hook: it returns, and Lua yields when the hook does */
    }
    return;
  }
  task *root = t->root;
  if (!root->timed_out && root->deadline_ns && uv_hrtime() >= root->deadline_ns) root->timed_out = true;
  if (!t->cancelled && !root->cancelled && !root->timed_out && v->srv->nested_poll_safe && v->srv->nested_poll == 0) {
    /* Let the loop run one turn: a cancellation may be waiting, and output
     * this handler produced should leave now, not when it ends. */
    v->srv->nested_poll++;
    uv_run(v->loop, UV_RUN_NOWAIT);
    v->srv->nested_poll--;
  }
  if (t->cancelled || root->cancelled || root->timed_out) {
    rearm_every_instruction(L, t);
    luaL_error(L, root->timed_out ? "stopped: the call exceeded its time limit" : "stopped: the call was cancelled");
  }
  lua_sethook(L, NULL, 0, 0);
  watchdog_rearm();
}

void task_interrupt_point(lua_State *L) {
  if (lua_gethook(L) == task_hook) task_hook(L, NULL);
}

/* Resume a coroutine the handler created, telling the watchdog which Lua
 * thread runs (the hook must be set on that one). */
static int guarded_resume(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  lua_State *before = co ? watchdog_switch(co) : NULL;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  if (co) watchdog_switch(before);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* coroutine.wrap, over the guarded resume: errors propagate, results are
 * returned. */
static int guarded_wrap_call(lua_State *L) {
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  int nargs = lua_gettop(L);
  if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) return luaL_error(L, "cannot resume dead coroutine");
  if (!lua_checkstack(co, nargs + 1)) return luaL_error(L, "too many arguments to resume");
  lua_xmove(L, co, nargs);
  lua_State *before = watchdog_switch(co);
  int nres = 0;
  int status = lua_resume(co, L, nargs, &nres);
  watchdog_switch(before);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) return luaL_error(L, "too many results to resume");
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1); /* the error */
  if (lua_type(L, -1) == LUA_TSTRING) { /* where it happened, as coroutine.wrap does */
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

static int guarded_wrap(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, guarded_wrap_call, 1);
  return 1;
}

void task_guard_coroutines(lua_State *L) {
  lua_getglobal(L, "coroutine");
  lua_getfield(L, -1, "resume");
  lua_pushcclosure(L, guarded_resume, 1);
  lua_setfield(L, -2, "resume");
  lua_pushcfunction(L, guarded_wrap);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);
#ifndef LUAMCP_NO_WATCHDOG /* only to measure what the watchdog costs: bench/extra.lua */
  if (!watchdog_start(task_hook)) log_write(LOG_WARNING, "no watchdog: deadlines cannot stop code that never yields");
#endif
}

/* ---- Starting a call --------------------------------------------------- */

static int entry_continue(lua_State *co, int status, lua_KContext k) {
  (void)co;
  (void)status;
  (void)k;
  return 1;
}

/* params as handlers see them: _meta without a 2026-07-28 request's
 * envelope (version, client capabilities, info, log level), which the call
 * already holds and ctx gives as fields. Pushing those tables and long keys
 * into Lua for every call was a fifth of a modern call's cost. */
static void push_params(lua_State *co, const json_value *params) {
  if (params->type != JSON_OBJECT) {
    ljson_push(co, params);
    return;
  }
  lua_createtable(co, 0, (int)params->len);
  for (uint32_t i = 0; i < params->len; i++) {
    const json_member *m = &params->u.members[i];
    lua_pushlstring(co, m->key, m->key_len);
    if (m->key_len == 5 && memcmp(m->key, "_meta", 5) == 0 && m->value.type == JSON_OBJECT) {
      const json_value *meta = &m->value;
      lua_createtable(co, 0, (int)meta->len);
      for (uint32_t j = 0; j < meta->len; j++) {
        const json_member *e = &meta->u.members[j];
        if (protocol_is_envelope_key(e->key, e->key_len)) continue;
        lua_pushlstring(co, e->key, e->key_len);
        ljson_push(co, &e->value);
        lua_rawset(co, -3);
      }
    } else {
      ljson_push(co, &m->value);
    }
    lua_rawset(co, -3);
  }
}

/* ---- Calls that become MCP tasks --------------------------------------- */

/* Who a call's MCP task counts against, for the per-client cap
 * (jobs_client_cap), written into out: a request in a session (stdio, a
 * legacy HTTP session) is its session's; a sessionless 2026-07-28 request
 * has no better identity than the clientInfo name and version its _meta
 * carries (the peer address would put every client behind one proxy, or
 * on one machine, in one quota). A client that lies about them only
 * spreads over more quotas, never beyond --max-tasks. */
static void client_key_of(const call *c, char *out, size_t size) {
  const session *s = c->session;
  if (!s->sessionless) {
    snprintf(out, size, "session %s", s->name);
    return;
  }
  const char *info = call_client_info(c);
  json_doc *doc = info ? json_parse(info, strlen(info), MAX_JSON_DEPTH, NULL) : NULL;
  const json_value *root = doc ? json_doc_root(doc) : NULL;
  const json_value *name = json_object_get(root, "name"), *version = json_object_get(root, "version");
  if (name && name->type == JSON_STRING) {
    bool has_version = version && version->type == JSON_STRING;
    /* %.*s stops at a NUL inside the name: still one key per name. */
    snprintf(out, size, "client %.*s/%.*s", (int)(name->len < 120 ? name->len : 120), name->u.string,
             has_version ? (int)(version->len < 60 ? version->len : 60) : 0, has_version ? version->u.string : "");
  } else {
    snprintf(out, size, "client (no clientInfo)");
  }
  json_doc_free(doc);
}

/* Answer the root's call with a new task's handle and go on as that task.
 * Returns false, with the reason in why, when the server or this client
 * runs its cap of tasks already, or the running tasks hold the tasks'
 * budget. Runs no Lua, so it may happen while another task computes. */
static bool become_job(task *t, char *why, size_t why_size) {
  call *c = t->call;
  server *srv = t->vm->srv;
  char client_key[JOB_CLIENT_KEY_BYTES];
  client_key_of(c, client_key, sizeof client_key);
  /* What the coroutine keeps of the request while the task runs: its
   * params, less the 2026-07-28 envelope (capabilities, clientInfo),
   * which push_params leaves out and the job keeps cut down. */
  size_t envelope = 0;
  if (call_client_capabilities(c)) envelope += strlen(call_client_capabilities(c));
  if (call_client_info(c)) envelope += strlen(call_client_info(c));
  size_t work_bytes = t->params_bytes > envelope ? t->params_bytes - envelope : 0;
  job *j = job_create(srv, c->method, c->id.raw, call_client_capabilities(c), call_client_info(c), c->version,
                      t->job_poll_ms, client_key, auth_principal(t->identity), work_bytes, why, why_size);
  if (!j) return false;
  j->app_data = t;
  t->job = j;
  t->call = NULL;
  c->app_data = NULL;
  buf out = BUF_INIT;
  job_write(&out, j, JOB_VIEW_CREATED);
  call_respond(c, out.data, out.len);
  buf_free(&out);
  if (!t->own_timeout) {
    /* The server's default deadline is for requests; a task runs until it
     * ends, is cancelled, or reaches its tool's own timeout_ms. */
    t->deadline_ns = 0;
    if (t->deadline_armed) uv_timer_stop(&t->deadline_timer);
    t->deadline_armed = false;
  }
  return true;
}

/* mcp.tool{task = {after_ms = N}}: the call is still running after N ms. */
static void on_promote(uv_timer_t *timer) {
  task *t = timer->data;
  char why[320];
  if (t->call && !t->cancelled && !t->timed_out && !become_job(t, why, sizeof why))
    log_write(LOG_WARNING, "tools/call: not run as a task: %s", why);
}

/* Decide, before the handler runs, whether a tools/call becomes a task:
 * only for a client that declared the extension on this request, and only
 * when its arguments are valid (an argument error is answered at once).
 * Returns false when the call was answered here (an error). */
static bool plan_job(task *t, const tool_plan *plan, bool arguments_valid) {
  call *c = t->call;
  if (plan->task == TOOL_TASK_NEVER) return true;
  bool declared = c->modern && jobs_declared(call_client_capabilities(c));
  if (!declared) {
    if (plan->task != TOOL_TASK_REQUIRED) return true; /* it runs in the request, as any tool */
    static const char data[] = "{\"requiredCapabilities\":{\"extensions\":{\"" JOBS_EXTENSION "\":{}}}}";
    answer_error(t, MCP_MISSING_CAPABILITY,
                 "Missing required client capability: this tool runs only as a task, and the request did not "
                 "declare the " JOBS_EXTENSION " extension",
                 data, sizeof data - 1);
    return false;
  }
  if (!arguments_valid) return true;
  t->own_timeout = plan->own_timeout;
  t->job_poll_ms = plan->task_poll_ms;
  if (plan->task_after_ms > 0) {
    uv_timer_init(t->vm->loop, &t->promote_timer);
    t->promote_timer_initialized = true;
    t->promote_timer.data = t;
    uv_timer_start(&t->promote_timer, on_promote, (uint64_t)plan->task_after_ms, 0);
    return true;
  }
  char why[320];
  if (become_job(t, why, sizeof why)) return true;
  if (plan->task != TOOL_TASK_REQUIRED) return true;
  char message[400];
  snprintf(message, sizeof message, "Internal error: this tool runs only as a task, and %s", why);
  answer_error(t, JSONRPC_INTERNAL_ERROR, message, NULL, 0);
  return false;
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
  if (params) push_params(co, params);
  else lua_newtable(co);
  ctx_handle *h = lua_newuserdatauv(co, sizeof *h, 3); /* params._meta, then ctx.features and ctx.auth once made */
  h->task = t;
  t->ctx = h;
  luaL_setmetatable(co, CTX_MT);
  lua_pushvalue(co, -1);
  t->ctx_ref = luaL_ref(co, LUA_REGISTRYINDEX);
  /* ctx keeps params._meta, for ctx.meta; not params, which may hold
   * megabytes: a ctx has a finalizer, so its garbage outlives it by a
   * whole collector cycle. */
  lua_getfield(co, 3, "_meta");
  lua_setiuservalue(co, -2, 1);
  tool_plan plan = {.timeout_ms = t->vm->default_timeout_ms, .task = TOOL_TASK_NEVER};
  if (params && params->type == JSON_OBJECT && strcmp(t->call->method, "tools/call") == 0) {
    const json_value *name = json_object_get(params, "name");
    if (name && name->type == JSON_STRING && !t->tool) t->tool = strdup(name->u.string);
    lua_schema_check_call(co, t->vm, params, 3, &plan);
    if (plan.known && call_observed(t->call)) call_mark_target_known(t->call);
  }
  else lua_pushnil(co);
  if (plan.scopes && !auth_has_scopes(t->identity, plan.scopes)) {
    /* mcp.tool{scopes = ...}: refused before the handler runs, and before
     * the call could become a task. */
    call *c = t->call;
    t->call = NULL;
    c->app_data = NULL;
    call_fail_scope(c, plan.scopes, "Forbidden: this tool needs scopes the token does not grant");
    return 0;
  }
  if (!plan_job(t, &plan, lua_isnil(co, -1))) return 0;
  if (plan.timeout_ms > 0 && (has_destination(t) && (t->call || plan.own_timeout))) {
    t->timeout_ms = plan.timeout_ms;
    t->deadline_ns = uv_hrtime() + (uint64_t)plan.timeout_ms * 1000000u;
  }
  lua_callk(co, 4, 1, 0, entry_continue);
  return 1;
}

void task_start_call(vm *v, call *c, const json_value *params) {
  collect_big_garbage(v); /* what an earlier call could not collect */
  task *t = task_new(v, NULL);
  if (!t) {
    call_fail(c, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory", NULL, 0);
    return;
  }
  t->call = c;
  t->identity = auth_identity_ref(c->identity);
  t->params_bytes = params ? params->src_len : 0;
  if (otel_on && c->trace_span) otel_span_ids(c->trace_span, &t->trace);
  c->app_data = t;
  lua_pushcfunction(t->co, task_entry);
  lua_pushlightuserdata(t->co, (void *)params);
  task_resume(t, 1);
}

/* ---- Waiting ----------------------------------------------------------- */

/* The first frame of the scripts above the library's (the permission
 * doors wrap mcp.exec and mcp.fs): where a misuse error points. */
static int script_level(lua_State *co) {
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
    luaL_where(co, script_level(co));
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

static task_handle *check_handle(lua_State *L) { return luaL_checkudata(L, 1, TASK_HANDLE_MT); }

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
  luaL_newmetatable(L, TASK_HANDLE_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, handle_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
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

/* The span of a request to the client ends (error_type NULL: answered). */
static void end_client_span(task *t, const char *error_type) {
  otel_span *s = t->client_span;
  t->client_span = NULL;
  if (error_type) otel_span_fail(s, error_type, NULL);
  otel_span_end(s);
}

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
  if (t->client_span) end_client_span(t, how == REPLY_RESULT ? NULL : how == REPLY_ERROR ? "client_error"
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
  cancel_client_request(t);
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

/* ---- ctx --------------------------------------------------------------- */

static ctx_handle *check_ctx(lua_State *L) { return luaL_checkudata(L, 1, CTX_MT); }

/* The root task behind a ctx, still owing an answer (to its call or to
 * the MCP task its call became), or a Lua error if its request has ended. */
static task *ctx_root(lua_State *L) {
  ctx_handle *h = check_ctx(L);
  if (!h->task || !has_destination(h->task) || h->task->cancelled)
    luaL_error(L, "this request has already ended; ctx is only valid during it");
  return h->task;
}

/* The live call behind a ctx: for what only a request in progress has (its
 * stream, its headers, sending the client a request). */
static call *ctx_call(lua_State *L) {
  task *root = ctx_root(L);
  if (!root->call) luaL_error(L, "this call became a task (its request was answered); this ctx method needs the request");
  return root->call;
}

/* ctx:_request(method, params): send a request to the client on the call's
 * stream and wait for its answer. */
static int ctx_request(lua_State *L) {
  call *c = ctx_call(L);
  const char *method = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  task *t = task_check(L, "ctx:_request");
  buf params = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, 3, &params, err, sizeof err)) {
    buf_free(&params);
    return luaL_error(L, "%s: %s", method, err);
  }
  if (otel_on && t->root->trace.set) {
    start_client_span(t, c->session, method);
    if (lua_getfield(L, 3, "_meta") == LUA_TNIL) add_traceparent(t, &params);
  }
  lua_settop(L, 2);
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

/* ctx:_finish(result): answer the call now with result (a 2026-07-28
 * input_required result) and end the handler where it stands: its
 * coroutine is closed, never resumed (its to-be-closed variables run), as
 * if cancelled. The retry runs it again from the start. */
static int ctx_finish(lua_State *L) {
  call *c = ctx_call(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  task *t = task_check(L, "ctx:_finish");
  if (t != t->root || t->call != c)
    return luaL_error(L, "in a 2026-07-28 request, ask the client from the handler itself, not from a task it spawned");
  buf out = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, 2, &out, err, sizeof err)) {
    buf_free(&out);
    return luaL_error(L, "input_required result: %s", err);
  }
  t->call = NULL;
  c->app_data = NULL;
  call_respond(c, out.data, out.len);
  buf_free(&out);
  task_cancel(t); /* running: freed when lua_resume returns */
  return lua_yield(L, 0);
}

/* ---- Questions inside an MCP task ------------------------------------- */

/* After the answers came: {key = answer, ...} for the questions in slot 2;
 * or, if they did not come in time, an error naming them. */
static int task_ask_continue(lua_State *co, int status, lua_KContext k) {
  (void)status;
  (void)k;
  task *t = task_of(co);
  job *j = t->root->job;
  if (!j) return luaL_error(co, "this task has ended");
  lua_settop(co, 2);
  if (t->input_timed_out) {
    t->input_timed_out = false;
    luaL_Buffer b;
    luaL_buffinit(co, &b);
    lua_Integer n = luaL_len(co, 2);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(co, 2, i);
      lua_getfield(co, -1, "method");
      lua_getfield(co, -2, "key");
      lua_pushfstring(co, "%s%s (%s)", i > 1 ? ", " : "", lua_tostring(co, -2) ? lua_tostring(co, -2) : "?",
                      lua_tostring(co, -1) ? lua_tostring(co, -1) : "?");
      lua_replace(co, -4);
      lua_pop(co, 2);
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    /* A JSON-RPC error (the library passes those through), so that the
     * task fails, rather than completing with a tool error, unless the
     * handler catches it. */
    lua_createtable(co, 0, 2);
    lua_pushinteger(co, JSONRPC_INTERNAL_ERROR);
    lua_setfield(co, -2, "code");
    lua_pushfstring(co, "%s failed: the client did not answer within %d ms (--client-timeout)", lua_tostring(co, -2),
                    t->vm->srv->opts.client_timeout_ms);
    lua_setfield(co, -2, "message");
    luaL_setmetatable(co, VM_RPC_ERROR_MT);
    return lua_error(co);
  }
  lua_newtable(co);
  lua_Integer n = luaL_len(co, 2);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(co, 2, i);
    lua_getfield(co, -1, "key");
    const char *key = lua_tostring(co, -1);
    const char *answer = key ? job_answer(j, key) : NULL;
    json_doc *doc = answer ? json_parse(answer, strlen(answer), MAX_JSON_DEPTH, NULL) : NULL;
    if (doc) {
      ljson_push(co, json_doc_root(doc));
      json_doc_free(doc);
      lua_setfield(co, 3, key);
    }
    lua_pop(co, 2);
  }
  return 1;
}

/* --client-timeout passed with questions of t unanswered: they are no
 * longer outstanding, and its continuation raises. */
static void on_input_timeout(uv_timer_t *timer) {
  task *t = timer->data;
  if (t->wait != TASK_WAIT_INPUT || t->in_deferred) return;
  job *j = t->root->job;
  if (j) {
    job_abandon(t->vm->srv, j, t);
    server_job_changed(t->vm->srv, j);
  }
  t->input_timed_out = true;
  t->wait = TASK_NOT_WAITING;
  task_resume(t, 0);
}

/* ctx:_task_ask({{key, method, params}, ...}): in a call that became an MCP
 * task, ask the client through the task (its inputRequests, answered with
 * tasks/update) and wait for every answer. Any task of the call may ask;
 * each question's key must be new in this task. */
static int ctx_task_ask(lua_State *L) {
  task *root = ctx_root(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  job *j = root->job;
  if (!j) return luaL_error(L, "ctx:_task_ask: this call is not a task");
  task *t = task_check(L, "ctx:_task_ask");
  server *srv = t->vm->srv;
  lua_settop(L, 2);
  lua_Integer n = luaL_len(L, 2);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 2, i);
    lua_getfield(L, -1, "key");
    const char *key = lua_tostring(L, -1);
    if (!key) return luaL_error(L, "ctx: a question needs a string key");
    buf req = BUF_INIT;
    char err[160];
    buf_puts(&req, "{\"method\":");
    lua_getfield(L, -2, "method");
    size_t mlen;
    const char *method = lua_tolstring(L, -1, &mlen);
    json_write_string(&req, method ? method : "", method ? mlen : 0);
    lua_pop(L, 1);
    buf_puts(&req, ",\"params\":");
    lua_getfield(L, -2, "params");
    bool ok = ljson_encode(L, -1, &req, err, sizeof err);
    lua_pop(L, 1);
    buf_putc(&req, '}');
    if (!ok) {
      buf_free(&req);
      return luaL_error(L, "ctx: question %s: %s", key, err);
    }
    bool fresh = job_ask(srv, j, key, req.data, req.len, t);
    buf_free(&req);
    if (!fresh)
      return luaL_error(L, "ctx: the question key %s was already used in this task; each question needs its own key",
                        key);
    lua_pop(L, 2);
  }
  server_job_changed(srv, j);
  if (!job_waiting(j, t)) return task_ask_continue(L, LUA_OK, 0);
  t->wait = TASK_WAIT_INPUT;
  /* A client that never answers must not hold the task (and its place
   * under --max-tasks, and its generation) for ever. */
  if (!t->timer_initialized) {
    uv_timer_init(t->vm->loop, &t->timer);
    t->timer_initialized = true;
  }
  t->timer.data = t;
  t->input_timed_out = false;
  uv_timer_start(&t->timer, on_input_timeout, (uint64_t)srv->opts.client_timeout_ms, 0);
  return lua_yieldk(L, 0, 0, task_ask_continue);
}

void task_job_answered(job *j) {
  /* Resume every task of the job's call whose questions are all answered,
   * one at a time: a resume may end others (or the whole call). */
  for (;;) {
    task *root = j->app_data, *ready = NULL;
    if (!root) return;
    if (root->wait == TASK_WAIT_INPUT && !job_waiting(j, root)) ready = root;
    for (task *c = root->children; c && !ready; c = c->next_child)
      if (c->wait == TASK_WAIT_INPUT && !job_waiting(j, c)) ready = c;
    if (!ready) return;
    if (ready->in_deferred) return; /* already queued: its resume comes */
    if (ready->timer_initialized) uv_timer_stop(&ready->timer);
    ready->wait = TASK_NOT_WAITING;
    task_resume(ready, 0);
  }
}

void task_job_cancel(void *work) {
  task *root = work;
  if (!root) return;
  /* The job is cancelled already, and the cancel below may be put off (a
   * handler computes): let go of it now, so that the store may drop it
   * while the task still runs. */
  root->job = NULL;
  task_cancel(root);
}

/* ctx:_header(name): an Mcp-* header of the request (lower-case name), or
 * nil (always nil on stdio). */
static int ctx_header(lua_State *L) {
  task *root = ctx_root(L);
  call *c = root->call;
  const char *name = luaL_checkstring(L, 2);
  if (!c) { /* a task: its request was answered */
    lua_pushnil(L);
    return 1;
  }
  session *s = c->session;
  const char *value = s->transport && s->transport->request_header
                          ? s->transport->request_header(s, c->transport_data, name)
                          : NULL;
  if (value) lua_pushstring(L, value);
  else lua_pushnil(L);
  return 1;
}

/* ctx:close_sse_stream(): on HTTP, end this request's SSE stream now; the
 * client resumes it with Last-Event-ID. Returns whether it was closed. */
static int ctx_close_sse_stream(lua_State *L) {
  call *c = ctx_root(L)->call;
  if (!c) {
    lua_pushboolean(L, false);
    return 1;
  }
  session *s = c->session;
  bool closed = s->transport && s->transport->close_stream && s->transport->close_stream(s, c);
  lua_pushboolean(L, closed);
  return 1;
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
  task *root = ctx_root(L);
  call *c = root->call;
  size_t n;
  const char *name = luaL_checklstring(L, 2, &n);
  int level = log_level_parse(name, n);
  if (level < 0)
    return luaL_argerror(L, 2, "not a log level (debug, info, notice, warning, error, critical, alert, emergency)");
  luaL_checkany(L, 3);
  const char *logger = luaL_optstring(L, 4, NULL);
  buf data = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, 3, &data, err, sizeof err)) {
    buf_free(&data);
    return luaL_error(L, "ctx:log: %s", err);
  }
  const char *text = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : data.data;
  char subject[160];
  log_write(level, "%s: %s", answer_subject(root, subject, sizeof subject), text);
  if (c) {
    session_log(c->session, c, level, logger, data.data, data.len);
  } else if (level >= LOG_INFO && root->job) {
    /* A task has no stream to log on: the line becomes its status. */
    job_set_message(root->vm->srv, root->job, text, strlen(text));
    server_job_changed(root->vm->srv, root->job);
  }
  buf_free(&data);
  return 0;
}

static int ctx_progress(lua_State *L) {
  task *root = ctx_root(L);
  call *c = root->call;
  lua_Number progress = luaL_checknumber(L, 2);
  lua_Number total = luaL_optnumber(L, 3, NAN);
  size_t n = 0;
  const char *message = luaL_optlstring(L, 4, NULL, &n);
  if (!c) {
    if (!root->job) return 0; /* a task cancelled while it ran: nobody to tell */
    /* A task's progress is its status message: "3/10: copying". */
    buf text = BUF_INIT;
    if (isnan(total)) buf_printf(&text, "%.14g", (double)progress);
    else buf_printf(&text, "%.14g/%.14g", (double)progress, (double)total);
    if (message) buf_printf(&text, ": %.*s", (int)n, message);
    job_set_message(root->vm->srv, root->job, text.data, text.len);
    server_job_changed(root->vm->srv, root->job);
    buf_free(&text);
    return 0;
  }
  const char *problem = call_progress(c, progress, total, message, n);
  if (problem) return luaL_error(L, "ctx:progress: %s", problem);
  return 0;
}

/* What a ctx says about its request: from the call while it is in
 * progress, from the MCP task it became afterwards. */
typedef struct ctx_facts {
  const char *method, *id, *capabilities, *client, *progress_token, *task_id;
  const protocol_version *version;
  bool modern;
} ctx_facts;

static bool ctx_facts_of(const ctx_handle *h, ctx_facts *f) {
  task *t = h->task;
  memset(f, 0, sizeof *f);
  if (!t || t->cancelled) return false;
  if (t->call) {
    call *c = t->call;
    f->method = c->method;
    f->id = c->id.raw;
    f->capabilities = call_client_capabilities(c);
    f->client = call_client_info(c);
    f->progress_token = c->progress_token;
    f->version = c->version;
    f->modern = c->modern;
    return true;
  }
  if (t->job) {
    job *j = t->job;
    f->method = j->method;
    f->id = j->request_id;
    f->capabilities = j->client_capabilities_json;
    f->client = j->client_info_json;
    f->task_id = j->id;
    f->version = j->version;
    f->modern = true;
    return true;
  }
  return false;
}

/* ---- ctx.auth -------------------------------------------------------- */

static int readonly_newindex(lua_State *L) {
  return luaL_error(L, "ctx.auth is read-only (copy what you need into a table of your own)");
}

/* The table behind a read-only view (the view's __index). */
static void push_behind(lua_State *L) {
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "__index");
}

static int readonly_len(lua_State *L) {
  push_behind(L);
  lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
  return 1;
}

static int readonly_next(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_next(L, 1)) return 2;
  lua_pushnil(L);
  return 1;
}

static int readonly_pairs(lua_State *L) {
  lua_pushcfunction(L, readonly_next);
  push_behind(L);
  lua_remove(L, -2); /* the metatable */
  lua_pushnil(L);
  return 3;
}

/* Replace the table on top with a read-only view of it, its nested tables
 * first: reading, # , ipairs and pairs work; writing raises. */
static void make_readonly(lua_State *L, int depth) {
  luaL_checkstack(L, 6, "ctx.auth");
  int t = lua_gettop(L);
  if (depth < MAX_JSON_DEPTH) {
    lua_pushnil(L);
    while (lua_next(L, t)) {
      if (lua_type(L, -1) == LUA_TTABLE) {
        make_readonly(L, depth + 1);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, t); /* an existing key: next goes on */
      } else {
        lua_pop(L, 1);
      }
    }
  }
  lua_createtable(L, 0, 0);          /* the view */
  lua_createtable(L, 0, 6);          /* its metatable */
  lua_pushvalue(L, t);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, t);
  lua_setfield(L, -2, LJSON_VIEW_FIELD); /* it encodes as its table */
  lua_pushcfunction(L, readonly_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, readonly_len);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, readonly_pairs);
  lua_setfield(L, -2, "__pairs");
  lua_pushliteral(L, "read-only");
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_replace(L, t);
}

/* ctx.auth: who made the request (auth_identity_write_json's shape,
 * read-only), nil when nobody is authenticated. Made on first use and
 * kept in the ctx: a call that never reads it pays nothing. */
static int push_auth(lua_State *L, const task *root) {
  if (!root->identity) {
    lua_pushnil(L);
    return 1;
  }
  if (lua_getiuservalue(L, 1, 3) == LUA_TTABLE) return 1;
  lua_pop(L, 1);
  buf text = BUF_INIT;
  auth_identity_write_json(root->identity, &text);
  json_doc *doc = json_parse(text.data, text.len, MAX_JSON_DEPTH, NULL);
  buf_free(&text);
  if (!doc) {
    lua_pushnil(L);
    return 1;
  }
  ljson_push(L, json_doc_root(doc));
  json_doc_free(doc);
  make_readonly(L, 0);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, 1, 3);
  return 1;
}

/* The task of a ctx whose caller's identity is asked for. Its task gone,
 * the caller is unknown: an error, never the answer for nobody (which
 * holds every scope), so a ctx kept past its request fails closed. */
static task *ctx_identity_task(lua_State *L) {
  ctx_handle *h = luaL_checkudata(L, 1, CTX_MT);
  if (!h->task) luaL_error(L, "this request has already ended; ctx is only valid during it");
  return h->task;
}

/* ctx:_has_scopes(required): does the caller hold every scope of required
 * (space-separated)? True when nobody is authenticated (auth.h). */
static int ctx_has_scopes(lua_State *L) {
  task *t = ctx_identity_task(L);
  const char *required = luaL_checkstring(L, 2);
  lua_pushboolean(L, auth_has_scopes(t->root->identity, required));
  return 1;
}

/* ctx:_principal(): what the caller's requests are bound to (auth.h), ""
 * for nobody: mcp.input binds a requestState to it. */
static int ctx_principal(lua_State *L) {
  lua_pushstring(L, auth_principal(ctx_identity_task(L)->root->identity));
  return 1;
}

/* ctx.trace_id: the trace of the request's span; with traces off, the
 * trace the request named (params._meta's traceparent, else the HTTP
 * header), read only when asked; else nil. */
static int push_trace_id(lua_State *L, const task *root) {
  char hex[TRACE_ID_HEX + 1];
  if (root->trace.set) {
    trace_hex(root->trace.trace_id, TRACE_ID_BYTES, hex);
    lua_pushstring(L, hex);
    return 1;
  }
  trace_context given;
  size_t len = 0;
  lua_getiuservalue(L, 1, 1); /* ctx.meta */
  const char *tp = lua_istable(L, -1) && lua_getfield(L, -1, "traceparent") == LUA_TSTRING ? lua_tolstring(L, -1, &len)
                                                                                           : NULL;
  call *c = root->call;
  if (!tp && c && c->session->transport && c->session->transport->request_header) {
    tp = c->session->transport->request_header(c->session, c->transport_data, "traceparent");
    len = tp ? strlen(tp) : 0;
  }
  if (!tp || !trace_parse_traceparent(tp, len, &given)) {
    lua_pushnil(L);
    return 1;
  }
  trace_hex(given.trace_id, TRACE_ID_BYTES, hex);
  lua_pushstring(L, hex);
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
  ctx_facts f;
  bool live = ctx_facts_of(h, &f);
  if (strcmp(key, "cancelled") == 0) {
    lua_pushboolean(L, !live);
    return 1;
  }
  if (!live) return 0;
  if (strcmp(key, "id") == 0) return push_json_text(L, f.id);
  if (strcmp(key, "method") == 0) {
    lua_pushstring(L, f.method);
    return 1;
  }
  if (strcmp(key, "task_id") == 0) {
    if (f.task_id) lua_pushstring(L, f.task_id);
    else lua_pushnil(L);
    return 1;
  }
  if (strcmp(key, "protocol_version") == 0) {
    lua_pushstring(L, f.version ? f.version->name : "");
    return 1;
  }
  if (strcmp(key, "client") == 0) return push_json_text(L, f.client);
  if (strcmp(key, "capabilities") == 0) return push_json_text(L, f.capabilities);
  if (strcmp(key, "meta") == 0) {
    lua_getiuservalue(L, 1, 1);
    return 1;
  }
  if (strcmp(key, "progress_token") == 0) return push_json_text(L, f.progress_token);
  if (strcmp(key, "auth") == 0) return push_auth(L, h->task->root);
  if (strcmp(key, "trace_id") == 0) return push_trace_id(L, h->task->root);
  if (strcmp(key, "features") == 0) {
    /* What the request's protocol version offers (from the one table),
     * made on first use and kept: the library reads it on every call. */
    if (lua_getiuservalue(L, 1, 2) == LUA_TTABLE) return 1;
    lua_pop(L, 1);
    const protocol_version *v = f.version;
    lua_createtable(L, 0, 8);
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
    lua_pushboolean(L, f.modern);
    lua_setfield(L, -2, "modern");
    lua_pushboolean(L, f.modern && v && v->input_required);
    lua_setfield(L, -2, "input_required");
    lua_pushboolean(L, v && v->not_found_invalid_params);
    lua_setfield(L, -2, "not_found_invalid_params");
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, 2);
    return 1;
  }
  return 0;
}

static int ctx_gc(lua_State *L) {
  ctx_handle *h = check_ctx(L);
  if (h->task) h->task->ctx = NULL;
  h->task = NULL;
  return 0;
}

static int ctx_tostring(lua_State *L) {
  ctx_facts f;
  if (!ctx_facts_of(check_ctx(L), &f)) lua_pushliteral(L, "mcp.Context(ended)");
  else if (f.task_id) lua_pushfstring(L, "mcp.Context(%s, task %s)", f.method, f.task_id);
  else lua_pushfstring(L, "mcp.Context(%s %s)", f.method, f.id ? f.id : "");
  return 1;
}

int task_push_current_ctx(lua_State *L, vm *v) {
  /* A coroutine the script made itself has no task of its own: it runs
   * inside the resume of the task that is running. */
  task *t = *(task **)lua_getextraspace(L);
  if (!t) t = v->running;
  if (!t || t->root->ctx_ref == LUA_NOREF) return 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->root->ctx_ref);
  return 1;
}

void task_register_ctx(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"log", ctx_log},
      {"progress", ctx_progress},
      {"_request", ctx_request},
      {"_finish", ctx_finish},
      {"_task_ask", ctx_task_ask},
      {"_header", ctx_header},
      {"_has_scopes", ctx_has_scopes},
      {"_principal", ctx_principal},
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
  lua_pushcfunction(L, ctx_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

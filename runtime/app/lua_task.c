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
 *
 * This file is a task's life: made, resumed, answered, cancelled, freed.
 * What a task waits on is task_wait.c's, and ctx (the task's face for the
 * scripts) is task_ctx.c's; both call in here, never the other way.
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
#include "app/lua_schema.h"
#include "app/lua_task.h"
#include "app/task_internal.h"
#include "app/watchdog.h"

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
void task_cancel_client_request(task *t) {
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

/* The span of a request to the client ends (error_type NULL: answered). */
void task_end_client_span(task *t, const char *error_type) {
  otel_span *s = t->client_span;
  t->client_span = NULL;
  if (error_type) otel_span_fail(s, error_type, NULL);
  otel_span_end(s);
}

/* Disarm whatever the task waits for, so nothing resumes it. */
static void stop_waiting(task *t) {
  switch (t->wait) {
    case TASK_WAIT_TIMER: uv_timer_stop(&t->timer); break;
    case TASK_WAIT_CLIENT:
      uv_timer_stop(&t->timer);
      task_cancel_client_request(t);
      if (t->client_span) task_end_client_span(t, "cancelled");
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
    abandon_handle(t); /* a background task's (core.background) */
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

task *task_new(vm *v, task *root) {
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
bool task_has_destination(const task *root) { return root->call || root->job; }

static const char *answer_method(const task *t) { return t->call ? t->call->method : t->job ? t->job->method : "?"; }

/* What log lines call a request: "tool add" for a tools/call (the author
 * knows their tools, not the method), else its method. */
const char *task_answer_subject(const task *t, char *out, size_t cap) {
  const task *root = t->root ? t->root : t;
  if (root->tool) {
    snprintf(out, cap, "tool %s", root->tool);
    return out;
  }
  return answer_method(t);
}

/* The root's outcome goes to its call (which answering frees) or to its
 * job; either way the root owes nothing afterwards. */
void task_answer(task *t, bool ok, const char *json, size_t len, int code, const char *message) {
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

static void answer_result(task *t, const char *json, size_t len) { task_answer(t, true, json, len, 0, NULL); }

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
  task_answer(t, false, data_json, data_len, code, message);
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
  log_write(LOG_ERROR, "%s failed: %s", task_answer_subject(t, subject, sizeof subject), message);
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
  if (task_has_destination(t)) {
    if (t->call) call_set_outcome(t->call, CALL_TIMEOUT);
    char limit[96];
    snprintf(limit, sizeof limit, "%d ms", t->timeout_ms);
    char subject[160];
    log_write(LOG_WARNING, "%s: stopped at its time limit (%s)", task_answer_subject(t, subject, sizeof subject), limit);
    answer_problem(t, "stopped: the call exceeded its time limit of ", limit);
  }
  task_free(t);
}

/* Answer the root task's call (or its job) from the coroutine's final
 * status. */
static void finish_root(task *t, int status, bool stray_yield) {
  lua_State *co = t->co;
  if (!task_has_destination(t)) {
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
    log_write(LOG_ERROR, "%s: %s", task_answer_subject(t, subject, sizeof subject), message);
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
      log_write(LOG_ERROR, "%s: the result could not be encoded as JSON: %s", task_answer_subject(t, subject, sizeof subject),
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
  if (!task_has_destination(t) || t->cancelled) return;
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
    if (root->deadline_ns && !root->deadline_armed && task_has_destination(root)) {
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
  /* A foreign session's call (A2A) goes to its own entry, never to MCP's
   * methods, and has no default deadline: its requests wait on agent
   * tasks, which end, or are cancelled, on their own terms. */
  bool foreign = t->call->session->foreign;
  lua_rawgeti(co, LUA_REGISTRYINDEX, foreign ? t->vm->foreign_dispatch_ref : t->vm->dispatch_ref);
  lua_pushstring(co, t->call->method);
  if (params) push_params(co, params);
  else lua_newtable(co);
  ctx_handle *h = lua_newuserdatauv(co, sizeof *h, 3); /* params._meta, then ctx.features and ctx.auth once made */
  h->task = NULL;
  luaL_setmetatable(co, CTX_MT);
  lua_pushvalue(co, -1);
  t->ctx_ref = luaL_ref(co, LUA_REGISTRYINDEX);
  /* Linked only once anchored (luaL_ref can fail): the ref keeps the ctx
   * as long as the task, whose task_free unlinks it, so the ctx needs no
   * finalizer (one per request, run by the collector). */
  h->task = t;
  t->ctx = h;
  /* ctx keeps params._meta, for ctx.meta; not params, which may hold
   * megabytes. */
  lua_getfield(co, 3, "_meta");
  lua_setiuservalue(co, -2, 1);
  tool_plan plan = {.timeout_ms = foreign ? 0 : t->vm->default_timeout_ms, .task = TOOL_TASK_NEVER};
  if (!foreign && params && params->type == JSON_OBJECT && strcmp(t->call->method, "tools/call") == 0) {
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
  if (plan.timeout_ms > 0 && (task_has_destination(t) && (t->call || plan.own_timeout))) {
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

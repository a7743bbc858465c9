/*
 * task_ctx.c - ctx, a request's face for the scripts: what the handler
 * asks of its call (headers, logs, progress, the client's requests, its
 * MCP task's questions) and what it may know of it (auth, trace ids).
 * Apart from lua_task.c so that the tasks' machinery and the API the
 * scripts see change apart; ctx calls into the tasks, never the reverse.
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
#include "app/bus.h"
#include "app/lua_json.h"
#include "app/lua_task.h"
#include "app/task_internal.h"

/* ---- ctx --------------------------------------------------------------- */

static ctx_handle *check_ctx(lua_State *L) { return luaL_checkudata(L, 1, CTX_MT); }

/* The root task behind a ctx, still owing an answer (to its call or to
 * the MCP task its call became), or a Lua error if its request has ended. */
static task *ctx_root(lua_State *L) {
  ctx_handle *h = check_ctx(L);
  if (!h->task || !task_has_destination(h->task) || h->task->cancelled)
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
  return task_request_client(L, t, c, method, 3);
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

/* ctx:_partial(value): one more response to the request before its last
 * (a foreign protocol's stream: A2A's SSE events). False when the request
 * is already answered or gone. */
static int ctx_partial(lua_State *L) {
  call *c = ctx_root(L)->call;
  if (!c || !c->session->foreign) {
    lua_pushboolean(L, false);
    return 1;
  }
  buf out = BUF_INIT;
  char err[200];
  if (!ljson_encode(L, 2, &out, err, sizeof err)) {
    buf_free(&out);
    return luaL_error(L, "ctx:_partial: %s", err);
  }
  call_respond_partial(c, out.data, out.len);
  buf_free(&out);
  lua_pushboolean(L, true);
  return 1;
}

/* ctx:_forward(params): a foreign request about a task this process does
 * not hold goes to the other processes of the server (the bus: --workers,
 * --redis); the one that holds it answers the request. The handler's own
 * return is dropped. False when there are no others. */
static int ctx_forward(lua_State *L) {
  task *root = ctx_root(L);
  call *c = root->call;
  vm *v = root->vm;
  /* A request another process sent here (the bus's session) was sent
   * because this process holds its task: it is not asked on again. */
  if (!c || !c->session->foreign || !v->app || !bus_is_shared(v->app->bus) ||
      bus_owns_session(v->app->bus, c->session)) {
    lua_pushboolean(L, false);
    return 1;
  }
  buf params = BUF_INIT;
  char err[200];
  if (!ljson_encode(L, 2, &params, err, sizeof err)) {
    buf_free(&params);
    return luaL_error(L, "ctx:_forward: %s", err);
  }
  root->call = NULL;
  c->app_data = NULL;
  bus_forward_foreign(v->app->bus, c, params.data, params.len, -32001, "Task not found");
  buf_free(&params);
  lua_pushboolean(L, true);
  return 1;
}

/* ctx:_gather_tasks(params_json, first): ListTasks's shares of the other
 * generations (a reload's retired ones) and of the other processes
 * (bus_gather_tasks): a JSON array of {count, tasks} objects
 * (mcp._foreign_list), waited for without blocking. */
typedef struct gather_op {
  task_op op;
  task *task;
  bus_gather *gather; /* NULL once done */
  buf shares;         /* each share preceded by a comma */
} gather_op;

static void gather_op_free(gather_op *g) {
  buf_free(&g->shares);
  free(g);
}

static void cancel_gather(task_op *base) {
  gather_op *g = (gather_op *)base;
  bus_gather_cancel(g->gather);
  gather_op_free(g);
}

static void on_gathered(void *data, const char *json, size_t len) {
  gather_op *g = data;
  g->gather = NULL;
  if (len > 2) {
    buf_putc(&g->shares, ',');
    buf_append(&g->shares, json + 1, len - 2); /* the array's items */
  }
  task *t = g->task;
  /* Resume only the task that still waits on this op. */
  if (t->wait != TASK_WAIT_OP || t->wait_op != &g->op) return;
  task_resume(t, 0);
}

static void push_shares(lua_State *L, const buf *shares) {
  buf all = BUF_INIT;
  buf_putc(&all, '[');
  if (shares->len) buf_append(&all, shares->data + 1, shares->len - 1);
  buf_putc(&all, ']');
  lua_pushlstring(L, all.data, all.len);
  buf_free(&all);
}

static int gather_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  gather_op *g = lua_touserdata(L, 1);
  push_shares(L, &g->shares);
  gather_op_free(g);
  return 1;
}

static int ctx_gather_tasks(lua_State *L) {
  task *root = ctx_root(L);
  size_t len;
  const char *params = luaL_checklstring(L, 2, &len);
  lua_Integer first = luaL_checkinteger(L, 3);
  vm *v = root->vm;
  if (!v->app || !v->app->bus || first < 0 || first > INT32_MAX) {
    lua_pushliteral(L, "[]");
    return 1;
  }
  const char *principal = auth_principal(root->identity);
  gather_op *g = calloc(1, sizeof *g);
  if (!g) return luaL_error(L, "out of memory");
  g->op.cancel = cancel_gather;
  bus_local_lists(v->app->bus, params, len, principal, (int)first, &g->shares);
  task *t = task_of(L);
  g->gather = t ? bus_gather_tasks(v->app->bus, params, len, principal, (int)first, on_gathered, g) : NULL;
  if (!g->gather) {
    push_shares(L, &g->shares);
    gather_op_free(g);
    return 1;
  }
  g->task = t;
  lua_settop(L, 0);
  lua_pushlightuserdata(L, g);
  return task_wait_op(L, t, &g->op, gather_continue);
}

/* ctx:_detach(value): answer a foreign request with value now, and let its
 * handler run on with no request (an agent's task that outlives the
 * SendMessage that started it: lua/mcp/a2a.lua). False when the request
 * is already answered or gone. */
static int ctx_detach(lua_State *L) {
  task *root = ctx_root(L);
  call *c = root->call;
  if (!c || !c->session->foreign) {
    lua_pushboolean(L, false);
    return 1;
  }
  buf out = BUF_INIT;
  char err[200];
  if (!ljson_encode(L, 2, &out, err, sizeof err)) {
    buf_free(&out);
    return luaL_error(L, "ctx:_detach: %s", err);
  }
  root->call = NULL;
  c->app_data = NULL;
  root->deadline_ns = 0; /* a request's deadline; the task has none */
  if (root->deadline_armed) uv_timer_stop(&root->deadline_timer);
  root->deadline_armed = false;
  call_respond(c, out.data, out.len);
  buf_free(&out);
  lua_pushboolean(L, true);
  return 1;
}

/* ctx:_handle(): a handle (mcp.spawn's kind) that cancels the request's
 * whole work, its handler included, from another request. */
static int ctx_handle_of(lua_State *L) { return task_push_root_handle(L, ctx_root(L)); }

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
  log_write(level, "%s: %s", task_answer_subject(root, subject, sizeof subject), text);
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
      {"_partial", ctx_partial},
      {"_forward", ctx_forward},
      {"_gather_tasks", ctx_gather_tasks},
      {"_detach", ctx_detach},
      {"_handle", ctx_handle_of},
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

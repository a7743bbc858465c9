/*
 * lua_remote.c - luamcp.remote: connections from this server to other MCP
 * servers, on the one loop, for lua/mcp/remote.lua (mcp.client):
 *
 *   local remote = require "luamcp.remote"
 *   local h, how = remote.open{ key = KEY, command = {argv...}, cwd = DIR, env = {NAME = VAL} }
 *   local h, how = remote.open{ key = KEY, url = "http://...", headers = {Name = "value"} }
 *       -- how: "new", or "reused" (an open connection with that key, made
 *       -- by this or an earlier generation); nil, message on failure
 *   h:next_id()                   a request id unique on this connection
 *   h:send(json_text, headers)    true, or nil, why; never blocks
 *   h:set_header(name, value)     on every later HTTP request (nil: removed)
 *   kind, text, extra = h:wait(id, timeout_ms)   (inside a task; yields)
 *       "answer", json | "message", json | "failed", why, {status, challenge, body}
 *       | "ended", why | "timeout"
 *   h:on_message(fn)              fn(json) for messages no request takes;
 *                                 fn(nil, why) once when it ends
 *   h:info()                      {kind, pid, url, session_id, ended, key}
 *   h:close()
 *
 * A child speaks newline-delimited JSON-RPC on its stdin and stdout; its
 * stderr goes to ours, a line at a time, behind its name. Over HTTP each
 * message is a POST (Streamable HTTP): the answer is a JSON body or an SSE
 * stream read as it arrives, whose messages before the answer belong to
 * that request; a stream that ends before the answer is resumed with GET
 * and Last-Event-ID after the server's retry delay.
 *
 * Ownership: a connection belongs to the app (remote_hub), not to a Lua
 * state. Each generation that opened or reused it holds it (remote_gen);
 * when the last holder is freed it is closed (a keyed one lingers a while
 * first, for the next generation after a reload). A task waiting in h:wait
 * is resumed from a 0 ms timer (hub->kick), never from inside curl or
 * another task's Lua: each resume re-checks that its task still waits on
 * that wait. A task that goes away while waiting (cancelled, past its
 * deadline, its generation freed) has notifications/cancelled sent for its
 * request (task_op.cancel).
 */
#include <lauxlib.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "core/sse_reader.h"
#include "app/app.h"
#include "app/curl_lib.h"
#include "app/curl_loop.h"
#include "app/lua_exec.h"
#include "app/lua_remote.h"
#include "app/lua_task.h"
#include "os/proc.h"

#define REMOTE_MT "luamcp.remote.connection"

typedef struct remote_conn remote_conn;
typedef struct remote_post remote_post;

/* ---- Types ------------------------------------------------------------- */

typedef enum item_kind { ITEM_ANSWER, ITEM_MESSAGE, ITEM_FAILED } item_kind;

/* Something for a request's task. Owner: its remote_pending's queue,
 * until the task takes it. */
typedef struct remote_item {
  struct remote_item *next;
  item_kind kind;
  long status;     /* FAILED: the HTTP status (0: none came) */
  char *challenge; /* FAILED: WWW-Authenticate, or NULL */
  char *body;      /* FAILED: the start of the error body, or NULL */
  size_t body_len;
  size_t len;
  char text[]; /* ANSWER/MESSAGE: the JSON text; FAILED: why */
} remote_item;

/* A request sent whose answer the script has not taken yet. Owner: its
 * connection (pending list, in send order); removed when its answer or
 * failure is taken, or its waiting task goes away. */
typedef struct remote_pending {
  struct remote_pending *next, *prev;
  int64_t id;
  remote_item *items, *items_tail;
  int item_count;
  bool answered;             /* the answer (or a failure) is queued */
  struct remote_wait *waiter; /* the task waiting for it, or NULL */
  remote_post *post;         /* HTTP: the transfer whose stream carries its answer */
} remote_pending;

/* One h:wait of a task. Owner: the waiting task and the pending's waiter
 * pointer together; released (wait_release) when the task takes a result
 * or goes away, freed in its timer's close callback. */
typedef struct remote_wait {
  task_op op; /* first member: the task waits on it */
  remote_conn *conn;
  int64_t id;
  task *task; /* NULL once released */
  uv_timer_t timer; /* the wait's timeout */
  bool timed_out;
  bool queued; /* in hub->wake */
  struct remote_wait *wake_next;
} remote_wait;

/* A generation holding a connection. Owner: the connection's gens list;
 * removed when the generation's handles are all collected, or when it is
 * freed (listed in its vm->on_closed: release_with_generation). */
typedef struct remote_gen {
  struct remote_gen *next;
  remote_conn *conn;
  vm *vm;
  teardown held; /* in vm->on_closed */
  int fn_ref; /* on_message's function in vm->L's registry, or LUA_NOREF */
  int handles; /* its userdata for the connection not yet collected */
} remote_gen;

/* A header sent on every HTTP request of a connection. Owner: it. */
typedef struct remote_header {
  struct remote_header *next;
  char *name, *value;
} remote_header;

/* The connections of one app. Owner: the app (lua_app.remote), from the
 * first open; freed when the app stops and its last handle has closed. */
typedef struct remote_hub {
  lua_app *app;
  remote_conn *conns;
  int count;          /* connections not freed yet */
  int open_handles;   /* kick timer + connections' memory not yet freed */
  uv_timer_t kick;    /* resumes waiting tasks and runs on_message, outside curl and Lua */
  remote_wait *wake, *wake_tail;
  const curl_api *api;
  curl_loop *curl;    /* HTTP connections' transfers, made on first use */
  char curl_why[256];
  bool stopping;
  teardown stopped_with_app; /* in app->on_stop */
} remote_hub;

/* One connection. Owner: its hub; freed once no generation holds it, it
 * has ended, and every handle and transfer of it is closed. */
struct remote_conn {
  remote_conn *next, *prev;
  remote_hub *hub;
  char *key;   /* NULL: never shared */
  char *name;  /* for stderr lines and logs */
  bool http;
  int64_t next_id;
  char *ended; /* why it ended; NULL while open */
  bool end_delivered;
  remote_gen *gens; /* newest first */
  remote_pending *pending, *pending_tail;
  int pending_count;
  remote_item *unclaimed, *unclaimed_tail;
  int unclaimed_count;
  bool drop_logged;
  uv_timer_t timer; /* linger, the close's grace periods, or reading what an exited child wrote last */
  bool lingering;
  int open_handles;
  bool handles_closing;
  /* A child. */
  uv_process_t process;
  uv_pipe_t in, out, err;
  bool spawned, exited, term_sent;
  bool out_eof; /* its stdout reached its end: everything it said is routed */
  int kill_stage; /* closing: 0 stdin closed, 1 SIGTERM sent, 2 SIGKILL sent */
  int64_t exit_status;
  int term_signal;
  buf out_line, err_line;
  bool err_cut;
  /* HTTP. */
  char *url;
  remote_header *headers;
  char *session_id;
  remote_post *posts;
  int post_count; /* transfers not freed yet */
};

typedef enum post_what { POST_MESSAGE, POST_RESUME, POST_DELETE } post_what;

/* One HTTP transfer of a connection. Owner: the connection's posts list;
 * freed in its timer's close callback (post_destroy). */
struct remote_post {
  curl_transfer transfer;
  remote_conn *conn;
  remote_post *next, *prev;
  post_what what;
  int64_t id; /* the request it carries or resumes ... */
  bool has_id;
  struct curl_slist *headers;
  char *body;
  size_t body_len;
  long status;
  bool sse, in_curl, destroyed, too_large;
  sse_reader reader;
  buf received;    /* a JSON answer, or an error's body (bounded) */
  char *challenge;
  int resumes;     /* resumptions so far */
  /* The request was cancelled: this stream is stopped once the
   * notifications/cancelled POST (whose abandons names the id) is done,
   * so the server hears the reason before it sees the stream go. */
  bool abandoned;
  bool has_abandons;
  int64_t abandons;
  uv_timer_t timer; /* the delay before a resumption starts */
};


/* ---- The hub: resuming tasks and running on_message ------------------ */

static void on_kick(uv_timer_t *timer);

static void hub_kick(remote_hub *hub) {
  if (!hub->stopping && !uv_is_active((uv_handle_t *)&hub->kick)) uv_timer_start(&hub->kick, on_kick, 0, 0);
}

static void wake(remote_wait *w) {
  if (!w || !w->task || w->queued) return;
  w->queued = true;
  w->wake_next = NULL;
  remote_hub *hub = w->conn->hub;
  if (hub->wake_tail) hub->wake_tail->wake_next = w;
  else hub->wake = w;
  hub->wake_tail = w;
  hub_kick(hub);
}

static void unwake(remote_wait *w) {
  if (!w->queued) return;
  remote_hub *hub = w->conn->hub;
  remote_wait *prev = NULL;
  for (remote_wait *x = hub->wake; x; prev = x, x = x->wake_next) {
    if (x != w) continue;
    if (prev) prev->wake_next = x->wake_next;
    else hub->wake = x->wake_next;
    if (hub->wake_tail == x) hub->wake_tail = prev;
    break;
  }
  w->queued = false;
}

static void free_wait(uv_handle_t *h) { free(h->data); }

/* The task is done with w (took a result, or went away). */
static void wait_release(remote_wait *w) {
  unwake(w);
  w->task = NULL;
  uv_timer_stop(&w->timer);
  uv_close((uv_handle_t *)&w->timer, free_wait);
}

static void free_item(remote_item *it) {
  free(it->challenge);
  free(it->body);
  free(it);
}

static remote_pending *find_pending(remote_conn *c, int64_t id) {
  for (remote_pending *p = c->pending; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static void pending_remove(remote_conn *c, remote_pending *p) {
  if (p->prev) p->prev->next = p->next;
  else c->pending = p->next;
  if (p->next) p->next->prev = p->prev;
  else c->pending_tail = p->prev;
  c->pending_count--;
  while (p->items) {
    remote_item *it = p->items;
    p->items = it->next;
    free_item(it);
  }
  if (p->post && p->post->has_id && p->post->id == p->id) p->post->has_id = false;
  free(p);
}

static remote_item *new_item(item_kind kind, const char *text, size_t len) {
  remote_item *it = calloc(1, sizeof *it + len + 1);
  if (!it) return NULL;
  it->kind = kind;
  it->len = len;
  memcpy(it->text, text, len);
  return it;
}

/* Queue it for the request's task (taking ownership) and wake the task. */
static void pending_push(remote_pending *p, remote_item *it) {
  if (!it) return;
  if (it->kind == ITEM_MESSAGE && p->item_count >= REMOTE_MAX_QUEUED_PER_REQUEST && p->items &&
      p->items->kind == ITEM_MESSAGE) {
    remote_item *old = p->items; /* the oldest message goes; the answer is always the last */
    p->items = old->next;
    if (!p->items) p->items_tail = NULL;
    p->item_count--;
    free_item(old);
  }
  if (it->kind != ITEM_MESSAGE) p->answered = true;
  if (p->items_tail) p->items_tail->next = it;
  else p->items = it;
  p->items_tail = it;
  p->item_count++;
  wake(p->waiter);
}

/* A message no request takes, for on_message. */
static void unclaimed_push(remote_conn *c, const char *text, size_t len) {
  if (c->unclaimed_count >= REMOTE_MAX_UNCLAIMED) {
    remote_item *old = c->unclaimed;
    c->unclaimed = old->next;
    if (!c->unclaimed) c->unclaimed_tail = NULL;
    c->unclaimed_count--;
    free_item(old);
    if (!c->drop_logged)
      log_write(LOG_WARNING, "mcp.client %s: %d messages wait for the script (on_message); older ones are dropped",
                c->name, REMOTE_MAX_UNCLAIMED);
    c->drop_logged = true;
  }
  remote_item *it = new_item(ITEM_MESSAGE, text, len);
  if (!it) return;
  if (c->unclaimed_tail) c->unclaimed_tail->next = it;
  else c->unclaimed = it;
  c->unclaimed_tail = it;
  c->unclaimed_count++;
  hub_kick(c->hub);
}

/* The generation that gets on_message calls: the newest with a function. */
static remote_gen *on_message_gen(remote_conn *c) {
  for (remote_gen *g = c->gens; g; g = g->next)
    if (g->fn_ref != LUA_NOREF) return g;
  return NULL;
}

static bool vm_idle(vm *v) { return !v->running && v->srv->nested_poll == 0 && !v->load_thread; }

/* Run on_message for what waits. false: its generation is busy (try again). */
static bool deliver_unclaimed(remote_conn *c) {
  for (;;) {
    remote_gen *g = on_message_gen(c);
    bool end_due = c->ended && !c->end_delivered && !c->unclaimed;
    if (!g || (!c->unclaimed && !end_due)) return true;
    if (!vm_idle(g->vm)) return false;
    lua_State *L = g->vm->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, g->fn_ref);
    int nargs = 1;
    if (c->unclaimed) {
      remote_item *it = c->unclaimed;
      c->unclaimed = it->next;
      if (!c->unclaimed) c->unclaimed_tail = NULL;
      c->unclaimed_count--;
      lua_pushlstring(L, it->text, it->len);
      free_item(it);
    } else {
      c->end_delivered = true;
      lua_pushnil(L);
      lua_pushstring(L, c->ended);
      nargs = 2;
    }
    if (lua_pcall(L, nargs, 0, 0) != LUA_OK) {
      const char *err = lua_tostring(L, -1);
      log_write(LOG_WARNING, "mcp.client %s: on_message: %s", c->name, err ? err : "(an error that is not a string)");
      lua_pop(L, 1);
    }
  }
}

/* The kick timer: tasks with news are resumed (each checks that it still
 * waits on that wait), then on_message runs. Resumed Lua may queue more
 * wakes (drained here too) or close connections (freed later, in close
 * callbacks, so the list stays walkable). */
static void on_kick(uv_timer_t *timer) {
  remote_hub *hub = timer->data;
  while (hub->wake) {
    remote_wait *w = hub->wake;
    hub->wake = w->wake_next;
    if (!hub->wake) hub->wake_tail = NULL;
    w->queued = false;
    task *t = w->task;
    if (t && t->wait == TASK_WAIT_OP && t->wait_op == &w->op) task_resume(t, 0);
  }
  bool busy = false;
  for (remote_conn *c = hub->conns; c; c = c->next)
    if (!deliver_unclaimed(c)) busy = true;
  if (busy && !hub->stopping) uv_timer_start(&hub->kick, on_kick, 1, 0);
}

static void hub_maybe_free(remote_hub *hub) {
  if (hub->stopping && hub->open_handles == 0) {
    if (hub->app && hub->app->remote == hub) hub->app->remote = NULL;
    free(hub);
  }
}

static void on_hub_handle_closed(uv_handle_t *h) {
  remote_hub *hub = h->data;
  hub->open_handles--;
  hub_maybe_free(hub);
}

static void stop_all(teardown *entry);

static remote_hub *hub_get(lua_app *app) {
  if (app->remote) return app->remote;
  remote_hub *hub = calloc(1, sizeof *hub);
  if (!hub) return NULL;
  hub->app = app;
  uv_timer_init(app->loop, &hub->kick);
  hub->kick.data = hub;
  hub->open_handles = 1;
  teardown_add(&app->on_stop, &hub->stopped_with_app, stop_all);
  app->remote = hub;
  return hub;
}

/* A header name or value (or a URL) we may send: no control byte (a bare
 * CR, LF or NUL would split or cut the line). A tab is a value's own. */
static bool header_ok(const char *s) {
  for (; *s; s++)
    if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f) return false;
  return true;
}

/* ---- A connection's life ------------------------------------------------ */

static void post_abort(remote_post *p);
static void child_gone(remote_conn *c);
static bool post_start(remote_conn *c, post_what what, const char *body, size_t len, int64_t id, bool has_id,
                       lua_State *L, int extra_idx, char *why, size_t why_len);

/* One of c's handles (or a transfer's timer) is closed: the memory goes
 * with the last. */
static void conn_handle_done(remote_conn *c) {
  if (--c->open_handles > 0) return;
  remote_hub *hub = c->hub;
  while (c->pending) pending_remove(c, c->pending);
  while (c->unclaimed) {
    remote_item *it = c->unclaimed;
    c->unclaimed = it->next;
    free_item(it);
  }
  while (c->headers) {
    remote_header *x = c->headers;
    c->headers = x->next;
    free(x->name);
    free(x->value);
    free(x);
  }
  buf_free(&c->out_line);
  buf_free(&c->err_line);
  free(c->key);
  free(c->name);
  free(c->ended);
  free(c->url);
  free(c->session_id);
  free(c);
  hub->open_handles--;
  hub_maybe_free(hub);
}

static void on_conn_handle_closed(uv_handle_t *h) { conn_handle_done(h->data); }

static void close_conn_handle(remote_conn *c, uv_handle_t *h) {
  if (h->loop && !uv_is_closing(h)) uv_close(h, on_conn_handle_closed);
}

/* Free it once nobody holds it, it has ended, and nothing of it runs. */
static void conn_maybe_free(remote_conn *c) {
  if (c->handles_closing || c->gens || !c->ended) return;
  if (c->http ? c->post_count > 0 : (c->spawned && !c->exited && !c->hub->stopping)) return;
  c->handles_closing = true;
  if (c->prev) c->prev->next = c->next;
  else c->hub->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->hub->count--;
  uv_timer_stop(&c->timer);
  if (c->spawned) os_proc_release(&c->process);
  close_conn_handle(c, (uv_handle_t *)&c->timer);
  if (!c->http) {
    close_conn_handle(c, (uv_handle_t *)&c->process);
    close_conn_handle(c, (uv_handle_t *)&c->in);
    close_conn_handle(c, (uv_handle_t *)&c->out);
    close_conn_handle(c, (uv_handle_t *)&c->err);
  }
}

/* It is gone or going: every waiting task hears why ("ended"). */
static void conn_end(remote_conn *c, const char *why) {
  if (c->ended) return;
  c->ended = strdup(why);
  if (!c->ended) c->ended = strdup("ended");
  for (remote_pending *p = c->pending; p; p = p->next) wake(p->waiter);
  if (c->http) {
    for (remote_post *p = c->posts; p; p = p->next)
      if (p->what != POST_DELETE) post_abort(p);
  }
  hub_kick(c->hub);
}

static void signal_child(remote_conn *c, int signum) {
  if (c->spawned && !c->exited && c->process.pid > 0) os_proc_kill(&c->process, signum);
}

/* Closing a child: stdin closed first (an MCP server exits on EOF), then
 * SIGTERM, then SIGKILL, each after a grace period. */
static void on_close_grace(uv_timer_t *timer) {
  remote_conn *c = timer->data;
  if (c->exited) return;
  if (c->kill_stage == 0) {
    c->kill_stage = 1;
    signal_child(c, SIGTERM);
    uv_timer_start(&c->timer, on_close_grace, EXEC_KILL_GRACE_MS, 0);
  } else {
    c->kill_stage = 2;
    signal_child(c, SIGKILL);
  }
}

static void conn_close(remote_conn *c, const char *why) {
  bool was_open = !c->ended;
  conn_end(c, why);
  uv_timer_stop(&c->timer);
  c->lingering = false;
  if (c->http) {
    if (was_open && c->session_id && !c->hub->stopping) {
      char err[200];
      if (!post_start(c, POST_DELETE, NULL, 0, 0, false, NULL, 0, err, sizeof err))
        log_write(LOG_DEBUG, "mcp.client %s: DELETE: %s", c->name, err);
    }
  } else if (c->spawned && !c->exited) {
    if (c->in.loop && !uv_is_closing((uv_handle_t *)&c->in)) uv_close((uv_handle_t *)&c->in, on_conn_handle_closed);
    if (c->kill_stage == 0) uv_timer_start(&c->timer, on_close_grace, REMOTE_CLOSE_GRACE_MS, 0);
  }
  conn_maybe_free(c);
}

static void on_linger_done(uv_timer_t *timer) {
  remote_conn *c = timer->data;
  c->lingering = false;
  if (!c->gens) conn_close(c, "closed: no generation of the scripts used it");
}

/* The generation g is gone from c->gens. */
static void conn_unheld(remote_conn *c) {
  if (c->gens) return;
  if (c->key && !c->ended && !c->exited && !c->hub->stopping) {
    c->lingering = true;
    uv_timer_start(&c->timer, on_linger_done, REMOTE_LINGER_MS, 0);
    return;
  }
  conn_close(c, "closed");
}

/* Take the generation *p off c->gens and free it (its on_message
 * function's reference is the caller's to drop). */
static void gen_drop(remote_gen **p) {
  remote_gen *g = *p;
  *p = g->next;
  teardown_remove(&g->held);
  free(g);
}

/* vm->on_closed: the generation has been freed (its Lua state is closed,
 * the function's reference with it): it holds the connection no more. One
 * nobody holds is closed, or kept a while for the next generation when it
 * has a key. */
static void release_with_generation(teardown *entry) {
  remote_gen *g = (remote_gen *)((char *)entry - offsetof(remote_gen, held));
  remote_conn *c = g->conn;
  for (remote_gen **p = &c->gens; *p; p = &(*p)->next) {
    if (*p != g) continue;
    gen_drop(p);
    conn_unheld(c);
    return;
  }
}

static remote_gen *gen_of(remote_conn *c, vm *v) {
  for (remote_gen *g = c->gens; g; g = g->next)
    if (g->vm == v) return g;
  return NULL;
}

static bool hold(remote_conn *c, vm *v) {
  remote_gen *g = gen_of(c, v);
  if (g) return true;
  g = calloc(1, sizeof *g);
  if (!g) return false;
  g->conn = c;
  g->vm = v;
  g->fn_ref = LUA_NOREF;
  g->next = c->gens;
  c->gens = g;
  teardown_add(&v->on_closed, &g->held, release_with_generation);
  if (c->lingering) uv_timer_stop(&c->timer);
  c->lingering = false;
  return true;
}

/* app->on_stop: the server stops: close every connection now (children
 * killed, HTTP transfers stopped); the memory goes in the handles' close
 * callbacks. The generations are freed by then. */
static void stop_all(teardown *entry) {
  remote_hub *hub = (remote_hub *)((char *)entry - offsetof(remote_hub, stopped_with_app));
  hub->stopping = true;
  uv_timer_stop(&hub->kick);
  hub->wake = hub->wake_tail = NULL;
  remote_conn *c = hub->conns;
  while (c) {
    remote_conn *next = c->next;
    while (c->gens) gen_drop(&c->gens);
    for (remote_pending *p = c->pending; p; p = p->next) p->waiter = NULL;
    signal_child(c, SIGKILL); /* the server stops now: no grace */
    conn_end(c, "the server stopped");
    while (c->posts) post_abort(c->posts);
    conn_maybe_free(c);
    c = next;
  }
  if (hub->curl) curl_loop_close(hub->curl);
  hub->curl = NULL;
  uv_close((uv_handle_t *)&hub->kick, on_hub_handle_closed);
}

/* ---- Messages in ------------------------------------------------------- */

/* The integer a request id or progress token names, if it is one
 * (our ids are integers; a token may come back as a string of digits). */
static bool id_of(const json_value *v, int64_t *out) {
  if (!v) return false;
  if (v->type == JSON_INTEGER) {
    *out = v->u.integer;
    return true;
  }
  if (v->type == JSON_STRING && v->len > 0 && v->len < 19) {
    int64_t n = 0;
    for (uint32_t i = 0; i < v->len; i++) {
      char ch = v->u.string[i];
      if (ch < '0' || ch > '9') return false;
      n = n * 10 + (ch - '0');
    }
    *out = n;
    return true;
  }
  return false;
}

/* Where a server's request over stdio goes (nothing ties it to one of
 * ours): the oldest unanswered request a task waits on, so one that timed
 * out and was left (or a long subscriptions/listen) cannot swallow a
 * question nobody would answer; else the oldest unanswered, whose task is
 * between two waits. */
static remote_pending *oldest_unanswered(remote_conn *c) {
  remote_pending *first = NULL;
  for (remote_pending *p = c->pending; p; p = p->next) {
    if (p->answered) continue;
    if (p->waiter) return p;
    if (!first) first = p;
  }
  return first;
}

/* One JSON-RPC message from the server (text, len), read from the child's
 * stdout (post NULL) or from post's answer. */
static void route_one(remote_conn *c, remote_post *post, const json_value *msg, const char *text, size_t len) {
  const json_value *method = json_object_get(msg, "method");
  const json_value *idv = json_object_get(msg, "id");
  int64_t id;
  if (!method && id_of(idv, &id)) { /* an answer */
    remote_pending *p = find_pending(c, id);
    if (p && !p->answered) {
      pending_push(p, new_item(ITEM_ANSWER, text, len));
      return;
    }
  } else if (method && method->type == JSON_STRING) {
    remote_pending *p = NULL;
    if (strcmp(method->u.string, "notifications/progress") == 0) {
      const json_value *params = json_object_get(msg, "params");
      int64_t token;
      if (params && params->type == JSON_OBJECT && id_of(json_object_get(params, "progressToken"), &token))
        p = find_pending(c, token);
    }
    if (!p && post && post->has_id) p = find_pending(c, post->id);
    if (!p && !post && idv) p = oldest_unanswered(c); /* a server request over stdio */
    if (p && !p->answered) {
      pending_push(p, new_item(ITEM_MESSAGE, text, len));
      return;
    }
  }
  unclaimed_push(c, text, len);
}

static void route(remote_conn *c, remote_post *post, const char *text, size_t len) {
  json_error err;
  json_doc *doc = json_parse(text, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    log_write(LOG_WARNING, "mcp.client %s: the server sent something that is not JSON (%s): dropped", c->name,
              err.message);
    return;
  }
  const json_value *root = json_doc_root(doc);
  if (root->type == JSON_OBJECT) {
    route_one(c, post, root, text, len);
  } else if (root->type == JSON_ARRAY) { /* a batch (2025-03-26): each on its own */
    for (uint32_t i = 0; i < root->len; i++)
      if (root->u.items[i].type == JSON_OBJECT)
        route_one(c, post, &root->u.items[i], text + root->u.items[i].src_off, root->u.items[i].src_len);
  }
  json_doc_free(doc);
}

/* ---- A child over stdio ---------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void on_stdout_closed(uv_timer_t *timer) {
  remote_conn *c = timer->data;
  if (!c->exited && !c->ended) conn_close(c, "the server closed its stdout and kept running: it is stopped");
}

static void on_child_stdout(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  remote_conn *c = stream->data;
  const char *p = b->base, *end = b->base + (n > 0 ? n : 0);
  while (n > 0 && p < end && !c->ended) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t take = (size_t)((nl ? nl : end) - p);
    if (c->out_line.len + take > DEFAULT_MAX_MESSAGE_BYTES) {
      char why[160];
      snprintf(why, sizeof why, "the server sent a message over %u bytes (the limit): the connection is closed",
               (unsigned)DEFAULT_MAX_MESSAGE_BYTES);
      log_write(LOG_WARNING, "mcp.client %s: %s", c->name, why);
      conn_close(c, why);
      break;
    }
    buf_append(&c->out_line, p, take);
    if (!nl) break;
    size_t len = c->out_line.len;
    if (len && c->out_line.data[len - 1] == '\r') len--;
    if (len) route(c, NULL, c->out_line.data, len);
    buf_clear(&c->out_line);
    p = nl + 1;
  }
  free(b->base);
  if (n < 0) {
    uv_read_stop(stream);
    c->out_eof = true;
    if (c->exited) child_gone(c);
    /* No answer can come any more: a child that closed its stdout and
     * goes on running would leave every wait hanging. Its exit is usually
     * on the way (then that is the reason given); else it is closed. */
    else if (!c->ended) uv_timer_start(&c->timer, on_stdout_closed, REMOTE_EXIT_DRAIN_MS, 0);
  }
}

static void stderr_line(remote_conn *c) {
  buf line = {0};
  buf_printf(&line, "[%s] ", c->name);
  buf_append(&line, c->err_line.data ? c->err_line.data : "", c->err_line.len);
  if (c->err_cut) buf_append_str(&line, " [...]");
  buf_putc(&line, '\n');
  log_print(line.data, line.len); /* one JSON line under --log-format json */
  buf_free(&line);
  buf_clear(&c->err_line);
  c->err_cut = false;
}

static void on_child_stderr(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  remote_conn *c = stream->data;
  const char *p = b->base, *end = b->base + (n > 0 ? n : 0);
  while (n > 0 && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t take = (size_t)((nl ? nl : end) - p);
    size_t room = REMOTE_MAX_STDERR_LINE > c->err_line.len ? REMOTE_MAX_STDERR_LINE - c->err_line.len : 0;
    if (take > room) c->err_cut = true;
    buf_append(&c->err_line, p, take < room ? take : room);
    if (!nl) break;
    if (c->err_line.len && c->err_line.data[c->err_line.len - 1] == '\r') c->err_line.len--;
    stderr_line(c);
    p = nl + 1;
  }
  free(b->base);
  if (n < 0) {
    if (c->err_line.len) stderr_line(c);
    uv_read_stop(stream);
  }
}

/* The child exited and what it wrote is read: the connection ends. */
static void child_gone(remote_conn *c) {
  uv_timer_stop(&c->timer);
  char why[160];
  if (c->term_signal)
    snprintf(why, sizeof why, "the server (pid %d) was killed by signal %d", c->process.pid, c->term_signal);
  else
    snprintf(why, sizeof why, "the server (pid %d) exited with status %lld", c->process.pid,
             (long long)c->exit_status);
  if (!c->ended) log_write(LOG_INFO, "mcp.client %s: %s", c->name, why);
  conn_end(c, why);
  conn_maybe_free(c);
}

static void on_exit_drained(uv_timer_t *timer) { child_gone(timer->data); }

static void on_child_exit(uv_process_t *proc, int64_t status, int term_signal) {
  remote_conn *c = proc->data;
  c->exited = true;
  c->exit_status = status;
  c->term_signal = term_signal;
  uv_timer_stop(&c->timer);
  /* Its last answer may still wait in the pipe: read to the end first
   * (bounded in time: a grandchild could hold the pipe open). */
  if (c->out_eof || c->ended) child_gone(c);
  else uv_timer_start(&c->timer, on_exit_drained, REMOTE_EXIT_DRAIN_MS, 0);
}

typedef struct remote_write {
  uv_write_t req;
  char data[];
} remote_write;

static void on_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static bool child_send(remote_conn *c, const char *text, size_t len, char *why, size_t why_len) {
  if (!c->in.loop || uv_is_closing((uv_handle_t *)&c->in)) {
    snprintf(why, why_len, "the server's stdin is closed");
    return false;
  }
  if (c->in.write_queue_size > REMOTE_MAX_WRITE_QUEUE_BYTES) {
    snprintf(why, why_len, "the server does not read its stdin (%zu bytes wait)", c->in.write_queue_size);
    return false;
  }
  remote_write *w = malloc(sizeof *w + len + 1);
  if (!w) {
    snprintf(why, why_len, "out of memory");
    return false;
  }
  memcpy(w->data, text, len);
  w->data[len] = '\n';
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len + 1);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->in, &b, 1, on_written);
  if (rc != 0) {
    free(w);
    snprintf(why, why_len, "writing to the server: %s", uv_strerror(rc));
    return false;
  }
  return true;
}

/* ---- Streamable HTTP ---------------------------------------------------- */

static remote_post *post_of(curl_transfer *t) { return (remote_post *)((char *)t - offsetof(remote_post, transfer)); }

static void free_post(uv_handle_t *h) {
  remote_post *p = h->data;
  remote_conn *c = p->conn;
  free(p);
  c->post_count--;
  conn_maybe_free(c);
  conn_handle_done(c); /* a transfer counts as one of its handles: c lives until here */
}

/* Out of curl and the list; the memory goes in the timer's close callback. */
static void post_destroy(remote_post *p) {
  if (p->destroyed) return;
  p->destroyed = true;
  remote_conn *c = p->conn;
  remote_hub *hub = c->hub;
  if (p->transfer.easy) {
    if (hub->curl) curl_loop_remove(hub->curl, &p->transfer);
    hub->api->easy_cleanup(p->transfer.easy);
    p->transfer.easy = NULL;
  }
  if (p->headers) hub->api->slist_free_all(p->headers);
  p->headers = NULL;
  for (remote_pending *q = c->pending; q; q = q->next)
    if (q->post == p) q->post = NULL;
  if (p->prev) p->prev->next = p->next;
  else c->posts = p->next;
  if (p->next) p->next->prev = p->prev;
  free(p->body);
  free(p->challenge);
  buf_free(&p->received);
  sse_reader_free(&p->reader);
  uv_timer_stop(&p->timer);
  uv_close((uv_handle_t *)&p->timer, free_post);
}

static void post_abort(remote_post *p) { post_destroy(p); }

static void fail_request(remote_post *post, const char *why) {
  remote_pending *q = post->has_id ? find_pending(post->conn, post->id) : NULL;
  if (!q || q->answered) {
    if (post->what != POST_DELETE && post->status >= 400)
      log_write(LOG_WARNING, "mcp.client %s: %s", post->conn->name, why);
    return;
  }
  remote_item *it = new_item(ITEM_FAILED, why, strlen(why));
  if (!it) return;
  it->status = post->status;
  it->challenge = post->challenge ? strdup(post->challenge) : NULL;
  if (post->status >= 400 && post->received.len) {
    it->body = malloc(post->received.len);
    if (it->body) memcpy(it->body, post->received.data, post->received.len);
    it->body_len = it->body ? post->received.len : 0;
  }
  pending_push(q, it);
}

static void on_sse_event(void *arg, const char *data, size_t len) {
  remote_post *p = arg;
  if (p->abandoned) return; /* what still comes for a cancelled request is nobody's */
  route(p->conn, p, data, len);
}

static size_t on_post_body(char *data, size_t size, size_t count, void *arg) {
  remote_post *p = arg;
  size_t n = size * count;
  if (p->status >= 400) {
    size_t room = REMOTE_MAX_ERROR_BODY > p->received.len ? REMOTE_MAX_ERROR_BODY - p->received.len : 0;
    buf_append(&p->received, data, n < room ? n : room);
    return n;
  }
  if (p->sse) {
    if (!sse_reader_feed(&p->reader, data, n, on_sse_event, p)) {
      p->too_large = true;
      return 0; /* curl fails the transfer */
    }
    return n;
  }
  if (p->received.len + n > DEFAULT_MAX_MESSAGE_BYTES) {
    p->too_large = true;
    return 0;
  }
  buf_append(&p->received, data, n);
  return n;
}

/* The value of header `name` in the line, trimmed, as a new string, or NULL. */
static char *header_value(const char *line, size_t len, const char *name) {
  size_t nl = strlen(name);
  if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':') return NULL;
  const char *v = line + nl + 1, *end = line + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
  char *out = malloc((size_t)(end - v) + 1);
  if (!out) return NULL;
  memcpy(out, v, (size_t)(end - v));
  out[end - v] = '\0';
  return out;
}

static size_t on_post_header(char *data, size_t size, size_t count, void *arg) {
  remote_post *p = arg;
  size_t len = size * count;
  if (len >= 12 && memcmp(data, "HTTP/", 5) == 0) { /* a new response (100 Continue, then the real one) */
    const char *sp = memchr(data, ' ', len);
    p->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    p->sse = false;
    free(p->challenge);
    p->challenge = NULL;
    return len;
  }
  char *v;
  if ((v = header_value(data, len, "content-type"))) {
    p->sse = strncasecmp(v, "text/event-stream", 17) == 0;
    free(v);
  } else if ((v = header_value(data, len, "mcp-session-id"))) {
    remote_conn *c = p->conn;
    if (*v && strlen(v) < 1024 && header_ok(v) && p->what != POST_DELETE) {
      free(c->session_id);
      c->session_id = v;
    } else {
      free(v);
    }
  } else if ((v = header_value(data, len, "www-authenticate"))) {
    if (strlen(v) > REMOTE_MAX_ERROR_BODY) v[REMOTE_MAX_ERROR_BODY] = '\0';
    free(p->challenge);
    p->challenge = v;
  }
  return len;
}

static void on_resume_timer(uv_timer_t *timer) {
  remote_post *p = timer->data;
  if (p->destroyed || !p->transfer.easy) return;
  if (p->abandoned) {
    post_destroy(p);
    return;
  }
  if (!curl_loop_add(p->conn->hub->curl, &p->transfer)) {
    fail_request(p, "resuming the stream: curl refused the transfer");
    post_destroy(p);
  }
}

/* The POST's stream ended before the answer to its request: resume it
 * with a GET carrying Last-Event-ID, after the server's retry delay. */
static bool resume(remote_post *old) {
  remote_conn *c = old->conn;
  if (!old->reader.id_seen || old->resumes >= REMOTE_MAX_RESUMES || c->ended || c->hub->stopping) return false;
  char err[200];
  if (!post_start(c, POST_RESUME, NULL, 0, old->id, true, NULL, 0, err, sizeof err)) {
    log_write(LOG_WARNING, "mcp.client %s: resuming the stream: %s", c->name, err);
    return false;
  }
  remote_post *p = c->posts; /* post_start puts it first */
  p->resumes = old->resumes + 1;
  memcpy(p->reader.last_id, old->reader.last_id, sizeof p->reader.last_id);
  p->reader.id_seen = true;
  p->reader.retry_ms = old->reader.retry_ms;
  /* Last-Event-ID goes on the request now that it is known. */
  char line[SSE_MAX_EVENT_ID_BYTES + 32];
  snprintf(line, sizeof line, "Last-Event-ID: %s", old->reader.last_id);
  struct curl_slist *grown = c->hub->api->slist_append(p->headers, line);
  if (grown) p->headers = grown;
  c->hub->api->easy_setopt(p->transfer.easy, CURLOPT_HTTPHEADER, p->headers);
  long delay = old->reader.retry_ms >= 0 ? old->reader.retry_ms : REMOTE_DEFAULT_RETRY_MS;
  if (delay > REMOTE_MAX_RETRY_MS) delay = REMOTE_MAX_RETRY_MS;
  remote_pending *q = find_pending(c, old->id);
  if (q) q->post = p;
  uv_timer_start(&p->timer, on_resume_timer, (uint64_t)delay, 0);
  return true;
}

static void on_post_done(curl_transfer *t, CURLcode result) {
  remote_post *p = post_of(t);
  remote_conn *c = p->conn;
  p->in_curl = false;
  if (p->what == POST_DELETE) {
    post_destroy(p);
    return;
  }
  if (p->has_abandons) {
    for (remote_post *q = c->posts; q; q = q->next) {
      if (q->abandoned && q->id == p->abandons && !q->destroyed) {
        post_abort(q);
        break; /* the list changed */
      }
    }
  }
  char why[300];
  remote_pending *q = p->has_id ? find_pending(c, p->id) : NULL;
  bool waiting = q && !q->answered;
  if (p->status >= 400) {
    snprintf(why, sizeof why, "the server answered HTTP %ld", p->status);
    fail_request(p, why);
  } else if (result != CURLE_OK && !(p->sse && !p->too_large && p->status == 200)) {
    if (p->too_large)
      snprintf(why, sizeof why, "the server sent a message over %u bytes (the limit)",
               (unsigned)DEFAULT_MAX_MESSAGE_BYTES);
    else snprintf(why, sizeof why, "%s: %s", c->url, c->hub->api->easy_strerror(result));
    if (!(p->sse && waiting && resume(p))) fail_request(p, why);
  } else if (p->sse) {
    if (waiting && !resume(p)) {
      snprintf(why, sizeof why, "the server's event stream ended before the answer%s",
               p->reader.id_seen ? " (and could not be resumed)" : " (it gave no event id to resume from)");
      fail_request(p, why);
    }
  } else if (p->received.len && !p->abandoned) {
    route(c, p, p->received.data, p->received.len);
    if (waiting && !find_pending(c, p->id)->answered) {
      snprintf(why, sizeof why, "the server's answer (HTTP %ld) was not the answer to this request", p->status);
      fail_request(p, why);
    }
  } else if (waiting) {
    snprintf(why, sizeof why, "the server answered HTTP %ld with no body", p->status);
    fail_request(p, why);
  }
  post_destroy(p);
}

static void hub_after_curl(void *data) { hub_kick(data); }


/* Start a transfer: a message (body), a resumption GET or the DELETE.
 * Extra headers from the Lua table at extra_idx (0: none). */
static bool post_start(remote_conn *c, post_what what, const char *body, size_t len, int64_t id, bool has_id,
                       lua_State *L, int extra_idx, char *why, size_t why_len) {
  remote_hub *hub = c->hub;
  if (hub->stopping) {
    snprintf(why, why_len, "the server is stopping");
    return false;
  }
  if (!hub->curl) {
    if (!(hub->api = curl_lib_load("mcp.client", hub->curl_why, sizeof hub->curl_why)) ||
        !(hub->curl = curl_loop_new(hub->app->loop, hub->api, hub_after_curl, hub))) {
      snprintf(why, why_len, "%s", hub->curl_why[0] ? hub->curl_why : "libcurl could not start");
      return false;
    }
  }
  const curl_api *api = hub->api;
  remote_post *p = calloc(1, sizeof *p);
  if (!p) {
    snprintf(why, why_len, "out of memory");
    return false;
  }
  p->conn = c;
  p->what = what;
  p->id = id;
  p->has_id = has_id;
  sse_reader_init(&p->reader, DEFAULT_MAX_MESSAGE_BYTES);
  uv_timer_init(hub->app->loop, &p->timer);
  p->timer.data = p;
  p->next = c->posts;
  if (p->next) p->next->prev = p;
  c->posts = p;
  c->post_count++;
  c->open_handles++;
  CURL *e = api->easy_init();
  if (!e) {
    snprintf(why, why_len, "curl could not make a transfer");
    post_destroy(p);
    return false;
  }
  p->transfer.easy = e;
  p->transfer.done = on_post_done;
  struct curl_slist *h = NULL;
  bool ok = true;
#define ADD_HEADER(line)                                   \
  do {                                                     \
    struct curl_slist *g_ = api->slist_append(h, (line)); \
    if (g_) h = g_;                                        \
    else ok = false;                                       \
  } while (0)
  buf line = {0};
  if (what == POST_MESSAGE) {
    ADD_HEADER("Content-Type: application/json");
    ADD_HEADER("Accept: application/json, text/event-stream");
  } else if (what == POST_RESUME) {
    ADD_HEADER("Accept: text/event-stream");
  }
  for (remote_header *x = c->headers; x; x = x->next) {
    buf_clear(&line);
    buf_printf(&line, "%s: %s", x->name, x->value);
    ADD_HEADER(line.data);
  }
  if (c->session_id) {
    buf_clear(&line);
    buf_printf(&line, "Mcp-Session-Id: %s", c->session_id);
    ADD_HEADER(line.data);
  }
  if (L && extra_idx && lua_type(L, extra_idx) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, extra_idx)) {
      if (lua_type(L, -2) == LUA_TSTRING && (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER)) {
        const char *name = lua_tostring(L, -2);
        const char *value = lua_tostring(L, -1);
        if (header_ok(name) && header_ok(value) && *name) {
          buf_clear(&line);
          buf_printf(&line, "%s: %s", name, value);
          ADD_HEADER(line.data);
        }
      }
      lua_pop(L, 1);
    }
  }
  ADD_HEADER("Expect:");
#undef ADD_HEADER
  buf_free(&line);
  p->headers = h;
  if (!ok) {
    snprintf(why, why_len, "out of memory");
    post_destroy(p);
    return false;
  }
  api->easy_setopt(e, CURLOPT_URL, c->url);
  api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  api->easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  /* Straight to the host the net permission judged: no proxy from the
   * environment (http_proxy, ALL_PROXY), which nothing judged. */
  api->easy_setopt(e, CURLOPT_PROXY, "");
  api->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)REMOTE_CONNECT_TIMEOUT_MS);
  api->easy_setopt(e, CURLOPT_USERAGENT, "luamcp");
  api->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_post_body);
  api->easy_setopt(e, CURLOPT_WRITEDATA, p);
  api->easy_setopt(e, CURLOPT_HEADERFUNCTION, on_post_header);
  api->easy_setopt(e, CURLOPT_HEADERDATA, p);
  api->easy_setopt(e, CURLOPT_HTTPHEADER, p->headers);
  if (what == POST_MESSAGE) {
    p->body = malloc(len ? len : 1);
    if (!p->body) {
      snprintf(why, why_len, "out of memory");
      post_destroy(p);
      return false;
    }
    memcpy(p->body, body, len);
    p->body_len = len;
    api->easy_setopt(e, CURLOPT_POSTFIELDS, p->body);
    api->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  } else if (what == POST_DELETE) {
    api->easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
  } else {
    api->easy_setopt(e, CURLOPT_HTTPGET, 1L);
    return true; /* started by its timer (resume) */
  }
  if (!curl_loop_add(hub->curl, &p->transfer)) {
    snprintf(why, why_len, "curl refused the transfer");
    post_destroy(p);
    return false;
  }
  p->in_curl = true;
  if (has_id) {
    remote_pending *q = find_pending(c, id);
    if (q) q->post = p;
  }
  return true;
}

/* ---- Cancellation ------------------------------------------------------ */

/* Send it; over HTTP, the stream of the request (stream, or NULL) stops
 * once the notification's POST is done. false: not sent. */
static bool send_cancelled(remote_conn *c, int64_t id, const char *reason, remote_post *stream) {
  if (c->ended || c->hub->stopping) return false;
  buf msg = {0};
  buf_printf(&msg,
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":%lld,"
             "\"reason\":",
             (long long)id);
  json_write_string(&msg, reason, strlen(reason));
  buf_append_str(&msg, "}}");
  char why[200];
  bool ok = c->http ? post_start(c, POST_MESSAGE, msg.data, msg.len, 0, false, NULL, 0, why, sizeof why)
                    : child_send(c, msg.data, msg.len, why, sizeof why);
  if (!ok) log_write(LOG_DEBUG, "mcp.client %s: notifications/cancelled not sent: %s", c->name, why);
  buf_free(&msg);
  if (ok && c->http && stream) {
    remote_post *note = c->posts; /* post_start puts it first */
    note->has_abandons = true;
    note->abandons = id;
    stream->abandoned = true;
    stream->id = id;
  }
  return ok;
}

/* task_op.cancel: the task went away while it waited (cancelled, past its
 * deadline, its generation freed): the inner server hears of it, and an
 * HTTP request's stream stops. */
static void cancel_wait(task_op *op) {
  remote_wait *w = (remote_wait *)op;
  remote_conn *c = w->conn;
  task *t = w->task;
  remote_pending *p = find_pending(c, w->id);
  if (p) {
    p->waiter = NULL;
    if (!p->answered) {
      const char *reason = t && t->root && t->root->timed_out ? "the caller's deadline passed"
                                                              : "the caller cancelled the request";
      remote_post *stream = p->post && p->post->what != POST_DELETE ? p->post : NULL;
      if (!send_cancelled(c, w->id, reason, stream) && stream) post_abort(stream);
    }
    pending_remove(c, p);
  }
  wait_release(w);
}

/* ---- The Lua interface ------------------------------------------------- */

typedef struct remote_ud {
  remote_conn *conn;
} remote_ud;

static remote_conn *check_conn(lua_State *L) {
  remote_conn *c = ((remote_ud *)luaL_checkudata(L, 1, REMOTE_MT))->conn;
  if (!c) luaL_error(L, "a luamcp.remote connection used after it was collected");
  return c;
}

/* A new userdata for c in L's generation, which holds c (hold). */
static void push_handle(lua_State *L, remote_conn *c) {
  remote_ud *ud = lua_newuserdatauv(L, sizeof *ud, 0);
  ud->conn = c;
  luaL_setmetatable(L, REMOTE_MT);
  remote_gen *g = gen_of(c, vm_of(L));
  if (g) g->handles++;
}

/* __gc: a generation whose every handle to c is garbage lets go of it (an
 * un-keyed connection a script dropped closes; a keyed one lingers for
 * the next open). */
static int conn_gc(lua_State *L) {
  remote_ud *ud = luaL_checkudata(L, 1, REMOTE_MT);
  remote_conn *c = ud->conn;
  ud->conn = NULL;
  if (!c) return 0;
  vm *v = vm_of(L);
  for (remote_gen **p = &c->gens; *p; p = &(*p)->next) {
    remote_gen *g = *p;
    if (g->vm != v) continue;
    if (--g->handles > 0) return 0;
    if (g->fn_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, g->fn_ref);
    gen_drop(p);
    conn_unheld(c);
    return 0;
  }
  return 0;
}

static remote_conn *conn_new(remote_hub *hub, const char *key, const char *name) {
  remote_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->hub = hub;
  c->key = key ? strdup(key) : NULL;
  c->name = strdup(name);
  c->next_id = 1;
  uv_timer_init(hub->app->loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 1;
  hub->open_handles++;
  hub->count++;
  c->next = hub->conns;
  if (c->next) c->next->prev = c;
  hub->conns = c;
  return c;
}

static int spawn_child(remote_conn *c, char **argv, char **env, const char *cwd) {
  uv_loop_t *loop = c->hub->app->loop;
  uv_pipe_init(loop, &c->in, 0);
  uv_pipe_init(loop, &c->out, 0);
  uv_pipe_init(loop, &c->err, 0);
  c->in.data = c->out.data = c->err.data = c->process.data = c;
  c->open_handles += 4; /* the pipes, and the process handle (initialized by the spawn, even a failed one) */
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&c->in},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->out},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->err},
  };
  uv_process_options_t options = {
      .exit_cb = on_child_exit,
      .file = argv[0],
      .args = argv,
      .env = env,
      .cwd = cwd,
      .stdio_count = 3,
      .stdio = stdio,
  };
  /* Its own process group, killed with the server whatever ends it. */
  int rc = os_proc_spawn(loop, &c->process, &options);
  if (rc != 0) return rc;
  c->spawned = true;
  uv_read_start((uv_stream_t *)&c->out, on_alloc, on_child_stdout);
  uv_read_start((uv_stream_t *)&c->err, on_alloc, on_child_stderr);
  return 0;
}

/* remote.endpoint(url): the URL as libcurl reads it — scheme, host (lower
 * case, no IPv6 brackets: as permissions name it), port (the scheme's
 * default when none is given) and the URL as curl writes it back — or nil
 * and why. The net permission judges this parse, and the connection is
 * opened with the URL it writes back, so what is judged is what is used
 * (a Lua reading of "http://a\0@b/" would judge b where curl goes to a). */
static int remote_endpoint(lua_State *L) {
  size_t len;
  const char *url = luaL_checklstring(L, 1, &len);
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)url[i] < 0x20 || url[i] == 0x7f) {
      lua_pushnil(L);
      lua_pushliteral(L, "the URL has a control character (a NUL, a line break, ...)");
      return 2;
    }
  char why[300] = "";
  const curl_api *api = curl_lib_load("mcp.client", why, sizeof why);
  if (!api) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  CURLU *u = api->url();
  char *scheme = NULL, *host = NULL, *port = NULL, *full = NULL;
  bool ok = u && api->url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
            api->url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            api->url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            api->url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
            api->url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK && *host;
  int n;
  if (!ok) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: not a URL libcurl can read", url);
    n = 2;
  } else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: not an http:// or https:// URL", url);
    n = 2;
  } else {
    size_t hl = strlen(host);
    char *h = host;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2;
    for (size_t i = 0; i < hl; i++)
      if (h[i] >= 'A' && h[i] <= 'Z') h[i] = (char)(h[i] + 32);
    lua_pushstring(L, scheme);
    lua_pushlstring(L, h, hl);
    lua_pushinteger(L, strtol(port, NULL, 10));
    lua_pushstring(L, full);
    n = 4;
  }
  api->free(scheme);
  api->free(host);
  api->free(port);
  api->free(full);
  if (u) api->url_cleanup(u);
  return n;
}

/* remote.open{ key, command, cwd, env } or { key, url, headers } */
static int remote_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  if (!v->app) return luaL_error(L, "luamcp.remote.open: not available here (no server runs these scripts)");
  lua_getfield(L, 1, "key");
  const char *key = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  lua_getfield(L, 1, "command");
  int cmd_idx = lua_gettop(L);
  lua_getfield(L, 1, "url");
  const char *url = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  bool is_cmd = lua_type(L, cmd_idx) == LUA_TTABLE;
  if (is_cmd == (url != NULL)) return luaL_error(L, "luamcp.remote.open: give command (a list) or url, not both");
  if (is_cmd && lua_rawlen(L, cmd_idx) == 0) return luaL_error(L, "luamcp.remote.open: command is empty");
  remote_hub *hub = hub_get(v->app);
  if (!hub || hub->stopping) {
    lua_pushnil(L);
    lua_pushliteral(L, "the server is stopping");
    return 2;
  }
  if (key) {
    for (remote_conn *c = hub->conns; c; c = c->next) {
      if (!c->key || c->ended || c->exited || strcmp(c->key, key) != 0) continue;
      if (!hold(c, v)) return luaL_error(L, "luamcp.remote.open: out of memory");
      push_handle(L, c);
      lua_pushliteral(L, "reused");
      return 2;
    }
  }
  int open_count = 0; /* ended ones wait only for their handles to be collected: they hold nothing */
  for (remote_conn *c = hub->conns; c; c = c->next)
    if (!c->ended) open_count++;
  if (open_count >= REMOTE_MAX_CONNECTIONS) {
    lua_pushnil(L);
    lua_pushfstring(L, "too many connections to other servers (%d, the limit)", REMOTE_MAX_CONNECTIONS);
    return 2;
  }
  if (url) {
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
      lua_pushnil(L);
      lua_pushfstring(L, "%s: not an http:// or https:// URL", url);
      return 2;
    }
    size_t url_len = 0;
    lua_getfield(L, 1, "url");
    lua_tolstring(L, -1, &url_len);
    lua_pop(L, 1);
    if (!header_ok(url) || strlen(url) != url_len) /* a NUL would make curl read less than was judged */
      return luaL_error(L, "luamcp.remote.open: the URL has a control character");
  }
  lua_getfield(L, 1, "headers");
  int headers_idx = lua_gettop(L);
  if (!lua_isnil(L, headers_idx)) luaL_checktype(L, headers_idx, LUA_TTABLE);
  const char *name = key;
  if (!name && is_cmd) {
    lua_rawgeti(L, cmd_idx, 1);
    name = lua_tostring(L, -1);
    if (!name) return luaL_error(L, "luamcp.remote.open: command must be a list of strings");
  }
  if (!name) name = url;
  /* Everything that can raise an error comes before the connection exists. */
  char **argv = NULL, **env = NULL;
  const char *cwd = NULL;
  if (is_cmd) {
    argv = exec_string_list(L, cmd_idx, "mcp.client", "command", false);
    lua_getfield(L, 1, "env");
    if (!lua_isnil(L, -1)) {
      luaL_checktype(L, -1, LUA_TTABLE);
      env = exec_string_list(L, lua_gettop(L), "mcp.client", "env", true);
    }
    lua_getfield(L, 1, "cwd");
    cwd = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  }
  remote_conn *c = conn_new(hub, key, name);
  if (!c) return luaL_error(L, "luamcp.remote.open: out of memory");
  if (url) {
    c->http = true;
    c->url = strdup(url);
    if (!lua_isnil(L, headers_idx)) {
      lua_pushnil(L);
      while (lua_next(L, headers_idx)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_isstring(L, -1) && header_ok(lua_tostring(L, -2)) &&
            header_ok(lua_tostring(L, -1))) {
          remote_header *x = calloc(1, sizeof *x);
          x->name = strdup(lua_tostring(L, -2));
          x->value = strdup(lua_tostring(L, -1));
          x->next = c->headers;
          c->headers = x;
        }
        lua_pop(L, 1);
      }
    }
  } else {
    int rc = spawn_child(c, argv, env, cwd);
    if (rc != 0) {
      lua_rawgeti(L, cmd_idx, 1);
      lua_pushnil(L);
      lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), uv_strerror(rc));
      conn_end(c, "the server could not be started");
      conn_maybe_free(c); /* no holder: closes its handles */
      return 2;
    }
  }
  if (!hold(c, v)) return luaL_error(L, "luamcp.remote.open: out of memory");
  push_handle(L, c);
  lua_pushliteral(L, "new");
  return 2;
}

static int conn_next_id(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_pushinteger(L, c->next_id++);
  return 1;
}

/* h:send(json_text, headers) */
static int conn_send(lua_State *L) {
  remote_conn *c = check_conn(L);
  size_t len;
  const char *text = luaL_checklstring(L, 2, &len);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  if (c->ended) {
    lua_pushnil(L);
    lua_pushstring(L, c->ended);
    return 2;
  }
  if (len > DEFAULT_MAX_MESSAGE_BYTES) {
    lua_pushnil(L);
    lua_pushfstring(L, "the message is over %d bytes (the limit)", (int)DEFAULT_MAX_MESSAGE_BYTES);
    return 2;
  }
  if (!c->http && memchr(text, '\n', len)) {
    lua_pushnil(L);
    lua_pushliteral(L, "a message to a server over stdio must be one line (no newline in it)");
    return 2;
  }
  json_error err;
  json_doc *doc = json_parse(text, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    lua_pushnil(L);
    lua_pushfstring(L, "not JSON: %s", err.message);
    return 2;
  }
  const json_value *root = json_doc_root(doc);
  int64_t id = 0;
  bool is_request = root->type == JSON_OBJECT && json_object_get(root, "method") &&
                    id_of(json_object_get(root, "id"), &id) && json_object_get(root, "id")->type == JSON_INTEGER;
  json_doc_free(doc);
  if (is_request) {
    if (find_pending(c, id)) {
      lua_pushnil(L);
      lua_pushfstring(L, "a request with id %I is already in flight", (lua_Integer)id);
      return 2;
    }
    if (c->pending_count >= REMOTE_MAX_IN_FLIGHT) {
      /* Make room: the oldest answer nobody waits for (its task gave up). */
      for (remote_pending *p = c->pending; p; p = p->next)
        if (p->answered && !p->waiter) {
          pending_remove(c, p);
          break;
        }
    }
    if (c->pending_count >= REMOTE_MAX_IN_FLIGHT) {
      lua_pushnil(L);
      lua_pushfstring(L, "too many requests in flight on this connection (%d, the limit)", REMOTE_MAX_IN_FLIGHT);
      return 2;
    }
    remote_pending *p = calloc(1, sizeof *p);
    if (!p) return luaL_error(L, "out of memory");
    p->id = id;
    p->prev = c->pending_tail;
    if (c->pending_tail) c->pending_tail->next = p;
    else c->pending = p;
    c->pending_tail = p;
    c->pending_count++;
  }
  char why[300];
  bool ok = c->http ? post_start(c, POST_MESSAGE, text, len, id, is_request, L, lua_isnoneornil(L, 3) ? 0 : 3, why,
                                 sizeof why)
                    : child_send(c, text, len, why, sizeof why);
  if (!ok) {
    if (is_request) {
      remote_pending *p = find_pending(c, id);
      if (p) pending_remove(c, p);
    }
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int conn_set_header(lua_State *L) {
  remote_conn *c = check_conn(L);
  const char *name = luaL_checkstring(L, 2);
  const char *value = luaL_optstring(L, 3, NULL);
  if (!*name || !header_ok(name) || (value && !header_ok(value)))
    return luaL_error(L, "set_header: a header name or value with a line break");
  for (remote_header **p = &c->headers; *p; p = &(*p)->next) {
    if (strcasecmp((*p)->name, name) != 0) continue;
    remote_header *x = *p;
    if (value) {
      char *copy = strdup(value);
      if (!copy) return luaL_error(L, "out of memory");
      free(x->value);
      x->value = copy;
    } else {
      *p = x->next;
      free(x->name);
      free(x->value);
      free(x);
    }
    return 0;
  }
  if (value) {
    remote_header *x = calloc(1, sizeof *x);
    if (!x) return luaL_error(L, "out of memory");
    x->name = strdup(name);
    x->value = strdup(value);
    x->next = c->headers;
    c->headers = x;
  }
  return 0;
}

static void on_wait_timeout(uv_timer_t *timer) {
  remote_wait *w = timer->data;
  w->timed_out = true;
  wake(w);
}

/* Where a waiting task comes back to: what came for its request, or
 * wait again. Slot 1 holds the wait as light userdata. */
static int wait_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  remote_wait *w = lua_touserdata(L, 1);
  remote_conn *c = w->conn;
  remote_pending *p = find_pending(c, w->id);
  lua_settop(L, 2);
  if (p && p->items) {
    remote_item *it = p->items;
    p->items = it->next;
    if (!p->items) p->items_tail = NULL;
    p->item_count--;
    int n = 2;
    if (it->kind == ITEM_ANSWER) {
      lua_pushliteral(L, "answer");
      lua_pushlstring(L, it->text, it->len);
    } else if (it->kind == ITEM_MESSAGE) {
      lua_pushliteral(L, "message");
      lua_pushlstring(L, it->text, it->len);
    } else {
      lua_pushliteral(L, "failed");
      lua_pushlstring(L, it->text, it->len);
      lua_createtable(L, 0, 3);
      lua_pushinteger(L, it->status);
      lua_setfield(L, -2, "status");
      if (it->challenge) {
        lua_pushstring(L, it->challenge);
        lua_setfield(L, -2, "challenge");
      }
      if (it->body) {
        lua_pushlstring(L, it->body, it->body_len);
        lua_setfield(L, -2, "body");
      }
      n = 3;
    }
    bool final = it->kind != ITEM_MESSAGE;
    free_item(it);
    p->waiter = NULL;
    if (final) pending_remove(c, p);
    wait_release(w);
    return n;
  }
  if (!p || c->ended) {
    if (p) p->waiter = NULL;
    lua_pushliteral(L, "ended");
    lua_pushstring(L, c->ended ? c->ended : "no answer will come for this request");
    wait_release(w);
    return 2;
  }
  if (w->timed_out) {
    p->waiter = NULL;
    wait_release(w);
    lua_pushliteral(L, "timeout");
    return 1;
  }
  return task_wait_op(L, task_of(L), &w->op, wait_continue);
}

/* h:wait(id, timeout_ms) */
static int conn_wait(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_Integer id = luaL_checkinteger(L, 2);
  lua_Integer timeout_ms = luaL_optinteger(L, 3, 0);
  task *t = task_check(L, "mcp.client's wait");
  remote_pending *p = find_pending(c, id);
  if (!p) return luaL_error(L, "wait: no request with id %I was sent on this connection, or its answer was taken", id);
  if (p->waiter) return luaL_error(L, "wait: another task already waits for request %I", id);
  remote_wait *w = calloc(1, sizeof *w);
  if (!w) return luaL_error(L, "out of memory");
  w->op.cancel = cancel_wait;
  w->conn = c;
  w->id = id;
  w->task = t;
  uv_timer_init(c->hub->app->loop, &w->timer);
  w->timer.data = w;
  p->waiter = w;
  lua_settop(L, 1); /* the handle stays on the stack (slot 2): a waiting task keeps its connection */
  lua_pushlightuserdata(L, w);
  lua_insert(L, 1);
  if (!p->items && !c->ended && timeout_ms > 0) uv_timer_start(&w->timer, on_wait_timeout, (uint64_t)timeout_ms, 0);
  if (p->items || c->ended) return wait_continue(L, LUA_OK, 0);
  return task_wait_op(L, t, &w->op, wait_continue);
}

static int conn_on_message(lua_State *L) {
  remote_conn *c = check_conn(L);
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  remote_gen *g = gen_of(c, vm_of(L));
  if (!g) return luaL_error(L, "on_message: this generation does not hold the connection");
  if (g->fn_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, g->fn_ref);
  g->fn_ref = LUA_NOREF;
  if (!lua_isnil(L, 2)) {
    lua_settop(L, 2);
    g->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    hub_kick(c->hub); /* what waited for it */
  }
  return 0;
}

static int conn_info(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_createtable(L, 0, 6);
  lua_pushstring(L, c->http ? "http" : "child");
  lua_setfield(L, -2, "kind");
  if (c->key) {
    lua_pushstring(L, c->key);
    lua_setfield(L, -2, "key");
  }
  if (c->spawned) {
    lua_pushinteger(L, c->process.pid);
    lua_setfield(L, -2, "pid");
  }
  if (c->url) {
    lua_pushstring(L, c->url);
    lua_setfield(L, -2, "url");
  }
  if (c->session_id) {
    lua_pushstring(L, c->session_id);
    lua_setfield(L, -2, "session_id");
  }
  if (c->ended) {
    lua_pushstring(L, c->ended);
    lua_setfield(L, -2, "ended");
  }
  if (c->exited) {
    lua_pushinteger(L, c->term_signal ? -c->term_signal : c->exit_status);
    lua_setfield(L, -2, "exit_status");
  }
  return 1;
}

static int conn_close_lua(lua_State *L) {
  remote_conn *c = check_conn(L);
  conn_close(c, "closed by the script");
  return 0;
}

static int conn_tostring(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_pushfstring(L, "luamcp.remote connection (%s %s)", c->http ? "http" : "child", c->name);
  return 1;
}

int luaopen_luamcp_remote(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"next_id", conn_next_id},     {"send", conn_send}, {"set_header", conn_set_header},
      {"wait", conn_wait},           {"on_message", conn_on_message}, {"info", conn_info},
      {"close", conn_close_lua},     {NULL, NULL},
  };
  if (luaL_newmetatable(L, REMOTE_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, conn_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, conn_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, lua_upvalueindex(1)); /* the vm */
  lua_pushcclosure(L, remote_open, 1);
  lua_setfield(L, -2, "open");
  lua_pushcfunction(L, remote_endpoint);
  lua_setfield(L, -2, "endpoint");
  return 1;
}

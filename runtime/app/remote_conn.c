/*
 * remote_conn.c - luamcp.remote's connections (lua_remote.c describes
 * the interface): the hub that owns them for the app and resumes the
 * tasks waiting on them, a connection's life (held by generations,
 * lingering, closed, freed in its handles' close callbacks), the messages
 * that come in and the three transports they come over, a child's stdio,
 * a WebSocket and Streamable HTTP. Apart from lua_remote.c so that the connections,
 * which outlive every Lua state, read without the Lua face; that face
 * calls in here, never the other way.
 */
#include <lauxlib.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base64.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "core/sse_reader.h"
#include "app/app.h"
#include "app/curl_lib.h"
#include "app/curl_loop.h"
#include "app/lua_exec.h"
#include "app/lua_task.h"
#include "app/remote_internal.h"
#include "os/crypto.h"
#include "os/proc.h"

/* ---- The hub: resuming tasks and running on_message ------------------ */

static void on_kick(uv_timer_t *timer);

void remote_hub_kick(remote_hub *hub) {
  if (!hub->stopping && !uv_is_active((uv_handle_t *)&hub->kick)) uv_timer_start(&hub->kick, on_kick, 0, 0);
}

void remote_wake(remote_wait *w) {
  if (!w || !w->task || w->queued) return;
  w->queued = true;
  w->wake_next = NULL;
  remote_hub *hub = w->conn->hub;
  if (hub->wake_tail) hub->wake_tail->wake_next = w;
  else hub->wake = w;
  hub->wake_tail = w;
  remote_hub_kick(hub);
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
void remote_wait_release(remote_wait *w) {
  unwake(w);
  w->task = NULL;
  uv_timer_stop(&w->timer);
  uv_close((uv_handle_t *)&w->timer, free_wait);
}

void remote_free_item(remote_item *it) {
  free(it->challenge);
  free(it->body);
  free(it);
}

remote_pending *remote_find_pending(remote_conn *c, int64_t id) {
  for (remote_pending *p = c->pending; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

void remote_pending_remove(remote_conn *c, remote_pending *p) {
  if (p->prev) p->prev->next = p->next;
  else c->pending = p->next;
  if (p->next) p->next->prev = p->prev;
  else c->pending_tail = p->prev;
  c->pending_count--;
  while (p->items) {
    remote_item *it = p->items;
    p->items = it->next;
    remote_free_item(it);
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
    remote_free_item(old);
  }
  if (it->kind != ITEM_MESSAGE) p->answered = true;
  if (p->items_tail) p->items_tail->next = it;
  else p->items = it;
  p->items_tail = it;
  p->item_count++;
  remote_wake(p->waiter);
}

/* A message no request takes, for on_message. */
static void unclaimed_push(remote_conn *c, const char *text, size_t len) {
  if (c->unclaimed_count >= REMOTE_MAX_UNCLAIMED) {
    remote_item *old = c->unclaimed;
    c->unclaimed = old->next;
    if (!c->unclaimed) c->unclaimed_tail = NULL;
    c->unclaimed_count--;
    remote_free_item(old);
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
  remote_hub_kick(c->hub);
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
      remote_free_item(it);
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

remote_hub *remote_hub_get(lua_app *app) {
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
bool remote_header_ok(const char *s) {
  for (; *s; s++)
    if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f) return false;
  return true;
}

/* ---- A connection's life ------------------------------------------------ */

static void child_gone(remote_conn *c);
static void ws_flush(remote_conn *c);

/* One of c's handles (or a transfer's timer) is closed: the memory goes
 * with the last. */
static void conn_handle_done(remote_conn *c) {
  if (--c->open_handles > 0) return;
  remote_hub *hub = c->hub;
  while (c->pending) remote_pending_remove(c, c->pending);
  while (c->unclaimed) {
    remote_item *it = c->unclaimed;
    c->unclaimed = it->next;
    remote_free_item(it);
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
  if (c->ws_ctx) c->ws_api->wslay_event_context_free(c->ws_ctx);
  if (c->ws_easy) hub->api->easy_cleanup(c->ws_easy); /* its socket with it: the watch went first */
  buf_free(&c->ws_tls_out);
  buf_free(&c->ws_field);
  buf_free(&c->ws_accept);
  buf_free(&c->ws_in);
  buf_free(&c->ws_out);
  free(c->ws_host_header);
  free(c->ws_path);
  free(c->key);
  free(c->name);
  free(c->ended);
  free(c->url);
  free(c->unix_socket);
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
void remote_conn_maybe_free(remote_conn *c) {
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
  if (c->ws) close_conn_handle(c, (uv_handle_t *)&c->ws_tcp);
  if (c->ws_watch) os_sock_watch_close(c->ws_watch);
  c->ws_watch = NULL;
  if (!c->http) {
    close_conn_handle(c, (uv_handle_t *)&c->process);
    close_conn_handle(c, (uv_handle_t *)&c->in);
    close_conn_handle(c, (uv_handle_t *)&c->out);
    close_conn_handle(c, (uv_handle_t *)&c->err);
  }
}

/* It is gone or going: every waiting task hears why ("ended"). */
void remote_conn_end(remote_conn *c, const char *why) {
  if (c->ended) return;
  c->ended = strdup(why);
  if (!c->ended) c->ended = strdup("ended");
  for (remote_pending *p = c->pending; p; p = p->next) remote_wake(p->waiter);
  if (c->http) {
    for (remote_post *p = c->posts; p; p = p->next)
      if (p->what != POST_DELETE) remote_post_abort(p);
  }
  remote_hub_kick(c->hub);
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

void remote_conn_close(remote_conn *c, const char *why) {
  bool was_open = !c->ended;
  remote_conn_end(c, why);
  uv_timer_stop(&c->timer);
  c->lingering = false;
  if (c->http) {
    if (was_open && c->session_id && !c->hub->stopping) {
      char err[200];
      if (!remote_post_start(c, POST_DELETE, NULL, 0, 0, false, NULL, 0, err, sizeof err))
        log_write(LOG_DEBUG, "mcp.client %s: DELETE: %s", c->name, err);
    }
  } else if (c->ws) {
    if (was_open && c->ws_upgraded && !c->handles_closing) {
      c->ws_api->wslay_event_queue_close(c->ws_ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
      ws_flush(c);
    }
  } else if (c->spawned && !c->exited) {
    if (c->in.loop && !uv_is_closing((uv_handle_t *)&c->in)) uv_close((uv_handle_t *)&c->in, on_conn_handle_closed);
    if (c->kill_stage == 0) uv_timer_start(&c->timer, on_close_grace, REMOTE_CLOSE_GRACE_MS, 0);
  }
  remote_conn_maybe_free(c);
}

static void on_linger_done(uv_timer_t *timer) {
  remote_conn *c = timer->data;
  c->lingering = false;
  if (!c->gens) remote_conn_close(c, "closed: no generation of the scripts used it");
}

/* The generation g is gone from c->gens. */
void remote_conn_unheld(remote_conn *c) {
  if (c->gens) return;
  if (c->key && !c->ended && !c->exited && !c->hub->stopping) {
    c->lingering = true;
    uv_timer_start(&c->timer, on_linger_done, REMOTE_LINGER_MS, 0);
    return;
  }
  remote_conn_close(c, "closed");
}

/* Take the generation *p off c->gens and free it (its on_message
 * function's reference is the caller's to drop). */
void remote_gen_drop(remote_gen **p) {
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
    remote_gen_drop(p);
    remote_conn_unheld(c);
    return;
  }
}

remote_gen *remote_gen_of(remote_conn *c, vm *v) {
  for (remote_gen *g = c->gens; g; g = g->next)
    if (g->vm == v) return g;
  return NULL;
}

bool remote_hold(remote_conn *c, vm *v) {
  remote_gen *g = remote_gen_of(c, v);
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
    while (c->gens) remote_gen_drop(&c->gens);
    for (remote_pending *p = c->pending; p; p = p->next) p->waiter = NULL;
    signal_child(c, SIGKILL); /* the server stops now: no grace */
    remote_conn_end(c, "the server stopped");
    while (c->posts) remote_post_abort(c->posts);
    remote_conn_maybe_free(c);
    c = next;
  }
  if (hub->curl) curl_loop_close(hub->curl);
  hub->curl = NULL;
  uv_close((uv_handle_t *)&hub->kick, on_hub_handle_closed);
}

/* ---- Messages in ------------------------------------------------------- */

/* The integer a request id or progress token names, if it is one
 * (our ids are integers; a token may come back as a string of digits). */
bool remote_id_of(const json_value *v, int64_t *out) {
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
  if (!method && remote_id_of(idv, &id)) { /* an answer */
    remote_pending *p = remote_find_pending(c, id);
    if (p && !p->answered) {
      pending_push(p, new_item(ITEM_ANSWER, text, len));
      return;
    }
  } else if (method && method->type == JSON_STRING) {
    remote_pending *p = NULL;
    if (strcmp(method->u.string, "notifications/progress") == 0) {
      const json_value *params = json_object_get(msg, "params");
      int64_t token;
      if (params && params->type == JSON_OBJECT && remote_id_of(json_object_get(params, "progressToken"), &token))
        p = remote_find_pending(c, token);
    }
    if (!p && post && post->has_id) p = remote_find_pending(c, post->id);
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
  if (!c->exited && !c->ended) remote_conn_close(c, "the server closed its stdout and kept running: it is stopped");
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
      remote_conn_close(c, why);
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
  remote_conn_end(c, why);
  remote_conn_maybe_free(c);
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

bool remote_child_send(remote_conn *c, const char *text, size_t len, char *why, size_t why_len) {
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

/* Start the child: its pipes read, the connection its owner. 0, or a libuv error. */
int remote_spawn_child(remote_conn *c, char **argv, char **env, const char *cwd) {
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

/* ---- A WebSocket -------------------------------------------------------- */

/* The frames wslay made in one go (a head and its payload come in two
 * calls), written at once. */
static void ws_tls_flush(remote_conn *c);

/* Bytes to the server: on the socket, or (wss) through libcurl. */
static void ws_write_raw(remote_conn *c, const char *data, size_t len) {
  if (c->handles_closing) return;
  size_t queued = c->ws_tls ? c->ws_tls_out.len : c->ws_tcp.write_queue_size;
  if (queued > REMOTE_MAX_WRITE_QUEUE_BYTES) {
    remote_conn_close(c, "the server does not read its WebSocket");
    return;
  }
  if (c->ws_tls) {
    buf_append(&c->ws_tls_out, data, len);
    ws_tls_flush(c);
    return;
  }
  remote_write *w = malloc(sizeof *w + len);
  if (!w) return;
  memcpy(w->data, data, len);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t *)&c->ws_tcp, &b, 1, on_written) != 0) free(w);
}

static void ws_flush(remote_conn *c) {
  if (!c->ws_upgraded || c->handles_closing) return;
  c->ws_api->wslay_event_send(c->ws_ctx);
  if (!c->ws_out.len) return;
  ws_write_raw(c, c->ws_out.data, c->ws_out.len);
  buf_clear(&c->ws_out);
}

static ssize_t ws_on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg) {
  (void)ctx, (void)flags;
  buf_append(&((remote_conn *)arg)->ws_out, (const char *)data, len);
  return (ssize_t)len;
}

static ssize_t ws_on_recv(wslay_event_context_ptr ctx, uint8_t *out, size_t len, int flags, void *arg) {
  (void)flags;
  remote_conn *c = arg;
  size_t left = c->ws_in.len - c->ws_in_at;
  if (!left) {
    c->ws_api->wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = left < len ? left : len;
  memcpy(out, c->ws_in.data + c->ws_in_at, n);
  c->ws_in_at += n;
  return (ssize_t)n;
}

static int ws_on_genmask(wslay_event_context_ptr ctx, uint8_t *out, size_t len, void *arg) {
  (void)ctx, (void)arg;
  return os_random_bytes(out, len) ? 0 : -1;
}

static void ws_on_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user) {
  (void)ctx;
  remote_conn *c = user;
  if (c->ended) return;
  if (arg->opcode == WSLAY_TEXT_FRAME && arg->msg_length) {
    route(c, NULL, (const char *)arg->msg, arg->msg_length);
  } else if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    char why[120];
    snprintf(why, sizeof why, "the server closed the WebSocket (%u)", arg->status_code);
    remote_conn_end(c, why);
  }
}

static int ws_on_header_field(http_parser *p, const char *at, size_t n) {
  remote_conn *c = p->data;
  if (c->ws_in_value) buf_clear(&c->ws_field); /* a new header begins */
  c->ws_in_value = false;
  buf_append(&c->ws_field, at, n);
  return 0;
}

static int ws_on_header_value(http_parser *p, const char *at, size_t n) {
  remote_conn *c = p->data;
  c->ws_in_value = true;
  static const char name[] = "sec-websocket-accept";
  if (c->ws_field.len == sizeof name - 1 && strncasecmp(c->ws_field.data, name, sizeof name - 1) == 0)
    buf_append(&c->ws_accept, at, n);
  return 0;
}

static int ws_on_headers_complete(http_parser *p) {
  remote_conn *c = p->data;
  /* RFC 6455 4.2.2: base64(SHA-1(key GUID)). */
  char joined[sizeof c->ws_key + 40], expected[32];
  snprintf(joined, sizeof joined, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", c->ws_key);
  uint8_t digest[OS_SHA1_BYTES];
  os_sha1(joined, strlen(joined), digest);
  base64_encode(digest, sizeof digest, expected);
  expected[base64_encoded_len(sizeof digest)] = '\0';
  char why[120];
  if (p->status_code != 101) {
    snprintf(why, sizeof why, "the server refused the WebSocket: HTTP %u", p->status_code);
    remote_conn_close(c, why);
  } else if (c->ws_accept.len != strlen(expected) || memcmp(c->ws_accept.data, expected, c->ws_accept.len) != 0) {
    remote_conn_close(c, "the server answered the WebSocket upgrade with a wrong Sec-WebSocket-Accept");
  } else {
    c->ws_upgraded = true;
  }
  return 1; /* no body: frames follow */
}

static const http_parser_settings WS_RESPONSE = {.on_header_field = ws_on_header_field,
                                                 .on_header_value = ws_on_header_value,
                                                 .on_headers_complete = ws_on_headers_complete};

/* Bytes from the server (n < 0: its end). */
static void ws_got(remote_conn *c, const char *data, ssize_t n) {
  if (n > 0 && !c->ended) buf_append(&c->ws_in, data, (size_t)n);
  if (n < 0) {
    if (c->ws_tls) {
      if (c->ws_watch) os_sock_watch_set(c->ws_watch, 0);
    } else {
      uv_read_stop((uv_stream_t *)&c->ws_tcp);
    }
    remote_conn_close(c, c->ws_upgraded ? "the server closed the connection" : "the server closed the connection before the upgrade");
    return;
  }
  if (c->ended) return;
  if (!c->ws_upgraded) {
    c->ws_in_at += http_parser_execute(&c->ws_parser, &WS_RESPONSE, c->ws_in.data + c->ws_in_at, c->ws_in.len - c->ws_in_at);
    if (c->ended) return;
    if (!c->ws_upgraded) {
      if (HTTP_PARSER_ERRNO(&c->ws_parser) != HPE_OK) remote_conn_close(c, "the answer to the WebSocket upgrade is not HTTP");
      return;
    }
  }
  if (c->ws_api->wslay_event_recv(c->ws_ctx) != 0 || !c->ws_api->wslay_event_want_read(c->ws_ctx)) {
    ws_flush(c); /* the answer to their close, or ours to a protocol error */
    if (!c->ended) remote_conn_end(c, "the WebSocket closed");
    remote_conn_maybe_free(c);
    return;
  }
  if (c->ws_in_at == c->ws_in.len) {
    buf_clear(&c->ws_in);
    c->ws_in_at = 0;
  }
  ws_flush(c); /* pongs, and what was queued before the upgrade was answered */
}

static void ws_on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  ws_got(stream->data, b->base, n);
  free(b->base);
}

/* The upgrade request, once connected. */
static void ws_send_upgrade(remote_conn *c) {
  buf req_text = BUF_INIT;
  buf_printf(&req_text,
             "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n",
             c->ws_path, c->ws_host_header, c->ws_key);
  for (remote_header *x = c->headers; x; x = x->next) buf_printf(&req_text, "%s: %s\r\n", x->name, x->value);
  buf_append_str(&req_text, "\r\n");
  ws_write_raw(c, req_text.data, req_text.len);
  buf_free(&req_text);
}

/* ---- wss:// through libcurl ---- */

static void ws_tls_flush(remote_conn *c) {
  while (c->ws_tls_out.len && !c->handles_closing) {
    size_t sent = 0;
    CURLcode rc = c->hub->api->easy_send(c->ws_easy, c->ws_tls_out.data, c->ws_tls_out.len, &sent);
    if (rc == CURLE_AGAIN) break;
    if (rc != CURLE_OK) {
      char why[200];
      snprintf(why, sizeof why, "writing to the WebSocket: %s", c->hub->api->easy_strerror(rc));
      buf_clear(&c->ws_tls_out);
      remote_conn_close(c, why);
      return;
    }
    buf_consume(&c->ws_tls_out, sent);
  }
  if (c->ws_watch) os_sock_watch_set(c->ws_watch, UV_READABLE | (c->ws_tls_out.len ? UV_WRITABLE : 0));
}

static void ws_tls_ready(void *data, int status, int events) {
  remote_conn *c = data;
  if (status < 0) {
    ws_got(c, NULL, -1);
    return;
  }
  if (events & UV_WRITABLE) ws_tls_flush(c);
  if (!(events & UV_READABLE)) return;
  /* Everything libcurl has, what its TLS layer buffered included. */
  char in[16384];
  while (c->ws_watch && !c->ended) {
    size_t n = 0;
    CURLcode rc = c->hub->api->easy_recv(c->ws_easy, in, sizeof in, &n);
    if (rc == CURLE_AGAIN) break;
    if (rc != CURLE_OK || n == 0) {
      ws_got(c, NULL, -1);
      break;
    }
    ws_got(c, in, (ssize_t)n);
  }
}

/* On the thread pool: connect and shake hands (blocking). */
static void ws_tls_connect(uv_work_t *work) {
  remote_conn *c = work->data;
  c->ws_connect_result = c->hub->api->easy_perform(c->ws_easy);
}

/* Back on the loop: TCP and TLS are up (or why not). */
static void ws_tls_connected(uv_work_t *work, int status) {
  remote_conn *c = work->data;
  if (!c->ended && !c->handles_closing) {
    char why[300];
    curl_socket_t sock = CURL_SOCKET_BAD;
    if (status != 0 || c->ws_connect_result != CURLE_OK) {
      snprintf(why, sizeof why, "cannot connect to the WebSocket: %s",
               status != 0 ? uv_strerror(status) : c->hub->api->easy_strerror(c->ws_connect_result));
      remote_conn_close(c, why);
    } else if (c->hub->api->easy_getinfo(c->ws_easy, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK ||
               sock == CURL_SOCKET_BAD) {
      remote_conn_close(c, "libcurl kept no connection for the WebSocket");
    } else if (!(c->ws_watch = os_sock_watch_new(c->hub->app->loop, (uv_os_sock_t)sock, ws_tls_ready, c))) {
      remote_conn_close(c, "cannot watch the WebSocket's connection");
    } else {
      os_sock_watch_set(c->ws_watch, UV_READABLE);
      ws_send_upgrade(c);
    }
  }
  conn_handle_done(c); /* the connecting work held c */
}

static bool hub_curl(remote_hub *hub, char *why, size_t why_len);

static bool ws_tls_start(remote_conn *c, const char *https_url, char *why, size_t why_len) {
  remote_hub *hub = c->hub;
  if (!hub_curl(hub, why, why_len)) return false;
  const curl_api *api = hub->api;
  CURL *e = api->easy_init();
  if (!e) {
    snprintf(why, why_len, "curl could not make a transfer");
    return false;
  }
  c->ws_easy = e;
  api->easy_setopt(e, CURLOPT_URL, https_url);
  api->easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
  api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
  /* Straight to the host the net permission judged, as for HTTP. */
  api->easy_setopt(e, CURLOPT_PROXY, "");
  api->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)REMOTE_CONNECT_TIMEOUT_MS);
  c->ws_work.data = c;
  int rc = uv_queue_work(hub->app->loop, &c->ws_work, ws_tls_connect, ws_tls_connected);
  if (rc != 0) {
    snprintf(why, why_len, "cannot start connecting: %s", uv_strerror(rc));
    return false;
  }
  c->open_handles++; /* the work holds c until ws_tls_connected */
  return true;
}

static void ws_on_connect(uv_connect_t *req, int status) {
  remote_conn *c = req->data;
  if (status == UV_ECANCELED || c->ended) return;
  if (status < 0) {
    char why[200];
    snprintf(why, sizeof why, "cannot connect to the WebSocket: %s", uv_strerror(status));
    remote_conn_close(c, why);
    return;
  }
  ws_send_upgrade(c);
  uv_read_start((uv_stream_t *)&c->ws_tcp, on_alloc, ws_on_read);
}

static void ws_on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res) {
  remote_conn *c = gai->data;
  if (status == 0 && !c->ended && !c->handles_closing) {
    c->ws_connect.data = c;
    int rc = uv_tcp_connect(&c->ws_connect, &c->ws_tcp, res->ai_addr, ws_on_connect);
    if (rc != 0) status = rc;
  }
  if (res) uv_freeaddrinfo(res);
  if (status != 0 && !c->ended) {
    char why[200];
    snprintf(why, sizeof why, "cannot reach the WebSocket's host: %s", uv_strerror(status));
    remote_conn_close(c, why);
  }
  conn_handle_done(c); /* the lookup held c */
}

bool remote_ws_start(remote_conn *c, const char *url, char *why, size_t why_len) {
  c->ws_api = os_wslay(why, why_len);
  if (!c->ws_api) return false;
  /* ws://HOST[:PORT][/PATH] (or wss://): the permission check judged this host. */
  bool tls = strncmp(url, "wss://", 6) == 0;
  const char *h = url + (tls ? 6 : 5), *end = h + strcspn(h, "/?#");
  const char *colon = *h == '[' ? NULL : memchr(h, ':', (size_t)(end - h));
  if (*h == '[') {
    const char *close = memchr(h, ']', (size_t)(end - h));
    colon = close && close + 1 < end && close[1] == ':' ? close + 1 : NULL;
  }
  const char *host_end = colon ? colon : end;
  char host[256], port[8];
  snprintf(port, sizeof port, "%s", tls ? "443" : "80");
  size_t hl = (size_t)(host_end - h);
  if (hl >= 2 && *h == '[') h++, hl -= 2;
  if (!hl || hl >= sizeof host || (colon && ((size_t)(end - colon - 1) >= sizeof port || end - colon < 2))) {
    snprintf(why, why_len, "%s: not a ws://HOST[:PORT]/PATH URL", url);
    return false;
  }
  memcpy(host, h, hl);
  host[hl] = '\0';
  if (colon) {
    memcpy(port, colon + 1, (size_t)(end - colon - 1));
    port[end - colon - 1] = '\0';
  }
  uint8_t nonce[16];
  static const struct wslay_event_callbacks callbacks = {.recv_callback = ws_on_recv,
                                                         .send_callback = ws_on_send,
                                                         .genmask_callback = ws_on_genmask,
                                                         .on_msg_recv_callback = ws_on_message};
  if (!os_random_bytes(nonce, sizeof nonce) || c->ws_api->wslay_event_context_client_init(&c->ws_ctx, &callbacks, c) != 0) {
    c->ws_ctx = NULL;
    snprintf(why, why_len, "out of memory or randomness");
    return false;
  }
  c->ws_api->wslay_event_config_set_max_recv_msg_length(c->ws_ctx, DEFAULT_MAX_MESSAGE_BYTES);
  base64_encode(nonce, sizeof nonce, c->ws_key);
  c->ws_key[base64_encoded_len(sizeof nonce)] = '\0';
  c->ws = true;
  c->ws_tls = tls;
  size_t scheme_len = tls ? 6 : 5;
  c->ws_host_header = strndup(url + scheme_len, (size_t)(end - url - (ptrdiff_t)scheme_len));
  c->ws_path = strdup(*end == '/' ? end : "/");
  http_parser_init(&c->ws_parser, HTTP_RESPONSE);
  c->ws_parser.data = c;
  uv_loop_t *loop = c->hub->app->loop;
  uv_tcp_init(loop, &c->ws_tcp);
  c->ws_tcp.data = c;
  c->open_handles++;
  if (tls) {
    char https[2100];
    snprintf(https, sizeof https, "https://%s", url + 6);
    return ws_tls_start(c, https, why, why_len);
  }
  c->ws_gai.data = c;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  int rc = uv_getaddrinfo(loop, &c->ws_gai, ws_on_resolved, host, port, &hints);
  if (rc != 0) {
    snprintf(why, why_len, "cannot look %s up: %s", host, uv_strerror(rc));
    return false;
  }
  c->open_handles++; /* the lookup holds c until its callback */
  return true;
}

bool remote_ws_send(remote_conn *c, const char *text, size_t len, char *why, size_t why_len) {
  struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)text, len};
  if (c->ws_api->wslay_event_queue_msg(c->ws_ctx, &msg) != 0) {
    snprintf(why, why_len, "the WebSocket is closing");
    return false;
  }
  ws_flush(c); /* before the upgrade is answered, it waits in wslay's queue */
  return true;
}

/* ---- Streamable HTTP ---------------------------------------------------- */

static remote_post *post_of(curl_transfer *t) { return (remote_post *)((char *)t - offsetof(remote_post, transfer)); }

static void free_post(uv_handle_t *h) {
  remote_post *p = h->data;
  remote_conn *c = p->conn;
  free(p);
  c->post_count--;
  remote_conn_maybe_free(c);
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

void remote_post_abort(remote_post *p) { post_destroy(p); }

static void fail_request(remote_post *post, const char *why) {
  remote_pending *q = post->has_id ? remote_find_pending(post->conn, post->id) : NULL;
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
    if (*v && strlen(v) < 1024 && remote_header_ok(v) && p->what != POST_DELETE) {
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
  if (!remote_post_start(c, POST_RESUME, NULL, 0, old->id, true, NULL, 0, err, sizeof err)) {
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
  remote_pending *q = remote_find_pending(c, old->id);
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
        remote_post_abort(q);
        break; /* the list changed */
      }
    }
  }
  char why[300];
  remote_pending *q = p->has_id ? remote_find_pending(c, p->id) : NULL;
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
    if (waiting && !remote_find_pending(c, p->id)->answered) {
      snprintf(why, sizeof why, "the server's answer (HTTP %ld) was not the answer to this request", p->status);
      fail_request(p, why);
    }
  } else if (waiting) {
    snprintf(why, sizeof why, "the server answered HTTP %ld with no body", p->status);
    fail_request(p, why);
  }
  post_destroy(p);
}

static void hub_after_curl(void *data) { remote_hub_kick(data); }

/* The hub's curl loop, made on first use (HTTP transfers, wss://). */
static bool hub_curl(remote_hub *hub, char *why, size_t why_len) {
  if (!hub->curl) {
    if (!(hub->api = curl_lib_load("mcp.client", hub->curl_why, sizeof hub->curl_why)) ||
        !(hub->curl = curl_loop_new(hub->app->loop, hub->api, hub_after_curl, hub))) {
      snprintf(why, why_len, "%s", hub->curl_why[0] ? hub->curl_why : "libcurl could not start");
      return false;
    }
  }
  return true;
}


/* Start a transfer: a message (body), a resumption GET or the DELETE.
 * Extra headers from the Lua table at extra_idx (0: none). */
bool remote_post_start(remote_conn *c, post_what what, const char *body, size_t len, int64_t id, bool has_id,
                       lua_State *L, int extra_idx, char *why, size_t why_len) {
  remote_hub *hub = c->hub;
  if (hub->stopping) {
    snprintf(why, why_len, "the server is stopping");
    return false;
  }
  if (!hub_curl(hub, why, why_len)) return false;
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
        if (remote_header_ok(name) && remote_header_ok(value) && *name) {
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
  if (c->unix_socket) api->easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, c->unix_socket);
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
    remote_pending *q = remote_find_pending(c, id);
    if (q) q->post = p;
  }
  return true;
}

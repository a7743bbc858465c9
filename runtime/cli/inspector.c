/* inspector.c - the web inspector's two ways in. See inspector.h. */
#include "cli/inspector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli/client_conn.h"
#include "cli/version.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "core/session.h"
#include "core/wire.h"
#include "core/wire_log.h"
#include "os/signals.h"
#include "transport/ui_http.h"

/* What the page sent while a handler computes (server.nested_poll): it
 * waits, as any transport's input does, for the loop's next quiet turn.
 * Owner: the inspector's queue. */
typedef struct page_message {
  struct page_message *next;
  size_t len;
  char json[];
} page_message;

enum { PAGE_QUEUE_MAX = 1024 };

/* Owner: whoever started it (inspector_start, or the proxy command). */
struct inspector {
  uv_loop_t *loop;
  wire_log log;
  ui_server *ui;
  const char *mode; /* "dev" or "inspect" */
  char *target;
  /* The scripts in this process (dev, inspect PATH). */
  server *srv;
  lua_app *app;
  session *page; /* the page's own session, "ui" */
  uv_idle_t deliver; /* runs while the page's messages wait (an idle handle: the loop must not block meanwhile) */
  page_message *queue, *queue_tail;
  int queued;
  /* Another server (inspect -- COMMAND, --http URL). */
  client_conn *conn;
  char **argv;  /* the command, to start it again (reset) */
  char *url;
  bool reset_wanted, stop, conn_ended;
  /* The page's initialize, while its answer is awaited, and that answer:
   * a page that comes back (a refresh) goes on with the same connection. */
  jsonrpc_id init_id;
  bool init_pending;
  char *initialized;
};

static double now_ms(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec * 1e3 + tv.tv_usec / 1e3;
}

/* ---- What the page is shown --------------------------------------------- */

static void record_message(inspector *ins, const char *conn, const char *version, bool from_client, const char *json,
                           size_t len) {
  wire_log_message(&ins->log, now_ms(), conn, version, from_client, json, len);
  ui_notify(ins->ui);
}

/* A connection opens or closes (the page's, or the inspected server's). */
static void record_conn(inspector *ins, const char *conn, bool open, const char *why) {
  buf b = BUF_INIT;
  buf_append_str(&b, "\"kind\":\"conn\",\"conn\":");
  json_write_string(&b, conn, strlen(conn));
  buf_printf(&b, ",\"state\":\"%s\"", open ? "open" : "closed");
  if (why) {
    buf_append_str(&b, ",\"why\":");
    json_write_string(&b, why, strlen(why));
  }
  wire_log_event(&ins->log, now_ms(), b.data, b.len);
  buf_free(&b);
  ui_notify(ins->ui);
}

/* The page's initialize goes out: remember its id, to know its answer. */
static void note_page_request(inspector *ins, const char *json, size_t len) {
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, NULL);
  if (!doc) return;
  jsonrpc_message m;
  jsonrpc_classify(json_doc_root(doc), json, &m);
  if (m.kind == JSONRPC_REQUEST && m.id && strcmp(m.method, "initialize") == 0) {
    if (ins->init_pending) jsonrpc_id_free(&ins->init_id);
    jsonrpc_id_copy(&ins->init_id, m.id, json);
    ins->init_pending = true;
  }
  json_doc_free(doc);
}

static void note_page_answer(inspector *ins, const char *json, size_t len) {
  if (!ins->init_pending) return;
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, NULL);
  if (!doc) return;
  const json_value *root = json_doc_root(doc);
  const json_value *id = json_object_get(root, "id");
  if (id && jsonrpc_id_matches(&ins->init_id, id)) {
    jsonrpc_id_free(&ins->init_id);
    ins->init_pending = false;
    free(ins->initialized);
    ins->initialized = json_object_get(root, "result") ? strndup(json, len) : NULL;
    /* Over HTTP, what the server sends on its own comes on the session's
     * GET stream: open it once the session exists. */
    if (ins->initialized && ins->conn && ins->conn->ops->get_stream) {
      buf err = BUF_INIT;
      ins->conn->ops->get_stream(ins->conn, NULL, 0, &err);
      buf_free(&err);
    }
  }
  json_doc_free(doc);
}

static void forget_initialize(inspector *ins) {
  if (ins->init_pending) jsonrpc_id_free(&ins->init_id);
  ins->init_pending = false;
  free(ins->initialized);
  ins->initialized = NULL;
}

static void describe(void *arg, buf *out) {
  inspector *ins = arg;
  buf_printf(out, "\"mode\":\"%s\",\"target\":", ins->mode);
  json_write_string(out, ins->target, strlen(ins->target));
  buf_append_str(out, ",\"luamcp\":\"" LUAMCP_VERSION "\",\"ui_conn\":\"ui\",\"reloads\":");
  buf_append_str(out, ins->app && ins->app->watch ? "true" : "false");
  buf_append_str(out, ",\"initialized\":");
  if (ins->initialized) json_write_string(out, ins->initialized, strlen(ins->initialized));
  else buf_append_str(out, "null");
}

/* ---- The scripts in this process ---------------------------------------- */

static void on_wire(void *data, const session *s, wire_direction dir, const char *json, size_t len) {
  inspector *ins = data;
  record_message(ins, s->name, s->version ? s->version->name : NULL, dir == WIRE_FROM_CLIENT, json, len);
  if (s == ins->page && dir == WIRE_TO_CLIENT) note_page_answer(ins, json, len);
}

static const wire_observer WIRE_OBSERVER = {.message = on_wire};

/* The page's session needs no transport of its own: whatever it is sent
 * reaches the page through the wire observer, as every session's does. */
static void page_send(session *s, const session_message *m) {
  (void)s;
  (void)m;
}

static const transport_ops PAGE_TRANSPORT = {.send = page_send};

static void open_page_session(inspector *ins) {
  ins->page = session_new(ins->srv, &PAGE_TRANSPORT, ins, "ui");
  record_conn(ins, "ui", true, NULL);
}

static void on_reload(void *data, const reload_outcome *r) {
  inspector *ins = data;
  buf b = BUF_INIT;
  buf_printf(&b, "\"kind\":\"reload\",\"ok\":%s,\"generation\":%u,\"why\":", r->ok ? "true" : "false", r->generation);
  json_write_string(&b, r->why ? r->why : "", r->why ? strlen(r->why) : 0);
  if (r->ok) {
    buf_append_str(&b, ",\"changed\":[");
    const char *p = r->changed ? r->changed : "";
    bool first = true;
    while (*p) {
      size_t n = strcspn(p, ",");
      buf_append_str(&b, first ? "" : ",");
      json_write_string(&b, p, n);
      first = false;
      p += n;
      while (*p == ',' || *p == ' ') p++;
    }
    buf_putc(&b, ']');
  } else {
    buf_append_str(&b, ",\"error\":");
    json_write_string(&b, r->error, strlen(r->error));
  }
  wire_log_event(&ins->log, now_ms(), b.data, b.len);
  buf_free(&b);
  ui_notify(ins->ui);
}

static void drop_queue(inspector *ins);
static void replace_page_session(inspector *ins);

/* Hand the page's queued messages to its session, oldest first, while no
 * handler computes (a loop, not recursion: a message may make a handler
 * take a turn of the loop, and this then waits for the next). A reset
 * asked for meanwhile comes first: what is queued came after it. */
static void on_deliver(uv_idle_t *h) {
  inspector *ins = h->data;
  if (ins->reset_wanted && ins->srv->nested_poll == 0 && ins->page) {
    ins->reset_wanted = false;
    replace_page_session(ins);
  }
  while (ins->queue && ins->srv->nested_poll == 0 && ins->page) {
    page_message *m = ins->queue;
    ins->queue = m->next;
    if (!ins->queue) ins->queue_tail = NULL;
    ins->queued--;
    session_receive(ins->page, m->json, m->len, NULL);
    free(m);
  }
  if (!ins->queue && !ins->reset_wanted) uv_idle_stop(h);
}

static bool local_send(void *arg, const char *json, size_t len, buf *why) {
  inspector *ins = arg;
  if (!ins->page) {
    buf_append_str(why, "the server is stopping");
    return false;
  }
  note_page_request(ins, json, len);
  if (ins->srv->nested_poll == 0 && !ins->queue && !ins->reset_wanted) {
    session_receive(ins->page, json, len, NULL);
    return true;
  }
  /* A handler computes: a cancellation acts now, the rest waits its turn. */
  if (!ins->queue && session_receive_urgent(ins->page, json, len)) {
    session_note_received(ins->page, json, len);
    return true;
  }
  if (ins->queued >= PAGE_QUEUE_MAX) {
    buf_append_str(why, "a handler computes and the page has sent too much meanwhile; try again");
    return false;
  }
  page_message *m = malloc(sizeof *m + len);
  if (!m) abort();
  m->next = NULL;
  m->len = len;
  memcpy(m->json, json, len);
  if (ins->queue_tail) ins->queue_tail->next = m;
  else ins->queue = m;
  ins->queue_tail = m;
  ins->queued++;
  uv_idle_start(&ins->deliver, on_deliver);
  return true;
}

static void drop_queue(inspector *ins) {
  while (ins->queue) {
    page_message *m = ins->queue;
    ins->queue = m->next;
    free(m);
  }
  ins->queue_tail = NULL;
  ins->queued = 0;
}

static void replace_page_session(inspector *ins) {
  session_free(ins->page);
  forget_initialize(ins);
  record_conn(ins, "ui", false, "the page asked for a new connection");
  open_page_session(ins);
}

/* The page's session is freed only while no handler computes: a handler
 * of that session may be the one that lets the loop take this turn. */
static bool local_reset(void *arg, buf *why) {
  inspector *ins = arg;
  if (!ins->page) {
    buf_append_str(why, "the server is stopping");
    return false;
  }
  drop_queue(ins); /* for the session that ends; what comes after is the new one's */
  if (ins->srv->nested_poll == 0) {
    replace_page_session(ins);
    return true;
  }
  ins->reset_wanted = true;
  uv_idle_start(&ins->deliver, on_deliver);
  return true;
}

static const ui_hooks LOCAL_HOOKS = {.describe = describe, .send = local_send, .reset = local_reset};

static void print_address(const inspector *ins) {
  char line[300];
  int n = snprintf(line, sizeof line, "luamcp: inspector at %s\n", ui_address(ins->ui));
  if (n > 0) log_raw(line, (size_t)n);
}

inspector *inspector_start(uv_loop_t *loop, server *srv, lua_app *app, const char *target, bool dev, int port,
                           char *err, size_t err_len) {
  inspector *ins = calloc(1, sizeof *ins);
  if (!ins) abort();
  ins->loop = loop;
  ins->srv = srv;
  ins->app = app;
  ins->mode = dev ? "dev" : "inspect";
  ins->target = strdup(target);
  wire_log_init(&ins->log, UI_HISTORY_MAX_EVENTS, UI_HISTORY_MAX_BYTES, UI_EVENT_TEXT_MAX_BYTES);
  ui_hooks hooks = LOCAL_HOOKS;
  hooks.arg = ins;
  ins->ui = ui_start(loop, port, &ins->log, srv->opts.max_message_bytes, &hooks, err, err_len);
  if (!ins->ui) {
    wire_log_free(&ins->log);
    free(ins->target);
    free(ins);
    return NULL;
  }
  uv_idle_init(loop, &ins->deliver);
  ins->deliver.data = ins;
  wire_watch(srv, &WIRE_OBSERVER, ins);
  if (app) {
    app->on_reload = on_reload;
    app->on_reload_data = ins;
  }
  open_page_session(ins);
  print_address(ins);
  return ins;
}

static void free_inspector(uv_handle_t *h) {
  inspector *ins = h->data;
  wire_log_free(&ins->log);
  free(ins->target);
  free(ins);
}

void inspector_stop(inspector *ins) {
  if (!ins) return;
  wire_unwatch(ins->srv, &WIRE_OBSERVER, ins);
  if (ins->app && ins->app->on_reload_data == ins) {
    ins->app->on_reload = NULL;
    ins->app->on_reload_data = NULL;
  }
  drop_queue(ins);
  if (ins->page) session_free(ins->page);
  ins->page = NULL;
  forget_initialize(ins);
  /* The pages' writes hold events of the log: it goes once they are done,
   * after the listener's handles (closed first, on the same loop turn). */
  ui_stop(ins->ui);
  uv_close((uv_handle_t *)&ins->deliver, free_inspector);
}

/* ---- Any other server: luamcp is the page's client ------------------------ */

static bool proxy_open(inspector *ins, buf *err) {
  ins->conn = ins->argv ? client_child_open(ins->loop, ins->argv, err) : client_http_open(ins->url, err);
  ins->conn_ended = false;
  if (ins->conn) record_conn(ins, "ui", true, NULL);
  return ins->conn != NULL;
}

static bool proxy_send(void *arg, const char *json, size_t len, buf *why) {
  inspector *ins = arg;
  if (!ins->conn) {
    buf_append_str(why, "no connection to the server: reconnect");
    return false;
  }
  note_page_request(ins, json, len);
  record_message(ins, "ui", NULL, true, json, len);
  return ins->conn->ops->send(ins->conn, json, len, why);
}

/* The connection is closed and opened again by the command's loop, not
 * here: closing a child runs the loop until it exits. */
static bool proxy_reset(void *arg, buf *why) {
  (void)why;
  inspector *ins = arg;
  ins->reset_wanted = true;
  return true;
}

/* What arrived, to the page; how the connection fares, too. */
static void proxy_collect(inspector *ins) {
  client_conn *c = ins->conn;
  if (!c) return;
  while (c->inbox) {
    client_message *m = c->inbox;
    c->inbox = m->next;
    if (!c->inbox) c->inbox_tail = NULL;
    record_message(ins, "ui", NULL, false, m->json, m->len);
    note_page_answer(ins, m->json, m->len);
    free(m);
  }
  if (c->failure) {
    buf b = BUF_INIT;
    buf_append_str(&b, "\"kind\":\"transport\",\"conn\":\"ui\",\"error\":");
    json_write_string(&b, c->failure, strlen(c->failure));
    if (c->failure_status) buf_printf(&b, ",\"status\":%ld", c->failure_status);
    if (c->failure_body) {
      buf_append_str(&b, ",\"body\":");
      json_write_string(&b, c->failure_body, strlen(c->failure_body));
    }
    wire_log_event(&ins->log, now_ms(), b.data, b.len);
    buf_free(&b);
    ui_notify(ins->ui);
    free(c->failure);
    free(c->failure_challenge);
    free(c->failure_body);
    c->failure = c->failure_challenge = c->failure_body = NULL;
    c->failure_status = 0;
  }
  if (c->ended && !ins->conn_ended) {
    ins->conn_ended = true;
    record_conn(ins, "ui", false, c->ended);
  }
}

static void on_stop_signal(void *data, os_signal_kind kind, const char *name) {
  (void)kind;
  (void)name;
  inspector *ins = data;
  ins->stop = true;
}

/* A turn of the loop that waits at most this long (nothing else to do). */
static void on_tick(uv_timer_t *t) { (void)t; }

static const ui_hooks PROXY_HOOKS = {.describe = describe, .send = proxy_send, .reset = proxy_reset};

static int proxy_usage(const char *why) {
  if (why) fprintf(stderr, "luamcp inspect: %s\n", why);
  fprintf(stderr, "Usage: luamcp inspect --ui [--ui-port N] PATH\n"
                  "       luamcp inspect --ui [--ui-port N] --http URL [--header 'Name: value']...\n"
                  "       luamcp inspect --ui [--ui-port N] -- COMMAND [ARG...]\n");
  return 2;
}

int inspector_proxy_command(int argc, char **argv) {
  inspector ins_storage;
  inspector *ins = &ins_storage;
  memset(ins, 0, sizeof *ins);
  int port = 0;
  const char *headers[32];
  int header_count = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--ui") == 0) continue;
    if (strcmp(a, "--ui-port") == 0) {
      char *end;
      long n = value ? strtol(value, &end, 10) : -1;
      if (!value || *end || n < 0 || n > 65535) return proxy_usage("--ui-port needs a port number (0: a free one)");
      port = (int)n;
      i++;
    } else if (strcmp(a, "--http") == 0) {
      if (!value) return proxy_usage("--http needs a URL");
      ins->url = (char *)value;
      i++;
    } else if (strcmp(a, "--header") == 0) {
      if (!value || !strchr(value, ':')) return proxy_usage("--header needs 'Name: value'");
      if (header_count == 32) return proxy_usage("too many --header flags");
      headers[header_count++] = value;
      i++;
    } else if (strcmp(a, "--") == 0) {
      if (i + 1 >= argc) return proxy_usage("-- needs a command");
      ins->argv = argv + i + 1;
      break;
    } else {
      return proxy_usage("with --ui: give PATH, --http URL or -- COMMAND");
    }
  }
  if (!ins->url == !ins->argv) return proxy_usage("give --http URL or -- COMMAND, not both");
  buf target = BUF_INIT;
  if (ins->url) buf_append_str(&target, ins->url);
  for (char **p = ins->argv; p && *p; p++) buf_printf(&target, "%s%s", target.len ? " " : "", *p);
  ins->target = target.data;
  ins->mode = "inspect";
  ins->loop = uv_default_loop();
  wire_log_init(&ins->log, UI_HISTORY_MAX_EVENTS, UI_HISTORY_MAX_BYTES, UI_EVENT_TEXT_MAX_BYTES);
  buf err = BUF_INIT;
  if (!proxy_open(ins, &err)) {
    fprintf(stderr, "luamcp inspect: %s\n", err.data ? err.data : "cannot reach the server");
    return 1;
  }
  for (int i = 0; i < header_count && ins->conn->ops->set_header; i++) {
    char name[256];
    const char *colon = strchr(headers[i], ':');
    snprintf(name, sizeof name, "%.*s", (int)(colon - headers[i]), headers[i]);
    const char *v = colon + 1;
    while (*v == ' ') v++;
    ins->conn->ops->set_header(ins->conn, name, v);
  }
  char why[400];
  ui_hooks hooks = PROXY_HOOKS;
  hooks.arg = ins;
  ins->ui = ui_start(ins->loop, port, &ins->log, DEFAULT_MAX_MESSAGE_BYTES, &hooks, why, sizeof why);
  if (!ins->ui) {
    fprintf(stderr, "luamcp inspect: %s\n", why);
    ins->conn->ops->close(ins->conn);
    return 1;
  }
  os_signals *signals = NULL;
  os_signals_start(&signals, ins->loop, OS_SIGNAL_STOP | OS_SIGNAL_INTERRUPT, on_stop_signal, ins);
  fprintf(stderr, "luamcp: inspector at %s\n", ui_address(ins->ui));
  fflush(stderr);
  /* The child's pipes and the page are on the loop; an HTTP server is
   * reached through libcurl's own poll, a short slice at a time, turning
   * the loop between slices. */
  uv_timer_t tick;
  uv_timer_init(ins->loop, &tick);
  while (!ins->stop) {
    if (ins->url) {
      uv_run(ins->loop, UV_RUN_NOWAIT);
      if (!ins->conn || !ins->conn->ops->wait(ins->conn, 20)) {
        uv_timer_start(&tick, on_tick, 20, 0);
        uv_run(ins->loop, UV_RUN_ONCE);
      }
    } else {
      uv_run(ins->loop, UV_RUN_ONCE);
    }
    proxy_collect(ins);
    if (ins->reset_wanted) {
      ins->reset_wanted = false;
      if (ins->conn) {
        ins->conn->ops->close(ins->conn);
        ins->conn = NULL;
        if (!ins->conn_ended) record_conn(ins, "ui", false, "the page asked for a new connection");
      }
      forget_initialize(ins);
      buf_clear(&err);
      if (!proxy_open(ins, &err)) record_conn(ins, "ui", false, err.data ? err.data : "cannot reach the server");
    }
  }
  if (ins->conn) ins->conn->ops->close(ins->conn);
  forget_initialize(ins);
  ui_stop(ins->ui);
  os_signals_stop(signals);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(ins->loop, UV_RUN_DEFAULT);
  wire_log_free(&ins->log);
  buf_free(&err);
  buf_free(&target);
  return 0;
}

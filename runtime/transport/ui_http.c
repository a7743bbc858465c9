/* ui_http.c - the web inspector's listener. See ui_http.h. */
#include "transport/ui_http.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"
#include "transport/http_util.h"

enum { TOKEN_BYTES = 32, IDLE_TIMEOUT_MS = 60000, MAX_BATCH_EVENTS = 4096, MAX_BATCH_BYTES = 4u * 1024u * 1024u };

typedef struct ui_conn ui_conn;

/* Owner: whoever called ui_start, through ui_stop; freed once its two
 * handles have closed, after every connection has let go of it. */
struct ui_server {
  uv_tcp_t tcp;
  uv_timer_t flush; /* one shot: the next batch of live events */
  int handles_open;
  bool stopping;
  uv_loop_t *loop;
  wire_log *log; /* the caller's */
  size_t max_body;
  ui_hooks hooks;
  int port;
  char token[2 * TOKEN_BYTES + 1];
  char address[128];
  char origins[3][64]; /* the page's own Origin, by each loopback name */
  ui_conn *conns;
  int conn_count;
};

/* One browser connection: requests one after another (keep-alive), or,
 * once it asked for /events, the event stream. Owner: itself; freed once
 * both its handles have closed (conn_close). */
struct ui_conn {
  uv_tcp_t tcp;
  uv_timer_t idle; /* a connection with no request under way closes after IDLE_TIMEOUT_MS */
  int handles_open;
  bool closing;
  ui_server *u;    /* NULL once the server let go of it */
  ui_conn *prev, *next;
  http_parser parser;
  /* The request being read. */
  buf url, field, value;
  bool in_value;
  buf host, origin, authorization, last_event_id;
  buf body;
  bool too_big;
  int writes; /* uv_writes in flight */
  bool close_when_written;
  /* The event stream. */
  bool events;
  bool writing;     /* a batch of events is being written */
  uint64_t sent;    /* the last seq handed to a write */
  uint64_t live_at; /* "live" goes out once every event up to this one has */
  bool live_sent;
};

/* One uv_write: bytes of its own, or events it holds until written. */
typedef struct ui_write {
  uv_write_t req;
  ui_conn *c;
  char *owned;
  wire_event **held;
  size_t held_count;
  unsigned nbufs;
  uv_buf_t bufs[];
} ui_write;

static void conn_close(ui_conn *c);
static void pump_events(ui_conn *c);

/* ---- Writing ------------------------------------------------------------ */

static void on_written(uv_write_t *req, int status) {
  ui_write *w = (ui_write *)req;
  ui_conn *c = w->c;
  for (size_t i = 0; i < w->held_count; i++) wire_event_release(w->held[i]);
  free(w->held);
  free(w->owned);
  free(w);
  c->writes--;
  if (c->events && c->writing) c->writing = false;
  if (status < 0) {
    conn_close(c);
    return;
  }
  if (c->close_when_written && c->writes == 0) {
    conn_close(c);
    return;
  }
  if (c->events) pump_events(c);
}

static bool write_owned(ui_conn *c, char *data, size_t len) {
  ui_write *w = calloc(1, sizeof *w + sizeof(uv_buf_t));
  if (!w) abort();
  w->c = c;
  w->owned = data;
  w->nbufs = 1;
  w->bufs[0] = uv_buf_init(data, (unsigned)len);
  c->writes++;
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, 1, on_written) != 0) {
    c->writes--;
    free(data);
    free(w);
    conn_close(c);
    return false;
  }
  return true;
}

static const char *status_text(int status) {
  switch (status) {
  case 200: return "OK";
  case 202: return "Accepted";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 413: return "Content Too Large";
  case 415: return "Unsupported Media Type";
  case 503: return "Service Unavailable";
  default: return "Error";
  }
}

/* The page may run only its own code, talk only to this listener, and
 * never be framed; the token in its address must never leave in a
 * Referer. */
static const char PAGE_POLICY[] = "Content-Security-Policy: default-src 'self'; img-src 'self' data: blob:; "
                                  "media-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
                                  "base-uri 'none'; form-action 'none'\r\n"
                                  "X-Frame-Options: DENY\r\n";

static void respond(ui_conn *c, int status, const char *content_type, const char *body, size_t len, bool page) {
  buf out = BUF_INIT;
  bool keep = http_should_keep_alive(&c->parser) && status < 400;
  buf_printf(&out,
             "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
             "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n%sConnection: %s\r\n\r\n",
             status, status_text(status), content_type, len, page ? PAGE_POLICY : "", keep ? "keep-alive" : "close");
  buf_append(&out, body, len);
  if (!keep) c->close_when_written = true;
  size_t n;
  char *data = buf_detach(&out, &n);
  write_owned(c, data, n);
}

static void respond_error(ui_conn *c, int status, const char *why) {
  buf body = BUF_INIT;
  buf_append_str(&body, "{\"error\":");
  json_write_string(&body, why, strlen(why));
  buf_putc(&body, '}');
  respond(c, status, "application/json", body.data, body.len, false);
  buf_free(&body);
}

/* ---- The event stream ----------------------------------------------------- */

static const char LIVE_FRAME[] = "data: {\"kind\":\"live\"}\n\n";

/* Hand the next events the page has not had to one write: the history
 * first (in batches, each after the last is written, so a page that does
 * not read holds at most one batch), then what is new. Events the log
 * dropped before this page got them are skipped: the page sees the gap in
 * the numbers. */
static void pump_events(ui_conn *c) {
  ui_server *u = c->u;
  if (!u || c->closing || c->writing) return;
  wire_log *log = u->log;
  size_t from = wire_log_after(log, c->sent);
  size_t n = 0, bytes = 0;
  while (from + n < log->count && n < MAX_BATCH_EVENTS && bytes < MAX_BATCH_BYTES) bytes += wire_log_at(log, from + n++)->len;
  bool live = !c->live_sent && (n == 0 || wire_log_at(log, from + n - 1)->seq >= c->live_at);
  if (n == 0 && !live) return;
  ui_write *w = calloc(1, sizeof *w + (n + 1) * sizeof(uv_buf_t));
  if (!w) abort();
  w->c = c;
  if (n) {
    w->held = malloc(n * sizeof *w->held);
    if (!w->held) abort();
  }
  for (size_t i = 0; i < n; i++) {
    wire_event *e = wire_log_at(log, from + i);
    wire_event_hold(e);
    w->held[w->held_count++] = e;
    w->bufs[w->nbufs++] = uv_buf_init(e->frame, (unsigned)e->len);
    c->sent = e->seq;
  }
  if (live) {
    w->bufs[w->nbufs++] = uv_buf_init((char *)LIVE_FRAME, sizeof LIVE_FRAME - 1);
    c->live_sent = true;
  }
  c->writing = true;
  c->writes++;
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, w->nbufs, on_written) != 0) {
    c->writes--;
    c->writing = false;
    for (size_t i = 0; i < w->held_count; i++) wire_event_release(w->held[i]);
    free(w->held);
    free(w);
    conn_close(c);
  }
}

static void start_events(ui_conn *c) {
  ui_server *u = c->u;
  c->events = true;
  uv_timer_stop(&c->idle);
  /* EventSource reconnects with the last id it saw: go on after it. */
  c->sent = 0;
  if (c->last_event_id.len) c->sent = strtoull(c->last_event_id.data, NULL, 10);
  c->live_at = u->log->next_seq - 1;
  c->live_sent = false;
  buf out = BUF_INIT;
  buf_append_str(&out, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
                       "X-Content-Type-Options: nosniff\r\nConnection: keep-alive\r\n\r\n"
                       "retry: 1000\ndata: {\"kind\":\"hello\",");
  u->hooks.describe(u->hooks.arg, &out);
  buf_printf(&out, ",\"history\":%zu,\"dropped\":%llu}\n\n", u->log->count, (unsigned long long)u->log->dropped);
  size_t n;
  char *data = buf_detach(&out, &n);
  if (write_owned(c, data, n)) pump_events(c);
}

static void on_flush(uv_timer_t *t) {
  ui_server *u = t->data;
  for (ui_conn *c = u->conns; c; c = c->next)
    if (c->events) pump_events(c);
}

void ui_notify(ui_server *u) {
  if (!u || u->stopping || uv_is_active((uv_handle_t *)&u->flush)) return;
  uv_timer_start(&u->flush, on_flush, UI_FLUSH_INTERVAL_MS, 0);
}

/* ---- Requests ----------------------------------------------------------- */

/* Host: a loopback name with our port, nothing else (a rebound DNS name
 * reaches this port with its own name in Host). */
static bool host_ok(const ui_conn *c) {
  if (!c->host.len) return false;
  char name[256];
  if (!http_host_name(c->host.data, name, sizeof name) || !http_is_loopback_name(name)) return false;
  const char *port = c->host.data[0] == '[' ? strchr(c->host.data, ']') : c->host.data;
  port = port ? strrchr(port, ':') : NULL;
  return port && atoi(port + 1) == c->u->port;
}

static bool origin_ok(const ui_conn *c) {
  if (!c->origin.len) return true; /* a navigation, or a same-origin GET */
  for (int i = 0; i < 3; i++)
    if (strcmp(c->origin.data, c->u->origins[i]) == 0) return true;
  return false;
}

static bool token_ok(const ui_conn *c) {
  const ui_server *u = c->u;
  size_t secret_len = strlen(u->token);
  if (c->authorization.len > 7 && strncasecmp(c->authorization.data, "Bearer ", 7) == 0)
    return http_secret_equal(c->authorization.data + 7, c->authorization.len - 7, u->token, secret_len);
  const char *q = strchr(c->url.data ? c->url.data : "", '?');
  while (q) {
    q++;
    if (strncmp(q, "token=", 6) == 0) return http_secret_equal(q + 6, strcspn(q + 6, "&#"), u->token, secret_len);
    q = strchr(q, '&');
  }
  return false;
}

static const char *content_type_of(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot) return "application/octet-stream";
  if (strcmp(dot, ".html") == 0) return "text/html; charset=utf-8";
  if (strcmp(dot, ".js") == 0 || strcmp(dot, ".mjs") == 0) return "text/javascript; charset=utf-8";
  if (strcmp(dot, ".css") == 0) return "text/css; charset=utf-8";
  if (strcmp(dot, ".svg") == 0) return "image/svg+xml";
  if (strcmp(dot, ".png") == 0) return "image/png";
  if (strcmp(dot, ".json") == 0) return "application/json";
  return "application/octet-stream";
}

static const ui_file *file_named(const char *path, size_t len) {
  if (len == 1) return file_named("/index.html", 11);
  for (size_t i = 0; i < EMBEDDED_UI_COUNT; i++)
    if (strlen(EMBEDDED_UI[i].name) == len - 1 && memcmp(EMBEDDED_UI[i].name, path + 1, len - 1) == 0)
      return &EMBEDDED_UI[i];
  return NULL;
}

static bool path_is(const char *path, size_t len, const char *want) { return strlen(want) == len && memcmp(path, want, len) == 0; }

static void handle_request(ui_conn *c) {
  ui_server *u = c->u;
  const char *url = c->url.data ? c->url.data : "/";
  size_t path_len = strcspn(url, "?#");
  int method = c->parser.method;
  if (!host_ok(c)) return respond_error(c, 403, "the Host header must be a loopback name with the inspector's port");
  if (!origin_ok(c)) return respond_error(c, 403, "requests from another origin are refused");
  if (c->too_big) return respond_error(c, 413, "the message is larger than --max-message-bytes");
  bool index = path_is(url, path_len, "/") || path_is(url, path_len, "/index.html");
  const ui_file *f = file_named(url, path_len);
  if (f && !index) { /* the page's code and styles: no data in them */
    if (method != HTTP_GET && method != HTTP_HEAD) return respond_error(c, 405, "only GET");
    return respond(c, 200, content_type_of(f->name), (const char *)f->data, f->len, false);
  }
  if (!token_ok(c))
    return respond_error(c, 401, "a missing or wrong token: open the address luamcp printed (it ends in ?token=...)");
  if (index) {
    if (!f) return respond_error(c, 404, "this luamcp was built without the inspector's page");
    return respond(c, 200, content_type_of(f->name), (const char *)f->data, f->len, true);
  }
  if (path_is(url, path_len, "/events")) {
    if (method != HTTP_GET) return respond_error(c, 405, "only GET");
    return start_events(c);
  }
  if (path_is(url, path_len, "/info")) {
    if (method != HTTP_GET) return respond_error(c, 405, "only GET");
    buf out = BUF_INIT;
    buf_append_str(&out, "{\"kind\":\"hello\",");
    u->hooks.describe(u->hooks.arg, &out);
    buf_printf(&out, ",\"history\":%zu,\"dropped\":%llu}", u->log->count, (unsigned long long)u->log->dropped);
    respond(c, 200, "application/json", out.data, out.len, false);
    buf_free(&out);
    return;
  }
  bool send = path_is(url, path_len, "/send"), reset = path_is(url, path_len, "/reset");
  if (send || reset) {
    if (method != HTTP_POST) return respond_error(c, 405, "only POST");
    if (send && !c->body.len) return respond_error(c, 400, "the body must be a JSON-RPC message");
    buf why = BUF_INIT;
    bool ok = send ? u->hooks.send(u->hooks.arg, c->body.data, c->body.len, &why) : u->hooks.reset(u->hooks.arg, &why);
    if (ok) respond(c, 202, "application/json", "{\"ok\":true}", 11, false);
    else respond_error(c, 503, why.data ? why.data : "cannot send");
    buf_free(&why);
    ui_notify(u);
    return;
  }
  respond_error(c, 404, "no such page");
}

/* ---- Parsing ------------------------------------------------------------ */

static void request_reset(ui_conn *c) {
  buf_clear(&c->url);
  buf_clear(&c->field);
  buf_clear(&c->value);
  buf_clear(&c->host);
  buf_clear(&c->origin);
  buf_clear(&c->authorization);
  buf_clear(&c->last_event_id);
  buf_free(&c->body);
  c->in_value = false;
  c->too_big = false;
}

static size_t head_bytes(const ui_conn *c) { return c->url.len + c->field.len + c->value.len; }

static int on_message_begin(http_parser *p) {
  request_reset(p->data);
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  ui_conn *c = p->data;
  if (c->url.len + len > UI_MAX_HEAD_BYTES) return 1;
  buf_append(&c->url, at, len);
  return 0;
}

/* A header is whole once its value is: keep the ones we read. */
static void header_done(ui_conn *c) {
  if (!c->field.len) return;
  buf *to = NULL;
  if (strcasecmp(c->field.data, "host") == 0) to = &c->host;
  else if (strcasecmp(c->field.data, "origin") == 0) to = &c->origin;
  else if (strcasecmp(c->field.data, "authorization") == 0) to = &c->authorization;
  else if (strcasecmp(c->field.data, "last-event-id") == 0) to = &c->last_event_id;
  if (to) {
    buf_clear(to);
    buf_append(to, c->value.data ? c->value.data : "", c->value.len);
  }
  buf_clear(&c->field);
  buf_clear(&c->value);
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  ui_conn *c = p->data;
  if (c->in_value) header_done(c);
  c->in_value = false;
  if (head_bytes(c) + len > UI_MAX_HEAD_BYTES) return 1;
  buf_append(&c->field, at, len);
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  ui_conn *c = p->data;
  c->in_value = true;
  if (head_bytes(c) + len > UI_MAX_HEAD_BYTES) return 1;
  buf_append(&c->value, at, len);
  return 0;
}

static int on_headers_complete(http_parser *p) {
  ui_conn *c = p->data;
  if (c->in_value) header_done(c);
  c->in_value = false;
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  ui_conn *c = p->data;
  if (c->too_big || !c->u || c->body.len + len > c->u->max_body) {
    c->too_big = true;
    buf_free(&c->body);
    return 0;
  }
  buf_append(&c->body, at, len);
  return 0;
}

static int on_message_complete(http_parser *p) {
  ui_conn *c = p->data;
  if (!c->u || c->closing) return 0;
  handle_request(c);
  buf_free(&c->body);
  /* After /events the connection is the stream: what else the client
   * sends is not read as requests. */
  return c->events ? 1 : 0;
}

static const http_parser_settings PARSER = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- Connections ---------------------------------------------------------- */

static void on_conn_handle_closed(uv_handle_t *h) {
  ui_conn *c = h->data;
  if (--c->handles_open > 0) return;
  buf_free(&c->url);
  buf_free(&c->field);
  buf_free(&c->value);
  buf_free(&c->host);
  buf_free(&c->origin);
  buf_free(&c->authorization);
  buf_free(&c->last_event_id);
  buf_free(&c->body);
  free(c);
}

static void conn_unlink(ui_conn *c) {
  ui_server *u = c->u;
  if (!u) return;
  if (c->prev) c->prev->next = c->next;
  else u->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  u->conn_count--;
  c->u = NULL;
}

static void conn_close(ui_conn *c) {
  if (c->closing) return;
  c->closing = true;
  conn_unlink(c);
  uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->idle, on_conn_handle_closed);
}

static void on_idle(uv_timer_t *t) { conn_close(t->data); }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  ui_conn *c = s->data;
  if (n < 0) {
    free(b->base);
    conn_close(c);
    return;
  }
  if (n > 0 && !c->events && !c->closing) {
    uv_timer_again(&c->idle);
    size_t parsed = http_parser_execute(&c->parser, &PARSER, b->base, (size_t)n);
    enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
    if (!c->events && !c->closing && (err != HPE_OK || parsed != (size_t)n)) {
      if (err == HPE_CB_url || err == HPE_CB_header_field || err == HPE_CB_header_value) {
        c->close_when_written = true;
        respond_error(c, 431, "the request's head is too large");
      } else {
        c->close_when_written = true;
        respond_error(c, 400, "not an HTTP request this listener reads");
      }
    }
  }
  free(b->base);
}

static void on_connection(uv_stream_t *server, int status) {
  ui_server *u = server->data;
  if (status < 0 || u->stopping) return;
  ui_conn *c = calloc(1, sizeof *c);
  if (!c) abort();
  uv_tcp_init(u->loop, &c->tcp);
  uv_timer_init(u->loop, &c->idle);
  c->tcp.data = c->idle.data = c;
  c->handles_open = 2;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || u->conn_count >= UI_MAX_CONNECTIONS) {
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->idle, on_conn_handle_closed);
    return;
  }
  c->u = u;
  c->next = u->conns;
  if (u->conns) u->conns->prev = c;
  u->conns = c;
  u->conn_count++;
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  uv_timer_start(&c->idle, on_idle, IDLE_TIMEOUT_MS, IDLE_TIMEOUT_MS);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- The server --------------------------------------------------------- */

ui_server *ui_start(uv_loop_t *loop, int port, wire_log *log, size_t max_body, const ui_hooks *hooks, char *err,
                    size_t err_len) {
  uint8_t secret[TOKEN_BYTES];
  if (!os_random_bytes(secret, sizeof secret)) {
    snprintf(err, err_len, "--ui: the system has no randomness for the page's token");
    return NULL;
  }
  ui_server *u = calloc(1, sizeof *u);
  if (!u) abort();
  for (int i = 0; i < TOKEN_BYTES; i++) snprintf(u->token + 2 * i, 3, "%02x", secret[i]);
  u->loop = loop;
  u->log = log;
  u->max_body = max_body;
  u->hooks = *hooks;
  uv_tcp_init(loop, &u->tcp);
  uv_timer_init(loop, &u->flush);
  u->tcp.data = u->flush.data = u;
  u->handles_open = 2;
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", port, &addr);
  int rc = uv_tcp_bind(&u->tcp, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&u->tcp, 64, on_connection);
  if (rc != 0) {
    snprintf(err, err_len, "--ui: cannot listen on 127.0.0.1:%d: %s", port, uv_strerror(rc));
    ui_stop(u);
    return NULL;
  }
  struct sockaddr_in bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&u->tcp, (struct sockaddr *)&bound, &len);
  u->port = ntohs(bound.sin_port);
  snprintf(u->address, sizeof u->address, "http://127.0.0.1:%d/?token=%s", u->port, u->token);
  snprintf(u->origins[0], sizeof u->origins[0], "http://127.0.0.1:%d", u->port);
  snprintf(u->origins[1], sizeof u->origins[1], "http://localhost:%d", u->port);
  snprintf(u->origins[2], sizeof u->origins[2], "http://[::1]:%d", u->port);
  return u;
}

const char *ui_address(const ui_server *u) { return u->address; }

static void on_server_handle_closed(uv_handle_t *h) {
  ui_server *u = h->data;
  if (--u->handles_open == 0) free(u);
}

void ui_stop(ui_server *u) {
  if (!u || u->stopping) return;
  u->stopping = true;
  while (u->conns) conn_close(u->conns);
  uv_close((uv_handle_t *)&u->tcp, on_server_handle_closed);
  uv_close((uv_handle_t *)&u->flush, on_server_handle_closed);
}

/* http_conn.c - HTTP/1.1 connections for the Streamable HTTP transport: reading
 * and parsing requests, writing responses, the listener and its limits.
 * See http.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "transport/http.h"
#include "transport/http_util.h"

/* ---- Writing --------------------------------------------------------- */

typedef struct write_req {
  uv_write_t req;
  http_conn *conn;
  size_t len;
  char data[];
} write_req;


/* Close on the next turn: writes fail inside the core's send, and closing
 * cancels calls, which must not happen while the core is answering one. */
static void conn_close_later(http_conn *c) {
  c->close_pending = true;
  conn_defer(c);
}

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  http_conn *c = w->conn;
  c->pending_write_bytes -= w->len;
  free(w);
  if (status < 0 && !c->closing) {
    log_write(LOG_DEBUG, "http#%u: write failed: %s", c->id, uv_strerror(status));
    conn_close(c);
    return;
  }
  if (c->closing || c->pending_write_bytes > 0) return;
  if (c->close_after_response && c->state == CONN_IDLE) conn_close(c);
}

void conn_write(http_conn *c, const char *data, size_t len) {
  if (c->closing || len == 0) return;
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  int n = c->pending_write_bytes ? UV_EAGAIN : uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  if (n == (int)len) return;
  if (n < 0 && n != UV_EAGAIN) {
    conn_close_later(c);
    return;
  }
  size_t done = n > 0 ? (size_t)n : 0;
  size_t rest = len - done;
  if (c->pending_write_bytes + rest > HTTP_MAX_PENDING_WRITE_BYTES) {
    log_write(LOG_WARNING, "http#%u: the client is not reading; dropping the connection", c->id);
    conn_close_later(c);
    return;
  }
  write_req *w = malloc(sizeof *w + rest);
  w->conn = c;
  w->len = rest;
  memcpy(w->data, data + done, rest);
  b = uv_buf_init(w->data, (unsigned)rest);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
    free(w);
    conn_close_later(c);
    return;
  }
  c->pending_write_bytes += rest;
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
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

void conn_write_status_line(http_conn *c, buf *out, int status) {
  buf_printf(out, "HTTP/1.1 %d %s\r\n", status, status_text(status));
  if (c->close_after_response || !c->keep_alive) buf_puts(out, "Connection: close\r\n");
  else if (c->parser.http_minor == 0) buf_puts(out, "Connection: keep-alive\r\n");
}

/* A whole response with a body (or none). extra_headers end in \r\n. */
void conn_send_response(http_conn *c, int status, const char *extra_headers, const char *content_type,
                          const char *body, size_t len) {
  buf out = BUF_INIT;
  conn_write_status_line(c, &out, status);
  if (content_type) buf_printf(&out, "Content-Type: %s\r\n", content_type);
  buf_printf(&out, "Content-Length: %zu\r\n", len);
  if (extra_headers) buf_append_str(&out, extra_headers);
  buf_puts(&out, "\r\n");
  /* A response to HEAD has no body (RFC 9110, 9.3.2): bytes sent anyway
   * would be read as the start of the next response. */
  if (len && c->parser.method != HTTP_HEAD) buf_append(&out, body, len);
  conn_write(c, out.data, out.len);
  buf_free(&out);
}


/* An HTTP error with a JSON-RPC error body (id null). */
void conn_send_error(http_conn *c, int status, int code, const char *message, const char *extra_headers) {
  buf body = BUF_INIT;
  jsonrpc_write_error(&body, NULL, 0, code, message, NULL, 0);
  log_write(LOG_DEBUG, "http#%u: %d %s", c->id, status, message);
  conn_send_response(c, status, extra_headers, "application/json", body.data, body.len);
  buf_free(&body);
  conn_response_done(c);
}

/* ---- Requests -------------------------------------------------------- */

static void reset_request(http_conn *c) {
  buf_clear(&c->url);
  buf_clear(&c->field);
  buf_clear(&c->value);
  buf_free(&c->body);
  c->in_value = false;
  c->header_bytes = 0;
  char **headers[] = {&c->host,       &c->origin,           &c->accept,        &c->content_type,
                      &c->session_id, &c->protocol_version, &c->last_event_id, &c->authorization};
  for (size_t i = 0; i < sizeof headers / sizeof *headers; i++) {
    free(*headers[i]);
    *headers[i] = NULL;
  }
  c->reject_status = 0;
  c->request_ready = false;
}

static void reject(http_conn *c, int status, int code, const char *message) {
  if (c->reject_status) return;
  c->reject_status = status;
  c->reject_code = code;
  c->reject_message = message;
  http_parser_pause(&c->parser, 1);
}

static bool header_budget(http_conn *c, size_t n) {
  c->header_bytes += n;
  if (c->header_bytes > HTTP_MAX_HEADER_BYTES) {
    reject(c, 431, -32000, "Request Header Fields Too Large");
    return false;
  }
  return true;
}

static void store_header(http_conn *c) {
  static const struct {
    const char *name;
    size_t offset;
  } wanted[] = {
      {"host", offsetof(http_conn, host)},
      {"origin", offsetof(http_conn, origin)},
      {"accept", offsetof(http_conn, accept)},
      {"content-type", offsetof(http_conn, content_type)},
      {"mcp-session-id", offsetof(http_conn, session_id)},
      {"mcp-protocol-version", offsetof(http_conn, protocol_version)},
      {"last-event-id", offsetof(http_conn, last_event_id)},
      {"authorization", offsetof(http_conn, authorization)},
  };
  if (!c->field.len) return;
  for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++) {
    if (strcasecmp(c->field.data, wanted[i].name) != 0) continue;
    char **slot = (char **)((char *)c + wanted[i].offset);
    if (*slot && strcmp(wanted[i].name, "host") == 0) {
      /* RFC 9112, 3.2: 400. Keeping either one would let a request past
       * the Host check that a proxy routes by the other. */
      reject(c, 400, -32600, "Bad Request: more than one Host header");
      break;
    }
    if (*slot && strcmp(wanted[i].name, "accept") == 0) {
      /* Repeated Accept headers are one list. */
      size_t n = strlen(*slot);
      char *joined = malloc(n + 1 + c->value.len + 1);
      memcpy(joined, *slot, n);
      joined[n] = ',';
      memcpy(joined + n + 1, c->value.data ? c->value.data : "", c->value.len + 1);
      free(*slot);
      *slot = joined;
    } else {
      free(*slot);
      *slot = strdup(c->value.data ? c->value.data : "");
    }
    break;
  }
  buf_clear(&c->field);
  buf_clear(&c->value);
}

static int on_message_begin(http_parser *p) {
  http_conn *c = p->data;
  reset_request(c);
  c->state = CONN_HEADERS;
  c->deadline_ms = now_ms(c->server) + HTTP_HEADER_TIMEOUT_MS;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  http_conn *c = p->data;
  if (header_budget(c, n)) buf_append(&c->url, at, n);
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
  http_conn *c = p->data;
  if (c->in_value) {
    store_header(c);
    c->in_value = false;
  }
  if (header_budget(c, n)) buf_append(&c->field, at, n);
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  http_conn *c = p->data;
  c->in_value = true;
  if (header_budget(c, n)) buf_append(&c->value, at, n);
  return 0;
}

static bool host_allowed(http_server *h, const char *name) {
  if (http_is_loopback_name(name)) return true;
  for (int i = 0; i < h->opts.allow_host_count; i++)
    if (strcasecmp(h->opts.allow_hosts[i], name) == 0) return true;
  return false;
}

static bool origin_allowed(http_server *h, const char *origin, const char *name) {
  if (http_is_loopback_name(name)) return true;
  for (int i = 0; i < h->opts.allow_origin_count; i++) {
    const char *allowed = h->opts.allow_origins[i];
    if (strcasecmp(allowed, origin) == 0 || strcasecmp(allowed, name) == 0) return true;
  }
  return false;
}

/* Checks that need only the headers, made before any body is read:
 * DNS-rebinding protection, authentication, and the body size. */
static void check_headers(http_conn *c) {
  http_server *h = c->server;
  char name[256];
  bool loopback_bind = http_is_loopback_address(h->opts.host);
  if (!c->host || !http_host_name(c->host, name, sizeof name)) {
    reject(c, 400, -32600, "Bad Request: a valid Host header is required");
    return;
  }
  /* Bound to loopback, only local names may reach us: a browser page whose
   * DNS name was rebound to 127.0.0.1 sends its own name. */
  if ((loopback_bind || h->opts.allow_host_count) && !host_allowed(h, name)) {
    reject(c, 403, -32000, "Forbidden: Host not allowed");
    return;
  }
  if (c->origin) {
    char origin_name[256];
    if (!http_origin_host(c->origin, origin_name, sizeof origin_name) || !origin_allowed(h, c->origin, origin_name)) {
      reject(c, 403, -32000, "Forbidden: Origin not allowed");
      return;
    }
  }
  if (h->opts.bearer_token) {
    const char *given = c->authorization;
    size_t secret_len = strlen(h->opts.bearer_token);
    bool ok = given && strncasecmp(given, "Bearer ", 7) == 0 &&
              http_secret_equal(given + 7, strlen(given + 7), h->opts.bearer_token, secret_len);
    if (!ok) {
      reject(c, 401, -32000, "Unauthorized: a valid bearer token is required");
      return;
    }
  }
  if (c->parser.method == HTTP_POST && c->parser.content_length != ULLONG_MAX &&
      c->parser.content_length > h->srv->opts.max_message_bytes) {
    reject(c, 413, -32600, "Content Too Large: the body is larger than the message limit");
    return;
  }
}

static int on_headers_complete(http_parser *p) {
  http_conn *c = p->data;
  if (c->in_value) store_header(c);
  c->in_value = false;
  c->state = CONN_BODY;
  c->body_started_ms = now_ms(c->server);
  c->deadline_ms = c->body_started_ms + HTTP_BODY_GRACE_MS;
  c->keep_alive = http_should_keep_alive(p);
  if (!c->reject_status) check_headers(c);
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  http_conn *c = p->data;
  if (c->reject_status) return 0;
  if (c->body.len + n > c->server->srv->opts.max_message_bytes) {
    reject(c, 413, -32600, "Content Too Large: the body is larger than the message limit");
    return 0;
  }
  buf_append(&c->body, at, n);
  /* The body must keep arriving at HTTP_MIN_BODY_RATE on average. */
  c->deadline_ms = c->body_started_ms + HTTP_BODY_GRACE_MS + (uint64_t)c->body.len * 1000u / HTTP_MIN_BODY_RATE;
  return 0;
}

static int on_message_complete(http_parser *p) {
  http_conn *c = p->data;
  c->request_ready = true;
  c->deadline_ms = 0;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings PARSER_SETTINGS = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- Connections ----------------------------------------------------- */

static void feed(http_conn *c, const char *data, size_t n);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b);
static void on_later(uv_check_t *t);
static void on_later_idle(uv_idle_t *h);

/* The current response is complete: the next request is read on the next
 * loop turn (this may run inside the core's send). */
void conn_response_done(http_conn *c) {
  if (c->state != CONN_RESPONDING) return;
  c->state = CONN_IDLE;
  c->request_ready = false;
  /* Unpausing a parser in an error state (malformed HTTP) is an assertion
   * failure in http_parser that aborts the whole process. */
  if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED) http_parser_pause(&c->parser, 0);
  c->deadline_ms = now_ms(c->server) + HTTP_KEEPALIVE_IDLE_MS;
  if (c->close_after_response || !c->keep_alive) {
    if (c->pending_write_bytes == 0) conn_close_later(c);
    else c->close_after_response = true;
    return;
  }
  if (c->input.len || c->reading_stopped) conn_defer(c);
}

void conn_defer(http_conn *c) {
  http_server *h = c->server;
  if (c->deferred || c->closing) return;
  c->deferred = true;
  c->deferred_next = h->deferred;
  h->deferred = c;
  if (!uv_is_active((uv_handle_t *)&h->later)) {
    uv_check_start(&h->later, on_later);
    uv_idle_start(&h->later_idle, on_later_idle);
  }
}

/* Carry on with the bytes a pipelining client sent during the response. */
static void resume_input(http_conn *c) {
  if (c->reading_stopped) {
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    c->reading_stopped = false;
  }
  if (c->input.len) {
    buf pending = c->input;
    c->input = (buf)BUF_INIT;
    feed(c, pending.data, pending.len);
    buf_free(&pending);
  }
}

static void on_later_idle(uv_idle_t *h) { (void)h; }

static void on_later(uv_check_t *t) {
  http_server *h = t->data;
  if (h->srv->nested_poll > 0) return; /* inside a computing handler: next turn */
  while (h->deferred) {
    http_conn *c = h->deferred;
    h->deferred = c->deferred_next;
    c->deferred = false;
    if (c->closing) continue;
    if (c->close_pending) {
      conn_close(c);
    } else if (c->request_held) {
      c->request_held = false;
      streamable_handle_request(c);
    } else if (c->state == CONN_IDLE) {
      resume_input(c);
    }
  }
  uv_check_stop(&h->later);
  uv_idle_stop(&h->later_idle);
}

static void feed(http_conn *c, const char *data, size_t n) {
  if (c->closing) return;
  if (c->state == CONN_RESPONDING) {
    /* Pipelined bytes wait until the response is done. */
    buf_append(&c->input, data, n);
    return;
  }
  size_t parsed = http_parser_execute(&c->parser, &PARSER_SETTINGS, data, n);
  enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
  if (err == HPE_PAUSED) {
    if (parsed < n) buf_append(&c->input, data + parsed, n - parsed);
    if (c->request_ready || c->reject_status) streamable_handle_request(c);
    return;
  }
  if (err != HPE_OK) {
    c->state = CONN_RESPONDING;
    c->close_after_response = true;
    c->keep_alive = false;
    conn_send_error(c, err == HPE_HEADER_OVERFLOW ? 431 : 400, -32600, "Bad Request: malformed HTTP", NULL);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  http_conn *c = stream->data;
  if (n > 0) feed(c, b->base, (size_t)n);
  free(b->base);
  if (n < 0) conn_close(c); /* EOF or ECONNRESET: the client is gone */
  else if (!c->closing && c->input.len > c->server->srv->opts.max_message_bytes + HTTP_MAX_HEADER_BYTES &&
           !c->reading_stopped) {
    uv_read_stop(stream); /* a pipelining client waits for us */
    c->reading_stopped = true;
  }
}

/* After http_stop, the server is freed once the close callbacks of its own
 * handles and of every connection (which use it) have run. */
static void server_maybe_free(http_server *h) {
  if (h->handles_closing == 0 && !h->conns) free(h);
}

static void on_server_handle_closed(uv_handle_t *handle) {
  http_server *h = handle->data;
  h->handles_closing--;
  server_maybe_free(h);
}

static void on_conn_closed(uv_handle_t *h) {
  http_conn *c = h->data;
  http_server *srv = c->server;
  for (http_conn **pp = &srv->deferred; *pp; pp = &(*pp)->deferred_next) {
    if (*pp == c) {
      *pp = c->deferred_next;
      break;
    }
  }
  if (c->prev) c->prev->next = c->next;
  else srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  srv->conn_count--;
  reset_request(c);
  buf_free(&c->url);
  buf_free(&c->field);
  buf_free(&c->value);
  buf_free(&c->input);
  free(c);
  if (srv->stopping) server_maybe_free(srv);
}

void conn_close(http_conn *c) {
  if (c->closing) return;
  c->closing = true;
  http_stream *st = c->stream;
  if (st) {
    /* A stream open for longer than --session-timeout leaves its session
     * idle from now, not from when it was opened. */
    st->hs->last_active_ms = now_ms(c->server);
    st->conn = NULL;
    c->stream = NULL;
    if (st->mode == STREAM_PENDING && !st->complete) {
      /* A JSON answer has nowhere to go now: stop the work. An SSE stream
       * stays, for the client to resume with Last-Event-ID. */
      session_cancel_from(st->hs->session, st);
      st->complete = true;
    }
    stream_maybe_free(st);
  }
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_connection(uv_stream_t *listener, int status) {
  http_server *h = listener->data;
  if (status < 0) return;
  http_conn *c = calloc(1, sizeof *c);
  c->server = h;
  c->id = ++h->next_conn_id;
  uv_tcp_init(h->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  c->keep_alive = true;
  c->deadline_ms = now_ms(h) + HTTP_HEADER_TIMEOUT_MS;
  c->next = h->conns;
  if (c->next) c->next->prev = c;
  h->conns = c;
  h->conn_count++;
  if (h->conn_count > h->opts.max_connections || h->stopping) {
    c->state = CONN_RESPONDING;
    c->close_after_response = true;
    conn_send_error(c, 503, -32000, "Service Unavailable: too many connections", "Retry-After: 1\r\n");
    return;
  }
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* Once a second: time out slow requests and idle connections, keep SSE
 * streams alive, end idle sessions. */
static void on_sweep(uv_timer_t *t) {
  http_server *h = t->data;
  if (h->srv->nested_poll > 0) return; /* never end sessions under a computing handler */
  uint64_t now = now_ms(h);
  for (http_conn *c = h->conns, *next; c; c = next) {
    next = c->next;
    if (c->closing) continue;
    if (c->state == CONN_RESPONDING) {
      http_stream *st = c->stream;
      if (st && st->mode == STREAM_SSE && now - st->last_write_ms >= HTTP_SSE_KEEPALIVE_MS)
        sse_write(st, ": keepalive\n\n", 13);
      continue;
    }
    if (c->deadline_ms && now > c->deadline_ms) {
      if (c->state == CONN_IDLE) {
        conn_close(c);
      } else {
        c->state = CONN_RESPONDING;
        c->close_after_response = true;
        conn_send_error(c, 408, -32000, "Request Timeout: the request arrived too slowly", NULL);
      }
    }
  }
  for (http_session *hs = h->sessions, *next; hs; hs = next) {
    next = hs->next;
    if (hs->session->calls) continue;
    bool attached = false;
    for (http_stream *st = hs->streams; st; st = st->next) attached |= st->conn != NULL;
    if (!attached && now - hs->last_active_ms > (uint64_t)h->opts.session_timeout_ms) {
      log_write(LOG_DEBUG, "%s: expired after %d s idle", hs->session->name, h->opts.session_timeout_ms / 1000);
      http_session_destroy(hs);
    }
  }
}

/* ---- Server ---------------------------------------------------------- */

void http_options_defaults(http_options *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->host, sizeof o->host, "127.0.0.1");
  snprintf(o->path, sizeof o->path, "/mcp");
  o->max_connections = DEFAULT_HTTP_MAX_CONNECTIONS;
  o->max_sessions = DEFAULT_HTTP_MAX_SESSIONS;
  o->session_timeout_ms = DEFAULT_HTTP_SESSION_TIMEOUT_S * 1000;
}

http_server *http_start(uv_loop_t *loop, server *srv, const http_options *opts, char *err, size_t err_len) {
  if (!http_is_loopback_address(opts->host) && !opts->allow_remote) {
    snprintf(err, err_len,
             "refusing to listen on %s: it is not a loopback address. Anyone who can reach it can use your tools; "
             "add --allow-remote (and --bearer-token-env) if that is what you want",
             opts->host);
    return NULL;
  }
  http_server *h = calloc(1, sizeof *h);
  h->loop = loop;
  h->srv = srv;
  h->opts = *opts;
  strmap_init(&h->sessions_by_id);
  struct sockaddr_storage addr;
  const char *host = strcmp(opts->host, "localhost") == 0 ? "127.0.0.1" : opts->host;
  int rc = strchr(host, ':') ? uv_ip6_addr(host, opts->port, (struct sockaddr_in6 *)&addr)
                             : uv_ip4_addr(host, opts->port, (struct sockaddr_in *)&addr);
  if (rc == 0) rc = uv_tcp_init(loop, &h->listener);
  if (rc == 0) rc = uv_tcp_bind(&h->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&h->listener, 511, on_connection);
  if (rc != 0) {
    snprintf(err, err_len, "cannot listen on %s:%d: %s", opts->host, opts->port, uv_strerror(rc));
    if (uv_is_active((uv_handle_t *)&h->listener) || h->listener.loop) uv_close((uv_handle_t *)&h->listener, NULL);
    strmap_free(&h->sessions_by_id);
    return NULL; /* h is freed with the process: the listener closes on the next turn */
  }
  h->listener.data = h;
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&h->listener, (struct sockaddr *)&bound, &len);
  h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
  uv_timer_init(loop, &h->sweep);
  h->sweep.data = h;
  uv_check_init(loop, &h->later);
  uv_idle_init(loop, &h->later_idle);
  h->later.data = h;
  srv->nested_poll_safe = true;
  h->later_idle.data = h;
  uv_timer_start(&h->sweep, on_sweep, 1000, 1000);
  if (!http_is_loopback_address(opts->host))
    log_write(LOG_WARNING, "listening on %s, which is not loopback: anyone who can reach it can call your tools%s",
              opts->host, opts->bearer_token ? "" : " (no --bearer-token-env set)");
  return h;
}

int http_bound_port(const http_server *h) { return h->port; }

void http_stop(http_server *h) {
  if (h->stopping) return;
  h->stopping = true;
  while (h->sessions) http_session_destroy(h->sessions);
  for (http_conn *c = h->conns, *next; c; c = next) {
    next = c->next;
    conn_close(c);
  }
  strmap_free(&h->sessions_by_id);
  h->handles_closing = 4;
  uv_close((uv_handle_t *)&h->listener, on_server_handle_closed);
  uv_close((uv_handle_t *)&h->sweep, on_server_handle_closed);
  uv_close((uv_handle_t *)&h->later, on_server_handle_closed);
  uv_close((uv_handle_t *)&h->later_idle, on_server_handle_closed);
}


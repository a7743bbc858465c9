/* http_conn.c - HTTP/1.1 connections for the Streamable HTTP transport: reading
 * and parsing requests, the rules every route shares, writing responses,
 * the listener and its limits. Requests go to the endpoint families the
 * program hands over (http_options.families; luamcp's are HTTP_FAMILIES
 * of http_routes.c), which this file never names (see http_route.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "os/sock.h"
#include "transport/http.h"
#include "transport/http_route.h"
#include "transport/http_util.h"

/* ---- Deferred work and the buffer budget --------------------------------------------------------- */

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

static void on_later(uv_check_t *t);

/* ---- The endpoint families -------------------------------------------- */

/* The families the program gave (http_options.families: HTTP_FAMILIES of
 * http_routes.c for luamcp), in order; this file names none of them. */
#define EACH_FAMILY(h, f) for (const http_route_family *const *f = (h)->opts.families; *f; f++)

/* The family a request is for (its route and the rules it is outside of),
 * or NULL. */
static const http_route_family *route_find(const http_conn *c, int *route, unsigned *rules) {
  EACH_FAMILY(c->server, f) {
    *rules = 0;
    if ((*route = (*f)->match(c, rules)) > 0) return *f;
  }
  *route = 0;
  *rules = 0;
  return NULL;
}

bool http_route_path_is(const http_conn *c, const char *path) {
  size_t n = strlen(path);
  return n == c->path_len && memcmp(c->url.data ? c->url.data : "", path, n) == 0;
}

const char *http_route_body(const http_conn *c, size_t *len) {
  *len = c->body.len;
  return c->body.data ? c->body.data : "";
}

void http_route_answer(http_conn *c, int status, const char *content_type, const char *body, size_t len) {
  conn_send_response(c, status, NULL, content_type, body, len);
  conn_response_done(c);
}
static void on_later_idle(uv_idle_t *h);

static void schedule_later(http_server *h) {
  if (!uv_is_active((uv_handle_t *)&h->later)) {
    uv_check_start(&h->later, on_later);
    uv_idle_start(&h->later_idle, on_later_idle);
  }
}

/* ---- The buffer budget ----------------------------------------------- */

size_t http_conn_share(const http_server *h) {
  size_t share = h->opts.buffer_bytes / (size_t)(h->conn_count > 0 ? h->conn_count : 1);
  return share > HTTP_MIN_CONN_SHARE_BYTES ? share : HTTP_MIN_CONN_SHARE_BYTES;
}

static size_t conn_usage(const http_conn *c) {
  return c->pending_write_bytes + c->input.len + c->body.len + c->upgraded_held;
}

void http_budget_changed(http_server *h) {
  if (h->budget_check || h->stopping) return;
  if (h->buffered <= h->opts.buffer_bytes && h->replay_bytes <= h->opts.buffer_bytes / 2) return;
  h->budget_check = true;
  schedule_later(h);
}

/* At the end of a turn (never inside the core's send): drop the oldest
 * replay events while over the budget (or replay over half of it), then
 * close every connection over its share while what is left is still over. */
static void budget_enforce(http_server *h) {
  h->budget_check = false;
  size_t budget = h->opts.buffer_bytes;
  bool dropped = true;
  while ((h->buffered > budget || h->replay_bytes > budget / 2) && dropped) {
    dropped = false;
    EACH_FAMILY(h, f) if ((*f)->budget_drop && (dropped = (*f)->budget_drop(h))) break;
  }
  if (h->buffered <= budget) return;
  size_t share = http_conn_share(h), over = h->buffered - budget;
  for (http_conn *c = h->conns; c && over; c = c->next) {
    size_t used = conn_usage(c);
    if (c->closing || used <= share) continue;
    log_write(LOG_WARNING, "http#%u: over its share of the buffer budget (%zu bytes, share %zu); dropping the connection",
              c->id, used, share);
    over = used >= over ? 0 : over - used;
    conn_close(c);
  }
}

static void input_append(http_conn *c, const char *data, size_t n) {
  buf_append(&c->input, data, n);
  c->server->buffered += n;
  http_budget_changed(c->server);
}

/* Empty a connection's buffer for what comes next, keeping its memory
 * (no malloc and free per request) unless a burst grew it. */
static void buf_recycle(buf *b) {
  if (b->cap > 64 * 1024) buf_free(b); /* a burst is over: do not keep its buffer */
  else buf_clear(b);
}

static void input_consume(http_conn *c, size_t n) {
  if (!n) return;
  c->fed = n < c->fed ? c->fed - n : 0;
  c->request_start = n < c->request_start ? c->request_start - n : 0;
  c->server->buffered -= n;
  if (n < c->input.len) buf_consume(&c->input, n);
  else buf_recycle(&c->input);
}

/* ---- Writing --------------------------------------------------------- */

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  http_conn *c = w->conn;
  c->pending_write_bytes -= w->len;
  c->server->buffered -= w->len;
  free(w);
  if (status < 0 && !c->closing) {
    log_write(LOG_DEBUG, "http#%u: write failed: %s", c->id, uv_strerror(status));
    conn_close(c);
  } else if (c->handing_over && !c->handover_sent && !c->closing && !c->pending_write_bytes) {
    c->server->worker_ops->hand_over(c); /* the last byte of the previous response is out */
  }
}

void conn_write(http_conn *c, const char *data, size_t len) {
  if (c->closing || c->close_pending || c->lingering || len == 0) return;
  c->server->bytes_out += len;
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  int n = c->pending_write_bytes ? UV_EAGAIN : uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  if (n == (int)len) return;
  if (n < 0 && n != UV_EAGAIN) {
    conn_close_later(c);
    return;
  }
  size_t done = n > 0 ? (size_t)n : 0;
  size_t rest = len - done;
  http_server *h = c->server;
  /* What cannot be dropped (everything but replay events) would pass the
   * budget: a client that takes more than its share is not reading. */
  if (h->buffered - h->replay_bytes + rest > h->opts.buffer_bytes && conn_usage(c) + rest > http_conn_share(h)) {
    log_write(LOG_WARNING, "http#%u: the client is not reading (%zu bytes waiting, over its share of the buffer budget); "
              "dropping the connection", c->id, c->pending_write_bytes + rest);
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
  h->buffered += rest;
  http_budget_changed(h);
}

static const char *status_text(int status) {
  switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
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
    case 426: return "Upgrade Required";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    /* The reason phrase is optional (RFC 9112, 4): none beats a wrong one.
     * spec/http_hardening_spec.lua checks that every status sent is listed. */
    default: return "";
  }
}

/* Has the client sent bytes we have not read yet? */
static bool bytes_waiting(http_conn *c) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0) return false;
  return os_sock_bytes_waiting((uv_os_sock_t)fd);
}

/* Draining, every response says Connection: close, except the answer to a
 * call with a request already sent behind it on its connection (pipelined,
 * or sent while the call ran): that request is answered next (a 503, see
 * drain_admits), and its response closes, rather than dropped unanswered.
 * Only for a request read whole (a refused one's body was not) over
 * HTTP/1.1, answered outside the pump (which answers at once, as before
 * the drain). */
static bool drain_answers_next(http_conn *c) {
  return c->server->draining && c->keep_alive && c->request_ready && !c->reject_status && !c->pumping &&
         c->parser.http_major == 1 && c->parser.http_minor >= 1 && (c->input.len || bytes_waiting(c));
}

void conn_write_status_line(http_conn *c, buf *out, int status) {
  buf_puts(out, "HTTP/1.1 ");
  buf_append_int(out, status);
  buf_putc(out, ' ');
  buf_append_str(out, status_text(status));
  buf_puts(out, "\r\n");
  if ((c->close_after_response || !c->keep_alive) && !drain_answers_next(c)) {
    buf_puts(out, "Connection: close\r\n");
    c->close_announced = true;
  } else if (c->parser.http_minor == 0) buf_puts(out, "Connection: keep-alive\r\n");
  if (c->origin && c->origin_allowed) {
    /* CORS for an allowed browser origin: it may read the response, and
     * the session id in it (origins not allowed got a 403 already). */
    buf_puts(out, "Access-Control-Allow-Origin: ");
    buf_append_str(out, c->origin);
    buf_puts(out, "\r\nAccess-Control-Expose-Headers: Mcp-Session-Id, WWW-Authenticate\r\nVary: Origin\r\n");
  }
}

/* A whole response with a body (or none). extra_headers end in \r\n. */
void conn_send_response(http_conn *c, int status, const char *extra_headers, const char *content_type,
                          const char *body, size_t len) {
  /* The server's scratch buffer: conn_write has sent the bytes, or
   * copied what it could not send, when it returns. */
  buf *out = &c->server->response_buf;
  buf_clear(out);
  buf_reserve(out, 256 + len); /* the usual headers and the body: at most one allocation */
  conn_write_status_line(c, out, status);
  if (content_type) {
    buf_puts(out, "Content-Type: ");
    buf_append_str(out, content_type);
    buf_puts(out, "\r\n");
  }
  /* A 204 has no content, so no Content-Length either (RFC 9110, 8.6). */
  if (status != 204) {
    buf_puts(out, "Content-Length: ");
    buf_append_uint(out, len);
    buf_puts(out, "\r\n");
  }
  if (extra_headers) buf_append_str(out, extra_headers);
  buf_puts(out, "\r\n");
  /* A response to HEAD has no body (RFC 9110, 9.3.2): bytes sent anyway
   * would be read as the start of the next response. */
  if (len && c->parser.method != HTTP_HEAD) buf_append(out, body, len);
  conn_write(c, out->data, out->len);
  buf_recycle(out);
}


/* The id of the request in the body read so far, as JSON text, when the
 * body is one complete JSON-RPC request (empty otherwise: a batch, a
 * notification, a body not read or not valid). */
static void body_request_id(http_conn *c, buf *id) {
  if (c->body.len == 0 || c->reject_status) return;
  json_doc *doc = json_parse(c->body.data, c->body.len, MAX_JSON_DEPTH, NULL);
  if (!doc) return;
  const json_value *v = json_object_get(json_doc_root(doc), "id");
  if (v && (v->type == JSON_STRING || v->type == JSON_INTEGER)) json_write_value(id, v);
  json_doc_free(doc);
}

/* An HTTP error with a JSON-RPC error body, echoing the request's id when
 * the body could be read (id null otherwise). */
void conn_send_error(http_conn *c, int status, int code, const char *message, const char *extra_headers) {
  buf body = BUF_INIT, id = BUF_INIT;
  body_request_id(c, &id);
  jsonrpc_write_error(&body, id.len ? id.data : NULL, id.len, code, message, NULL, 0);
  buf_free(&id);
  log_write(LOG_DEBUG, "http#%u: %d %s", c->id, status, message);
  conn_send_response(c, status, extra_headers, "application/json", body.data, body.len);
  buf_free(&body);
  conn_response_done(c);
}

/* ---- The connections the cap may close -------------------------------- */

static void lru_remove(http_conn *c) {
  conn_lru *l = c->lru;
  if (!l) return;
  if (c->lru_older) c->lru_older->lru_newer = c->lru_newer;
  else l->oldest = c->lru_newer;
  if (c->lru_newer) c->lru_newer->lru_older = c->lru_older;
  else l->newest = c->lru_older;
  c->lru = NULL;
  c->lru_older = c->lru_newer = NULL;
}

/* Make c the most recently used of l (taking it off any other list). */
static void lru_push(http_conn *c, conn_lru *l) {
  lru_remove(c);
  c->lru = l;
  c->lru_older = l->newest;
  if (l->newest) l->newest->lru_newer = c;
  else l->oldest = c;
  l->newest = c;
}

/* May the cap close it? Done with (lingering), or with no request in
 * flight and no stream: never sent a whole request (idle or trickling), or
 * between requests with nothing read of the next. The lists follow the
 * transitions; this also catches a way out they do not watch (a hand-over,
 * bytes of the next request). */
static bool evictable(const http_conn *c) {
  if (c->closing || c->handing_over || c->stream || c->drain_owed) return false;
  /* A handler further down the stack (a nested loop turn taken while it
   * computes) may have answered it already: it looks idle, but its caller
   * still uses it when the handler returns. */
  if (c->pumping || c->handling) return false;
  if (c->lingering) return true;
  if (c->state == CONN_RESPONDING) return false;
  return c->state == CONN_IDLE ? c->input.len == 0 : c->requests_done == 0;
}

/* Back on its list after a stretch when it could not be closed (see
 * evictable), if nothing else has put it there meanwhile. */
static void lru_requeue(http_conn *c) {
  if (!c->lru && evictable(c)) lru_push(c, c->lingering ? &c->server->lingering_lru : &c->server->idle_lru);
}

/* The connection to close to make room for a new one: the oldest
 * lingering, else the least recently used idle one; NULL when all are busy.
 * O(1) amortized: one found busy leaves its list until its next
 * transition puts it back. */
static http_conn *lru_victim(http_server *h) {
  conn_lru *lists[] = {&h->lingering_lru, &h->idle_lru};
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
    while (lists[i]->oldest) {
      http_conn *c = lists[i]->oldest;
      if (evictable(c)) return c;
      lru_remove(c);
    }
  }
  return NULL;
}

/* ---- Requests -------------------------------------------------------- */

static void reset_request(http_conn *c) {
  buf_clear(&c->url);
  c->path_len = 0;
  buf_clear(&c->field);
  buf_clear(&c->value);
  c->server->buffered -= c->body.len;
  buf_recycle(&c->body);
  c->in_value = false;
  c->header_bytes = 0;
  char **headers[] = {&c->host,          &c->origin,        &c->accept,     &c->content_type, &c->session_id,
                      &c->protocol_version, &c->last_event_id, &c->authorization, &c->upgrade,   &c->ws_key,
                      &c->ws_version,    &c->ws_protocol};
  for (size_t i = 0; i < sizeof headers / sizeof *headers; i++) {
    if (!*headers[i]) continue; /* most are absent */
    free(*headers[i]);
    *headers[i] = NULL;
  }
  buf_clear(&c->mcp_headers);
  EACH_FAMILY(c->server, f) if ((*f)->request_end) (*f)->request_end(c);
  c->family = NULL;
  c->route = 0;
  c->route_rules = 0;
  c->reject_status = 0;
  c->origin_allowed = false;
  c->request_ready = false;
}

static void reject(http_conn *c, int status, int code, const char *message) {
  if (c->reject_status) return;
  c->reject_status = status;
  c->reject_code = code;
  c->reject_message = message;
  http_parser_pause(&c->parser, 1);
}

const char *conn_mcp_header(const http_conn *c, const char *name) {
  if (!c->mcp_headers.data) return NULL;
  const char *p = c->mcp_headers.data, *end = p + c->mcp_headers.len;
  while (p < end) {
    const char *value = p + strlen(p) + 1;
    if (strcmp(p, name) == 0) return value;
    p = value + strlen(value) + 1;
  }
  return NULL;
}

/* Keep an Mcp-* header the body must agree with (see http_conn.mcp_headers).
 * A repeated one is refused: which of the two would the check be against?
 * Its name (c->field) is in lower case already (store_header). */
static void store_mcp_header(http_conn *c) {
  const char *name = c->field.data;
  size_t n = c->field.len;
  if (n >= 128) return;
  if (conn_mcp_header(c, name)) {
    reject(c, 400, -32600, "Bad Request: a repeated Mcp-* header");
    return;
  }
  const char *v = c->value.data ? c->value.data : "";
  size_t len = c->value.len;
  while (len && (*v == ' ' || *v == '\t')) v++, len--;
  while (len && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
  buf_append(&c->mcp_headers, name, n + 1);
  buf_append(&c->mcp_headers, v, len);
  buf_putc(&c->mcp_headers, '\0');
}

static bool header_budget(http_conn *c, size_t n) {
  c->header_bytes += n;
  if (c->header_bytes > HTTP_MAX_HEADER_BYTES) {
    reject(c, 431, -32000, "Request Header Fields Too Large");
    return false;
  }
  return true;
}

/* Is the header name just read (c->field, in lower case by then) this
 * one? The length first: most names are told apart without comparing a
 * byte. */
static bool field_is(const http_conn *c, const char *name, size_t len) {
  return c->field.len == len && memcmp(c->field.data, name, len) == 0;
}
#define FIELD_IS(c, literal) field_is((c), "" literal, sizeof(literal) - 1)

static void store_header(http_conn *c) {
  static const struct {
    const char *name;
    size_t len;
    size_t offset;
    const char *repeated; /* NULL: a repeated header is allowed */
  } wanted[] = {
#define WANTED(name, slot, repeated) {name, sizeof(name) - 1, offsetof(http_conn, slot), repeated}
      WANTED("host", host, "Bad Request: more than one Host header"),
      WANTED("origin", origin, "Bad Request: more than one Origin header"),
      WANTED("accept", accept, NULL),
      WANTED("content-type", content_type, NULL),
      WANTED("mcp-session-id", session_id, "Bad Request: more than one Mcp-Session-Id header"),
      WANTED("mcp-protocol-version", protocol_version, "Bad Request: more than one MCP-Protocol-Version header"),
      WANTED("last-event-id", last_event_id, "Bad Request: more than one Last-Event-ID header"),
      WANTED("authorization", authorization, "Bad Request: more than one Authorization header"),
      WANTED("upgrade", upgrade, "Bad Request: more than one Upgrade header"),
      WANTED("sec-websocket-key", ws_key, "Bad Request: more than one Sec-WebSocket-Key header"),
      WANTED("sec-websocket-version", ws_version, "Bad Request: more than one Sec-WebSocket-Version header"),
      WANTED("sec-websocket-protocol", ws_protocol, NULL),
#undef WANTED
  };
  if (!c->field.len) return;
  /* Names are case-insensitive (RFC 9110, 5.1): lower case once, then
   * compare bytes. A name is a token (http_parser refuses anything else),
   * so ASCII is all there is to fold. */
  char *name = c->field.data;
  for (size_t i = 0, n = c->field.len; i < n; i++)
    if (name[i] >= 'A' && name[i] <= 'Z') name[i] += 'a' - 'A';
  if (c->field.len > 4 && memcmp(c->field.data, "mcp-", 4) == 0 && !FIELD_IS(c, "mcp-session-id") &&
      !FIELD_IS(c, "mcp-protocol-version")) {
    store_mcp_header(c);
    buf_clear(&c->field);
    buf_clear(&c->value);
    return;
  }
  /* W3C Trace Context, for traces (app/otel.c) and ctx.trace_id, and
   * A2A's version (http_a2a.c): kept beside the Mcp-* headers; a repeated
   * one is ignored, not refused. */
  if (FIELD_IS(c, "traceparent") || FIELD_IS(c, "tracestate") || FIELD_IS(c, "a2a-version")) {
    if (!conn_mcp_header(c, c->field.data)) store_mcp_header(c);
    buf_clear(&c->field);
    buf_clear(&c->value);
    return;
  }
  for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++) {
    if (!field_is(c, wanted[i].name, wanted[i].len)) continue;
    char **slot = (char **)((char *)c + wanted[i].offset);
    if (*slot && wanted[i].repeated) {
      /* RFC 9112, 3.2 for Host; the same for every header a check or a
       * lookup depends on: keeping either value would let a request past a
       * check (Origin, Authorization, Host) that a proxy or the client
       * meant for the other, or act on a session or version it did not
       * name. */
      reject(c, 400, -32600, wanted[i].repeated);
      break;
    }
    if (*slot && (strcmp(wanted[i].name, "accept") == 0 || strcmp(wanted[i].name, "sec-websocket-protocol") == 0)) {
      /* Repeated Accept (or Sec-WebSocket-Protocol) headers are one list. */
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
  if (c->requests_done) lru_remove(c); /* a keep-alive connection's next request: busy */
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
  /* A local socket keeps the loopback host (http_parse_listen), so the
   * loopback rule holds there too: its clients name a local host (curl and
   * nginx's proxy_pass to unix: send "localhost"), and a proxy that passes
   * on the Host a browser sent (a rebound name, say) must list the public
   * names with --allow-host, as in front of a loopback port. */
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
  /* A public route (the authorization metadata, health: see
   * HTTP_ROUTE_PUBLIC) answers any Origin and needs no token. */
  if (c->route_rules & HTTP_ROUTE_PUBLIC) return;
  if (c->origin) {
    char origin_name[256];
    if (!http_origin_host(c->origin, origin_name, sizeof origin_name) || !origin_allowed(h, c->origin, origin_name)) {
      reject(c, 403, -32000, "Forbidden: Origin not allowed");
      return;
    }
    c->origin_allowed = true;
  }
  /* A CORS preflight carries no credentials (the Fetch standard): it is
   * answered without them, and says only what the real request may send. */
  if (h->opts.bearer_token && c->parser.method != HTTP_OPTIONS) {
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
  /* Measured once: every family's match compares it (http_route_path_is). */
  c->path_len = c->url.data ? strcspn(c->url.data, "?#") : 0;
  c->family = route_find(c, &c->route, &c->route_rules);
  if (c->family && c->family->headers_read) c->family->headers_read(c, c->route);
  if (!c->reject_status) check_headers(c);
  /* Under --workers, a request naming another worker's session goes to
   * that worker, connection and all (conn_pump hands it over); one that
   * fails the checks above is answered here, as the owner would. */
  bool declined = c->handover_declined;
  c->handover_declined = false;
  if (!c->reject_status && !declined && c->server->worker_ops &&
      (c->handover_to = c->server->worker_ops->owner(c)) != 0)
    http_parser_pause(p, 1);
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  http_conn *c = p->data;
  if (c->reject_status) return 0;
  if (c->body.len + n > c->server->srv->opts.max_message_bytes) {
    reject(c, 413, -32600, "Content Too Large: the body is larger than the message limit");
    return 0;
  }
  http_server *h = c->server;
  if (h->buffered - h->replay_bytes + n > h->opts.buffer_bytes && conn_usage(c) + n > http_conn_share(h)) {
    reject(c, 503, -32000, "Service Unavailable: the server's buffer memory is full");
    return 0;
  }
  buf_append(&c->body, at, n);
  h->buffered += n;
  http_budget_changed(h);
  /* The body must keep arriving at HTTP_MIN_BODY_RATE on average. */
  c->deadline_ms = c->body_started_ms + HTTP_BODY_GRACE_MS + (uint64_t)c->body.len * 1000u / HTTP_MIN_BODY_RATE;
  return 0;
}

static int on_message_complete(http_parser *p) {
  http_conn *c = p->data;
  c->request_ready = true;
  c->requests_done++;
  lru_remove(c); /* a request in flight */
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

/* ---- Handling a request -------------------------------------------------- */

static void answer_preflight(http_conn *c, const char *methods) {
  buf headers = BUF_INIT;
  buf_printf(&headers, "Allow: %s, OPTIONS\r\nAccess-Control-Allow-Methods: %s, OPTIONS\r\n"
                       "Access-Control-Allow-Headers: Content-Type, Accept, Authorization, traceparent, tracestate\r\n"
                       "Access-Control-Max-Age: 600\r\n",
             methods, methods);
  conn_send_response(c, 204, headers.data, NULL, NULL, 0);
  buf_free(&headers);
  conn_response_done(c);
}

/* Is the request's method one of a family's ("GET, POST")? */
static bool method_listed(const char *methods, const char *method) {
  size_t n = strlen(method);
  for (const char *p = methods; *p;) {
    p += strspn(p, ", ");
    size_t len = strcspn(p, ", ");
    if (len == n && strncmp(p, method, n) == 0) return true;
    p += len;
  }
  return false;
}

/* Act on a complete request (the parser has read all of it, or refused
 * it): the rules every route shares, in order, then its family. */
static void conn_handle_request(http_conn *c) {
  http_server *h = c->server;
  const http_route_family *f = c->family;
  c->state = CONN_RESPONDING;
  if (h->srv->nested_poll > 0 && !c->reject_status && f && !(c->route_rules & HTTP_ROUTE_REPORTS)) {
    /* Under a computing handler nothing that could run Lua or free what
     * the handler's caller uses may happen: the request waits for a later
     * turn (on_later), but for what its family must act on now. */
    if (f->urgent && f->urgent(c, c->route)) return;
    c->request_held = true;
    conn_defer(c);
    return;
  }
  if (h->draining) c->close_after_response = true; /* adopted, or begun before the drain */
  if (log_get_level() >= LOG_DEBUG) {
    char target[512];
    http_target_for_log(c->url.data ? c->url.data : "", target, sizeof target);
    log_write(LOG_DEBUG, "http#%u: %s %s (%zu bytes)", c->id, http_method_str(c->parser.method), target, c->body.len);
  }
  if (c->reject_status) {
    c->close_after_response = true; /* the body was not read */
    conn_send_error(c, c->reject_status, c->reject_code, c->reject_message,
               c->reject_status == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL);
    return;
  }
  if (!f) {
    conn_send_error(c, 404, -32000, "Not Found: MCP is served at another path", NULL);
    return;
  }
  if (h->draining && !(c->route_rules & HTTP_ROUTE_REPORTS) && !(f->drain_admits && f->drain_admits(c, c->route))) {
    conn_send_error(c, 503, -32000, "Service Unavailable: the server is shutting down", "Retry-After: 1\r\n");
    return;
  }
  /* The families' own rules (OAuth: the bearer token; a CORS preflight
   * carries none). One may answer later: the request is then held, and
   * handled again from the top. */
  if (!(c->route_rules & HTTP_ROUTE_PUBLIC) && c->parser.method != HTTP_OPTIONS) {
    EACH_FAMILY(c->server, a) if ((*a)->access && !(*a)->access(c)) return;
  }
  if (f->methods && !method_listed(f->methods, http_method_str(c->parser.method))) {
    if (c->parser.method == HTTP_OPTIONS) {
      answer_preflight(c, f->methods);
    } else {
      char allow[128];
      snprintf(allow, sizeof allow, "Allow: %s, OPTIONS\r\n", f->methods);
      conn_send_error(c, 405, -32000, "Method Not Allowed", allow);
    }
    return;
  }
  f->handle(c, c->route);
}

/* ---- Connections ----------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b);
static void conn_pump(http_conn *c);
static size_t held_input_limit(http_conn *c);

static void on_shutdown(uv_shutdown_t *req, int status) {
  http_conn *c = req->data;
  if (c->closing) return;
  if (status < 0 || c->peer_eof) conn_close(c);
}

/* Close a connection that has answered, so that the client reads the
 * answer: shut down our side once every byte is written, then read and
 * discard what the client still sends (a body we refused, say) until its
 * EOF, HTTP_LINGER_BYTES or HTTP_LINGER_MS. Closing with unread input
 * instead sends a reset, which makes clients lose the response. */
static void conn_end(http_conn *c) {
  if (c->lingering || c->closing || c->close_pending) return;
  c->lingering = true;
  lru_push(c, &c->server->lingering_lru);
  if (!c->pumping) input_consume(c, c->input.len);
  c->deadline_ms = now_ms(c->server) + HTTP_LINGER_MS;
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
    conn_close_later(c);
    return;
  }
  if (c->reading_stopped && !c->peer_eof) {
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    c->reading_stopped = false;
  }
}

/* The current response is complete. Pipelined requests are parsed by the
 * pump on the stack, or on the next loop turn (this may run inside the
 * core's send). */
void conn_response_done(http_conn *c) {
  if (c->state != CONN_RESPONDING) return;
  c->state = CONN_IDLE;
  c->request_ready = false;
  /* Unpausing a parser in an error state (malformed HTTP) is an assertion
   * failure in http_parser that aborts the whole process. */
  if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED) http_parser_pause(&c->parser, 0);
  c->deadline_ms = now_ms(c->server) + HTTP_KEEPALIVE_IDLE_MS;
  bool close_announced = c->close_announced;
  c->close_announced = false;
  if (c->close_after_response || !c->keep_alive) {
    /* Draining, a request the client sent behind a response that did not
     * say Connection: close (see drain_answers_next, or its head went out
     * before the drain) is answered next, not dropped with the connection. */
    if (c->server->draining && c->keep_alive && !close_announced && (c->input.len || bytes_waiting(c))) {
      c->drain_owed = true;
      if (!c->pumping) conn_defer(c);
      return;
    }
    conn_end(c);
    return;
  }
  lru_push(c, &c->server->idle_lru);
  if (c->pumping) return;
  if (c->input.len || c->reading_stopped || c->peer_eof) conn_defer(c);
}

void conn_defer(http_conn *c) {
  http_server *h = c->server;
  if (c->deferred || c->closing) return;
  c->deferred = true;
  c->deferred_next = h->deferred;
  h->deferred = c;
  schedule_later(h);
}

/* ---- Upgraded connections (http_route.h) ------------------------------ */

void http_route_upgrade(http_conn *c) {
  c->upgraded = true;
  c->state = CONN_RESPONDING;
  c->deadline_ms = 0;
  c->keep_alive = false;
  lru_remove(c); /* never closed to make room: it is a session at work */
  conn_defer(c); /* the bytes read after the request, once the pump has let go of them */
}

void http_route_finish(http_conn *c) { conn_end(c); }

void http_route_hold(http_conn *c, long delta) {
  c->upgraded_held = (size_t)((long)c->upgraded_held + delta);
  c->server->buffered = (size_t)((long)c->server->buffered + delta);
  if (delta > 0) http_budget_changed(c->server);
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
      c->handling = true;
      conn_handle_request(c);
      c->handling = false;
      lru_requeue(c);
      if (c->state != CONN_RESPONDING) conn_pump(c);
    } else if ((c->state == CONN_IDLE || c->upgraded) && !c->lingering) {
      conn_pump(c); /* the bytes a pipelining client sent during the response, or an upgraded one's */
    }
  }
  if (h->budget_check) budget_enforce(h);
  if (!h->deferred && !h->budget_check) {
    uv_check_stop(&h->later);
    uv_idle_stop(&h->later_idle);
  }
}

/* What the connection may hold of unparsed input while a response is in
 * progress; beyond it, reading stops until the response is done. */
static size_t held_input_limit(http_conn *c) {
  size_t limit = c->server->srv->opts.max_message_bytes + HTTP_MAX_HEADER_BYTES, share = http_conn_share(c->server);
  return share < limit ? share : limit;
}

/* Parse held input, strictly in order: one request at a time, answered
 * before the next is parsed; a response that completes at once lets the
 * loop go on with the next request, one that does not stops it until
 * conn_response_done. Never re-entered: bytes that arrive meanwhile are
 * appended and parsed by this loop. */
static void conn_pump(http_conn *c) {
  if (c->pumping || c->closing) return;
  if (c->upgraded) {
    if (c->lingering || c->close_pending) return;
    c->pumping = true;
    size_t used = c->family->upgraded_input(c, c->input.data ? c->input.data : "", c->input.len);
    c->pumping = false;
    if (c->closing) return;
    input_consume(c, c->lingering ? c->input.len : used);
    if (c->reading_stopped && !c->lingering && !c->close_pending && c->input.len <= held_input_limit(c)) {
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
      c->reading_stopped = false;
    }
    return;
  }
  c->pumping = true;
  size_t off = c->fed;
  while (!c->closing && !c->close_pending && !c->lingering && c->state != CONN_RESPONDING && off < c->input.len) {
    if (c->state == CONN_IDLE) c->request_start = off; /* no request begun: the next starts here */
    size_t n = c->input.len - off;
    size_t parsed = http_parser_execute(&c->parser, &PARSER_SETTINGS, c->input.data + off, n);
    off += parsed;
    enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
    if (err == HPE_PAUSED) {
      if (c->handover_to) break;
      if (!c->request_ready && !c->reject_status) break;
      conn_handle_request(c);
      continue;
    }
    if (err != HPE_OK || parsed < n) {
      off = c->input.len;
      c->state = CONN_RESPONDING;
      c->close_after_response = true;
      c->keep_alive = false;
      conn_send_error(c, err == HPE_HEADER_OVERFLOW ? 431 : 400, -32600, "Bad Request: malformed HTTP", NULL);
    }
  }
  c->pumping = false;
  if (c->closing) return; /* the input goes with the connection */
  c->fed = off;
  if (c->handover_to && !c->lingering && !c->close_pending) {
    c->server->worker_ops->hand_over(c);
    return;
  }
  /* A worker keeps the request whose headers are still arriving (see
   * http_conn.request_start); everything else parsed is done with. */
  bool keep = c->server->worker && c->state == CONN_HEADERS && !c->lingering;
  input_consume(c, c->lingering ? c->input.len : keep ? c->request_start : off);
  lru_requeue(c);
  if (c->lingering || c->close_pending) return;
  if (c->state == CONN_RESPONDING) return;
  if (c->peer_eof) {
    conn_end(c); /* every request the client sent is answered */
  } else if (c->reading_stopped) {
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    c->reading_stopped = false;
  }
}

enum { HTTP_READ_BUF_BYTES = 64 * 1024 };

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *b) {
  (void)suggested;
  http_server *h = ((http_conn *)handle->data)->server;
  if (!h->read_buf) h->read_buf = malloc(HTTP_READ_BUF_BYTES);
  b->base = h->read_buf;
  b->len = h->read_buf ? HTTP_READ_BUF_BYTES : 0;
}

/* ---- Half-closed clients ---------------------------------------------- */

/* Has the peer reset the connection? (A client that closed its socket
 * entirely answers anything we send with a reset; one that only shut down
 * its sending side does not.) */
static bool peer_reset(http_conn *c) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0) return true;
  return os_sock_peer_reset((uv_os_sock_t)fd);
}

static void probe_stop(http_conn *c) {
  if (!c->probing) return;
  c->probing = false;
  c->server->probing--;
}

/* A response in progress that a client gone for good cannot use: a JSON
 * answer still being computed, or an SSE stream. */
static bool awaiting_answer(http_conn *c) {
  if (c->state == CONN_RESPONDING && c->auth_pending) return true; /* held while its token is checked */
  return c->state == CONN_RESPONDING && c->stream && c->stream->mode != STREAM_JSON && !c->stream->complete;
}

static void on_probe(uv_timer_t *t) {
  http_server *h = t->data;
  if (h->srv->nested_poll > 0) return; /* closing cancels calls: not under a computing handler */
  for (http_conn *c = h->conns, *next; c; c = next) {
    next = c->next;
    if (!c->probing || c->closing) continue;
    if (!awaiting_answer(c)) {
      probe_stop(c);
    } else if (peer_reset(c)) {
      log_write(LOG_DEBUG, "http#%u: the client closed the connection before its answer", c->id);
      conn_close(c);
    }
  }
  if (h->probing == 0) uv_timer_stop(t);
}

/* The client will send nothing more. Requests it sent are still answered
 * (a half close after the request is how some clients say "that is all"),
 * then the connection closes. A client that went away entirely must not
 * keep a JSON answer's call running or an SSE stream attached: something
 * harmless is sent (an interim 102, or an SSE comment), which only a
 * socket that is gone answers with a reset, and on_probe looks for it. */
static void input_ended(http_conn *c) {
  if (c->upgraded) { /* a WebSocket ends with a close frame: an EOF without one is the peer gone */
    conn_close(c);
    return;
  }
  c->peer_eof = true;
  c->reading_stopped = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (c->pumping) return; /* the pump finishes the job */
  if (c->state != CONN_RESPONDING && !c->input.len) {
    conn_close(c);
    return;
  }
  conn_pump(c);
  if (c->closing || !awaiting_answer(c) || c->probing) return;
  bool http11 = c->parser.http_major == 1 && c->parser.http_minor >= 1, probed = false;
  EACH_FAMILY(c->server, f) if ((*f)->probe && (probed = (*f)->probe(c))) break; /* an SSE comment, say */
  if (!probed) {
    if (!http11) return; /* HTTP/1.0 has no interim responses: the answer is just sent */
    conn_write(c, "HTTP/1.1 102 Processing\r\n\r\n", sizeof "HTTP/1.1 102 Processing\r\n\r\n" - 1);
  }
  if (c->closing || c->close_pending) return; /* the write failed: gone */
  if (peer_reset(c)) { /* on loopback the reset is often there already */
    conn_close(c);
    return;
  }
  c->probing = true;
  http_server *h = c->server;
  if (h->probing++ == 0) uv_timer_start(&h->probe, on_probe, HTTP_EOF_PROBE_MS, HTTP_EOF_PROBE_MS);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  http_conn *c = stream->data;
  if (n > 0) c->server->bytes_in += (uint64_t)n;
  if (n > 0 && !c->closing) {
    if (c->lingering) {
      c->linger_bytes += (size_t)n;
      if (c->linger_bytes > HTTP_LINGER_BYTES) conn_close(c);
    } else {
      input_append(c, b->base, (size_t)n);
      conn_pump(c);
    }
  }
  /* b->base is the server's read_buf (on_alloc): kept for the next read. */
  if (c->closing) return;
  if (n < 0) {
    if (n == UV_EOF && !c->lingering) input_ended(c);
    else conn_close(c); /* ECONNRESET, or the end of a lingering close */
    return;
  }
  if (!c->lingering && !c->reading_stopped && c->input.len > held_input_limit(c)) {
    uv_read_stop(stream); /* a pipelining client waits for us */
    c->reading_stopped = true;
  }
}

/* After http_stop, the server is freed once the close callbacks of its own
 * handles and of every connection (which use it) have run. */
static void server_maybe_free(http_server *h) {
  /* The listener closes alone when a drain starts: that is not the end. */
  if (h->stopping && h->handles_closing == 0 && !h->conns) {
    free(h->read_buf);
    buf_free(&h->response_buf);
    free(h);
  }
}

void http_server_handle_closed(http_server *h) {
  h->handles_closing--;
  server_maybe_free(h);
}

static void on_server_handle_closed(uv_handle_t *handle) { http_server_handle_closed(handle->data); }

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
  lru_remove(c);
  srv->conn_count--;
  srv->conns_closing--;
  reset_request(c);
  srv->buffered -= c->input.len + c->upgraded_held;
  buf_free(&c->url);
  buf_free(&c->field);
  buf_free(&c->value);
  buf_free(&c->mcp_headers);
  buf_free(&c->body); /* reset_request keeps a small one for the next request */
  buf_free(&c->input);
  free(c);
  if (srv->stopping) server_maybe_free(srv);
}

/* The connection is going: the families let go of it (its response
 * stream, if any, has nowhere to go). */
static void conn_detach_stream(http_conn *c) {
  EACH_FAMILY(c->server, f) if ((*f)->conn_gone) (*f)->conn_gone(c);
}

/* Close now: its close callback frees it, perhaps in a loop turn taken
 * from inside a computing handler, so only for a connection that no caller
 * further down the stack can be using (see conn_close). */
void conn_close_now(http_conn *c) {
  if (c->closing || c->handover_sent) return; /* a socket being handed over: its write callback closes it */
  conn_detach_stream(c);
  /* A check still pending (OAuth's) will not call back into a freed connection. */
  EACH_FAMILY(c->server, f) if ((*f)->request_end) (*f)->request_end(c);
  lru_remove(c);
  c->closing = true;
  c->server->conns_closing++;
  probe_stop(c);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

void conn_close(http_conn *c) {
  if (c->closing || c->handover_sent) return;
  if (c->server->srv->nested_poll > 0) {
    /* A loop turn taken from inside a computing handler (a write failed,
     * the client reset): the connection may be the very one whose request
     * is being handled further down the stack, so its close callback must
     * not run (and free it) in this turn. Stop its calls (a cancellation,
     * allowed here) and its reading now; close it on the next turn. */
    conn_detach_stream(c);
    if (!c->reading_stopped) {
      uv_read_stop((uv_stream_t *)&c->tcp);
      c->reading_stopped = true;
    }
    conn_close_later(c);
    return;
  }
  conn_close_now(c);
}

/* A connection accepted from `from` (the listener, or the IPC pipe a
 * handed-over socket arrives on), in the list, reading unless refused;
 * NULL when the accept failed. */
static http_conn *conn_accept(http_server *h, uv_stream_t *from, int fd) {
  http_conn *c = calloc(1, sizeof *c);
  c->server = h;
  c->id = ++h->next_conn_id;
  bool local = h->opts.local[0] != '\0';
  if (local) uv_pipe_init(h->loop, &c->pipe, 0);
  else uv_tcp_init(h->loop, &c->tcp);
  c->tcp.data = c;
  int rc = from ? uv_accept(from, (uv_stream_t *)&c->tcp) : local ? uv_pipe_open(&c->pipe, fd) : uv_tcp_open(&c->tcp, fd);
  if (rc != 0) {
    if (!from) os_sock_close((uv_os_sock_t)fd);
    uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
    return NULL;
  }
  if (!local) uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  c->keep_alive = true;
  c->deadline_ms = now_ms(h) + HTTP_HEADER_TIMEOUT_MS;
  c->next = h->conns;
  if (c->next) c->next->prev = c;
  h->conns = c;
  h->conn_count++;
  if (h->conn_count - h->conns_closing > h->opts.max_connections && !h->stopping) {
    /* Full: make room by closing the connection done with longest ago (a
     * lingering close), else the least recently used one with no request
     * in flight (see evictable), so that idle sockets, keep-alive ones
     * included, cannot lock clients out. A busy one is never closed. */
    http_conn *victim = lru_victim(h);
    if (victim) {
      log_write(LOG_DEBUG, "http#%u: closed to make room for http#%u (--max-connections %d)", victim->id, c->id,
                h->opts.max_connections);
      /* At once, even under a computing handler: an idle or lingering
       * connection has no request being handled. */
      conn_close_now(victim);
    }
  }
  if (h->conn_count - h->conns_closing > h->opts.max_connections || h->stopping) {
    c->state = CONN_RESPONDING;
    c->close_after_response = true;
    c->reading_stopped = true; /* the lingering close reads (and discards) */
    conn_send_error(c, 503, -32000, "Service Unavailable: too many connections", "Retry-After: 1\r\n");
    return c;
  }
  lru_push(c, &h->idle_lru);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  return c;
}

static void on_connection(uv_stream_t *listener, int status) {
  if (status < 0) return;
  conn_accept(listener->data, listener, -1);
}

void conn_accept_socket(http_server *h, int fd) { conn_accept(h, NULL, fd); }

void conn_adopt(http_server *h, uv_stream_t *from, const char *bytes, size_t len, bool declined) {
  http_conn *c = conn_accept(h, from, -1);
  if (!c || c->state == CONN_RESPONDING) return; /* refused (503): the bytes are not read */
  log_write(LOG_DEBUG, "http#%u: handed over by another worker (%zu bytes)", c->id, len);
  c->handover_declined = declined;
  input_append(c, bytes, len);
  conn_pump(c); /* as if we had read them ourselves */
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
    if (c->lingering) {
      if (now > c->deadline_ms) conn_close(c);
      continue;
    }
    if (c->state == CONN_RESPONDING) continue; /* its family keeps it alive (sweep) */
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
  EACH_FAMILY(h, f) if ((*f)->sweep) (*f)->sweep(h, now);
}

/* ---- Server ---------------------------------------------------------- */

void http_options_defaults(http_options *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->host, sizeof o->host, "127.0.0.1");
  snprintf(o->path, sizeof o->path, "/mcp");
  snprintf(o->sse_path, sizeof o->sse_path, "/sse");
  o->socket_mode = 0600;
  o->max_connections = DEFAULT_HTTP_MAX_CONNECTIONS;
  o->max_sessions = DEFAULT_HTTP_MAX_SESSIONS;
  o->session_timeout_ms = DEFAULT_HTTP_SESSION_TIMEOUT_S * 1000;
  o->buffer_bytes = (size_t)DEFAULT_HTTP_MEMORY_MB * 1024 * 1024;
}

bool http_remote_allowed(const char *host, bool allow_remote, const char *exposed, char *err, size_t err_len) {
  if (allow_remote || http_is_loopback_address(host)) return true;
  snprintf(err, err_len,
           "refusing to listen on %s: it is not a loopback address. Anyone who can reach it can %s; "
           "add --allow-remote if that is what you want",
           host, exposed);
  return false;
}

void http_remote_warn(const char *host, const char *exposed) {
  if (!http_is_loopback_address(host))
    log_write(LOG_WARNING, "listening on %s, which is not loopback: anyone who can reach it can %s", host, exposed);
}

/* The listen address, or false with a message in err (a remote address not
 * allowed, or one that does not parse). */
static bool listen_address(const http_options *opts, int port, struct sockaddr_storage *addr, char *err,
                           size_t err_len) {
  if (!http_remote_allowed(opts->host, opts->allow_remote, "use your tools (add --bearer-token-env too)", err,
                           err_len)) return false;
  const char *host = strcmp(opts->host, "localhost") == 0 ? "127.0.0.1" : opts->host;
  int rc = strchr(host, ':') ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)addr)
                             : uv_ip4_addr(host, port, (struct sockaddr_in *)addr);
  if (rc != 0) snprintf(err, err_len, "cannot listen on %s:%d: %s", opts->host, port, uv_strerror(rc));
  return rc == 0;
}

static int port_of(const struct sockaddr_storage *a) {
  return ntohs(a->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
                                        : ((const struct sockaddr_in *)a)->sin_port);
}

int http_listen_shared(const http_options *opts, int *port, char *err, size_t err_len) {
  if (opts->local[0]) {
    *port = 0;
    int fd = os_local_listen_shared(opts->local, opts->socket_mode, HTTP_LISTEN_BACKLOG, err, err_len);
    return fd < 0 ? -1 : fd;
  }
  struct sockaddr_storage addr;
  if (!listen_address(opts, opts->port, &addr, err, err_len)) return -1;
  int fd = os_sock_listen_shared((const struct sockaddr *)&addr, HTTP_LISTEN_BACKLOG);
  if (fd < 0) {
    snprintf(err, err_len, "cannot listen on %s:%d: %s", opts->host, opts->port, uv_strerror(fd));
    return -1;
  }
  struct sockaddr_storage bound;
  socklen_t len = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &len);
  *port = port_of(&bound);
  return fd;
}

void http_unlisten_shared(const http_options *opts) {
  if (opts->local[0]) os_local_remove(opts->local);
}

void http_listen_url(const http_options *opts, int port, char *out, size_t out_len) {
  const char *host = opts->host;
  if (opts->local[0]) snprintf(out, out_len, "unix:%s:%s", opts->local, opts->path);
  else snprintf(out, out_len, "http://%s%s%s:%d%s", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
                port, opts->path);
}

/* Bind and listen on the local socket (a worker never does: it accepts
 * from the supervisor's). */
static int listen_local(http_server *h, char *err, size_t err_len) {
  int rc = uv_pipe_init(h->loop, &h->local_listener, 0);
  if (rc == 0 && !h->opts.worker_index)
    rc = os_local_listen(&h->local_listener, h->opts.local, h->opts.socket_mode, HTTP_LISTEN_BACKLOG, on_connection,
                         err, err_len);
  return rc;
}

/* Stop listening (a drain, or the stop): the socket file goes with it, so
 * that the next server (a restart, the new version) may take the path at
 * once; a worker's is the supervisor's to remove. */
static void listener_close(http_server *h) {
  if (h->opts.local[0] && !h->opts.worker_index) os_local_remove(h->opts.local);
  uv_close((uv_handle_t *)&h->listener, on_server_handle_closed);
}

http_server *http_start(uv_loop_t *loop, server *srv, const http_options *opts, char *err, size_t err_len) {
  struct sockaddr_storage addr;
  if (!opts->families) {
    snprintf(err, err_len, "no endpoint families to serve (http_options.families)");
    return NULL;
  }
  if (!opts->local[0] && !listen_address(opts, opts->port, &addr, err, err_len)) return NULL;
  http_server *h = calloc(1, sizeof *h);
  h->loop = loop;
  h->srv = srv;
  h->opts = *opts;
  strmap_init(&h->sessions_by_id);
  EACH_FAMILY(h, f) if ((*f)->server_start) (*f)->server_start(h);
  int rc;
  if (opts->local[0]) {
    rc = listen_local(h, err, err_len); /* err says why */
  } else {
    rc = uv_tcp_init(loop, &h->listener);
    /* A worker accepts from the supervisor's socket (http_worker_attach):
     * its own listener is never opened. */
    if (rc == 0 && !opts->worker_index) rc = uv_tcp_bind(&h->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0 && !opts->worker_index) rc = uv_listen((uv_stream_t *)&h->listener, HTTP_LISTEN_BACKLOG, on_connection);
    if (rc != 0) snprintf(err, err_len, "cannot listen on %s:%d: %s", opts->host, opts->port, uv_strerror(rc));
  }
  if (rc != 0) {
    if (uv_is_active((uv_handle_t *)&h->listener) || h->listener.loop) uv_close((uv_handle_t *)&h->listener, NULL);
    strmap_free(&h->sessions_by_id);
    return NULL; /* h is freed with the process: the listener closes on the next turn */
  }
  h->listener.data = h;
  struct sockaddr_storage bound;
  int len = sizeof bound;
  if (opts->worker_index || opts->local[0]) h->port = opts->port;
  else if (uv_tcp_getsockname(&h->listener, (struct sockaddr *)&bound, &len) == 0) h->port = port_of(&bound);
  uv_timer_init(loop, &h->sweep);
  h->sweep.data = h;
  uv_check_init(loop, &h->later);
  uv_idle_init(loop, &h->later_idle);
  h->later.data = h;
  srv->nested_poll_safe = true;
  h->later_idle.data = h;
  uv_timer_start(&h->sweep, on_sweep, 1000, 1000);
  uv_timer_init(loop, &h->probe);
  h->probe.data = h;
  http_remote_warn(opts->host, opts->bearer_token ? "call your tools" : "call your tools (no --bearer-token-env set)");
  return h;
}

int http_bound_port(const http_server *h) { return h->port; }

void http_stop(http_server *h) {
  if (h->stopping) return;
  h->stopping = true;
  EACH_FAMILY(h, f) if ((*f)->server_stop) (*f)->server_stop(h);
  for (http_conn *c = h->conns, *next; c; c = next) {
    next = c->next;
    conn_close(c);
  }
  strmap_free(&h->sessions_by_id);
  h->handles_closing += 4; /* the listener may be closing already (http_drain) */
  if (h->worker_ops) h->worker_ops->detach(h); /* one more, when there is a pipe */
  uv_close((uv_handle_t *)&h->probe, on_server_handle_closed);
  if (!uv_is_closing((uv_handle_t *)&h->listener)) {
    h->handles_closing++;
    listener_close(h);
  }
  uv_close((uv_handle_t *)&h->sweep, on_server_handle_closed);
  uv_close((uv_handle_t *)&h->later, on_server_handle_closed);
  uv_close((uv_handle_t *)&h->later_idle, on_server_handle_closed);
}


/* ---- Draining ---------------------------------------------------------- */

int http_calls_in_flight(const http_server *h) { return server_calls_in_flight(h->srv); }

int http_drain(http_server *h) {
  if (h->draining || h->stopping) return http_calls_in_flight(h);
  h->draining = true;
  /* Without our listening socket, new connections are refused and a load
   * balancer's health check sees us gone; connections still in its
   * backlog, never accepted, are reset with it. A worker closes its copy of
   * the shared one: the other workers take what comes while they serve,
   * and once every copy is closed it is refused too. */
  h->handles_closing++;
  listener_close(h);
  if (h->worker_ops) h->worker_ops->stop_accepting(h);
  /* Every response from now on says Connection: close, and its connection
   * ends once it is written: first, so that the streams ended below close
   * their connections too, after their last byte. */
  for (http_conn *c = h->conns; c; c = c->next) c->close_after_response = true;
  /* The standing streams are a client waiting to hear, not work: end them
   * now, cleanly (the chunked body ends), so that the client reconnects
   * elsewhere. Calls still running keep their own streams. */
  EACH_FAMILY(h, f) if ((*f)->server_drain) (*f)->server_drain(h);
  server_end_listeners(h->srv);
  /* Idle keep-alive connections would only bring new work: shut them down
   * (after any bytes still being written). A connection with a request on
   * its way, or queued behind one in flight, is answered by
   * conn_handle_request, and the stop waits for that answer; so is
   * one whose request is still in the socket (it crossed the signal):
   * shutting that one down would drop the request unanswered. */
  for (http_conn *c = h->conns; c; c = c->next) {
    EACH_FAMILY(h, f) if (!c->closing && (*f)->conn_drain) (*f)->conn_drain(c);
    if (c->closing || c->lingering || c->handing_over || c->state == CONN_RESPONDING) continue;
    if (c->state != CONN_IDLE || c->input.len || c->deferred || bytes_waiting(c)) c->drain_owed = true;
    else conn_end(c);
  }
  return http_calls_in_flight(h);
}

bool http_drained(const http_server *h) {
  if (!h->draining || h->stopping || h->deferred || server_calls_in_flight(h->srv) > 0) return false;
  /* Answered is not enough: the bytes must be out before the loop stops
   * and the connections close. */
  for (const http_conn *c = h->conns; c; c = c->next)
    if (!c->closing && (c->pending_write_bytes || (c->drain_owed && !c->lingering))) return false;
  return true;
}

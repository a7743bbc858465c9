/* http_transport.c - Streamable HTTP. See http_transport.h. */
#include "http_transport.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_util.h"
#include "jsonrpc.h"
#include "log.h"
#include "luamcp_limits.h"
#include "strmap.h"

typedef struct http_conn http_conn;
typedef struct http_session http_session;
typedef struct http_stream http_stream;

/* One SSE event kept for Last-Event-ID replay. Owner: the session's ring. */
typedef struct replay_event {
  http_stream *stream;
  uint64_t seq;
  char *data;
  size_t len;
} replay_event;

typedef enum stream_mode {
  STREAM_PENDING, /* nothing written yet: JSON if the answer comes first */
  STREAM_JSON,
  STREAM_SSE,
} stream_mode;

/* Where the messages of one POST (or of the session's GET stream) go. Its
 * number is part of every event id, so a Last-Event-ID names it. Owner: its
 * http_session; freed once complete, detached and out of the replay ring
 * (or with the session). */
struct http_stream {
  http_session *hs;
  unsigned long no;            /* 0 is the session's standalone GET stream */
  http_conn *conn;             /* where its bytes go now; NULL when detached */
  stream_mode mode;
  const protocol_version *version; /* of the request that opened it (MCP-Protocol-Version) */
  bool primed;                 /* a priming event gave the client an id to resume from */
  bool complete;               /* its final message was produced */
  int replay_refs;             /* events of this stream in the ring */
  bool held;                   /* handle_post is still using it: do not free */
  uint64_t last_write_ms;
  http_stream *prev, *next;
};

/* HTTP state of one MCP session. Owner: the http_server (sessions map and
 * list); freed when the session is deleted, expires, or the server stops. */
struct http_session {
  http_server *server;
  session *session;
  char id[33];            /* 128 random bits, hex */
  bool registered;        /* in the map: initialize succeeded */
  uint64_t last_active_ms;
  unsigned long next_stream_no;
  uint64_t next_seq;
  http_stream *streams;
  replay_event ring[HTTP_REPLAY_EVENTS];
  size_t ring_start, ring_count, ring_bytes;
  http_session *prev, *next;
};

typedef enum conn_state {
  CONN_IDLE,       /* between requests */
  CONN_HEADERS,    /* reading a request's headers */
  CONN_BODY,       /* reading its body */
  CONN_RESPONDING, /* a response is being produced */
} conn_state;

/* One TCP connection. Owner: the http_server (conns list); freed in the
 * close callback of its handle. */
struct http_conn {
  uv_tcp_t tcp;
  http_server *server;
  unsigned id;
  http_parser parser;
  conn_state state;
  /* The request being read. */
  buf url, field, value, body;
  bool in_value;
  size_t header_bytes;
  char *host, *origin, *accept, *content_type, *session_id, *protocol_version, *last_event_id, *authorization;
  int reject_status; /* set while parsing: answer with this and close */
  const char *reject_message;
  int reject_code;
  bool request_ready;
  uint64_t deadline_ms; /* for the current phase; 0 = none */
  uint64_t body_started_ms;
  bool keep_alive;
  bool close_after_response;
  /* Bytes that arrived while a response was in progress. */
  buf input;
  bool reading_stopped;
  http_stream *stream; /* the response stream using this connection */
  size_t pending_write_bytes;
  bool closing;
  /* Work for the next loop turn (see defer): never done from inside the
   * protocol core's send. */
  bool deferred, close_pending;
  bool request_held; /* arrived while a handler computed: handled on a later turn */
  http_conn *deferred_next;
  http_conn *prev, *next;
};

struct http_server {
  uv_loop_t *loop;
  server *srv;
  http_options opts;
  uv_tcp_t listener;
  uv_timer_t sweep;
  int port;
  unsigned next_conn_id;
  int conn_count;
  http_conn *conns;
  strmap sessions_by_id;
  http_session *sessions;
  int session_count;
  unsigned next_session_name;
  http_conn *deferred;   /* connections with work for the next turn */
  uv_check_t later;      /* does that work at the end of this turn ... */
  uv_idle_t later_idle;  /* ... without blocking in poll first */
  bool stopping;
  int handles_closing;   /* after http_stop: freed when these and all conns have closed */
};

static uint64_t now_ms(http_server *h) { return uv_now(h->loop); }

/* ---- Writing --------------------------------------------------------- */

typedef struct write_req {
  uv_write_t req;
  http_conn *conn;
  size_t len;
  char data[];
} write_req;

static void conn_close(http_conn *c);
static void conn_defer(http_conn *c);

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

static void conn_write(http_conn *c, const char *data, size_t len) {
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

static void write_status_line(http_conn *c, buf *out, int status) {
  buf_printf(out, "HTTP/1.1 %d %s\r\n", status, status_text(status));
  if (c->close_after_response || !c->keep_alive) buf_puts(out, "Connection: close\r\n");
  else if (c->parser.http_minor == 0) buf_puts(out, "Connection: keep-alive\r\n");
}

/* A whole response with a body (or none). extra_headers end in \r\n. */
static void send_response(http_conn *c, int status, const char *extra_headers, const char *content_type,
                          const char *body, size_t len) {
  buf out = BUF_INIT;
  write_status_line(c, &out, status);
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

static void response_done(http_conn *c);

/* An HTTP error with a JSON-RPC error body (id null). */
static void send_error(http_conn *c, int status, int code, const char *message, const char *extra_headers) {
  buf body = BUF_INIT;
  jsonrpc_write_error(&body, NULL, 0, code, message, NULL, 0);
  log_write(LOG_DEBUG, "http#%u: %d %s", c->id, status, message);
  send_response(c, status, extra_headers, "application/json", body.data, body.len);
  buf_free(&body);
  response_done(c);
}

/* ---- Streams and replay ---------------------------------------------- */

static void session_header(http_session *hs, buf *out) {
  if (hs->session->state != SESSION_NEW) buf_printf(out, "Mcp-Session-Id: %s\r\n", hs->id);
}

static http_stream *stream_new(http_session *hs, http_conn *c, const protocol_version *v, bool standalone) {
  http_stream *st = calloc(1, sizeof *st);
  st->hs = hs;
  st->no = standalone ? 0 : ++hs->next_stream_no;
  st->conn = c;
  st->version = v;
  st->mode = standalone ? STREAM_SSE : STREAM_PENDING;
  st->next = hs->streams;
  if (st->next) st->next->prev = st;
  hs->streams = st;
  if (c) c->stream = st;
  return st;
}

static void stream_free(http_stream *st) {
  http_session *hs = st->hs;
  if (st->conn) st->conn->stream = NULL;
  if (st->prev) st->prev->next = st->next;
  else hs->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  free(st);
}

/* Free a stream nobody can reach any more. The standalone stream lives as
 * long as its session. */
static void stream_maybe_free(http_stream *st) {
  if (st->no != 0 && st->complete && !st->conn && st->replay_refs == 0 && !st->held) stream_free(st);
}

static http_stream *find_stream(http_session *hs, unsigned long no) {
  for (http_stream *st = hs->streams; st; st = st->next)
    if (st->no == no) return st;
  return NULL;
}

static http_stream *standalone_stream(http_session *hs) {
  http_stream *st = find_stream(hs, 0);
  return st ? st : stream_new(hs, NULL, NULL, true);
}

static void ring_drop_oldest(http_session *hs) {
  replay_event *e = &hs->ring[hs->ring_start];
  hs->ring_start = (hs->ring_start + 1) % HTTP_REPLAY_EVENTS;
  hs->ring_count--;
  hs->ring_bytes -= e->len;
  free(e->data);
  http_stream *st = e->stream;
  e->data = NULL;
  e->stream = NULL;
  st->replay_refs--;
  stream_maybe_free(st);
}

static void ring_push(http_session *hs, http_stream *st, uint64_t seq, const char *data, size_t len) {
  if (len > HTTP_REPLAY_BYTES) return; /* too big to keep: it cannot be replayed */
  while (hs->ring_count == HTTP_REPLAY_EVENTS || hs->ring_bytes + len > HTTP_REPLAY_BYTES) ring_drop_oldest(hs);
  replay_event *e = &hs->ring[(hs->ring_start + hs->ring_count) % HTTP_REPLAY_EVENTS];
  e->stream = st;
  e->seq = seq;
  e->data = malloc(len);
  memcpy(e->data, data, len);
  e->len = len;
  hs->ring_count++;
  hs->ring_bytes += len;
  st->replay_refs++;
}

static bool chunked(http_conn *c) { return c->parser.http_major > 1 || c->parser.http_minor >= 1; }

/* Write part of an SSE body (as a chunk on HTTP/1.1). */
static void sse_write(http_stream *st, const char *data, size_t len) {
  http_conn *c = st->conn;
  if (!c) return;
  st->last_write_ms = now_ms(c->server);
  if (!chunked(c)) {
    conn_write(c, data, len);
    return;
  }
  buf out = BUF_INIT;
  buf_printf(&out, "%zx\r\n", len);
  buf_append(&out, data, len);
  buf_puts(&out, "\r\n");
  conn_write(c, out.data, out.len);
  buf_free(&out);
}

static void sse_start(http_stream *st) {
  http_conn *c = st->conn;
  st->mode = STREAM_SSE;
  if (!c) return;
  if (!chunked(c)) c->close_after_response = true; /* HTTP/1.0: the body ends with the connection */
  buf out = BUF_INIT;
  write_status_line(c, &out, 200);
  buf_puts(&out, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n");
  if (chunked(c)) buf_puts(&out, "Transfer-Encoding: chunked\r\n");
  session_header(st->hs, &out);
  buf_puts(&out, "\r\n");
  conn_write(c, out.data, out.len);
  buf_free(&out);
  st->last_write_ms = now_ms(c->server);
}

/* A priming event: an id to resume from, how long to wait before
 * reconnecting, and empty data (clients drop events without a data line). */
static void sse_prime(http_stream *st) {
  if (!st->version || !st->version->sse_priming) return;
  uint64_t seq = ++st->hs->next_seq;
  char event[96];
  int n = snprintf(event, sizeof event, "id: %lu-%llu\nretry: %d\ndata: \n\n", st->no, (unsigned long long)seq,
                   HTTP_SSE_RETRY_MS);
  sse_write(st, event, (size_t)n);
  st->primed = true;
}

static void sse_event(http_stream *st, uint64_t seq, const char *json, size_t len) {
  buf out = BUF_INIT;
  buf_printf(&out, "event: message\nid: %lu-%llu\ndata: ", st->no, (unsigned long long)seq);
  buf_append(&out, json, len);
  buf_puts(&out, "\n\n");
  sse_write(st, out.data, out.len);
  buf_free(&out);
}

/* End the HTTP response that carries the stream (the stream may live on). */
static void stream_detach(http_stream *st) {
  http_conn *c = st->conn;
  if (!c) return;
  if (st->mode == STREAM_SSE) {
    if (chunked(c)) conn_write(c, "0\r\n\r\n", 5);
    else c->close_after_response = true;
  }
  st->conn = NULL;
  c->stream = NULL;
  response_done(c);
}

/* 202 with no body: the POST carried nothing to answer (notifications and
 * responses only). */
static void stream_accept(http_stream *st) {
  http_conn *c = st->conn;
  buf headers = BUF_INIT;
  session_header(st->hs, &headers);
  send_response(c, 202, headers.data, NULL, NULL, 0);
  buf_free(&headers);
  st->complete = true;
  st->conn = NULL;
  c->stream = NULL;
  response_done(c);
}

/* transport_ops.send */
static void http_send(session *s, const session_message *m) {
  http_session *hs = s->transport_data;
  http_stream *st = m->origin ? (http_stream *)m->origin : standalone_stream(hs);
  /* The session is idle from its last message, not from the arrival of a
   * request that took longer than --session-timeout to answer. */
  hs->last_active_ms = now_ms(hs->server);
  /* The call is answered: from here on it no longer refers to its stream,
   * which may be freed below (see http_call_ended). */
  if (m->final && m->related) m->related->transport_data = NULL;
  if (!m->json) { /* a batch with nothing to answer: the exchange still ends */
    if (!m->final) return;
    if (st->conn && st->mode == STREAM_PENDING) stream_accept(st);
    st->complete = true;
    stream_detach(st);
    stream_maybe_free(st);
    return;
  }
  if (st->mode == STREAM_PENDING && m->final) {
    /* The answer came first: a plain JSON response. An error that answers
     * no request (unparseable body, invalid request) is a 400. */
    st->mode = STREAM_JSON;
    st->complete = true;
    http_conn *c = st->conn;
    if (!c) return;
    buf headers = BUF_INIT;
    session_header(hs, &headers);
    send_response(c, m->unaddressed_error ? 400 : 200, headers.data, "application/json", m->json, m->len);
    buf_free(&headers);
    st->conn = NULL;
    c->stream = NULL;
    response_done(c);
    stream_maybe_free(st);
    return;
  }
  if (st->mode == STREAM_PENDING) {
    sse_start(st);
    sse_prime(st);
  }
  uint64_t seq = ++hs->next_seq;
  ring_push(hs, st, seq, m->json, m->len);
  if (st->conn) sse_event(st, seq, m->json, m->len);
  if (m->final) {
    st->complete = true;
    stream_detach(st);
    stream_maybe_free(st);
  }
}

/* transport_ops.close_stream: end the call's SSE response early. */
static bool http_close_stream(session *s, call *c) {
  (void)s;
  http_stream *st = c->transport_data;
  if (!st || st->complete || st->mode == STREAM_JSON) return false;
  if (st->mode == STREAM_PENDING) {
    if (!st->version || !st->version->sse_priming) return false; /* no id to resume from */
    sse_start(st);
    sse_prime(st);
  }
  if (!st->primed) return false;
  stream_detach(st);
  return true;
}

/* transport_ops.call_ended: a call the client cancelled (notifications/
 * cancelled) ends without a response, but its HTTP exchange must still end,
 * or the client waits forever. An answered call no longer has a stream (see
 * http_send); a batch ends with its array; an ended session closes its
 * streams itself (session_destroy). */
static void http_call_ended(session *s, call *cl) {
  http_stream *st = cl->transport_data;
  if (!st || cl->batch || st->complete || s->state == SESSION_CLOSED) return;
  st->complete = true;
  if (!st->conn) return; /* conn_close or a later resumption finishes it */
  /* A request must be answered with JSON or an event stream: an event
   * stream with no response in it is what a cancelled request gets. */
  if (st->mode == STREAM_PENDING) sse_start(st);
  stream_detach(st);
  stream_maybe_free(st);
}

static const transport_ops HTTP_OPS = {.send = http_send, .call_ended = http_call_ended, .close_stream = http_close_stream};

/* ---- Sessions -------------------------------------------------------- */

static http_session *session_create(http_server *h) {
  http_session *hs = calloc(1, sizeof *hs);
  hs->server = h;
  unsigned char random[16];
  if (uv_random(NULL, NULL, random, sizeof random, 0, NULL) != 0) {
    free(hs);
    return NULL;
  }
  for (int i = 0; i < 16; i++) snprintf(hs->id + 2 * i, 3, "%02x", random[i]);
  char name[32];
  snprintf(name, sizeof name, "http#s%u", ++h->next_session_name);
  hs->session = session_new(h->srv, &HTTP_OPS, hs, name);
  hs->last_active_ms = now_ms(h);
  hs->next = h->sessions;
  if (hs->next) hs->next->prev = hs;
  h->sessions = hs;
  h->session_count++;
  return hs;
}

/* End a session: cancel its calls, end its streams, forget it. */
static void session_destroy(http_session *hs) {
  http_server *h = hs->server;
  session_close(hs->session);
  while (hs->streams) {
    http_stream *st = hs->streams;
    if (st->conn) {
      /* The session is over: end the exchanges it still holds but keep
       * their connections, which a client may already be reusing (closing
       * one fails the request it just sent there). A request not answered
       * yet gets the 404 every later request of the session gets. */
      st->complete = true;
      if (st->mode == STREAM_PENDING) {
        http_conn *c = st->conn;
        st->conn = NULL;
        c->stream = NULL;
        send_error(c, 404, -32001, "Session not found", NULL);
      } else {
        stream_detach(st);
      }
    }
    stream_free(st);
  }
  for (size_t i = 0; i < hs->ring_count; i++) free(hs->ring[(hs->ring_start + i) % HTTP_REPLAY_EVENTS].data);
  if (hs->registered) strmap_remove(&h->sessions_by_id, hs->id);
  if (hs->prev) hs->prev->next = hs->next;
  else h->sessions = hs->next;
  if (hs->next) hs->next->prev = hs->prev;
  h->session_count--;
  session_free(hs->session);
  free(hs);
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

static bool path_matches(http_conn *c) {
  const char *want = c->server->opts.path;
  size_t n = strcspn(c->url.data ? c->url.data : "", "?#");
  return strlen(want) == n && strncmp(c->url.data, want, n) == 0;
}

static const protocol_version *header_version(http_conn *c, bool *bad) {
  *bad = false;
  if (!c->protocol_version) return protocol_http_default();
  const protocol_version *v = protocol_find(c->protocol_version, strlen(c->protocol_version));
  if (!v) *bad = true;
  return v;
}

/* Is the body one initialize request? (Only those may arrive without a
 * session.) */
static int body_is_initialize(http_conn *c) {
  json_error err;
  json_doc *doc = json_parse(c->body.data ? c->body.data : "", c->body.len, MAX_JSON_DEPTH, &err);
  if (!doc) return -1;
  const json_value *method = json_object_get(json_doc_root(doc), "method");
  int is = method && method->type == JSON_STRING && strcmp(method->u.string, "initialize") == 0 &&
           json_object_get(json_doc_root(doc), "id") != NULL;
  json_doc_free(doc);
  return is;
}

/* The session a request names: NULL after answering 400 or 404. */
static http_session *lookup_session(http_conn *c) {
  if (!c->session_id) {
    send_error(c, 400, -32600, "Bad Request: the Mcp-Session-Id header is required", NULL);
    return NULL;
  }
  http_session *hs = strmap_get(&c->server->sessions_by_id, c->session_id);
  if (!hs) {
    send_error(c, 404, -32001, "Session not found", NULL);
    return NULL;
  }
  hs->last_active_ms = now_ms(c->server);
  return hs;
}

static void handle_post(http_conn *c) {
  http_server *h = c->server;
  if (!http_accepts(c->accept, "application/json") || !http_accepts(c->accept, "text/event-stream")) {
    send_error(c, 406, -32000, "Not Acceptable: Accept must allow application/json and text/event-stream", NULL);
    return;
  }
  if (!http_is_json(c->content_type)) {
    send_error(c, 415, -32000, "Unsupported Media Type: Content-Type must be application/json", NULL);
    return;
  }
  bool bad_version;
  const protocol_version *v = header_version(c, &bad_version);
  if (bad_version) {
    send_error(c, 400, -32600, "Bad Request: unsupported MCP-Protocol-Version", NULL);
    return;
  }
  http_session *hs;
  if (!c->session_id) {
    int init = body_is_initialize(c);
    if (init < 0) {
      send_error(c, 400, JSONRPC_PARSE_ERROR, "Parse error: the body is not valid JSON", NULL);
      return;
    }
    if (!init) {
      send_error(c, 400, -32600, "Bad Request: the Mcp-Session-Id header is required", NULL);
      return;
    }
    if (h->session_count >= h->opts.max_sessions) {
      send_error(c, 503, -32000, "Service Unavailable: too many sessions", "Retry-After: 5\r\n");
      return;
    }
    hs = session_create(h);
    if (!hs) {
      send_error(c, 503, -32000, "Service Unavailable: no randomness for a session id", NULL);
      return;
    }
  } else if (!(hs = lookup_session(c))) {
    return;
  }
  http_stream *st = stream_new(hs, c, v, false);
  st->held = true;
  c->state = CONN_RESPONDING;
  session_receive(hs->session, c->body.data ? c->body.data : "", c->body.len, st);
  st->held = false;
  if (!hs->registered) {
    if (hs->session->state == SESSION_NEW) { /* initialize failed: no session */
      st->complete = true;
      session_destroy(hs);
      return;
    }
    hs->registered = true;
    strmap_set(&h->sessions_by_id, hs->id, hs);
  }
  if (st->conn && !st->complete && st->mode == STREAM_PENDING && !session_has_calls_from(hs->session, st)) {
    /* A notification or a response: accepted, nothing to answer. */
    stream_accept(st);
  }
  stream_maybe_free(st);
}

/* "<stream>-<seq>" */
static bool parse_event_id(const char *id, unsigned long *stream_no, uint64_t *seq) {
  char *end;
  unsigned long no = strtoul(id, &end, 10);
  if (end == id || *end != '-') return false;
  const char *s = end + 1;
  unsigned long long n = strtoull(s, &end, 10);
  if (end == s || *end) return false;
  *stream_no = no;
  *seq = n;
  return true;
}

static void handle_get(http_conn *c) {
  if (!http_accepts(c->accept, "text/event-stream")) {
    send_error(c, 406, -32000, "Not Acceptable: Accept must allow text/event-stream", NULL);
    return;
  }
  bool bad_version;
  const protocol_version *v = header_version(c, &bad_version);
  if (bad_version) {
    send_error(c, 400, -32600, "Bad Request: unsupported MCP-Protocol-Version", NULL);
    return;
  }
  http_session *hs = lookup_session(c);
  if (!hs) return;
  http_stream *st;
  uint64_t after = 0;
  if (c->last_event_id) {
    unsigned long no;
    if (!parse_event_id(c->last_event_id, &no, &after) || !(st = find_stream(hs, no))) {
      send_error(c, 400, -32600, "Bad Request: Last-Event-ID names no stream this session still has", NULL);
      return;
    }
    if (st->conn) stream_detach(st); /* the newer connection takes the stream over */
  } else {
    st = find_stream(hs, 0);
    if (st && st->conn) {
      send_error(c, 409, -32000, "Conflict: this session already has an open GET stream", NULL);
      return;
    }
    if (!st) st = stream_new(hs, NULL, v, true);
  }
  st->conn = c;
  c->stream = st;
  c->state = CONN_RESPONDING;
  if (!st->version) st->version = v;
  sse_start(st);
  if (!c->last_event_id) {
    sse_prime(st);
  } else {
    /* Replay what the client missed, in order, then carry on live. */
    for (size_t i = 0; i < hs->ring_count; i++) {
      replay_event *e = &hs->ring[(hs->ring_start + i) % HTTP_REPLAY_EVENTS];
      if (e->stream == st && e->seq > after) sse_event(st, e->seq, e->data, e->len);
    }
    if (st->complete) {
      stream_detach(st);
      stream_maybe_free(st);
    }
  }
}

static void handle_delete(http_conn *c) {
  http_session *hs = lookup_session(c);
  if (!hs) return;
  log_write(LOG_DEBUG, "%s: deleted by the client", hs->session->name);
  session_destroy(hs);
  send_response(c, 200, NULL, NULL, NULL, 0);
  response_done(c);
}

/* A request that arrived while a handler computes (server.nested_poll):
 * nothing that could run Lua or free what the handler's caller uses may
 * happen now. A cancellation is acted on at once and a DELETE cancels the
 * session's calls at once; everything else waits for a later turn. */
static bool hold_request(http_conn *c) {
  http_server *h = c->server;
  if (h->srv->nested_poll == 0 || c->reject_status || !path_matches(c)) return false;
  http_session *hs = c->session_id ? strmap_get(&h->sessions_by_id, c->session_id) : NULL;
  if (hs && c->parser.method == HTTP_POST && http_is_json(c->content_type) &&
      session_receive_urgent(hs->session, c->body.data ? c->body.data : "", c->body.len)) {
    send_response(c, 202, NULL, NULL, NULL, 0);
    response_done(c);
    return true;
  }
  if (hs && c->parser.method == HTTP_DELETE) session_close(hs->session); /* destroyed when the request is handled */
  c->request_held = true;
  conn_defer(c);
  return true;
}

static void handle_request(http_conn *c) {
  c->state = CONN_RESPONDING;
  if (hold_request(c)) return;
  log_write(LOG_DEBUG, "http#%u: %s %s (%zu bytes)", c->id, http_method_str(c->parser.method), c->url.data ? c->url.data : "",
            c->body.len);
  if (c->reject_status) {
    c->close_after_response = true; /* the body was not read */
    send_error(c, c->reject_status, c->reject_code, c->reject_message,
               c->reject_status == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL);
    return;
  }
  if (!path_matches(c)) {
    send_error(c, 404, -32000, "Not Found: MCP is served at another path", NULL);
    return;
  }
  switch (c->parser.method) {
    case HTTP_POST: handle_post(c); break;
    case HTTP_GET: handle_get(c); break;
    case HTTP_DELETE: handle_delete(c); break;
    default:
      send_error(c, 405, -32000, "Method Not Allowed: use POST, GET or DELETE", "Allow: GET, POST, DELETE\r\n");
  }
}

/* ---- Connections ----------------------------------------------------- */

static void feed(http_conn *c, const char *data, size_t n);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b);
static void on_later(uv_check_t *t);
static void on_later_idle(uv_idle_t *h);

/* The current response is complete: the next request is read on the next
 * loop turn (this may run inside the core's send). */
static void response_done(http_conn *c) {
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

static void conn_defer(http_conn *c) {
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
      handle_request(c);
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
    if (c->request_ready || c->reject_status) handle_request(c);
    return;
  }
  if (err != HPE_OK) {
    c->state = CONN_RESPONDING;
    c->close_after_response = true;
    c->keep_alive = false;
    send_error(c, err == HPE_HEADER_OVERFLOW ? 431 : 400, -32600, "Bad Request: malformed HTTP", NULL);
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

static void conn_close(http_conn *c) {
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
    send_error(c, 503, -32000, "Service Unavailable: too many connections", "Retry-After: 1\r\n");
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
        send_error(c, 408, -32000, "Request Timeout: the request arrived too slowly", NULL);
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
      session_destroy(hs);
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
  while (h->sessions) session_destroy(h->sessions);
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

/* http_sse.c - where an HTTP session's messages go: a JSON response or an
 * SSE stream, event ids, and the replay ring for Last-Event-ID. See http.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "transport/http.h"
#include "transport/http_util.h"

/* ---- Streams and replay ---------------------------------------------- */

static void session_header(http_session *hs, buf *out) {
  if (hs->session->state != SESSION_NEW) buf_printf(out, "Mcp-Session-Id: %s\r\n", hs->id);
}

http_stream *stream_new(http_session *hs, http_conn *c, const protocol_version *v, bool standalone) {
  http_stream *st = calloc(1, sizeof *st);
  st->hs = hs;
  st->no = standalone ? 0 : ++hs->next_stream_no;
  st->conn = c;
  st->version = v;
  st->mode = standalone ? STREAM_SSE : STREAM_PENDING;
  st->identity = auth_identity_ref(c ? c->identity : NULL);
  st->next = hs->streams;
  if (st->next) st->next->prev = st;
  hs->streams = st;
  if (c) c->stream = st;
  return st;
}

void stream_free(http_stream *st) {
  http_session *hs = st->hs;
  if (st->conn) st->conn->stream = NULL;
  if (st->prev) st->prev->next = st->next;
  else hs->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  auth_identity_unref(st->identity);
  buf_free(&st->legacy_headers);
  free(st);
}

/* Free a stream nobody can reach any more. The standalone stream lives as
 * long as its session. */
void stream_maybe_free(http_stream *st) {
  if (st->no != 0 && st->complete && !st->conn && st->replay_refs == 0 && !st->held) stream_free(st);
}

http_stream *stream_find(http_session *hs, unsigned long no) {
  for (http_stream *st = hs->streams; st; st = st->next)
    if (st->no == no) return st;
  return NULL;
}

static http_stream *standalone_stream(http_session *hs) {
  http_stream *st = stream_find(hs, 0);
  return st ? st : stream_new(hs, NULL, NULL, true);
}

static void replay_unlink(http_server *h, replay_event *e) {
  if (e->older) e->older->newer = e->newer;
  else h->replay_oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else h->replay_newest = e->older;
  e->older = e->newer = NULL;
  h->replay_bytes -= e->len;
  h->buffered -= e->len;
  free(e->data);
  e->data = NULL;
  e->hs = NULL;
}

static void ring_drop_oldest(http_session *hs) {
  replay_event *e = &hs->ring[hs->ring_start];
  hs->ring_start = (hs->ring_start + 1) % HTTP_REPLAY_EVENTS;
  hs->ring_count--;
  hs->ring_bytes -= e->len;
  replay_unlink(hs->server, e);
  http_stream *st = e->stream;
  e->stream = NULL;
  st->replay_refs--;
  stream_maybe_free(st);
}

/* The server-wide oldest event is the oldest of its session's ring. */
bool replay_drop_oldest(http_server *h) {
  replay_event *e = h->replay_oldest;
  if (!e) return false;
  ring_drop_oldest(e->hs);
  return true;
}

void replay_clear(http_session *hs) {
  for (size_t i = 0; i < hs->ring_count; i++) {
    replay_event *e = &hs->ring[(hs->ring_start + i) % HTTP_REPLAY_EVENTS];
    replay_unlink(hs->server, e);
    e->stream = NULL;
  }
  hs->ring_count = 0;
  hs->ring_bytes = 0;
}

static void ring_push(http_session *hs, http_stream *st, uint64_t seq, const char *data, size_t len) {
  http_server *h = hs->server;
  /* Too big to keep (for one session, or for replay's half of the buffer
   * budget): it cannot be replayed. */
  if (len > HTTP_REPLAY_BYTES || len > h->opts.buffer_bytes / 2) return;
  while (hs->ring_count == HTTP_REPLAY_EVENTS || hs->ring_bytes + len > HTTP_REPLAY_BYTES) ring_drop_oldest(hs);
  replay_event *e = &hs->ring[(hs->ring_start + hs->ring_count) % HTTP_REPLAY_EVENTS];
  e->stream = st;
  e->hs = hs;
  e->seq = seq;
  e->data = malloc(len);
  memcpy(e->data, data, len);
  e->len = len;
  e->older = h->replay_newest;
  e->newer = NULL;
  if (e->older) e->older->newer = e;
  else h->replay_oldest = e;
  h->replay_newest = e;
  hs->ring_count++;
  hs->ring_bytes += len;
  h->replay_bytes += len;
  h->buffered += len;
  st->replay_refs++;
  http_budget_changed(h); /* other sessions' oldest events go at the end of the turn */
}

static bool chunked(http_conn *c) { return c->parser.http_major > 1 || c->parser.http_minor >= 1; }

/* Write part of an SSE body (as a chunk on HTTP/1.1). */
void sse_write(http_stream *st, const char *data, size_t len) {
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

void sse_start(http_stream *st) {
  http_conn *c = st->conn;
  st->mode = STREAM_SSE;
  if (!c) return;
  if (!chunked(c)) c->close_after_response = true; /* HTTP/1.0: the body ends with the connection */
  buf out = BUF_INIT;
  conn_write_status_line(c, &out, 200);
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
void sse_prime(http_stream *st) {
  if (!st->version || !st->version->sse_priming) return;
  uint64_t seq = ++st->hs->next_seq;
  char event[96];
  int n = snprintf(event, sizeof event, "id: %lu-%llu\nretry: %d\ndata: \n\n", st->no, (unsigned long long)seq,
                   HTTP_SSE_RETRY_MS);
  sse_write(st, event, (size_t)n);
  st->primed = true;
}

void sse_event(http_stream *st, uint64_t seq, const char *json, size_t len) {
  buf out = BUF_INIT;
  buf_printf(&out, "event: message\nid: %lu-%llu\ndata: ", st->no, (unsigned long long)seq);
  buf_append(&out, json, len);
  buf_puts(&out, "\n\n");
  sse_write(st, out.data, out.len);
  buf_free(&out);
}

/* End the HTTP response that carries the stream (the stream may live on). */
void stream_detach(http_stream *st) {
  http_conn *c = st->conn;
  if (!c) return;
  if (st->mode == STREAM_SSE) {
    if (chunked(c)) conn_write(c, "0\r\n\r\n", 5);
    else c->close_after_response = true;
  }
  st->conn = NULL;
  c->stream = NULL;
  conn_response_done(c);
}

/* 202 with no body: the POST carried nothing to answer (notifications and
 * responses only). */
void stream_accept(http_stream *st) {
  http_conn *c = st->conn;
  buf headers = BUF_INIT;
  session_header(st->hs, &headers);
  conn_send_response(c, 202, headers.data, NULL, NULL, 0);
  buf_free(&headers);
  st->complete = true;
  st->conn = NULL;
  c->stream = NULL;
  conn_response_done(c);
}

/* transport_ops.send */
static void http_send(session *s, const session_message *m) {
  http_session *hs = s->transport_data;
  if (hs->kind) {
    hs->kind->send(hs, m);
    return;
  }
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
    int status = m->http_status ? m->http_status : m->unaddressed_error ? 400 : 200;
    /* A call refused for its scopes: the challenge tells the client which
     * to ask for (step-up). Once an SSE stream has started, only the
     * JSON-RPC error can say it. */
    if (status == 403 && m->required_scopes && http_auth_on(hs->server))
      http_auth_scope_challenge(c, &headers, m->required_scopes);
    conn_send_response(c, status, headers.data, "application/json", m->json, m->len);
    buf_free(&headers);
    st->conn = NULL;
    c->stream = NULL;
    conn_response_done(c);
    stream_maybe_free(st);
    return;
  }
  if (st->mode == STREAM_PENDING) {
    sse_start(st);
    sse_prime(st);
  }
  uint64_t seq = ++hs->next_seq;
  if (!hs->stateless) ring_push(hs, st, seq, m->json, m->len);
  if (st->conn) sse_event(st, seq, m->json, m->len);
  if (m->final) {
    st->complete = true;
    stream_detach(st);
    stream_maybe_free(st);
  }
}

/* transport_ops.close_stream: end the call's SSE response early. */
static bool http_close_stream(session *s, call *c) {
  http_stream *st = c->transport_data;
  if (((http_session *)s->transport_data)->legacy) return false; /* one stream for everything */
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
 * streams itself (http_session_destroy). */
static void http_call_ended(session *s, call *cl) {
  const http_session_kind *kind = ((http_session *)s->transport_data)->kind;
  if (kind) {
    kind->call_ended(s, cl);
    return;
  }
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

/* transport_ops.request_header: the headers of the POST a stream answers. */
static const char *http_request_header(session *s, void *origin, const char *name) {
  (void)s;
  http_stream *st = origin;
  if (st && st->hs->kind) return st->hs->kind->request_header(st, name);
  http_conn *c = st ? st->conn : NULL;
  if (!c) return NULL;
  if (strcmp(name, "mcp-protocol-version") == 0) return c->protocol_version;
  return conn_mcp_header(c, name);
}

/* transport_ops.keep: what a session keeps from its client (its
 * initialize's fields, subscribed URIs) is charged to the buffer budget
 * like any other buffer, for the session's life. It is refused only when
 * what cannot be dropped would pass the budget: replay events make room
 * (at the end of the turn, as for writes). */
static bool http_keep(session *s, size_t bytes) {
  http_server *h = ((http_session *)s->transport_data)->server;
  if (h->buffered - h->replay_bytes + bytes > h->opts.buffer_bytes) {
    log_write(LOG_WARNING, "%s: the buffer budget is full; refusing to keep %zu more bytes for the session", s->name,
              bytes);
    return false;
  }
  h->buffered += bytes;
  h->session_bytes += bytes;
  http_budget_changed(h);
  return true;
}

static void http_release(session *s, size_t bytes) {
  http_server *h = ((http_session *)s->transport_data)->server;
  h->buffered -= bytes;
  h->session_bytes -= bytes;
}

/* transport_ops.request_identity: who sent the request a stream answers. */
static auth_identity *http_request_identity(session *s, void *origin) {
  (void)s;
  http_stream *st = origin;
  return st ? st->identity : NULL;
}

const transport_ops HTTP_SESSION_OPS = {.send = http_send,
                                        .request_identity = http_request_identity,
                                        .call_ended = http_call_ended,
                                        .close_stream = http_close_stream,
                                        .request_header = http_request_header,
                                        .keep = http_keep,
                                        .release = http_release};


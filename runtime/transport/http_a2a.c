/* http_a2a.c - A2A (Agent2Agent) over HTTP: the agent card at
 * /.well-known/agent-card.json and the JSON-RPC binding at /a2a, both
 * versions (1.0 and 0.3). An endpoint family (a2a_family, see
 * http_route.h), so Host/Origin, CORS, the bearer token and OAuth, the
 * body limit, the buffer budget and the drain apply as on /mcp.
 *
 * Where the protocol lives: this file does HTTP only (which route, JSON or
 * an SSE stream, a stream that ends). Each request becomes a call on one
 * "foreign" core session (session.foreign), which the app runs in a
 * coroutine of its own, as it runs MCP's requests, but hands to
 * lua/mcp/a2a.lua instead of MCP's methods. The agent's tasks, their
 * states, waits for input and push notifications are Lua: they are the
 * script's handler's own life (its ctx:ask waits as a tool's ctx:elicit
 * does), and the coroutines, deadlines, cancellation, mcp.http and the
 * permissions come with it for nothing. A C protocol layer beside it would
 * have had to call back into Lua for every one of those. An SSE response
 * is one request answered many times (call_respond_partial); the
 * connection going cancels that request, not the agent's task, which the
 * client can follow again (SubscribeToTask, tasks/resubscribe). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "transport/http.h"
#include "transport/http_route.h"
#include "transport/http_util.h"

#define A2A_CARD_PATH "/.well-known/agent-card.json"
#define A2A_PATH "/a2a"
/* The method the card request is, to lua/mcp/a2a.lua (a JSON-RPC client
 * sending it gets the public card, nothing more). */
#define A2A_CARD_METHOD "GET /.well-known/agent-card.json"

enum { ROUTE_CARD = 1, ROUTE_RPC };

/* The one A2A session of each server (an http_server has no slot for a
 * family's state; a process has one or two servers). Owner: this file,
 * from server_start to server_stop. */
typedef struct a2a_server {
  http_server *h;
  http_session *hs;
  struct a2a_server *next;
} a2a_server;
static a2a_server *servers;

static http_session *a2a_session(const http_server *h) {
  for (a2a_server *a = servers; a; a = a->next)
    if (a->h == h) return a->hs;
  return NULL;
}

static bool is_ours(const http_stream *st) { return st && a2a_session(st->hs->server) == st->hs; }

static int a2a_match(const http_conn *c, unsigned *rules) {
  if (http_route_path_is(c, A2A_CARD_PATH)) {
    *rules |= HTTP_ROUTE_PUBLIC; /* the card is for anyone to read, as the spec says */
    return ROUTE_CARD;
  }
  if (http_route_path_is(c, A2A_PATH)) return ROUTE_RPC;
  return 0;
}

/* A JSON-RPC error answering no call (the body was not a request). */
static void answer_error(http_conn *c, int status, const json_value *id, const char *src, int code, const char *message) {
  buf out = BUF_INIT, tmp = BUF_INIT;
  size_t id_len = 0;
  const char *id_text = id ? jsonrpc_id_text(id, src, &tmp, &id_len) : NULL;
  jsonrpc_write_error(&out, id_text, id_len, code, message, NULL, 0);
  http_route_answer(c, status, "application/json", out.data, out.len);
  buf_free(&out);
  buf_free(&tmp);
}

/* The methods whose answer is an event stream, whatever comes first. */
static bool is_streaming_method(const jsonrpc_message *m) {
  static const char *const STREAMING[] = {"SendStreamingMessage", "SubscribeToTask", "message/stream",
                                          "tasks/resubscribe"};
  for (size_t i = 0; i < sizeof STREAMING / sizeof *STREAMING; i++)
    if (m->method_len == strlen(STREAMING[i]) && memcmp(m->method, STREAMING[i], m->method_len) == 0) return true;
  return false;
}

static void start_call(http_conn *c, const jsonrpc_message *m, const char *src) {
  http_session *hs = a2a_session(c->server);
  http_stream *st = stream_new(hs, c, NULL, false);
  st->held = true;
  st->events_only = is_streaming_method(m);
  c->state = CONN_RESPONDING;
  session_receive_foreign(hs->session, m, src, st);
  st->held = false;
  stream_maybe_free(st);
}

static void handle_card(http_conn *c) {
  if (c->parser.method != HTTP_GET && c->parser.method != HTTP_HEAD) {
    http_route_answer(c, 405, "text/plain", "Method Not Allowed\n", 19);
    return;
  }
  jsonrpc_message m = {.kind = JSONRPC_REQUEST, .method = A2A_CARD_METHOD, .method_len = strlen(A2A_CARD_METHOD)};
  json_doc *doc = json_parse("0", 1, 4, NULL);
  m.id = json_doc_root(doc);
  start_call(c, &m, "0");
  json_doc_free(doc);
}

static void handle_rpc(http_conn *c) {
  if (c->parser.method != HTTP_POST) {
    http_route_answer(c, 405, "text/plain", "Method Not Allowed: A2A's JSON-RPC binding takes POST\n", 54);
    return;
  }
  if (!http_is_json(c->content_type)) {
    answer_error(c, 415, NULL, NULL, JSONRPC_INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json");
    return;
  }
  size_t len;
  const char *body = http_route_body(c, &len);
  json_error err;
  json_doc *doc = json_parse(body, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    answer_error(c, 400, NULL, NULL, JSONRPC_PARSE_ERROR, "Parse error: the body is not valid JSON");
    return;
  }
  jsonrpc_message m;
  jsonrpc_classify(json_doc_root(doc), body, &m);
  if (m.kind != JSONRPC_REQUEST) {
    /* A2A has no notifications, batches or responses from the client. */
    answer_error(c, 400, m.id, body, JSONRPC_INVALID_REQUEST,
                 m.kind == JSONRPC_INVALID && m.error_message ? m.error_message
                                                              : "Invalid Request: A2A takes one JSON-RPC request with an id");
  } else if (m.params && m.params->type != JSON_OBJECT) {
    answer_error(c, 200, m.id, body, JSONRPC_INVALID_PARAMS, "Invalid params: params must be an object");
  } else {
    start_call(c, &m, body);
  }
  json_doc_free(doc);
}

/* A CORS preflight (its Origin was allowed, or it would be a 403): the
 * headers an A2A client sends, A2A-Version and extensions among them. */
static void answer_preflight(http_conn *c) {
  static const char headers[] = "Allow: GET, POST, OPTIONS\r\nAccess-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
                                "Access-Control-Allow-Headers: Content-Type, Accept, Authorization, A2A-Version, "
                                "A2A-Extensions, X-A2A-Extensions, traceparent, tracestate\r\n"
                                "Access-Control-Max-Age: 600\r\n";
  conn_send_response(c, 204, headers, NULL, NULL, 0);
  conn_response_done(c);
}

static void a2a_handle(http_conn *c, int route) {
  if (c->parser.method == HTTP_OPTIONS) answer_preflight(c);
  else if (route == ROUTE_CARD) handle_card(c);
  else handle_rpc(c);
}

/* ---- Where a call's answers go (http_session_kind) --------------------- */

/* The card: the call's result is the card's JSON text (a string). */
static void send_card(http_stream *st, const session_message *m) {
  http_conn *c = st->conn;
  json_doc *doc = json_parse(m->json, m->len, MAX_JSON_DEPTH, NULL);
  const json_value *result = doc ? json_object_get(json_doc_root(doc), "result") : NULL;
  st->conn = NULL;
  c->stream = NULL;
  if (result && result->type == JSON_STRING) {
    buf headers = BUF_INIT;
    buf_puts(&headers, "Cache-Control: max-age=60\r\n");
    if (c->origin) buf_puts(&headers, "Access-Control-Allow-Origin: *\r\n");
    conn_send_response(c, 200, headers.data, "application/json", result->u.string, result->len);
    buf_free(&headers);
  } else {
    static const char none[] = "{\"error\":\"this server declares no agent (mcp.agent)\"}";
    conn_send_response(c, 404, NULL, "application/json", none, sizeof none - 1);
  }
  conn_response_done(c);
  json_doc_free(doc);
}

/* Whether a message is a JSON-RPC error response. */
static bool is_error(const session_message *m) {
  json_doc *doc = json_parse(m->json, m->len, MAX_JSON_DEPTH, NULL);
  bool error = doc && json_object_get(json_doc_root(doc), "error") != NULL;
  json_doc_free(doc);
  return error;
}

static void a2a_send(http_session *hs, const session_message *m) {
  (void)hs;
  http_stream *st = m->origin;
  if (m->final && m->related) m->related->transport_data = NULL;
  if (!st) return; /* nowhere to go */
  if (m->final) st->complete = true;
  http_conn *c = st->conn;
  /* A stream's first event may be its last (a task already waiting for
   * input, or done): still a stream, as its client reads one. A refusal
   * before any event is a JSON error, as the SDKs' servers send it. */
  if (c && m->json && st->mode == STREAM_PENDING && m->final && (!st->events_only || is_error(m))) {
    st->mode = STREAM_JSON;
    if (c->route == ROUTE_CARD && c->family && c->family->handle == a2a_handle) {
      send_card(st, m);
    } else {
      st->conn = NULL;
      c->stream = NULL;
      conn_send_response(c, m->unaddressed_error ? 400 : 200, NULL, "application/json", m->json, m->len);
      conn_response_done(c);
    }
  } else if (c && m->json) {
    if (st->mode == STREAM_PENDING) sse_start(st);
    buf out = BUF_INIT;
    buf_puts(&out, "data: ");
    buf_append(&out, m->json, m->len);
    buf_puts(&out, "\n\n");
    sse_write(st, out.data, out.len);
    buf_free(&out);
    if (m->final) stream_detach(st);
  }
  if (m->final) stream_maybe_free(st);
}

/* A call that ended without an answer (cancelled): its exchange still
 * ends. */
static void a2a_call_ended(session *s, call *cl) {
  (void)s;
  http_stream *st = cl->transport_data;
  if (!st || st->complete) return;
  st->complete = true;
  if (st->conn) {
    if (st->mode == STREAM_PENDING) sse_start(st);
    stream_detach(st);
  }
  stream_maybe_free(st);
}

/* A2A-Version; Host for the card's URL; and, for the card's security
 * schemes, the server's OAuth settings under names no request header has
 * (":issuer", ":scopes"; the first issuer only). */
static const char *a2a_request_header(const http_stream *st, const char *name) {
  http_conn *c = st ? st->conn : NULL;
  if (!c) return NULL;
  const auth_config *auth = &c->server->opts.auth;
  if (name[0] == ':') { /* what the server asks of callers (no header name starts so) */
    if (strcmp(name, ":issuer") == 0)
      return auth->ops && auth->authorization_server_count ? auth->authorization_servers[0] : NULL;
    if (strcmp(name, ":scopes") == 0) return auth->ops ? auth->scopes : NULL;
    if (strcmp(name, ":bearer") == 0) return c->server->opts.bearer_token ? "1" : NULL;
  } else if (strcmp(name, "host") == 0) {
    return c->host;
  }
  return conn_mcp_header(c, name);
}

static void a2a_stream_closed(http_stream *st) { (void)st; }
static bool a2a_sweep_session(http_session *hs) {
  (void)hs;
  return false;
}

static const http_session_kind A2A_KIND = {
    .send = a2a_send,
    .call_ended = a2a_call_ended,
    .request_header = a2a_request_header,
    .stream_closed = a2a_stream_closed,
    .sweep = a2a_sweep_session,
};

/* ---- The family's life ------------------------------------------------- */

static void a2a_server_start(http_server *h) {
  http_session *hs = calloc(1, sizeof *hs);
  hs->server = h;
  hs->kind = &A2A_KIND;
  snprintf(hs->id, sizeof hs->id, "a2a");
  hs->session = session_new(h->srv, &HTTP_SESSION_OPS, hs, "a2a");
  hs->session->sessionless = true; /* many callers: a request id is unique only in its exchange */
  hs->session->foreign = true;
  a2a_server *a = calloc(1, sizeof *a);
  a->h = h;
  a->hs = hs;
  a->next = servers;
  servers = a;
}

static void a2a_server_stop(http_server *h) {
  for (a2a_server **p = &servers; *p; p = &(*p)->next) {
    a2a_server *a = *p;
    if (a->h != h) continue;
    *p = a->next;
    http_session *hs = a->hs;
    session_close(hs->session);
    while (hs->streams) {
      http_stream *st = hs->streams;
      st->complete = true;
      if (st->conn) stream_detach(st);
      stream_free(st);
    }
    session_free(hs->session);
    free(hs);
    free(a);
    return;
  }
}

/* The connection went: a JSON answer or an event stream has nowhere to go,
 * so the request is cancelled (its agent task goes on). */
static void a2a_conn_gone(http_conn *c) {
  http_stream *st = c->stream;
  if (!is_ours(st)) return;
  st->conn = NULL;
  c->stream = NULL;
  if (!st->complete) {
    st->held = true; /* the cancellation ends the call (a2a_call_ended): the stream is freed here, after */
    session_cancel_from(st->hs->session, st);
    st->held = false;
    st->complete = true;
  }
  stream_maybe_free(st);
}

static void a2a_sweep(http_server *h, uint64_t now) {
  http_session *hs = a2a_session(h);
  if (!hs) return;
  for (http_stream *st = hs->streams; st; st = st->next)
    if (st->conn && st->mode == STREAM_SSE && now - st->last_write_ms >= HTTP_SSE_KEEPALIVE_MS)
      sse_write(st, ": keepalive\n\n", 13);
}

/* The drain: event streams are clients waiting to hear, not work. */
static void a2a_server_drain(http_server *h) {
  http_session *hs = a2a_session(h);
  if (!hs) return;
  for (http_stream *st = hs->streams, *next; st; st = next) {
    next = st->next;
    if (st->conn && st->mode == STREAM_SSE) {
      st->held = true;
      session_cancel_from(hs->session, st);
      st->held = false;
      stream_maybe_free(st);
    }
  }
}

static bool a2a_probe(http_conn *c) {
  if (!is_ours(c->stream) || c->stream->mode != STREAM_SSE) return false;
  sse_write(c->stream, ": \n\n", 3);
  return true;
}

const http_route_family a2a_family = {
    .name = "a2a",
    .match = a2a_match,
    .handle = a2a_handle, /* every method: its preflight names A2A's headers */
    .server_start = a2a_server_start,
    .server_stop = a2a_server_stop,
    .server_drain = a2a_server_drain,
    .sweep = a2a_sweep,
    .conn_gone = a2a_conn_gone,
    .probe = a2a_probe,
};

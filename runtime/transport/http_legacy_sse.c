/* http_legacy_sse.c - MCP's 2024-11-05 HTTP+SSE transport, beside
 * Streamable HTTP on the same port: for the clients and bridges that still
 * speak only it (mcp-remote --transport sse-only, `claude mcp add
 * --transport sse`, the TypeScript SDK v1's SSEClientTransport).
 *
 * GET on the SSE path (default /sse) creates a session and keeps the
 * response open as its one stream; the first event, `endpoint`, names the
 * URL the client POSTs its messages to ("messages" beside the SSE path,
 * ?session_id=ID, the shape every official SDK's server uses). Each POST is
 * answered 202 at once, and everything the session says (answers,
 * notifications, requests to the client) goes down the stream as `event:
 * message`, in order. Closing the stream ends the session as a Streamable
 * HTTP DELETE does.
 *
 * It is an ordinary http_session (hs->legacy) whose every message goes to
 * its standalone stream (no. 0): the session machinery, the connection
 * limits, the buffer budget (a client that does not read its stream is
 * dropped at its share), keep-alive comments, Host/Origin/CORS checks,
 * OAuth and the hand-over to the owner worker under --workers (the query's
 * session_id becomes the request's session id) are Streamable HTTP's: its
 * routes are an endpoint family (legacy_sse_family, see http_route.h),
 * and its sessions a kind of session (LEGACY_SESSION, see http.h), so that
 * the connection and the session machinery call it only through those.
 * No event ids and no replay: the 2024-11-05 transport has no resumption. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "transport/http.h"
#include "transport/http_route.h"
#include "transport/http_util.h"

/* The messages path: "messages" in the SSE path's folder ("/sse" ->
 * "/messages", "/api/sse" -> "/api/messages"). */
static void messages_path(const http_server *h, char *out, size_t n) {
  const char *sse = h->opts.sse_path;
  const char *slash = strrchr(sse, '/');
  size_t dir = slash ? (size_t)(slash - sse) : 0;
  /* Copied, not printed: every request that is not for /sse asks
   * (legacy_sse_match). out has room for the SSE path and more. */
  if (dir + sizeof "/messages" > n) dir = n - sizeof "/messages";
  memcpy(out, sse, dir);
  memcpy(out + dir, "/messages", sizeof "/messages");
}

typedef enum legacy_sse_route {
  LEGACY_SSE_NONE,     /* not one of its paths (or the transport is off) */
  LEGACY_SSE_STREAM,   /* the path a GET opens a session's stream on */
  LEGACY_SSE_MESSAGES, /* the path its POSTs go to (?session_id=ID) */
} legacy_sse_route;

static const http_session_kind LEGACY_SESSION;

static int legacy_sse_match(const http_conn *c, unsigned *rules) {
  (void)rules;
  const http_server *h = c->server;
  if (!h->opts.sse_path[0] || !c->url.data) return LEGACY_SSE_NONE;
  if (http_route_path_is(c, h->opts.sse_path)) return LEGACY_SSE_STREAM;
  char messages[sizeof h->opts.sse_path + 16];
  messages_path(h, messages, sizeof messages);
  return http_route_path_is(c, messages) ? LEGACY_SSE_MESSAGES : LEGACY_SSE_NONE;
}

/* The value of a query parameter (raw: session ids need no decoding), or
 * false. */
static bool query_param(const char *url, const char *name, char *out, size_t n) {
  const char *q = strchr(url, '?');
  size_t name_len = strlen(name);
  while (q) {
    q++;
    size_t len = strcspn(q, "&#");
    if (len > name_len && strncmp(q, name, name_len) == 0 && q[name_len] == '=') {
      size_t value_len = len - name_len - 1;
      if (value_len == 0 || value_len >= n) return false;
      memcpy(out, q + name_len + 1, value_len);
      out[value_len] = '\0';
      return true;
    }
    q = q[len] == '&' ? q + len : NULL;
  }
  return false;
}

/* Headers read: a POST to the messages path names its session in the
 * query; it becomes c->session_id, so that every check (and the hand-over
 * to the owner worker) treats it as a Streamable HTTP session id. */
static void take_session_id(http_conn *c, int route) {
  if (c->session_id || c->parser.method != HTTP_POST || route != LEGACY_SSE_MESSAGES) return;
  char id[HTTP_SESSION_ID_BYTES];
  /* session_id is what our endpoint event says (and the Python SDK);
   * sessionId is the TypeScript SDK v1 server's spelling. */
  if (query_param(c->url.data, "session_id", id, sizeof id) || query_param(c->url.data, "sessionId", id, sizeof id))
    c->session_id = strdup(id);
}

/* GET on the SSE path: a new session, its stream, the endpoint event. */
static void open_stream(http_conn *c) {
  http_server *h = c->server;
  if (h->session_count >= h->opts.max_sessions) {
    conn_send_error(c, 503, -32000, "Service Unavailable: too many sessions", "Retry-After: 5\r\n");
    return;
  }
  http_session *hs = http_session_create(h);
  if (!hs) {
    conn_send_error(c, 503, -32000, "Service Unavailable: no randomness for a session id", NULL);
    return;
  }
  /* Registered now, not at initialize: the client's first POST (the
   * initialize) names it. */
  hs->legacy = true;
  hs->kind = &LEGACY_SESSION;
  hs->registered = true;
  strmap_set(&h->sessions_by_id, hs->id, hs);
  http_stream *st = stream_new(hs, c, NULL, true);
  c->state = CONN_RESPONDING;
  sse_start(st);
  char messages[sizeof h->opts.sse_path + 16];
  messages_path(h, messages, sizeof messages);
  buf event = BUF_INIT;
  buf_printf(&event, "event: endpoint\ndata: %s?session_id=%s\n\n", messages, hs->id);
  sse_write(st, event.data, event.len);
  buf_free(&event);
  log_write(LOG_DEBUG, "%s: HTTP+SSE stream opened on http#%u", hs->session->name, c->id);
}

/* A POST's origin: the headers its calls may ask for (ctx:_header), as
 * http_conn.mcp_headers keeps them. */
static void keep_headers(http_stream *post, const http_conn *c) {
  if (c->protocol_version) {
    buf_append(&post->legacy_headers, "mcp-protocol-version", sizeof "mcp-protocol-version");
    buf_append(&post->legacy_headers, c->protocol_version, strlen(c->protocol_version) + 1);
  }
  if (c->mcp_headers.len) buf_append(&post->legacy_headers, c->mcp_headers.data, c->mcp_headers.len);
}

static const char *request_header(const http_stream *post, const char *name) {
  const char *p = post->legacy_headers.data, *end = p + post->legacy_headers.len;
  while (p && p < end) {
    const char *value = p + strlen(p) + 1;
    if (strcmp(p, name) == 0) return value;
    p = value + strlen(value) + 1;
  }
  return NULL;
}

/* A POST's origin lives while calls it brought are in flight. */
static void post_release(http_stream *post) {
  if (!post || post->no == 0 || post->held || post->conn) return;
  if (post->hs->session->state == SESSION_CLOSED) return; /* freed with the session */
  if (!session_has_calls_from(post->hs->session, post)) stream_free(post);
}

static void call_ended(session *s, call *cl) {
  /* A batch's calls end before its answer, which still names the origin
   * (send_message releases it then). */
  if (cl->batch || s->state == SESSION_CLOSED) return;
  http_stream *post = cl->transport_data;
  cl->transport_data = NULL; /* it is going: it no longer counts as the POST's */
  post_release(post);
}

/* POST on the messages path: the message goes to the session, 202. */
static void post_message(http_conn *c) {
  if (!c->session_id) {
    conn_send_error(c, 400, -32600, "Bad Request: the session_id query parameter is required", NULL);
    return;
  }
  if (!http_is_json(c->content_type)) {
    conn_send_error(c, 415, -32000, "Unsupported Media Type: Content-Type must be application/json", NULL);
    return;
  }
  http_session *hs = streamable_lookup_session(c, true);
  if (!hs) return;
  http_stream *st = stream_find(hs, 0);
  if (!st || !st->conn || hs->session->state == SESSION_CLOSED) { /* its stream went: the session is over */
    conn_send_error(c, 404, -32001, "Session not found", NULL);
    return;
  }
  /* Unreadable JSON has no stream to be answered on in a useful way: the
   * POST itself says so, as Streamable HTTP does. */
  json_doc *doc = json_parse(c->body.data ? c->body.data : "", c->body.len, MAX_JSON_DEPTH, NULL);
  if (!doc) {
    conn_send_error(c, 400, JSONRPC_PARSE_ERROR, "Parse error: the body is not valid JSON", NULL);
    return;
  }
  json_doc_free(doc);
  c->state = CONN_RESPONDING;
  /* The messages' origin is the POST's own (not the stream's): its calls
   * run as the POST's token says (scopes, expiry, ctx.auth) and see its
   * headers; their answers still go down the stream (send_message). */
  http_stream *post = stream_new(hs, c, NULL, false);
  keep_headers(post, c);
  post->held = true;
  session_receive(hs->session, c->body.data ? c->body.data : "", c->body.len, post);
  post->held = false;
  bool answered = !post->conn; /* refused for its scopes (a 403), or the connection went */
  if (post->conn) {
    post->conn = NULL;
    c->stream = NULL;
  }
  post_release(post);
  if (answered || c->closing) return;
  conn_send_response(c, 202, NULL, "text/plain", "Accepted", 8);
  conn_response_done(c);
}

/* A request on one of its paths (checks and auth already passed). */
static void legacy_sse_handle(http_conn *c, int route) {
  if (c->parser.method == HTTP_OPTIONS) {
    streamable_answer_preflight(c);
  } else if (route == LEGACY_SSE_STREAM && c->parser.method == HTTP_GET) {
    open_stream(c);
  } else if (route == LEGACY_SSE_MESSAGES && c->parser.method == HTTP_POST) {
    post_message(c);
  } else {
    conn_send_error(c, 405, -32000,
                    route == LEGACY_SSE_STREAM ? "Method Not Allowed: GET opens the stream"
                                               : "Method Not Allowed: POST the messages",
                    route == LEGACY_SSE_STREAM ? "Allow: GET, OPTIONS\r\n" : "Allow: POST, OPTIONS\r\n");
  }
}

/* transport_ops.send for a legacy session: everything down its stream. */
static void send_message(http_session *hs, const session_message *m) {
  hs->last_active_ms = now_ms(hs->server);
  /* The call is answered: it no longer refers to the stream (as in
   * http_send). */
  if (m->final && m->related) m->related->transport_data = NULL;
  http_stream *post = m->origin;
  if (m->final && m->http_status == 403 && m->required_scopes && post && post->conn && http_auth_on(hs->server)) {
    /* Refused for its scopes while its POST is still open: the POST says
     * so, with the step-up challenge, as Streamable HTTP does. */
    http_conn *c = post->conn;
    buf headers = BUF_INIT;
    http_auth_scope_challenge(c, &headers, m->required_scopes);
    conn_send_response(c, 403, headers.data, "application/json", m->json, m->len);
    buf_free(&headers);
    post->conn = NULL;
    c->stream = NULL;
    conn_response_done(c);
    post_release(post);
    return;
  }
  if (m->final) post_release(post);
  if (!m->json) return; /* a batch with nothing to answer */
  http_stream *st = stream_find(hs, 0);
  if (!st || !st->conn) return; /* the stream went: the session is ending */
  buf event = BUF_INIT;
  buf_puts(&event, "event: message\ndata: ");
  buf_append(&event, m->json, m->len);
  buf_puts(&event, "\n\n");
  sse_write(st, event.data, event.len);
  buf_free(&event);
}

/* Its stream's connection went: cancel the session's calls now (the
 * session is destroyed by the next sweep, where that is safe). */
static void stream_closed(http_stream *st) {
  log_write(LOG_DEBUG, "%s: HTTP+SSE stream closed: the session ends", st->hs->session->name);
  /* Cancellations (each call's origin is its POST's), which are allowed
   * even under a computing handler; the session itself is freed by the
   * sweep, never from inside one. */
  session *s = st->hs->session;
  while (s->calls) session_cancel_from(s, s->calls->transport_data);
}

/* The once-a-second sweep: destroys a session whose stream has gone, and,
 * draining, ends the stream of one with no call left. */
static bool sweep(http_session *hs) {
  http_stream *st = stream_find(hs, 0);
  bool over = !st || !st->conn;
  if (!over && hs->server->draining && !hs->session->calls) {
    /* Draining: its calls are answered; ending the stream (its connection
     * closes after the last byte) sends the client elsewhere. */
    stream_detach(st);
    over = true;
  }
  if (over) http_session_destroy(hs);
  return over;
}

static bool legacy_sse_urgent(http_conn *c, int route) {
  /* A legacy session is acted on only by a POST on the messages path. */
  return route == LEGACY_SSE_MESSAGES && c->parser.method == HTTP_POST && streamable_urgent(c, true);
}

static bool legacy_sse_drain_admits(http_conn *c, int route) {
  (void)route;
  return streamable_drain_admits(c);
}

static const http_session_kind LEGACY_SESSION = {
    .send = send_message,
    .call_ended = call_ended,
    .request_header = request_header,
    .stream_closed = stream_closed,
    .sweep = sweep,
};

const http_route_family legacy_sse_family = {
    .name = "legacy-http-sse",
    .match = legacy_sse_match,
    .handle = legacy_sse_handle,
    .headers_read = take_session_id,
    .urgent = legacy_sse_urgent,
    .drain_admits = legacy_sse_drain_admits,
};

/* http_streamable.c - Streamable HTTP's rules on the MCP endpoint: POST,
 * GET and DELETE, session ids, versions, and the HTTP state of each
 * session. An endpoint family (streamable_family, see http_route.h); the
 * sessions are also legacy HTTP+SSE's (http_legacy_sse.c), which calls
 * down into them. See http.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "transport/http.h"
#include "transport/http_route.h"
#include "transport/http_util.h"

/* ---- Sessions -------------------------------------------------------- */

http_session *http_session_create(http_server *h) {
  http_session *hs = calloc(1, sizeof *hs);
  hs->server = h;
  unsigned char random[16];
  if (uv_random(NULL, NULL, random, sizeof random, 0, NULL) != 0) {
    free(hs);
    return NULL;
  }
  /* Under --workers (or --node) the id says where the session lives,
   * "[NODE.]wK-" before the random part, so that the worker reading a
   * request can hand it to the owner, and a proxy can route by it. */
  size_t at = 0;
  const http_options *o = &h->opts;
  if (o->node[0]) at += (size_t)snprintf(hs->id + at, sizeof hs->id - at, "%s.", o->node);
  if (o->node[0] || o->worker_index)
    at += (size_t)snprintf(hs->id + at, sizeof hs->id - at, "w%d-", o->worker_index ? o->worker_index : 1);
  for (int i = 0; i < 16; i++) snprintf(hs->id + at + 2 * i, 3, "%02x", random[i]);
  char name[32];
  snprintf(name, sizeof name, "http#s%u", ++h->next_session_name);
  hs->session = session_new(h->srv, &HTTP_SESSION_OPS, hs, name);
  hs->last_active_ms = now_ms(h);
  hs->next = h->sessions;
  if (hs->next) hs->next->prev = hs;
  h->sessions = hs;
  h->session_count++;
  return hs;
}

/* The sessionless session (created with the server, destroyed with it). */
static void stateless_new(http_server *h) {
  http_session *hs = calloc(1, sizeof *hs);
  hs->server = h;
  hs->stateless = true;
  hs->session = session_new(h->srv, &HTTP_SESSION_OPS, hs, "http-stateless");
  hs->session->sessionless = true;
  h->stateless = hs;
}

/* End a session: cancel its calls, end its streams, forget it. */
void http_session_destroy(http_session *hs) {
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
        conn_send_error(c, 404, -32001, "Session not found", NULL);
      } else {
        stream_detach(st);
      }
    }
    stream_free(st);
  }
  replay_clear(hs);
  if (hs->registered) strmap_remove(&h->sessions_by_id, hs->id);
  if (hs->stateless) {
    h->stateless = NULL;
  } else {
    if (hs->prev) hs->prev->next = hs->next;
    else h->sessions = hs->next;
    if (hs->next) hs->next->prev = hs->prev;
    h->session_count--;
  }
  session_free(hs->session);
  free(hs);
}

static const protocol_version *header_version(http_conn *c, bool *bad) {
  *bad = false;
  if (!c->protocol_version) return protocol_http_default();
  const protocol_version *v = protocol_find(c->protocol_version, strlen(c->protocol_version));
  if (!v) *bad = true;
  return v;
}

/* Does a request without a session id belong to the sessionless
 * (2026-07-28) era? Yes when its MCP-Protocol-Version header names a
 * modern version or one we do not know (the core answers -32022), or,
 * without the header, when its body names a version in _meta. A legacy
 * header keeps it in the initialize era. */
static bool is_sessionless(http_conn *c) {
  if (c->protocol_version) {
    const protocol_version *v = protocol_find(c->protocol_version, strlen(c->protocol_version));
    return !v || v->era == PROTOCOL_ERA_MODERN;
  }
  json_doc *doc = json_parse(c->body.data ? c->body.data : "", c->body.len, MAX_JSON_DEPTH, NULL);
  if (!doc) return false;
  const json_value *meta = json_object_get(json_object_get(json_doc_root(doc), "params"), "_meta");
  bool modern = json_object_get(meta, MCP_META_PROTOCOL_VERSION) != NULL;
  json_doc_free(doc);
  return modern;
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

/* The session the request names, if it may act on it, or NULL: the
 * rules of streamable_lookup_session, answering nothing. */
static http_session *session_of(http_conn *c, bool legacy) {
  http_session *hs = c->session_id ? strmap_get(&c->server->sessions_by_id, c->session_id) : NULL;
  /* A legacy session is its initializer's: to anyone else it does not
   * exist (the same 404, so that ids cannot be probed). */
  if (hs && hs->legacy != legacy) hs = NULL; /* each transport's ids are its own */
  /* A legacy HTTP+SSE session is its stream opener's from the start. */
  http_stream *opener = hs && hs->legacy && !hs->session->owner ? stream_find(hs, 0) : NULL;
  const auth_identity *owner = opener ? opener->identity : NULL;
  if (hs && !auth_same_principal(owner ? owner : hs->session->owner, c->identity)) hs = NULL;
  return hs;
}

http_session *streamable_lookup_session(http_conn *c, bool legacy) {
  if (!c->session_id) {
    conn_send_error(c, 400, -32600, "Bad Request: the Mcp-Session-Id header is required", NULL);
    return NULL;
  }
  http_session *hs = session_of(c, legacy);
  if (!hs) {
    conn_send_error(c, 404, -32001, "Session not found", NULL);
    return NULL;
  }
  hs->last_active_ms = now_ms(c->server);
  return hs;
}

static void handle_post(http_conn *c) {
  http_server *h = c->server;
  if (!http_accepts(c->accept, "application/json") || !http_accepts(c->accept, "text/event-stream")) {
    conn_send_error(c, 406, -32000, "Not Acceptable: Accept must allow application/json and text/event-stream", NULL);
    return;
  }
  if (!http_is_json(c->content_type)) {
    conn_send_error(c, 415, -32000, "Unsupported Media Type: Content-Type must be application/json", NULL);
    return;
  }
  if (!c->session_id && is_sessionless(c)) {
    /* Any request on any connection; the core checks the headers against
     * the body and answers errors with the request's id. */
    http_session *hs = h->stateless;
    const protocol_version *v = c->protocol_version ? protocol_find(c->protocol_version, strlen(c->protocol_version)) : NULL;
    http_stream *st = stream_new(hs, c, v, false);
    st->held = true;
    c->state = CONN_RESPONDING;
    session_receive(hs->session, c->body.data ? c->body.data : "", c->body.len, st);
    st->held = false;
    if (st->conn && !st->complete && st->mode == STREAM_PENDING && !session_has_calls_from(hs->session, st))
      stream_accept(st);
    stream_maybe_free(st);
    return;
  }
  bool bad_version;
  const protocol_version *v = header_version(c, &bad_version);
  if (bad_version) {
    conn_send_error(c, 400, -32600, "Bad Request: unsupported MCP-Protocol-Version", NULL);
    return;
  }
  http_session *hs;
  if (!c->session_id) {
    int init = body_is_initialize(c);
    if (init < 0) {
      conn_send_error(c, 400, JSONRPC_PARSE_ERROR, "Parse error: the body is not valid JSON", NULL);
      return;
    }
    if (!init) {
      conn_send_error(c, 400, -32600, "Bad Request: the Mcp-Session-Id header is required", NULL);
      return;
    }
    if (h->session_count >= h->opts.max_sessions) {
      conn_send_error(c, 503, -32000, "Service Unavailable: too many sessions", "Retry-After: 5\r\n");
      return;
    }
    hs = http_session_create(h);
    if (!hs) {
      conn_send_error(c, 503, -32000, "Service Unavailable: no randomness for a session id", NULL);
      return;
    }
  } else if (!(hs = streamable_lookup_session(c, false))) {
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
      http_session_destroy(hs);
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
    conn_send_error(c, 406, -32000, "Not Acceptable: Accept must allow text/event-stream", NULL);
    return;
  }
  bool bad_version;
  const protocol_version *v = header_version(c, &bad_version);
  if (bad_version) {
    conn_send_error(c, 400, -32600, "Bad Request: unsupported MCP-Protocol-Version", NULL);
    return;
  }
  http_session *hs = streamable_lookup_session(c, false);
  if (!hs) return;
  http_stream *st;
  uint64_t after = 0;
  if (c->last_event_id) {
    unsigned long no;
    if (!parse_event_id(c->last_event_id, &no, &after) || !(st = stream_find(hs, no))) {
      conn_send_error(c, 400, -32600, "Bad Request: Last-Event-ID names no stream this session still has", NULL);
      return;
    }
    if (st->conn) stream_detach(st); /* the newer connection takes the stream over */
  } else {
    st = stream_find(hs, 0);
    if (st && st->conn) {
      conn_send_error(c, 409, -32000, "Conflict: this session already has an open GET stream", NULL);
      return;
    }
    if (!st) st = stream_new(hs, NULL, v, true);
  }
  if (!st->identity) st->identity = auth_identity_ref(c->identity);
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
  http_session *hs = streamable_lookup_session(c, false);
  if (!hs) return;
  log_write(LOG_DEBUG, "%s: deleted by the client", hs->session->name);
  http_session_destroy(hs);
  conn_send_response(c, 200, NULL, NULL, NULL, 0);
  conn_response_done(c);
}

bool streamable_urgent(http_conn *c, bool legacy) {
  /* Only what the request would be allowed when handled: a session of its
   * transport, its owner's; with OAuth, nothing before the token is
   * checked. */
  if (http_auth_on(c->server)) return false;
  http_session *hs = session_of(c, legacy);
  if (hs && c->parser.method == HTTP_POST && http_is_json(c->content_type) &&
      session_receive_urgent(hs->session, c->body.data ? c->body.data : "", c->body.len)) {
    session_note_received(hs->session, c->body.data ? c->body.data : "", c->body.len);
    conn_send_response(c, 202, NULL, NULL, NULL, 0);
    conn_response_done(c);
    return true;
  }
  if (hs && !legacy && c->parser.method == HTTP_DELETE)
    session_close(hs->session); /* destroyed when the request is handled */
  return false;
}

static bool is_request(const json_value *v) {
  return v && v->type == JSON_OBJECT && json_object_get(v, "method") && json_object_get(v, "id");
}

/* Does the body carry a request (or is it unreadable)? Notifications and
 * responses alone do not start work. */
static bool body_has_request(http_conn *c) {
  json_doc *doc = json_parse(c->body.data ? c->body.data : "", c->body.len, MAX_JSON_DEPTH, NULL);
  if (!doc) return true;
  const json_value *root = json_doc_root(doc);
  bool has = root->type != JSON_ARRAY && root->type != JSON_OBJECT;
  if (root->type == JSON_OBJECT) has = is_request(root);
  for (uint32_t i = 0; root->type == JSON_ARRAY && i < root->len && !has; i++) has = is_request(&root->u.items[i]);
  json_doc_free(doc);
  return has;
}

/* While the server drains (http_drain): may this request go on? Only what
 * serves calls already in flight: a POST of notifications and responses
 * (a cancellation, the answer to the elicitation a call waits for), a
 * DELETE (it ends work), and a GET resuming the stream of a request with
 * Last-Event-ID (not the standalone stream, "0-..."). A new request would
 * be cut short by the stop: the client is better off elsewhere. */
bool streamable_drain_admits(http_conn *c) {
  switch (c->parser.method) {
    case HTTP_POST: return !body_has_request(c);
    case HTTP_DELETE: return true;
    case HTTP_GET: return c->last_event_id && strncmp(c->last_event_id, "0-", 2) != 0;
    default: return false;
  }
}

/* A CORS preflight (its Origin was allowed, or it would be a 403): what a
 * page's real request may use. Every header a client of ours sends, the
 * W3C trace context, and the Mcp-Param-* headers the tools declare (asked
 * of the app now: a reload may have changed them). */
void streamable_answer_preflight(http_conn *c) {
  server *srv = c->server->srv;
  app_description d;
  memset(&d, 0, sizeof d);
  if (srv->app && srv->app->describe) srv->app->describe(srv->app_data, &d);
  buf headers = BUF_INIT;
  buf_puts(&headers, "Allow: GET, POST, DELETE, OPTIONS\r\n"
                     "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"
                     "Access-Control-Allow-Headers: Content-Type, Accept, Authorization, Mcp-Session-Id, "
                     "MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, traceparent, tracestate");
  if (d.param_headers && *d.param_headers) buf_printf(&headers, ", %s", d.param_headers);
  buf_puts(&headers, "\r\nAccess-Control-Max-Age: 600\r\n");
  conn_send_response(c, 204, headers.data, NULL, NULL, 0);
  buf_free(&headers);
  conn_response_done(c);
}

/* ---- The family ------------------------------------------------------ */

static int streamable_match(const http_conn *c, unsigned *rules) {
  (void)rules;
  return http_route_path_is(c, c->server->opts.path);
}

static void streamable_handle(http_conn *c, int route) {
  (void)route;
  switch (c->parser.method) {
    case HTTP_POST: handle_post(c); break;
    case HTTP_GET: handle_get(c); break;
    case HTTP_DELETE: handle_delete(c); break;
    case HTTP_OPTIONS: streamable_answer_preflight(c); break;
    default:
      conn_send_error(c, 405, -32000, "Method Not Allowed: use POST, GET or DELETE",
                      "Allow: GET, POST, DELETE, OPTIONS\r\n");
  }
}

static bool streamable_urgent_route(http_conn *c, int route) {
  (void)route;
  return streamable_urgent(c, false);
}

static bool streamable_drain_admits_route(http_conn *c, int route) {
  (void)route;
  return streamable_drain_admits(c);
}

static void sessions_stop(http_server *h) {
  while (h->sessions) http_session_destroy(h->sessions);
  if (h->stateless) http_session_destroy(h->stateless);
}

/* The standing streams are a client waiting to hear, not work: end them
 * now, cleanly (the chunked body ends), so that the client reconnects
 * elsewhere. Calls still running keep their own streams. */
static void sessions_drain(http_server *h) {
  for (http_session *hs = h->sessions; hs; hs = hs->next) {
    http_stream *st = stream_find(hs, 0);
    if (st && st->conn && !hs->legacy) stream_detach(st); /* legacy: its calls' answers go there */
  }
}

static void keep_alive(http_session *hs, uint64_t now) {
  for (http_stream *st = hs->streams, *next; st; st = next) {
    next = st->next;
    if (st->conn && st->mode == STREAM_SSE && now - st->last_write_ms >= HTTP_SSE_KEEPALIVE_MS)
      sse_write(st, ": keepalive\n\n", 13);
  }
}

/* Keep SSE streams alive, end idle sessions. */
static void sessions_sweep(http_server *h, uint64_t now) {
  if (h->stateless) keep_alive(h->stateless, now);
  for (http_session *hs = h->sessions, *next; hs; hs = next) {
    next = hs->next;
    keep_alive(hs, now);
    if (hs->kind && hs->kind->sweep(hs)) continue;
    if (hs->session->calls) continue;
    bool attached = false;
    for (http_stream *st = hs->streams; st; st = st->next) attached |= st->conn != NULL;
    if (!attached && now - hs->last_active_ms > (uint64_t)h->opts.session_timeout_ms) {
      log_write(LOG_DEBUG, "%s: expired after %d s idle", hs->session->name, h->opts.session_timeout_ms / 1000);
      http_session_destroy(hs);
    }
  }
}

/* The connection is going: its response stream, if any, has nowhere to go. */
static void sessions_conn_gone(http_conn *c) {
  http_stream *st = c->stream;
  if (!st) return;
  /* A stream open for longer than --session-timeout leaves its session
   * idle from now, not from when it was opened. */
  st->hs->last_active_ms = now_ms(c->server);
  st->conn = NULL;
  c->stream = NULL;
  if (st->hs->kind) {
    /* A legacy session's stream: the session ends. A POST's: its calls
     * are answered down that stream, and go on. */
    if (st->no == 0) st->hs->kind->stream_closed(st);
    return;
  }
  if ((st->mode == STREAM_PENDING || st->hs->stateless) && !st->complete) {
    /* A JSON answer has nowhere to go now: stop the work (a cancellation,
     * which is allowed under a computing handler). An SSE stream stays,
     * for the client to resume with Last-Event-ID, except a sessionless
     * one: in 2026-07-28 closing a request's stream cancels it. */
    session_cancel_from(st->hs->session, st);
    st->complete = true;
  }
  stream_maybe_free(st);
}

/* A client that half-closed during an SSE stream gets a comment. */
static bool sessions_probe(http_conn *c) {
  if (!c->stream || c->stream->mode != STREAM_SSE) return false;
  sse_write(c->stream, ": \n\n", 3);
  return true;
}

const http_route_family streamable_family = {
    .name = "streamable-http",
    .match = streamable_match,
    .handle = streamable_handle,
    .urgent = streamable_urgent_route,
    .drain_admits = streamable_drain_admits_route,
    .server_start = stateless_new,
    .server_stop = sessions_stop,
    .server_drain = sessions_drain,
    .sweep = sessions_sweep,
    .budget_drop = replay_drop_oldest,
    .conn_gone = sessions_conn_gone,
    .probe = sessions_probe,
};

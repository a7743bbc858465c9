/* http_ws.c - MCP over WebSockets, an endpoint family (http_route.h): a
 * GET of the WebSocket path (--ws-path; the MCP path by default) with
 * Upgrade: websocket and the "mcp" subprotocol is answered 101 and the
 * connection becomes a session of its own, like a stdio session on the
 * network: one JSON-RPC message (or batch, where the era has them) per
 * text frame, both ways, server-initiated requests and notifications
 * included. A 2025-11-25 client initializes once per connection; a
 * 2026-07-28 client may send its self-describing requests on it.
 *
 * The shared rules (Host, Origin, the bearer token or OAuth, the drain,
 * --max-connections) are the connection's, applied to the upgrade request
 * before handle. Framing is libwslay's (os/wslay.h): a message over
 * --max-message-bytes closes with 1009, a bad frame (unmasked, a
 * fragmented control frame) 1002, bad UTF-8 1007; binary frames carry no
 * MCP (1003). Pings keep an idle connection alive and find a dead one; a
 * drain closes with 1001 once the session's calls are answered; an
 * expired access token with 1008. A client that does not read is dropped
 * at its share of the buffer budget (conn_write). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/base64.h"
#include "core/log.h"
#include "os/crypto.h"
#include "os/wslay.h"
#include "transport/http.h"
#include "transport/http_route.h"

/* One WebSocket connection's session. Owner: its connection
 * (http_conn.upgraded_state), freed in conn_gone. */
typedef struct ws_conn {
  http_conn *conn;
  const os_wslay_api *w;
  wslay_event_context_ptr ctx;
  session *session;
  auth_identity *identity; /* who opened it (a reference), or NULL */
  /* The bytes wslay is reading (upgraded_input's), and how far. */
  const char *feed;
  size_t feed_len, fed;
  /* Messages read and not yet given to the session (a handler computes,
   * or they came in one read): size_t length, then the text, each. */
  buf inbox;
  /* What wslay_event_send produced in one flush (a frame's head and its
   * payload come in separate calls): written with one conn_write. */
  buf out;
  size_t inbox_start;   /* where the next one to deliver begins */
  size_t inbox_scanned; /* looked at for cancellations while a handler computed */
  uint64_t last_heard_ms, ping_sent_ms;
  bool draining;   /* http_drain: close with 1001 once no call is in flight */
  bool goodbye;    /* a close frame is queued or sent: nothing more goes out */
  bool delivering; /* deliver is on the stack */
} ws_conn;

enum { WS_ROUTE = 1 };
static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"; /* RFC 6455 1.3 */

static ws_conn *ws_of(const http_conn *c) { return c->upgraded ? c->upgraded_state : NULL; }

/* Is word one of the comma-separated tokens of list (case-insensitive)? */
static bool token_listed(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; p && *p;) {
    p += strspn(p, ", \t");
    size_t len = strcspn(p, ",");
    size_t t = len;
    while (t && (p[t - 1] == ' ' || p[t - 1] == '\t')) t--;
    if (t == n && strncasecmp(p, word, n) == 0) return true;
    p += len;
  }
  return false;
}

static int ws_match(const http_conn *c, unsigned *rules) {
  (void)rules;
  const http_options *o = &c->server->opts;
  if (c->parser.method != HTTP_GET || !c->upgrade || !token_listed(c->upgrade, "websocket")) return 0;
  return http_route_path_is(c, o->ws_path[0] ? o->ws_path : o->path) ? WS_ROUTE : 0;
}

/* ---- Going out --------------------------------------------------------- */

static void flush(ws_conn *ws) {
  if (ws->conn->closing || ws->conn->close_pending) return;
  if (ws->w->wslay_event_send(ws->ctx) != 0) ws->goodbye = true;
  if (ws->out.len) {
    conn_write(ws->conn, ws->out.data, ws->out.len); /* buffered, or the connection is dropped at its share */
    buf_clear(&ws->out);
    if (ws->out.cap > 64 * 1024) buf_free(&ws->out);
  }
  if (ws->w->wslay_event_get_close_sent(ws->ctx)) {
    /* Our close frame is out (an answer to theirs, or our own): shut down
     * once it is written; what the client still sends is read and dropped. */
    ws->goodbye = true;
    http_route_finish(ws->conn);
  }
}

/* Close the WebSocket with code and a reason (RFC 6455 7.4). */
static void goodbye(ws_conn *ws, uint16_t code, const char *reason) {
  if (ws->goodbye) return;
  log_write(LOG_DEBUG, "%s: closing the WebSocket (%u %s)", ws->session->name, code, reason);
  ws->w->wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason, strlen(reason));
  ws->goodbye = true;
  flush(ws);
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg) {
  (void)ctx, (void)flags;
  buf_append(&((ws_conn *)arg)->out, (const char *)data, len);
  return (ssize_t)len;
}

/* transport_ops.send: one message, one text frame. */
static void ws_send(session *s, const session_message *m) {
  ws_conn *ws = s->transport_data;
  if (ws->goodbye || ws->conn->closing || ws->conn->close_pending) return;
  struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)m->json, m->len};
  if (ws->w->wslay_event_queue_msg(ws->ctx, &msg) != 0) return;
  flush(ws);
}

/* A drained connection closes once its last call is answered: on the next
 * turn (never inside the core's send). */
static void ws_call_ended(session *s, call *cl) {
  (void)cl;
  ws_conn *ws = s->transport_data;
  if (ws->draining) conn_defer(ws->conn);
}

static auth_identity *ws_request_identity(session *s, void *origin) {
  (void)origin;
  return ((ws_conn *)s->transport_data)->identity;
}

/* What the session keeps from its client counts against the buffer budget
 * as for HTTP sessions. */
static bool ws_keep(session *s, size_t bytes) {
  ws_conn *ws = s->transport_data;
  http_server *h = ws->conn->server;
  if (h->buffered - h->replay_bytes + bytes > h->opts.buffer_bytes) return false;
  http_route_hold(ws->conn, (long)bytes);
  return true;
}

static void ws_release(session *s, size_t bytes) { http_route_hold(((ws_conn *)s->transport_data)->conn, -(long)bytes); }

static const transport_ops WS_OPS = {.send = ws_send,
                                     .call_ended = ws_call_ended,
                                     .request_identity = ws_request_identity,
                                     .keep = ws_keep,
                                     .release = ws_release};

/* ---- Coming in ------------------------------------------------------------ */

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *out, size_t len, int flags, void *arg) {
  (void)flags;
  ws_conn *ws = arg;
  size_t left = ws->feed_len - ws->fed;
  /* While messages wait for a computing handler, reading stops at the
   * connection's share: the rest stays in the socket's buffer. */
  if (!left || ws->inbox.len - ws->inbox_start > http_conn_share(ws->conn->server)) {
    ws->w->wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = left < len ? left : len;
  memcpy(out, ws->feed + ws->fed, n);
  ws->fed += n;
  return (ssize_t)n;
}

static void on_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user) {
  (void)ctx;
  ws_conn *ws = user;
  if (arg->opcode == WSLAY_TEXT_FRAME) {
    size_t n = arg->msg_length;
    buf_append(&ws->inbox, (const char *)&n, sizeof n);
    if (n) buf_append(&ws->inbox, (const char *)arg->msg, n); /* an empty message has no buffer */
    http_route_hold(ws->conn, (long)(sizeof n + n));
  } else if (arg->opcode == WSLAY_BINARY_FRAME) {
    goodbye(ws, WSLAY_CODE_UNSUPPORTED_DATA, "MCP messages are text frames");
  }
}

/* Give the session the messages read, in order; while a handler computes,
 * act only on cancellations (the rest waits for a later turn). */
static void deliver(ws_conn *ws) {
  http_conn *c = ws->conn;
  if (ws->delivering) return;
  ws->delivering = true;
  if (c->server->srv->nested_poll > 0) {
    while (ws->inbox_scanned < ws->inbox.len) {
      size_t n;
      memcpy(&n, ws->inbox.data + ws->inbox_scanned, sizeof n);
      session_receive_urgent(ws->session, ws->inbox.data + ws->inbox_scanned + sizeof n, n);
      ws->inbox_scanned += sizeof n + n;
    }
    conn_defer(c); /* on_later pumps again once the handler is done */
  } else {
    while (ws->inbox_start < ws->inbox.len && !c->closing && !c->close_pending && !ws->goodbye) {
      size_t n;
      memcpy(&n, ws->inbox.data + ws->inbox_start, sizeof n);
      char *text = ws->inbox.data + ws->inbox_start + sizeof n;
      ws->inbox_start += sizeof n + n;
      session_receive_in_place(ws->session, text, n, NULL);
    }
    if (!c->closing) {
      http_route_hold(c, -(long)ws->inbox.len);
      buf_clear(&ws->inbox);
      ws->inbox_start = ws->inbox_scanned = 0;
      if (ws->inbox.cap > 64 * 1024) buf_free(&ws->inbox);
    }
  }
  ws->delivering = false;
}

static size_t ws_input(http_conn *c, const char *data, size_t len) {
  ws_conn *ws = ws_of(c);
  if (!ws) return len;
  if (len) {
    ws->last_heard_ms = now_ms(c->server); /* anything, a pong included, says the peer is there */
    ws->ping_sent_ms = 0;
  }
  ws->feed = data;
  ws->feed_len = len;
  ws->fed = 0;
  if (!ws->goodbye && ws->w->wslay_event_want_read(ws->ctx)) {
    int rc = ws->w->wslay_event_recv(ws->ctx);
    if (rc == WSLAY_ERR_NOMEM) {
      conn_close(c);
      return len;
    }
    /* A frame wslay's frame layer refuses (a fragmented control frame):
     * wslay 1.1.1 has queued a close frame already, without a status
     * code (the peer reads 1005); else ours says 1002. */
    if (rc != 0) goodbye(ws, WSLAY_CODE_PROTOCOL_ERROR, "a malformed frame");
  }
  size_t used = ws->goodbye ? len : ws->fed;
  ws->feed = NULL;
  /* A close frame, a protocol error (1002), a message too big (1009) or
   * bad UTF-8 (1007): wslay queued the close frame and reads no more. */
  if (!ws->w->wslay_event_want_read(ws->ctx)) ws->goodbye = true;
  flush(ws);
  if (c->closing) return len;
  deliver(ws);
  if (ws->draining && !ws->session->calls && !c->closing) goodbye(ws, WSLAY_CODE_GOING_AWAY, "the server is shutting down");
  return ws->goodbye ? len : used;
}

/* ---- The upgrade ------------------------------------------------------------ */

static void ws_handle(http_conn *c, int route) {
  (void)route;
  http_server *h = c->server;
  if (!c->parser.upgrade) {
    conn_send_error(c, 400, -32600, "Bad Request: a WebSocket upgrade needs Connection: Upgrade", NULL);
    return;
  }
  if (!c->ws_version || strcmp(c->ws_version, "13") != 0) {
    conn_send_error(c, 426, -32600, "Upgrade Required: WebSocket version 13", "Sec-WebSocket-Version: 13\r\n");
    return;
  }
  unsigned char key[32];
  size_t key_len = 0, bad;
  if (!c->ws_key || strlen(c->ws_key) != 24 || !base64_decode(c->ws_key, 24, key, &key_len, &bad) || key_len != 16) {
    conn_send_error(c, 400, -32600, "Bad Request: Sec-WebSocket-Key must be 16 bytes in base64", NULL);
    return;
  }
  if (!c->ws_protocol || !token_listed(c->ws_protocol, "mcp")) {
    conn_send_error(c, 400, -32600, "Bad Request: MCP over WebSockets needs the subprotocol \"mcp\" (Sec-WebSocket-Protocol: mcp)",
                    NULL);
    return;
  }
  char why[240];
  const os_wslay_api *w = os_wslay(why, sizeof why);
  if (!w) {
    conn_send_error(c, 501, -32000, why, NULL);
    return;
  }
  ws_conn *ws = calloc(1, sizeof *ws);
  static const struct wslay_event_callbacks callbacks = {.recv_callback = on_recv,
                                                         .send_callback = on_send,
                                                         .on_msg_recv_callback = on_message};
  if (!ws || w->wslay_event_context_server_init(&ws->ctx, &callbacks, ws) != 0) {
    free(ws);
    conn_send_error(c, 503, -32000, "Service Unavailable: out of memory", NULL);
    return;
  }
  ws->w = w;
  ws->conn = c;
  w->wslay_event_config_set_max_recv_msg_length(ws->ctx, h->srv->opts.max_message_bytes);
  ws->identity = auth_identity_ref(c->identity);
  ws->last_heard_ms = now_ms(h);
  char name[32];
  snprintf(name, sizeof name, "ws#%u", c->id);
  ws->session = session_new(h->srv, &WS_OPS, ws, name);

  /* Sec-WebSocket-Accept: base64(SHA-1(key GUID)), RFC 6455 4.2.2. */
  char joined[24 + sizeof WS_GUID];
  memcpy(joined, c->ws_key, 24);
  memcpy(joined + 24, WS_GUID, sizeof WS_GUID);
  uint8_t digest[OS_SHA1_BYTES];
  os_sha1(joined, 24 + sizeof WS_GUID - 1, digest);
  char accept[32];
  base64_encode(digest, sizeof digest, accept);
  accept[base64_encoded_len(sizeof digest)] = '\0';
  buf out = BUF_INIT;
  buf_printf(&out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: mcp\r\n\r\n",
             accept);
  c->upgraded_state = ws;
  http_route_upgrade(c);
  conn_write(c, out.data, out.len);
  buf_free(&out);
  log_write(LOG_DEBUG, "%s: a WebSocket on http#%u", name, c->id);
}

/* ---- The connection's life --------------------------------------------------- */

static void ws_conn_gone(http_conn *c) {
  ws_conn *ws = ws_of(c);
  if (!ws) return;
  session_close(ws->session); /* its calls are cancelled: allowed under a computing handler */
  if (c->server->srv->nested_poll > 0 || ws->delivering) return; /* freed when the close is done (conn_close_now) */
  c->upgraded_state = NULL;
  http_route_hold(c, -(long)ws->inbox.len);
  buf_free(&ws->inbox);
  buf_free(&ws->out);
  session_free(ws->session);
  auth_identity_unref(ws->identity);
  ws->w->wslay_event_context_free(ws->ctx);
  free(ws);
}

/* http_drain: a WebSocket with no call in flight closes now (1001); one
 * with calls closes once they are answered (ws_call_ended). */
static void ws_conn_drain(http_conn *c) {
  ws_conn *ws = ws_of(c);
  if (!ws || ws->goodbye) return;
  ws->draining = true;
  if (!ws->session->calls) goodbye(ws, WSLAY_CODE_GOING_AWAY, "the server is shutting down");
}

/* Once a second: ping the quiet, drop the dead, end the expired. */
static void ws_sweep(http_server *h, uint64_t now) {
  time_t wall = time(NULL);
  for (http_conn *c = h->conns, *next; c; c = next) {
    next = c->next;
    ws_conn *ws = ws_of(c);
    if (!ws || c->closing || c->lingering || ws->goodbye) continue;
    if (ws->identity && ws->identity->expires_s && (int64_t)wall >= ws->identity->expires_s) {
      goodbye(ws, WSLAY_CODE_POLICY_VIOLATION, "the access token expired");
      continue;
    }
    if (ws->ping_sent_ms && now - ws->ping_sent_ms >= WS_PONG_TIMEOUT_MS) {
      log_write(LOG_INFO, "%s: no answer to a ping in %d s; closing the WebSocket", ws->session->name,
                WS_PONG_TIMEOUT_MS / 1000);
      conn_close(c);
    } else if (!ws->ping_sent_ms && now - ws->last_heard_ms >= WS_PING_INTERVAL_MS) {
      struct wslay_event_msg ping = {WSLAY_PING, (const uint8_t *)"luamcp", 6};
      if (ws->w->wslay_event_queue_msg(ws->ctx, &ping) == 0) {
        ws->ping_sent_ms = now;
        flush(ws);
      }
    }
  }
}

const http_route_family ws_family = {
    .name = "websocket",
    .match = ws_match,
    .methods = "GET",
    .handle = ws_handle,
    .conn_gone = ws_conn_gone,
    .conn_drain = ws_conn_drain,
    .sweep = ws_sweep,
    .upgraded_input = ws_input,
};

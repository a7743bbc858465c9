/*
 * client_ws.c - an MCP server reached over a WebSocket (ws://HOST[:PORT]/PATH),
 * as the TypeScript SDK's WebSocketClientTransport reaches one: the
 * subprotocol "mcp", one JSON-RPC message per text frame both ways. The
 * upgrade's response is read with http_parser and the frames with libwslay
 * (os/wslay.h); the socket is libuv's, on the client's loop. For wss://
 * libcurl connects and speaks TLS (CURLOPT_CONNECT_ONLY: Debian 12's
 * libcurl has no WebSocket support of its own), its socket watched on the
 * loop (os/sock_watch.h), and the same upgrade and frames go through it.
 */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/curl_lib.h"
#include "cli/client_conn.h"
#include "core/base64.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"
#include "os/sock_watch.h"
#include "os/wslay.h"

/* Owner: the client; freed in the close callback of the last of its
 * handles (the socket, the waiter's two). */
typedef struct ws_client {
  client_conn base;
  uv_tcp_t tcp;
  loop_waiter waiter;
  int open_handles;
  const os_wslay_api *w;
  wslay_event_context_ptr ctx;
  bool connected, connect_failed, upgraded, refused, closed;
  char key[32];       /* our Sec-WebSocket-Key */
  http_parser parser; /* the upgrade's response */
  buf field, accept;  /* a header's name as read; Sec-WebSocket-Accept */
  bool in_value;
  buf input;          /* bytes read and not yet given to wslay */
  size_t input_at;
  /* wss://: libcurl's TLS connection, its socket's watch, and what waits
   * to be sent on it. */
  const curl_api *curl;
  CURL *tls;
  os_sock_watch *watch;
  buf tls_out;
} ws_client;

static void on_handle_closed(uv_handle_t *h) {
  ws_client *c = h->data;
  if (--c->open_handles > 0) return;
  if (c->ctx) c->w->wslay_event_context_free(c->ctx);
  buf_free(&c->field);
  buf_free(&c->accept);
  buf_free(&c->input);
  buf_free(&c->tls_out);
  if (c->tls) c->curl->easy_cleanup(c->tls);
  client_conn_release(&c->base);
  free(c);
}

static void on_written(uv_write_t *req, int status) {
  (void)status; /* a broken connection shows as the read's end */
  free(req);
}

static void tls_flush(ws_client *c);

static void write_bytes(ws_client *c, const void *data, size_t len) {
  if (c->closed) return;
  if (c->tls) {
    buf_append(&c->tls_out, data, len);
    tls_flush(c);
    return;
  }
  uv_write_t *req = malloc(sizeof *req + len);
  memcpy(req + 1, data, len);
  uv_buf_t b = uv_buf_init((char *)(req + 1), (unsigned)len);
  if (uv_write(req, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) free(req);
}

/* ---- wslay's callbacks ----------------------------------------------------- */

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *out, size_t len, int flags, void *arg) {
  (void)flags;
  ws_client *c = arg;
  size_t left = c->input.len - c->input_at;
  if (!left) {
    c->w->wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = left < len ? left : len;
  memcpy(out, c->input.data + c->input_at, n);
  c->input_at += n;
  return (ssize_t)n;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg) {
  (void)ctx, (void)flags;
  write_bytes(arg, data, len);
  return (ssize_t)len;
}

static int on_genmask(wslay_event_context_ptr ctx, uint8_t *out, size_t len, void *arg) {
  (void)ctx, (void)arg;
  return os_random_bytes(out, len) ? 0 : -1;
}

static void on_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user) {
  (void)ctx;
  ws_client *c = user;
  if (arg->opcode == WSLAY_TEXT_FRAME) {
    client_conn_deliver(&c->base, (const char *)arg->msg, arg->msg_length);
  } else if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    client_conn_end(&c->base, "the server closed the WebSocket (%u)", arg->status_code);
  }
}

/* ---- The upgrade's response --------------------------------------------------- */

static int on_header_field(http_parser *p, const char *at, size_t n) {
  ws_client *c = p->data;
  if (c->in_value) buf_clear(&c->field); /* a new header begins */
  c->in_value = false;
  buf_append(&c->field, at, n);
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  ws_client *c = p->data;
  c->in_value = true;
  static const char name[] = "sec-websocket-accept";
  if (c->field.len == sizeof name - 1 && strncasecmp(c->field.data, name, sizeof name - 1) == 0)
    buf_append(&c->accept, at, n);
  return 0;
}

static int on_headers_complete(http_parser *p) {
  ws_client *c = p->data;
  char expected[64];
  uint8_t digest[OS_SHA1_BYTES];
  char joined[sizeof c->key + 40];
  snprintf(joined, sizeof joined, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", c->key);
  os_sha1(joined, strlen(joined), digest);
  base64_encode(digest, sizeof digest, expected);
  expected[base64_encoded_len(sizeof digest)] = '\0';
  if (p->status_code != 101) {
    client_conn_end(&c->base, "the server refused the WebSocket: HTTP %u", p->status_code);
    c->refused = true;
  } else if (c->accept.len != strlen(expected) || memcmp(c->accept.data, expected, c->accept.len) != 0) {
    client_conn_end(&c->base, "the server answered the WebSocket upgrade with a wrong Sec-WebSocket-Accept");
    c->refused = true;
  } else {
    c->upgraded = true;
  }
  return 1; /* no body: the rest is frames */
}

static const http_parser_settings RESPONSE = {.on_header_field = on_header_field,
                                              .on_header_value = on_header_value,
                                              .on_headers_complete = on_headers_complete};

/* ---- The socket ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void pump(ws_client *c) {
  if (!c->ctx || c->closed) return;
  c->w->wslay_event_recv(c->ctx);
  c->w->wslay_event_send(c->ctx);
  if (c->input_at == c->input.len) {
    buf_clear(&c->input);
    c->input_at = 0;
  }
}

static void stop_reading(ws_client *c) {
  if (c->tls) os_sock_watch_set(c->watch, 0);
  else uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Bytes from the server (n < 0: its end). */
static void got_bytes(ws_client *c, const char *data, ssize_t n) {
  if (n < 0) {
    client_conn_end(&c->base, "the server closed the connection");
    stop_reading(c);
    c->closed = true;
    return;
  }
  buf_append(&c->input, data, (size_t)n);
  if (!c->upgraded && !c->refused) {
    c->input_at += http_parser_execute(&c->parser, &RESPONSE, c->input.data + c->input_at, c->input.len - c->input_at);
    if (!c->upgraded && !c->refused && HTTP_PARSER_ERRNO(&c->parser) != HPE_OK &&
        HTTP_PARSER_ERRNO(&c->parser) != HPE_CB_headers_complete) {
      client_conn_end(&c->base, "the server's answer to the WebSocket upgrade is not HTTP");
      c->refused = true;
    }
    if (!c->upgraded) {
      if (c->refused) stop_reading(c);
      return;
    }
    /* http_parser stopped where the headers end: the rest is frames. */
  }
  pump(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  got_bytes(s->data, b->base, n);
  free(b->base);
}

/* ---- wss://: TLS by libcurl ------------------------------------------------------- */

static void tls_flush(ws_client *c) {
  while (c->tls_out.len) {
    size_t sent = 0;
    CURLcode rc = c->curl->easy_send(c->tls, c->tls_out.data, c->tls_out.len, &sent);
    if (rc == CURLE_AGAIN) break;
    if (rc != CURLE_OK) {
      client_conn_end(&c->base, "writing to the server: %s", c->curl->easy_strerror(rc));
      buf_clear(&c->tls_out);
      break;
    }
    buf_consume(&c->tls_out, sent);
  }
  if (c->watch && !c->closed) os_sock_watch_set(c->watch, UV_READABLE | (c->tls_out.len ? UV_WRITABLE : 0));
}

static void on_tls_ready(void *data, int status, int events) {
  ws_client *c = data;
  if (status < 0) {
    got_bytes(c, NULL, -1);
    return;
  }
  if (events & UV_WRITABLE) tls_flush(c);
  if (!(events & UV_READABLE)) return;
  /* Everything libcurl has, its TLS layer's buffered records included. */
  char in[16384];
  while (!c->closed) {
    size_t n = 0;
    CURLcode rc = c->curl->easy_recv(c->tls, in, sizeof in, &n);
    if (rc == CURLE_AGAIN) break;
    if (rc != CURLE_OK || n == 0) {
      got_bytes(c, NULL, -1);
      break;
    }
    got_bytes(c, in, (ssize_t)n);
  }
}

/* Connect and shake hands over TLS (blocking, as luamcp call may), then
 * watch the socket. false with the reason in err. */
static bool tls_connect(ws_client *c, const char *url, buf *err) {
  char why[300];
  c->curl = curl_lib_load("luamcp call --ws wss://", why, sizeof why);
  if (!c->curl) {
    buf_printf(err, "%s: %s", url, why);
    return false;
  }
  c->tls = c->curl->easy_init();
  if (!c->tls) {
    buf_printf(err, "%s: out of memory", url);
    return false;
  }
  char https[2100];
  snprintf(https, sizeof https, "https://%s", url + 6);
  c->curl->easy_setopt(c->tls, CURLOPT_URL, https);
  c->curl->easy_setopt(c->tls, CURLOPT_CONNECT_ONLY, 1L);
  c->curl->easy_setopt(c->tls, CURLOPT_CONNECTTIMEOUT_MS, (long)HTTP_CLIENT_CONNECT_TIMEOUT_MS);
  CURLcode rc = c->curl->easy_perform(c->tls);
  if (rc != CURLE_OK) {
    buf_printf(err, "%s: cannot connect: %s", url, c->curl->easy_strerror(rc));
    return false;
  }
  curl_socket_t sock = CURL_SOCKET_BAD;
  if (c->curl->easy_getinfo(c->tls, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK || sock == CURL_SOCKET_BAD ||
      !(c->watch = os_sock_watch_new(c->base.loop, (uv_os_sock_t)sock, on_tls_ready, c))) {
    buf_printf(err, "%s: cannot watch the connection's socket", url);
    return false;
  }
  c->connected = true;
  os_sock_watch_set(c->watch, UV_READABLE);
  return true;
}

static void on_connect(uv_connect_t *req, int status) {
  ws_client *c = req->data;
  free(req);
  if (status < 0) {
    client_conn_end(&c->base, "cannot connect: %s", uv_strerror(status));
    c->connect_failed = true;
    return;
  }
  c->connected = true;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- The connection's operations ---------------------------------------------------- */

static bool ws_send(client_conn *base, const char *json, size_t len, buf *err) {
  ws_client *c = (ws_client *)base;
  if (c->closed || !c->ctx) {
    buf_append_str(err, base->ended ? base->ended : "the WebSocket is closed");
    return false;
  }
  struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)json, len};
  if (c->w->wslay_event_queue_msg(c->ctx, &msg) != 0) {
    buf_append_str(err, "the WebSocket is closing");
    return false;
  }
  c->w->wslay_event_send(c->ctx);
  return true;
}

static bool ws_wait(client_conn *base, int timeout_ms) {
  ws_client *c = (ws_client *)base;
  return loop_waiter_turn(&c->waiter, timeout_ms) != 0 || base->inbox != NULL;
}

static void ws_close(client_conn *base) {
  ws_client *c = (ws_client *)base;
  if (c->ctx && !c->closed) {
    c->w->wslay_event_queue_close(c->ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
    c->w->wslay_event_send(c->ctx);
  }
  c->closed = true;
  if (c->watch) os_sock_watch_close(c->watch); /* before libcurl closes the socket (on_handle_closed) */
  c->watch = NULL;
  uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
  loop_waiter_close(&c->waiter, on_handle_closed);
  uv_run(base->loop, UV_RUN_NOWAIT);
}

static const client_conn_ops WS_OPS = {
    .send = ws_send,
    .wait = ws_wait,
    .close = ws_close,
};

/* ws://HOST[:PORT][/PATH]: its parts, or false. */
static bool parse_url(const char *url, char *host, size_t host_len, int *port, const char **path) {
  bool secure = strncasecmp(url, "wss://", 6) == 0;
  if (!secure && strncasecmp(url, "ws://", 5) != 0) return false;
  const char *h = url + (secure ? 6 : 5), *end = h + strcspn(h, "/?#");
  const char *colon = NULL;
  if (*h == '[') {
    const char *close = memchr(h, ']', (size_t)(end - h));
    if (!close) return false;
    if (close + 1 < end && close[1] == ':') colon = close + 1;
    if ((size_t)(close - h - 1) >= host_len) return false;
    memcpy(host, h + 1, (size_t)(close - h - 1));
    host[close - h - 1] = '\0';
  } else {
    colon = memchr(h, ':', (size_t)(end - h));
    size_t n = (size_t)((colon ? colon : end) - h);
    if (!n || n >= host_len) return false;
    memcpy(host, h, n);
    host[n] = '\0';
  }
  *port = secure ? 443 : 80;
  if (colon) {
    char *stop;
    long p = strtol(colon + 1, &stop, 10);
    if (stop != end || p < 1 || p > 65535) return false;
    *port = (int)p;
  }
  *path = *end == '/' ? end : "/";
  return true;
}

/* The upgrade is sent once connected, with headers ("Name: value\r\n"
 * lines, or NULL: an Authorization, say); open returns when it is answered. */
client_conn *client_ws_open(uv_loop_t *loop, const char *url, const char *headers, buf *err) {
  char host[256];
  int port;
  const char *path;
  if (!parse_url(url, host, sizeof host, &port, &path)) {
    buf_printf(err, "%s: not a WebSocket URL (ws:// or wss://HOST[:PORT]/PATH)", url);
    return NULL;
  }
  bool secure = strncasecmp(url, "wss://", 6) == 0;
  char why[240];
  const os_wslay_api *w = os_wslay(why, sizeof why);
  if (!w) {
    buf_append_str(err, why);
    return NULL;
  }
  ws_client *c = calloc(1, sizeof *c);
  c->base.ops = &WS_OPS;
  c->base.loop = loop;
  c->w = w;
  uv_tcp_init(loop, &c->tcp); /* wss: never connected, closed with the rest */
  c->tcp.data = c;
  loop_waiter_init(&c->waiter, loop, c);
  c->open_handles = 3;
  http_parser_init(&c->parser, HTTP_RESPONSE);
  c->parser.data = c;
  static const struct wslay_event_callbacks callbacks = {
      .recv_callback = on_recv, .send_callback = on_send, .genmask_callback = on_genmask, .on_msg_recv_callback = on_message};
  uint8_t nonce[16];
  bool ok = os_random_bytes(nonce, sizeof nonce) && w->wslay_event_context_client_init(&c->ctx, &callbacks, c) == 0;
  if (!ok) buf_printf(err, "%s: out of memory or randomness", url);
  if (ok) {
    base64_encode(nonce, sizeof nonce, c->key);
    c->key[base64_encoded_len(sizeof nonce)] = '\0';
    w->wslay_event_config_set_max_recv_msg_length(c->ctx, HTTP_CLIENT_MAX_BYTES);
  }
  uint64_t give_up = uv_hrtime() + (uint64_t)HTTP_CLIENT_CONNECT_TIMEOUT_MS * 1000000u;
  if (ok && secure) {
    ok = tls_connect(c, url, err);
  } else if (ok) {
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    uv_getaddrinfo_t gai;
    int rc = uv_getaddrinfo(loop, &gai, NULL, host, service, &hints);
    if (rc != 0) {
      buf_printf(err, "%s: cannot resolve %s: %s", url, host, uv_strerror(rc));
      ok = false;
    } else {
      uv_connect_t *req = malloc(sizeof *req);
      req->data = c;
      rc = uv_tcp_connect(req, &c->tcp, gai.addrinfo->ai_addr, on_connect);
      uv_freeaddrinfo(gai.addrinfo);
      if (rc != 0) {
        free(req);
        buf_printf(err, "%s: cannot connect: %s", url, uv_strerror(rc));
        ok = false;
      }
    }
    while (ok && !c->connected && !c->connect_failed && uv_hrtime() < give_up) ws_wait(&c->base, 50);
    if (ok && !c->connected) {
      buf_printf(err, "%s: %s", url, c->base.ended ? c->base.ended : "cannot connect: timed out");
      ok = false;
    }
  }
  if (ok) {
    buf req = BUF_INIT;
    buf_printf(&req, "GET %s HTTP/1.1\r\nHost: %s%s%s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n",
               path, strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port, c->key);
    if (headers) buf_append_str(&req, headers);
    buf_puts(&req, "\r\n");
    write_bytes(c, req.data, req.len);
    buf_free(&req);
    while (!c->upgraded && !c->refused && !c->closed && uv_hrtime() < give_up) ws_wait(&c->base, 50);
    ok = c->upgraded;
    if (!ok) buf_printf(err, "%s: %s", url, c->base.ended ? c->base.ended : "no answer to the WebSocket upgrade");
  }
  if (!ok) {
    c->closed = true;
    if (c->watch) os_sock_watch_close(c->watch);
    c->watch = NULL;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    loop_waiter_close(&c->waiter, on_handle_closed);
    uv_run(loop, UV_RUN_NOWAIT);
    return NULL;
  }
  return &c->base;
}

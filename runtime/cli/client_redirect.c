/*
 * client_redirect.c - the loopback listener an OAuth login waits on (RFC
 * 8252 7.3): the browser comes back to http://127.0.0.1:PORT/callback with
 * the authorization response in the query. Added to luamcp.client:
 *
 *   redirect_listen() -> listener | nil, why
 *     listens on 127.0.0.1, on a port the OS picks
 *   listener:port() -> the port
 *   listener:wait(timeout_ms) -> "/callback?..." | nil, "timeout" | "interrupted"
 *     the request target of the first GET /callback; the browser gets a
 *     page saying it may be closed. Other paths (a favicon) get 404.
 *   listener:close()  (also when collected): the port is given back
 *
 * The listener has a loop of its own, run only inside wait: between
 * waits nothing is accepted, and after close the port is free. Requests
 * are read with http_parser, as the server's are.
 */
#include "cli/client_redirect.h"

#include <http_parser.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/buf.h"

#define REDIRECT_LISTENER "luamcp.redirect_listener"
/* A request line and headers bigger than this is not a browser coming back. */
#define REDIRECT_MAX_REQUEST_BYTES (64 * 1024)
#define REDIRECT_TICK_MS 200

/* Whether the user pressed Ctrl-C (the client's own flag, handed in at
 * registration). */
static bool (*interrupted)(void);

static const char PAGE[] = "<!doctype html><meta charset=utf-8><title>luamcp</title>"
                           "<p>luamcp has the answer. You can close this window.</p>";

/* Owner: the Lua userdata (listener); each visitor is owned by its handle
 * until its close callback. */
typedef struct listener {
  uv_loop_t loop;
  uv_tcp_t server;
  uv_timer_t tick;
  int port;
  bool open;
  char *target; /* the callback's request target, once it came */
} listener;

typedef struct visitor {
  uv_tcp_t tcp;
  listener *owner;
  http_parser parser;
  buf url;
  size_t seen;
  bool answered;
} visitor;

static void on_visitor_closed(uv_handle_t *h) {
  visitor *v = h->data;
  buf_free(&v->url);
  free(v);
}

static void on_written(uv_write_t *req, int status) {
  (void)status; /* written or not (the listener closing), the visitor goes */
  if (!uv_is_closing((uv_handle_t *)req->handle)) uv_close((uv_handle_t *)req->handle, on_visitor_closed);
  free(req->data);
  free(req);
}

static void answer(visitor *v, const char *status, const char *body) {
  v->answered = true;
  uv_read_stop((uv_stream_t *)&v->tcp);
  buf out = BUF_INIT;
  buf_printf(&out,
             "HTTP/1.1 %s\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n"
             "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
             status, strlen(body), body);
  uv_write_t *req = malloc(sizeof *req);
  req->data = out.data; /* freed when written */
  uv_buf_t b = uv_buf_init(out.data, (unsigned)out.len);
  if (uv_write(req, (uv_stream_t *)&v->tcp, &b, 1, on_written) != 0) {
    free(out.data);
    free(req);
    uv_close((uv_handle_t *)&v->tcp, on_visitor_closed);
  }
}

static int on_url(http_parser *p, const char *at, size_t n) {
  visitor *v = p->data;
  buf_append(&v->url, at, n);
  return 0;
}

static int on_headers_complete(http_parser *p) {
  visitor *v = p->data;
  const char *url = v->url.data ? v->url.data : "";
  bool callback = strncmp(url, "/callback", 9) == 0 && (url[9] == '\0' || url[9] == '?');
  if (p->method != HTTP_GET || !callback || v->owner->target) {
    answer(v, "404 Not Found", "<!doctype html><title>luamcp</title><p>Not here.</p>");
  } else {
    v->owner->target = strndup(url, v->url.len);
    answer(v, "200 OK", PAGE);
  }
  return 1; /* no body wanted */
}

static const http_parser_settings SETTINGS = {.on_url = on_url, .on_headers_complete = on_headers_complete};

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  visitor *v = s->data;
  if (n > 0 && !v->answered) {
    v->seen += (size_t)n;
    size_t used = http_parser_execute(&v->parser, &SETTINGS, b->base, (size_t)n);
    if (!v->answered && (v->parser.http_errno != HPE_OK || used != (size_t)n || v->seen > REDIRECT_MAX_REQUEST_BYTES))
      answer(v, "400 Bad Request", "<!doctype html><title>luamcp</title><p>Bad request.</p>");
  } else if (n < 0 && !v->answered) {
    v->answered = true;
    uv_close((uv_handle_t *)&v->tcp, on_visitor_closed);
  }
  free(b->base);
}

static void on_connection(uv_stream_t *server, int status) {
  listener *l = server->data;
  if (status != 0) return;
  visitor *v = calloc(1, sizeof *v);
  v->owner = l;
  v->url = (buf)BUF_INIT;
  uv_tcp_init(&l->loop, &v->tcp);
  v->tcp.data = v;
  if (uv_accept(server, (uv_stream_t *)&v->tcp) != 0) {
    uv_close((uv_handle_t *)&v->tcp, on_visitor_closed);
    return;
  }
  http_parser_init(&v->parser, HTTP_REQUEST);
  v->parser.data = v;
  uv_read_start((uv_stream_t *)&v->tcp, alloc_cb, on_read);
}

static void on_tick(uv_timer_t *t) { uv_stop(t->loop); }

static void close_all(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, h->data ? on_visitor_closed : NULL); /* only visitors keep data */
}

static void listener_close(listener *l) {
  if (!l->open) return;
  l->open = false;
  l->server.data = NULL;
  l->tick.data = NULL;
  uv_walk(&l->loop, close_all, NULL);
  uv_run(&l->loop, UV_RUN_DEFAULT);
  uv_loop_close(&l->loop);
  free(l->target);
  l->target = NULL;
}

static int l_redirect_listen(lua_State *L) {
  listener *l = lua_newuserdatauv(L, sizeof *l, 0);
  memset(l, 0, sizeof *l);
  luaL_setmetatable(L, REDIRECT_LISTENER);
  if (uv_loop_init(&l->loop) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, "cannot start a loop for the login's listener");
    return 2;
  }
  l->open = true;
  uv_tcp_init(&l->loop, &l->server);
  uv_timer_init(&l->loop, &l->tick);
  l->server.data = l;
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  int rc = uv_tcp_bind(&l->server, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&l->server, 8, on_connection);
  if (rc != 0) {
    listener_close(l);
    lua_pushnil(L);
    lua_pushfstring(L, "cannot listen on 127.0.0.1 for the login's redirect: %s", uv_strerror(rc));
    return 2;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&l->server, (struct sockaddr *)&bound, &len);
  l->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  return 1;
}

static listener *check_listener(lua_State *L) { return luaL_checkudata(L, 1, REDIRECT_LISTENER); }

static int l_port(lua_State *L) {
  listener *l = check_listener(L);
  lua_pushinteger(L, l->port);
  return 1;
}

static int l_wait(lua_State *L) {
  listener *l = check_listener(L);
  lua_Integer timeout_ms = luaL_checkinteger(L, 2);
  if (!l->open) return luaL_error(L, "the login's listener is closed");
  uv_update_time(&l->loop); /* the loop's clock stood still between waits */
  uint64_t deadline = uv_now(&l->loop) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    if (l->target) {
      /* The page is written before the answer is taken. */
      uv_run(&l->loop, UV_RUN_NOWAIT);
      lua_pushstring(L, l->target);
      free(l->target);
      l->target = NULL;
      return 1;
    }
    if (interrupted() || uv_now(&l->loop) >= deadline) {
      lua_pushnil(L);
      lua_pushstring(L, interrupted() ? "interrupted" : "timeout");
      return 2;
    }
    l->tick.data = l;
    uv_timer_start(&l->tick, on_tick, REDIRECT_TICK_MS, 0);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    uv_timer_stop(&l->tick);
    uv_update_time(&l->loop);
  }
}

static int l_close(lua_State *L) {
  listener_close(check_listener(L));
  return 0;
}

void client_redirect_register(lua_State *L, bool (*was_interrupted)(void)) {
  interrupted = was_interrupted;
  static const luaL_Reg methods[] = {{"port", l_port}, {"wait", l_wait}, {"close", l_close}, {NULL, NULL}};
  if (luaL_newmetatable(L, REDIRECT_LISTENER)) {
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_redirect_listen);
  lua_setfield(L, -2, "redirect_listen");
}

/*
 * lua_http.c - mcp.http: HTTP/1.1 and HTTP/2 requests, over TLS, on the
 * loop. libcurl does the protocol; this file drives its multi-socket
 * interface from libuv (the integration curl documents): curl says which
 * sockets to watch and when to time out, uv_poll and one uv_timer watch
 * them, and every event goes back to curl_multi_socket_action.
 *
 *   core.http_request { url, method, headers = {name = value}, body,
 *                       timeout_ms, max_bytes, max_redirects, ca_file,
 *                       insecure, proxy, stream = function(chunk) end }
 *   -> { status, headers = {lower-case name = value}, body, url }
 *   or nil, message, code   (an expected failure; see CODES below)
 *
 * The calling task waits (yields) while the transfer runs; many run at once.
 * When the task goes away (cancelled, past its deadline, or its generation
 * freed) the transfer is removed from curl at once, which closes its
 * connection, and freed.
 *
 * libcurl is loaded on the first request (curl_lib.h), not linked. A fully
 * static luamcp cannot load shared libraries, so there mcp.http raises an
 * error that says so.
 *
 * No Lua runs inside a curl callback: the callbacks only record what
 * happened, and the tasks are resumed after curl_multi_socket_action
 * returns (curl forbids calling back into the multi handle from its
 * callbacks, and a resumed handler may start or cancel transfers).
 */
#include <stdarg.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/luamcp_limits.h"
#include "core/log.h"
#include "app/app.h"
#include "app/curl_lib.h"
#include "app/lua_http.h"
#include "app/lua_task.h"

/* Raise a misuse error without a position: lua/mcp/http.lua re-raises it
 * at the script's line. */
static int misuse(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return lua_error(L);
}

/* ---- The multi handle ------------------------------------------------------ */

/* The process's one multi handle and what drives it. Owner: this file,
 * for the life of the process (created on the first request). */
static struct {
  char why[256]; /* why libcurl could not be loaded ("" until tried) */
  const curl_api *api;
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;          /* curl's timeout */
  struct http_op *woken;     /* ops with news for their task, resumed after curl returns */
} H;

/* ---- One transfer ----------------------------------------------------------- */

/* A chunk of the body waiting for the stream function. */
typedef struct http_chunk {
  struct http_chunk *next;
  size_t len;
  char data[];
} http_chunk;

/* One mcp.http request. Owner: the waiting task; created by
 * lua_http_request, freed when the task takes the outcome (http_continue)
 * or goes away (cancel_op, lua_http_abort_all). The op owns its easy
 * handle, and takes it out of the multi handle before it is freed. */
typedef struct http_op {
  task_op op; /* first member: the task waits on it */
  vm *vm;
  task *task;
  CURL *easy;
  bool in_multi;            /* added to H.multi and not yet removed */
  struct curl_slist *headers;
  char *request_body;
  size_t request_len;
  buf body;                 /* the response body (not kept when streaming) */
  buf head;                 /* the last response's header lines */
  size_t max_bytes, received;
  bool streaming, too_large, finished, woken;
  CURLcode result;
  http_chunk *chunks, *chunks_tail;
  struct http_op *next, *prev;   /* the vm's list */
  struct http_op *woken_next;    /* H.woken */
} http_op;

static void unwake(http_op *op) {
  if (!op->woken) return;
  for (http_op **p = &H.woken; *p; p = &(*p)->woken_next) {
    if (*p == op) {
      *p = op->woken_next;
      break;
    }
  }
  op->woken = false;
}

/* Something for the task happened inside a curl callback: resume it once
 * curl has returned (wake_tasks). */
static void wake(http_op *op) {
  if (op->woken || !op->task) return;
  op->woken = true;
  op->woken_next = H.woken;
  H.woken = op;
}

/* Take the transfer out of curl (closing its connection if it was not
 * done) and free what curl used. */
static void detach_easy(http_op *op) {
  if (op->in_multi) H.api->multi_remove_handle(H.multi, op->easy);
  op->in_multi = false;
  if (op->easy) H.api->easy_cleanup(op->easy);
  op->easy = NULL;
  if (op->headers) H.api->slist_free_all(op->headers);
  op->headers = NULL;
}

static void op_free(http_op *op) {
  unwake(op);
  detach_easy(op);
  vm *v = op->vm;
  if (v) {
    if (op->prev) op->prev->next = op->next;
    else v->https = op->next;
    if (op->next) op->next->prev = op->prev;
  }
  buf_free(&op->body);
  buf_free(&op->head);
  while (op->chunks) {
    http_chunk *c = op->chunks;
    op->chunks = c->next;
    free(c);
  }
  free(op->request_body);
  free(op);
}

/* task_op.cancel: the task went away; the transfer stops now. */
static void cancel_op(task_op *base) { op_free((http_op *)base); }

static size_t on_body(char *data, size_t size, size_t n, void *userp) {
  http_op *op = userp;
  size_t len = size * n;
  if (op->received + len > op->max_bytes) {
    op->too_large = true;
    return 0; /* CURLE_WRITE_ERROR: curl stops the transfer */
  }
  op->received += len;
  if (!op->streaming) {
    buf_append(&op->body, data, len);
    return len;
  }
  http_chunk *c = malloc(sizeof *c + len);
  if (!c) return 0;
  c->next = NULL;
  c->len = len;
  memcpy(c->data, data, len);
  if (op->chunks_tail) op->chunks_tail->next = c;
  else op->chunks = c;
  op->chunks_tail = c;
  wake(op);
  return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *userp) {
  http_op *op = userp;
  size_t len = size * n;
  /* A new status line starts a new response (a redirect, 100 Continue):
   * only the last one's headers are reported. */
  if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) buf_clear(&op->head);
  if (op->head.len + len > HTTP_CLIENT_MAX_BYTES) return 0;
  buf_append(&op->head, data, len);
  return len;
}

/* ---- Driving curl from libuv ------------------------------------------------ */

/* A socket curl asked us to watch. Owner: curl's socket (curl_multi_assign)
 * until CURL_POLL_REMOVE; then the close callback frees it. */
typedef struct http_socket {
  uv_poll_t poll;
  curl_socket_t fd;
} http_socket;

static void wake_tasks(void);

static void check_done(void) {
  CURLMsg *msg;
  int left;
  while ((msg = H.api->multi_info_read(H.multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    http_op *op = NULL;
    H.api->easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&op);
    if (!op) continue;
    op->result = msg->data.result;
    op->finished = true;
    H.api->multi_remove_handle(H.multi, op->easy);
    op->in_multi = false;
    wake(op);
  }
}

/* After every call into curl: hand what happened to the tasks. A resumed
 * handler may start or cancel transfers (cancel_op unwakes its op), so the
 * list is popped one op at a time. */
static void wake_tasks(void) {
  while (H.woken) {
    http_op *op = H.woken;
    H.woken = op->woken_next;
    op->woken = false;
    task *t = op->task;
    if (t && t->wait == TASK_WAIT_OP && t->wait_op == &op->op) task_resume(t, 0);
  }
}

static void socket_action(curl_socket_t fd, int flags) {
  int running;
  H.api->multi_socket_action(H.multi, fd, flags, &running);
  check_done();
  wake_tasks();
}

static void on_poll(uv_poll_t *poll, int status, int events) {
  http_socket *s = poll->data;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  socket_action(s->fd, flags);
}

static void on_socket_closed(uv_handle_t *h) { free(h->data); }

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  (void)userp;
  http_socket *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      uv_poll_stop(&s->poll);
      uv_close((uv_handle_t *)&s->poll, on_socket_closed);
      H.api->multi_assign(H.multi, fd, NULL);
    }
    return 0;
  }
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s || uv_poll_init_socket(H.loop, &s->poll, fd) != 0) {
      free(s);
      return -1;
    }
    s->fd = fd;
    s->poll.data = s;
    H.api->multi_assign(H.multi, fd, s);
  }
  int events = 0;
  if (what & CURL_POLL_IN) events |= UV_READABLE;
  if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
  uv_poll_start(&s->poll, events, on_poll);
  return 0;
}

static void on_timer(uv_timer_t *timer) {
  (void)timer;
  socket_action(CURL_SOCKET_TIMEOUT, 0);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  (void)userp;
  if (timeout_ms < 0) uv_timer_stop(&H.timer);
  else uv_timer_start(&H.timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* Load libcurl and make the multi handle, once. */
static bool http_ready(vm *v, const char **why) {
  if (H.multi) return true;
  if (H.why[0]) {
    *why = H.why;
    return false;
  }
  if (!(H.api = curl_lib_load("mcp.http", H.why, sizeof H.why)) || !(H.multi = H.api->multi_init())) {
    if (!H.why[0]) snprintf(H.why, sizeof H.why, "mcp.http: libcurl could not make a multi handle");
    *why = H.why;
    return false;
  }
  H.loop = v->loop;
  uv_timer_init(H.loop, &H.timer);
  uv_unref((uv_handle_t *)&H.timer); /* never keeps the server alive by itself */
  H.api->multi_setopt(H.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  H.api->multi_setopt(H.multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  return true;
}

/* ---- The Lua side --------------------------------------------------------- */

/* The documented failure codes (README "mcp.http"). */
static const char *failure_code(http_op *op) {
  if (op->too_large) return "too_large";
  switch (op->result) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return "dns";
    case CURLE_COULDNT_CONNECT: return "connect";
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_TOO_MANY_REDIRECTS: return "redirects";
    case CURLE_FILESIZE_EXCEEDED: return "too_large";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED: return "tls";
    default: return "protocol";
  }
}

/* "Name: value" lines of the last response into a table of lower-case
 * names; repeated headers are joined with ", ". */
static void push_headers(lua_State *L, const buf *head) {
  lua_newtable(L);
  const char *p = head->data ? head->data : "";
  const char *end = p + head->len;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end;
    const char *colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon && colon > p && !(line_end - p >= 5 && memcmp(p, "HTTP/", 5) == 0)) {
      luaL_Buffer name;
      luaL_buffinit(L, &name);
      for (const char *c = p; c < colon; c++) luaL_addchar(&name, (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c));
      luaL_pushresult(&name);
      const char *v = colon + 1, *ve = line_end;
      while (v < ve && (*v == ' ' || *v == '\t')) v++;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
      lua_pushvalue(L, -1);
      if (lua_rawget(L, -3) == LUA_TSTRING) {
        lua_pushliteral(L, ", ");
        lua_pushlstring(L, v, (size_t)(ve - v));
        lua_concat(L, 3);
      } else {
        lua_pop(L, 1);
        lua_pushlstring(L, v, (size_t)(ve - v));
      }
      lua_rawset(L, -3);
    }
    p = eol ? eol + 1 : end;
  }
}

static int push_outcome(lua_State *L, http_op *op) {
  char *url = NULL;
  H.api->easy_getinfo(op->easy, CURLINFO_EFFECTIVE_URL, &url);
  if (!url) url = "";
  if (op->result != CURLE_OK || op->too_large) {
    lua_pushnil(L);
    if (op->too_large)
      lua_pushfstring(L, "mcp.http: %s: the response is larger than max_bytes (%I bytes)", url,
                      (lua_Integer)op->max_bytes);
    else lua_pushfstring(L, "mcp.http: %s: %s", url, H.api->easy_strerror(op->result));
    lua_pushstring(L, failure_code(op));
    return 3;
  }
  long status = 0;
  H.api->easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &status);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  push_headers(L, &op->head);
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, op->body.data ? op->body.data : "", op->body.len);
  lua_setfield(L, -2, "body");
  lua_pushstring(L, url);
  lua_setfield(L, -2, "url");
  return 1;
}

/* Where the task comes back to after each event: hand queued chunks to the
 * stream function (slot 2), then return the outcome or wait again. Slot 1
 * holds the op as light userdata. */
static int http_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  http_op *op = lua_touserdata(L, 1);
  if (op->chunks) {
    http_chunk *c = op->chunks;
    op->chunks = c->next;
    if (!op->chunks) op->chunks_tail = NULL;
    lua_settop(L, 2);
    lua_pushvalue(L, 2);
    lua_pushlstring(L, c->data, c->len);
    free(c);
    lua_callk(L, 1, 0, 0, http_continue);
    return http_continue(L, LUA_OK, 0);
  }
  if (op->finished) {
    int n = push_outcome(L, op);
    op->task = NULL;
    op_free(op);
    return n;
  }
  return task_wait_op(L, task_of(L), &op->op, http_continue);
}

/* A string option; the string stays alive in the options table. */
static const char *opt_string(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  const char *s = NULL;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) misuse(L, "mcp.http: %s must be a string", name);
    s = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return s;
}

static lua_Integer opt_integer(lua_State *L, int idx, const char *name, lua_Integer dflt) {
  lua_getfield(L, idx, name);
  lua_Integer v = dflt;
  if (!lua_isnil(L, -1)) {
    int ok;
    v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < 0) misuse(L, "mcp.http: %s must be a whole number >= 0", name);
  }
  lua_pop(L, 1);
  return v;
}

/* Request headers from {name = value}; a value may not contain a line
 * break (header injection). */
static struct curl_slist *build_headers(lua_State *L, int idx) {
  lua_getfield(L, idx, "headers");
  struct curl_slist *list = NULL;
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  if (!lua_istable(L, -1)) misuse(L, "mcp.http: headers must be a table of name = value");
  int t = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING || (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)) {
      if (list) H.api->slist_free_all(list);
      misuse(L, "mcp.http: headers must map names to strings");
    }
    const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
    if (strpbrk(name, "\r\n: ") || strpbrk(value, "\r\n") || !*name) {
      if (list) H.api->slist_free_all(list);
      misuse(L, "mcp.http: header %s is not a valid name and value", name);
    }
    /* "Name;" is curl's way to send a header with an empty value. */
    const char *line = *value ? lua_pushfstring(L, "%s: %s", name, value) : lua_pushfstring(L, "%s;", name);
    struct curl_slist *grown = H.api->slist_append(list, line);
    lua_pop(L, 2);
    if (!grown) {
      if (list) H.api->slist_free_all(list);
      luaL_error(L, "mcp.http: out of memory");
    }
    list = grown;
  }
  lua_pop(L, 1);
  /* No "Expect: 100-continue" round trip before a body. */
  struct curl_slist *grown = H.api->slist_append(list, "Expect:");
  return grown ? grown : list;
}

int lua_http_request(lua_State *L) {
  if (!lua_istable(L, 1)) return misuse(L, "mcp.http needs a table of options");
  task *t = task_check(L, "mcp.http");
  vm *v = t->vm;
  const char *why;
  if (!http_ready(v, &why)) return misuse(L, "%s", why);

  /* Read and check everything first: nothing below may raise once op exists. */
  lua_getfield(L, 1, "url");
  if (lua_type(L, -1) != LUA_TSTRING) return misuse(L, "mcp.http needs url, a string");
  const char *url = lua_tostring(L, -1);
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
    return misuse(L, "mcp.http: url must start with http:// or https://, got %s", url);
  lua_getfield(L, 1, "method");
  const char *method = lua_isnil(L, -1) ? NULL : lua_tostring(L, -1);
  if (!lua_isnil(L, -1) && (lua_type(L, -1) != LUA_TSTRING || !*method || strpbrk(method, " \r\n\t")))
    return misuse(L, "mcp.http: method must be a single word such as GET or POST");
  lua_getfield(L, 1, "body");
  size_t body_len = 0;
  const char *body = NULL;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) return misuse(L, "mcp.http: body must be a string");
    body = lua_tolstring(L, -1, &body_len);
  }
  if (body_len > HTTP_CLIENT_MAX_REQUEST_BYTES)
    return misuse(L, "mcp.http: the request body is larger than %d bytes", (int)HTTP_CLIENT_MAX_REQUEST_BYTES);
  lua_Integer timeout_ms = opt_integer(L, 1, "timeout_ms", HTTP_CLIENT_TIMEOUT_MS);
  lua_Integer max_bytes = opt_integer(L, 1, "max_bytes", HTTP_CLIENT_MAX_BYTES);
  lua_Integer max_redirects = opt_integer(L, 1, "max_redirects", HTTP_CLIENT_MAX_REDIRECTS);
  const char *ca_file = opt_string(L, 1, "ca_file");
  const char *proxy = opt_string(L, 1, "proxy");
  lua_getfield(L, 1, "insecure");
  bool insecure = lua_toboolean(L, -1);
  lua_getfield(L, 1, "stream");
  bool streaming = !lua_isnil(L, -1);
  if (streaming && !lua_isfunction(L, -1)) misuse(L, "mcp.http: stream must be a function");
  lua_pop(L, 2);
  struct curl_slist *headers = build_headers(L, 1); /* raises only before it owns a list */

  http_op *op = calloc(1, sizeof *op);
  CURL *e = op ? H.api->easy_init() : NULL;
  if (op) op->headers = headers; /* op_free frees it from here on */
  if (!e) {
    if (op) op_free(op);
    else if (headers) H.api->slist_free_all(headers);
    return luaL_error(L, "mcp.http: out of memory");
  }
  op->op.cancel = cancel_op;
  op->vm = v;
  op->task = t;
  op->easy = e;
  op->streaming = streaming;
  op->max_bytes = (size_t)max_bytes;
  if (body) {
    op->request_body = malloc(body_len ? body_len : 1);
    if (!op->request_body) {
      op_free(op);
      return luaL_error(L, "mcp.http: out of memory");
    }
    memcpy(op->request_body, body, body_len);
    op->request_len = body_len;
  }
  H.api->easy_setopt(e, CURLOPT_URL, url);
  H.api->easy_setopt(e, CURLOPT_PRIVATE, (char *)op);
  H.api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  H.api->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  H.api->easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  H.api->easy_setopt(e, CURLOPT_FOLLOWLOCATION, max_redirects > 0 ? 1L : 0L);
  H.api->easy_setopt(e, CURLOPT_MAXREDIRS, (long)max_redirects);
  H.api->easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* every encoding this libcurl decodes */
  H.api->easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  H.api->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                    (long)(timeout_ms > 0 && timeout_ms < HTTP_CLIENT_CONNECT_TIMEOUT_MS ? timeout_ms
                                                                                         : HTTP_CLIENT_CONNECT_TIMEOUT_MS));
  H.api->easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_bytes);
  H.api->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  H.api->easy_setopt(e, CURLOPT_WRITEDATA, op);
  H.api->easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  H.api->easy_setopt(e, CURLOPT_HEADERDATA, op);
  H.api->easy_setopt(e, CURLOPT_USERAGENT, "luamcp");
  if (headers) H.api->easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  if (ca_file) H.api->easy_setopt(e, CURLOPT_CAINFO, ca_file); /* curl copies string options */
  if (insecure) {
    H.api->easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    H.api->easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  /* Proxies: the request's own, else the environment's. libcurl reads
   * https_proxy/HTTPS_PROXY, all_proxy and no_proxy/NO_PROXY itself; for
   * plain http it reads only lower-case http_proxy, so HTTP_PROXY is added
   * here (a server is not a CGI program, where that name is unsafe). */
  if (!proxy && strncmp(url, "http://", 7) == 0 && !getenv("http_proxy")) proxy = getenv("HTTP_PROXY");
  if (proxy) H.api->easy_setopt(e, CURLOPT_PROXY, proxy);
  if (body) {
    H.api->easy_setopt(e, CURLOPT_POSTFIELDS, op->request_body);
    H.api->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  }
  if (method) H.api->easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (method && strcmp(method, "HEAD") == 0) H.api->easy_setopt(e, CURLOPT_NOBODY, 1L);

  op->next = v->https;
  if (op->next) op->next->prev = op;
  v->https = op;
  if (H.api->multi_add_handle(H.multi, e) != CURLM_OK) {
    op_free(op);
    return misuse(L, "mcp.http: libcurl refused the request");
  }
  op->in_multi = true;
  /* Slot 1: the op; slot 2: the stream function (or nil). */
  lua_getfield(L, 1, "stream");
  lua_pushlightuserdata(L, op);
  lua_replace(L, 1);
  lua_replace(L, 2);
  lua_settop(L, 2);
  return task_wait_op(L, t, &op->op, http_continue);
}

void lua_http_abort_all(vm *v) {
  while (v->https) {
    http_op *op = v->https;
    /* The task is being freed with its generation: it will not be resumed. */
    op->task = NULL;
    op_free(op);
  }
}

void lua_http_shutdown(void) {
  if (!H.multi) return;
  /* Closes the cached connections; curl says CURL_POLL_REMOVE for any
   * socket still watched, which closes its watcher. */
  H.api->multi_cleanup(H.multi);
  H.multi = NULL;
  uv_close((uv_handle_t *)&H.timer, NULL);
}

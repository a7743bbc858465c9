/*
 * lua_http.c - mcp.http: HTTP/1.1 and HTTP/2 requests, over TLS, on the
 * loop. libcurl does the protocol, driven from libuv by app/curl_loop.h.
 *
 *   core.http_request { url, method, headers = {name = value}, body,
 *                       timeout_ms, max_bytes, max_redirects, ca_file,
 *                       insecure, proxy, stream = function(chunk) end }
 *   -> { status, headers = {lower-case name = value}, body, url }
 *   or nil, message, code   (an expected failure; see failure_code below)
 *
 * A confined server's request also carries permit = function(host, port),
 * lua/mcp/permissions.lua's check. The URL is parsed once, with libcurl's
 * URL API, and that parse is both what the check judges and what curl is
 * handed (CURLOPT_CURLU); the proxy (the request's own or the
 * environment's) is parsed and judged the same way and handed to curl as
 * the explicit URL the parse gives back; curl then follows no redirect
 * itself (lua/mcp/http.lua follows them, each hop judged again). A URL, a
 * header or a proxy with a control byte is refused before any of that: a
 * NUL would cut the string where curl reads it.
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
#include <stddef.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/luamcp_limits.h"
#include "core/log.h"
#include "core/trace.h"
#include "app/app.h"
#include "app/otel.h"
#include "app/curl_lib.h"
#include "app/curl_loop.h"
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

/* The process's one multi handle on the loop. Owner: this file, for the
 * life of the process (created on the first request; closed when the app
 * stops, through the app's on_stop). */
static struct {
  char why[256]; /* why libcurl could not be loaded ("" until tried) */
  const curl_api *api;
  curl_loop *curl;
  struct http_op *woken;     /* ops with news for their task, resumed after curl returns */
  teardown closed_with_app;  /* in app->on_stop once curl is made */
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
 * or goes away (cancel_op, or its generation's end: abort_with_generation). The op owns its easy
 * handle, and takes it out of the multi handle before it is freed. */
typedef struct http_op {
  task_op op; /* first member: the task waits on it */
  task *task;
  curl_transfer transfer;   /* its easy handle, in H.curl while it runs */
  CURLU *url;               /* the parsed URL curl was handed (CURLOPT_CURLU) */
  struct curl_slist *headers;
  char *request_body;
  size_t request_len;
  buf body;                 /* the response body (not kept when streaming) */
  buf head;                 /* the last response's header lines */
  size_t max_bytes, received;
  bool streaming, too_large, finished, woken;
  CURLcode result;
  http_chunk *chunks, *chunks_tail;
  teardown held;                 /* in vm->on_end while it runs */
  struct http_op *woken_next;    /* H.woken */
  otel_span *span;               /* its client span (traces on), ended when the op is freed */
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
  if (op->transfer.easy) {
    if (H.curl) curl_loop_remove(H.curl, &op->transfer);
    H.api->easy_cleanup(op->transfer.easy);
  }
  op->transfer.easy = NULL;
  if (op->url) H.api->url_cleanup(op->url); /* after the easy handle that used it */
  op->url = NULL;
  if (op->headers) H.api->slist_free_all(op->headers);
  op->headers = NULL;
}

static void end_span(http_op *op);

static void op_free(http_op *op) {
  if (op->span) end_span(op); /* before the easy handle goes: it reads the status */
  unwake(op);
  detach_easy(op);
  teardown_remove(&op->held);
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

/* vm->on_end: the generation is being freed, the waiting task with it (it
 * will not be resumed): the transfer stops now. */
static void abort_with_generation(teardown *entry) {
  http_op *op = (http_op *)((char *)entry - offsetof(http_op, held));
  op->task = NULL;
  op_free(op);
}

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

/* curl_transfer.done: the transfer ended; its task hears of it once curl
 * has returned (wake_tasks). */
static void on_transfer_done(curl_transfer *t, CURLcode result) {
  http_op *op = (http_op *)((char *)t - offsetof(http_op, transfer));
  op->result = result;
  op->finished = true;
  wake(op);
}

/* After every turn of curl: hand what happened to the tasks. A resumed
 * handler may start or cancel transfers (cancel_op unwakes its op), so the
 * list is popped one op at a time. */
static void wake_tasks(void *unused) {
  (void)unused;
  while (H.woken) {
    http_op *op = H.woken;
    H.woken = op->woken_next;
    op->woken = false;
    task *t = op->task;
    if (t && t->wait == TASK_WAIT_OP && t->wait_op == &op->op) task_resume(t, 0);
  }
}

/* app->on_stop: the process is ending: let libcurl close its connections. */
static void close_curl(teardown *entry) {
  (void)entry;
  curl_loop_close(H.curl);
  H.curl = NULL;
}

/* Load libcurl and make the multi handle, once. */
static bool http_ready(vm *v, const char **why) {
  if (H.curl) return true;
  if (H.why[0]) {
    *why = H.why;
    return false;
  }
  if (!(H.api = curl_lib_load("mcp.http", H.why, sizeof H.why)) ||
      !(H.curl = curl_loop_new(v->loop, H.api, wake_tasks, NULL))) {
    if (!H.why[0]) snprintf(H.why, sizeof H.why, "mcp.http: libcurl could not make a multi handle");
    *why = H.why;
    return false;
  }
  if (v->app) teardown_add(&v->app->on_stop, &H.closed_with_app, close_curl);
  return true;
}

/* ---- The Lua side --------------------------------------------------------- */

/* The documented failure codes (README "mcp.http"). */
static const char *failure_code(const http_op *op) {
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

/* The request's client span (the HTTP semantic conventions) ends with
 * the op: cancelled, failed, or with the upstream's status. */
static void end_span(http_op *op) {
  otel_span *s = op->span;
  op->span = NULL;
  long status = 0;
  if (op->finished && op->result == CURLE_OK && op->transfer.easy)
    H.api->easy_getinfo(op->transfer.easy, CURLINFO_RESPONSE_CODE, &status);
  if (status) otel_attr_int(s, "http.response.status_code", status);
  if (!op->finished) otel_span_fail(s, "cancelled", NULL);
  else if (op->result != CURLE_OK || op->too_large) otel_span_fail(s, failure_code(op), H.api->easy_strerror(op->result));
  else if (status >= 500) {
    char code[24];
    snprintf(code, sizeof code, "%ld", status);
    otel_span_fail(s, code, NULL);
  }
  otel_span_end(s);
}

/* A client span for the request under the call's, and its traceparent
 * header for the upstream (unless the script gave its own); false when
 * out of memory. */
static bool start_span(lua_State *L, http_op *op, const task *t, const char *method, const char *url) {
  op->span = otel_span_start(method ? method : "GET", OTEL_KIND_CLIENT, &t->root->trace);
  otel_attr_str(op->span, "http.request.method", method ? method : "GET");
  buf redacted = BUF_INIT;
  trace_redact_url(url, &redacted);
  otel_attr_strn(op->span, "url.full", redacted.data, redacted.len);
  buf_free(&redacted);
  int top = lua_gettop(L);
  lua_getfield(L, 1, "headers");
  bool own = lua_istable(L, -1) && lua_getfield(L, -1, "traceparent") != LUA_TNIL;
  lua_settop(L, top);
  if (own) return true;
  otel_ids ids;
  otel_span_ids(op->span, &ids);
  char line[32 + TRACEPARENT_LEN] = "traceparent: ";
  otel_traceparent(&ids, line + strlen(line));
  struct curl_slist *grown = H.api->slist_append(op->headers, line);
  if (!grown) return false;
  op->headers = grown;
  return true;
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
  H.api->easy_getinfo(op->transfer.easy, CURLINFO_EFFECTIVE_URL, &url);
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
  H.api->easy_getinfo(op->transfer.easy, CURLINFO_RESPONSE_CODE, &status);
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

/* A string option and its length; the string stays alive in the options
 * table. */
static const char *opt_string(lua_State *L, int idx, const char *name, size_t *len) {
  lua_getfield(L, idx, name);
  const char *s = NULL;
  *len = 0;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) misuse(L, "mcp.http: %s must be a string", name);
    s = lua_tolstring(L, -1, len);
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

/* ---- What the request reaches --------------------------------------------- */

/* A byte below 0x20, or DEL: never part of a URL, a proxy or a header (a
 * tab aside, which a header value may hold). A NUL would also cut the
 * string where libcurl reads it, so that a check of the whole Lua string
 * would judge something else than what curl uses. */
static bool has_control_byte(const char *s, size_t len, bool tab_ok) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c < 0x20 && !(tab_ok && c == '\t')) || c == 0x7f) return true;
  }
  return false;
}

/* An expected failure found before anything is sent: nil, message,
 * "invalid". */
static int refuse(lua_State *L, const char *fmt, ...) {
  va_list ap;
  lua_pushnil(L);
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_pushliteral(L, "invalid");
  return 3;
}

/* Check the headers table before anything is allocated: misuse raises; a
 * control byte (header injection, or a NUL that would cut the line) is an
 * expected failure, whose message is pushed and returned. NULL: fine. */
static const char *header_problem(lua_State *L, int idx) {
  lua_getfield(L, idx, "headers");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  if (!lua_istable(L, -1)) misuse(L, "mcp.http: headers must be a table of name = value");
  int t = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING || (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER))
      misuse(L, "mcp.http: headers must map names to strings");
    size_t name_len, value_len;
    const char *name = lua_tolstring(L, -2, &name_len);
    const char *value = lua_tolstring(L, -1, &value_len); /* a number value becomes a string in its slot */
    if (has_control_byte(name, name_len, false) || has_control_byte(value, value_len, true)) {
      const char *why = lua_pushfstring(L, "mcp.http: header %s is not a valid name and value: it holds a control "
                                           "byte (a line break or a NUL)", name);
      lua_replace(L, t);
      lua_settop(L, t);
      return why;
    }
    if (!*name || strpbrk(name, ": ")) misuse(L, "mcp.http: header %s is not a valid name and value", name);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return NULL;
}

/* Request headers from {name = value}, checked by header_problem; false
 * when out of memory (nothing is raised: the caller holds a parsed URL). */
static bool build_headers(lua_State *L, int idx, struct curl_slist **out) {
  lua_getfield(L, idx, "headers");
  struct curl_slist *list = NULL;
  bool ok = true;
  if (lua_istable(L, -1)) {
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (ok && lua_next(L, t)) {
      const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
      /* "Name;" is curl's way to send a header with an empty value. */
      const char *line = *value ? lua_pushfstring(L, "%s: %s", name, value) : lua_pushfstring(L, "%s;", name);
      struct curl_slist *grown = H.api->slist_append(list, line);
      lua_pop(L, 2);
      if (grown) list = grown;
      else ok = false;
    }
    if (!ok) lua_settop(L, t);
  }
  lua_pop(L, 1);
  /* No "Expect: 100-continue" round trip before a body. */
  struct curl_slist *grown = ok ? H.api->slist_append(list, "Expect:") : NULL;
  if (!grown) {
    if (list) H.api->slist_free_all(list);
    return false;
  }
  *out = grown;
  return true;
}

/* Push the host (lower case, no IPv6 brackets: as permissions name it) and
 * the port of a parsed URL, read as libcurl reads them to connect (the
 * scheme's default port when none is given). False: no host. */
static bool push_endpoint(lua_State *L, CURLU *u) {
  char *host = NULL, *port = NULL;
  bool ok = H.api->url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            H.api->url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK && *host;
  if (ok) {
    size_t len = strlen(host);
    char *h = host;
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']') {
      h++;
      len -= 2;
    }
    for (size_t i = 0; i < len; i++)
      if (h[i] >= 'A' && h[i] <= 'Z') h[i] = (char)(h[i] + 32);
    lua_pushlstring(L, h, len);
    lua_pushinteger(L, strtol(port, NULL, 10));
  }
  H.api->free(host);
  H.api->free(port);
  return ok;
}

/* Ask the permission check (stack index permit; 0: the server is not
 * confined) about where u reaches. 0: allowed; n > 0: refused, with its n
 * results (nil, message, code) on the stack; -1: the check raised, with
 * the error on the stack (the caller frees what it holds, then raises). */
static int judge(lua_State *L, int permit, CURLU *u, const char *text) {
  if (!permit) return 0;
  lua_pushvalue(L, permit);
  if (!push_endpoint(L, u)) {
    lua_pop(L, 1);
    return refuse(L, "mcp.http: %s names no host", text);
  }
  if (lua_pcall(L, 2, 3, 0) != LUA_OK) return -1;
  if (lua_toboolean(L, -3)) {
    lua_pop(L, 3);
    return 0;
  }
  return 3;
}

/* The proxy libcurl would take from the environment for a URL of this
 * scheme (lib/url.c, detect_proxy): <scheme>_proxy, its upper case, then
 * all_proxy and ALL_PROXY; an empty value means none. HTTP_PROXY is read
 * as curl would not (see the unconfined case in lua_http_request). */
static const char *env_proxy(const char *scheme) {
  bool https = strcmp(scheme, "https") == 0;
  const char *p = getenv(https ? "https_proxy" : "http_proxy");
  if (!p) p = getenv(https ? "HTTPS_PROXY" : "HTTP_PROXY");
  if (!p) p = getenv("all_proxy");
  if (!p) p = getenv("ALL_PROXY");
  return p && *p ? p : NULL;
}

/* Whether the environment's no_proxy (or NO_PROXY) exempts host from the
 * proxy: "*", or a name that is host or a domain host ends in (a leading
 * dot allowed). Narrower than curl's (no address ranges), and what a
 * confined request goes by: curl is then told to look no further
 * (CURLOPT_NOPROXY ""), so the connection made is the one judged. */
static bool no_proxy_for(const char *host) {
  const char *list = getenv("no_proxy");
  if (!list) list = getenv("NO_PROXY");
  if (!list) return false;
  size_t host_len = strlen(host);
  if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
    host++;
    host_len -= 2;
  }
  while (*list) {
    list += strspn(list, ", \t");
    const char *name = list;
    size_t len = strcspn(list, ", \t");
    list += len;
    if (len == 1 && *name == '*') return true;
    if (len && *name == '.') {
      name++;
      len--;
    }
    if (len && len <= host_len && strncasecmp(host + host_len - len, name, len) == 0 &&
        (len == host_len || host[host_len - len - 1] == '.'))
      return true;
  }
  return false;
}

/* A confined request's proxy: parsed as libcurl parses a proxy (no scheme:
 * http; no port: 443 for an https proxy, else 1080), judged, and on
 * success the explicit URL of that parse pushed, for CURLOPT_PROXY. The
 * results are judge's. */
static int judge_proxy(lua_State *L, int permit, const char *proxy) {
  static const char *const SCHEMES[] = {"http", "https", "socks4", "socks4a", "socks5", "socks5h"};
  if (has_control_byte(proxy, strlen(proxy), false))
    return refuse(L, "mcp.http: the proxy holds a control byte: refused");
  const char *text = strstr(proxy, "://") ? proxy : lua_pushfstring(L, "http://%s", proxy);
  CURLU *u = H.api->url();
  char *scheme = NULL, *port = NULL, *full = NULL;
  int n;
  if (!u) {
    n = refuse(L, "mcp.http: out of memory");
    goto done;
  }
  if (H.api->url_set(u, CURLUPART_URL, text, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
      H.api->url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
    n = refuse(L, "mcp.http: the proxy is not a URL libcurl accepts");
    goto done;
  }
  bool known = false;
  for (size_t i = 0; i < sizeof SCHEMES / sizeof *SCHEMES; i++) known = known || strcmp(scheme, SCHEMES[i]) == 0;
  if (!known) {
    n = refuse(L, "mcp.http: the proxy's scheme is %s: libcurl knows http, https, socks4, socks4a, socks5 and socks5h "
                  "proxies", scheme);
    goto done;
  }
  if (H.api->url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
    H.api->url_set(u, CURLUPART_PORT, strcmp(scheme, "https") == 0 ? "443" : "1080", 0);
  n = judge(L, permit, u, "the proxy");
  if (n == 0) {
    if (H.api->url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK) lua_pushstring(L, full);
    else n = refuse(L, "mcp.http: the proxy is not a URL libcurl accepts");
  }
done:
  H.api->free(scheme);
  H.api->free(port);
  H.api->free(full);
  if (u) H.api->url_cleanup(u);
  return n;
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
  size_t url_len;
  const char *url = lua_tolstring(L, -1, &url_len);
  if (has_control_byte(url, url_len, false))
    return refuse(L, "mcp.http: the url holds a control byte (a NUL, a line break...): refused");
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
  size_t ca_file_len, proxy_len;
  const char *ca_file = opt_string(L, 1, "ca_file", &ca_file_len);
  const char *proxy = opt_string(L, 1, "proxy", &proxy_len);
  if (has_control_byte(ca_file ? ca_file : "", ca_file_len, false))
    return refuse(L, "mcp.http: ca_file holds a control byte: refused");
  if (has_control_byte(proxy ? proxy : "", proxy_len, false))
    return refuse(L, "mcp.http: the proxy holds a control byte (a NUL, a line break...): refused");
  /* unix_socket: connect to this local socket (a Unix socket file; Windows:
   * a named pipe) whatever host the URL names, with no proxy. A confined
   * server's permission check judged this very string (check_socket in
   * lua/mcp/permissions.lua), and the URL's host names no machine. */
  size_t socket_len;
  const char *unix_socket = opt_string(L, 1, "unix_socket", &socket_len);
  if (unix_socket && (!*unix_socket || has_control_byte(unix_socket, socket_len, false)))
    return refuse(L, "mcp.http: unix_socket is empty or holds a control byte: refused");
  lua_getfield(L, 1, "insecure");
  bool insecure = lua_toboolean(L, -1);
  lua_getfield(L, 1, "stream");
  bool streaming = !lua_isnil(L, -1);
  if (streaming && !lua_isfunction(L, -1)) misuse(L, "mcp.http: stream must be a function");
  lua_pop(L, 2);
  lua_getfield(L, 1, "permit");
  int permit = lua_isnil(L, -1) ? 0 : lua_gettop(L);
  if (permit && !lua_isfunction(L, permit)) return misuse(L, "mcp.http: permit must be a function");
  const char *bad_header = header_problem(L, 1);
  if (bad_header) return refuse(L, "%s", bad_header);

  /* The one parse of the URL: judged, then handed to curl. */
  CURLU *parsed = H.api->url();
  if (!parsed) return luaL_error(L, "mcp.http: out of memory");
  int n = H.api->url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK
              ? (unix_socket ? 0 : judge(L, permit, parsed, url))
              : refuse(L, "mcp.http: %s is not a URL libcurl accepts", url);
  if (n == 0 && permit && !unix_socket) {
    /* A confined request names its proxy to curl, the one judged here:
     * the request's own, else the environment's, unless no_proxy exempts
     * the host; else none (""), so that curl looks for no other. */
    char *scheme = NULL, *host = NULL;
    if (!proxy && H.api->url_get(parsed, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK) proxy = env_proxy(scheme);
    if (proxy && H.api->url_get(parsed, CURLUPART_HOST, &host, 0) == CURLUE_OK && no_proxy_for(host)) proxy = NULL;
    H.api->free(scheme);
    H.api->free(host);
    n = proxy ? judge_proxy(L, permit, proxy) : 0;
    proxy = n == 0 ? (proxy ? lua_tostring(L, -1) : "") : NULL;
  }
  struct curl_slist *headers = NULL;
  if (n == 0 && !build_headers(L, 1, &headers)) n = -2;
  if (n != 0) {
    H.api->url_cleanup(parsed);
    if (n == -2) return luaL_error(L, "mcp.http: out of memory");
    if (n < 0) return lua_error(L); /* the check raised */
    return n;
  }

  http_op *op = calloc(1, sizeof *op);
  CURL *e = op ? H.api->easy_init() : NULL;
  if (op) {
    op->headers = headers; /* op_free frees them from here on */
    op->url = parsed;
  }
  if (!e) {
    if (op) op_free(op);
    else {
      if (headers) H.api->slist_free_all(headers);
      H.api->url_cleanup(parsed);
    }
    return luaL_error(L, "mcp.http: out of memory");
  }
  op->op.cancel = cancel_op;
  op->task = t;
  op->transfer.easy = e;
  op->transfer.done = on_transfer_done;
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
  H.api->easy_setopt(e, CURLOPT_CURLU, parsed);
  H.api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  H.api->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  H.api->easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  /* A confined request's redirects are followed by lua/mcp/http.lua, each
   * hop judged as this one was: curl follows none. */
  H.api->easy_setopt(e, CURLOPT_FOLLOWLOCATION, max_redirects > 0 && !permit ? 1L : 0L);
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
  if (ca_file) H.api->easy_setopt(e, CURLOPT_CAINFO, ca_file); /* curl copies string options */
  if (insecure) {
    H.api->easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    H.api->easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  /* Proxies: the request's own, else the environment's. libcurl reads
   * https_proxy/HTTPS_PROXY, all_proxy and no_proxy/NO_PROXY itself; for
   * plain http it reads only lower-case http_proxy, so HTTP_PROXY is added
   * here (a server is not a CGI program, where that name is unsafe). */
  if (!permit && !proxy && strncmp(url, "http://", 7) == 0 && !getenv("http_proxy")) proxy = getenv("HTTP_PROXY");
  if (proxy) H.api->easy_setopt(e, CURLOPT_PROXY, proxy);
  if (permit) H.api->easy_setopt(e, CURLOPT_NOPROXY, ""); /* decided above */
  if (unix_socket) {
    H.api->easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, unix_socket);
    H.api->easy_setopt(e, CURLOPT_PROXY, "");
  }
  if (body) {
    H.api->easy_setopt(e, CURLOPT_POSTFIELDS, op->request_body);
    H.api->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  }
  if (method) H.api->easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (method && strcmp(method, "HEAD") == 0) H.api->easy_setopt(e, CURLOPT_NOBODY, 1L);
  if (otel_on && t->root->trace.set && !start_span(L, op, t, method, url)) {
    op_free(op); /* not in the vm's list yet */
    return luaL_error(L, "mcp.http: out of memory");
  }

  if (op->headers) H.api->easy_setopt(e, CURLOPT_HTTPHEADER, op->headers); /* traceparent added */
  teardown_add(&v->on_end, &op->held, abort_with_generation);
  if (!curl_loop_add(H.curl, &op->transfer)) {
    op_free(op);
    return misuse(L, "mcp.http: libcurl refused the request");
  }
  /* Slot 1: the op; slot 2: the stream function (or nil). */
  lua_getfield(L, 1, "stream");
  lua_pushlightuserdata(L, op);
  lua_replace(L, 1);
  lua_replace(L, 2);
  lua_settop(L, 2);
  return task_wait_op(L, t, &op->op, http_continue);
}

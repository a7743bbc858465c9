/*
 * client_oauth.c - what lua/mcp/client_auth.lua (luamcp call as an OAuth
 * client) needs from C, as functions of the client state's luamcp.client:
 *
 *   oauth_fetch{method=, url=, headers={Name=value}, body=, timeout_ms=}
 *       -> {status=, headers={lowercase-name=value}, body=} | nil, why
 *     one synchronous HTTP exchange (metadata documents, the token
 *     endpoint) through libcurl, bounded in time and size, no redirects
 *   jws_sign(alg, pem, header_json, claims_json) -> compact JWS | nil, why
 *     a JWT client assertion (RFC 7523) signed ES256 or RS256 by os/crypto
 *   base64_encode(text) -> standard base64 (client_secret_basic)
 *   random_id() -> 32 hex digits from the OS's secure generator (jti)
 *   sha256_base64url(text), random_base64url(n): PKCE, state, DPoP
 *   dpop_key() -> {pem, x, y}: a new P-256 key for DPoP (os/crypto)
 *   write_private(path, text), read_private(path): luamcp login's tokens,
 *     0600 and sealed by os_secret_seal (DPAPI on Windows): app/secret_file.c
 *   redirect_listen(): the loopback listener a login waits on
 *     (client_redirect.c)
 *   credentials_allowed(url) -> true | false, why
 *     may a secret or token go to url (curl_lib_credentials_allowed: https,
 *     or http to a loopback host, as libcurl reads the URL)
 *
 * The client has nothing else to do while it waits, so the fetch drives
 * curl's multi interface itself, as client_http.c does.
 */
#include "cli/client_oauth.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/curl_lib.h"
#include "app/secret_file.h"
#include "cli/client_redirect.h"
#include "core/base64.h"
#include "core/buf.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"
#include "os/fs.h"

/* One exchange's answer as it arrives. Owner: oauth_fetch's frame. */
typedef struct fetch_answer {
  buf body;
  bool too_large;
  lua_State *L;
  int headers_idx; /* the Lua table collecting the last response's headers */
} fetch_answer;

static size_t on_body(char *data, size_t size, size_t count, void *arg) {
  fetch_answer *a = arg;
  size_t n = size * count;
  if (a->body.len + n > CLIENT_OAUTH_MAX_BODY_BYTES) {
    a->too_large = true;
    return 0; /* curl fails the transfer */
  }
  buf_append(&a->body, data, n);
  return n;
}

static size_t on_header(char *data, size_t size, size_t count, void *arg) {
  fetch_answer *a = arg;
  size_t n = size * count;
  lua_State *L = a->L;
  if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) { /* a new response: forget the last one's */
    lua_newtable(L);
    lua_replace(L, a->headers_idx);
    return n;
  }
  const char *colon = memchr(data, ':', n), *end = data + n;
  if (!colon || colon == data) return n;
  char name[64];
  size_t name_len = (size_t)(colon - data);
  if (name_len >= sizeof name) return n;
  for (size_t i = 0; i < name_len; i++) name[i] = (char)tolower((unsigned char)data[i]);
  name[name_len] = '\0';
  const char *v = colon + 1;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && isspace((unsigned char)end[-1])) end--;
  lua_pushlstring(L, v, (size_t)(end - v));
  lua_setfield(L, a->headers_idx, name);
  return n;
}

static const char *opt_string_field(lua_State *L, int idx, const char *name, size_t *len) {
  lua_getfield(L, idx, name);
  const char *s = lua_isnil(L, -1) ? NULL : luaL_checklstring(L, -1, len);
  lua_pop(L, 1); /* the table keeps the string alive */
  return s;
}

static int fail(lua_State *L, const char *why) {
  lua_pushnil(L);
  lua_pushstring(L, why);
  return 2;
}

static int oauth_fetch(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  size_t body_len = 0;
  const char *method = opt_string_field(L, 1, "method", NULL);
  const char *url = opt_string_field(L, 1, "url", NULL);
  const char *body = opt_string_field(L, 1, "body", &body_len);
  lua_getfield(L, 1, "timeout_ms");
  lua_Integer timeout_ms = luaL_optinteger(L, -1, CLIENT_OAUTH_FETCH_TIMEOUT_MS);
  lua_pop(L, 1);
  if (!url) return luaL_error(L, "oauth_fetch needs a url");
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s is not an http:// or https:// URL", url);
    return 2;
  }
  char why[300];
  const curl_api *api = curl_lib_load("luamcp call --http", why, sizeof why);
  if (!api) return fail(L, why);

  /* The headers are checked first (a Lua error then leaks nothing), then
   * the list is built, used and freed here. */
  lua_getfield(L, 1, "headers");
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "oauth_fetch's headers are strings: name = value");
      const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
      if (strpbrk(name, ":\r\n") || strpbrk(value, "\r\n"))
        return luaL_error(L, "a header name or value with a newline or a colon in the name");
      lua_pop(L, 1);
    }
  }
  struct curl_slist *headers = NULL;
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
      buf line = BUF_INIT;
      buf_printf(&line, "%s: %s", name, value);
      headers = api->slist_append(headers, line.data);
      buf_free(&line);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);

  lua_newtable(L); /* the answer's headers */
  fetch_answer a = {.body = BUF_INIT, .L = L, .headers_idx = lua_gettop(L)};
  CURL *easy = api->easy_init();
  CURLM *multi = api->multi_init();
  api->easy_setopt(easy, CURLOPT_URL, url);
  api->easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  api->easy_setopt(easy, CURLOPT_USERAGENT, "luamcp");
  api->easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  api->easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  api->easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
  api->easy_setopt(easy, CURLOPT_WRITEDATA, &a);
  api->easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
  api->easy_setopt(easy, CURLOPT_HEADERDATA, &a);
  if (body) {
    api->easy_setopt(easy, CURLOPT_POSTFIELDS, body); /* the Lua string outlives the transfer */
    api->easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  }
  if (method && strcmp(method, body ? "POST" : "GET") != 0) api->easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
  api->multi_add_handle(multi, easy);
  CURLcode result = CURLE_OK;
  for (;;) {
    int running = 0;
    api->multi_perform(multi, &running);
    CURLMsg *m;
    int left;
    bool done = false;
    while ((m = api->multi_info_read(multi, &left)))
      if (m->msg == CURLMSG_DONE) {
        result = m->data.result;
        done = true;
      }
    if (done || !running) break;
    api->multi_poll(multi, NULL, 0, 1000, NULL);
  }
  long status = 0;
  api->easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  api->multi_remove_handle(multi, easy);
  api->easy_cleanup(easy);
  api->multi_cleanup(multi);
  api->slist_free_all(headers);
  if (result != CURLE_OK) {
    buf_free(&a.body);
    lua_pushnil(L);
    if (a.too_large)
      lua_pushfstring(L, "%s answered more than %d bytes", url, (int)CLIENT_OAUTH_MAX_BODY_BYTES);
    else
      lua_pushfstring(L, "cannot reach %s: %s", url, api->easy_strerror(result));
    return 2;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  lua_pushvalue(L, a.headers_idx);
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, a.body.data ? a.body.data : "", a.body.len);
  lua_setfield(L, -2, "body");
  buf_free(&a.body);
  return 1;
}

static void put_base64url(buf *out, const char *s, size_t n) {
  char *enc = malloc(base64_encoded_len(n) + 1);
  size_t len = base64url_encode((const unsigned char *)s, n, enc);
  buf_append(out, enc, len);
  free(enc);
}

/* jws_sign("ES256"|"RS256", pem, header_json, claims_json) */
static int jws_sign(lua_State *L) {
  const char *alg_name = luaL_checkstring(L, 1);
  size_t pem_len, header_len, claims_len;
  const char *pem = luaL_checklstring(L, 2, &pem_len);
  const char *header = luaL_checklstring(L, 3, &header_len);
  const char *claims = luaL_checklstring(L, 4, &claims_len);
  os_sig_alg alg;
  if (strcmp(alg_name, "ES256") == 0) alg = OS_SIG_ES256;
  else if (strcmp(alg_name, "RS256") == 0) alg = OS_SIG_RS256;
  else return fail(L, "the signing algorithm must be ES256 or RS256");
  buf jws = BUF_INIT;
  put_base64url(&jws, header, header_len);
  buf_putc(&jws, '.');
  put_base64url(&jws, claims, claims_len);
  uint8_t sig[OS_SIG_MAX_BYTES];
  size_t sig_len = 0;
  char why[200];
  if (!os_sign_pem(pem, pem_len, alg, jws.data, jws.len, sig, &sig_len, why, sizeof why)) {
    buf_free(&jws);
    return fail(L, why);
  }
  buf_putc(&jws, '.');
  put_base64url(&jws, (const char *)sig, sig_len);
  lua_pushlstring(L, jws.data, jws.len);
  buf_free(&jws);
  return 1;
}

static int l_base64_encode(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  char *enc = malloc(base64_encoded_len(n) + 1);
  base64_encode((const unsigned char *)s, n, enc);
  lua_pushlstring(L, enc, base64_encoded_len(n));
  free(enc);
  return 1;
}

static int credentials_allowed(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  char why[300];
  const curl_api *api = curl_lib_load("luamcp call --http", why, sizeof why);
  if (api && curl_lib_credentials_allowed(api, url, why, sizeof why)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, 0);
  lua_pushstring(L, why);
  return 2;
}

/* sha256_base64url(text): a PKCE S256 code challenge (RFC 7636 4.2), a
 * DPoP proof's ath (RFC 9449 4.2). */
static int sha256_base64url(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  uint8_t digest[OS_SHA256_BYTES];
  os_sha256(s, n, digest);
  buf out = BUF_INIT;
  put_base64url(&out, (const char *)digest, sizeof digest);
  lua_pushlstring(L, out.data, out.len);
  buf_free(&out);
  return 1;
}

/* random_base64url(n): n bytes from the OS's secure generator, base64url
 * (a PKCE code verifier, a state, a jti). */
static int random_base64url(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n > 0 && n <= 256, 1, "between 1 and 256 bytes");
  uint8_t bytes[256];
  if (!os_random_bytes(bytes, (size_t)n)) return luaL_error(L, "the OS has no secure random numbers to give");
  buf out = BUF_INIT;
  put_base64url(&out, (const char *)bytes, (size_t)n);
  lua_pushlstring(L, out.data, out.len);
  buf_free(&out);
  return 1;
}

/* dpop_key() -> {pem=, x=, y=} (x, y base64url) | nil, why */
static int dpop_key(lua_State *L) {
  char *pem = NULL, why[200];
  size_t pem_len = 0;
  uint8_t x[32], y[32];
  if (!os_ec_p256_generate(&pem, &pem_len, x, y, why, sizeof why)) return fail(L, why);
  lua_createtable(L, 0, 3);
  lua_pushlstring(L, pem, pem_len);
  lua_setfield(L, -2, "pem");
  free(pem);
  buf b = BUF_INIT;
  put_base64url(&b, (const char *)x, sizeof x);
  lua_pushlstring(L, b.data, b.len);
  lua_setfield(L, -2, "x");
  b.len = 0;
  put_base64url(&b, (const char *)y, sizeof y);
  lua_pushlstring(L, b.data, b.len);
  lua_setfield(L, -2, "y");
  buf_free(&b);
  return 1;
}

static int random_id(lua_State *L) {
  uint8_t bytes[16];
  if (!os_random_bytes(bytes, sizeof bytes)) return luaL_error(L, "the OS has no secure random numbers to give");
  char hex[2 * sizeof bytes + 1];
  for (size_t i = 0; i < sizeof bytes; i++) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  lua_pushstring(L, hex);
  return 1;
}

void client_oauth_register(lua_State *L, bool (*was_interrupted)(void)) {
  static const luaL_Reg fns[] = {
      {"oauth_fetch", oauth_fetch},
      {"jws_sign", jws_sign},
      {"base64_encode", l_base64_encode},
      {"random_id", random_id},
      {"sha256_base64url", sha256_base64url},
      {"random_base64url", random_base64url},
      {"dpop_key", dpop_key},
      {"credentials_allowed", credentials_allowed},
      {NULL, NULL},
  };
  luaL_setfuncs(L, fns, 0);
  client_redirect_register(L, was_interrupted);
  secret_file_register(L);
}

/*
 * curl_lib.h - libcurl, loaded on first use (os/dynlib.h) and never linked:
 * a luamcp that never makes an HTTP request starts as fast as before and
 * runs on a machine without libcurl. Used by mcp.http (lua_http.c) and by
 * the client side's Streamable HTTP connection (cli/client_http.c).
 *
 * A build that defines LUAMCP_CURL_STATIC links libcurl in instead (the
 * Windows .exe, with Schannel: no libcurl DLL to ship or find; the static
 * Linux runtimes, with OpenSSL and c-ares, as a static program cannot load
 * one), and the table holds the linked functions. Either way nothing of
 * libcurl runs before the first curl_lib_load.
 *
 * Every easy handle made through the table trusts the CA certificates one
 * rule chooses (curl_lib.c, find_cas), and the table's easy_strerror says,
 * for a certificate that could not be verified, where they came from.
 */
#ifndef LUAMCP_CURL_LIB_H
#define LUAMCP_CURL_LIB_H

#if defined LUAMCP_CURL_STATIC && !defined CURL_STATICLIB
#define CURL_STATICLIB /* curl.h: no __declspec(dllimport) on Windows */
#endif
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* The distributions' CA bundles, in the order a static Linux build looks
 * for them (find_cas), NULL-terminated: the first is where luamcp release
 * puts them in the OCI image, and where it takes them from. */
extern const char *const CURL_LIB_CA_BUNDLES[];

/* The libcurl functions luamcp calls. */
typedef struct curl_api {
  CURLcode (*global_init)(long flags);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_setopt)(CURLM *m, CURLMoption option, ...);
  CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int ev_bitmask, int *running);
  CURLMcode (*multi_perform)(CURLM *m, int *running);
  CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra_fds[], unsigned extra_nfds, int timeout_ms, int *numfds);
  CURLMsg *(*multi_info_read)(CURLM *m, int *msgs_in_queue);
  CURLMcode (*multi_add_handle)(CURLM *m, CURL *e);
  CURLMcode (*multi_remove_handle)(CURLM *m, CURL *e);
  CURLMcode (*multi_assign)(CURLM *m, curl_socket_t s, void *p);
  CURLMcode (*multi_cleanup)(CURLM *m);
  CURL *(*easy_init)(void);
  CURLcode (*easy_setopt)(CURL *e, CURLoption option, ...);
  CURLcode (*easy_getinfo)(CURL *e, CURLINFO info, ...);
  void (*easy_cleanup)(CURL *e);
  /* A connection made with CURLOPT_CONNECT_ONLY (the client's wss://: TLS
   * by libcurl, the WebSocket on top by libwslay): perform connects, send
   * and recv move bytes. */
  CURLcode (*easy_perform)(CURL *e);
  CURLcode (*easy_send)(CURL *e, const void *buffer, size_t buflen, size_t *n);
  CURLcode (*easy_recv)(CURL *e, void *buffer, size_t buflen, size_t *n);
  const char *(*easy_strerror)(CURLcode code);
  struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
  void (*slist_free_all)(struct curl_slist *list);
  /* The URL API (libcurl 7.62): mcp.http parses a URL once, judges the
   * host and port of that parse, and hands curl the parsed handle. */
  CURLU *(*url)(void);
  void (*url_cleanup)(CURLU *u);
  CURLUcode (*url_set)(CURLU *u, CURLUPart what, const char *part, unsigned int flags);
  CURLUcode (*url_get)(CURLU *u, CURLUPart what, char **part, unsigned int flags);
  void (*free)(void *p);
} curl_api;

/* libcurl's functions, loaded and initialized once per process; or NULL
 * with the reason (for the user, naming `who`: "mcp.http") in why. */
const curl_api *curl_lib_load(const char *who, char *why, size_t why_len);

/* May credentials (a client secret, a bearer token) go to url? https, or
 * plain http to a loopback host (localhost, 127.0.0.0/8, ::1): OAuth 2.1
 * 1.5, and MCP's exception for development. The host is the one libcurl
 * reads, the one it would connect to: never a pattern's guess, which
 * "http://127.0.0.1:1@elsewhere/" fools (127.0.0.1 is a user name there).
 * A URL with a user name or password is refused whatever its host: it is
 * how such a URL hides where it goes. The one rule for every URL that
 * credentials or tokens are sent to (the token verifier's, luamcp call's).
 * false with why, a clause for after the URL ("it has a user name ..."). */
bool curl_lib_credentials_allowed(const curl_api *api, const char *url, char *why, size_t why_len);

#endif

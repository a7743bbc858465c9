/*
 * curl_lib.h - libcurl, loaded on first use (os/dynlib.h) and never linked:
 * a luamcp that never makes an HTTP request starts as fast as before and
 * runs on a machine without libcurl. Used by mcp.http (lua_http.c) and by
 * the client side's Streamable HTTP connection (cli/client_http.c).
 *
 * A build that defines LUAMCP_CURL_STATIC links libcurl in instead (the
 * Windows .exe, with Schannel: no libcurl DLL to ship or find), and the
 * table holds the linked functions.
 */
#ifndef LUAMCP_CURL_LIB_H
#define LUAMCP_CURL_LIB_H

#if defined LUAMCP_CURL_STATIC && !defined CURL_STATICLIB
#define CURL_STATICLIB /* curl.h: no __declspec(dllimport) on Windows */
#endif
#include <curl/curl.h>

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

#endif

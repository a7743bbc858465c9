/*
 * curl_loop.h - libcurl's multi-socket interface driven from a libuv loop
 * (the integration curl documents, docs/examples/multi-uv.c): curl says
 * which sockets to watch and when to time out, one uv_poll per socket and
 * one uv_timer watch them, and every event goes back to
 * curl_multi_socket_action. Used by mcp.http (lua_http.c) and the token
 * verifier (auth_verifier.c), each with its own curl_loop.
 *
 * A finished transfer is taken out of the multi handle and its done called
 * once curl has returned (curl forbids calling back into the multi handle
 * from its own callbacks), so done may add or remove transfers, or close
 * the curl_loop.
 */
#ifndef LUAMCP_CURL_LOOP_H
#define LUAMCP_CURL_LOOP_H

#include <stdbool.h>
#include <uv.h>

#include "app/curl_lib.h"

/* One transfer, embedded in its owner's struct; the easy handle's
 * CURLOPT_PRIVATE points at it (curl_loop_add sets it). */
typedef struct curl_transfer {
  CURL *easy;
  bool in_multi; /* added and not yet finished or removed */
  /* The transfer ended (result CURLE_OK or why not): it is out of the
   * multi handle, the easy handle is still the owner's. */
  void (*done)(struct curl_transfer *t, CURLcode result);
  CURLcode result;                 /* set when it finished */
  struct curl_transfer *done_next; /* finished, done not called yet */
} curl_transfer;

/* A multi handle on a loop. Owner: whoever made it (curl_loop_new), until
 * curl_loop_close; the memory goes in the timer's close callback. */
typedef struct curl_loop curl_loop;

/* A multi handle on loop with api's functions; NULL when out of memory or
 * curl cannot make one. after (may be NULL) is called with data after every
 * turn of curl (the done callbacks included), for an owner that records
 * news in curl callbacks (a streamed chunk) and acts on it later. */
curl_loop *curl_loop_new(uv_loop_t *loop, const curl_api *api, void (*after)(void *data), void *data);
/* Start t (t->easy set up, t->done set); false when curl refused it. */
bool curl_loop_add(curl_loop *cl, curl_transfer *t);
/* Stop t now if it runs (closing its connection): done will not be
 * called. The easy handle stays the caller's. */
void curl_loop_remove(curl_loop *cl, curl_transfer *t);
/* Stop everything (no done is called: remove the transfers first, or
 * forget them), close the cached connections and the handles; the memory
 * goes on a later loop turn. */
void curl_loop_close(curl_loop *cl);

#endif

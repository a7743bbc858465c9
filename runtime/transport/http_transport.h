/*
 * http_transport.h - MCP's Streamable HTTP transport (2025-11-25, compatible
 * with 2025-03-26 and 2025-06-18 clients) on the libuv loop, with
 * http_parser for HTTP/1.1.
 *
 * One endpoint path answers POST (one message, or a batch on a 2025-03-26
 * session), GET (the session's SSE stream, or a resumption with
 * Last-Event-ID) and DELETE (ends the session). Each POST that carries a
 * request gets application/json, or text/event-stream as soon as its
 * handler sends anything before the result. Sessions, their SSE streams and
 * a bounded replay buffer live here; the MCP conversation itself is the
 * transport-independent session.c.
 */
#ifndef LUAMCP_HTTP_TRANSPORT_H
#define LUAMCP_HTTP_TRANSPORT_H

#include <stdbool.h>
#include <uv.h>

#include "core/server.h"
#include "core/session.h"

typedef struct http_options {
  char host[256];
  int port; /* 0: any free port (see http_bound_port) */
  char path[256];
  bool allow_remote;          /* binding a non-loopback address was asked for explicitly */
  const char **allow_hosts;   /* extra Host names accepted */
  int allow_host_count;
  const char **allow_origins; /* extra Origin hosts accepted */
  int allow_origin_count;
  const char *bearer_token;   /* required as "Authorization: Bearer ..." when set */
  int max_connections;
  int max_sessions;
  int session_timeout_ms;
  size_t buffer_bytes;        /* the budget for replay events, pending writes and held input */
} http_options;

typedef struct http_server http_server;

void http_options_defaults(http_options *o);
/* Listen. Returns NULL with a message in err when the address cannot be used. */
http_server *http_start(uv_loop_t *loop, server *srv, const http_options *opts, char *err, size_t err_len);
int http_bound_port(const http_server *h);
/* End every session and connection and stop listening; the handles close
 * on the next loop turns. */
void http_stop(http_server *h);

#endif

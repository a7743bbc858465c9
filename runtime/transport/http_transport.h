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

#include "core/auth.h"
#include "core/server.h"
#include "core/session.h"

/* What /metrics and /readyz report (transport/http_observe.c), from the
 * command line, which sees the app. Owner: the caller, for the life of
 * the server. */
typedef struct http_observe_hooks {
  /* Append the process's metrics (Prometheus text format) to out. */
  void (*metrics)(void *arg, buf *out);
  /* Ready to serve? When not, *why says why (a static sentence). */
  bool (*ready)(void *arg, const char **why);
  void *arg;
} http_observe_hooks;

typedef struct http_options {
  char host[256];
  int port; /* 0: any free port (see http_bound_port) */
  /* --http unix:SOCKET[:/PATH] (core/unix_url.h): listen on this local
   * socket (a Unix socket file; Windows: a named pipe, \\.\pipe\NAME)
   * instead of host:port, which keep their loopback defaults (reached from
   * this machine only: see check_headers); "" for TCP. The process that
   * made the file removes it when it stops listening (os/sock.h). */
  char local[108];
  int socket_mode; /* its permission bits (--socket-mode): 0600 by default */
  char path[256];
  /* The 2024-11-05 HTTP+SSE transport (http_legacy_sse.c): GET here opens
   * a session's stream, whose endpoint event names the path its POSTs go
   * to; "" turns it off (--no-sse). */
  char sse_path[256];
  /* WebSockets (http_ws.c): a GET here with Upgrade: websocket and the
   * mcp subprotocol becomes a session of its own on that connection, one
   * JSON-RPC message per text frame; "" is the MCP path (--ws-path). */
  char ws_path[256];
  bool allow_remote;          /* binding a non-loopback address was asked for explicitly */
  const char **allow_hosts;   /* extra Host names accepted */
  int allow_host_count;
  const char **allow_origins; /* extra Origin hosts accepted */
  int allow_origin_count;
  const char *bearer_token;   /* required as "Authorization: Bearer ..." when set */
  /* OAuth 2.1 resource server (auth.ops set): Protected Resource Metadata
   * at /.well-known/oauth-protected-resource[/PATH], every request's bearer
   * token checked by auth.ops, its identity given to the session. */
  auth_config auth;
  int max_connections;
  int max_sessions;
  int session_timeout_ms;
  size_t buffer_bytes;        /* the budget for replay events, pending writes and held input */
  /* --workers: this process is worker worker_index (1..worker_count) of a
   * supervisor; 0 for a process on its own. A worker does not listen: it
   * accepts from the supervisor's socket (http_worker_attach), and its
   * legacy session ids name it (see session ids in http_streamable.c). */
  int worker_index;
  int worker_count;
  char node[48];              /* --node NAME: the first part of session ids; "" for none */
  /* /metrics, /healthz and /readyz: NULL serves only /healthz. */
  const http_observe_hooks *observe;
  bool metrics_on_mcp_port;   /* /metrics answered on this listener too (not with OAuth: see http_observe.c) */
  /* The endpoint families served, in order of precedence, NULL-ended: the
   * program registers them (luamcp: HTTP_FAMILIES, http_routes.c), so the
   * connection code names none (http_route.h). */
  const struct http_route_family *const *families;
} http_options;

typedef struct http_server http_server;

void http_options_defaults(http_options *o);
/* Listen. Returns NULL with a message in err when the address cannot be used. */
http_server *http_start(uv_loop_t *loop, server *srv, const http_options *opts, char *err, size_t err_len);
int http_bound_port(const http_server *h);
/* End every session and connection and stop listening; the handles close
 * on the next loop turns. */
void http_stop(http_server *h);

/* The first step of a graceful stop (SIGTERM with --drain-time): close
 * the listening socket, so that new connections go to other workers or
 * instances (or are refused); close idle connections; end the streams that
 * are no work (the GET stream of legacy sessions, subscriptions/listen
 * calls; an HTTP+SSE stream carries its calls' answers, so it ends once
 * they are answered); answer every later request that would start work with 503 and
 * Connection: close. Calls in flight carry on and their responses go out
 * as usual. Returns the number of calls in flight. */
int http_drain(http_server *h);
/* Draining and done: no call in flight, no byte left to write. */
bool http_drained(const http_server *h);
/* Calls still being answered. */
int http_calls_in_flight(const http_server *h);

/* ---- --workers --------------------------------------------------------- */

/* Listen on the address once, for all workers: returns the listening
 * socket (port 0 resolved to a free port, in *port; 0 for a local socket),
 * which every worker inherits and accepts from; or -1 with a message in
 * err. */
int http_listen_shared(const http_options *opts, int *port, char *err, size_t err_len);
/* Its socket file goes (a local socket's: see http_options.local), just
 * before the socket is closed. */
void http_unlisten_shared(const http_options *opts);

/* Where a server listens, as a client writes it: "http://HOST:PORT/PATH"
 * (port: the bound one), or "unix:SOCKET:/PATH". */
void http_listen_url(const http_options *opts, int port, char *out, size_t out_len);

/* What a worker's IPC pipe to its supervisor tells the command that runs
 * the worker. */
typedef struct http_worker_hooks {
  void (*announce)(void *arg); /* every worker listens: say where we serve */
  void (*lost)(void *arg);     /* the supervisor is gone: shut down */
  void (*stop)(void *arg);     /* the supervisor says stop (Windows: its SIGTERM; see WORKER_STOP) */
  /* The supervisor's state key, when it comes as a frame (see WORKER_LISTEN_FD). */
  void (*state_key)(void *arg, const char *key, size_t len);
  /* A bus message (app/bus.h) another worker sent. */
  void (*bus)(void *arg, const char *message, size_t len);
  void *arg;
} http_worker_hooks;

/* Talk to the supervisor over the IPC pipe on fd (inherited): hand
 * connections whose requests name another worker's session over, take the
 * ones handed to us, pass bus messages both ways, and tell the supervisor
 * we serve. Accept new connections from listen_fd (the supervisor's
 * listening socket, inherited; -1: it comes over the pipe, as on Windows,
 * and we serve once it is there) whenever no handler computes here.
 * Returns 0 or a libuv error. */
int http_worker_attach(http_server *h, int fd, int listen_fd, const http_worker_hooks *hooks);
/* Send a bus message to every other worker (through the supervisor).
 * false (with *why) when it cannot leave. */
bool http_worker_publish(http_server *h, const char *message, size_t len, const char **why);

/* The rule of every listener (the MCP port, --metrics): an address that is
 * not loopback lets in anyone who can reach it, who then can do what
 * `exposed` says ("use your tools"), so it needs --allow-remote. False, with
 * the refusal in err, when it is not allowed. */
bool http_remote_allowed(const char *host, bool allow_remote, const char *exposed, char *err, size_t err_len);
/* The warning of an allowed listener that is not loopback (nothing for a
 * loopback one); `exposed` as for http_remote_allowed. */
void http_remote_warn(const char *host, const char *exposed);

/* ---- --metrics ADDR ------------------------------------------------------ */

/* A listener of its own for /metrics, /healthz and /readyz only (no MCP,
 * no auth: meant for an internal address); an address that is not
 * loopback needs allow_remote (http_remote_allowed). local: a local socket
 * (unix:SOCKET, made with socket_mode) instead of host:port, or "".
 * Returns NULL with err. */
typedef struct observe_listener observe_listener;
observe_listener *observe_listen(uv_loop_t *loop, const char *host, int port, const char *local, int socket_mode,
                                 bool allow_remote, const http_observe_hooks *hooks, char *err, size_t err_len);
int observe_bound_port(const observe_listener *l);
/* Stop listening; freed once its handles closed. */
void observe_close(observe_listener *l);
/* The HTTP server's own figures (connections, streams, buffer budget,
 * bytes in and out), appended to out; worker is the --workers index (0:
 * none). */
void http_metrics_format(const http_server *h, buf *out, int worker);
/* Everything /metrics shows on this server: the hooks' figures and the
 * server's own, and under --workers the other workers' last (each series
 * labelled worker="K", the families merged). */
void http_metrics_all(const http_server *h, buf *out);
/* Merge texts in the Prometheus text format into one: each family's HELP
 * and TYPE once, then its samples from every text. */
void observe_merge(const char *const *texts, const size_t *lens, int n, buf *out);

#endif

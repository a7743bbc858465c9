/*
 * client_conn.h - one connection from luamcp's client side (luamcp call,
 * read, prompt, and mcp.testing) to an MCP server, whatever carries it:
 *
 *   client_inprocess.c  a server loaded in this process from a folder,
 *                       spoken to through a loopback session (no pipes)
 *   client_child.c      a server started as a child, over its stdin/stdout
 *   client_http.c       a Streamable HTTP endpoint, through libcurl
 *   client_ws.c         a WebSocket (ws://), one message per text frame
 *
 * Each one delivers whole JSON-RPC messages (text) into the connection's
 * inbox; client.c gives them to Lua one at a time. Nothing here parses
 * JSON: the Lua client (lua/mcp/client.lua) does.
 */
#ifndef LUAMCP_CLIENT_CONN_H
#define LUAMCP_CLIENT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "core/buf.h"

/* A message received and not yet taken. Owner: the inbox. */
typedef struct client_message {
  struct client_message *next;
  size_t len;
  char json[];
} client_message;

typedef struct client_conn client_conn;

typedef struct client_conn_ops {
  /* Send one message. On failure, false with the reason in err. */
  bool (*send)(client_conn *c, const char *json, size_t len, buf *err);
  /* Send one message as if it carried a verified token: identity_json
   * ({"principal","subject","client_id","scopes":"a b","expires_at",
   * "claims":{...}}) is who the server's core sees (transport_ops.
   * request_identity). In process only (mcp.testing); NULL elsewhere. */
  bool (*send_as)(client_conn *c, const char *json, size_t len, const char *identity_json, buf *err);
  /* Let the connection make progress for at most timeout_ms (< 0: until
   * something happens). Returns false when nothing can happen any more
   * (no transfer, no handle, no task that could still answer). */
  bool (*wait)(client_conn *c, int timeout_ms);
  /* Reload the served scripts in place (in process only; NULL elsewhere).
   * On failure, false with the reason in err. */
  bool (*reload)(client_conn *c, buf *err);
  /* What the served generation's own library says it serves, as text or
   * JSON, appended to out (inspect.h; in process only, NULL elsewhere). */
  bool (*inspect)(client_conn *c, bool as_json, buf *out, buf *err);
  /* Set a header sent with every later request (HTTP only; NULL elsewhere). */
  void (*set_header)(client_conn *c, const char *name, const char *value);
  /* Send one message with extra headers ("Name: value" lines) for this
   * request only (HTTP only; NULL elsewhere: send is used, headers dropped). */
  bool (*send_with)(client_conn *c, const char *json, size_t len, char *const *lines, int n, buf *err);
  /* Open a GET stream (HTTP only): after delay_ms, with Last-Event-ID when
   * last_event_id is given (resuming a stream that closed), else the
   * standalone stream. False with the reason in err. */
  bool (*get_stream)(client_conn *c, const char *last_event_id, int delay_ms, buf *err);
  /* The SSE state (HTTP only): the last event id seen (or NULL), the
   * server's retry delay (ms, or -1), and how many streams ended cleanly. */
  void (*stream_state)(client_conn *c, const char **last_event_id, long *retry_ms, int *streams_ended);
  /* Why the standalone GET stream is over (the server refused or ended
   * it), or NULL while it is open or not yet answered (HTTP only). */
  const char *(*standalone_end)(client_conn *c);
  /* End the connection and free it (and the server, in process). */
  void (*close)(client_conn *c);
} client_conn_ops;

/* Owner: the Lua userdata that holds it (client.c), which calls
 * ops->close once, from conn:close() or its __gc. */
struct client_conn {
  const client_conn_ops *ops;
  uv_loop_t *loop;
  client_message *inbox, *inbox_tail;
  char *ended;   /* why no more messages will come (the server exited, the stream closed), or NULL */
  char *failure; /* a transport error for the request just sent (HTTP status, refused connection), or NULL */
  long failure_status;     /* HTTP: the status of that failure, or 0 */
  char *failure_challenge; /* HTTP: its WWW-Authenticate, or NULL */
  char *failure_body;      /* HTTP: its body (a JSON-RPC error, an OAuth error), or NULL */
  char *dpop_nonce;        /* HTTP: the last DPoP-Nonce a response carried (RFC 9449 9), or NULL */
  bool stream_ended;       /* HTTP: an answer stream ended (reported once by receive as "stream_ended") */
  const char *idle_reason; /* why nothing can answer once wait says so (static text), or NULL for the default */
};

/* Append a received message to the inbox (copied). */
void client_conn_deliver(client_conn *c, const char *json, size_t len);
/* Record why the connection ended (the first reason wins). */
void client_conn_end(client_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record a transport failure that the next receive reports (then clears). */
void client_conn_fail(client_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* From now on Ctrl-C does not kill the program: it is noted, for
 * client_conn_interrupted. */
void client_conn_catch_interrupt(void);
/* Whether Ctrl-C was pressed and not yet reported (once the program asked
 * to catch it): a long pause ends early. */
bool client_conn_interrupted(void);
/* The same, reported: true once per Ctrl-C (conn:receive says "interrupted"). */
bool client_conn_take_interrupt(void);
/* Free what the base holds (the inbox, the reasons), not the struct. */
void client_conn_release(client_conn *c);

/* One bounded turn of the loop for connections that live on it (in
 * process, child). libuv 1.44 runs due timers before it polls, so a wait
 * timer that is already due would leave the poll blocking: its callback
 * starts an idle handle, which makes that poll return at once. The
 * owner's handles' data must point at the owner: close callbacks get it. */
typedef struct loop_waiter {
  uv_timer_t timer;
  uv_idle_t wake;
} loop_waiter;

void loop_waiter_init(loop_waiter *w, uv_loop_t *loop, void *owner);
/* Run the loop once, for at most timeout_ms (< 0: until something
 * happens). Returns uv_run's value: 0 when nothing is left alive. */
int loop_waiter_turn(loop_waiter *w, int timeout_ms);
/* Close both handles; on_closed runs once for each. */
void loop_waiter_close(loop_waiter *w, uv_close_cb on_closed);

/* Options of a server loaded in process (mcp.testing): the run options
 * that matter to a test. Zero: run's default. */
typedef struct inprocess_options {
  int call_timeout_ms;
  int client_timeout_ms;
  int page_size;
  size_t memory_limit;
} inprocess_options;

/* Each returns a connection, or NULL with the reason in err. */
client_conn *client_inprocess_open(uv_loop_t *loop, const char *path, const inprocess_options *o, buf *err);
client_conn *client_child_open(uv_loop_t *loop, char *const argv[], buf *err);
client_conn *client_http_open(const char *url, buf *err);
/* headers: "Name: value\r\n" lines sent with the upgrade, or NULL. */
client_conn *client_ws_open(uv_loop_t *loop, const char *url, const char *headers, buf *err);

#endif

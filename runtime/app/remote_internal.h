/*
 * remote_internal.h - what the two files of luamcp.remote share and
 * nobody else uses: remote_conn.c (the connections, their hub and their
 * transports, a child over stdio, Streamable HTTP or a WebSocket) and lua_remote.c
 * (the Lua face, and the cancellations a task's going away sends). The
 * Lua face calls the connections, never the other way.
 */
#ifndef LUAMCP_REMOTE_INTERNAL_H
#define LUAMCP_REMOTE_INTERNAL_H

#include <http_parser.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/sse_reader.h"
#include "os/sock_watch.h"
#include "os/wslay.h"
#include "app/app.h"
#include "app/curl_loop.h"

#define REMOTE_MT "luamcp.remote.connection"

typedef struct remote_conn remote_conn;
typedef struct remote_post remote_post;

/* ---- Types ------------------------------------------------------------- */

typedef enum item_kind { ITEM_ANSWER, ITEM_MESSAGE, ITEM_FAILED } item_kind;

/* Something for a request's task. Owner: its remote_pending's queue,
 * until the task takes it. */
typedef struct remote_item {
  struct remote_item *next;
  item_kind kind;
  long status;     /* FAILED: the HTTP status (0: none came) */
  char *challenge; /* FAILED: WWW-Authenticate, or NULL */
  char *body;      /* FAILED: the start of the error body, or NULL */
  size_t body_len;
  size_t len;
  char text[]; /* ANSWER/MESSAGE: the JSON text; FAILED: why */
} remote_item;

/* A request sent whose answer the script has not taken yet. Owner: its
 * connection (pending list, in send order); removed when its answer or
 * failure is taken, or its waiting task goes away. */
typedef struct remote_pending {
  struct remote_pending *next, *prev;
  int64_t id;
  remote_item *items, *items_tail;
  int item_count;
  bool answered;             /* the answer (or a failure) is queued */
  struct remote_wait *waiter; /* the task waiting for it, or NULL */
  remote_post *post;         /* HTTP: the transfer whose stream carries its answer */
} remote_pending;

/* One h:wait of a task. Owner: the waiting task and the pending's waiter
 * pointer together; released (wait_release) when the task takes a result
 * or goes away, freed in its timer's close callback. */
typedef struct remote_wait {
  task_op op; /* first member: the task waits on it */
  remote_conn *conn;
  int64_t id;
  task *task; /* NULL once released */
  uv_timer_t timer; /* the wait's timeout */
  bool timed_out;
  bool queued; /* in hub->wake */
  struct remote_wait *wake_next;
} remote_wait;

/* A generation holding a connection. Owner: the connection's gens list;
 * removed when the generation's handles are all collected, or when it is
 * freed (listed in its vm->on_closed: release_with_generation). */
typedef struct remote_gen {
  struct remote_gen *next;
  remote_conn *conn;
  vm *vm;
  teardown held; /* in vm->on_closed */
  int fn_ref; /* on_message's function in vm->L's registry, or LUA_NOREF */
  int handles; /* its userdata for the connection not yet collected */
} remote_gen;

/* A header sent on every HTTP request of a connection. Owner: it. */
typedef struct remote_header {
  struct remote_header *next;
  char *name, *value;
} remote_header;

/* The connections of one app. Owner: the app (lua_app.remote), from the
 * first open; freed when the app stops and its last handle has closed. */
typedef struct remote_hub {
  lua_app *app;
  remote_conn *conns;
  int count;          /* connections not freed yet */
  int open_handles;   /* kick timer + connections' memory not yet freed */
  uv_timer_t kick;    /* resumes waiting tasks and runs on_message, outside curl and Lua */
  remote_wait *wake, *wake_tail;
  const curl_api *api;
  curl_loop *curl;    /* HTTP connections' transfers, made on first use */
  char curl_why[256];
  bool stopping;
  teardown stopped_with_app; /* in app->on_stop */
} remote_hub;

/* One connection. Owner: its hub; freed once no generation holds it, it
 * has ended, and every handle and transfer of it is closed. */
struct remote_conn {
  remote_conn *next, *prev;
  remote_hub *hub;
  char *key;   /* NULL: never shared */
  char *name;  /* for stderr lines and logs */
  bool http;
  int64_t next_id;
  char *ended; /* why it ended; NULL while open */
  bool end_delivered;
  remote_gen *gens; /* newest first */
  remote_pending *pending, *pending_tail;
  int pending_count;
  remote_item *unclaimed, *unclaimed_tail;
  int unclaimed_count;
  bool drop_logged;
  uv_timer_t timer; /* linger, the close's grace periods, or reading what an exited child wrote last */
  bool lingering;
  int open_handles;
  bool handles_closing;
  /* A child. */
  uv_process_t process;
  uv_pipe_t in, out, err;
  bool spawned, exited, term_sent;
  bool out_eof; /* its stdout reached its end: everything it said is routed */
  int kill_stage; /* closing: 0 stdin closed, 1 SIGTERM sent, 2 SIGKILL sent */
  int64_t exit_status;
  int term_signal;
  buf out_line, err_line;
  bool err_cut;
  /* A WebSocket (ws://): one session on one connection, as over stdio;
   * its messages are text frames (libwslay), routed as a child's lines. */
  bool ws;
  uv_tcp_t ws_tcp;
  uv_getaddrinfo_t ws_gai;
  uv_connect_t ws_connect;
  const os_wslay_api *ws_api;
  wslay_event_context_ptr ws_ctx;
  http_parser ws_parser;   /* the upgrade's answer */
  bool ws_upgraded, ws_in_value;
  char ws_key[32];         /* our Sec-WebSocket-Key */
  char *ws_host_header;    /* HOST:PORT for the upgrade's Host */
  char *ws_path;
  buf ws_field, ws_accept; /* a header's name as read; Sec-WebSocket-Accept */
  buf ws_in;               /* read, not yet taken by wslay */
  size_t ws_in_at;
  buf ws_out;              /* a flush's frames, written at once */
  /* wss://: libcurl connects and speaks TLS (a CONNECT_ONLY transfer,
   * performed on libuv's thread pool: the easy handle keeps the connection,
   * which a multi handle would keep in its own cache); then its socket is
   * watched and bytes go through curl's send and recv. */
  bool ws_tls;
  CURL *ws_easy;
  uv_work_t ws_work;
  CURLcode ws_connect_result;
  os_sock_watch *ws_watch;
  buf ws_tls_out;          /* waiting for the socket to take it */
  /* HTTP. */
  char *url;
  char *unix_socket; /* a unix:SOCKET[:/PATH] URL's socket (url is then http://localhost/PATH), or NULL */
  remote_header *headers;
  char *session_id;
  remote_post *posts;
  int post_count; /* transfers not freed yet */
};

typedef enum post_what { POST_MESSAGE, POST_RESUME, POST_DELETE } post_what;

/* One HTTP transfer of a connection. Owner: the connection's posts list;
 * freed in its timer's close callback (post_destroy). */
struct remote_post {
  curl_transfer transfer;
  remote_conn *conn;
  remote_post *next, *prev;
  post_what what;
  int64_t id; /* the request it carries or resumes ... */
  bool has_id;
  struct curl_slist *headers;
  char *body;
  size_t body_len;
  long status;
  bool sse, in_curl, destroyed, too_large;
  sse_reader reader;
  buf received;    /* a JSON answer, or an error's body (bounded) */
  char *challenge;
  int resumes;     /* resumptions so far */
  /* The request was cancelled: this stream is stopped once the
   * notifications/cancelled POST (whose abandons names the id) is done,
   * so the server hears the reason before it sees the stream go. */
  bool abandoned;
  bool has_abandons;
  int64_t abandons;
  uv_timer_t timer; /* the delay before a resumption starts */
};

/* ---- remote_conn.c ---- */

/* Resume waiting tasks and run on_message soon, outside curl and Lua. */
void remote_hub_kick(remote_hub *hub);
/* w's task has news: queue it for the hub's kick. */
void remote_wake(remote_wait *w);
/* The task is done with w (took a result, or went away). */
void remote_wait_release(remote_wait *w);
void remote_free_item(remote_item *it);
remote_pending *remote_find_pending(remote_conn *c, int64_t id);
void remote_pending_remove(remote_conn *c, remote_pending *p);
/* The app's hub, made on first use (NULL: out of memory). */
remote_hub *remote_hub_get(lua_app *app);
/* A header name or value (or a URL) we may send: no control byte. */
bool remote_header_ok(const char *s);
/* Free c once nobody holds it, it has ended, and nothing of it runs. */
void remote_conn_maybe_free(remote_conn *c);
/* It is gone or going: every waiting task hears why ("ended"). */
void remote_conn_end(remote_conn *c, const char *why);
void remote_conn_close(remote_conn *c, const char *why);
/* A generation let go of c: closed, or kept a while when keyed. */
void remote_conn_unheld(remote_conn *c);
/* Take the generation *p off its connection's list and free it. */
void remote_gen_drop(remote_gen **p);
remote_gen *remote_gen_of(remote_conn *c, vm *v);
/* v holds c (until its handles are collected or it is freed). */
bool remote_hold(remote_conn *c, vm *v);
/* The integer a request id or progress token names, if it is one. */
bool remote_id_of(const json_value *v, int64_t *out);
/* A child: send one message line. false, why: not sent. */
bool remote_child_send(remote_conn *c, const char *text, size_t len, char *why, size_t why_len);
/* Start the child: its pipes read. 0, or a libuv error. */
int remote_spawn_child(remote_conn *c, char **argv, char **env, const char *cwd);
/* A WebSocket: resolve, connect and upgrade (url: ws:// or wss://HOST[:PORT]/PATH),
 * messages sent meanwhile wait in wslay's queue. 0, or false with why. */
bool remote_ws_start(remote_conn *c, const char *url, char *why, size_t why_len);
/* A WebSocket: send one message (a text frame). false, why: not sent. */
bool remote_ws_send(remote_conn *c, const char *text, size_t len, char *why, size_t why_len);
/* HTTP: start a transfer (a message, a resumption GET or the DELETE). */
bool remote_post_start(remote_conn *c, post_what what, const char *body, size_t len, int64_t id, bool has_id,
                       lua_State *L, int extra_idx, char *why, size_t why_len);
/* HTTP: stop a transfer now. */
void remote_post_abort(remote_post *p);

#endif

/*
 * http.h - the pieces of the Streamable HTTP transport, shared by its
 * files and by nothing else (http_transport.h is the public side):
 *
 *   http_conn.c        TCP connections, http_parser, the rules every route
 *                      shares, writing responses, the listener and its
 *                      limits; requests go to the endpoint families
 *                      (http_route.h, listed in http_routes.c)
 *   http_streamable.c  Streamable HTTP's rules: POST, GET and DELETE on the
 *                      MCP endpoint, and the HTTP state of each session
 *   http_sse.c         where a session's messages go: JSON or SSE streams,
 *                      event ids and the Last-Event-ID replay ring
 *   http_legacy_sse.c  the 2024-11-05 HTTP+SSE transport: a session whose
 *                      every message goes down one GET stream, its POSTs
 *                      on a second path, answered 202
 *   http_auth.c        OAuth 2.1 resource server: Protected Resource Metadata,
 *                      bearer tokens checked (a request held while the
 *                      verifier answers later), 401/403 challenges
 */
#ifndef LUAMCP_HTTP_H
#define LUAMCP_HTTP_H

#include <http_parser.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/luamcp_limits.h"
#include "core/protocol.h"
#include "core/strmap.h"
#include "transport/http_transport.h"

typedef struct http_conn http_conn;
typedef struct http_session http_session;
/* A list of connections, least recently used first, linked through the
 * connections themselves (http_conn.lru_older, lru_newer). */
typedef struct conn_lru {
  http_conn *oldest, *newest;
} conn_lru;
typedef struct http_stream http_stream;
struct http_route_family; /* http_route.h */

/* One SSE event kept for Last-Event-ID replay. Owner: the session's ring. */
typedef struct replay_event replay_event;
struct replay_event {
  http_stream *stream;
  http_session *hs;
  uint64_t seq;
  char *data;
  size_t len;
  /* Every kept event of every session, oldest first: the server's buffer
   * budget drops from the front (see http_budget_enforce). */
  replay_event *older, *newer;
};

typedef enum stream_mode {
  STREAM_PENDING, /* nothing written yet: JSON if the answer comes first */
  STREAM_JSON,
  STREAM_SSE,
} stream_mode;

/* Where the messages of one POST (or of the session's GET stream) go. Its
 * number is part of every event id, so a Last-Event-ID names it. Owner: its
 * http_session; freed once complete, detached and out of the replay ring
 * (or with the session). */
struct http_stream {
  http_session *hs;
  unsigned long no;            /* 0 is the session's standalone GET stream */
  http_conn *conn;             /* where its bytes go now; NULL when detached */
  stream_mode mode;
  const protocol_version *version; /* of the request that opened it (MCP-Protocol-Version) */
  bool primed;                 /* a priming event gave the client an id to resume from */
  bool complete;               /* its final message was produced */
  int replay_refs;             /* events of this stream in the ring */
  bool held;                   /* handle_post is still using it: do not free */
  bool events_only;            /* an A2A streaming method's: even a lone result goes as an event stream */
  /* Who sent the request that opened it (a reference; NULL without
   * OAuth): transport_ops.request_identity of the messages it carries. */
  auth_identity *identity;
  /* A legacy HTTP+SSE POST's origin (http_legacy_sse.c): its Mcp-* and
   * MCP-Protocol-Version headers ("name\0value\0" pairs), kept for its
   * calls after the POST is answered 202. */
  buf legacy_headers;
  uint64_t last_write_ms;
  http_stream *prev, *next;
};

/* What a kind of session does differently from Streamable HTTP's: set by
 * the family that creates it (legacy HTTP+SSE, http_legacy_sse.c), so that
 * the session machinery never names it. Every field is required. */
typedef struct http_session_kind {
  /* transport_ops.send, .call_ended and .request_header for its sessions. */
  void (*send)(http_session *hs, const session_message *m);
  void (*call_ended)(session *s, call *cl);
  const char *(*request_header)(const http_stream *origin, const char *name);
  /* The connection of its standalone stream (no. 0) went. */
  void (*stream_closed)(http_stream *st);
  /* The once-a-second sweep, before the idle check: true when it
   * destroyed the session. */
  bool (*sweep)(http_session *hs);
} http_session_kind;

/* HTTP state of one MCP session. Owner: the http_server (sessions map and
 * list); freed when the session is deleted, expires, or the server stops. */
struct http_session {
  http_server *server;
  session *session;
  /* The server's one session for sessionless (2026-07-28) requests: never
   * registered, no replay (a modern stream cannot be resumed), and a
   * request's stream closing cancels its call. */
  bool stateless;
  /* A 2024-11-05 HTTP+SSE session (http_legacy_sse.c): every message goes
   * down its standalone stream (no. 0, the GET that opened it), and the
   * session ends with that stream. */
  bool legacy;
  const http_session_kind *kind; /* NULL: Streamable HTTP's */
  char id[HTTP_SESSION_ID_BYTES]; /* 128 random bits, hex; under --workers after "[NODE.]wK-" */
  bool registered;        /* in the map: initialize succeeded */
  uint64_t last_active_ms;
  unsigned long next_stream_no;
  uint64_t next_seq;
  http_stream *streams;
  replay_event ring[HTTP_REPLAY_EVENTS];
  size_t ring_start, ring_count, ring_bytes;
  http_session *prev, *next;
};

typedef enum conn_state {
  CONN_IDLE,       /* between requests */
  CONN_HEADERS,    /* reading a request's headers */
  CONN_BODY,       /* reading its body */
  CONN_RESPONDING, /* a response is being produced */
} conn_state;

/* One connection. Owner: the http_server (conns list); freed in the
 * close callback of its handle. */
struct http_conn {
  /* Its socket: a uv_tcp_t, or on a local socket (http_options.local) a
   * uv_pipe_t. Only accepting tells them apart (conn_accept): the rest
   * reads and writes &tcp as the uv_stream_t both are. */
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  };
  http_server *server;
  unsigned id;
  http_parser parser;
  conn_state state;
  /* The request being read. */
  buf url, field, value, body;
  size_t path_len; /* of url without its query or fragment: set when the headers are read, for the routes */
  bool in_value;
  size_t header_bytes;
  /* The endpoint family the request is for (http_route.h), its route and
   * the shared rules it is outside of; NULL when none claims it (404). */
  const struct http_route_family *family;
  int route;
  unsigned route_rules;
  char *host, *origin, *accept, *content_type, *session_id, *protocol_version, *last_event_id, *authorization;
  /* A WebSocket upgrade's headers (http_ws.c); Sec-WebSocket-Protocol's
   * repeats joined with commas, as one list. */
  char *upgrade, *ws_key, *ws_version, *ws_protocol;
  /* The other Mcp-* headers (Mcp-Method, Mcp-Name, Mcp-Param-*), which a
   * 2026-07-28 request must keep in agreement with its body: "name\0value\0"
   * pairs, names in lower case, values trimmed. */
  buf mcp_headers;
  bool origin_allowed; /* an Origin header was checked and allowed: CORS headers go out */
  int reject_status; /* set while parsing: answer with this and close */
  const char *reject_message;
  int reject_code;
  bool request_ready;
  uint64_t deadline_ms; /* for the current phase; 0 = none */
  uint64_t body_started_ms;
  bool keep_alive;
  bool close_after_response;
  /* Bytes read and not parsed yet: pipelined requests wait here while a
   * response is in progress, and are parsed strictly in order (conn_pump). */
  buf input;
  bool reading_stopped;
  bool pumping;      /* conn_pump is on the stack: it carries on by itself */
  bool handling;     /* on_later's conn_handle_request is on the stack: never closed at once */
  bool peer_eof;     /* the client shut down its side: answer what it sent, then close */
  bool probing;      /* ... and we watch for a reset (a full close, not a half close) */
  bool lingering;    /* answered and shut down: discarding input until EOF (conn_end) */
  /* Under --workers, the bytes of the request being read are kept from its
   * first byte until its headers are complete, in case it must be handed
   * over to the worker that owns its session: input[request_start..] is
   * that request, input[..fed] what the parser has seen already. */
  size_t request_start, fed;
  int handover_to;         /* the owner worker, once the headers named one */
  bool handing_over;       /* waiting for our writes to finish, then sending */
  bool handover_sent;      /* the socket is on its way: only the write callback closes it */
  bool handover_declined;  /* handed back (its owner is gone): answer the first request here */
  size_t linger_bytes;
  uv_shutdown_t shutdown_req;
  unsigned requests_done; /* complete requests read */
  /* The server's list of connections the cap may close that this one is
   * on (http_server.lingering_lru or idle_lru), or NULL. */
  conn_lru *lru;
  http_conn *lru_older, *lru_newer;
  /* Draining, the connection has a request the client sent (read, or
   * waiting in the socket): the stop waits for its answer (http_drained). */
  bool drain_owed;
  bool close_announced; /* the response in progress said Connection: close */
  http_stream *stream; /* the response stream using this connection */
  /* Taken over by its family after a 101 (http_route_upgrade): what it
   * reads goes to family->upgraded_input, never to the parser again; and
   * what the family holds of it (messages waiting for a handler to
   * finish), charged to the buffer budget like held input. */
  bool upgraded;
  size_t upgraded_held;
  void *upgraded_state; /* the family's own, for it to free in conn_gone */
  size_t pending_write_bytes;
  bool closing;
  /* Work for the next loop turn (see defer): never done from inside the
   * protocol core's send. */
  bool deferred, close_pending;
  bool request_held; /* arrived while a handler computed: handled on a later turn */
  /* OAuth (http_auth.c): the verified caller of the request being handled
   * (a reference, dropped with the request); the verifier's pending check
   * while the request is held for it (cancelled if the connection goes);
   * its verdict, once told, until the request is handled again. */
  auth_identity *identity;
  void *auth_pending;
  bool auth_answered;
  auth_verdict auth_answer;
  char *auth_resource;
  http_conn *deferred_next;
  http_conn *prev, *next;
};

struct http_server {
  uv_loop_t *loop;
  server *srv;
  http_options opts;
  /* A uv_tcp_t, or a uv_pipe_t on a local socket (see http_conn.tcp). */
  union {
    uv_tcp_t listener;
    uv_pipe_t local_listener;
  };
  uv_timer_t sweep;
  int port;
  unsigned next_conn_id;
  int conn_count;
  int conns_closing;     /* counted in conn_count until their close callback */
  http_conn *conns;
  /* The connections --max-connections may close to make room for a new
   * one (conn_accept), least recently used first: those done (a lingering
   * close), then those with no request in flight and no stream (one that
   * never sent a whole request, or a keep-alive one between requests).
   * Intrusive lists, so that the choice is O(1) however many are open. */
  conn_lru lingering_lru, idle_lru;
  /* The buffer budget (opts.buffer_bytes): replay events + pending writes +
   * held input (unparsed bytes and request bodies) + what sessions keep
   * from their clients (session_bytes: transport_ops.keep). */
  size_t buffered, replay_bytes, session_bytes;
  replay_event *replay_oldest, *replay_newest;
  bool budget_check;     /* over budget: enforce at the end of this turn */
  uv_timer_t probe;      /* watches half-closed connections for a reset */
  int probing;
  strmap sessions_by_id;
  http_session *stateless; /* sessionless requests (created with the server) */
  http_session *sessions;
  int session_count;
  unsigned next_session_name;
  http_conn *deferred;   /* connections with work for the next turn */
  uv_check_t later;      /* does that work at the end of this turn ... */
  uv_idle_t later_idle;  /* ... without blocking in poll first */
  struct http_worker *worker; /* --workers: the pipe to the supervisor (http_worker.c); NULL otherwise */
  const struct http_worker_ops *worker_ops; /* set with worker by http_worker_attach; NULL on its own */
  /* http_drain: no listener, no new work; calls in flight are answered
   * (see http_transport.h). */
  bool draining;
  bool stopping;
  uint64_t bytes_in, bytes_out; /* on every connection, for metrics (http_observe.c) */
  /* Where every connection's reads land (on_alloc): on_read copies them to
   * the connection's input at once, so one buffer serves all, and a
   * 64 KiB block is not malloc'd and freed per read (freeing one that size
   * makes glibc consolidate its small free chunks every time). */
  char *read_buf;
  buf response_buf; /* conn_send_response's, kept between responses (small ones) */
  int handles_closing;   /* after http_stop: freed when these and all conns have closed */
};

static inline uint64_t now_ms(http_server *h) { return uv_now(h->loop); }

/* ---- http_conn.c ---------------------------------------------------- */

void conn_close(http_conn *c);
/* Close at once (see the comment in http_conn.c: only for a connection
 * with no request being handled). */
void conn_close_now(http_conn *c);
void conn_write(http_conn *c, const char *data, size_t len);
void conn_response_done(http_conn *c);
void conn_send_response(http_conn *c, int status, const char *extra_headers, const char *content_type,
                          const char *body, size_t len);
void conn_write_status_line(http_conn *c, buf *out, int status);
void conn_defer(http_conn *c);
void conn_send_error(http_conn *c, int status, int code, const char *message, const char *extra_headers);
/* The value of an Mcp-* header of the request being handled (name in lower
 * case), or NULL. */
const char *conn_mcp_header(const http_conn *c, const char *name);
/* The share of the buffer budget every connection is sure of; it may use
 * more while the budget has room. */
size_t http_conn_share(const http_server *h);
/* Buffered bytes changed: check the budget at the end of this turn. */
void http_budget_changed(http_server *h);

/* A connection to a worker: handed over by the supervisor over the IPC
 * pipe `from` (a pending handle there), with the bytes the worker that read
 * them had not answered yet. declined: answer its first request here even
 * if it names another worker (its owner is gone). */
void conn_adopt(http_server *h, uv_stream_t *from, const char *bytes, size_t len, bool declined);
/* A connection a worker accepted itself from the shared listening socket
 * (fd: the accepted socket, ours from now on). */
void conn_accept_socket(http_server *h, int fd);
/* One of the server's own handles closed (after http_stop). */
void http_server_handle_closed(http_server *h);

/* ---- http_auth.c ---------------------------------------------------- */

/* OAuth's routes and its access rule are an endpoint family
 * (auth_metadata_family, see http_route.h); the session side asks these. */
bool http_auth_on(const http_server *h);
/* Append the 403 challenge for a call that needs the scopes required. */
void http_auth_scope_challenge(const http_conn *c, buf *headers, const char *required);

/* ---- http_worker.c -------------------------------------------------- */

/* What a worker's side does for the connections and /metrics, reached
 * through http_server.worker_ops (http_worker_attach sets it): the worker
 * code calls down into the connections, never the other way by name. */
typedef struct http_worker_ops {
  /* The worker that owns the session the request names, when it is
   * another worker of ours that the connection should go to; 0 to answer
   * here. */
  int (*owner)(const http_conn *c);
  /* Hand the connection, with its current request and the input after it
   * (input[request_start..]), to c->handover_to through the supervisor;
   * the connection is closed here once the socket is on its way. */
  void (*hand_over)(http_conn *c);
  /* http_drain: accept no more connections (the shared socket stays with
   * the other workers). */
  void (*stop_accepting)(http_server *h);
  /* http_stop: close the pipe and stop accepting (counted in
   * handles_closing). */
  void (*detach)(http_server *h);
  /* The other workers' last /metrics texts (at most cap); returns how many. */
  int (*peer_metrics)(const http_server *h, const char **texts, size_t *lens, int cap);
} http_worker_ops;

/* ---- http_sse.c ----------------------------------------------------- */

void sse_write(http_stream *st, const char *data, size_t len);
void stream_maybe_free(http_stream *st);
http_stream *stream_find(http_session *hs, unsigned long no);
void sse_event(http_stream *st, uint64_t seq, const char *json, size_t len);
void sse_prime(http_stream *st);
void sse_start(http_stream *st);
void stream_accept(http_stream *st);
void stream_detach(http_stream *st);
void stream_free(http_stream *st);
/* Drop the oldest kept replay event of any session; false when none. */
bool replay_drop_oldest(http_server *h);
/* Drop every replay event of a session (it is being destroyed). */
void replay_clear(http_session *hs);
http_stream *stream_new(http_session *hs, http_conn *c, const protocol_version *v, bool standalone);
/* session_ops for HTTP sessions: where the core's messages go. */
extern const transport_ops HTTP_SESSION_OPS;

/* ---- http_streamable.c ---------------------------------------------- */

void http_session_destroy(http_session *hs);
/* A new session, not registered yet; NULL without randomness for its id. */
http_session *http_session_create(http_server *h);
/* The session a request names (Mcp-Session-Id, or a legacy POST's
 * session_id), which must be of the transport asked for (legacy or not)
 * and its caller's: NULL after answering 400 or 404. */
http_session *streamable_lookup_session(http_conn *c, bool legacy);
/* Answer a CORS preflight on an MCP path. */
void streamable_answer_preflight(http_conn *c);
/* A request for a session arrived while a handler computes: a
 * cancellation for it is acted on at once (answered 202: true), and a
 * DELETE of a Streamable HTTP session cancels its calls at once. */
bool streamable_urgent(http_conn *c, bool legacy);
/* While the server drains: may this request to a session go on? */
bool streamable_drain_admits(http_conn *c);

#endif

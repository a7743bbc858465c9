/*
 * session.h - the MCP conversation with one client, independent of the
 * transport and of Lua.
 *
 * A transport (stdio, HTTP) feeds complete messages in with session_receive
 * and gets messages out through its transport_ops. Requests the core does not
 * answer itself (everything but initialize, ping, logging/setLevel and
 * resources/(un)subscribe) go to the app (the Lua VM) through app_ops; the app
 * answers with call_respond / call_fail. Nothing here touches libuv or Lua, so
 * the whole protocol layer runs under a unit test or a fuzzer.
 */
#ifndef LUAMCP_SESSION_H
#define LUAMCP_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/auth.h"
#include "core/buf.h"
#include "core/chain.h"
#include "core/json.h"
#include "core/luamcp_limits.h"
#include "core/jsonrpc.h"
#include "core/protocol.h"
#include "core/strmap.h"

typedef struct server server;
typedef struct session session;
typedef struct call call;
typedef struct batch batch;
typedef struct job job; /* an MCP task (jobs.h) */

typedef enum session_state {
  SESSION_NEW,         /* waiting for initialize */
  SESSION_READY,       /* initialize answered */
  SESSION_INITIALIZED, /* notifications/initialized received */
  SESSION_CLOSED,      /* ended; kept only until its owner frees it */
} session_state;

/* One message leaving the server, and what it belongs to, so HTTP can put
 * it on the right stream. */
typedef struct session_message {
  const char *json;
  size_t len;
  /* Or the message in pieces (core/chain.h): only for a transport whose
   * ops say it takes chains; the others get json and len. */
  const chain *chain;
  call *related;  /* the call it is part of (its response, progress, log, request to the client) */
  batch *batch;   /* a batch response ends this batch */
  void *origin;   /* the transport's exchange the triggering message came in on, or NULL */
  bool final;     /* this is the response that ends `related` (or `batch`, or answers `origin`) */
  bool unaddressed_error; /* an error with id null: the message itself was unusable */
  /* Streamable HTTP's status for this answer when it is not 200: the
   * 2026-07-28 era answers some errors with 400 or 404 (0: the default). */
  int http_status;
  /* With 403 (MCP_INSUFFICIENT_SCOPE): the scopes the caller needs,
   * space-separated, for the WWW-Authenticate challenge; else NULL. */
  const char *required_scopes;
} session_message;

/* Set by the transport that owns the session. send must not close or free
 * the session synchronously (a failed write is handled on a later loop
 * turn): the core is in the middle of answering when it calls send. */
typedef struct transport_ops {
  void (*send)(session *s, const session_message *m);
  /* send takes messages in pieces as they are (m->chain, holding its lease
   * for what it keeps); otherwise the session flattens them first. */
  bool chains;
  /* The call is about to be freed (answered or cancelled). Optional. */
  void (*call_ended)(session *s, call *c);
  /* End the stream the call answers on now, leaving the call running; the
   * client resumes it later (HTTP's Last-Event-ID). Returns false when the
   * transport cannot do that (stdio, or a stream that cannot be resumed).
   * Optional. */
  bool (*close_stream)(session *s, call *c);
  /* The value of a request header (name in lower case) of the exchange
   * origin, or NULL. Only transports with headers (HTTP) set it: 2026-07-28
   * requires the Mcp-* headers to agree with the body. Optional. */
  const char *(*request_header)(session *s, void *origin, const char *name);
  /* What the session keeps from its client (initialize's clientInfo and
   * capabilities, subscribed URIs) is about to grow by bytes: false
   * refuses it (HTTP: the buffer budget is full). release gives bytes
   * back, and is never refused. Optional: without them, everything within
   * the per-item limits (luamcp_limits.h) is kept. */
  bool (*keep)(session *s, size_t bytes);
  void (*release)(session *s, size_t bytes);
  /* Who sent the exchange origin (its verified bearer token), borrowed;
   * NULL when authorization is off or the transport has none (stdio).
   * Optional. */
  auth_identity *(*request_identity)(session *s, void *origin);
} transport_ops;

/* A subscriptions/listen call (2026-07-28): what it asked to hear about.
 * Owner: its call. */
typedef struct listener {
  bool tools, prompts, resources; /* the list_changed kinds */
  char **uris;                    /* resources/updated for these URIs */
  size_t uri_count;
  char **task_ids;                /* notifications/tasks for these MCP tasks */
  size_t task_id_count;
} listener;

/* A request from the client being handled. Owner: its session, which creates
 * it when the request arrives and frees it after the response is written or
 * the call is cancelled (telling the app and the transport first). */
struct call {
  session *session;
  jsonrpc_id id;
  char *method;
  const protocol_version *version;
  char *progress_token; /* raw JSON of params._meta.progressToken, or NULL */
  double last_progress;
  bool has_progress;
  /* A 2026-07-28 request carries what initialize said before: its own
   * client capabilities and info (JSON text, or NULL) and log level
   * (-1: the request asked for no log messages). A legacy request uses its
   * session's. */
  bool modern;
  char *client_capabilities_json;
  char *client_info_json;
  int log_level;
  listener *listener;   /* subscriptions/listen: the core holds it open */
  /* tasks/get, tasks/update or tasks/cancel for a job this process does not
   * hold (server.jobs_elsewhere): the app asks the others. */
  bool job_elsewhere;
  /* Who made the request (a reference), or NULL: see auth.h. A legacy
   * session's calls are its owner's. */
  auth_identity *identity;
  batch *batch;         /* the batch it arrived in, or NULL */
  void *app_data;       /* the app's state for this call */
  void *transport_data; /* HTTP: the exchange this call answers on */
  /* Observation (observe.h), filled only while the server has observers:
   * the target's name (owned), when it started, how its answer counts. */
  char *target;         /* points at target_small (never allocated) */
  char target_small[OBSERVE_TARGET_MAX_BYTES + 1]; /* cut there, UTF-8 safe */
  const json_value *observed_params; /* only while observers hear of its start */
  uint64_t started_ns;
  unsigned char outcome; /* a call_outcome */
  bool observed;
  bool target_known;  /* the app found the tool the target names (call_mark_target_known) */
  bool method_unknown; /* answered "method not found" */
  void *trace_span;     /* app/otel.c's server span for it, while traces are on; else NULL */
  call *prev, *next;    /* session->calls */
};

/* A 2025-03-26 batch collecting its responses. Owner: the session; freed
 * when its last call is answered (the array is sent then). */
struct batch {
  buf out;
  int pending;  /* calls not yet answered, plus one while the batch is being read */
  int answered; /* responses in out */
  void *origin;
};

/* A request we sent to the client and whose reply we await. Owner: the
 * session; freed when the reply arrives, the waiter gives up, or the session
 * closes (the callback then gets neither result nor error). */
typedef void (*client_reply_fn)(void *data, const json_value *result, const json_value *error);
typedef struct pending_request {
  long long id;
  client_reply_fn on_reply;
  void *data;
  struct pending_request *next;
} pending_request;

/* A URI the client subscribed to. Owner: the session, which lists them
 * (for walking, e.g. after a reload) and finds them by URI in a map. */
typedef struct subscription {
  char *uri;
  struct subscription *prev, *next;
} subscription;

/* One client's MCP session. Owner: the transport that accepted the client;
 * session_new / session_free. Sessions live in server->sessions. */
struct session {
  server *server;
  const transport_ops *transport;
  void *transport_data;
  char name[48];                    /* for logs and traces, e.g. "stdio" or "http#3" */
  session_state state;
  /* HTTP's shared session for sessionless (2026-07-28) requests: never
   * initialized, and its requests come from many clients, so a request id
   * is unique only within its exchange (origin). */
  bool sessionless;
  /* Its requests are not MCP (an A2A endpoint's: http_a2a.c): they come
   * in through session_receive_foreign, not session_receive, and the app
   * hands them to its entry for such calls, never to MCP's methods. */
  bool foreign;
  const protocol_version *version;  /* negotiated; NULL before initialize */
  char *client_info_json;           /* params.clientInfo of initialize, or NULL */
  char *client_capabilities_json;   /* params.capabilities of initialize, or NULL */
  int log_level;                    /* notifications/message at or above this severity are sent */
  call *calls;                      /* in flight */
  pending_request *pending;         /* our requests awaiting the client's reply */
  long long next_request_id;
  subscription *subscriptions;      /* at most LISTEN_MAX_URIS */
  size_t subscription_count;
  strmap subscribed;                /* uri -> its subscription; made on the first subscribe */
  size_t kept_bytes;                /* what transport->keep granted, released when the session is freed */
  /* Who initialized it (a reference), or NULL: only that principal may
   * use it (the transport answers anyone else 404, as for an unknown
   * session). */
  auth_identity *owner;
  /* Ids (JSON text) of cancellations that named no call in progress, most
   * recent SESSION_EARLY_CANCELS of them; a ring. Owner: the session. */
  char *early_cancels[SESSION_EARLY_CANCELS];
  unsigned early_cancel_next;
  session *prev, *next;             /* server->sessions */
};

session *session_new(server *srv, const transport_ops *ops, void *transport_data, const char *name);
/* Cancel every call, drop pending requests, mark closed. Idempotent. */
void session_close(session *s);
/* session_close and release. */
void session_free(session *s);

/* Handle one received message (the bytes of one stdio line or HTTP body).
 * origin is the transport's handle for where it came from (HTTP: the POST
 * exchange); answers to it carry the same origin. */
void session_receive(session *s, const char *json, size_t len, void *origin);
/* The same for a text the transport drops afterwards, which the session
 * may change: long strings are decoded where they are
 * (json_parse_in_place), so a big argument is not copied before Lua gets
 * it. */
void session_receive_in_place(session *s, char *json, size_t len, void *origin);

/* While a handler computes and the loop takes one turn from inside it
 * (server.nested_poll), a transport may pass each message it holds back to
 * this: a notifications/cancelled is acted on at once (so the handler can
 * be stopped); anything else is left for session_receive later, in order.
 * Returns whether the message was a cancellation. */
bool session_receive_urgent(session *s, const char *json, size_t len);
/* A cancellation session_receive_urgent took that the transport will not
 * pass to session_receive later (stdio does; HTTP answers it at once):
 * shown in the trace, and to wire observers, as received. */
void session_note_received(session *s, const char *json, size_t len);

/* An error that answers no request (id null): an unreadable or oversized
 * message. */
void session_send_error(session *s, void *origin, int code, const char *message);

/* A foreign session's request (session.foreign), classified by its
 * transport as a JSON-RPC request m: a call for it goes to the app as it is,
 * with none of MCP's rules (versions, capabilities, the core's methods). */
void session_receive_foreign(session *s, const jsonrpc_message *m, const char *src, void *origin);
/* One more response to the call, not its last: a protocol whose stream
 * answers one request with many (A2A's SSE) sends them this way. */
void call_respond_partial(call *c, const char *result_json, size_t len);

/* Answer a call: result_json is the complete result value. Frees the call. */
void call_respond(call *c, const char *result_json, size_t len);
/* The same with the result in pieces; the caller still holds its lease. */
void call_respond_chain(call *c, const chain *result);
void call_fail(call *c, int code, const char *message, const char *data_json, size_t data_len);
/* Refuse a call whose caller lacks required_scopes (space-separated):
 * MCP_INSUFFICIENT_SCOPE, and over HTTP a 403 challenge naming them. */
void call_fail_scope(call *c, const char *required_scopes, const char *message);
/* Progress for the call's progressToken. Returns NULL when sent or when the
 * request carried no token, or a message saying what was wrong. */
const char *call_progress(call *c, double progress, double total, const char *message, size_t message_len);

/* notifications/message for this session (filtered by its level). related
 * may be NULL. data_json is a complete JSON value. */
void session_log(session *s, call *related, int level, const char *logger, const char *data_json, size_t len);
/* Any notification. params_json may be NULL. */
void session_notify(session *s, call *related, const char *method, const char *params_json, size_t len);
/* Send a request to the client. Returns its id (> 0). */
long long session_request(session *s, call *related, const char *method, const char *params_json, size_t len,
                          client_reply_fn on_reply, void *data);
/* Stop waiting for a reply (the waiter was cancelled or timed out). */
void session_forget_request(session *s, long long id);
bool session_subscribed(const session *s, const char *uri, size_t len);
/* Cancel every call that arrived on origin (its answer has nowhere to go). */
void session_cancel_from(session *s, void *origin);
/* Is any call that arrived on origin still in flight? */
bool session_has_calls_from(const session *s, const void *origin);
/* What the client declared for this call: its request's own _meta in the
 * 2026-07-28 era, its session's initialize before (JSON text or NULL). */
const char *call_client_capabilities(const call *c);
const char *call_client_info(const call *c);
/* Has the client declared this capability (a top-level key of its
 * capabilities, e.g. "sampling") for this call, or in its session's
 * initialize? */
bool call_client_has_capability(const call *c, const char *name);
bool session_client_has_capability(const session *s, const char *name);

/* A notification to every session past initialize, and to every
 * subscriptions/listen call that asked for it (list_changed kinds). */
void server_broadcast(server *srv, const char *method, const char *params_json, size_t len);
/* notifications/resources/updated to sessions and listeners subscribed to uri. */
void server_resource_updated(server *srv, const char *uri, size_t len);
/* notifications/tasks (the job's state) to every listener following it,
 * and to srv->job_changed. */
void server_job_changed(server *srv, const job *j);
/* The same for a job of another process (params: the whole task), to this
 * process's listeners only: those of its owner (owner_principal, NULL for
 * nobody). */
void server_job_notify(server *srv, const char *id, const char *owner_principal, const char *params_json, size_t len);
/* End every subscriptions/listen call (a cancellation: their streams end
 * cleanly); returns how many. For a server that stops taking work. */
int server_end_listeners(server *srv);
/* Requests of every session still being answered (listen calls included). */
int server_calls_in_flight(const server *srv);
/* notifications/message to every session (each filters by its level). */
void server_log(server *srv, int level, const char *logger, const char *data_json, size_t len);

#endif

/*
 * server.h - the process-wide server: options, the app that implements the
 * behaviour, and every live session. Transports create sessions on it.
 */
#ifndef LUAMCP_SERVER_H
#define LUAMCP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/luamcp_limits.h"

/* Sessions and calls are session.h's: the server only lists them. */
typedef struct session session;
typedef struct call call;
typedef struct server server;
/* The MCP tasks the server holds (jobs.h). */
typedef struct job job;
typedef struct job_store job_store;
/* Who watches calls (observe.h). */
typedef struct call_observer call_observer;

/* What initialize and server/discover say about the server. Owner: the
 * app; valid until the app's next describe call. */
typedef struct app_description {
  const char *server_info_json; /* complete JSON object for serverInfo */
  const char *instructions;     /* NULL when none */
  const char *extensions_json;  /* capabilities.extensions (an object), or NULL */
  const char *cache_json;       /* server/discover's cache hints: `"ttlMs":N,"cacheScope":"..."`, or NULL */
  /* The Mcp-Param-* headers tools mirror arguments in ("x-mcp-header"), as
   * a list "Mcp-Param-a, Mcp-Param-b", or NULL: a CORS preflight allows
   * them. */
  const char *param_headers;
  /* mcp.server{auth = {...}} as a JSON object (lists as space-separated
   * strings), or NULL: the command line reads it once the scripts have
   * loaded, under its own --auth-* flags. */
  const char *auth_json;
  bool tools, resources, prompts, completions;
} app_description;

/* The behaviour behind the protocol: the Lua VM in luamcp, a stub in the
 * protocol tests and fuzzers. */
typedef struct app_ops {
  /* Start a request the core does not answer itself. params is valid only
   * during this call. The app must answer it with call_respond/call_fail,
   * now or later, unless call_cancel comes first. */
  void (*call_start)(void *app, call *c, const json_value *params, const char *src);
  /* Stop the work for a call; it is freed right after, with no answer. */
  void (*call_cancel)(void *app, call *c);
  void (*describe)(void *app, app_description *out);
  /* A notification the core does not handle itself (e.g. roots changed). */
  void (*notification)(void *app, session *s, const char *method, const json_value *params, const char *src);
  /* tasks/cancel: stop the work behind a job (work is its app_data). The
   * job is already cancelled; the app must not report to it again. */
  void (*job_cancel)(void *app, void *work);
  /* tasks/update brought answers to some of the job's questions. */
  void (*job_answered)(void *app, job *j);
  /* Can the app serve this URI (a resource, or a template that matches
   * it)? resources/subscribe takes no other: it would never hear of it.
   * Optional: without it any URI is taken. */
  bool (*resource_known)(void *app, const char *uri, size_t len);
  /* resource_known, and the scopes reading the URI needs (mcp.resource or
   * mcp.template {scopes = ...}), appended to required space-separated
   * (nothing when none): resources/subscribe and subscriptions/listen
   * follow a URI only for a caller that holds them. Optional: without it
   * resource_known decides alone. */
  bool (*resource_scopes)(void *app, const char *uri, size_t len, buf *required);
} app_ops;

typedef struct server_options {
  size_t max_message_bytes;
  int page_size;           /* 0: one page */
  int client_timeout_ms;   /* replies to sampling/elicitation/roots */
  int default_log_level;   /* a session's level until logging/setLevel */
  int call_timeout_ms;     /* a call's deadline unless its tool says otherwise (0: none) */
  int load_timeout_ms;     /* how long loading the scripts may take (0: no limit) */
  size_t memory_limit;     /* bytes a generation's Lua state may hold (0: no cap) */
  int max_tasks;           /* MCP tasks running at once (0: no cap) */
  int max_tasks_per_client; /* ... for one client (0: jobs_client_cap decides) */
  bool one_client;         /* the transport has one client (stdio): no per-client cap of its own */
  /* The command line's --allow-* permissions, as a JSON object (lua/mcp/
   * permissions.lua reads it), or NULL. Owner: the caller, for the life
   * of the server. */
  const char *permissions_json;
  /* --workers N: this process is worker worker_index of worker_count (1 of
   * 1 for a process alone); scripts read them in mcp.info(). */
  int worker_index;
  int worker_count;
} server_options;

struct server {
  server_options opts;
  const app_ops *app;
  void *app_data;
  session *sessions;
  int session_count;
  job_store *jobs;         /* every MCP task, whoever created it: made by jobs.c on first use, freed by jobs_release */
  /* > 0 while a long-running handler lets the loop run one turn from inside
   * itself (to see cancellations and flush output). Transports then only
   * buffer input, except cancellations and ended sessions, which they act on
   * at once; the app queues everything that would run Lua. */
  int nested_poll;
  /* Set by a transport that honours nested_poll (otherwise the app never
   * polls from inside a handler). */
  bool nested_poll_safe;
  /* Other processes hold jobs too (the app's bus, --redis): tasks/get,
   * tasks/update and tasks/cancel for a job this process does not hold
   * become calls the app forwards to the others (app_ops.call_start with
   * the tasks/ method), and subscriptions/listen follows such ids. */
  bool jobs_elsewhere;
  /* Told of every notifications/tasks this process sends for one of its
   * jobs (params: the whole task; owner_principal: its creator's, or NULL),
   * to pass on to the other processes; the app's. NULL: nobody. */
  void (*job_changed)(void *data, const char *id, const char *owner_principal, const char *params_json, size_t len);
  void *job_changed_data;
  /* Who watches calls start and end (observe.h): observe_add. With none,
   * a call pays one test of observer_count. */
  struct {
    const call_observer *ops;
    void *data;
  } observers[OBSERVE_MAX_OBSERVERS];
  int observer_count;
  /* Who watches every message go by (wire.h): wire_watch. */
  struct {
    const struct wire_observer *ops;
    void *data;
  } wire_observers[WIRE_MAX_OBSERVERS];
  int wire_observer_count;
};

void server_init(server *srv, const server_options *opts, const app_ops *app, void *app_data);

void server_options_defaults(server_options *opts);

#endif

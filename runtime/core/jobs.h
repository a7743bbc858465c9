/*
 * jobs.h - MCP tasks (the tasks extension, io.modelcontextprotocol/tasks,
 * SEP-2663): a tools/call answered at once with a handle, whose work goes
 * on in the background and whose result the client fetches with tasks/get.
 * They are called jobs here because `task` is the app's coroutine.
 *
 * The store is the server's, not a session's: a 2026-07-28 request stands
 * alone, so a job created on one HTTP connection is polled, answered and
 * cancelled from any other. The core answers tasks/get, tasks/update and
 * tasks/cancel itself; the app runs the work and reports its end (job_finish)
 * and what it asks the client (job_ask). Nothing here needs Lua or libuv.
 *
 * Limits (luamcp_limits.h): at most srv->opts.max_tasks jobs run at once,
 * and at most jobs_client_cap() of them for one client (the app says who);
 * a finished job is kept JOB_KEEP_MS. Everything the jobs keep (a running
 * job: what its work holds of its request; a finished or cancelled one: its
 * outcome) counts against JOB_KEPT_BYTES: past it the oldest finished jobs
 * go first, and a new job is refused while running ones hold it all.
 */
#ifndef LUAMCP_JOBS_H
#define LUAMCP_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/strmap.h"

typedef struct server server;
typedef struct protocol_version protocol_version;

#define JOBS_EXTENSION "io.modelcontextprotocol/tasks"

typedef enum job_status {
  JOB_WORKING,
  JOB_INPUT_REQUIRED,
  JOB_COMPLETED,
  JOB_FAILED,
  JOB_CANCELLED,
} job_status;

/* One question the work asked the client (an inputRequests entry). Keys are
 * unique over the job's life, so a key stays listed after it is answered or
 * abandoned. Owner: its job. */
typedef struct job_input {
  char *key;
  char *request_json;  /* {"method":...,"params":...} */
  char *response_json; /* the client's answer (tasks/update), NULL until then */
  void *waiter;        /* the app's work waiting for the answer; NULL: nobody waits any more */
  struct job_input *next;
} job_input;

/* An MCP task. Owner: the server's job_store; freed when it expires, is
 * evicted, or the store is freed. While its work runs, app_data is the
 * app's handle on it (a root coroutine), cleared by the app when the work
 * ends (job_finish or job_detach). */
typedef struct job {
  char id[33];            /* 128 random bits in hex: the id is a bearer token */
  job_status status;
  char *status_message;   /* or NULL */
  int64_t created_ms;     /* wall clock, ms since the epoch */
  int64_t updated_ms;
  uint64_t finished_ns;   /* monotonic clock, once terminal */
  int poll_interval_ms;
  char *outcome_json;     /* completed: the result object; failed: the error object */
  job_input *inputs;
  size_t bytes;           /* what it keeps (see held), its outcome and inputs cost against JOB_KEPT_BYTES */
  /* What the request that created it said, for the work's ctx, while it
   * runs (freed when it ends). Capabilities and clientInfo are kept whole
   * up to JOB_CLIENT_FIELD_BYTES, else as a skeleton (jobs.c). */
  char *method;
  char *request_id;       /* the creating request's id (JSON text) */
  char *client_capabilities_json;
  char *client_info_json;
  /* The principal of the identity that created it (auth.h), or NULL when
   * nobody was authenticated: tasks/get, tasks/update, tasks/cancel and
   * subscriptions/listen serve it to that principal only (anyone else is
   * told it does not exist). Kept for the job's whole life. */
  char *owner_principal;
  char *client_key;       /* who asked (the app's key for the client), counted in job_store.by_client while it runs */
  size_t held;            /* while it runs: bytes charged for its request (these strings, what its work holds) */
  const protocol_version *version;
  void *app_data;
  struct job *prev, *next;       /* store: in creation order */
  struct job *done_prev, *done_next; /* store: finished ones, in finishing order */
} job;

/* Owner: the server (server.jobs). */
typedef struct job_store {
  strmap by_id;
  job *first, *last;
  job *done_first, *done_last;
  size_t running;         /* jobs not yet terminal */
  size_t kept_bytes;
  strmap by_client;       /* client key -> its running jobs (a size_t the store allocates) */
} job_store;

/* Free the server's store (made on first use) and every job in it. */
void jobs_release(server *srv);

/* Does this client capabilities object (JSON text) declare the extension? */
bool jobs_declared(const char *client_capabilities_json);

/* How many jobs one client may run at once (0: no cap of its own):
 * --max-tasks-per-client, else a JOBS_CLIENT_SHARE-th of --max-tasks (at
 * least 1), so that one client cannot take every place; a server with one
 * client (stdio) has only the server's cap. */
int jobs_client_cap(const server *srv);

/* A new working job, or NULL with why it was refused in why (the server
 * runs --max-tasks, this client its share, or the running jobs hold the
 * whole JOB_KEPT_BYTES). owner_principal (auth_principal of its creator;
 * NULL or "": nobody was authenticated) is the only caller it answers. The strings are copied (the client's fields cut
 * down to JOB_CLIENT_FIELD_BYTES); work_bytes is what the work keeps of
 * the request besides them, charged while it runs. */
job *job_create(server *srv, const char *method, const char *request_id, const char *client_capabilities_json,
                const char *client_info_json, const protocol_version *version, int poll_interval_ms,
                const char *client_key, const char *owner_principal, size_t work_bytes, char *why, size_t why_size);
job *job_find(server *srv, const char *id, size_t len);
/* job_find for a caller (its principal, auth_principal: "" for nobody):
 * NULL when the job is another principal's, exactly as for an unknown id. */
job *job_find_for(server *srv, const char *id, size_t len, const char *principal);
/* Is the job principal's (the one that created it)? */
bool job_owned_by(const job *j, const char *principal);
static inline bool job_terminal(const job *j) { return j->status >= JOB_COMPLETED; }

/* The work ended: completed with a result object, or failed with a
 * JSON-RPC error object. Clears app_data. Ignored once terminal
 * (cancelled first). */
void job_finish(server *srv, job *j, bool completed, const char *json, size_t len, const char *status_message);
/* The work stopped without an outcome (the server is stopping): the job
 * fails with -32603 unless it already ended. Clears app_data. */
void job_detach(server *srv, job *j, const char *why);
/* Progress or a log line: the status message shown with the state. */
void job_set_message(server *srv, job *j, const char *message, size_t len);

/* Ask the client: add an inputRequests entry. Returns false when the key
 * was already used in this job. */
bool job_ask(server *srv, job *j, const char *key, const char *request_json, size_t len, void *waiter);
/* The answer to key, if it came (still owned by the job), else NULL. */
const char *job_answer(const job *j, const char *key);
/* A waiter gave up (its coroutine ended): its unanswered questions are no
 * longer outstanding. */
void job_abandon(server *srv, job *j, void *waiter);
/* Is any question of this waiter still unanswered? */
bool job_waiting(const job *j, void *waiter);

/* The task object: the CreateTaskResult (created: resultType "task", no
 * outcome), or a tasks/get result / notifications/tasks params (the
 * DetailedTask: outcome or inputRequests inlined; resultType "complete"
 * unless notification). */
typedef enum job_view { JOB_VIEW_CREATED, JOB_VIEW_GET, JOB_VIEW_NOTIFICATION } job_view;
void job_write(buf *out, const job *j, job_view view);

/* tasks/get, tasks/update, tasks/cancel (params is the request's params)
 * from principal (auth_principal of the caller): another principal's job
 * is answered as an unknown one.
 * Writes the result object into out and returns 0, or returns a JSON-RPC
 * error code with its message in *message. *changed is the job whose state
 * changed (listeners should hear of it), or NULL. A cancel tells the app
 * (app_ops.job_cancel) and an answer wakes it (app_ops.job_answered). */
int jobs_handle(server *srv, const char *method, const json_value *params, const char *principal, buf *out,
                job **changed, const char **message);

/* Drop finished jobs past JOB_KEEP_MS (called as the store is used). */
void jobs_expire(server *srv);

#endif

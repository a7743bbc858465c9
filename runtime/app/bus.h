/*
 * bus.h - the bus between the processes that serve as one server: every
 * process on one Redis (--redis: pub/sub, redis.c), or, without Redis, the
 * workers of one supervisor (--workers N: its IPC pipe, which passes a
 * worker's message to every other worker). What travels on it:
 *
 * - resources/updated raised by a script, for the other processes'
 *   subscribers and listeners;
 * - list_changed, after a reload or a change at run time (a tool disabled,
 *   a tool added by a tool), for the other processes' clients;
 * - mcp.everywhere: a named function of the scripts (one that registers or
 *   removes a tool at run time) and its arguments as JSON, run by every
 *   other process too, so that they all serve the same lists;
 * - tasks: a job lives in the process that runs it. tasks/get, tasks/update
 *   and tasks/cancel for a job this process does not hold (the core makes
 *   them calls: server.jobs_elsewhere) are sent as a request; the process
 *   that holds the job answers it (jobs_handle) with a reply addressed to
 *   the asker, which answers the call with it. No reply within
 *   BUS_FORWARD_TIMEOUT_MS: no process holds it (the same -32602 as one
 *   process gives). Every notifications/tasks a process sends for its jobs
 *   goes on the bus too, to the listeners of every process.
 * - agent tasks (A2A): a request about a task another process holds runs
 *   in that process, which sends its answers back, each event of a stream
 *   included (bus_forward_foreign); ListTasks gathers every process's
 *   share (bus_gather_tasks).
 *
 * A message is a JSON object {"node": SENDER, "kind": ..., ...}; a process
 * ignores its own (node is 128 random bits drawn at start). A transport
 * carries the text as it is, to every other process.
 */
#ifndef LUAMCP_BUS_H
#define LUAMCP_BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/server.h"
#include "core/session.h"

typedef struct bus bus;

/* What carries the messages. send: false (with *why) when the message
 * cannot leave now (Redis is down, the supervisor is gone). name says
 * which in error messages ("redis", "the supervisor"). */
/* How many processes received a message (this one included), once the
 * transport knows; -1: it never will (the connection went first). */
typedef void (*bus_heard_fn)(void *ctx, long long heard);
typedef struct bus_transport {
  bool (*send)(void *arg, const char *message, size_t len, const char **why);
  /* Optional: send, and call heard(ctx, n) exactly once when it returns
   * true (Redis: PUBLISH's reply counts the subscribers that got it). */
  bool (*send_counted)(void *arg, const char *message, size_t len, const char **why, bus_heard_fn heard, void *ctx);
  void *arg;
  const char *name;
  int peers; /* how many other processes hear each message (the workers' pipe), 0: not known (Redis: send_counted) */
} bus_transport;

/* A bus for srv with no transport yet (events stay in the process).
 * Owner: main; freed by bus_free. */
bus *bus_new(uv_loop_t *loop, server *srv);
/* Carry the messages with t (copied), or, with NULL, with nothing any
 * more. A transport makes srv ask the others for jobs it does not hold. */
void bus_set_transport(bus *b, const bus_transport *t);
/* Whether other processes serve this server too (a transport is set:
 * --workers, --redis). */
bool bus_is_shared(const bus *b);
/* A message from another process, as its transport received it. */
void bus_receive(bus *b, const char *text, size_t len);
/* Fail what still waits for a reply, and free the bus (its timers close
 * on their own). */
void bus_free(bus *b);

/* Events raised here (this process has delivered them already). Without a
 * transport, or while it is down, they are dropped. */
void bus_resource_updated(bus *b, const char *uri, size_t len);
/* Only the three list_changed notifications travel. */
void bus_list_changed(bus *b, const char *method);

/* Runs an mcp.everywhere call of another process (name, and args as a
 * JSON array); false when no Lua may run now: it is tried again on the
 * next loop turn. Set once by main, which runs it in the current
 * generation (mcp._everywhere, lua/mcp.lua). */
typedef bool (*bus_everywhere_fn)(void *arg, const char *name, size_t name_len, const char *args, size_t args_len);
void bus_on_everywhere(bus *b, bus_everywhere_fn fn, void *arg);
/* This process ran the mcp.everywhere function name with args (a JSON
 * array): the others run it too. */
void bus_everywhere(bus *b, const char *name, size_t name_len, const char *args, size_t args_len);

/* A foreign call (an A2A request, lua/mcp/a2a.lua) about a task this
 * process does not hold: ask the others. The one that holds it (bus_on_
 * foreign's holds) says so, runs the request as its own (a call of the
 * bus's session, in the generation holding the task), and sends back each
 * answer, a stream's partial ones too; it says every BUS_FOLLOW_ALIVE_MS
 * that the request still runs (this process answers that it still
 * follows it), and stops it when the call here ends (bus_forward_cancel)
 * or this process left BUS_FOLLOW_SILENCE_MS of those unanswered. Nobody within BUS_FORWARD_TIMEOUT_MS: the call
 * fails with not_found_code and not_found_message (static); the holder
 * silent for BUS_FOLLOW_SILENCE_MS: it fails as the holder gone.
 * params_json: the request's params. */
void bus_forward_foreign(bus *b, call *c, const char *params_json, size_t len, int not_found_code,
                         const char *not_found_message);
/* Whether some generation of this process holds the foreign task the
 * request (method, params as JSON) names for principal. */
typedef bool (*bus_holds_fn)(void *arg, const char *method, const char *params_json, size_t params_len,
                             const char *principal);
/* A ListTasks's share of this process (params as JSON, the caller's
 * principal, the newest `first` tasks wanted): appends to out one JSON
 * object per generation, each preceded by a comma. */
typedef void (*bus_list_fn)(void *arg, const char *params_json, size_t params_len, const char *principal, int first,
                            buf *out);
/* Set once by main (cli/main.c: every generation, app/vm.c). */
void bus_on_foreign(bus *b, bus_holds_fn holds, bus_list_fn list, void *arg);
/* Whether s is the bus's session, on which the other processes' requests
 * run (they are not asked on again). */
bool bus_owns_session(const bus *b, const session *s);
/* ListTasks: ask the other processes for their shares (bus_list_fn); done
 * gets a JSON array of them once every other process has answered
 * (bus_transport.peers: --workers N without Redis, N - 1; over Redis,
 * PUBLISH's count of subscribers less this one), or after
 * BUS_FORWARD_TIMEOUT_MS (one fell silent). NULL when
 * there are no others, or they cannot be asked now (done is never
 * called). bus_gather_cancel: done will not be called. */
typedef struct bus_gather bus_gather;
/* This process's share (bus_list_fn): every generation but one whose Lua
 * runs now (the asking one), appended to out. */
void bus_local_lists(bus *b, const char *params_json, size_t len, const char *principal, int first, buf *out);
typedef void (*bus_gather_fn)(void *data, const char *json, size_t len);
bus_gather *bus_gather_tasks(bus *b, const char *params_json, size_t len, const char *principal, int first,
                             bus_gather_fn done, void *data);
void bus_gather_cancel(bus_gather *g);
/* The server stops: the other processes' requests running here end (before
 * the generations they run in are freed). bus_free does it too. */
void bus_stop_requests(bus *b);
/* A tasks/ call for a job this process does not hold: ask the others. */
void bus_forward_job(bus *b, call *c, const json_value *params);
/* The call is cancelled: if it was a forwarded one, forget it (its reply,
 * if one comes, is dropped) and return true. */
bool bus_forward_cancel(bus *b, call *c);

/* 2 * bytes hex digits of the OS's randomness (and a NUL) into out: node
 * names, and the requestState key agreed through Redis. */
void bus_random_hex(char *out, size_t bytes);

#endif

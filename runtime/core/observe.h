/*
 * observe.h - watching requests go by: a hook the core calls when a call
 * (a request handed to the app, see session.h) starts and when it ends,
 * for metrics and traces. Nothing here formats or allocates: an observer
 * counts what it needs and does its own work later (a scrape, an export).
 *
 * With no observer registered a call costs one test of a counter; with
 * one, two reads of the monotonic clock and a copy of the target's name.
 */
#ifndef LUAMCP_OBSERVE_H
#define LUAMCP_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct server server;
typedef struct call call;

/* How a call ended. The core decides OK, PROTOCOL_ERROR (answered with a
 * JSON-RPC error) and CANCELLED; the app says TOOL_ERROR (a tools/call
 * result with isError) and TIMEOUT (its deadline passed) with
 * call_set_outcome before answering. */
typedef enum call_outcome {
  CALL_OK,
  CALL_TOOL_ERROR,
  CALL_PROTOCOL_ERROR,
  CALL_TIMEOUT,
  CALL_CANCELLED,
} call_outcome;
#define CALL_OUTCOME_COUNT 5

/* "ok", "tool_error", "protocol_error", "timeout", "cancelled". */
const char *call_outcome_name(call_outcome o);

/* An observer: both functions run on the loop, inside the core, while the
 * call is valid (finished runs just before the call is freed). They must
 * not answer, cancel or free the call. Owner: whoever registers it, for
 * the life of the server (or until observe_remove). */
typedef struct call_observer {
  void (*started)(void *data, call *c);
  void (*finished)(void *data, call *c, call_outcome outcome, uint64_t duration_ns);
} call_observer;

/* What an observer may read of a call (the call's own fields are in
 * session.h: method, id.raw, session->name, version->name). */
/* tools/call's and prompts/get's params.name, resources/read's params.uri,
 * or NULL. Set only while an observer is registered. */
const char *call_target(const call *c);
/* The session's id for logs ("stdio", "http#3"). */
const char *call_session_name(const call *c);
/* The negotiated protocol version ("2025-06-18"), or NULL. */
const char *call_protocol_version(const call *c);
/* The request's params (e.g. _meta.traceparent), or NULL: only inside
 * call_observer.started (they are not kept afterwards). */
typedef struct json_value json_value;
const json_value *call_params(const call *c);

/* Register an observer (at most OBSERVE_MAX_OBSERVERS, luamcp_limits.h).
 * Returns false when full. */
bool observe_add(server *srv, const call_observer *ops, void *data);
void observe_remove(server *srv, const call_observer *ops, void *data);

/* The app marks how its answer should count (TOOL_ERROR, TIMEOUT); the
 * next answer keeps it. */
void call_set_outcome(call *c, call_outcome o);
/* Is someone watching this call (worth finding its outcome)? */
bool call_observed(const call *c);
/* The app found the tool call_target names (a tools/call of a tool it
 * has): only then may an observer use the name as a label, since a
 * client may send any name. */
void call_mark_target_known(call *c);
bool call_target_known(const call *c);
/* False when the call was answered "method not found" (any method name a
 * client sends would otherwise become a label). */
bool call_method_known(const call *c);

/* The length of s[0..len) cut to at most max bytes without splitting a
 * UTF-8 character. */
size_t observe_utf8_cut(const char *s, size_t len, size_t max);

/* For session.c: a call handed to the app starts (params may be NULL),
 * and one that started ends (before it is freed). */
void observe_call_started(call *c, const json_value *params);
void observe_call_finished(call *c);

#endif

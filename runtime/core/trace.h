/*
 * trace.h - W3C Trace Context (https://www.w3.org/TR/trace-context/): the
 * `traceparent` and `tracestate` a request carries (in params._meta, the
 * MCP convention, or in HTTP headers), read strictly, and written for the
 * requests luamcp makes. Ids come from the OS's secure generator
 * (os/crypto.h). No Lua, no libuv: app/otel.c builds spans on it.
 */
#ifndef LUAMCP_TRACE_H
#define LUAMCP_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/luamcp_limits.h"

enum {
  TRACE_ID_BYTES = 16,
  TRACE_SPAN_ID_BYTES = 8,
  TRACE_ID_HEX = 2 * TRACE_ID_BYTES,
  TRACE_SPAN_ID_HEX = 2 * TRACE_SPAN_ID_BYTES,
  /* "00-" trace id "-" span id "-" flags */
  TRACEPARENT_LEN = 3 + TRACE_ID_HEX + 1 + TRACE_SPAN_ID_HEX + 3,
  TRACE_FLAG_SAMPLED = 0x01,
};

/* Where a span sits: its trace, its own id, its flags, and the vendors'
 * tracestate (NUL-terminated, "" when none). A value; no owner. */
typedef struct trace_context {
  uint8_t trace_id[TRACE_ID_BYTES];
  uint8_t span_id[TRACE_SPAN_ID_BYTES];
  uint8_t flags;
  char tracestate[TRACESTATE_MAX_BYTES + 1];
} trace_context;

/* Where a span sits, copied into whatever outlives it (a task): its
 * trace, its own id and its flags; set is false for "no span". A value. */
typedef struct trace_ids {
  uint8_t trace_id[TRACE_ID_BYTES];
  uint8_t span_id[TRACE_SPAN_ID_BYTES];
  uint8_t flags;
  bool set;
} trace_ids;

/* Read a traceparent header's value (len bytes, no NUL needed) into out's
 * trace id, span id and flags (out's tracestate becomes ""). False, out
 * untouched, for anything the specification says to ignore: a version
 * other than 2 lowercase hex digits or "ff", upper-case hex, an all-zero
 * trace or span id, a wrong length (version 00 is exactly 55 bytes; a
 * later version may go on after a '-'). */
bool trace_parse_traceparent(const char *s, size_t len, trace_context *out);

/* Is s (len bytes) a tracestate to pass on: list members "key=value"
 * separated by commas (spaces and tabs around them), keys and values as
 * the specification spells them, at most TRACESTATE_MAX_MEMBERS members
 * and TRACESTATE_MAX_BYTES bytes? One that is not is dropped whole. */
bool trace_tracestate_valid(const char *s, size_t len);

/* Set ctx's tracestate to s when valid (true), else to "" (false). */
bool trace_set_tracestate(trace_context *ctx, const char *s, size_t len);

/* ctx as a traceparent value (version 00): TRACEPARENT_LEN bytes and a NUL. */
void trace_format_traceparent(const trace_context *ctx, char out[TRACEPARENT_LEN + 1]);

/* n bytes as lower-case hex, and a NUL: out holds 2n + 1. */
void trace_hex(const uint8_t *bytes, size_t n, char *out);

/* New random ids, never all zero; false when the OS has no randomness. */
bool trace_new_trace_id(uint8_t out[TRACE_ID_BYTES]);
bool trace_new_span_id(uint8_t out[TRACE_SPAN_ID_BYTES]);

/* url, for a span's url.full, appended to out with its credentials
 * redacted as the OpenTelemetry HTTP conventions ask: a user:password@
 * becomes REDACTED:REDACTED@, and the values of the query parameters
 * known to carry signatures (AWSAccessKeyId, Signature, sig,
 * X-Goog-Signature) become REDACTED. */
void trace_redact_url(const char *url, buf *out);

#endif

/*
 * otel.h - OpenTelemetry traces: a server span per request (the semantic
 * conventions for MCP), client spans for what a request does (mcp.http,
 * mcp.exec, requests to the client), exported as OTLP over HTTP/JSON to
 * the collector the standard OTEL_* variables name, in batches, from the
 * loop, never waiting: a slow or dead collector costs dropped spans
 * (counted), never a delayed call.
 *
 * Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set;
 * off, every hook is one test of otel_on.
 */
#ifndef LUAMCP_OTEL_H
#define LUAMCP_OTEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/trace.h"

typedef struct server server;
typedef struct call call;

/* Set by otel_start when traces are exported; test it before any other
 * call below. */
extern bool otel_on;

/* Where a span sits (core/trace.h). */
typedef trace_ids otel_ids;

/* OTLP's SpanKind values. */
typedef enum otel_kind { OTEL_KIND_INTERNAL = 1, OTEL_KIND_SERVER = 2, OTEL_KIND_CLIENT = 3 } otel_kind;

/* One span being timed. Owner: whoever started it, until otel_span_end
 * (which queues it for export and frees it). */
typedef struct otel_span otel_span;

/* Read the OTEL_* environment; when it asks for traces, export them from
 * loop and watch srv's calls (core/observe.h). False, with why, when the
 * configuration is unusable (traces stay off; the caller warns). */
bool otel_start(uv_loop_t *loop, server *srv, char *why, size_t why_len);
/* The TCP port the collector listens on (0: off), for the confinement
 * (app/confine.h) to let luamcp connect to it. */
unsigned otel_collector_port(void);
/* At exit: run the loop until every waiting span is posted and answered,
 * or OTEL_SHUTDOWN_FLUSH_MS have passed. */
void otel_flush(void);
/* Stop exporting: what is still queued or being posted is dropped. */
void otel_stop(void);

/* Spans dropped (the queue was full, or their export failed), and spans
 * the collector took: for /metrics. */
uint64_t otel_dropped_spans(void);
uint64_t otel_exported_spans(void);

/* A span named name (copied) under parent (NULL or !set: a new trace).
 * The sampler decides whether it is recorded; either way it has ids.
 * Only while otel_on. */
otel_span *otel_span_start(const char *name, otel_kind kind, const otel_ids *parent);
void otel_span_ids(const otel_span *s, otel_ids *out);
/* Attributes (values cut at OTEL_MAX_ATTRIBUTE_BYTES). */
void otel_attr_str(otel_span *s, const char *key, const char *value);
void otel_attr_strn(otel_span *s, const char *key, const char *value, size_t len);
void otel_attr_int(otel_span *s, const char *key, int64_t value);
/* The span failed: error.type, and the status ERROR with message (NULL:
 * error_type). */
void otel_span_fail(otel_span *s, const char *error_type, const char *message);
/* End s (NULL: nothing): queued for export when recorded; freed. */
void otel_span_end(otel_span *s);

/* ids as a traceparent value (TRACEPARENT_LEN bytes and a NUL). */
void otel_traceparent(const otel_ids *ids, char out[TRACEPARENT_LEN + 1]);
/* The server span of a call while it runs, or NULL. */
otel_span *otel_call_span(const call *c);

#endif

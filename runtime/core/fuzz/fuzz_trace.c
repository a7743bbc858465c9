/* fuzz_trace.c - libFuzzer target: W3C Trace Context (trace.c). The input
 * is read as a traceparent and as a tracestate: never a crash; a
 * traceparent accepted has non-zero ids and, written back as version 00,
 * parses to the same ids; a tracestate accepted is within the bounds and
 * is kept whole by trace_set_tracestate. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  trace_context c, back;
  if (trace_parse_traceparent(s, size, &c)) {
    char out[TRACEPARENT_LEN + 1];
    trace_format_traceparent(&c, out);
    if (!trace_parse_traceparent(out, TRACEPARENT_LEN, &back)) abort();
    if (memcmp(back.trace_id, c.trace_id, TRACE_ID_BYTES) || memcmp(back.span_id, c.span_id, TRACE_SPAN_ID_BYTES) ||
        back.flags != c.flags)
      abort();
    static const uint8_t zero[TRACE_ID_BYTES];
    if (!memcmp(c.trace_id, zero, TRACE_ID_BYTES) || !memcmp(c.span_id, zero, TRACE_SPAN_ID_BYTES)) abort();
  }
  if (trace_tracestate_valid(s, size)) {
    if (size > TRACESTATE_MAX_BYTES) abort();
    if (!trace_set_tracestate(&c, s, size) || strlen(c.tracestate) != size) abort();
  }
  return 0;
}

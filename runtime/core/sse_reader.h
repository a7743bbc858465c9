/*
 * sse_reader.h - reading a text/event-stream (Server-Sent Events, the
 * WHATWG HTML rules) as its bytes arrive: lines end in CRLF, LF or CR; an
 * event's data lines are joined by "\n" and handed over at the blank line
 * that ends it; "id:" sets the last event id (what a client sends back as
 * Last-Event-ID to resume the stream), "retry:" the reconnection delay;
 * comments and other fields carry nothing a message needs. An event
 * without data (an MCP server's priming event: an id only) is not handed
 * over. An event the stream cuts short is dropped, as the rules say.
 *
 * Bounded: a line or an event's data over max_bytes stops the reader (feed
 * returns false), so a server cannot grow a client's memory without limit.
 */
#ifndef LUAMCP_SSE_READER_H
#define LUAMCP_SSE_READER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/luamcp_limits.h"

/* Where one stream's reading is. Owner: whoever reads the stream;
 * sse_reader_free releases its buffers. */
typedef struct sse_reader {
  buf line;          /* a line read in part */
  buf data;          /* the data lines of the event being read */
  bool after_cr;     /* the last byte was a CR: an LF next belongs to it */
  size_t max_bytes;  /* a line's or an event's data's limit */
  char last_id[SSE_MAX_EVENT_ID_BYTES + 1]; /* the last "id:" seen ("" none) */
  bool id_seen;
  long retry_ms;     /* the last valid "retry:", or -1 */
} sse_reader;

/* An event with data (len bytes, NUL-terminated). */
typedef void (*sse_event_fn)(void *arg, const char *data, size_t len);

void sse_reader_init(sse_reader *r, size_t max_bytes);
/* Read n more bytes, calling on_event for every event they complete.
 * false when a line or an event grew past max_bytes (stop reading). */
bool sse_reader_feed(sse_reader *r, const char *p, size_t n, sse_event_fn on_event, void *arg);
void sse_reader_free(sse_reader *r);

#endif

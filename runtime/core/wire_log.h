/*
 * wire_log.h - what the web inspector keeps of the wire: a bounded history
 * of events (a message in or out, a reload, a connection opening or
 * closing), each numbered and formatted once, as the server-sent event the
 * page reads (transport/ui_http.c sends the same bytes to every page and
 * replays them to one that reconnects). No Lua, no libuv.
 *
 * Every event is one SSE frame, "id: SEQ\ndata: {JSON}\n\n", whose JSON is
 * {"seq":SEQ,"t":MS,"kind":...} (the fields are the page's contract,
 * docs/inspector.md). The newest UI_HISTORY_MAX_EVENTS events within
 * UI_HISTORY_MAX_BYTES are kept; older ones are dropped and counted.
 */
#ifndef LUAMCP_WIRE_LOG_H
#define LUAMCP_WIRE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* One event as it is sent. Owner: the log, until it drops it; a sender
 * that still writes it holds a reference (refs). */
typedef struct wire_event {
  uint64_t seq;
  int refs;       /* the log's own, plus one per write in progress */
  size_t len;
  char frame[];   /* len bytes: the SSE frame */
} wire_event;

/* Owner: whoever embeds it; wire_log_free releases every event it holds. */
typedef struct wire_log {
  wire_event **ring;
  size_t cap;          /* slots in ring (max_events) */
  size_t head;         /* the oldest event's slot */
  size_t count;
  size_t bytes;        /* frames' bytes held */
  size_t max_bytes;
  size_t max_text;     /* a message's text is cut to this many bytes */
  uint64_t next_seq;   /* 1 for the first event */
  uint64_t dropped;    /* events dropped to stay within the bounds */
} wire_log;

void wire_log_init(wire_log *l, size_t max_events, size_t max_bytes, size_t max_text);
void wire_log_free(wire_log *l);

/* A message of connection conn ("stdio", "http#3", "ui"), seen at t_ms
 * (ms since the epoch): kind "message", dir "c2s" or "s2c", the protocol
 * version its session negotiated when it has one (version, or NULL: a
 * page that no longer holds the initialize still knows the era), and its
 * text as a JSON string (cut at max_text bytes without splitting a UTF-8
 * character, with "truncated": its length). */
const wire_event *wire_log_message(wire_log *l, double t_ms, const char *conn, const char *version, bool from_client,
                                   const char *json, size_t len);
/* Any other event: fields is the rest of its JSON object, without braces,
 * starting with "kind" ("\"kind\":\"reload\",\"ok\":true"). */
const wire_event *wire_log_event(wire_log *l, double t_ms, const char *fields, size_t len);

/* The events held, oldest first: i from 0 to l->count - 1. */
wire_event *wire_log_at(const wire_log *l, size_t i);
/* The index of the first event held whose seq is above seq (l->count when
 * none is): where a page that saw seq goes on. */
size_t wire_log_after(const wire_log *l, uint64_t seq);

/* A sender keeps an event while it writes it, and lets go after. */
void wire_event_hold(wire_event *e);
void wire_event_release(wire_event *e);

#endif

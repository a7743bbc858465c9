/*
 * sse_reader.c - a text/event-stream read as it arrives (sse_reader.h).
 */
#include "core/sse_reader.h"

#include <stdlib.h>
#include <string.h>

void sse_reader_init(sse_reader *r, size_t max_bytes) {
  memset(r, 0, sizeof *r);
  r->max_bytes = max_bytes;
  r->retry_ms = -1;
}

void sse_reader_free(sse_reader *r) {
  buf_free(&r->line);
  buf_free(&r->data);
}

/* One whole line (without its end). */
static bool take_line(sse_reader *r, const char *line, size_t len, sse_event_fn on_event, void *arg) {
  if (len == 0) { /* a blank line ends the event */
    if (r->data.len) on_event(arg, r->data.data, r->data.len);
    buf_clear(&r->data);
    return true;
  }
  if (line[0] == ':') return true; /* a comment */
  const char *colon = memchr(line, ':', len);
  size_t name_len = colon ? (size_t)(colon - line) : len;
  const char *value = colon ? colon + 1 : line + len;
  size_t value_len = (size_t)(line + len - value);
  if (value_len && *value == ' ') value++, value_len--;
  if (name_len == 4 && memcmp(line, "data", 4) == 0) {
    if (r->data.len) buf_putc(&r->data, '\n');
    buf_append(&r->data, value, value_len);
    return r->data.len <= r->max_bytes;
  }
  if (name_len == 2 && memcmp(line, "id", 2) == 0) {
    /* An id with a NUL is ignored (the rules); one too long for us too. */
    if (memchr(value, '\0', value_len) || value_len > SSE_MAX_EVENT_ID_BYTES) return true;
    memcpy(r->last_id, value, value_len);
    r->last_id[value_len] = '\0';
    r->id_seen = true;
    return true;
  }
  if (name_len == 5 && memcmp(line, "retry", 5) == 0) {
    long ms = 0;
    if (value_len == 0 || value_len > 9) return true;
    for (size_t i = 0; i < value_len; i++) {
      if (value[i] < '0' || value[i] > '9') return true; /* only ASCII digits count */
      ms = ms * 10 + (value[i] - '0');
    }
    r->retry_ms = ms;
  }
  return true; /* event: and unknown fields */
}

bool sse_reader_feed(sse_reader *r, const char *p, size_t n, sse_event_fn on_event, void *arg) {
  const char *end = p + n;
  while (p < end) {
    if (r->after_cr) {
      r->after_cr = false;
      if (*p == '\n') {
        p++;
        continue;
      }
    }
    const char *stop = p;
    while (stop < end && *stop != '\n' && *stop != '\r') stop++;
    if (stop == end) {
      buf_append(&r->line, p, (size_t)(end - p));
      return r->line.len <= r->max_bytes;
    }
    bool ok;
    if (r->line.len) {
      buf_append(&r->line, p, (size_t)(stop - p));
      ok = r->line.len <= r->max_bytes && take_line(r, r->line.data, r->line.len, on_event, arg);
      buf_clear(&r->line);
    } else {
      ok = (size_t)(stop - p) <= r->max_bytes && take_line(r, p, (size_t)(stop - p), on_event, arg);
    }
    if (!ok) return false;
    r->after_cr = *stop == '\r';
    p = stop + 1;
  }
  return true;
}

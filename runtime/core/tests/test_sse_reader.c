/*
 * test_sse_reader.c - unit checks for the SSE reader (sse_reader.c): line
 * ends of every kind, events split across reads at every byte, ids,
 * retry, comments, and the size bound.
 *
 * Build and run:
 *   make build/tests/test_sse_reader && build/tests/test_sse_reader
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/sse_reader.h"

typedef struct seen {
  buf all; /* every event's data, each followed by "|" */
  int count;
} seen;

static void on_event(void *arg, const char *data, size_t len) {
  seen *s = arg;
  buf_append(&s->all, data, len);
  buf_putc(&s->all, '|');
  s->count++;
}

/* Feed text whole, then again split at every byte: same events either way. */
static void check_stream(const char *text, const char *want, int want_count, const char *want_id, long want_retry) {
  for (size_t split = 0; split <= strlen(text); split++) {
    sse_reader r;
    sse_reader_init(&r, 1024);
    seen s = {0};
    bool ok = sse_reader_feed(&r, text, split, on_event, &s) &&
              sse_reader_feed(&r, text + split, strlen(text) - split, on_event, &s);
    CHECK(ok, "feed ok (split %zu)", split);
    CHECK_STR(s.all.data ? s.all.data : "", want);
    CHECK(s.count == want_count, "%d events, want %d (split %zu)", s.count, want_count, split);
    CHECK_STR(r.last_id, want_id);
    CHECK(r.retry_ms == want_retry, "retry %ld, want %ld", r.retry_ms, want_retry);
    buf_free(&s.all);
    sse_reader_free(&r);
  }
}

int main(void) {
  check_stream("data: {\"a\":1}\n\n", "{\"a\":1}|", 1, "", -1);
  check_stream("id: 7\nretry: 1500\ndata:\n\n", "", 0, "7", 1500); /* a priming event: no data, an id */
  check_stream("data: x\r\n\r\ndata: y\r\rdata: z\n\n", "x|y|z|", 3, "", -1);
  check_stream(": comment\nevent: message\nid: a-1\ndata: one\ndata: two\n\n", "one\ntwo|", 1, "a-1", -1);
  check_stream("retry: 12x\nretry: 300\ndata:v\n\n", "v|", 1, "", 300); /* only digits count */
  check_stream("data: cut short", "", 0, "", -1);                       /* never ended: dropped */
  check_stream("id: 1\ndata: a\n\nid: 2\ndata: b\n\n", "a|b|", 2, "2", -1);

  /* The bound: a line or an event past max_bytes stops the reader. */
  sse_reader r;
  sse_reader_init(&r, 16);
  seen s = {0};
  CHECK(!sse_reader_feed(&r, "data: 0123456789abcdefghij", 26, on_event, &s), "a long partial line stops it");
  sse_reader_free(&r);
  sse_reader_init(&r, 16);
  CHECK(sse_reader_feed(&r, "data: 0123456789\n", 17, on_event, &s), "a line within the bound");
  CHECK(!sse_reader_feed(&r, "data: 0123456789\n", 17, on_event, &s), "data lines past the bound stop it");
  CHECK(s.count == 0, "nothing handed over");
  sse_reader_free(&r);
  buf_free(&s.all);
  return check_report();
}

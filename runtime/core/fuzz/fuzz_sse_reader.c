/* fuzz_sse_reader.c - libFuzzer target: the SSE reader (sse_reader.c).
 * The input's first byte chooses where the rest is split in two reads: the
 * events, the last id and the retry read whole and split must be the same,
 * never a crash, and a stream past the bound stops the reader. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/sse_reader.h"

static void on_event(void *arg, const char *data, size_t len) {
  buf *all = arg;
  if (len > 64) abort(); /* the bound below holds */
  buf_append(all, data, len);
  buf_putc(all, '\x01');
}

static bool read_all(const char *s, size_t n, size_t split, buf *events, sse_reader *r) {
  sse_reader_init(r, 64);
  return sse_reader_feed(r, s, split, on_event, events) && sse_reader_feed(r, s + split, n - split, on_event, events);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const char *s = (const char *)data + 1;
  size_t n = size - 1;
  size_t split = n ? data[0] % (n + 1) : 0;
  buf whole_events = {0}, split_events = {0};
  sse_reader whole, parts;
  bool ok_whole = read_all(s, n, n, &whole_events, &whole);
  bool ok_split = read_all(s, n, split, &split_events, &parts);
  if (ok_whole != ok_split) abort();
  if (ok_whole) {
    if (whole_events.len != split_events.len ||
        (whole_events.len && memcmp(whole_events.data, split_events.data, whole_events.len)))
      abort();
    if (strcmp(whole.last_id, parts.last_id) || whole.retry_ms != parts.retry_ms) abort();
  }
  buf_free(&whole_events);
  buf_free(&split_events);
  sse_reader_free(&whole);
  sse_reader_free(&parts);
  return 0;
}

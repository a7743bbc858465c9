/*
 * test_wire_log.c - unit checks for the inspector's history (wire_log.c):
 * each event is one SSE frame whose JSON carries the message as it went,
 * the bounds on events, bytes and a message's text, where a page that saw
 * an event goes on, and an event a write still holds outliving the log.
 *
 * Build and run:
 *   make build/tests/test_wire_log && build/tests/test_wire_log
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/json.h"
#include "core/sse_reader.h"
#include "core/wire_log.h"

typedef struct seen {
  buf data;
  int count;
} seen;

static void on_event(void *arg, const char *data, size_t len) {
  seen *s = arg;
  buf_clear(&s->data);
  buf_append(&s->data, data, len);
  s->count++;
}

/* Read an event's frame back as a page's EventSource would. */
static json_doc *read_back(const wire_event *e, char *id, size_t id_len) {
  sse_reader r;
  sse_reader_init(&r, 1 << 22);
  seen s = {0};
  CHECK(sse_reader_feed(&r, e->frame, e->len, on_event, &s), "the frame reads");
  CHECK(s.count == 1, "one event per frame, got %d", s.count);
  snprintf(id, id_len, "%s", r.last_id);
  json_doc *doc = json_parse(s.data.data ? s.data.data : "", s.data.len, 64, NULL);
  CHECK(doc != NULL, "its data is JSON: %s", s.data.data ? s.data.data : "");
  buf_free(&s.data);
  sse_reader_free(&r);
  return doc;
}

static const char *string_of(const json_value *obj, const char *key) {
  const json_value *v = json_object_get(obj, key);
  return v && v->type == JSON_STRING ? v->u.string : NULL;
}

int main(void) {
  wire_log l;
  wire_log_init(&l, 3, 1 << 20, 20);

  /* A message: its text kept exactly, control characters escaped so the
   * frame stays one data line. */
  const char *msg = "{\"id\":1,\n\"x\":\"\xc3\xa9\"}";
  const wire_event *e = wire_log_message(&l, 1000.5, "stdio", "2025-11-25", true, msg, strlen(msg));
  CHECK(e->seq == 1, "first seq 1, got %llu", (unsigned long long)e->seq);
  CHECK(memchr(e->frame, '\n', e->len) != NULL && strstr(e->frame, "\n\n") == e->frame + e->len - 2,
        "the only blank line ends the frame");
  char id[300];
  json_doc *doc = read_back(e, id, sizeof id);
  if (doc) {
    const json_value *root = json_doc_root(doc);
    CHECK_STR(id, "1");
    CHECK_STR(string_of(root, "kind"), "message");
    CHECK_STR(string_of(root, "dir"), "c2s");
    CHECK_STR(string_of(root, "conn"), "stdio");
    CHECK_STR(string_of(root, "version"), "2025-11-25");
    CHECK_STR(string_of(root, "text"), msg);
    CHECK(json_object_get(root, "truncated") == NULL, "not cut");
    json_doc_free(doc);
  }

  /* Cut at max_text (20) without splitting a character: "é" is bytes 19-20. */
  const char *long_msg = "{\"text\":\"abcdefghij\xc3\xa9zzzzzzzz\"}";
  e = wire_log_message(&l, 1001, "ui", NULL, false, long_msg, strlen(long_msg));
  doc = read_back(e, id, sizeof id);
  if (doc) {
    const json_value *root = json_doc_root(doc);
    CHECK_STR(string_of(root, "dir"), "s2c");
    CHECK(json_object_get(root, "version") == NULL, "no version when the session has none");
    CHECK_STR(string_of(root, "text"), "{\"text\":\"abcdefghij");
    const json_value *t = json_object_get(root, "truncated");
    CHECK(t && t->type == JSON_INTEGER && (size_t)t->u.integer == strlen(long_msg), "truncated: the whole length");
    json_doc_free(doc);
  }

  /* Any other event, and the bound on events: the oldest goes, and is counted. */
  wire_event *first = wire_log_at(&l, 0);
  wire_event_hold(first); /* a page's write still holds it */
  const char *fields = "\"kind\":\"reload\",\"ok\":true";
  wire_log_event(&l, 1002, fields, strlen(fields));
  wire_log_event(&l, 1003, fields, strlen(fields));
  CHECK(l.count == 3 && l.dropped == 1, "3 held, 1 dropped: %zu, %llu", l.count, (unsigned long long)l.dropped);
  CHECK(wire_log_at(&l, 0)->seq == 2 && wire_log_at(&l, 2)->seq == 4, "oldest 2, newest 4");
  CHECK(wire_log_at(&l, 3) == NULL, "nothing past the newest");
  CHECK(strncmp(first->frame, "id: 1\n", 6) == 0, "a held event outlives the log's bound");
  wire_event_release(first);

  /* Where a page that saw seq goes on. */
  CHECK(wire_log_after(&l, 0) == 0, "from the start");
  CHECK(wire_log_after(&l, 1) == 0, "a dropped seq: from the oldest held");
  CHECK(wire_log_after(&l, 2) == 1, "after 2: index 1");
  CHECK(wire_log_after(&l, 4) == 3, "after the newest: nothing");
  CHECK(wire_log_after(&l, 99) == 3, "a seq from another run: nothing");
  wire_log_free(&l);

  /* The bound on bytes. */
  wire_log_init(&l, 1000, 300, 1000);
  char big[200];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (int i = 0; i < 5; i++) wire_log_message(&l, 1, "stdio", NULL, true, big, strlen(big));
  CHECK(l.count == 1 && l.bytes <= 300 && l.dropped == 4, "one fits: %zu events, %zu bytes", l.count, l.bytes);
  CHECK(wire_log_at(&l, 0)->seq == 5, "the newest kept");
  wire_log_free(&l);
  return check_report();
}

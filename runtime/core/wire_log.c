/* wire_log.c - the inspector's history of the wire. See wire_log.h. */
#include "core/wire_log.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/observe.h"

void wire_log_init(wire_log *l, size_t max_events, size_t max_bytes, size_t max_text) {
  memset(l, 0, sizeof *l);
  l->cap = max_events ? max_events : 1;
  l->ring = calloc(l->cap, sizeof *l->ring);
  if (!l->ring) abort(); /* as buf does: the bounds are fixed, so this is the machine */
  l->max_bytes = max_bytes;
  l->max_text = max_text;
  l->next_seq = 1;
}

void wire_event_hold(wire_event *e) { e->refs++; }

void wire_event_release(wire_event *e) {
  if (--e->refs == 0) free(e);
}

static void drop_oldest(wire_log *l) {
  wire_event *e = l->ring[l->head];
  l->ring[l->head] = NULL;
  l->head = (l->head + 1) % l->cap;
  l->count--;
  l->bytes -= e->len;
  l->dropped++;
  wire_event_release(e);
}

void wire_log_free(wire_log *l) {
  while (l->count) drop_oldest(l);
  free(l->ring);
  l->ring = NULL;
}

/* Number the object in b (which holds "{" then the fields), wrap it as an
 * SSE frame and keep it. */
static const wire_event *keep(wire_log *l, uint64_t seq, const buf *json) {
  char head[64];
  int n = snprintf(head, sizeof head, "id: %llu\ndata: ", (unsigned long long)seq);
  size_t len = (size_t)n + json->len + 2;
  wire_event *e = malloc(sizeof *e + len);
  if (!e) abort();
  e->seq = seq;
  e->refs = 1;
  e->len = len;
  memcpy(e->frame, head, (size_t)n);
  memcpy(e->frame + n, json->data, json->len);
  memcpy(e->frame + n + json->len, "\n\n", 2);
  while (l->count && (l->count == l->cap || l->bytes + len > l->max_bytes)) drop_oldest(l);
  l->ring[(l->head + l->count) % l->cap] = e;
  l->count++;
  l->bytes += len;
  return e;
}

static void open_event(buf *b, uint64_t seq, double t_ms) {
  buf_printf(b, "{\"seq\":%llu,\"t\":%.3f,", (unsigned long long)seq, t_ms);
}

const wire_event *wire_log_message(wire_log *l, double t_ms, const char *conn, const char *version, bool from_client,
                                   const char *json, size_t len) {
  uint64_t seq = l->next_seq++;
  buf b = BUF_INIT;
  size_t kept = observe_utf8_cut(json, len, l->max_text);
  buf_reserve(&b, kept + kept / 8 + 128);
  open_event(&b, seq, t_ms);
  buf_append_str(&b, "\"kind\":\"message\",\"dir\":");
  buf_append_str(&b, from_client ? "\"c2s\"" : "\"s2c\"");
  buf_append_str(&b, ",\"conn\":");
  json_write_string(&b, conn, strlen(conn));
  if (version) {
    buf_append_str(&b, ",\"version\":");
    json_write_string(&b, version, strlen(version));
  }
  buf_append_str(&b, ",\"text\":");
  json_write_string(&b, json, kept);
  if (kept < len) buf_printf(&b, ",\"truncated\":%zu", len);
  buf_putc(&b, '}');
  const wire_event *e = keep(l, seq, &b);
  buf_free(&b);
  return e;
}

const wire_event *wire_log_event(wire_log *l, double t_ms, const char *fields, size_t len) {
  uint64_t seq = l->next_seq++;
  buf b = BUF_INIT;
  open_event(&b, seq, t_ms);
  buf_append(&b, fields, len);
  buf_putc(&b, '}');
  const wire_event *e = keep(l, seq, &b);
  buf_free(&b);
  return e;
}

wire_event *wire_log_at(const wire_log *l, size_t i) { return i < l->count ? l->ring[(l->head + i) % l->cap] : NULL; }

size_t wire_log_after(const wire_log *l, uint64_t seq) {
  /* Held seqs are consecutive: the oldest is next_seq - count. */
  uint64_t oldest = l->next_seq - l->count;
  if (seq < oldest) return 0;
  uint64_t i = seq - oldest + 1;
  return i > l->count ? l->count : (size_t)i;
}

/* fuzz_session.c - libFuzzer target: the protocol core. Each input line is
 * a message to one session (JSON-RPC classification, the MCP lifecycle,
 * batches, cancellation, replies to our requests); a stub app answers
 * "echo" at once and keeps "hold" calls open. Every message the session
 * sends must be valid JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jobs.h"
#include "core/server.h"
#include "core/session.h"

static call *held[8];
static int held_count;

static void check_sent(session *s, const session_message *m) {
  (void)s;
  if (!m->json) return;
  json_doc *doc = json_parse(m->json, m->len, 256, NULL);
  if (!doc || memchr(m->json, '\n', m->len)) __builtin_trap();
  json_doc_free(doc);
}

static void on_reply(void *data, const json_value *result, const json_value *error) {
  (void)data;
  (void)result;
  (void)error;
}

static void app_call_start(void *app, call *c, const json_value *params, const char *src) {
  (void)app;
  (void)src;
  if (strcmp(c->method, "hold") == 0 && held_count < 8) {
    held[held_count++] = c;
    call_progress(c, 1, 2, "half", 4);
    session_request(c->session, c, "roots/list", NULL, 0, on_reply, NULL);
    return;
  }
  buf b = BUF_INIT;
  if (params) json_write_value(&b, params);
  else buf_puts(&b, "null");
  call_respond(c, b.data, b.len);
  buf_free(&b);
}

static void app_call_cancel(void *app, call *c) {
  (void)app;
  for (int i = 0; i < held_count; i++)
    if (held[i] == c) held[i] = NULL;
}

static void app_describe(void *app, app_description *d) {
  (void)app;
  d->server_info_json = "{\"name\":\"fuzz\",\"version\":\"1\"}";
  d->tools = true;
}

static const app_ops APP = {.call_start = app_call_start, .call_cancel = app_call_cancel, .describe = app_describe};
static const transport_ops TRANSPORT = {.send = check_sent};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  server srv;
  server_options o;
  server_options_defaults(&o);
  server_init(&srv, &o, &APP, NULL);
  held_count = 0;
  session *s = session_new(&srv, &TRANSPORT, NULL, "fuzz");
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    session_receive(s, p, n, NULL);
    /* Answer one held call now and then, as an app would later. */
    if (held_count && n % 3 == 0) {
      call *c = held[--held_count];
      if (c) call_respond(c, "{}", 2);
    }
    p += n + 1;
  }
  session_free(s);
  jobs_release(&srv);
  return 0;
}

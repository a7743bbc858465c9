/* fuzz_app.c - see fuzz_app.h. */
#include "transport/fuzz/fuzz_app.h"

#include <stdlib.h>
#include <string.h>

#include "core/jsonrpc.h"
#include "core/session.h"

enum { MAX_WAITING = 16 };
static call *waiting[MAX_WAITING];
static int waiting_count;
static unsigned answers;

static void on_reply(void *data, const json_value *result, const json_value *error) {
  (void)data;
  (void)result;
  (void)error;
}

static void wait_for_later(call *c) {
  if (waiting_count == MAX_WAITING) {
    call_fail(c, JSONRPC_INTERNAL_ERROR, "too many waiting", NULL, 0);
    return;
  }
  waiting[waiting_count++] = c;
}

/* "big": a result in pieces, as luamcp's encoder makes for long strings:
 * the params' text, repeated past what one write stages, borrowed under a
 * lease that frees it (so the transport reading it after the release is
 * a use after free). */
typedef struct fuzz_lease {
  chain_lease base;
  char *bytes;
} fuzz_lease;

static void fuzz_release(chain_lease *l) {
  fuzz_lease *f = (fuzz_lease *)l;
  free(f->bytes);
  free(f);
}

static void respond_big(call *c, const json_value *params) {
  buf unit = BUF_INIT, text = BUF_INIT;
  if (params) json_write_value(&unit, params);
  else buf_puts(&unit, "null");
  while (text.len < 300 * 1024) buf_append(&text, unit.data, unit.len);
  buf_free(&unit);
  fuzz_lease *f = malloc(sizeof *f);
  f->base.holders = 1;
  f->base.release = fuzz_release;
  f->bytes = buf_detach(&text, NULL);
  chain ch = CHAIN_INIT;
  buf_puts(&ch.own, "{\"text\":\"");
  chain_borrow(&ch, f->bytes, strlen(f->bytes));
  buf_puts(&ch.own, "\"}");
  ch.lease = &f->base;
  call_respond_chain(c, &ch);
  chain_lease_drop(&f->base);
  chain_free(&ch);
}

static void app_call_start(void *app, call *c, const json_value *params, const char *src) {
  (void)src;
  server *srv = c->session->server;
  if (strcmp(c->method, "echo") == 0) {
    buf b = BUF_INIT;
    if (params) json_write_value(&b, params);
    else buf_puts(&b, "null");
    call_respond(c, b.data, b.len);
    buf_free(&b);
  } else if (strcmp(c->method, "big") == 0) {
    respond_big(c, params);
  } else if (strcmp(c->method, "hold") == 0) {
    wait_for_later(c);
  } else if (strcmp(c->method, "notify") == 0) {
    call_progress(c, 1, 2, "half", 4);
    session_log(c->session, c, 0, "fuzz", "\"log\"", 5);
    session_request(c->session, c, "roots/list", NULL, 0, on_reply, NULL);
    wait_for_later(c);
  } else if (strcmp(c->method, "compute") == 0 && srv->nested_poll_safe && srv->nested_poll == 0) {
    /* What the instruction hook does while Lua computes: loop turns in
     * which the transports only hold input and act on cancellations. The
     * call waits first, so a cancellation during the turns takes it out of
     * the waiting list rather than leaving us a freed call. */
    wait_for_later(c);
    srv->nested_poll++;
    for (int i = 0; i < 3; i++) uv_run(app, UV_RUN_NOWAIT);
    srv->nested_poll--;
  } else {
    call_fail(c, JSONRPC_METHOD_NOT_FOUND, "Method not found", NULL, 0);
  }
}

static void app_call_cancel(void *app, call *c) {
  (void)app;
  for (int i = 0; i < waiting_count; i++) {
    if (waiting[i] == c) {
      memmove(&waiting[i], &waiting[i + 1], (size_t)(waiting_count - i - 1) * sizeof *waiting);
      waiting_count--;
      return;
    }
  }
}

static void app_describe(void *app, app_description *d) {
  (void)app;
  d->server_info_json = "{\"name\":\"fuzz\",\"version\":\"1\"}";
  d->tools = true;
  d->resources = true;
}

const app_ops FUZZ_APP = {.call_start = app_call_start, .call_cancel = app_call_cancel, .describe = app_describe};

bool fuzz_app_answer_one(void) {
  if (waiting_count == 0) return false;
  call *c = waiting[0];
  memmove(&waiting[0], &waiting[1], (size_t)(waiting_count - 1) * sizeof *waiting);
  waiting_count--;
  if (answers++ % 3 == 2) call_fail(c, JSONRPC_INTERNAL_ERROR, "failed", NULL, 0);
  else call_respond(c, "{\"content\":[]}", 14);
  return true;
}

void fuzz_app_reset(void) { waiting_count = 0; }

/*
 * client_conn.c - what every kind of client connection shares
 * (client_conn.h): the inbox and the reasons it ended or failed, Ctrl-C,
 * and a bounded turn of the loop. Apart from client.c, which opens each
 * kind by name, so that the kinds call down into this file and never back
 * up into the one that opens them.
 */
#include "cli/client_conn.h"

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/signals.h"

/* ---- The connection base --------------------------------------------- */

void client_conn_deliver(client_conn *c, const char *json, size_t len) {
  client_message *m = malloc(sizeof *m + len + 1);
  m->next = NULL;
  m->len = len;
  memcpy(m->json, json, len);
  m->json[len] = '\0';
  if (c->inbox_tail) c->inbox_tail->next = m;
  else c->inbox = m;
  c->inbox_tail = m;
}

static char *vformat(const char *fmt, va_list ap) {
  char *s;
  return vasprintf(&s, fmt, ap) < 0 ? strdup("(out of memory)") : s;
}

void client_conn_end(client_conn *c, const char *fmt, ...) {
  if (c->ended) return;
  va_list ap;
  va_start(ap, fmt);
  c->ended = vformat(fmt, ap);
  va_end(ap);
}

void client_conn_fail(client_conn *c, const char *fmt, ...) {
  if (c->failure) return;
  va_list ap;
  va_start(ap, fmt);
  c->failure = vformat(fmt, ap);
  va_end(ap);
}

void client_conn_release(client_conn *c) {
  while (c->inbox) {
    client_message *m = c->inbox;
    c->inbox = m->next;
    free(m);
  }
  c->inbox_tail = NULL;
  free(c->ended);
  free(c->failure);
  free(c->failure_challenge);
  free(c->failure_body);
  free(c->dpop_nonce);
}

/* ---- Ctrl-C ------------------------------------------------------------- */

/* Set by SIGINT once catch_interrupt() asked for it: conn:receive returns
 * "interrupted" so the program can tell the server (cancel) and exit. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(void) { interrupted = 1; }

void client_conn_catch_interrupt(void) { os_catch_interrupt(on_interrupt); }

bool client_conn_interrupted(void) { return interrupted != 0; }

bool client_conn_take_interrupt(void) {
  if (!interrupted) return false;
  interrupted = 0;
  return true;
}

/* ---- Waiting on the loop ------------------------------------------------ */

static void on_waiter_wake(uv_idle_t *h) { (void)h; }

static void on_waiter_timer(uv_timer_t *t) {
  loop_waiter *w = (loop_waiter *)((char *)t - offsetof(loop_waiter, timer));
  uv_idle_start(&w->wake, on_waiter_wake);
}

void loop_waiter_init(loop_waiter *w, uv_loop_t *loop, void *owner) {
  uv_timer_init(loop, &w->timer);
  uv_idle_init(loop, &w->wake);
  w->timer.data = w->wake.data = owner;
  /* Neither keeps the loop alive: when nothing else is, no answer can come. */
  uv_unref((uv_handle_t *)&w->timer);
  uv_unref((uv_handle_t *)&w->wake);
}

int loop_waiter_turn(loop_waiter *w, int timeout_ms) {
  uv_loop_t *loop = w->timer.loop;
  if (timeout_ms == 0) return uv_run(loop, UV_RUN_NOWAIT);
  if (timeout_ms > 0) {
    uv_update_time(loop);
    uv_timer_start(&w->timer, on_waiter_timer, (uint64_t)timeout_ms, 0);
  }
  int alive = uv_run(loop, UV_RUN_ONCE);
  uv_timer_stop(&w->timer);
  uv_idle_stop(&w->wake);
  return alive;
}

void loop_waiter_close(loop_waiter *w, uv_close_cb on_closed) {
  uv_close((uv_handle_t *)&w->timer, on_closed);
  uv_close((uv_handle_t *)&w->wake, on_closed);
}

/*
 * signals_posix.c - os/signals.h with libuv's signal handles, one per
 * signal watched.
 */
#include "os/signals.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The log has always named a stop by its number ("received signal 15")
 * and a reload by its name: name NULL means "signal N". */
static const struct {
  int signum;
  os_signal_kind kind;
  const char *name;
} WATCHED[] = {
    {SIGTERM, OS_SIGNAL_STOP, NULL},
    {SIGINT, OS_SIGNAL_INTERRUPT, NULL},
    {SIGHUP, OS_SIGNAL_RELOAD, "SIGHUP"},
};
enum { WATCHED_COUNT = sizeof WATCHED / sizeof *WATCHED };

/* Owner: the caller of os_signals_start; freed in the close callback of
 * its last handle, after os_signals_stop. */
struct os_signals {
  uv_signal_t handles[WATCHED_COUNT]; /* handles[i] watches WATCHED[i] */
  bool started[WATCHED_COUNT];       /* handles[i] was initialized */
  int open;                           /* initialized handles not yet closed */
  char names[WATCHED_COUNT][16];      /* what the log says was received */
  os_signal_cb cb;
  void *data;
};

static void on_signal(uv_signal_t *h, int signum) {
  os_signals *s = h->data;
  for (int i = 0; i < WATCHED_COUNT; i++)
    if (WATCHED[i].signum == signum) s->cb(s->data, WATCHED[i].kind, s->names[i]);
}

static void on_closed(uv_handle_t *h) {
  os_signals *s = h->data;
  if (--s->open == 0) free(s);
}

int os_signals_start(os_signals **out, uv_loop_t *loop, unsigned kinds, os_signal_cb cb, void *data) {
  *out = NULL;
  os_signals *s = calloc(1, sizeof *s);
  if (!s) return UV_ENOMEM;
  s->cb = cb;
  s->data = data;
  int rc = 0;
  for (int i = 0; i < WATCHED_COUNT && rc == 0; i++) {
    if (!(kinds & WATCHED[i].kind)) continue;
    if (WATCHED[i].name) snprintf(s->names[i], sizeof s->names[i], "%s", WATCHED[i].name);
    else snprintf(s->names[i], sizeof s->names[i], "signal %d", WATCHED[i].signum);
    rc = uv_signal_init(loop, &s->handles[i]);
    if (rc != 0) break;
    s->handles[i].data = s;
    s->started[i] = true;
    s->open++;
    rc = uv_signal_start(&s->handles[i], on_signal, WATCHED[i].signum);
  }
  if (rc != 0) {
    os_signals_stop(s);
    return rc;
  }
  *out = s;
  return 0;
}

void os_signals_unref(os_signals *s) {
  for (int i = 0; i < WATCHED_COUNT; i++)
    if (s->started[i]) uv_unref((uv_handle_t *)&s->handles[i]);
}

void os_signals_stop(os_signals *s) {
  if (!s) return;
  if (s->open == 0) {
    free(s);
    return;
  }
  for (int i = 0; i < WATCHED_COUNT; i++)
    if (s->started[i]) uv_close((uv_handle_t *)&s->handles[i], on_closed);
}

void os_signals_ignore_broken_pipe(void) { signal(SIGPIPE, SIG_IGN); }

static void (*interrupt_fn)(void);

static void on_interrupt(int signum) {
  (void)signum;
  interrupt_fn();
}

void os_catch_interrupt(void (*fn)(void)) {
  interrupt_fn = fn;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt; /* no SA_RESTART: a read waiting at a terminal ends */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

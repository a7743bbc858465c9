/*
 * sock_watch_windows.c - os/sock_watch.h on Windows: a timer asks select()
 * without waiting whether the socket is ready (sock_watch.h says why not
 * uv_poll). Right after os_sock_watch_set it asks at once (the next loop
 * turn); while nothing is ready it asks less often, up to every
 * SOCK_WATCH_MAX_MS: what a transfer waiting on a slow server costs in
 * wake-ups, and the most an answer waits for us to notice it.
 */
#include "os/sock_watch.h"

#include <stdbool.h>
#include <stdlib.h>

#define SOCK_WATCH_MAX_MS 16

/* Owner: its creator until os_sock_watch_close; freed in the timer's
 * close callback. */
struct os_sock_watch {
  uv_timer_t timer;
  SOCKET sock;
  int events;
  uint64_t interval_ms; /* until the next look while nothing is ready */
  int dispatching;      /* inside cb: a close then waits for it to return */
  bool closed;
  os_sock_watch_cb cb;
  void *data;
};

static void look(uv_timer_t *timer);
static void free_watch(uv_handle_t *h);

/* The callback may resume a task whose Lua runs the loop a turn (the
 * watchdog does, in a long computation), and that turn may run close
 * callbacks: a close asked during the callback is done after it returns,
 * so the watch outlives its own callback. False when it was closed. */
static bool dispatch(os_sock_watch *w, int status, int events) {
  w->dispatching++;
  w->cb(w->data, status, events); /* may set or close the watch */
  w->dispatching--;
  if (!w->closed) return true;
  if (w->dispatching == 0 && !uv_is_closing((uv_handle_t *)&w->timer)) uv_close((uv_handle_t *)&w->timer, free_watch);
  return false;
}

static void arm(os_sock_watch *w, uint64_t delay_ms) { uv_timer_start(&w->timer, look, delay_ms, 0); }

static void look(uv_timer_t *timer) {
  os_sock_watch *w = timer->data;
  fd_set readable, writable, failed;
  FD_ZERO(&readable);
  FD_ZERO(&writable);
  FD_ZERO(&failed);
  if (w->events & UV_READABLE) FD_SET(w->sock, &readable);
  /* A connect that failed shows in failed: the caller learns why by
   * writing (or SO_ERROR), as libuv's own select()-based poll says. */
  if (w->events & UV_WRITABLE) {
    FD_SET(w->sock, &writable);
    FD_SET(w->sock, &failed);
  }
  struct timeval now = {0, 0};
  int n = select(0, &readable, &writable, &failed, &now);
  if (n == SOCKET_ERROR) {
    w->events = 0;
    dispatch(w, uv_translate_sys_error(WSAGetLastError()), 0);
    return;
  }
  int ready = (FD_ISSET(w->sock, &readable) ? UV_READABLE : 0) |
              (FD_ISSET(w->sock, &writable) || FD_ISSET(w->sock, &failed) ? UV_WRITABLE : 0);
  if (ready) {
    w->interval_ms = 1;
    if (!dispatch(w, 0, ready)) return; /* closed meanwhile: gone */
  } else if (w->interval_ms < SOCK_WATCH_MAX_MS) {
    w->interval_ms *= 2;
  }
  if (!w->closed && w->events && !uv_is_active((uv_handle_t *)&w->timer)) arm(w, w->interval_ms);
}

os_sock_watch *os_sock_watch_new(uv_loop_t *loop, uv_os_sock_t s, os_sock_watch_cb cb, void *data) {
  os_sock_watch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  uv_timer_init(loop, &w->timer);
  w->timer.data = w;
  w->sock = s;
  w->interval_ms = 1;
  w->cb = cb;
  w->data = data;
  return w;
}

/* A change is looked at at once; the same events again (hiredis asks for
 * reading after every read) keep the pace, so a socket that stays ready
 * cannot hold the loop in its timers. */
void os_sock_watch_set(os_sock_watch *w, int events) {
  bool changed = events != w->events;
  w->events = events;
  if (!events) {
    uv_timer_stop(&w->timer);
  } else if (changed) {
    w->interval_ms = 1;
    arm(w, 0);
  } else if (!uv_is_active((uv_handle_t *)&w->timer)) {
    arm(w, w->interval_ms);
  }
}

static void free_watch(uv_handle_t *h) { free(h->data); }

void os_sock_watch_close(os_sock_watch *w) {
  w->closed = true;
  w->events = 0;
  uv_timer_stop(&w->timer);
  if (w->dispatching == 0) uv_close((uv_handle_t *)&w->timer, free_watch);
}

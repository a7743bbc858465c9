/* sock_watch_posix.c - os/sock_watch.h on POSIX: a uv_poll. */
#include "os/sock_watch.h"

#include <stdlib.h>

/* Owner: its creator until os_sock_watch_close; freed in the close callback. */
struct os_sock_watch {
  uv_poll_t poll;
  os_sock_watch_cb cb;
  void *data;
};

static void on_poll(uv_poll_t *poll, int status, int events) {
  os_sock_watch *w = poll->data;
  w->cb(w->data, status, events);
}

os_sock_watch *os_sock_watch_new(uv_loop_t *loop, uv_os_sock_t s, os_sock_watch_cb cb, void *data) {
  os_sock_watch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (uv_poll_init_socket(loop, &w->poll, s) != 0) { /* fails before the handle joins the loop */
    free(w);
    return NULL;
  }
  w->poll.data = w;
  w->cb = cb;
  w->data = data;
  return w;
}

void os_sock_watch_set(os_sock_watch *w, int events) {
  if (events) uv_poll_start(&w->poll, events, on_poll);
  else uv_poll_stop(&w->poll);
}

static void free_watch(uv_handle_t *h) { free(h->data); }

void os_sock_watch_close(os_sock_watch *w) {
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, free_watch);
}

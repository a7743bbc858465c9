/*
 * curl_loop.c - libcurl's multi-socket interface on libuv (curl_loop.h).
 */
#include "app/curl_loop.h"

#include "os/sock_watch.h"

#include <stdlib.h>

/* Owner: its creator until curl_loop_close; freed in the timer's close
 * callback. */
struct curl_loop {
  const curl_api *api;
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;        /* curl's timeout */
  curl_transfer *finished; /* out of curl, done not called yet (in order) */
  void (*after)(void *data);
  void *after_data;
  bool closing;
};

/* A socket curl asked us to watch. Owner: curl's socket (curl_multi_assign)
 * until CURL_POLL_REMOVE frees it (the watch goes a loop turn later). */
typedef struct watched_socket {
  os_sock_watch *watch;
  curl_socket_t fd;
  curl_loop *cl;
} watched_socket;

/* Take every finished transfer out of curl onto cl->finished. */
static void collect_finished(curl_loop *cl) {
  CURLMsg *msg;
  int left;
  curl_transfer **tail = &cl->finished;
  while (*tail) tail = &(*tail)->done_next;
  while ((msg = cl->api->multi_info_read(cl->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    curl_transfer *t = NULL;
    CURL *easy = msg->easy_handle;
    CURLcode result = msg->data.result; /* msg is gone once the handle is removed */
    cl->api->easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
    cl->api->multi_remove_handle(cl->multi, easy);
    if (!t) continue;
    t->in_multi = false;
    t->result = result;
    t->done_next = NULL;
    *tail = t;
    tail = &t->done_next;
  }
}

/* One turn of curl, then its news to the owners, one transfer at a time:
 * a done may remove a transfer still queued, or close cl (whose memory
 * lives until the timer's close callback, a later loop turn). */
static void socket_action(curl_loop *cl, curl_socket_t fd, int flags) {
  int running;
  cl->api->multi_socket_action(cl->multi, fd, flags, &running);
  collect_finished(cl);
  while (cl->finished && !cl->closing) {
    curl_transfer *t = cl->finished;
    cl->finished = t->done_next;
    t->done_next = NULL;
    t->done(t, t->result);
  }
  if (cl->after && !cl->closing) cl->after(cl->after_data);
}

static void on_ready(void *data, int status, int events) {
  watched_socket *s = data;
  int flags = status < 0 ? CURL_CSELECT_ERR : 0;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  socket_action(s->cl, s->fd, flags); /* may free s (CURL_POLL_REMOVE) */
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  curl_loop *cl = userp;
  watched_socket *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (!s) return 0;
    os_sock_watch_close(s->watch);
    free(s);
    cl->api->multi_assign(cl->multi, fd, NULL);
    return 0;
  }
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) return -1;
    if (!(s->watch = os_sock_watch_new(cl->loop, fd, on_ready, s))) {
      free(s);
      return -1;
    }
    s->fd = fd;
    s->cl = cl;
    cl->api->multi_assign(cl->multi, fd, s);
  }
  os_sock_watch_set(s->watch, (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0));
  return 0;
}

static void on_timeout(uv_timer_t *timer) { socket_action(timer->data, CURL_SOCKET_TIMEOUT, 0); }

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  curl_loop *cl = userp;
  if (timeout_ms < 0) uv_timer_stop(&cl->timer);
  else uv_timer_start(&cl->timer, on_timeout, (uint64_t)timeout_ms, 0);
  return 0;
}

curl_loop *curl_loop_new(uv_loop_t *loop, const curl_api *api, void (*after)(void *data), void *data) {
  curl_loop *cl = calloc(1, sizeof *cl);
  if (!cl) return NULL;
  cl->api = api;
  cl->loop = loop;
  cl->after = after;
  cl->after_data = data;
  if (!(cl->multi = api->multi_init())) {
    free(cl);
    return NULL;
  }
  uv_timer_init(loop, &cl->timer);
  cl->timer.data = cl;
  uv_unref((uv_handle_t *)&cl->timer); /* never keeps the loop alive by itself */
  api->multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  api->multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
  api->multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  api->multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
  return cl;
}

bool curl_loop_add(curl_loop *cl, curl_transfer *t) {
  if (cl->closing) return false;
  cl->api->easy_setopt(t->easy, CURLOPT_PRIVATE, (char *)t);
  t->done_next = NULL;
  if (cl->api->multi_add_handle(cl->multi, t->easy) != CURLM_OK) return false;
  t->in_multi = true;
  return true;
}

void curl_loop_remove(curl_loop *cl, curl_transfer *t) {
  if (t->in_multi) cl->api->multi_remove_handle(cl->multi, t->easy);
  t->in_multi = false;
  for (curl_transfer **p = &cl->finished; *p; p = &(*p)->done_next) {
    if (*p == t) {
      *p = t->done_next;
      break;
    }
  }
  t->done_next = NULL;
}

static void free_loop(uv_handle_t *h) { free(h->data); }

void curl_loop_close(curl_loop *cl) {
  if (!cl || cl->closing) return;
  cl->closing = true;
  cl->finished = NULL;
  /* Closes the cached connections; curl says CURL_POLL_REMOVE for every
   * socket still watched, which closes its watcher. */
  cl->api->multi_cleanup(cl->multi);
  cl->multi = NULL;
  uv_timer_stop(&cl->timer);
  uv_close((uv_handle_t *)&cl->timer, free_loop);
}

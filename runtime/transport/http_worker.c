/* http_worker.c - a worker's side of `--workers N`: the IPC pipe to the
 * supervisor, connections handed over to the worker that owns their
 * session, and the ones handed to us. See http.h and worker_ipc.h.
 *
 * A legacy session lives in the worker that initialized it, and its id
 * names that worker. A request whose Mcp-Session-Id names another worker is
 * not answered here: once its headers are read (and nothing earlier on the
 * connection is still being answered), the socket goes to the supervisor
 * with the bytes of that request and everything read after it, and the
 * supervisor passes both to the owner, which goes on as if it had read them
 * itself.
 *
 * New connections: every worker accepts from the one listening socket the
 * supervisor made (WORKER_LISTEN_FD; on Windows the first handle on the
 * pipe, a WORKER_LISTENER frame), one connection per loop turn, after
 * the turn's reads (so the request of the connection taken last turn is
 * handled first), and none while a handler computes here (the loop turns
 * such a handler lets run, server.nested_poll). So a connection goes to a
 * worker that is free to serve it: where SO_REUSEPORT would hash it to one
 * that may be busy, a busy worker here simply does not take it, and an
 * idle one does.
 *
 * The bus (app/bus.h) without Redis: a worker's message goes to the
 * supervisor, which writes it to every other worker. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "os/sock.h"
#include "transport/http.h"
#include "transport/http_util.h"
#include "transport/worker_ipc.h"

/* Owner: its http_server (h->worker); freed once its handles (the pipe,
 * the metrics timer, the three that accept and, when the socket came over
 * the pipe, its handle) have closed, after http_stop. */
typedef struct http_worker {
  uv_pipe_t pipe;
  http_server *server;
  http_worker_hooks hooks;
  buf in;     /* frames read and not complete yet */
  bool lost;  /* the supervisor went away (hooks.lost was called) */
  /* Accepting from the shared socket: the poll watches it while we may
   * take a connection, the check takes one after the turn's reads, the
   * timer starts the poll again after a pause. All are closed (and the fd
   * with them) at http_drain or http_stop. The poll watches nothing until
   * the socket is there (listening). */
  uv_os_sock_t listen_fd;
  bool listening;
  uv_tcp_t listener; /* the socket, when it came over the pipe (listener_open) */
  bool listener_open;
  uv_poll_t accepting;
  uv_check_t take;
  uv_timer_t resume;
  bool accept_closed;
  int handles_open; /* of those, once attached */
  /* /metrics of every worker on any one: ours go to the others through
   * the supervisor every WORKER_METRICS_PUSH_MS; theirs, the last each
   * sent, wait here (index: the worker). */
  uv_timer_t metrics_push;
  bool metrics_push_cut; /* warned once that our text was over WORKER_METRICS_PUSH_MAX_BYTES */
  buf peer_metrics[MAX_WORKERS + 1];
} http_worker;

static void worker_handle_closed(http_worker *wk) {
  if (--wk->handles_open) return;
  for (int i = 0; i <= MAX_WORKERS; i++) buf_free(&wk->peer_metrics[i]);
  free(wk);
}

/* One frame on its way to the supervisor, and the connection it carries
 * (NULL for a frame without one). Owner: itself; freed in its write
 * callback. */
typedef struct worker_write {
  uv_write_t req;
  http_conn *conn;
  buf frame;
} worker_write;

static void on_frame_written(uv_write_t *req, int status) {
  worker_write *w = (worker_write *)req;
  http_conn *c = w->conn;
  if (c) {
    if (status < 0) log_write(LOG_WARNING, "http#%u: could not hand the connection over: %s", c->id, uv_strerror(status));
    /* Our copy of the socket: the owner has its own now (or, on failure,
     * the client sees the connection close). */
    c->handover_sent = false;
    conn_close_now(c);
  }
  buf_free(&w->frame);
  free(w);
}

/* Write a frame, with the connection's socket when c is given; false when
 * the write could not start. */
static bool send_frame(http_worker *wk, worker_frame_type type, int worker, const char *payload, size_t len,
                       http_conn *c) {
  if (wk->lost || uv_is_closing((uv_handle_t *)&wk->pipe)) return false;
  worker_write *w = calloc(1, sizeof *w);
  w->conn = c;
  worker_frame_write(&w->frame, type, 0, worker, payload, len);
  uv_buf_t b = uv_buf_init(w->frame.data, (unsigned)w->frame.len);
  int rc = c ? uv_write2(&w->req, (uv_stream_t *)&wk->pipe, &b, 1, (uv_stream_t *)&c->tcp, on_frame_written)
             : uv_write(&w->req, (uv_stream_t *)&wk->pipe, &b, 1, on_frame_written);
  if (rc < 0) {
    log_write(LOG_WARNING, "cannot write to the supervisor: %s", uv_strerror(rc));
    buf_free(&w->frame);
    free(w);
    return false;
  }
  return true;
}

static int worker_owner(const http_conn *c) {
  http_server *h = c->server;
  if (!h->worker || h->worker->lost || !c->session_id) return 0;
  int k = http_session_id_worker(c->session_id, h->opts.node);
  return k >= 1 && k <= h->opts.worker_count && k != h->opts.worker_index ? k : 0;
}

static void worker_hand_over(http_conn *c) {
  http_worker *wk = c->server->worker;
  c->state = CONN_RESPONDING; /* nothing more is read or timed out here */
  c->handing_over = true;
  if (!c->reading_stopped) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading_stopped = true;
  }
  /* Closing our copy of the socket would cancel what we still write:
   * on_written comes back here once it is out. */
  if (c->pending_write_bytes) return;
  log_write(LOG_DEBUG, "http#%u: %s names worker %d's session: handing the connection over", c->id, c->session_id,
            c->handover_to);
  const char *bytes = c->input.data + c->request_start;
  size_t len = c->input.len - c->request_start;
  if (!wk || !send_frame(wk, WORKER_HANDOVER, c->handover_to, bytes, len, c)) {
    conn_close(c);
    return;
  }
  c->handover_sent = true;
}

bool http_worker_publish(http_server *h, const char *message, size_t len, const char **why) {
  http_worker *wk = h->worker;
  if (!wk || wk->lost) {
    *why = "it is gone";
    return false;
  }
  if (len > WORKER_FRAME_MAX_BYTES) {
    *why = "the message is too large";
    return false;
  }
  if (!send_frame(wk, WORKER_BUS, h->opts.worker_index, message, len, NULL)) {
    *why = "cannot write to it";
    return false;
  }
  return true;
}

/* ---- Accepting ---------------------------------------------------------- */

static void on_resume(uv_timer_t *t);

/* Take no connection for delay_ms (and then only once no handler computes). */
static void pause_accepting(http_worker *wk, uint64_t delay_ms) {
  uv_poll_stop(&wk->accepting);
  uv_check_stop(&wk->take);
  uv_timer_start(&wk->resume, on_resume, delay_ms, 0);
}

static void on_listen_readable(uv_poll_t *p, int status, int events);

static void on_resume(uv_timer_t *t) {
  http_worker *wk = t->data;
  if (wk->accept_closed) return;
  /* Still inside a computing handler: look again on a later turn (1 ms:
   * a timer of 0 re-armed from its own callback would run again at once). */
  if (wk->server->srv->nested_poll > 0) uv_timer_start(&wk->resume, on_resume, 1, 0);
  else uv_poll_start(&wk->accepting, UV_READABLE, on_listen_readable);
}

static void on_take(uv_check_t *check);

/* A connection waits: take it after this turn's reads (on_take). */
static void on_listen_readable(uv_poll_t *p, int status, int events) {
  http_worker *wk = p->data;
  (void)events;
  if (wk->accept_closed) return;
  if (status < 0) {
    log_write(LOG_WARNING, "the listening socket: %s; trying again", uv_strerror(status));
    pause_accepting(wk, WORKER_ACCEPT_RETRY_MS);
    return;
  }
  uv_poll_stop(&wk->accepting);
  uv_check_start(&wk->take, on_take);
}

static void on_take(uv_check_t *check) {
  http_worker *wk = check->data;
  uv_check_stop(check);
  if (wk->accept_closed) return;
  /* Busy: whoever is free takes it. */
  if (wk->server->srv->nested_poll > 0) {
    pause_accepting(wk, 1);
    return;
  }
  /* One per turn: the connection's first request is read (and perhaps
   * keeps us busy) before we take another. */
  uv_os_sock_t sock;
  int rc = os_sock_accept(wk->listen_fd, &sock);
  if (rc == 0) conn_accept_socket(wk->server, (int)sock);
  /* Else another worker took it, or the client went before we did, or
   * (below) we cannot take any now. */
  if (rc == 0 || rc == UV_EAGAIN) {
    if (!wk->accept_closed) uv_poll_start(&wk->accepting, UV_READABLE, on_listen_readable);
    return;
  }
  log_write(LOG_WARNING, "cannot accept a connection: %s; trying again in %d ms", uv_strerror(rc),
            WORKER_ACCEPT_RETRY_MS);
  pause_accepting(wk, WORKER_ACCEPT_RETRY_MS);
}

static void on_accept_handle_closed(uv_handle_t *handle) {
  http_worker *wk = handle->data;
  /* The socket goes once the poll no longer watches it: an inherited
   * descriptor here, or the handle it came in over the pipe. */
  if (handle == (uv_handle_t *)&wk->accepting) {
    /* (On Windows a closing poll does not keep the loop alive: the
     * process's last uv_walk may have closed the socket's handle first.) */
    if (!wk->listener_open) os_sock_close(wk->listen_fd);
    else if (!uv_is_closing((uv_handle_t *)&wk->listener))
      uv_close((uv_handle_t *)&wk->listener, on_accept_handle_closed);
  }
  http_server_handle_closed(wk->server);
  worker_handle_closed(wk);
}

/* Close the handles that accept (and the socket once the poll is closed). */
static void accept_close(http_worker *wk) {
  if (wk->accept_closed) return;
  wk->accept_closed = true;
  wk->server->handles_closing += 3 + (wk->listening ? 1 + wk->listener_open : 0);
  uv_close((uv_handle_t *)&wk->metrics_push, on_accept_handle_closed);
  if (wk->listening) uv_close((uv_handle_t *)&wk->accepting, on_accept_handle_closed);
  uv_close((uv_handle_t *)&wk->take, on_accept_handle_closed);
  uv_close((uv_handle_t *)&wk->resume, on_accept_handle_closed);
}

static void worker_stop_accepting(http_server *h) {
  if (h->worker) accept_close(h->worker);
}

/* Watch the shared socket and say we serve: at once when it was
 * inherited, else when it came over the pipe. 0 or a libuv error. */
static int start_accepting(http_worker *wk, uv_os_sock_t sock) {
  int rc = uv_poll_init_socket(wk->server->loop, &wk->accepting, sock);
  if (rc != 0) return rc;
  wk->accepting.data = wk;
  wk->listen_fd = sock;
  wk->listening = true;
  wk->handles_open++;
  uv_poll_start(&wk->accepting, UV_READABLE, on_listen_readable);
  send_frame(wk, WORKER_READY, wk->server->opts.worker_index, NULL, 0, NULL);
  return 0;
}

static void supervisor_lost(http_worker *wk, const char *why);

static void on_unwanted_listener_closed(uv_handle_t *handle) { free(handle); }

/* The WORKER_LISTENER frame's socket (Windows). */
static void take_listener(http_worker *wk) {
  if (uv_pipe_pending_count(&wk->pipe) < 1 || uv_pipe_pending_type(&wk->pipe) != UV_TCP) {
    supervisor_lost(wk, "its listening socket came without a handle");
    return;
  }
  if (wk->listening || wk->accept_closed) { /* not ours to serve from now */
    uv_tcp_t *unwanted = malloc(sizeof *unwanted);
    uv_tcp_init(wk->server->loop, unwanted);
    uv_accept((uv_stream_t *)&wk->pipe, (uv_stream_t *)unwanted);
    uv_close((uv_handle_t *)unwanted, on_unwanted_listener_closed);
    return;
  }
  uv_tcp_init(wk->server->loop, &wk->listener);
  wk->listener.data = wk;
  wk->listener_open = true;
  wk->handles_open++;
  uv_os_fd_t sock;
  int rc = uv_accept((uv_stream_t *)&wk->pipe, (uv_stream_t *)&wk->listener);
  if (rc == 0) rc = uv_fileno((uv_handle_t *)&wk->listener, &sock);
  if (rc == 0) rc = start_accepting(wk, (uv_os_sock_t)sock);
  if (rc != 0) {
    log_write(LOG_ERROR, "cannot accept from the shared listening socket: %s", uv_strerror(rc));
    wk->listener_open = false;
    wk->handles_open--;
    uv_close((uv_handle_t *)&wk->listener, NULL);
    supervisor_lost(wk, "its listening socket is unusable");
  }
}

/* ---- From the supervisor --------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  http_worker *wk = h->data;
  buf_reserve(&wk->in, suggested);
  b->base = wk->in.data + wk->in.len;
  b->len = wk->in.cap - wk->in.len - 1; /* a buf keeps room for its NUL */
}

static void supervisor_lost(http_worker *wk, const char *why) {
  if (wk->lost) return;
  wk->lost = true;
  uv_read_stop((uv_stream_t *)&wk->pipe);
  log_write(LOG_WARNING, "the supervisor is gone (%s); shutting down", why);
  if (wk->hooks.lost) wk->hooks.lost(wk->hooks.arg);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  http_worker *wk = stream->data;
  (void)b;
  if (n < 0) {
    supervisor_lost(wk, n == UV_EOF ? "its pipe closed" : uv_strerror((int)n));
    return;
  }
  wk->in.len += (size_t)n;
  size_t off = 0;
  worker_frame head;
  const char *payload;
  bool bad = false;
  while (!wk->lost && worker_frame_next(&wk->in, &off, &head, &payload, &bad)) {
    if (head.type == WORKER_ANNOUNCE) {
      if (wk->hooks.announce) wk->hooks.announce(wk->hooks.arg);
    } else if (head.type == WORKER_HANDOVER) {
      /* A local socket's connection comes as one (a Unix socket). */
      uv_handle_type kind = wk->server->opts.local[0] ? UV_NAMED_PIPE : UV_TCP;
      if (uv_pipe_pending_count(&wk->pipe) < 1 || uv_pipe_pending_type(&wk->pipe) != kind) {
        log_write(LOG_ERROR, "a connection handed over arrived without its socket");
        continue;
      }
      conn_adopt(wk->server, stream, payload, head.len, head.flags & WORKER_FLAG_DECLINED);
    } else if (head.type == WORKER_STATE_KEY) {
      if (wk->hooks.state_key && head.len >= 16) wk->hooks.state_key(wk->hooks.arg, payload, head.len);
    } else if (head.type == WORKER_LISTENER) {
      take_listener(wk);
    } else if (head.type == WORKER_STOP) {
      if (wk->hooks.stop) wk->hooks.stop(wk->hooks.arg);
    } else if (head.type == WORKER_BUS) {
      if (wk->hooks.bus) wk->hooks.bus(wk->hooks.arg, payload, head.len);
    } else if (head.type == WORKER_METRICS && head.worker >= 1 && head.worker <= MAX_WORKERS) {
      buf_clear(&wk->peer_metrics[head.worker]);
      buf_append(&wk->peer_metrics[head.worker], payload, head.len);
    }
  }
  if (bad) {
    supervisor_lost(wk, "it sent a frame that is not one of ours");
    return;
  }
  buf_consume(&wk->in, off);
}

/* Our figures to the other workers (http_observe.c merges them). */
static void on_metrics_push(uv_timer_t *t) {
  http_worker *wk = t->data;
  http_server *h = wk->server;
  if (!h->opts.observe || !h->opts.observe->metrics) return;
  /* The last push (or anything else) still waits on the link: the next
   * tick's text is newer anyway, and the bus must not queue behind ours. */
  if (wk->pipe.write_queue_size > 0) return;
  buf text = BUF_INIT;
  h->opts.observe->metrics(h->opts.observe->arg, &text);
  http_metrics_format(h, &text, h->opts.worker_index);
  size_t len = text.len;
  if (len > WORKER_METRICS_PUSH_MAX_BYTES) {
    /* Whole lines only, up to the cap: the others still parse what came. */
    len = WORKER_METRICS_PUSH_MAX_BYTES;
    while (len > 0 && text.data[len - 1] != '\n') len--;
    if (!wk->metrics_push_cut) log_write(LOG_WARNING, "worker %d: its /metrics text is over %u bytes; the other "
                                         "workers get only the first part", h->opts.worker_index,
                                         (unsigned)WORKER_METRICS_PUSH_MAX_BYTES);
    wk->metrics_push_cut = true;
  }
  send_frame(wk, WORKER_METRICS, h->opts.worker_index, text.data, len, NULL);
  buf_free(&text);
}

static int worker_peer_metrics(const http_server *h, const char **texts, size_t *lens, int cap) {
  const http_worker *wk = h->worker;
  int n = 0;
  if (!wk) return 0;
  for (int k = 1; k <= MAX_WORKERS && n < cap; k++) {
    if (k == h->opts.worker_index || !wk->peer_metrics[k].len) continue;
    texts[n] = wk->peer_metrics[k].data;
    lens[n] = wk->peer_metrics[k].len;
    n++;
  }
  return n;
}

static void on_unopened_closed(uv_handle_t *handle) { free(handle->data); }

static void worker_detach(http_server *h);
static const http_worker_ops WORKER_OPS = {
    .owner = worker_owner,
    .hand_over = worker_hand_over,
    .stop_accepting = worker_stop_accepting,
    .detach = worker_detach,
    .peer_metrics = worker_peer_metrics,
};

int http_worker_attach(http_server *h, int fd, int listen_fd, const http_worker_hooks *hooks) {
  http_worker *wk = calloc(1, sizeof *wk);
  wk->server = h;
  wk->hooks = *hooks;
  uv_pipe_init(h->loop, &wk->pipe, 1);
  wk->pipe.data = wk;
  int rc = uv_pipe_open(&wk->pipe, fd);
  if (rc != 0) {
    uv_close((uv_handle_t *)&wk->pipe, on_unopened_closed);
    return rc;
  }
  uv_timer_init(h->loop, &wk->resume);
  uv_check_init(h->loop, &wk->take);
  uv_timer_init(h->loop, &wk->metrics_push);
  wk->resume.data = wk->take.data = wk->metrics_push.data = wk;
  wk->handles_open = 4;
  if (h->opts.observe && h->opts.observe->metrics) {
    uv_timer_start(&wk->metrics_push, on_metrics_push, 0, WORKER_METRICS_PUSH_MS);
    uv_unref((uv_handle_t *)&wk->metrics_push);
  }
  h->worker = wk;
  h->worker_ops = &WORKER_OPS;
  uv_read_start((uv_stream_t *)&wk->pipe, on_alloc, on_read);
  /* The pipe alone must not keep the loop running once everything else
   * has stopped. */
  uv_unref((uv_handle_t *)&wk->pipe);
  if (listen_fd >= 0) {
    rc = start_accepting(wk, (uv_os_sock_t)listen_fd);
    if (rc != 0) return rc; /* the process ends: no need to close what is open */
  }
  return 0;
}

static void on_pipe_closed(uv_handle_t *handle) {
  http_worker *wk = handle->data;
  buf_free(&wk->in);
  http_server_handle_closed(wk->server);
  worker_handle_closed(wk);
}

static void worker_detach(http_server *h) {
  http_worker *wk = h->worker;
  if (!wk) return;
  accept_close(wk);
  h->worker = NULL;
  h->handles_closing++;
  uv_close((uv_handle_t *)&wk->pipe, on_pipe_closed);
}

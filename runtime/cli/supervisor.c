/* supervisor.c - `--workers N`: see supervisor.h.
 *
 * The supervisor listens on the address once (so "address in use" is said
 * once and port 0 becomes one real port) and starts each worker as this
 * same program with "--worker K --worker-port PORT" added to its arguments
 * (a program made by `luamcp build` included). fd 3 of each worker is an
 * IPC pipe to us (worker_ipc.h), fd 4 the listening socket: every worker
 * accepts from it when it is free to serve (http_worker.c), so a new
 * connection goes to an idle worker, never queues behind a busy one; the
 * supervisor itself never accepts. Worker 1 starts first, alone, so a
 * script that does not load is reported once; the others follow once it
 * serves, and worker 1 writes the start line once all of them do.
 *
 * Without --redis, the workers' bus (app/bus.h) runs through us: a
 * WORKER_BUS frame from one worker is written to every other one.
 *
 * Windows (the _WIN32 parts: the listener's handle and the block before
 * spawn_worker): no descriptor but the CRT's
 * reaches a child, so the listening socket goes over the pipe instead of
 * fd 4 (a WORKER_LISTENER frame with uv_write2, which duplicates it into
 * the worker: WSADuplicateSocket), and there is no SIGTERM (libuv's
 * uv_process_kill ends the process outright), so a worker is asked to stop
 * by a WORKER_STOP frame. A worker's death is its process's exit callback
 * on both, and the job object the server is in (os/proc_windows.c) ends
 * the workers with the supervisor. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "cli/supervisor.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "transport/worker_ipc.h"
#include "os/signals.h"

typedef struct supervisor supervisor;

/* One worker's place: the process running in it now, if any, and its pipe.
 * Owner: the supervisor (its workers array). Its process and pipe handles
 * are closed, and their close callbacks have run, before the slot starts a
 * process again (handles_open counts them). */
typedef struct worker_slot {
  supervisor *sup;
  int index; /* 1..N: the K of --worker K and of session ids "wK-" */
  uv_process_t process;
  uv_pipe_t pipe;
  uv_timer_t restart;
  int handles_open;
  bool running;        /* the process has not exited */
  bool ready;          /* it listens (its READY frame came) */
  bool stopped_unready; /* told to stop before it listened: it held no connection */
  int pid;
  uint64_t started_ms;
  int restart_delay_ms; /* the delay before the next start (the backoff) */
  buf in;               /* frames read and not complete yet */
  bool bus_behind;      /* missing bus messages: its backlog passed WORKER_BUS_BACKLOG_BYTES */
} worker_slot;

/* Owner: supervisor_run's stack, for the life of the loop. */
struct supervisor {
  uv_loop_t *loop;
  const supervisor_options *opts;
  int listen_fd; /* the shared listening socket; closed when stopping */
#ifdef _WIN32
  uv_tcp_t listener; /* listen_fd's handle, to send to each worker */
#endif
  char exe_path[4096];
  char **argv; /* the workers' command line: ours, then "--worker" K "--worker-port" PORT */
  char index_arg[16], port_arg[16];
  const char *exe;
  /* Sealing 2026-07-28 requestState with one key in every worker lets the
   * retry of an input_required call land on any of them. */
  char state_key[32];
  worker_slot workers[MAX_WORKERS];
  os_signals *signals; /* SIGINT, SIGTERM, SIGHUP (os/signals.h) */
  uv_timer_t stop_timer;
  bool started;  /* every worker of the first start listened */
  bool stopping;
  bool closed;   /* the supervisor's own handles are closing: the loop ends */
  int exit_code;
};

/* One connection on its way from the worker that read its request to the
 * owner of its session. Owner: itself; freed in the close callback of its
 * socket, which closes once the write that passes it on is done. */
typedef struct relay {
  uv_write_t req;
  /* The connection: a uv_pipe_t on a local socket (--http unix:PATH). */
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  };
  buf frame;
} relay;

static void spawn_worker(worker_slot *w);
static void maybe_finish(supervisor *s);

static void on_relay_closed(uv_handle_t *h) {
  relay *r = h->data;
  buf_free(&r->frame);
  free(r);
}

static void on_relayed(uv_write_t *req, int status) {
  relay *r = (relay *)req;
  if (status < 0) log_write(LOG_DEBUG, "a connection handed over was lost: %s", uv_strerror(status));
  /* Our copy of the socket: the worker has its own now. */
  uv_close((uv_handle_t *)&r->tcp, on_relay_closed);
}

/* A HANDOVER frame from `from`: pass the socket and the bytes to the owner
 * of the session, or, when the owner does not serve now (restarting, or
 * never was), back to `from` to answer (a 404: the session is gone). */
static void relay_connection(worker_slot *from, const worker_frame *head, const char *payload) {
  supervisor *s = from->sup;
  relay *r = calloc(1, sizeof *r);
  bool local = s->opts->http->local[0] != '\0';
  if (local) uv_pipe_init(s->loop, &r->pipe, 0);
  else uv_tcp_init(s->loop, &r->tcp);
  r->tcp.data = r;
  if (uv_pipe_pending_count(&from->pipe) < 1 || uv_pipe_pending_type(&from->pipe) != (local ? UV_NAMED_PIPE : UV_TCP) ||
      uv_accept((uv_stream_t *)&from->pipe, (uv_stream_t *)&r->tcp) != 0) {
    log_write(LOG_ERROR, "worker %d handed a connection over without its socket", from->index);
    uv_close((uv_handle_t *)&r->tcp, on_relay_closed);
    return;
  }
  int k = head->worker;
  worker_slot *to = k >= 1 && k <= s->opts->workers ? &s->workers[k - 1] : NULL;
  int flags = 0;
  /* While stopping too: a draining worker still takes what serves its
   * calls in flight (the answer to an elicitation, a cancellation). */
  if (!to || !to->ready) {
    to = from;
    flags = WORKER_FLAG_DECLINED;
  }
  worker_frame_write(&r->frame, WORKER_HANDOVER, flags, from->index, payload, head->len);
  uv_buf_t b = uv_buf_init(r->frame.data, (unsigned)r->frame.len);
  int rc = to->ready ? uv_write2(&r->req, (uv_stream_t *)&to->pipe, &b, 1, (uv_stream_t *)&r->tcp, on_relayed)
                     : UV_EPIPE;
  if (rc < 0) {
    log_write(LOG_DEBUG, "cannot pass a connection to worker %d: %s", to->index, uv_strerror(rc));
    uv_close((uv_handle_t *)&r->tcp, on_relay_closed);
  }
}

/* A bus frame on its way to one worker. Owner: itself; freed in its write
 * callback. */
typedef struct bus_write {
  uv_write_t req;
  buf frame;
} bus_write;

static void on_bus_written(uv_write_t *req, int status) {
  (void)status; /* a worker gone meanwhile: it misses the message, as a restarting one does */
  bus_write *bw = (bus_write *)req;
  buf_free(&bw->frame);
  free(bw);
}

/* A bus message (or a worker's metrics) from `from`: to every other
 * worker that serves. */
static void relay_bus(worker_slot *from, worker_frame_type type, const char *payload, size_t len) {
  supervisor *s = from->sup;
  for (int i = 0; i < s->opts->workers; i++) {
    worker_slot *to = &s->workers[i];
    if (to == from || !to->ready) continue;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&to->pipe) + len > WORKER_BUS_BACKLOG_BYTES) {
      if (!to->bus_behind)
        log_write(LOG_WARNING, "worker %d is not reading its pipe: it misses bus messages until it catches up", to->index);
      to->bus_behind = true;
      continue;
    }
    to->bus_behind = false;
    bus_write *bw = calloc(1, sizeof *bw);
    worker_frame_write(&bw->frame, type, 0, from->index, payload, len);
    uv_buf_t b = uv_buf_init(bw->frame.data, (unsigned)bw->frame.len);
    if (uv_write(&bw->req, (uv_stream_t *)&to->pipe, &b, 1, on_bus_written) < 0) {
      buf_free(&bw->frame);
      free(bw);
    }
  }
}

/* A frame with no payload, owned by its write request. */
typedef struct small_write {
  uv_write_t req;
  worker_frame head;
} small_write;

/* The first frame to a worker: the state key (see WORKER_STATE_KEY). */
typedef struct key_write {
  uv_write_t req;
  buf frame;
} key_write;

static void on_key_written(uv_write_t *req, int status) {
  (void)status; /* a worker gone before it read it: its exit says so */
  key_write *kw = (key_write *)req;
  buf_free(&kw->frame);
  free(kw);
}

static void on_small_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static void send_announce(worker_slot *w) {
  small_write *sw = calloc(1, sizeof *sw);
  sw->head = (worker_frame){.type = WORKER_ANNOUNCE, .worker = (uint16_t)w->index};
  uv_buf_t b = uv_buf_init((char *)&sw->head, sizeof sw->head);
  if (uv_write(&sw->req, (uv_stream_t *)&w->pipe, &b, 1, on_small_written) < 0) free(sw);
}

static void on_ready(worker_slot *w) {
  supervisor *s = w->sup;
  w->ready = true;
  if (s->started) {
    log_write(LOG_NOTICE, "worker %d (pid %d) serves again", w->index, w->pid);
    return;
  }
  if (w->index == 1) /* the scripts load: start the others */
    for (int i = 1; i < s->opts->workers; i++) spawn_worker(&s->workers[i]);
  for (int i = 0; i < s->opts->workers; i++)
    if (!s->workers[i].ready) return;
  s->started = true;
  send_announce(&s->workers[0]);
}

static void on_pipe_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  worker_slot *w = h->data;
  buf_reserve(&w->in, suggested);
  b->base = w->in.data + w->in.len;
  b->len = w->in.cap - w->in.len - 1; /* a buf keeps room for its NUL */
}

static void on_pipe_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  worker_slot *w = stream->data;
  (void)b;
  if (n < 0) {
    uv_read_stop(stream); /* the worker is going: its exit follows */
    return;
  }
  w->in.len += (size_t)n;
  size_t off = 0;
  worker_frame head;
  const char *payload;
  bool bad = false;
  while (worker_frame_next(&w->in, &off, &head, &payload, &bad)) {
    if (head.type == WORKER_READY) on_ready(w);
    else if (head.type == WORKER_HANDOVER) relay_connection(w, &head, payload);
    else if (head.type == WORKER_BUS || head.type == WORKER_METRICS) relay_bus(w, (worker_frame_type)head.type, payload, head.len);
  }
  if (bad) {
    log_write(LOG_ERROR, "worker %d sent a frame that is not one of ours; stopping it", w->index);
    uv_read_stop(stream);
    uv_process_kill(&w->process, SIGKILL);
  }
  buf_consume(&w->in, off);
}

static void on_restart(uv_timer_t *t) {
  worker_slot *w = t->data;
  if (!w->sup->stopping) spawn_worker(w);
}

/* The process and the pipe of a slot have both closed. */
static void on_slot_handle_closed(uv_handle_t *h) {
  worker_slot *w = h->data;
  if (--w->handles_open > 0) return;
  buf_clear(&w->in);
  supervisor *s = w->sup;
  if (s->stopping) maybe_finish(s);
  else if (s->started) uv_timer_start(&w->restart, on_restart, (uint64_t)w->restart_delay_ms, 0);
}

static void close_slot(worker_slot *w) {
  uv_close((uv_handle_t *)&w->process, on_slot_handle_closed);
  uv_close((uv_handle_t *)&w->pipe, on_slot_handle_closed);
}

static void supervisor_stop(supervisor *s);

static void on_worker_exit(uv_process_t *p, int64_t status, int signum) {
  worker_slot *w = p->data;
  supervisor *s = w->sup;
  w->running = false;
  w->ready = false;
  char why[96];
  if (signum) snprintf(why, sizeof why, "was killed by signal %d (%s)", signum, strsignal(signum));
  else snprintf(why, sizeof why, "exited with status %lld", (long long)status);
  uint64_t lived = uv_now(s->loop) - w->started_ms;
  if (s->stopping) {
    /* A worker restarted just before the stop may meet our SIGTERM before
     * it handles signals; no connection was handed to it (it was not
     * ready), so nothing was lost: that is a clean stop too. */
    bool clean = (status == 0 && !signum) || (signum == SIGTERM && w->stopped_unready);
    if (!clean) s->exit_code = 1;
    log_write(clean ? LOG_DEBUG : LOG_WARNING, "worker %d (pid %d) %s%s", w->index, w->pid, why,
              clean && signum ? " before it listened" : "");
  } else if (!s->started) {
    log_write(LOG_ERROR, "worker %d (pid %d) %s before every worker served; stopping", w->index, w->pid, why);
    s->exit_code = 1;
    supervisor_stop(s);
  } else {
    /* Dying young again and again is a crash loop: wait longer each time. */
    if (lived >= WORKER_STABLE_MS) w->restart_delay_ms = 0;
    else if (w->restart_delay_ms == 0) w->restart_delay_ms = WORKER_RESTART_MIN_MS;
    else w->restart_delay_ms = w->restart_delay_ms * 2 > WORKER_RESTART_MAX_MS ? WORKER_RESTART_MAX_MS
                                                                                : w->restart_delay_ms * 2;
    log_write(LOG_ERROR, "worker %d (pid %d) %s after %.1f s; starting it again in %d ms", w->index, w->pid, why,
              (double)lived / 1000.0, w->restart_delay_ms);
  }
  close_slot(w);
}

/* ---- What differs on Windows (see the top) ------------------------------- */

#ifdef _WIN32
enum { WORKER_STDIO_COUNT = WORKER_IPC_FD + 1 };

static void share_listener(supervisor *s, worker_slot *w) {
  key_write *lw = calloc(1, sizeof *lw);
  worker_frame_write(&lw->frame, WORKER_LISTENER, 0, w->index, NULL, 0);
  uv_buf_t b = uv_buf_init(lw->frame.data, (unsigned)lw->frame.len);
  int rc = uv_write2(&lw->req, (uv_stream_t *)&w->pipe, &b, 1, (uv_stream_t *)&s->listener, on_key_written);
  if (rc < 0) {
    log_write(LOG_ERROR, "cannot pass the listening socket to worker %d: %s", w->index, uv_strerror(rc));
    buf_free(&lw->frame);
    free(lw);
  }
}

static void stop_worker(worker_slot *w) {
  small_write *sw = calloc(1, sizeof *sw);
  sw->head = (worker_frame){.type = WORKER_STOP, .worker = (uint16_t)w->index};
  uv_buf_t b = uv_buf_init((char *)&sw->head, sizeof sw->head);
  if (uv_write(&sw->req, (uv_stream_t *)&w->pipe, &b, 1, on_small_written) < 0) {
    free(sw);
    uv_process_kill(&w->process, SIGKILL); /* no way to ask it: it was going anyway */
  }
}

static void close_listener(supervisor *s) {
  if (s->listen_fd < 0) return;
  http_unlisten_shared(s->opts->http);
  uv_close((uv_handle_t *)&s->listener, NULL); /* closes listen_fd */
  s->listen_fd = -1;
}

/* listen_fd as a handle uv_write2 can send. 0 or a libuv error. */
static int open_listener(supervisor *s) {
  int rc = uv_tcp_init(s->loop, &s->listener); /* fails only on bad flags: none here */
  return rc ? rc : uv_tcp_open(&s->listener, (uv_os_sock_t)s->listen_fd);
}
#else
enum { WORKER_STDIO_COUNT = WORKER_LISTEN_FD + 1 };

static void share_listener(supervisor *s, worker_slot *w) {} /* fd WORKER_LISTEN_FD of every worker */

static void stop_worker(worker_slot *w) { uv_process_kill(&w->process, SIGTERM); }

static void close_listener(supervisor *s) {
  if (s->listen_fd >= 0) {
    http_unlisten_shared(s->opts->http); /* a local socket's file: the workers never remove it */
    close(s->listen_fd);
  }
  s->listen_fd = -1;
}

static int open_listener(supervisor *s) { return 0; }
#endif

static void spawn_worker(worker_slot *w) {
  supervisor *s = w->sup;
  snprintf(s->index_arg, sizeof s->index_arg, "%d", w->index); /* read by the child before uv_spawn returns */
  uv_pipe_init(s->loop, &w->pipe, 1);
  w->pipe.data = w;
  w->process.data = w;
  uv_stdio_container_t stdio[WORKER_STDIO_COUNT] = {
      {.flags = UV_IGNORE},
      {.flags = UV_INHERIT_FD, .data.fd = 1},
      {.flags = UV_INHERIT_FD, .data.fd = 2},
  };
  stdio[WORKER_IPC_FD].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
  stdio[WORKER_IPC_FD].data.stream = (uv_stream_t *)&w->pipe;
#ifndef _WIN32
  stdio[WORKER_LISTEN_FD].flags = UV_INHERIT_FD;
  stdio[WORKER_LISTEN_FD].data.fd = s->listen_fd;
#endif
  uv_process_options_t po = {.exit_cb = on_worker_exit,
                             .file = s->exe,
                             .args = s->argv,
                             .stdio_count = WORKER_STDIO_COUNT,
                             .stdio = stdio};
  w->handles_open = 2;
  w->started_ms = uv_now(s->loop);
  int rc = uv_spawn(s->loop, &w->process, &po);
  if (rc != 0) {
    log_write(LOG_ERROR, "cannot start worker %d: %s", w->index, uv_strerror(rc));
    /* A process handle that failed to spawn is closed all the same. */
    on_worker_exit(&w->process, 127, 0);
    return;
  }
  w->running = true;
  w->pid = w->process.pid;
  key_write *kw = calloc(1, sizeof *kw);
  worker_frame_write(&kw->frame, WORKER_STATE_KEY, 0, w->index, s->state_key, sizeof s->state_key);
  uv_buf_t kb = uv_buf_init(kw->frame.data, (unsigned)kw->frame.len);
  if (uv_write(&kw->req, (uv_stream_t *)&w->pipe, &kb, 1, on_key_written) < 0) {
    buf_free(&kw->frame);
    free(kw);
  }
  share_listener(s, w);
  log_write(LOG_DEBUG, "worker %d started (pid %d)", w->index, w->pid);
  uv_read_start((uv_stream_t *)&w->pipe, on_pipe_alloc, on_pipe_read);
}

/* ---- Stopping ------------------------------------------------------------ */

static void maybe_finish(supervisor *s) {
  if (s->closed) return;
  for (int i = 0; i < s->opts->workers; i++)
    if (s->workers[i].handles_open) return;
  s->closed = true;
  for (int i = 0; i < s->opts->workers; i++) uv_close((uv_handle_t *)&s->workers[i].restart, NULL);
  uv_close((uv_handle_t *)&s->stop_timer, NULL);
  os_signals_stop(s->signals);
  s->signals = NULL;
}

static void on_stop_timeout(uv_timer_t *t) {
  supervisor *s = t->data;
  for (int i = 0; i < s->opts->workers; i++) {
    worker_slot *w = &s->workers[i];
    if (!w->running) continue;
    log_write(LOG_WARNING, "worker %d (pid %d) did not stop within %d ms; killing it", w->index, w->pid,
              WORKER_STOP_GRACE_MS(s->opts->drain_time_s));
    uv_process_kill(&w->process, SIGKILL);
  }
}

/* Every worker stops as a process alone does on SIGTERM (draining its
 * calls for --drain-time); the supervisor exits once they all have, and
 * kills what is left after the grace. A second signal is passed on too:
 * it makes the workers cancel their calls at once. */
static void supervisor_stop(supervisor *s) {
  if (s->stopping) {
    for (int i = 0; i < s->opts->workers; i++)
      if (s->workers[i].running) stop_worker(&s->workers[i]);
    return;
  }
  s->stopping = true;
  close_listener(s);
  for (int i = 0; i < s->opts->workers; i++) {
    worker_slot *w = &s->workers[i];
    uv_timer_stop(&w->restart);
    w->stopped_unready = !w->ready;
    if (w->running) stop_worker(w);
  }
  uv_timer_start(&s->stop_timer, on_stop_timeout, (uint64_t)WORKER_STOP_GRACE_MS(s->opts->drain_time_s), 0);
  uv_unref((uv_handle_t *)&s->stop_timer);
  maybe_finish(s);
}

static void on_signal(void *arg, os_signal_kind kind, const char *name) {
  supervisor *s = arg;
  if (kind == OS_SIGNAL_RELOAD) {
    if (s->stopping) return;
    log_write(LOG_INFO, "received %s; reloading every worker", name);
    for (int i = 0; i < s->opts->workers; i++)
      if (s->workers[i].running) uv_process_kill(&s->workers[i].process, SIGHUP);
    return;
  }
  if (s->stopping)
    log_write(LOG_INFO, "received %s again; the workers cancel their calls now", name);
  else
    log_write(LOG_INFO, "received %s; stopping %d workers", name, s->opts->workers);
  supervisor_stop(s);
}

int supervisor_run(const supervisor_options *o) {
  supervisor *s = calloc(1, sizeof *s);
  s->opts = o;
  s->loop = uv_default_loop();
  int port = 0;
  char err[400];
  s->listen_fd = http_listen_shared(o->http, &port, err, sizeof err);
  if (s->listen_fd < 0) {
    fprintf(stderr, "luamcp: %s\n", err);
    free(s);
    return 1;
  }
  snprintf(s->port_arg, sizeof s->port_arg, "%d", port);
  int listener_rc = open_listener(s);
  if (listener_rc != 0) {
    fprintf(stderr, "luamcp: cannot share the listening socket with the workers: %s\n", uv_strerror(listener_rc));
    close_listener(s);
    free(s);
    return 1;
  }
  if (uv_random(NULL, NULL, s->state_key, sizeof s->state_key, 0, NULL) != 0) {
    fprintf(stderr, "luamcp: no randomness for the workers' state key\n");
    close_listener(s);
    free(s);
    return 1;
  }
  s->argv = calloc((size_t)o->argc + 5, sizeof *s->argv);
  for (int i = 0; i < o->argc; i++) s->argv[i] = o->argv[i];
  s->argv[o->argc] = "--worker";
  s->argv[o->argc + 1] = s->index_arg;
  s->argv[o->argc + 2] = "--worker-port";
  s->argv[o->argc + 3] = s->port_arg;
  /* This very program: on Linux even if its file was replaced since it
   * started (/proc/self/exe); elsewhere its path now. */
  size_t exe_len = sizeof s->exe_path;
  s->exe = uv_exepath(s->exe_path, &exe_len) == 0 && exe_len > 0 ? s->exe_path : o->argv[0];
#ifdef __linux__
  if (access("/proc/self/exe", X_OK) == 0) s->exe = "/proc/self/exe";
#endif
  os_signals_ignore_broken_pipe();
  for (int i = 0; i < o->workers; i++) {
    worker_slot *w = &s->workers[i];
    w->sup = s;
    w->index = i + 1;
    uv_timer_init(s->loop, &w->restart);
    w->restart.data = w;
  }
  uv_timer_init(s->loop, &s->stop_timer);
  s->stop_timer.data = s;
  int signals_rc = os_signals_start(&s->signals, s->loop, OS_SIGNAL_STOP | OS_SIGNAL_INTERRUPT | OS_SIGNAL_RELOAD,
                                    on_signal, s);
  if (signals_rc != 0) log_write(LOG_WARNING, "cannot watch for signals: %s", uv_strerror(signals_rc));
  spawn_worker(&s->workers[0]);
  uv_run(s->loop, UV_RUN_DEFAULT);
  uv_loop_close(s->loop);
  for (int i = 0; i < o->workers; i++) buf_free(&s->workers[i].in);
  close_listener(s);
  int code = s->exit_code;
  free(s->argv);
  free(s);
  return code;
}

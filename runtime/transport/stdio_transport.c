/* stdio_transport.c - newline-delimited JSON over stdin/stdout. See stdio_transport.h. */
#include "transport/stdio_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/luamcp_limits.h"

enum { FILE_READ_BYTES = 64 * 1024, KEEP_LINE_CAPACITY = 1024 * 1024 };

bool stdio_claim_fds(stdio_transport *t) {
  t->in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
  t->out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (t->in_fd < 0 || t->out_fd < 0 || devnull < 0) return false;
  /* From here on, fd 0 reads nothing and fd 1 is stderr. */
  if (dup2(devnull, 0) < 0 || dup2(2, 1) < 0) return false;
  close(devnull);
  /* stdout is now a log stream: flush it by line, like stderr's readers expect. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  return true;
}

/* ---- Output ---------------------------------------------------------- */

static void flush(stdio_transport *t);
static void maybe_finish(stdio_transport *t);

static void on_write(uv_write_t *req, int status) {
  stdio_transport *t = req->data;
  t->write_in_flight = false;
  if (status == UV_ECANCELED) { /* the handle closed at exit */
    buf_free(&t->writing);
    return;
  }
  buf_clear(&t->writing);
  if (status < 0) {
    log_write(LOG_INFO, "stdout closed (%s); stopping", uv_strerror(status));
    t->write_failed = true;
    buf_clear(&t->pending);
    t->input_ended = true;
    session_close(t->session);
  }
  flush(t);
  maybe_finish(t);
}

static void flush(stdio_transport *t) {
  if (t->write_in_flight || t->pending.len == 0) return;
  if (t->write_failed) {
    buf_clear(&t->pending);
    return;
  }
  if (!t->out_is_stream) {
    /* A regular file or a device: plain blocking writes. */
    size_t off = 0;
    while (off < t->pending.len) {
      ssize_t n = write(t->out_fd, t->pending.data + off, t->pending.len - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        t->write_failed = true;
        break;
      }
      off += (size_t)n;
    }
    buf_clear(&t->pending);
    return;
  }
  uv_stream_t *out = (uv_stream_t *)&t->out;
  uv_buf_t b = uv_buf_init(t->pending.data, (unsigned)t->pending.len);
  int n = uv_try_write(out, &b, 1);
  if (n == (int)t->pending.len) {
    buf_clear(&t->pending);
    return;
  }
  if (n < 0 && n != UV_EAGAIN) {
    /* Report it from the write path on the next turn, not from inside send. */
    n = 0;
  }
  if (n > 0) buf_consume(&t->pending, (size_t)n);
  buf tmp = t->writing;
  t->writing = t->pending;
  t->pending = tmp;
  buf_clear(&t->pending);
  b = uv_buf_init(t->writing.data, (unsigned)t->writing.len);
  t->write_req.data = t;
  int err = uv_write(&t->write_req, out, &b, 1, on_write);
  if (err < 0) {
    log_write(LOG_INFO, "stdout closed (%s); stopping", uv_strerror(err));
    t->write_failed = true;
    buf_clear(&t->writing);
    return;
  }
  t->write_in_flight = true;
}

static void on_flush_idle(uv_idle_t *h) { (void)h; }

static void on_flush_check(uv_check_t *h) {
  stdio_transport *t = h->data;
  flush(t);
  if (t->pending.len == 0) {
    uv_check_stop(&t->flush_check);
    uv_idle_stop(&t->flush_idle);
  }
  if (t->write_failed && !t->input_ended) {
    t->input_ended = true;
    session_close(t->session);
  }
  maybe_finish(t);
}

static void stdio_send(session *s, const session_message *m) {
  stdio_transport *t = s->transport_data;
  if (!m->json || t->write_failed) return;
  buf_reserve(&t->pending, m->len + 1);
  buf_append(&t->pending, m->json, m->len);
  buf_putc(&t->pending, '\n');
  /* Coalesce: everything answered in this loop turn leaves in one write,
   * at the end of the turn. The idle handle stops the loop from blocking in
   * poll before that (a message queued by a timer would otherwise wait for
   * the next event). */
  if (!uv_is_active((uv_handle_t *)&t->flush_check)) {
    uv_check_start(&t->flush_check, on_flush_check);
    uv_idle_start(&t->flush_idle, on_flush_idle);
  }
}

static const transport_ops STDIO_OPS = {.send = stdio_send};

/* ---- Input ----------------------------------------------------------- */

static void handle_line(stdio_transport *t, const char *p, size_t n) {
  while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r')) i++;
  if (i == n) return; /* blank lines are not messages */
  session_receive(t->session, p, n, NULL);
}

static void reject_oversized(stdio_transport *t) {
  char message[160];
  snprintf(message, sizeof message, "Invalid Request: message larger than the limit of %zu bytes",
           t->srv->opts.max_message_bytes);
  session_send_error(t->session, NULL, JSONRPC_INVALID_REQUEST, message);
  log_write(LOG_WARNING, "stdio: dropped a message over %zu bytes", t->srv->opts.max_message_bytes);
}

static void release_line(stdio_transport *t) {
  if (t->line.cap > KEEP_LINE_CAPACITY) buf_free(&t->line);
  else buf_clear(&t->line);
}

/* Split input into lines. A line over the limit is answered with an error
 * as soon as it crosses the limit and skipped up to its newline, never
 * buffered whole. */
static void feed(stdio_transport *t, const char *data, size_t n) {
  size_t max = t->srv->opts.max_message_bytes;
  while (n > 0 && !t->input_ended) {
    const char *nl = memchr(data, '\n', n);
    size_t part = nl ? (size_t)(nl - data) : n;
    if (t->discarding) {
      if (nl) t->discarding = false;
    } else if (t->line.len + part > max) {
      reject_oversized(t);
      release_line(t);
      t->discarding = nl == NULL;
    } else if (nl) {
      if (t->line.len == 0) {
        handle_line(t, data, part);
      } else {
        buf_append(&t->line, data, part);
        handle_line(t, t->line.data, t->line.len);
        release_line(t);
      }
    } else {
      buf_append(&t->line, data, part);
    }
    if (!nl) break;
    data = nl + 1;
    n -= part + 1;
  }
}

static void on_held_check(uv_check_t *h);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b);
static void on_file_read(uv_fs_t *req);

/* Back-pressure: stop reading once enough input is held; read_more starts
 * again when the held input has been fed. */
static bool held_full(stdio_transport *t) { return t->held.len >= STDIO_HELD_INPUT_BYTES; }

static void read_more(stdio_transport *t) {
  if (t->in_is_stream) {
    uv_read_start((uv_stream_t *)&t->in, on_alloc, on_read);
  } else {
    uv_buf_t b = uv_buf_init(t->file_buf, FILE_READ_BYTES);
    uv_fs_read(t->loop, &t->read_req, t->in_fd, &b, 1, -1, on_file_read);
  }
}

/* Keep input that arrived during a nested loop turn (or behind input that
 * did), acting now only on the cancellations among its complete lines. */
static void hold(stdio_transport *t, const char *data, size_t n) {
  buf_append(&t->held, data, n);
  for (;;) {
    const char *start = t->held.data + t->held_scanned;
    const char *nl = memchr(start, '\n', t->held.len - t->held_scanned);
    if (!nl) break;
    size_t len = (size_t)(nl - start);
    if (len <= t->srv->opts.max_message_bytes) session_receive_urgent(t->session, start, len);
    t->held_scanned += len + 1;
  }
  if (!uv_is_active((uv_handle_t *)&t->held_check)) uv_check_start(&t->held_check, on_held_check);
}

static bool holding(stdio_transport *t) {
  return t->srv->nested_poll > 0 || t->held.len > 0 || t->eof_held || t->finish_held;
}

static void input_ended(stdio_transport *t) {
  if (t->srv->nested_poll > 0) {
    /* Cancel what runs now (a computing handler included); the rest when
     * the handler has stopped. */
    t->eof_held = true;
    session_close(t->session);
    if (!uv_is_active((uv_handle_t *)&t->held_check)) uv_check_start(&t->held_check, on_held_check);
    return;
  }
  if (t->input_ended) return;
  if (t->line.len && !t->discarding) handle_line(t, t->line.data, t->line.len);
  buf_free(&t->line);
  t->input_ended = true;
  log_write(LOG_DEBUG, "stdin ended; cancelling in-flight requests");
  session_close(t->session);
  maybe_finish(t);
}

static void maybe_finish(stdio_transport *t) {
  if (!t->input_ended || t->finished || t->write_in_flight || (t->pending.len && !t->write_failed)) return;
  if (t->srv->nested_poll > 0) { /* stopping the loop from inside a handler would stop only the inner turn */
    t->finish_held = true;
    if (!uv_is_active((uv_handle_t *)&t->held_check)) uv_check_start(&t->held_check, on_held_check);
    return;
  }
  t->finished = true;
  t->on_done(t);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void on_held_check(uv_check_t *h) {
  stdio_transport *t = h->data;
  if (t->srv->nested_poll > 0) return; /* still inside the handler: next turn */
  uv_check_stop(h);
  buf data = t->held;
  t->held = (buf)BUF_INIT;
  t->held_scanned = 0;
  if (data.len) feed(t, data.data, data.len);
  buf_free(&data);
  if (t->read_paused && !t->input_ended && !t->eof_held && !held_full(t)) {
    t->read_paused = false;
    read_more(t);
  }
  if (t->eof_held) {
    t->eof_held = false;
    input_ended(t);
  }
  if (t->finish_held) {
    t->finish_held = false;
    maybe_finish(t);
  }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b) {
  stdio_transport *t = stream->data;
  if (nread > 0) {
    if (holding(t)) {
      hold(t, b->base, (size_t)nread);
      if (held_full(t)) {
        uv_read_stop(stream);
        t->read_paused = true;
      }
    } else {
      feed(t, b->base, (size_t)nread);
    }
  }
  free(b->base);
  if (nread < 0) {
    if (nread != UV_EOF) log_write(LOG_INFO, "stdin: %s", uv_strerror((int)nread));
    uv_read_stop(stream);
    input_ended(t);
  }
}

static void on_file_read(uv_fs_t *req) {
  stdio_transport *t = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  if (n > 0) {
    if (holding(t)) hold(t, t->file_buf, (size_t)n);
    else feed(t, t->file_buf, (size_t)n);
    if (!t->input_ended) {
      if (held_full(t)) t->read_paused = true; /* on_held_check reads on */
      else read_more(t);
      return;
    }
  } else if (n < 0) {
    log_write(LOG_INFO, "stdin: %s", uv_strerror((int)n));
  }
  free(t->file_buf);
  t->file_buf = NULL;
  input_ended(t);
}

static bool open_stream(uv_loop_t *loop, int fd, void *handle, bool readable) {
  /* libuv aborts if a regular file is opened as a pipe: look first. */
  switch (uv_guess_handle(fd)) {
    case UV_TTY: return uv_tty_init(loop, handle, fd, readable) == 0;
    case UV_NAMED_PIPE: return uv_pipe_init(loop, handle, 0) == 0 && uv_pipe_open(handle, fd) == 0;
    case UV_TCP: return uv_tcp_init(loop, handle) == 0 && uv_tcp_open(handle, fd) == 0;
    default: return false;
  }
}

void stdio_start(stdio_transport *t, uv_loop_t *loop, server *srv, stdio_done_fn on_done) {
  t->loop = loop;
  t->srv = srv;
  t->on_done = on_done;
  t->session = session_new(srv, &STDIO_OPS, t, "stdio");
  uv_check_init(loop, &t->flush_check);
  uv_idle_init(loop, &t->flush_idle);
  uv_check_init(loop, &t->held_check);
  t->flush_check.data = t;
  t->held_check.data = t;
  srv->nested_poll_safe = true;
  t->out_is_stream = open_stream(loop, t->out_fd, &t->out, false);
  if (t->out_is_stream) t->out.pipe.data = t;
  t->in_is_stream = open_stream(loop, t->in_fd, &t->in, true);
  if (t->in_is_stream) {
    t->in.pipe.data = t;
    uv_read_start((uv_stream_t *)&t->in, on_alloc, on_read);
  } else {
    t->file_buf = malloc(FILE_READ_BYTES);
    t->read_req.data = t;
    uv_buf_t b = uv_buf_init(t->file_buf, FILE_READ_BYTES);
    uv_fs_read(loop, &t->read_req, t->in_fd, &b, 1, -1, on_file_read);
  }
}

void stdio_close_handles(stdio_transport *t) {
  if (!uv_is_closing((uv_handle_t *)&t->flush_check)) uv_close((uv_handle_t *)&t->flush_check, NULL);
  if (!uv_is_closing((uv_handle_t *)&t->flush_idle)) uv_close((uv_handle_t *)&t->flush_idle, NULL);
  if (!uv_is_closing((uv_handle_t *)&t->held_check)) uv_close((uv_handle_t *)&t->held_check, NULL);
  buf_free(&t->held);
  buf_free(&t->pending);
  buf_free(&t->line);
  if (!t->write_in_flight) buf_free(&t->writing); /* else the write callback still owns it */
  if (t->in_is_stream && !uv_is_closing((uv_handle_t *)&t->in)) uv_close((uv_handle_t *)&t->in, NULL);
  if (t->out_is_stream && !uv_is_closing((uv_handle_t *)&t->out)) uv_close((uv_handle_t *)&t->out, NULL);
}

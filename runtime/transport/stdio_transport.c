/* stdio_transport.c - newline-delimited JSON over stdin/stdout. See stdio_transport.h. */
#include "transport/stdio_transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "os/stdfds.h"

enum { FILE_READ_BYTES = 64 * 1024, READ_BYTES = 64 * 1024, KEEP_LINE_CAPACITY = 1024 * 1024 };

bool stdio_claim_fds(stdio_transport *t) {
  /* From here on, fd 0 reads nothing and fd 1 is stderr. */
  if (!os_stdfds_claim(&t->in_fd, &t->out_fd)) return false;
  return true;
}

/* ---- Output ---------------------------------------------------------- */

/* What one write stages at most: big answers go out a piece at a time,
 * their long strings escaped straight into this much memory, never held
 * escaped in full. */
enum { STAGE_BYTES = 256 * 1024 };

static void flush(stdio_transport *t);
static void maybe_finish(stdio_transport *t);

static bool queued(const stdio_transport *t) { return t->pending_staged < t->pending.len || t->borrowed_count; }

/* Forget what is queued (stdout broke, or the transport closes). */
static void drop_queue(stdio_transport *t) {
  for (size_t i = 0; i < t->borrowed_count; i++)
    chain_lease_drop(t->borrowed[(t->borrowed_head + i) % t->borrowed_cap].lease);
  t->borrowed_head = t->borrowed_count = 0;
  buf_clear(&t->pending);
  t->pending_staged = 0;
}

static void borrow(stdio_transport *t, size_t at, const chain_string *s, chain_lease *lease) {
  if (t->borrowed_count == t->borrowed_cap) {
    size_t cap = t->borrowed_cap ? t->borrowed_cap * 2 : 8;
    stdio_borrowed *q = malloc(cap * sizeof *q);
    if (!q) {
      fputs("luamcp: out of memory\n", stderr);
      abort();
    }
    /* Unwrap the ring into the new array. */
    for (size_t i = 0; i < t->borrowed_count; i++) q[i] = t->borrowed[(t->borrowed_head + i) % t->borrowed_cap];
    free(t->borrowed);
    t->borrowed = q;
    t->borrowed_cap = cap;
    t->borrowed_head = 0;
  }
  chain_lease_hold(lease);
  t->borrowed[(t->borrowed_head + t->borrowed_count++) % t->borrowed_cap] =
      (stdio_borrowed){at, s->data, s->len, 0, lease};
}

/* Move queued output into writing, up to STAGE_BYTES: own bytes copied,
 * borrowed strings escaped (and their leases dropped once staged whole). */
static void stage(stdio_transport *t) {
  buf *w = &t->writing;
  if (!t->borrowed_count && !t->pending_staged && !w->len) {
    /* Nothing borrowed: the queue itself is written, not a copy. */
    buf tmp = *w;
    *w = t->pending;
    t->pending = tmp;
    return;
  }
  while (w->len < STAGE_BYTES) {
    stdio_borrowed *b = t->borrowed_count ? &t->borrowed[t->borrowed_head] : NULL;
    size_t own_end = b ? b->at : t->pending.len;
    if (t->pending_staged < own_end) {
      size_t n = own_end - t->pending_staged;
      if (n > STAGE_BYTES - w->len) n = STAGE_BYTES - w->len;
      buf_append(w, t->pending.data + t->pending_staged, n);
      t->pending_staged += n;
      continue;
    }
    if (!b) break;
    size_t room = STAGE_BYTES + JSON_ESCAPE_ROOM - w->len;
    buf_reserve(w, room);
    w->len += json_escape_chunk(b->data, b->len, &b->done, w->data + w->len, room, NULL);
    if (b->done == b->len) {
      chain_lease *lease = b->lease;
      t->borrowed_head = (t->borrowed_head + 1) % t->borrowed_cap;
      t->borrowed_count--;
      chain_lease_drop(lease);
    }
  }
  if (!queued(t)) {
    buf_clear(&t->pending);
    t->pending_staged = 0;
  }
}

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
    drop_queue(t);
    t->input_ended = true;
    session_close(t->session);
  }
  flush(t);
  maybe_finish(t);
}

static void flush(stdio_transport *t) {
  if (t->write_in_flight || !queued(t)) return;
  if (t->write_failed) {
    drop_queue(t);
    return;
  }
  while (queued(t)) {
    buf_clear(&t->writing);
    stage(t);
    if (!t->out_is_stream) {
      /* A regular file or a device: plain blocking writes. */
      size_t off = 0;
      while (off < t->writing.len) {
        long n = os_stdfds_write(t->out_fd, t->writing.data + off, t->writing.len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          t->write_failed = true;
          drop_queue(t);
          break;
        }
        off += (size_t)n;
      }
      continue;
    }
    uv_stream_t *out = (uv_stream_t *)&t->out;
    uv_buf_t b = uv_buf_init(t->writing.data, (unsigned)t->writing.len);
    int n = uv_try_write(out, &b, 1);
    if (n == (int)t->writing.len) continue; /* all of it: stage the next piece */
    /* EAGAIN, or a failure the write below reports from its callback (not
     * from inside send). */
    if (n < 0) n = 0;
    b = uv_buf_init(t->writing.data + n, (unsigned)(t->writing.len - (size_t)n));
    t->write_req.data = t;
    int err = uv_write(&t->write_req, out, &b, 1, on_write);
    if (err < 0) {
      log_write(LOG_INFO, "stdout closed (%s); stopping", uv_strerror(err));
      t->write_failed = true;
      buf_clear(&t->writing);
      drop_queue(t);
      return;
    }
    t->write_in_flight = true;
    return;
  }
}

static void on_flush_idle(uv_idle_t *h) { (void)h; }

static void on_flush_check(uv_check_t *h) {
  stdio_transport *t = h->data;
  flush(t);
  /* With a write in flight, its callback stages the rest: no need to spin. */
  if (!queued(t) || t->write_in_flight) {
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
  if ((!m->json && !m->chain) || t->write_failed) return;
  if (m->chain) {
    /* Own bytes copied, long strings borrowed under the chain's lease. */
    const chain *c = m->chain;
    size_t base = t->pending.len;
    buf_append(&t->pending, c->own.data, c->own.len);
    for (size_t i = 0; i < c->count; i++) borrow(t, base + c->strings[i].at, &c->strings[i], c->lease);
  } else {
    buf_reserve(&t->pending, m->len + 1);
    buf_append(&t->pending, m->json, m->len);
  }
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

static const transport_ops STDIO_OPS = {.send = stdio_send, .chains = true};

/* ---- Input ----------------------------------------------------------- */

/* p is in one of our buffers, which we drop after: the session may decode
 * the message's long strings where they are. */
static void handle_line(stdio_transport *t, char *p, size_t n) {
  while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r')) i++;
  if (i == n) return; /* blank lines are not messages */
  session_receive_in_place(t->session, p, n, NULL);
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
static void feed(stdio_transport *t, char *data, size_t n) {
  size_t max = t->srv->opts.max_message_bytes;
  while (n > 0 && !t->input_ended) {
    char *nl = memchr(data, '\n', n);
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

/* nread bytes were read into line's free space: handle the complete lines
 * where they are, keep the incomplete one at the front. */
static void feed_line(stdio_transport *t, size_t nread) {
  size_t max = t->srv->opts.max_message_bytes;
  char *data = t->line.data;
  size_t start = 0, from = t->line.len, end = t->line.len + nread;
  while (!t->input_ended) {
    char *nl = memchr(data + from, '\n', end - from);
    if (!nl) break;
    size_t stop = (size_t)(nl - data);
    if (t->discarding) t->discarding = false;
    else if (stop - start > max) reject_oversized(t);
    else handle_line(t, data + start, stop - start);
    start = from = stop + 1;
  }
  size_t rest = end - start;
  if (t->input_ended || t->discarding) {
    rest = 0;
  } else if (rest > max) {
    reject_oversized(t);
    t->discarding = true;
    rest = 0;
  }
  if (rest && start) memmove(data, data + start, rest);
  t->line.len = rest;
  data[rest] = '\0';
  if (!rest && t->line.cap > KEEP_LINE_CAPACITY) buf_free(&t->line);
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
  if (!t->input_ended || t->finished || t->write_in_flight || (queued(t) && !t->write_failed)) return;
  if (t->srv->nested_poll > 0) { /* stopping the loop from inside a handler would stop only the inner turn */
    t->finish_held = true;
    if (!uv_is_active((uv_handle_t *)&t->held_check)) uv_check_start(&t->held_check, on_held_check);
    return;
  }
  t->finished = true;
  t->on_done(t);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  stdio_transport *t = h->data;
  /* Into line's free space, unless input is being held: then a handler
   * computing below us may be using line. */
  t->read_into_line = !holding(t);
  if (t->read_into_line) {
    buf_reserve(&t->line, READ_BYTES);
    b->base = t->line.data + t->line.len;
    b->len = t->line.cap - t->line.len - 1;
    return;
  }
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
  bool into_line = t->read_into_line;
  t->read_into_line = false;
  if (into_line) {
    if (nread > 0) feed_line(t, (size_t)nread);
  } else if (nread > 0) {
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
  if (!into_line) free(b->base);
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
  if (t->closed) { /* stopping wins over reading: no more reads, nothing fed to the freed session */
    free(t->file_buf);
    t->file_buf = NULL;
    return;
  }
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
  t->closed = true;
  if (!t->in_is_stream && t->file_buf) {
    /* A read paused (held input) frees its buffer here;
     * one in flight, from its callback (cancelled if still queued). */
    if (t->read_paused) {
      free(t->file_buf);
      t->file_buf = NULL;
    } else {
      uv_cancel((uv_req_t *)&t->read_req);
    }
  }
  if (!uv_is_closing((uv_handle_t *)&t->flush_check)) uv_close((uv_handle_t *)&t->flush_check, NULL);
  if (!uv_is_closing((uv_handle_t *)&t->flush_idle)) uv_close((uv_handle_t *)&t->flush_idle, NULL);
  if (!uv_is_closing((uv_handle_t *)&t->held_check)) uv_close((uv_handle_t *)&t->held_check, NULL);
  buf_free(&t->held);
  drop_queue(t); /* before the generations go: the borrowed strings are theirs */
  buf_free(&t->pending);
  free(t->borrowed);
  t->borrowed = NULL;
  t->borrowed_cap = 0;
  buf_free(&t->line);
  if (!t->write_in_flight) buf_free(&t->writing); /* else the write callback still owns it */
  if (t->in_is_stream && !uv_is_closing((uv_handle_t *)&t->in)) uv_close((uv_handle_t *)&t->in, NULL);
  if (t->out_is_stream && !uv_is_closing((uv_handle_t *)&t->out)) uv_close((uv_handle_t *)&t->out, NULL);
}

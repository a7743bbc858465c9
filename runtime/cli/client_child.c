/*
 * client_child.c - a server started as a child process and spoken to over
 * its stdin and stdout, one JSON-RPC message per line (MCP's stdio
 * transport), as Claude Desktop and every other stdio client do. The
 * child's stderr is the user's: its log lines show as they come.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client_conn.h"
#include "core/luamcp_limits.h"

/* Owner: the client. Its handles belong to it, and it is freed in
 * the close callback of the last of them to close. */
typedef struct child_conn {
  client_conn base;
  uv_process_t process;
  uv_pipe_t to_child, from_child;
  loop_waiter waiter;
  buf line;              /* a line read in part */
  bool exited;
  int open_handles;      /* handles not yet closed */
  bool closing;
} child_conn;

typedef struct child_write {
  uv_write_t req;
  char data[];
} child_write;

static void on_handle_closed(uv_handle_t *h) {
  child_conn *c = h->data;
  if (--c->open_handles > 0) return;
  buf_free(&c->line);
  client_conn_release(&c->base);
  free(c);
}

static void close_once(child_conn *c, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
  (void)c;
}

static void on_child_exit(uv_process_t *p, int64_t status, int signal) {
  child_conn *c = p->data;
  c->exited = true;
  if (signal) client_conn_end(&c->base, "the server exited on signal %d", signal);
  else client_conn_end(&c->base, "the server exited (status %lld)", (long long)status);
  close_once(c, (uv_handle_t *)p);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = suggested;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  child_conn *c = s->data;
  if (n < 0) {
    free(b->base);
    client_conn_end(&c->base, "the server closed its output");
    uv_read_stop(s);
    return;
  }
  const char *p = b->base, *end = b->base + n;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) {
      buf_append(&c->line, p, (size_t)(end - p));
      break;
    }
    buf_append(&c->line, p, (size_t)(nl - p));
    size_t len = c->line.len;
    if (len && c->line.data[len - 1] == '\r') len--;
    if (len) client_conn_deliver(&c->base, c->line.data, len);
    c->line.len = 0;
    p = nl + 1;
  }
  if (c->line.len > DEFAULT_MAX_MESSAGE_BYTES * 4) {
    client_conn_end(&c->base, "the server sent a line longer than %u bytes", DEFAULT_MAX_MESSAGE_BYTES * 4);
    uv_read_stop(s);
  }
  free(b->base);
}

static void on_written(uv_write_t *req, int status) {
  (void)status; /* a broken pipe shows as the child's exit */
  free(req);
}

static bool child_send(client_conn *base, const char *json, size_t len, buf *err) {
  child_conn *c = (child_conn *)base;
  if (c->exited || uv_is_closing((uv_handle_t *)&c->to_child)) {
    buf_append_str(err, base->ended ? base->ended : "the server has exited");
    return false;
  }
  child_write *w = malloc(sizeof *w + len + 1);
  memcpy(w->data, json, len);
  w->data[len] = '\n';
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len + 1);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->to_child, &b, 1, on_written);
  if (rc != 0) {
    free(w);
    buf_printf(err, "cannot write to the server: %s", uv_strerror(rc));
    return false;
  }
  return true;
}

static bool child_wait(client_conn *base, int timeout_ms) {
  child_conn *c = (child_conn *)base;
  return loop_waiter_turn(&c->waiter, timeout_ms) != 0 || base->inbox != NULL;
}

static void child_close(client_conn *base) {
  child_conn *c = (child_conn *)base;
  c->closing = true;
  /* End of input is how a stdio server learns to stop; one that does not
   * within the grace period is killed. */
  close_once(c, (uv_handle_t *)&c->to_child);
  uint64_t give_up = uv_hrtime() + (uint64_t)CLIENT_CHILD_GRACE_MS * 1000000u;
  while (!c->exited && uv_hrtime() < give_up) child_wait(base, 50);
  if (!c->exited) {
    uv_process_kill(&c->process, SIGKILL);
    while (!c->exited) child_wait(base, 50);
  }
  close_once(c, (uv_handle_t *)&c->from_child);
  loop_waiter_close(&c->waiter, on_handle_closed);
  uv_run(base->loop, UV_RUN_NOWAIT);
}

static const client_conn_ops CHILD_OPS = {
    .send = child_send,
    .wait = child_wait,
    .close = child_close,
};

client_conn *client_child_open(uv_loop_t *loop, char *const argv[], buf *err) {
  child_conn *c = calloc(1, sizeof *c);
  c->base.ops = &CHILD_OPS;
  c->base.loop = loop;
  uv_pipe_init(loop, &c->to_child, 0);
  uv_pipe_init(loop, &c->from_child, 0);
  loop_waiter_init(&c->waiter, loop, c);
  c->to_child.data = c->from_child.data = c->process.data = c;
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&c->to_child},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->from_child},
      {.flags = UV_INHERIT_FD, .data.fd = 2},
  };
  uv_process_options_t po = {
      .exit_cb = on_child_exit,
      .file = argv[0],
      .args = (char **)argv,
      .stdio_count = 3,
      .stdio = stdio,
  };
  int rc = uv_spawn(loop, &c->process, &po);
  if (rc != 0) {
    buf_printf(err, "cannot start %s: %s", argv[0], uv_strerror(rc));
    /* libuv initialized the process handle even though the spawn failed:
     * it is closed with the others, and the struct goes with the last. */
    c->exited = true;
    c->open_handles = 5;
    uv_close((uv_handle_t *)&c->process, on_handle_closed);
    uv_close((uv_handle_t *)&c->to_child, on_handle_closed);
    uv_close((uv_handle_t *)&c->from_child, on_handle_closed);
    loop_waiter_close(&c->waiter, on_handle_closed);
    uv_run(loop, UV_RUN_NOWAIT);
    return NULL;
  }
  c->open_handles = 5; /* process, two pipes, the waiter's two */
  uv_read_start((uv_stream_t *)&c->from_child, on_alloc, on_read);
  return &c->base;
}

/* fuzz_stdio.c - libFuzzer target: the stdio transport in process, over
 * socket pairs standing for stdin and stdout: line framing (partial lines,
 * oversized lines, CR and blanks), the held-input path while a handler
 * computes ("compute" in fuzz_app.c takes nested loop turns, scanning held
 * input for cancellations), end of input with calls still waiting, and the
 * output queue. The input is written in pieces whose sizes come from its
 * first byte. Every line the server writes must be one JSON value. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/jobs.h"
#include "core/json.h"
#include "core/luamcp_limits.h"
#include "transport/fuzz/fuzz_app.h"
#include "transport/stdio_transport.h"

enum { MAX_TURNS = 20000, QUIET_TURNS = 3 };

static bool done;
static buf output;

static void on_done(stdio_transport *t) {
  (void)t;
  done = true;
}

static void check_output(void) {
  char *nl;
  while (output.len && (nl = memchr(output.data, '\n', output.len))) {
    size_t n = (size_t)(nl - output.data);
    json_doc *doc = json_parse(output.data, n, MAX_JSON_DEPTH, NULL);
    if (!doc) __builtin_trap(); /* a line on stdout that is not one JSON value */
    json_doc_free(doc);
    buf_consume(&output, n + 1);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN); /* as luamcp does */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t piece = (size_t)data[0] * 37 + 1; /* 1 .. 9436 bytes a write */
  data++;
  size--;
  int in[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0) __builtin_trap();
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) < 0) __builtin_trap();
  uv_loop_t loop;
  uv_loop_init(&loop);
  server srv;
  server_options o;
  server_options_defaults(&o);
  o.max_message_bytes = 4096; /* small, so oversized lines are common */
  server_init(&srv, &o, &FUZZ_APP, &loop);
  stdio_transport t;
  memset(&t, 0, sizeof t);
  t.in_fd = in[1];
  t.out_fd = out[0];
  done = false;
  buf_clear(&output);
  stdio_start(&t, &loop, &srv, on_done);

  size_t off = 0;
  bool shut = false;
  int quiet = 0;
  for (int i = 0; i < MAX_TURNS && !done; i++) {
    bool moved = false;
    if (off < size) {
      size_t n = size - off < piece ? size - off : piece;
      ssize_t w = send(in[0], data + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        off += (size_t)w;
        moved = true;
      }
    } else if (!shut) {
      shutdown(in[0], SHUT_WR);
      shut = moved = true;
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    char b[16384];
    ssize_t r;
    while ((r = recv(out[1], b, sizeof b, MSG_DONTWAIT)) > 0) {
      buf_append(&output, b, (size_t)r);
      moved = true;
    }
    check_output();
    if (moved) quiet = 0;
    else if (++quiet >= QUIET_TURNS) {
      fuzz_app_answer_one();
      quiet = 0;
    }
  }
  if (!done && shut && off == size) __builtin_trap(); /* input ended and everything was answered, yet it never finished */
  stdio_close_handles(&t);
  uv_run(&loop, UV_RUN_DEFAULT);
  session_free(t.session);
  jobs_release(&srv);
  fuzz_app_reset();
  uv_loop_close(&loop);
  close(in[0]);
  close(out[1]);
  buf_free(&output);
  return 0;
}

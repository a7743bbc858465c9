/*
 * stdio_transport.h - the stdio transport: one session over newline-delimited JSON on
 * the process's stdin and stdout.
 *
 * stdout carries protocol messages only. At start the transport moves the
 * protocol streams to private descriptors and points fd 0 at /dev/null and
 * fd 1 at stderr, so Lua's print, io.write, io.stdout and every child
 * process write to stderr and can never corrupt the wire.
 */
#ifndef LUAMCP_STDIO_TRANSPORT_H
#define LUAMCP_STDIO_TRANSPORT_H

#include <stdbool.h>
#include <uv.h>

#include "core/buf.h"
#include "core/server.h"
#include "core/session.h"

typedef struct stdio_transport stdio_transport;
typedef void (*stdio_done_fn)(stdio_transport *t);

/* A long string of a queued message (core/chain.h), escaped as it is
 * staged for writing. Holds the message's lease until it is staged whole. */
typedef struct stdio_borrowed {
  size_t at;  /* where it goes among the pending own bytes */
  const char *data;
  size_t len;
  size_t done; /* bytes of it staged */
  chain_lease *lease;
} stdio_borrowed;

/* Owner: main, one per process. stdio_start sets it up; on_done runs once
 * stdin has ended (or stdout broke) and the session is closed and flushed. */
struct stdio_transport {
  uv_loop_t *loop;
  server *srv;
  session *session;
  stdio_done_fn on_done;
  int in_fd, out_fd;

  bool in_is_stream; /* pipe, tty or socket; otherwise a file read with uv_fs_read */
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_tcp_t tcp;
  } in;
  uv_fs_t read_req;
  char *file_buf; /* a file's read buffer; freed by the read's callback once closed */
  /* The incomplete line read so far. A pipe reads straight into it, and
   * lines are handled where they are (decoded in place: no copy of a big
   * message). */
  buf line;
  bool read_into_line; /* the read in progress is into line's free space */
  bool discarding;   /* skipping the rest of an oversized line */
  bool input_ended;
  /* Input that arrived while a handler computed (server.nested_poll): only
   * cancellations in it were acted on; the rest is fed on a later turn. */
  buf held;
  size_t held_scanned; /* bytes of held already looked at for cancellations */
  bool eof_held, finish_held;
  bool read_paused;  /* held reached STDIO_HELD_INPUT_BYTES: not reading until it is fed */
  uv_check_t held_check;

  bool out_is_stream;
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
  } out;
  /* Messages not yet written: their own bytes, and the long strings they
   * borrow, in order. Both are staged into writing a piece at a time. */
  buf pending;
  size_t pending_staged; /* own bytes of pending already staged */
  stdio_borrowed *borrowed;
  size_t borrowed_head, borrowed_count, borrowed_cap;
  buf writing;       /* staged bytes: the uv_write in flight writes them */
  uv_write_t write_req;
  bool write_in_flight;
  bool write_failed;
  uv_check_t flush_check; /* flushes pending once per loop turn ... */
  uv_idle_t flush_idle;   /* ... and keeps that turn from blocking in poll first */
  bool finished;
  /* stdio_close_handles ran: the server is stopping, and a file read still
   * in flight ends there, whatever it read (stdin can be endless: /dev/zero). */
  bool closed;
};

/* Take over fds 0 and 1 (see above). Call before any script runs. */
bool stdio_claim_fds(stdio_transport *t);
/* Create the session and start reading. */
void stdio_start(stdio_transport *t, uv_loop_t *loop, server *srv, stdio_done_fn on_done);
/* Close the transport's handles (before the loop is drained at exit). */
void stdio_close_handles(stdio_transport *t);

#endif

/*
 * worker_ipc.h - the frames on the IPC pipe between the supervisor of
 * `--workers N` (cli/supervisor.c) and each worker (transport/http_worker.c).
 *
 * A frame is a head and `len` bytes. A HANDOVER frame travels with a TCP
 * socket (uv_write2's send_handle): the receiver takes the next pending
 * handle of the pipe when the frame is complete, since libuv queues them in
 * the order they came, with the first bytes of their frame.
 */
#ifndef LUAMCP_WORKER_IPC_H
#define LUAMCP_WORKER_IPC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"

/* The worker's end of the pipe: fd 3 of every worker. */
#define WORKER_IPC_FD 3
/* The listening socket the supervisor made, shared by every worker: fd 4
 * on POSIX. Windows has no descriptors to inherit beyond the CRT's: there
 * the socket comes as the pipe's first handle (a WORKER_LISTENER frame). */
#ifdef _WIN32
#define WORKER_LISTEN_FD -1
#else
#define WORKER_LISTEN_FD 4
#endif

typedef enum worker_frame_type {
  WORKER_READY = 1,    /* worker -> supervisor: it listens */
  WORKER_ANNOUNCE = 2, /* supervisor -> worker: every worker listens; write the start line */
  WORKER_HANDOVER = 3, /* a connection and its unanswered input: to the supervisor, `worker` is
                          the owner it must reach; from it, the worker that read the request */
  WORKER_STATE_KEY = 4, /* supervisor -> worker, the first frame: the secret that seals 2026-07-28
                           requestState, the same in every worker (unless --state-key-env gives one) */
  WORKER_BUS = 5,       /* a bus message (app/bus.h): to the supervisor, for every other worker; from it,
                           one of them sent it (`worker` says which) */
  WORKER_METRICS = 6,   /* a worker's /metrics text (every WORKER_METRICS_PUSH_MS): to the supervisor,
                           which passes it to every other worker (`worker` says whose) */
  WORKER_LISTENER = 7,  /* supervisor -> worker, Windows only: the shared listening socket (uv_write2's
                           send_handle), after the state key */
  WORKER_STOP = 8,      /* supervisor -> worker, Windows only (POSIX sends SIGTERM, which Windows lacks):
                           stop as on SIGTERM; a second one cancels the calls, as a second signal does */
} worker_frame_type;

/* On a HANDOVER frame from the supervisor: the owner is not running (it is
 * being restarted, or never was): answer the first request here. */
#define WORKER_FLAG_DECLINED 1

/* Owner: whoever reads or writes it; sent as it is (both ends are the same
 * binary on the same machine). */
typedef struct worker_frame {
  uint32_t len;
  uint8_t type;
  uint8_t flags;
  uint16_t worker;
} worker_frame;

/* Append a frame to out. */
void worker_frame_write(buf *out, worker_frame_type type, int flags, int worker, const char *payload, size_t len);

/* The next complete frame of in from *off: true with its head and payload
 * (pointing into in) and *off past it; false when it is not all there yet,
 * or (with *bad set) when its head is not one of ours. */
bool worker_frame_next(const buf *in, size_t *off, worker_frame *head, const char **payload, bool *bad);

/* Read the first frame, WORKER_STATE_KEY, from fd (blocking: the worker
 * needs it before it serves). Returns the key's length (up to cap bytes in
 * key), or -1 when the pipe does not begin with one. */
int worker_read_state_key(int fd, char *key, size_t cap);

#endif

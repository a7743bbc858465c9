/* worker_ipc.c - see worker_ipc.h. */
#include "transport/worker_ipc.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/luamcp_limits.h"

void worker_frame_write(buf *out, worker_frame_type type, int flags, int worker, const char *payload, size_t len) {
  worker_frame head = {.len = (uint32_t)len, .type = (uint8_t)type, .flags = (uint8_t)flags, .worker = (uint16_t)worker};
  buf_append(out, (const char *)&head, sizeof head);
  if (len) buf_append(out, payload, len);
}

bool worker_frame_next(const buf *in, size_t *off, worker_frame *head, const char **payload, bool *bad) {
  *bad = false;
  if (in->len - *off < sizeof *head) return false;
  memcpy(head, in->data + *off, sizeof *head);
  if (head->type < WORKER_READY || head->type > WORKER_STOP || head->len > WORKER_FRAME_MAX_BYTES) {
    *bad = true;
    return false;
  }
  if (in->len - *off - sizeof *head < head->len) return false;
  *payload = in->data + *off + sizeof *head;
  *off += sizeof *head + head->len;
  return true;
}

static bool read_all(int fd, char *to, size_t n) {
  while (n) {
    ssize_t got = read(fd, to, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    to += got;
    n -= (size_t)got;
  }
  return true;
}

int worker_read_state_key(int fd, char *key, size_t cap) {
  worker_frame head;
  if (!read_all(fd, (char *)&head, sizeof head) || head.type != WORKER_STATE_KEY || head.len > cap) return -1;
  return read_all(fd, key, head.len) ? (int)head.len : -1;
}

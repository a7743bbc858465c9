/* stderr_posix.c - os/stderr.h on POSIX. */
#include "os/stderr.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int out_fd = 2;        /* stderr, or a non-blocking copy of it */
static bool out_is_socket;    /* send with MSG_DONTWAIT instead */

void os_stderr_nonblocking(void) {
  struct stat st;
  if (fstat(2, &st) != 0) return;
  if (S_ISSOCK(st.st_mode)) {
    out_is_socket = true;
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    /* A new open file description of the same pipe or terminal, so that
     * O_NONBLOCK is ours alone and not the parent's or a sibling's. */
    int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) out_fd = fd;
  }
  /* A regular file never blocks for long: plain writes. */
}

long os_stderr_write(const char *p, size_t n) {
  if (out_is_socket) return (long)send(out_fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  return (long)write(out_fd, p, n);
}

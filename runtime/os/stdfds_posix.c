/* stdfds_posix.c - os/stdfds.h on POSIX. */
#include "os/stdfds.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

bool os_stdfds_claim(int *in_fd, int *out_fd) {
  *in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
  *out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (*in_fd < 0 || *out_fd < 0 || devnull < 0) return false;
  if (dup2(devnull, 0) < 0 || dup2(2, 1) < 0) return false;
  close(devnull);
  /* stdout is now a log stream: flush it by line, like stderr's readers expect. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  return true;
}

long os_stdfds_write(int fd, const void *p, unsigned long n) { return (long)write(fd, p, n); }

/* fs_posix.c - os/fs.h on POSIX. */
#include "os/fs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *os_fs_open(const char *path, const char *mode) { return fopen(path, mode); }

bool os_fs_replace(const char *path, const void *data, size_t len, unsigned mode) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  snprintf(tmp, n, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < len;) {
    ssize_t w = write(fd, (const char *)data + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) done += (size_t)w;
  }
  mode_t mask = umask(0);
  umask(mask);
  ok = ok && fchmod(fd, (mode_t)mode & ~mask) == 0;
  if (fd >= 0 && close(fd) != 0) ok = false;
  ok = ok && rename(tmp, path) == 0;
  if (!ok && fd >= 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
  }
  free(tmp);
  return ok;
}

bool os_fs_mkdir(const char *path) { return mkdir(path, 0755) == 0; }

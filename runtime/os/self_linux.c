/*
 * self_linux.c - os/self.h on Linux: the kernel's /proc/self/exe, which
 * names the file this process runs even when it was started through a
 * symbolic link or a relative path.
 */
#include "os/self.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool os_self_exe(const char *argv0, char *out, size_t n) {
  if (n == 0) return false;
  ssize_t len = readlink("/proc/self/exe", out, n - 1);
  if (len > 0 && (size_t)len < n - 1) {
    out[len] = '\0';
    return true;
  }
  /* No /proc (some chroots and containers): argv[0], when it is a path
   * (a bare name was found through PATH, which we cannot redo safely). */
  if (!argv0 || !strchr(argv0, '/')) return false;
  char real[PATH_MAX];
  const char *path = realpath(argv0, real) ? real : argv0;
  size_t path_len = strlen(path);
  if (path_len >= n) return false;
  memcpy(out, path, path_len + 1);
  return true;
}

/*
 * path_posix.c - os/path.h on POSIX: one separator, one root, names are
 * compared byte for byte.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/path.h"

const char *os_path_platform(void) { return "posix"; }

char *os_path_real(const char *path) { return realpath(path, NULL); }

char *os_path_readlink(const char *path) {
  char target[PATH_MAX];
  ssize_t n = readlink(path, target, sizeof target);
  if (n < 0 || n == (ssize_t)sizeof target) return NULL;
  return strndup(target, (size_t)n);
}

bool os_path_is_separator(char c) { return c == '/'; }

bool os_path_is_absolute(const char *path) { return path[0] == '/'; }

char *os_path_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
}

bool os_path_inside(const char *real_dir, const char *real_path) {
  size_t n = strlen(real_dir);
  return strncmp(real_path, real_dir, n) == 0 && (real_path[n] == '/' || (n == 1 && real_dir[0] == '/'));
}

bool os_path_name_ok(const char *name, size_t len) {
  (void)name;
  (void)len;
  return true;
}

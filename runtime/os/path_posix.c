/*
 * path_posix.c - os/path.h on POSIX: one separator, one root, names are
 * compared byte for byte.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

char *os_path_which(const char *name) {
  if (strchr(name, '/')) {
    char *real = realpath(name, NULL);
    if (real && access(real, X_OK) != 0) {
      free(real);
      return NULL;
    }
    return real;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  size_t name_len = strlen(name);
  while (*path) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    char *candidate = malloc(len + name_len + 3);
    if (!candidate) return NULL;
    /* An empty entry is the current folder, as for execvp. */
    snprintf(candidate, len + name_len + 3, "%.*s/%s", len ? (int)len : 1, len ? path : ".", name);
    char *real = realpath(candidate, NULL);
    free(candidate);
    struct stat st;
    if (real && access(real, X_OK) == 0 && stat(real, &st) == 0 && S_ISREG(st.st_mode)) return real;
    free(real);
    if (!end) break;
    path = end + 1;
  }
  return NULL;
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

/* files.c - see files.h. */
#include "cli/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool files_read(const char *path, buf *into, buf *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    buf_printf(err, "%s: %s", path, strerror(errno));
    return false;
  }
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(into, chunk, n);
  bool ok = !ferror(f);
  fclose(f);
  if (!ok) buf_printf(err, "%s: read error", path);
  return ok;
}

bool files_replace(const char *path, const buf *data, mode_t mode, buf *err) {
  size_t len = strlen(path);
  char *tmp = malloc(len + 16);
  snprintf(tmp, len + 16, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < data->len;) {
    ssize_t n = write(fd, data->data + done, data->len - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += (size_t)n;
  }
  mode_t mask = umask(0);
  umask(mask);
  ok = ok && fchmod(fd, mode & ~mask) == 0;
  if (fd >= 0 && close(fd) != 0) ok = false;
  ok = ok && rename(tmp, path) == 0;
  if (!ok) {
    buf_printf(err, "%s: %s", path, strerror(errno));
    if (fd >= 0) unlink(tmp);
  }
  free(tmp);
  return ok;
}

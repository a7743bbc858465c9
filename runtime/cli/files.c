/* files.c - see files.h. */
#include "cli/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/fs.h"

bool files_read(const char *path, buf *into, buf *err) {
  FILE *f = os_fs_open(path, "rb");
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
  if (os_fs_replace(path, data->data, data->len, (unsigned)mode)) return true;
  buf_printf(err, "%s: %s", path, strerror(errno));
  return false;
}

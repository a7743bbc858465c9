/*
 * tar.h - the subset of tar (POSIX.1-1988 ustar) luamcp writes: regular
 * files and folders, with the owner and mode given, and gzip over it (zlib's
 * deflate). That is what an OCI image's layers and its archive are
 * (cli/release_oci.c). Plain bytes and zlib only: no Lua, no libuv.
 *
 * Nothing is taken from the machine: every entry's mtime is 0, its user and
 * group names are empty, and the gzip header carries mtime 0, no file name
 * and a fixed OS byte, so the same entries give the same bytes (with the
 * same zlib). The caller adds entries in the order it wants them read.
 */
#ifndef LUAMCP_TAR_H
#define LUAMCP_TAR_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

/* ustar splits a path between a 155-byte prefix and a 100-byte name at a '/'. */
#define TAR_MAX_PATH 255

/* Append a regular file's header and its bytes (padded to 512) to out.
 * path uses '/' between folders, without a leading '/'; mode is the
 * permission bits (0755, 01777). False, with out untouched, when the path
 * does not fit ustar's fields. */
bool tar_add_file(buf *out, const char *path, const void *data, size_t len, unsigned mode, unsigned uid,
                  unsigned gid);
/* Append a folder's header; path ends with '/'. */
bool tar_add_dir(buf *out, const char *path, unsigned mode, unsigned uid, unsigned gid);
/* Append the end of the archive: two blocks of zeros. */
void tar_finish(buf *out);

/* gzip (RFC 1952) of len bytes of data, appended to out. False when zlib
 * fails (out of memory). */
bool tar_gzip(const void *data, size_t len, buf *out);

#endif

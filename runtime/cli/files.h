/*
 * files.h - whole files read and replaced, for the commands that write
 * what a person keeps (build's OUT, install's client configurations).
 */
#ifndef LUAMCP_FILES_H
#define LUAMCP_FILES_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/buf.h"

/* Append the bytes of the file at path to into. */
bool files_read(const char *path, buf *into, buf *err);
/* Write data to path through a temporary file beside it and a rename, so
 * path is never half written, and a path that is running can be replaced
 * (writing into a running executable fails with ETXTBSY). mode is applied
 * less the umask. */
bool files_replace(const char *path, const buf *data, mode_t mode, buf *err);

#endif

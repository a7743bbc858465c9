/*
 * fs.h - whole files read and replaced by the commands (build's OUT,
 * install's client configurations, and their folders), with UTF-8 paths
 * on every OS. POSIX (fs_posix.c): stdio, mkstemp, fchmod, rename and
 * mkdir. Windows (fs_windows.c): the W calls, and MoveFileExW, since
 * rename cannot replace a file there.
 */
#ifndef LUAMCP_OS_FS_H
#define LUAMCP_OS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* fopen with a UTF-8 path. */
FILE *os_fs_open(const char *path, const char *mode);

/* Write len bytes of data to path through a temporary file beside it and a
 * rename, so that path is never half written and a running program can be
 * replaced. mode (0755, 0644) less the umask where the OS has modes. False
 * with errno set. */
bool os_fs_replace(const char *path, const void *data, size_t len, unsigned mode);

/* Create the folder path (UTF-8), mode 0755 less the umask where the OS
 * has modes. False with errno set: EEXIST when something is there. */
bool os_fs_mkdir(const char *path);

#endif

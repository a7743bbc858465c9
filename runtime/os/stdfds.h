/*
 * stdfds.h - taking the protocol's streams (fds 0 and 1) away from the
 * scripts: the stdio transport reads and writes private copies, and fd 0
 * then reads nothing, fd 1 is stderr, so that a script's print or a child
 * it starts cannot corrupt the protocol. POSIX (stdfds_posix.c): fcntl
 * F_DUPFD_CLOEXEC and /dev/null. Windows (stdfds_windows.c): the C
 * runtime's _dup, not inherited, in binary mode (no \r added to a line),
 * and NUL. Either way stdout (now stderr) is flushed at least by line.
 */
#ifndef LUAMCP_OS_STDFDS_H
#define LUAMCP_OS_STDFDS_H

#include <stdbool.h>

/* Copies of fds 0 and 1 in *in_fd and *out_fd (descriptors libuv takes:
 * uv_guess_handle, uv_pipe_open, uv_fs_read), then 0 and 1 repointed as
 * above. False when the OS refused one of the steps. */
bool os_stdfds_claim(int *in_fd, int *out_fd);

/* Write n bytes of p to fd (a file or a device: blocking); the count
 * written, or -1 (errno set; EINTR already retried by the caller). */
long os_stdfds_write(int fd, const void *p, unsigned long n);

#endif

/*
 * stderr.h - writing the log to stderr without ever blocking on it (a
 * client may pipe our stderr and never read it): core/log.c buffers, this
 * writes. POSIX (stderr_posix.c): a non-blocking open file description of
 * its own (a pipe, a terminal) or MSG_DONTWAIT (a socket). Windows
 * (stderr_windows.c): plain writes (an anonymous pipe has no non-blocking
 * mode worth using). Used by the core: no libuv.
 */
#ifndef LUAMCP_OS_STDERR_H
#define LUAMCP_OS_STDERR_H

#include <stddef.h>

/* From now on, writes that would block fail with EAGAIN instead (where
 * the OS can). Once, when the server starts serving. */
void os_stderr_nonblocking(void);

/* Some of p's n bytes to stderr: the count written, or -1 with errno
 * (EINTR, EAGAIN/EWOULDBLOCK: try later; anything else: stderr is gone). */
long os_stderr_write(const char *p, size_t n);

#endif

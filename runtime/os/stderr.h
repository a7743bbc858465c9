/*
 * stderr.h - writing the log to stderr without blocking on it where the
 * OS allows (a client may pipe our stderr and never read it): core/log.c
 * buffers, this writes. POSIX (stderr_posix.c): a non-blocking open file
 * description of its own (a pipe, a terminal) or MSG_DONTWAIT (a socket),
 * so an unread stderr never stops the server. Windows (stderr_windows.c):
 * plain writes, which DO block once an unread pipe is full (an anonymous
 * pipe's PIPE_NOWAIT mode is deprecated and loses bytes; a writer thread
 * would be the fix). Used by the core: no libuv.
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

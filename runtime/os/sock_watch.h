/*
 * sock_watch.h - waiting on the loop for a socket that a library reads and
 * writes itself (libcurl's, hiredis's) to become readable or writable:
 * libuv's uv_poll on POSIX (sock_watch_posix.c); on Windows
 * (sock_watch_windows.c) a timer that asks select() without waiting.
 *
 * Why not uv_poll on Windows: it waits with "AFD poll" requests, one
 * OVERLAPPED per handle reused for each, and under wine a completion
 * arrives for a request libuv already counted as done (seen with libcurl:
 * a socket watched for writing, then reading, then let go). After the
 * handle is closed it runs the close a second time and aborts
 * (src/win/poll.c: !(handle->flags & UV_HANDLE_CLOSED)); keeping the
 * memory longer does not help, closing the socket later neither. A timer
 * has no request in flight to come back late.
 */
#ifndef LUAMCP_OS_SOCK_WATCH_H
#define LUAMCP_OS_SOCK_WATCH_H

#include <uv.h>

typedef struct os_sock_watch os_sock_watch;

/* status 0 with the events ready (UV_READABLE, UV_WRITABLE), or a
 * negative libuv error code: the watch has then stopped (as uv_poll's). */
typedef void (*os_sock_watch_cb)(void *data, int status, int events);

/* A watch of s, stopped; NULL when the socket cannot be watched. */
os_sock_watch *os_sock_watch_new(uv_loop_t *loop, uv_os_sock_t s, os_sock_watch_cb cb, void *data);

/* Report these events (UV_READABLE | UV_WRITABLE) while they are ready,
 * level-triggered; 0 stops. An active watch keeps the loop alive. */
void os_sock_watch_set(os_sock_watch *w, int events);

/* No callback after this (it may be called from the watch's own
 * callback); the memory goes a loop turn later. Call it before the
 * socket is closed. */
void os_sock_watch_close(os_sock_watch *w);

#endif

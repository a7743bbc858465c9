/*
 * sock.h - the few socket calls the HTTP transport makes on a socket's
 * own descriptor, beside libuv: BSD sockets on POSIX (sock_posix.c),
 * Winsock on Windows (sock_windows.c).
 */
#ifndef LUAMCP_OS_SOCK_H
#define LUAMCP_OS_SOCK_H

#include <stdbool.h>
#include <uv.h>

/* Has the peer sent bytes not read yet? Never blocks. */
bool os_sock_bytes_waiting(uv_os_sock_t s);

/* Has the peer reset the connection (it closed its socket entirely, and
 * answered what we sent with a reset)? False where the OS cannot tell
 * without reading (it is a hint: see http_conn.c's probe). */
bool os_sock_peer_reset(uv_os_sock_t s);

/* A non-blocking socket listening on addr (--workers: every worker
 * accepts from it), not inherited by child processes, SO_REUSEADDR where
 * libuv sets it (POSIX); or a negative libuv error code. */
int os_sock_listen_shared(const struct sockaddr *addr, int backlog);

/* Take one connection from a non-blocking listening socket: 0 with *out
 * (non-blocking, not inherited by child processes), UV_EAGAIN when there
 * is none to take now (none waits, another worker took it, or the client
 * went before we did), or another negative libuv error code. */
int os_sock_accept(uv_os_sock_t listener, uv_os_sock_t *out);

void os_sock_close(uv_os_sock_t s);

#endif

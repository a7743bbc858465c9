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
 * accepts from it), SO_REUSEADDR as libuv sets it; or a negative libuv
 * error code. UV_ENOSYS where the build has no workers. */
int os_sock_listen_shared(const struct sockaddr *addr, int backlog);

void os_sock_close(uv_os_sock_t s);

#endif

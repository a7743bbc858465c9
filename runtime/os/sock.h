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

/* ---- Local sockets (--http unix:PATH) ------------------------------------
 * A Unix socket file on POSIX, a named pipe (\\.\pipe\NAME) on Windows.
 * On POSIX the file is made with the permission bits mode (never more open
 * than that, not even for a moment); a socket file left by a process that
 * is gone (connecting is refused) is replaced; a live one (something
 * accepts) is refused, and so is anything at the path that is not a
 * socket, which is never removed. The errors say all that in err. */

/* Bind pipe (uv_pipe_init'ed, not for IPC) to path and listen with cb:
 * 0, or a negative libuv error code with the reason in err. Windows: the
 * pipe's default security applies (mode is POSIX's). */
int os_local_listen(uv_pipe_t *pipe, const char *path, int mode, int backlog, uv_connection_cb cb, char *err,
                    size_t err_len);

/* The same as a non-blocking socket, not inherited by child processes, for
 * --workers (every worker accepts from it); or a negative libuv error code
 * with err. Windows: UV_ENOTSUP (a named pipe is no socket to share). */
int os_local_listen_shared(const char *path, int mode, int backlog, char *err, size_t err_len);

/* Remove the socket file at path that we made, once we no longer listen
 * on it (nothing when it is no longer a socket; nothing on Windows: a pipe
 * goes with its last handle). */
void os_local_remove(const char *path);

#endif

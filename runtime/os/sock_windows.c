/* sock_windows.c - os/sock.h on Windows (Winsock; named pipes for the local sockets). */
#include "os/sock.h"

#include <stdio.h>
#include <string.h>

bool os_sock_bytes_waiting(uv_os_sock_t s) {
  u_long n = 0;
  return ioctlsocket(s, FIONREAD, &n) == 0 && n > 0;
}

/* Winsock keeps no TCP state to read (TCP_INFO's SIO_TCP_INFO is Windows
 * 10 1703's, and wine's is partial): a peek says it instead. After the
 * peer's FIN it returns 0 until a reset arrives, then fails with
 * WSAECONNRESET; the socket is non-blocking (libuv's), so it never waits. */
bool os_sock_peer_reset(uv_os_sock_t s) {
  char byte;
  if (recv(s, &byte, 1, MSG_PEEK) >= 0) return false;
  int e = WSAGetLastError();
  return e == WSAECONNRESET || e == WSAECONNABORTED;
}

/* No SO_REUSEADDR: on Windows it would let another program bind the same
 * port and take our connections. The supervisor hands the socket to each
 * worker over its pipe (libuv's uv_write2: WSADuplicateSocket). */
int os_sock_listen_shared(const struct sockaddr *addr, int backlog) {
  SOCKET s = WSASocketW(addr->sa_family, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
                        WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) return uv_translate_sys_error(WSAGetLastError());
  u_long on = 1;
  int len = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  if (ioctlsocket(s, FIONBIO, &on) != 0 || bind(s, addr, len) != 0 || listen(s, backlog) != 0) {
    int e = uv_translate_sys_error(WSAGetLastError());
    closesocket(s);
    return e;
  }
  return (int)s;
}

int os_sock_accept(uv_os_sock_t listener, uv_os_sock_t *out) {
  SOCKET s = accept(listener, NULL, NULL);
  if (s == INVALID_SOCKET) {
    int e = WSAGetLastError();
    return e == WSAEWOULDBLOCK || e == WSAEINTR || e == WSAECONNRESET || e == WSAECONNABORTED
               ? UV_EAGAIN
               : uv_translate_sys_error(e);
  }
  /* Accepted sockets inherit the listener's attributes but not its
   * handle's: keep it out of the programs a script starts. */
  SetHandleInformation((HANDLE)s, HANDLE_FLAG_INHERIT, 0);
  u_long on = 1;
  ioctlsocket(s, FIONBIO, &on);
  *out = s;
  return 0;
}

void os_sock_close(uv_os_sock_t s) { closesocket(s); }

/* ---- Local sockets: named pipes ------------------------------------------ */

int os_local_listen(uv_pipe_t *pipe, const char *path, int mode, int backlog, uv_connection_cb cb, char *err,
                    size_t err_len) {
  (void)mode; /* a pipe's access is its security descriptor's: the default (its creator and administrators) */
  if (strncmp(path, "\\\\.\\pipe\\", 9) != 0 || !path[9]) {
    snprintf(err, err_len, "cannot listen on unix:%s: on Windows this is a named pipe, \\\\.\\pipe\\NAME", path);
    return UV_EINVAL;
  }
  int rc = uv_pipe_bind(pipe, path);
  if (rc == 0) rc = uv_listen((uv_stream_t *)pipe, backlog, cb);
  if (rc == UV_EADDRINUSE || rc == UV_EACCES)
    snprintf(err, err_len, "cannot listen on unix:%s: another server is listening on it", path);
  else if (rc != 0)
    snprintf(err, err_len, "cannot listen on unix:%s: %s", path, uv_strerror(rc));
  return rc;
}

int os_local_listen_shared(const char *path, int mode, int backlog, char *err, size_t err_len) {
  (void)mode;
  (void)backlog;
  snprintf(err, err_len, "cannot listen on unix:%s with --workers on Windows: a named pipe cannot be shared", path);
  return UV_ENOTSUP;
}

void os_local_remove(const char *path) { (void)path; }

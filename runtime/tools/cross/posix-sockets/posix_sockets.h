/*
 * posix_sockets.h - the BSD socket calls hiredis 0.14 makes, on Winsock.
 *
 * Debian 12's hiredis (0.14.1) is written for POSIX sockets only (its
 * Windows layer came in 1.0). windows-deps.sh compiles it for mingw with
 * this folder first on the include path and this header forced in front
 * of every file (-include): the POSIX headers it names (sys/socket.h,
 * netdb.h, poll.h ...) are one-line files that include this one, and the
 * calls it makes on a socket descriptor (read, write, close, connect,
 * fcntl, getsockopt, poll, strerror_r) go to the wrappers below, which
 * call Winsock and turn its error codes into errno values hiredis tests
 * (EINPROGRESS, EAGAIN). A socket is held in an int, as hiredis does:
 * Windows' socket handles fit. Not part of luamcp.exe's own sources.
 */
#ifndef LUAMCP_POSIX_SOCKETS_H
#define LUAMCP_POSIX_SOCKETS_H

#include <winsock2.h>
#include <ws2tcpip.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef O_NONBLOCK
#define O_NONBLOCK 04000
#endif
#ifndef F_GETFL
#define F_GETFL 3
#define F_SETFL 4
#endif

/* A Winsock error as errno; would_block is what WSAEWOULDBLOCK means here. */
static inline int posix_sockets_errno(int wsa, int would_block) {
  switch (wsa) {
  case WSAEWOULDBLOCK: return would_block;
  case WSAEINPROGRESS: case WSAEALREADY: return EINPROGRESS;
  case WSAEINTR: return EINTR;
  case WSAECONNREFUSED: return ECONNREFUSED;
  case WSAECONNRESET: return ECONNRESET;
  case WSAECONNABORTED: return ECONNABORTED;
  case WSAETIMEDOUT: return ETIMEDOUT;
  case WSAEHOSTUNREACH: return EHOSTUNREACH;
  case WSAENETUNREACH: return ENETUNREACH;
  case WSAEADDRNOTAVAIL: return EADDRNOTAVAIL;
  case WSAEADDRINUSE: return EADDRINUSE;
  case WSAENOTCONN: return ENOTCONN;
  case WSAESHUTDOWN: return EPIPE;
  case WSAENOBUFS: return ENOBUFS;
  default: return EIO;
  }
}

static inline int posix_sockets_read(int fd, void *buf, size_t n) {
  int got = recv((SOCKET)fd, (char *)buf, (int)n, 0);
  if (got == SOCKET_ERROR) errno = posix_sockets_errno(WSAGetLastError(), EAGAIN);
  return got == SOCKET_ERROR ? -1 : got;
}

static inline int posix_sockets_write(int fd, const void *buf, size_t n) {
  int sent = send((SOCKET)fd, (const char *)buf, (int)n, 0);
  if (sent == SOCKET_ERROR) errno = posix_sockets_errno(WSAGetLastError(), EAGAIN);
  return sent == SOCKET_ERROR ? -1 : sent;
}

static inline int posix_sockets_close(int fd) { return closesocket((SOCKET)fd) == 0 ? 0 : -1; }

static inline int posix_sockets_connect(int fd, const struct sockaddr *addr, int len) {
  if (connect((SOCKET)fd, addr, len) == 0) return 0;
  errno = posix_sockets_errno(WSAGetLastError(), EINPROGRESS); /* a non-blocking connect under way */
  return -1;
}

/* O_NONBLOCK only: F_GETFL says 0 (Winsock cannot tell), F_SETFL sets it. */
static inline int posix_sockets_fcntl(int fd, int cmd, ...) {
  if (cmd == F_GETFL) return 0;
  va_list ap;
  va_start(ap, cmd);
  u_long on = (va_arg(ap, int) & O_NONBLOCK) != 0;
  va_end(ap);
  if (ioctlsocket((SOCKET)fd, FIONBIO, &on) == 0) return 0;
  errno = posix_sockets_errno(WSAGetLastError(), EIO);
  return -1;
}

/* SO_ERROR's value as an errno too (hiredis puts it in errno). */
static inline int posix_sockets_getsockopt(int fd, int level, int name, void *value, int *len) {
  if (getsockopt((SOCKET)fd, level, name, (char *)value, len) != 0) {
    errno = posix_sockets_errno(WSAGetLastError(), EIO);
    return -1;
  }
  if (level == SOL_SOCKET && name == SO_ERROR && *(int *)value)
    *(int *)value = posix_sockets_errno(*(int *)value, EINPROGRESS);
  return 0;
}

static inline int posix_sockets_setsockopt(int fd, int level, int name, const void *value, int len) {
  return setsockopt((SOCKET)fd, level, name, (const char *)value, len) == 0 ? 0 : -1;
}

static inline int posix_sockets_poll(struct pollfd *fds, unsigned long n, int timeout) {
  return WSAPoll(fds, n, timeout);
}

/* msvcrt knows no text for the socket errnos. */
static inline int posix_sockets_strerror_r(int e, char *buf, size_t n) {
  const char *text = e == ECONNREFUSED ? "Connection refused" : e == ECONNRESET ? "Connection reset by peer"
                   : e == ETIMEDOUT ? "Connection timed out" : e == EHOSTUNREACH ? "No route to host"
                   : e == ENETUNREACH ? "Network is unreachable" : e == EADDRNOTAVAIL ? "Cannot assign requested address"
                   : e == EINPROGRESS ? "Operation now in progress" : strerror(e);
  snprintf(buf, n, "%s", text);
  return 0;
}

#define read posix_sockets_read
#define write posix_sockets_write
#define close posix_sockets_close
#define connect posix_sockets_connect
#define fcntl posix_sockets_fcntl
#define getsockopt posix_sockets_getsockopt
#define setsockopt posix_sockets_setsockopt
#define poll posix_sockets_poll
#define strerror_r posix_sockets_strerror_r

#endif

/* sock_posix.c - os/sock.h on POSIX. */
#include "os/sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

bool os_sock_bytes_waiting(uv_os_sock_t s) {
  char byte;
  return recv(s, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

bool os_sock_peer_reset(uv_os_sock_t s) {
#if defined(__linux__) && defined(TCP_INFO)
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return true;
  return ti.tcpi_state == TCP_CLOSE;
#else
  (void)s;
  return false;
#endif
}

int os_sock_listen_shared(const struct sockaddr *addr, int backlog) {
  int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int on = 1;
  socklen_t len = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 || bind(fd, addr, len) != 0 ||
      listen(fd, backlog) != 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

int os_sock_accept(uv_os_sock_t listener, uv_os_sock_t *out) {
  int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    *out = fd;
    return 0;
  }
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED ? UV_EAGAIN : -errno;
}

void os_sock_close(uv_os_sock_t s) { close(s); }

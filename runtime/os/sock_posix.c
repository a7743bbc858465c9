/* sock_posix.c - os/sock.h on POSIX. */
#include "os/sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

bool os_sock_bytes_waiting(uv_os_sock_t s) {
  char byte;
  return recv(s, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* A Unix socket has no TCP state, and no reset: its peer's close shuts
 * down both directions, which poll reports as a hang-up (a half close
 * shuts down only ours to read, and is no hang-up). */
static bool local_peer_closed(uv_os_sock_t s) {
  struct pollfd p = {.fd = s, .events = POLLIN};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

bool os_sock_peer_reset(uv_os_sock_t s) {
  struct sockaddr_storage a;
  socklen_t alen = sizeof a;
  if (getsockname(s, (struct sockaddr *)&a, &alen) == 0 && a.ss_family == AF_UNIX) return local_peer_closed(s);
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

/* ---- Local sockets ------------------------------------------------------ */

static bool local_address(const char *path, struct sockaddr_un *addr, char *err, size_t err_len) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (!path[0] || strlen(path) >= sizeof addr->sun_path) {
    snprintf(err, err_len, "cannot listen on unix:%s: a socket path is 1 to %zu bytes", path,
             sizeof addr->sun_path - 1);
    return false;
  }
  memcpy(addr->sun_path, path, strlen(path));
  return true;
}

/* Is something at path in the way? A socket nobody accepts on is not: its
 * process is gone without removing it (a crash, SIGKILL), and it goes. */
static int clear_stale(const char *path, const struct sockaddr_un *addr, char *err, size_t err_len) {
  struct stat st;
  if (lstat(path, &st) != 0) return 0;
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(err, err_len, "cannot listen on unix:%s: the path exists and is not a socket (it is left alone)", path);
    return UV_EEXIST;
  }
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe < 0) return -errno;
  int rc = connect(probe, (const struct sockaddr *)addr, sizeof *addr), e = errno;
  close(probe);
  if (rc == 0 || e == EAGAIN || e == EINPROGRESS) {
    snprintf(err, err_len, "cannot listen on unix:%s: another server is listening on it", path);
    return UV_EADDRINUSE;
  }
  if (e != ECONNREFUSED) {
    snprintf(err, err_len, "cannot listen on unix:%s: cannot tell whether it is in use: %s", path, strerror(e));
    return -e;
  }
  if (unlink(path) != 0 && errno != ENOENT) {
    e = errno;
    snprintf(err, err_len, "cannot listen on unix:%s: cannot remove the stale socket: %s", path, strerror(e));
    return -e;
  }
  return 0;
}

int os_local_listen_shared(const char *path, int mode, int backlog, char *err, size_t err_len) {
  struct sockaddr_un addr;
  if (!local_address(path, &addr, err, err_len)) return UV_ENAMETOOLONG;
  int rc = clear_stale(path, &addr, err, err_len);
  if (rc != 0) return rc;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    snprintf(err, err_len, "cannot listen on unix:%s: %s", path, uv_strerror(rc));
    return rc;
  }
  /* The mode without a race and without the umask, which is the whole
   * process's (another thread may be making files): Linux makes the file
   * with the socket's own mode, less the umask's bits, so it is set before
   * bind; the chmod after only gives back what the umask took. Elsewhere
   * the file may be made with the umask's mode: the umask narrows it for
   * the moment of the bind. */
#ifdef __linux__
  bool made = fchmod(fd, (mode_t)mode) == 0 && bind(fd, (const struct sockaddr *)&addr, sizeof addr) == 0;
#else
  mode_t old = umask((mode_t)(~mode & 0777));
  bool made = bind(fd, (const struct sockaddr *)&addr, sizeof addr) == 0;
  umask(old);
#endif
  if (made && chmod(path, (mode_t)mode) != 0) {
    int e = errno;
    unlink(path);
    errno = e;
    made = false;
  }
  if (!made || listen(fd, backlog) != 0) {
    rc = -errno;
    if (made) unlink(path);
    close(fd);
    if (rc == UV_EADDRINUSE) snprintf(err, err_len, "cannot listen on unix:%s: another server is listening on it", path);
    else snprintf(err, err_len, "cannot listen on unix:%s: %s", path, uv_strerror(rc));
    return rc;
  }
  return fd;
}

int os_local_listen(uv_pipe_t *pipe, const char *path, int mode, int backlog, uv_connection_cb cb, char *err,
                    size_t err_len) {
  int fd = os_local_listen_shared(path, mode, backlog, err, err_len);
  if (fd < 0) return fd;
  int rc = uv_pipe_open(pipe, fd);
  if (rc == 0) rc = uv_listen((uv_stream_t *)pipe, backlog, cb);
  if (rc != 0) {
    snprintf(err, err_len, "cannot listen on unix:%s: %s", path, uv_strerror(rc));
    os_local_remove(path);
    if (uv_fileno((uv_handle_t *)pipe, &(uv_os_fd_t){0}) != 0) close(fd); /* else it closes with the handle */
  }
  return rc;
}

void os_local_remove(const char *path) {
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path);
}

/* sock_windows.c - os/sock.h on Windows (Winsock). */
#include "os/sock.h"

bool os_sock_bytes_waiting(uv_os_sock_t s) {
  u_long n = 0;
  return ioctlsocket(s, FIONREAD, &n) == 0 && n > 0;
}

/* Winsock has no TCP_INFO state to read without a recv: the probe's other
 * checks (a read of 0 bytes, a failed write) find a gone client. */
bool os_sock_peer_reset(uv_os_sock_t s) {
  (void)s;
  return false;
}

/* The Windows build has no --workers (runtime/cli/absent/supervisor.c). */
int os_sock_listen_shared(const struct sockaddr *addr, int backlog) {
  (void)addr;
  (void)backlog;
  return UV_ENOSYS;
}

void os_sock_close(uv_os_sock_t s) { closesocket(s); }

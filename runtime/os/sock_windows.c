/* sock_windows.c - os/sock.h on Windows (Winsock). */
#include "os/sock.h"

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

/* The Windows build has no --workers (runtime/cli/absent/supervisor.c). */
int os_sock_listen_shared(const struct sockaddr *addr, int backlog) {
  (void)addr;
  (void)backlog;
  return UV_ENOSYS;
}

void os_sock_close(uv_os_sock_t s) { closesocket(s); }

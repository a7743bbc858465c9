/*
 * absent/http_worker.c - a worker's side of the HTTP transport in a build
 * without worker processes (the Windows .exe links this instead of
 * http_worker.c; README "Platforms"). No process is ever a worker there
 * (the absent supervisor starts none): attaching refuses, so a server
 * has no worker_ops and the connections never ask for one.
 */
#include "transport/http.h"
#include "transport/http_transport.h"

int http_worker_attach(http_server *h, int fd, int listen_fd, const http_worker_hooks *hooks) { return UV_ENOSYS; }

bool http_worker_publish(http_server *h, const char *message, size_t len, const char **why) {
  *why = "no worker processes in this build";
  return false;
}

/*
 * absent/http_worker.c - a worker's side of the HTTP transport in a build
 * without worker processes (the Windows .exe links this instead of
 * http_worker.c; README "Platforms"). No process is ever a worker there
 * (the absent supervisor starts none), so the connections' hooks see a
 * server that is not one, and attaching refuses.
 */
#include "transport/http.h"
#include "transport/http_transport.h"

int worker_owner(const http_conn *c) { return 0; }

void worker_hand_over(http_conn *c) {}

void worker_stop_accepting(http_server *h) {}

void worker_detach(http_server *h) {}

int http_worker_attach(http_server *h, int fd, int listen_fd, const http_worker_hooks *hooks) { return UV_ENOSYS; }

bool http_worker_publish(http_server *h, const char *message, size_t len, const char **why) {
  *why = "no worker processes in this build";
  return false;
}

int http_worker_peer_metrics(const http_server *h, const char **texts, size_t *lens, int cap) { return 0; }

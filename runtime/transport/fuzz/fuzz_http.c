/* fuzz_http.c - libFuzzer target: the HTTP request path in process, through
 * a real loopback connection to the real listener (http_parser callbacks,
 * pipelining, chunked bodies, half-closes, SSE streams and Last-Event-ID
 * replay, the session lifecycle, the buffer budget), with the stub app of
 * fuzz_app.c behind it.
 *
 * An input is up to MAX_CONNS connections' bytes separated by "~~~\n"; each
 * is written (and its write side shut) after the previous ones went quiet.
 * "@SID@" in a connection's bytes becomes the newest session's id, so
 * later requests can use a session that an earlier initialize created.
 * Everything the server sends must parse as HTTP/1.1 responses. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/fuzz/fuzz_app.h"
#include "transport/http.h"
#include "transport/http_route.h"

enum { MAX_CONNS = 4, QUIET_TURNS = 3, MAX_TURNS = 4000 };

static uv_loop_t loop;
static server srv;
static http_server *h;

typedef struct client {
  int fd;
  char *out;
  size_t out_len, out_off;
  bool shut;
  http_parser parser;
  bool check; /* HEAD responses carry no body: not checked when the input has one */
} client;

static client clients[MAX_CONNS];
static int client_count;

static int on_headers_complete(http_parser *p) {
  (void)p;
  return 0;
}
static const http_parser_settings RESPONSE_SETTINGS = {.on_headers_complete = on_headers_complete};

/* One loop turn and one round of client I/O. Returns whether bytes moved. */
static bool turn(void) {
  bool moved = false;
  for (int i = 0; i < client_count; i++) {
    client *c = &clients[i];
    if (c->fd < 0) continue;
    if (c->out_off < c->out_len) {
      ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c->out_off += (size_t)n;
        moved = true;
      } else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS && errno != ENOTCONN) {
        c->out_off = c->out_len; /* the server closed on us */
      }
    } else if (!c->shut) {
      shutdown(c->fd, SHUT_WR);
      c->shut = true;
      moved = true;
    }
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  for (int i = 0; i < client_count; i++) {
    client *c = &clients[i];
    if (c->fd < 0) continue;
    char in[16384];
    ssize_t n;
    while ((n = recv(c->fd, in, sizeof in, MSG_DONTWAIT)) > 0) {
      moved = true;
      if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "<<< %.*s\n", (int)n, in);
      if (c->check && HTTP_PARSER_ERRNO(&c->parser) == HPE_OK) {
        size_t done = http_parser_execute(&c->parser, &RESPONSE_SETTINGS, in, (size_t)n);
        /* The server must only ever send well-formed responses. */
        if (done != (size_t)n && HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) __builtin_trap();
      }
    }
    if (n == 0) { /* the server closed: done with this one */
      close(c->fd);
      c->fd = -1;
      moved = true;
    }
  }
  return moved;
}

/* Turn until nothing moves, answering the app's waiting calls one at a
 * time whenever things go quiet. */
static void settle(void) {
  int quiet = 0;
  for (int i = 0; i < MAX_TURNS; i++) {
    if (turn()) {
      quiet = 0;
    } else if (++quiet >= QUIET_TURNS) {
      if (!fuzz_app_answer_one()) return;
      quiet = 0;
    }
  }
}

static void open_client(const char *data, size_t len, bool check) {
  client *c = &clients[client_count++];
  memset(c, 0, sizeof *c);
  c->check = check;
  http_parser_init(&c->parser, HTTP_RESPONSE);
  /* "@SID@" -> the newest session's id. */
  const char *sid = h->sessions ? h->sessions->id : "none";
  c->out = malloc(len * 8 + 1);
  for (size_t i = 0; i < len;) {
    if (len - i >= 5 && memcmp(data + i, "@SID@", 5) == 0) {
      size_t n = strlen(sid);
      memcpy(c->out + c->out_len, sid, n);
      c->out_len += n;
      i += 5;
    } else {
      c->out[c->out_len++] = data[i++];
    }
  }
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_bound_port(h))};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) __builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN); /* as luamcp does: a client gone mid-write is an error, not death */
  uv_loop_init(&loop);
  server_options o;
  server_options_defaults(&o);
  o.max_message_bytes = 16 * 1024;
  server_init(&srv, &o, &FUZZ_APP, &loop);
  http_options ho;
  http_options_defaults(&ho);
  strcpy(ho.host, "127.0.0.1");
  ho.port = 0;
  ho.max_connections = 6;
  ho.max_sessions = 4;
  ho.buffer_bytes = 64 * 1024; /* small, so the budget is reached */
  ho.families = HTTP_FAMILIES;
  char err[256];
  h = http_start(&loop, &srv, &ho, err, sizeof err);
  if (!h) __builtin_trap();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = (const char *)data, *end = p + size;
  bool check = !memmem(data, size, "HEAD", 4);
  client_count = 0;
  while (p <= end && client_count < MAX_CONNS) {
    const char *sep = memmem(p, (size_t)(end - p), "~~~\n", 4);
    size_t n = sep ? (size_t)(sep - p) : (size_t)(end - p);
    open_client(p, n, check);
    settle();
    if (!sep) break;
    p = sep + 4;
  }
  /* The clients go away; the server must notice and free everything. */
  for (int i = 0; i < client_count; i++) {
    if (clients[i].fd >= 0) close(clients[i].fd);
    clients[i].fd = -1;
    free(clients[i].out);
  }
  for (int i = 0; i < MAX_TURNS && h->conn_count > 0; i++) uv_run(&loop, UV_RUN_NOWAIT);
  while (h->sessions) http_session_destroy(h->sessions);
  fuzz_app_reset();
  for (int i = 0; i < 8; i++) uv_run(&loop, UV_RUN_NOWAIT);
  return 0;
}

/*
 * httpecho: the HTTP ceiling, the Streamable HTTP twin of echo.c. An epoll
 * HTTP/1.1 keep-alive server on 127.0.0.1 that does not parse JSON: for each
 * POST it finds the "id" member by scanning bytes and answers
 *   {"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"0"}]}}
 * (initialize gets a fixed initialize result and an Mcp-Session-Id header;
 * a body without an id -- a notification -- gets 202 Accepted). Pipelined
 * requests are answered in order. The load client needs --no-sum-check.
 *
 *   httpecho PORT        (binds 127.0.0.1 only; SIGTERM/SIGINT to stop)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXREQ (1 << 20)

typedef struct {
  int fd;
  char *in;
  size_t len, cap;
  char *out;
  size_t olen, ocap, ooff;
} conn;

static const char init_body[] =
    ",\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tools\":{}},"
    "\"serverInfo\":{\"name\":\"httpecho\",\"version\":\"1.0.0\"}}}";
static const char call_body[] = ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"0\"}]}}";

static void out_add(conn *c, const char *p, size_t n) {
  if (c->olen + n > c->ocap) {
    while (c->olen + n > c->ocap) c->ocap = c->ocap ? c->ocap * 2 : 8192;
    c->out = realloc(c->out, c->ocap);
    if (!c->out) abort();
  }
  memcpy(c->out + c->olen, p, n);
  c->olen += n;
}

static size_t find_id(const char *s, size_t n, const char **v) {
  const char *p = memmem(s, n, "\"id\"", 4);
  if (!p) return 0;
  const char *e = s + n;
  p += 4;
  while (p < e && (*p == ' ' || *p == ':')) p++;
  const char *q = p;
  if (q < e && *q == '"') {
    q++;
    while (q < e && *q != '"') q += (*q == '\\') ? 2 : 1;
    q++;
  } else {
    while (q < e && *q != ',' && *q != '}' && *q != ' ') q++;
  }
  if (q > e || q == p) return 0;
  *v = p;
  return (size_t)(q - p);
}

/* answers every complete request buffered; -1 on a malformed one */
static int serve(conn *c) {
  size_t off = 0;
  for (;;) {
    char *s = c->in + off;
    size_t av = c->len - off;
    char *he = memmem(s, av, "\r\n\r\n", 4);
    if (!he) break;
    size_t hl = (size_t)(he - s) + 4, bl = 0;
    for (char *l = memchr(s, '\n', hl); l && l < he; l = memchr(l + 1, '\n', (size_t)(he - l))) {
      if (!strncasecmp(l + 1, "content-length:", 15)) bl = strtoul(l + 16, NULL, 10);
    }
    if (bl > MAXREQ) return -1;
    if (av < hl + bl) break;
    const char *id;
    size_t il = find_id(s + hl, bl, &id);
    char head[256];
    if (strncmp(s, "POST ", 5)) {
      int n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n",
                       strncmp(s, "DELETE ", 7) ? "405 Method Not Allowed" : "200 OK");
      out_add(c, head, (size_t)n);
    } else if (!il) {
      static const char accepted[] = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";
      out_add(c, accepted, sizeof accepted - 1);
    } else {
      int init = memmem(s + hl, bl, "\"initialize\"", 12) != NULL;
      size_t tl = init ? sizeof init_body - 1 : sizeof call_body - 1;
      size_t len = 22 + il + tl;
      int n = snprintf(head, sizeof head,
                       "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %zu\r\n\r\n",
                       init ? "Mcp-Session-Id: httpecho-session\r\n" : "", len);
      out_add(c, head, (size_t)n);
      out_add(c, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
      out_add(c, id, il);
      out_add(c, init ? init_body : call_body, tl);
    }
    off += hl + bl;
  }
  memmove(c->in, c->in + off, c->len - off);
  c->len -= off;
  return 0;
}

static int flush(conn *c) {
  while (c->ooff < c->olen) {
    ssize_t w = write(c->fd, c->out + c->ooff, c->olen - c->ooff);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return 1;
    if (w <= 0) return -1;
    c->ooff += (size_t)w;
  }
  c->olen = c->ooff = 0;
  return 0;
}

static void drop(int ep, conn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c);
}

static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: httpecho PORT\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {.sa_handler = on_sig};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  int one = 1, ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1024)) {
    perror("httpecho: listen");
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  struct epoll_event evs[128];
  while (!stop) {
    int n = epoll_wait(ep, evs, 128, -1);
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          c = calloc(1, sizeof *c);
          if (!c) abort();
          c->fd = fd;
          struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e2);
        }
        continue;
      }
      if (evs[i].events & EPOLLOUT) {
        int r = flush(c);
        if (r < 0) { drop(ep, c); continue; }
        if (r == 0) {
          struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = c};
          epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e2);
        }
      }
      if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      if (c->cap - c->len < 65536) {
        c->cap = c->cap ? c->cap * 2 : 131072;
        if (c->cap > 2 * MAXREQ + 131072 || !(c->in = realloc(c->in, c->cap))) { drop(ep, c); continue; }
      }
      ssize_t r = read(c->fd, c->in + c->len, c->cap - c->len);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0 || (c->len += (size_t)r, serve(c)) < 0) { drop(ep, c); continue; }
      int f = flush(c);
      if (f < 0) { drop(ep, c); continue; }
      if (f > 0) {
        struct epoll_event e2 = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e2);
      }
    }
  }
  return 0;
}

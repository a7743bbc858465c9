/* http_observe.c - what an operator asks the server over HTTP: /healthz
 * (alive), /readyz (ready for work) and /metrics (Prometheus), on the MCP
 * listener and on a listener of their own (--metrics ADDR).
 *
 * None of them acts, and health shows no data, so they are outside the
 * MCP Origin rule. /metrics shows counts and tool names: on the MCP port
 * it needs --bearer's token when one is set, and under OAuth it is not
 * served there at all (a Prometheus has no OAuth client): serve it with
 * --metrics on an internal address instead. On the MCP listener they are
 * an endpoint family (observe_family, see http_route.h). */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strmap.h"
#include "os/sock.h"
#include "transport/http.h"
#include "transport/http_route.h"
#include "transport/http_util.h"

enum observe_path { PATH_OTHER, PATH_HEALTHZ, PATH_READYZ, PATH_METRICS };

static enum observe_path path_of(const char *url) {
  if (!url) return PATH_OTHER;
  size_t n = strcspn(url, "?#");
  if (n == 8 && memcmp(url, "/healthz", 8) == 0) return PATH_HEALTHZ;
  if (n == 7 && memcmp(url, "/readyz", 7) == 0) return PATH_READYZ;
  if (n == 8 && memcmp(url, "/metrics", 8) == 0) return PATH_METRICS;
  return PATH_OTHER;
}

static bool metrics_here(const http_server *h) { return h->opts.metrics_on_mcp_port && !http_auth_on(h); }

/* None of them acts: each is answered at once, draining too. Health shows
 * no data: public. /metrics is public too unless --bearer is set, when
 * the usual checks (Origin, then the token) apply. */
static int observe_match(const http_conn *c, unsigned *rules) {
  enum observe_path p = path_of(c->url.data);
  if (p == PATH_OTHER || (p == PATH_METRICS && !metrics_here(c->server))) return 0;
  *rules = HTTP_ROUTE_REPORTS;
  if (p != PATH_METRICS || !c->server->opts.bearer_token) *rules |= HTTP_ROUTE_PUBLIC;
  return (int)p;
}

/* One metric family while texts are merged. Owner: observe_merge. */
typedef struct family {
  char *name;
  bool has_help, has_type;
  buf head, samples;
} family;

void observe_merge(const char *const *texts, const size_t *lens, int n, buf *out) {
  strmap by_name;
  strmap_init(&by_name);
  family **fams = NULL;
  size_t count = 0, cap = 0;
  buf loose = BUF_INIT; /* samples before any HELP/TYPE line (none of ours) */
  for (int t = 0; t < n; t++) {
    const char *p = texts[t], *end = texts[t] + lens[t];
    family *current = NULL;
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      const char *line_end = nl ? nl : end;
      size_t len = (size_t)(line_end - p);
      bool help = len > 7 && memcmp(p, "# HELP ", 7) == 0, type = len > 7 && memcmp(p, "# TYPE ", 7) == 0;
      if (help || type) {
        const char *name = p + 7;
        size_t name_len = strcspn(name, " \n");
        if (name + name_len > line_end) name_len = (size_t)(line_end - name);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)name_len, name);
        current = strmap_get(&by_name, key);
        if (!current) {
          if (count == cap) {
            cap = cap ? cap * 2 : 64;
            fams = realloc(fams, cap * sizeof *fams);
          }
          current = calloc(1, sizeof *current);
          current->name = strdup(key);
          fams[count++] = current;
          strmap_set(&by_name, current->name, current);
        }
        if ((help && !current->has_help) || (type && !current->has_type)) {
          buf_append(&current->head, p, len);
          buf_putc(&current->head, '\n');
          if (help) current->has_help = true;
          else current->has_type = true;
        }
      } else if (len) {
        buf *to = current ? &current->samples : &loose;
        buf_append(to, p, len);
        buf_putc(to, '\n');
      }
      p = nl ? nl + 1 : end;
    }
  }
  buf_append(out, loose.data, loose.len);
  for (size_t i = 0; i < count; i++) {
    buf_append(out, fams[i]->head.data, fams[i]->head.len);
    buf_append(out, fams[i]->samples.data, fams[i]->samples.len);
    buf_free(&fams[i]->head);
    buf_free(&fams[i]->samples);
    free(fams[i]->name);
    free(fams[i]);
  }
  free(fams);
  buf_free(&loose);
  strmap_free(&by_name);
}

void http_metrics_all(const http_server *h, buf *out) {
  buf own = BUF_INIT;
  if (h->opts.observe && h->opts.observe->metrics) h->opts.observe->metrics(h->opts.observe->arg, &own);
  http_metrics_format(h, &own, h->opts.worker_index);
  const char *texts[MAX_WORKERS + 1];
  size_t lens[MAX_WORKERS + 1];
  texts[0] = own.data ? own.data : "";
  lens[0] = own.len;
  int n = 1 + (h->worker_ops ? h->worker_ops->peer_metrics(h, texts + 1, lens + 1, MAX_WORKERS) : 0);
  if (n == 1) buf_append(out, own.data, own.len);
  else observe_merge(texts, lens, n, out);
  buf_free(&own);
}

/* The answer of one of the paths, as (status, content type, body). */
typedef struct observe_answer {
  int status;
  const char *content_type;
  buf body;
} observe_answer;

static void answer_path(enum observe_path p, const http_observe_hooks *hooks, bool draining, const http_server *h,
                        int worker, observe_answer *a) {
  a->content_type = "application/json";
  a->status = 200;
  if (p == PATH_HEALTHZ) {
    buf_puts(&a->body, "{\"status\":\"ok\"}");
    return;
  }
  if (p == PATH_READYZ) {
    const char *why = NULL;
    if (draining) why = "draining";
    else if (hooks && hooks->ready && !hooks->ready(hooks->arg, &why)) {
      if (!why) why = "not ready";
    }
    if (!why) {
      buf_puts(&a->body, "{\"status\":\"ready\"}");
      return;
    }
    a->status = 503;
    buf_puts(&a->body, "{\"status\":\"unavailable\",\"reason\":");
    json_write_string(&a->body, why, strlen(why));
    buf_putc(&a->body, '}');
    return;
  }
  a->content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (h) http_metrics_all(h, &a->body);
  else if (hooks && hooks->metrics) hooks->metrics(hooks->arg, &a->body);
}

static void observe_handle(http_conn *c, int route) {
  http_server *h = c->server;
  enum observe_path p = (enum observe_path)route;
  if (c->parser.method != HTTP_GET && c->parser.method != HTTP_HEAD) {
    conn_send_error(c, 405, -32000, "Method Not Allowed: use GET", "Allow: GET, HEAD\r\n");
    return;
  }
  observe_answer a = {.body = BUF_INIT};
  answer_path(p, h->opts.observe, h->draining, h, h->opts.worker_index, &a);
  conn_send_response(c, a.status, "Cache-Control: no-store\r\n", a.content_type, a.body.data, a.body.len);
  conn_response_done(c);
  buf_free(&a.body);
}

const http_route_family observe_family = {
    .name = "observe",
    .match = observe_match,
    .handle = observe_handle,
};

/* ---- The server's own figures -------------------------------------------- */

void http_metrics_format(const http_server *h, buf *out, int worker) {
  char w[32] = "";
  if (worker) snprintf(w, sizeof w, "{worker=\"%d\"}", worker);
  size_t streams = 0;
  for (const http_session *hs = h->sessions; hs; hs = hs->next)
    for (const http_stream *st = hs->streams; st; st = st->next)
      if (st->conn) streams++;
  if (h->stateless)
    for (const http_stream *st = h->stateless->streams; st; st = st->next)
      if (st->conn) streams++;
  buf_printf(out,
             "# HELP luamcp_http_connections Open HTTP connections.\n# TYPE luamcp_http_connections gauge\n"
             "luamcp_http_connections%s %d\n"
             "# HELP luamcp_http_streams_open Response streams (JSON or SSE) with a connection now.\n"
             "# TYPE luamcp_http_streams_open gauge\nluamcp_http_streams_open%s %zu\n"
             "# HELP luamcp_http_buffer_bytes Bytes the HTTP buffer budget holds (replay, pending writes, input).\n"
             "# TYPE luamcp_http_buffer_bytes gauge\nluamcp_http_buffer_bytes%s %zu\n"
             "# HELP luamcp_http_buffer_budget_bytes The HTTP buffer budget (--http-memory).\n"
             "# TYPE luamcp_http_buffer_budget_bytes gauge\nluamcp_http_buffer_budget_bytes%s %zu\n"
             "# HELP luamcp_http_received_bytes_total Bytes read from HTTP clients.\n"
             "# TYPE luamcp_http_received_bytes_total counter\nluamcp_http_received_bytes_total%s %llu\n"
             "# HELP luamcp_http_sent_bytes_total Bytes written to HTTP clients.\n"
             "# TYPE luamcp_http_sent_bytes_total counter\nluamcp_http_sent_bytes_total%s %llu\n",
             w, h->conn_count, w, streams, w, h->buffered, w, h->opts.buffer_bytes, w,
             (unsigned long long)h->bytes_in, w, (unsigned long long)h->bytes_out);
}

/* ---- --metrics ADDR: a listener of its own ------------------------------- */

/* Owner: the caller of observe_listen; freed by observe_close once the
 * listener's handle has closed. */
typedef struct observe_conn observe_conn;
struct observe_listener {
  /* A uv_tcp_t, or a uv_pipe_t on a local socket (local). */
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  };
  char local[108]; /* the local socket's path (its file goes at observe_close), or "" */
  const http_observe_hooks *hooks;
  bool closing;
  int port;
  observe_conn *conns; /* open connections (observe_close closes them first) */
  int conn_count;
};

/* One connection: one request read (its headers, at most a few KB), one
 * answer, then closed, within OBSERVE_CONN_TIMEOUT_MS. Owner: itself;
 * freed once both its handles (the socket, the timer) have closed. */
struct observe_conn {
  union { /* the listener's kind */
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  };
  uv_timer_t deadline;
  int handles_open;
  observe_listener *l; /* NULL once the listener has let go of it */
  observe_conn *prev, *next;
  http_parser parser;
  buf url;
  size_t read;
  bool answered;
  uv_write_t write;
  buf out;
};

#define OBSERVE_REQUEST_BYTES 8192

static void conn_unlink(observe_conn *oc) {
  observe_listener *l = oc->l;
  if (!l) return;
  if (oc->prev) oc->prev->next = oc->next;
  else l->conns = oc->next;
  if (oc->next) oc->next->prev = oc->prev;
  l->conn_count--;
  oc->l = NULL;
  oc->prev = oc->next = NULL;
}

static void conn_closed(uv_handle_t *h) {
  observe_conn *oc = h->data;
  if (--oc->handles_open > 0) return;
  conn_unlink(oc);
  buf_free(&oc->url);
  buf_free(&oc->out);
  free(oc);
}

static void conn_end(observe_conn *oc) {
  if (!uv_is_closing((uv_handle_t *)&oc->tcp)) uv_close((uv_handle_t *)&oc->tcp, conn_closed);
  if (!uv_is_closing((uv_handle_t *)&oc->deadline)) uv_close((uv_handle_t *)&oc->deadline, conn_closed);
}

/* A client that neither sends its request nor reads the answer in time. */
static void on_deadline(uv_timer_t *t) { conn_end(t->data); }

static void on_written(uv_write_t *req, int status) {
  (void)status;
  conn_end(req->data);
}

static void reply(observe_conn *oc, int status, const char *content_type, const char *body, size_t len) {
  static const char *const reasons[] = {[200] = "OK", [400] = "Bad Request", [404] = "Not Found",
                                        [405] = "Method Not Allowed", [503] = "Service Unavailable"};
  oc->answered = true;
  uv_read_stop((uv_stream_t *)&oc->tcp);
  buf_printf(&oc->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
                       "Connection: close\r\n\r\n",
             status, status < 504 && reasons[status] ? reasons[status] : "", content_type, len);
  if (oc->parser.method != HTTP_HEAD) buf_append(&oc->out, body, len);
  uv_buf_t b = uv_buf_init(oc->out.data, (unsigned)oc->out.len);
  oc->write.data = oc;
  if (uv_write(&oc->write, (uv_stream_t *)&oc->tcp, &b, 1, on_written) < 0) conn_end(oc);
}

static int on_url(http_parser *p, const char *at, size_t n) {
  observe_conn *oc = p->data;
  buf_append(&oc->url, at, n);
  return 0;
}

static int on_headers_complete(http_parser *p) {
  observe_conn *oc = p->data;
  enum observe_path path = path_of(oc->url.data);
  static const char not_found[] = "{\"error\":\"Not Found: this listener serves /metrics, /healthz and /readyz\"}";
  if (path == PATH_OTHER) {
    reply(oc, 404, "application/json", not_found, sizeof not_found - 1);
    return 1;
  }
  if (p->method != HTTP_GET && p->method != HTTP_HEAD) {
    static const char body[] = "{\"error\":\"Method Not Allowed: use GET\"}";
    reply(oc, 405, "application/json", body, sizeof body - 1);
    return 1;
  }
  observe_answer a = {.body = BUF_INIT};
  answer_path(path, oc->l->hooks, false, NULL, 0, &a);
  reply(oc, a.status, a.content_type, a.body.data ? a.body.data : "", a.body.len);
  buf_free(&a.body);
  return 1;
}

static const http_parser_settings OBSERVE_PARSER = {.on_url = on_url, .on_headers_complete = on_headers_complete};

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  (void)suggested;
  static char slab[4096];
  *b = uv_buf_init(slab, sizeof slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  observe_conn *oc = s->data;
  if (n < 0) {
    conn_end(oc);
    return;
  }
  if (n == 0 || oc->answered) return;
  oc->read += (size_t)n;
  size_t parsed = http_parser_execute(&oc->parser, &OBSERVE_PARSER, b->base, (size_t)n);
  if (oc->answered) return;
  if (parsed != (size_t)n || oc->read > OBSERVE_REQUEST_BYTES) {
    static const char body[] = "{\"error\":\"Bad Request\"}";
    reply(oc, 400, "application/json", body, sizeof body - 1);
  }
}

static void on_connection(uv_stream_t *server, int status) {
  observe_listener *l = server->data;
  if (status < 0 || l->closing) return;
  observe_conn *oc = calloc(1, sizeof *oc);
  if (!oc) return;
  if (l->local[0]) uv_pipe_init(server->loop, &oc->pipe, 0);
  else uv_tcp_init(server->loop, &oc->tcp);
  uv_timer_init(server->loop, &oc->deadline);
  oc->tcp.data = oc->deadline.data = oc;
  oc->handles_open = 2;
  /* Accepted even past the cap (else it waits in the backlog), then
   * closed at once. */
  if (uv_accept(server, (uv_stream_t *)&oc->tcp) != 0 || l->conn_count >= OBSERVE_MAX_CONNECTIONS) {
    conn_end(oc);
    return;
  }
  oc->l = l;
  oc->next = l->conns;
  if (l->conns) l->conns->prev = oc;
  l->conns = oc;
  l->conn_count++;
  uv_timer_start(&oc->deadline, on_deadline, OBSERVE_CONN_TIMEOUT_MS, 0);
  http_parser_init(&oc->parser, HTTP_REQUEST);
  oc->parser.data = oc;
  if (uv_read_start((uv_stream_t *)&oc->tcp, alloc_cb, on_read) != 0) conn_end(oc);
}

/* What anyone who reaches the --metrics listener can do. */
#define OBSERVE_EXPOSES "read your metrics (the tools' names and counts)"

/* --metrics unix:SOCKET */
static observe_listener *listen_local(uv_loop_t *loop, const char *local, int socket_mode,
                                      const http_observe_hooks *hooks, char *err, size_t err_len) {
  observe_listener *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, err_len, "--metrics: out of memory");
    return NULL;
  }
  l->hooks = hooks;
  snprintf(l->local, sizeof l->local, "%s", local);
  uv_pipe_init(loop, &l->pipe, 0);
  l->pipe.data = l;
  char why[400];
  if (os_local_listen(&l->pipe, local, socket_mode, 64, on_connection, why, sizeof why) != 0) {
    snprintf(err, err_len, "--metrics: %s", why);
    l->closing = true;
    uv_close((uv_handle_t *)&l->pipe, (uv_close_cb)free);
    return NULL;
  }
  return l;
}

observe_listener *observe_listen(uv_loop_t *loop, const char *host, int port, const char *local, int socket_mode,
                                 bool allow_remote, const http_observe_hooks *hooks, char *err, size_t err_len) {
  if (local && local[0]) return listen_local(loop, local, socket_mode, hooks, err, err_len);
  char refused[400];
  if (!http_remote_allowed(host, allow_remote, OBSERVE_EXPOSES, refused, sizeof refused)) {
    snprintf(err, err_len, "--metrics: %s", refused);
    return NULL;
  }
  struct sockaddr_storage addr;
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr) != 0) {
    snprintf(err, err_len, "--metrics: %s is not an IP address", host);
    return NULL;
  }
  observe_listener *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, err_len, "--metrics: out of memory");
    return NULL;
  }
  l->hooks = hooks;
  uv_tcp_init(loop, &l->tcp);
  l->tcp.data = l;
  int rc = uv_tcp_bind(&l->tcp, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&l->tcp, 64, on_connection);
  if (rc != 0) {
    snprintf(err, err_len, "--metrics: cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
    l->closing = true;
    uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
    return NULL;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  if (uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&bound, &len) == 0)
    l->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
  http_remote_warn(host, OBSERVE_EXPOSES);
  return l;
}

int observe_bound_port(const observe_listener *l) { return l->port; }

void observe_close(observe_listener *l) {
  if (!l || l->closing) return;
  l->closing = true;
  /* Its connections go first: none may point at the freed listener. */
  while (l->conns) {
    observe_conn *oc = l->conns;
    conn_unlink(oc);
    conn_end(oc);
  }
  if (l->local[0]) os_local_remove(l->local);
  uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
}

/*
 * client_http.c - a Streamable HTTP endpoint, as a client reaches it: each
 * message is a POST; the answer is a JSON body or an SSE stream of
 * messages, read as it arrives, so progress and log notifications show
 * while a tool runs. The session id the server assigns goes back on every
 * later request, and the session is ended with DELETE on close.
 *
 * libcurl does the HTTP (loaded on first use, app/curl_lib.h). The client
 * has nothing else to do while it waits, so this drives curl's multi
 * interface directly (curl_multi_poll), not through the loop.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/curl_lib.h"
#include "cli/client_conn.h"
#include "core/json.h"
#include "core/unix_url.h"
#include "core/luamcp_limits.h"
#include "core/sse_reader.h"

enum { MAX_EXTRA_HEADERS = 32 };

typedef struct http_conn http_conn;

/* One POST and its answer. Owner: its connection (conn->exchanges), until
 * the answer ends. */
typedef struct http_exchange {
  http_conn *conn;
  CURL *easy;
  struct curl_slist *headers;
  char *body;         /* the request (curl does not copy POSTFIELDS) */
  bool sse;           /* the answer is text/event-stream */
  bool json;          /* the answer is application/json */
  buf pending;        /* JSON (or a page): the body so far */
  sse_reader events;  /* SSE: where the stream's reading is (its last id, the server's retry) */
  char *status_line;  /* "401 Unauthorized", from the last response's first line */
  char *challenge;    /* its WWW-Authenticate, or NULL */
  char *content_type; /* its Content-Type, or NULL */
  bool resumable;      /* a POST's answer, or a GET resuming one: its end may leave a request unanswered */
  bool quiet;          /* the standalone GET: an error status is no request's failure */
  struct http_exchange *next;
} http_exchange;

/* Owner: the client. */
struct http_conn {
  client_conn base;
  const curl_api *api;
  CURLM *multi;
  char *url;
  char *unix_socket; /* unix:SOCKET[:/PATH]: the socket curl connects to (url is then http://localhost/PATH) */
  char *session_id;                     /* Mcp-Session-Id the server assigned, or NULL */
  char *extra[MAX_EXTRA_HEADERS];       /* "Name: value" sent with every request */
  int extra_count;
  http_exchange *exchanges;
  char *last_event_id; /* the last event id of the last answer stream that ended, or NULL (for Last-Event-ID) */
  long retry_ms;       /* the server's retry: delay, or -1 */
  int streams_ended;   /* SSE streams that ended cleanly (the caller may resume one) */
  char idle_reason[300]; /* what the last answer was, for a request it did not answer */
  char standalone_end[300]; /* why the standalone GET stream is over, or "" */
};

/* ---- Reading answers ------------------------------------------------- */

static void on_event(void *arg, const char *data, size_t len) {
  http_exchange *x = arg;
  client_conn_deliver(&x->conn->base, data, len);
}

static size_t on_body(char *data, size_t size, size_t count, void *arg) {
  http_exchange *x = arg;
  size_t n = size * count;
  if (!x->sse) {
    if (x->pending.len + n > DEFAULT_MAX_MESSAGE_BYTES * 4) return 0; /* curl fails the transfer */
    buf_append(&x->pending, data, n);
    return n;
  }
  if (!sse_reader_feed(&x->events, data, n, on_event, x)) return 0; /* an event past the limit: curl fails the transfer */
  if (x->events.retry_ms >= 0) x->conn->retry_ms = x->events.retry_ms;
  return n;
}

/* The value of header `name` in the line, trimmed, or NULL. */
static const char *header_value(const char *line, size_t len, const char *name, size_t *value_len) {
  size_t nl = strlen(name);
  if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':') return NULL;
  const char *v = line + nl + 1, *end = line + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && isspace((unsigned char)end[-1])) end--;
  *value_len = (size_t)(end - v);
  return v;
}

static size_t on_header(char *data, size_t size, size_t count, void *arg) {
  http_exchange *x = arg;
  size_t n = size * count, vlen;
  const char *v;
  if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) { /* a new response (after 100 or a redirect) */
    x->sse = x->json = false;
    free(x->challenge);
    free(x->content_type);
    free(x->status_line);
    x->challenge = x->content_type = NULL;
    const char *sp = memchr(data, ' ', n), *end = data + n;
    while (end > data && isspace((unsigned char)end[-1])) end--;
    x->status_line = sp && sp + 1 < end ? strndup(sp + 1, (size_t)(end - sp - 1)) : NULL;
  }
  if ((v = header_value(data, n, "www-authenticate", &vlen))) {
    free(x->challenge);
    x->challenge = strndup(v, vlen);
  }
  if ((v = header_value(data, n, "dpop-nonce", &vlen)) && vlen > 0) {
    free(x->conn->base.dpop_nonce);
    x->conn->base.dpop_nonce = strndup(v, vlen);
  }
  if ((v = header_value(data, n, "content-type", &vlen))) {
    free(x->content_type);
    x->content_type = strndup(v, vlen);
    x->sse = vlen >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
    x->json = vlen >= 16 && strncasecmp(v, "application/json", 16) == 0;
  } else if ((v = header_value(data, n, "mcp-session-id", &vlen)) && vlen > 0) {
    free(x->conn->session_id);
    x->conn->session_id = strndup(v, vlen);
  }
  return n;
}

static void exchange_free(http_exchange *x) {
  http_conn *c = x->conn;
  for (http_exchange **pp = &c->exchanges; *pp; pp = &(*pp)->next)
    if (*pp == x) {
      *pp = x->next;
      break;
    }
  c->api->multi_remove_handle(c->multi, x->easy);
  c->api->easy_cleanup(x->easy);
  c->api->slist_free_all(x->headers);
  free(x->body);
  buf_free(&x->pending);
  sse_reader_free(&x->events);
  free(x->status_line);
  free(x->challenge);
  free(x->content_type);
  free(x);
}

/* What a body says, for a person: a JSON-RPC error's message (or an
 * OAuth error's error_description), else its first bytes as text. */
static void describe_body(buf *out, const buf *body) {
  if (!body->len) return;
  json_error why;
  json_doc *doc = json_parse(body->data, body->len, MAX_JSON_DEPTH, &why);
  const json_value *root = doc ? json_doc_root(doc) : NULL, *message = NULL;
  if (root && root->type == JSON_OBJECT) {
    const json_value *error = json_object_get(root, "error");
    if (error && error->type == JSON_OBJECT) message = json_object_get(error, "message");
    if (!message) message = json_object_get(root, "error_description");
    if (!message || message->type != JSON_STRING) message = error && error->type == JSON_STRING ? error : NULL;
  }
  if (message && message->type == JSON_STRING) {
    buf_printf(out, ": %.*s", (int)(message->len > 500 ? 500 : message->len), message->u.string);
  } else {
    size_t n = body->len > 200 ? 200 : body->len;
    while (n && isspace((unsigned char)body->data[n - 1])) n--;
    buf_puts(out, ": ");
    for (size_t i = 0; i < n; i++) buf_putc(out, body->data[i] == '\n' || body->data[i] == '\r' ? ' ' : body->data[i]);
    if (n < body->len) buf_puts(out, "...");
  }
  json_doc_free(doc);
}

/* An answer that carries no message: say what the server did answer. */
static void fail_with_status(http_exchange *x, long status) {
  http_conn *c = x->conn;
  buf why = BUF_INIT;
  buf_printf(&why, "%s answered HTTP %s", c->url, x->status_line ? x->status_line : "");
  if (!x->status_line) buf_printf(&why, "%ld", status);
  if (status < 400) buf_printf(&why, " with %s, not JSON-RPC", x->content_type ? x->content_type : "no Content-Type");
  describe_body(&why, &x->pending);
  if (x->challenge) buf_printf(&why, " (WWW-Authenticate: %s)", x->challenge);
  if (status == 401)
    buf_printf(&why, "; log in with luamcp login %s, or give a token with --bearer-env VAR (or --header "
                     "'Authorization: ...'), or OAuth client credentials with --client-id ID and --client-secret-env "
                     "VAR or --client-key FILE.pem", c->url);
  if (!c->base.failure) {
    client_conn_fail(&c->base, "%s", why.data);
    /* The same failure, structured: for the auth hook and era fallback. */
    c->base.failure_status = status;
    c->base.failure_challenge = x->challenge ? strdup(x->challenge) : NULL;
    c->base.failure_body = x->pending.len ? strndup(x->pending.data, x->pending.len) : NULL;
  }
  buf_free(&why);
}

/* The standalone GET stream is over: why, for one who listens on it. 405
 * is the specification's "no stream here", not a failure of the server. */
static void standalone_over(http_exchange *x, CURLcode result, long status) {
  http_conn *c = x->conn;
  const char *line = x->status_line ? x->status_line : "";
  if (result != CURLE_OK)
    snprintf(c->standalone_end, sizeof c->standalone_end, "the stream to listen on broke: %s",
             c->api->easy_strerror(result));
  else if (status == 405)
    snprintf(c->standalone_end, sizeof c->standalone_end,
             "the server offers no stream to listen on (HTTP 405 to GET, as the MCP specification allows)");
  else if (status >= 400)
    snprintf(c->standalone_end, sizeof c->standalone_end, "the server refused the stream to listen on (HTTP %s to GET)",
             line);
  else if (!x->sse)
    snprintf(c->standalone_end, sizeof c->standalone_end,
             "the server answered the GET for a stream to listen on with HTTP %s and %s, not an SSE stream", line,
             x->content_type ? x->content_type : "no Content-Type");
  else
    snprintf(c->standalone_end, sizeof c->standalone_end, "the server ended the stream to listen on");
}

/* A finished exchange: hand over what it carried, or say why nothing. */
static void exchange_done(http_exchange *x, CURLcode result) {
  http_conn *c = x->conn;
  long status = 0;
  c->api->easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  snprintf(c->idle_reason, sizeof c->idle_reason, "%s answered HTTP %s%s without a response to the request", c->url,
           x->status_line ? x->status_line : "", x->sse ? " (an SSE stream that ended)" : "");
  if (x->quiet) standalone_over(x, result, status);
  if (x->quiet && (result != CURLE_OK || status >= 400 || !x->sse)) {
    /* The standalone GET stream is an offer the server may refuse (405). */
  } else if (result != CURLE_OK) {
    client_conn_fail(&c->base, "cannot reach %s: %s", c->url, c->api->easy_strerror(result));
  } else if (status >= 400) {
    /* Whatever the body (a JSON-RPC error with a null id, an OAuth error,
     * a proxy's page), the status is what the user needs to hear. */
    fail_with_status(x, status);
  } else if (x->sse) {
    if (x->resumable) {
      /* An answer stream ended: the request may still be unanswered, and
       * the caller may resume it from this stream's last event. */
      c->streams_ended++;
      free(c->last_event_id);
      c->last_event_id = x->events.id_seen ? strdup(x->events.last_id) : NULL;
      c->base.stream_ended = true;
    }
  } else if (x->json && x->pending.len) {
    client_conn_deliver(&c->base, x->pending.data, x->pending.len);
  } else if (x->pending.len) {
    fail_with_status(x, status); /* a page, not an MCP endpoint */
  }
  exchange_free(x);
}

static void collect_finished(http_conn *c) {
  CURLMsg *m;
  int left;
  while ((m = c->api->multi_info_read(c->multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    http_exchange *x = NULL;
    c->api->easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    exchange_done(x, m->data.result);
  }
}

/* ---- Requests -------------------------------------------------------- */

static http_exchange *exchange_new(http_conn *c, const char *method, const char *json, size_t len,
                                   char *const *lines, int nlines) {
  http_exchange *x = calloc(1, sizeof *x);
  sse_reader_init(&x->events, DEFAULT_MAX_MESSAGE_BYTES * 4);
  x->conn = c;
  x->easy = c->api->easy_init();
  const curl_api *api = c->api;
  struct curl_slist *h = NULL;
  if (json) h = api->slist_append(h, "Content-Type: application/json");
  h = api->slist_append(h, json ? "Accept: application/json, text/event-stream" : "Accept: text/event-stream");
  for (int i = 0; i < c->extra_count; i++) h = api->slist_append(h, c->extra[i]);
  for (int i = 0; i < nlines; i++) h = api->slist_append(h, lines[i]);
  if (c->session_id) {
    buf line = BUF_INIT;
    buf_printf(&line, "Mcp-Session-Id: %s", c->session_id);
    h = api->slist_append(h, line.data);
    buf_free(&line);
  }
  x->headers = h;
  api->easy_setopt(x->easy, CURLOPT_URL, c->url);
  if (c->unix_socket) api->easy_setopt(x->easy, CURLOPT_UNIX_SOCKET_PATH, c->unix_socket);
  api->easy_setopt(x->easy, CURLOPT_PRIVATE, (char *)x);
  api->easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
  api->easy_setopt(x->easy, CURLOPT_HTTPHEADER, h);
  api->easy_setopt(x->easy, CURLOPT_USERAGENT, "luamcp");
  api->easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
  api->easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
  api->easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
  api->easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
  if (json) {
    x->body = malloc(len + 1);
    memcpy(x->body, json, len);
    x->body[len] = '\0';
    api->easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
    api->easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  }
  if (strcmp(method, "POST") != 0) api->easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, method);
  x->next = c->exchanges;
  c->exchanges = x;
  api->multi_add_handle(c->multi, x->easy);
  return x;
}

static bool http_send(client_conn *base, const char *json, size_t len, buf *err) {
  (void)err;
  exchange_new((http_conn *)base, "POST", json, len, NULL, 0)->resumable = true;
  return true;
}

static bool http_send_with(client_conn *base, const char *json, size_t len, char *const *lines, int n, buf *err) {
  (void)err;
  exchange_new((http_conn *)base, "POST", json, len, lines, n)->resumable = true;
  return true;
}

/* Sleep in slices, so a Ctrl-C is not held up for long: the caller sees
 * it on its next receive. */
static void pause_ms(int ms) {
  while (ms > 0 && !client_conn_interrupted()) {
    int slice = ms > 100 ? 100 : ms;
    uv_sleep((unsigned)slice);
    ms -= slice;
  }
}

static bool http_get_stream(client_conn *base, const char *last_event_id, int delay_ms, buf *err) {
  (void)err;
  http_conn *c = (http_conn *)base;
  pause_ms(delay_ms);
  buf line = BUF_INIT;
  if (last_event_id) buf_printf(&line, "Last-Event-ID: %s", last_event_id);
  http_exchange *x = exchange_new(c, "GET", NULL, 0, &line.data, last_event_id ? 1 : 0);
  x->resumable = last_event_id != NULL;
  x->quiet = last_event_id == NULL;
  buf_free(&line);
  return true;
}

static void http_stream_state(client_conn *base, const char **last_event_id, long *retry_ms, int *streams_ended) {
  http_conn *c = (http_conn *)base;
  *last_event_id = c->last_event_id;
  *retry_ms = c->retry_ms;
  *streams_ended = c->streams_ended;
}

static const char *http_standalone_end(client_conn *base) {
  http_conn *c = (http_conn *)base;
  return c->standalone_end[0] ? c->standalone_end : NULL;
}

static bool http_wait(client_conn *base, int timeout_ms) {
  http_conn *c = (http_conn *)base;
  int running = 0;
  c->api->multi_perform(c->multi, &running);
  collect_finished(c);
  if (base->inbox || base->failure) return true;
  if (!c->exchanges) return false;
  c->api->multi_poll(c->multi, NULL, 0, timeout_ms < 0 ? 1000 : timeout_ms, NULL);
  c->api->multi_perform(c->multi, &running);
  collect_finished(c);
  return true;
}

static void http_set_header(client_conn *base, const char *name, const char *value) {
  http_conn *c = (http_conn *)base;
  size_t n = strlen(name);
  buf line = BUF_INIT;
  buf_printf(&line, "%s: %s", name, value);
  for (int i = 0; i < c->extra_count; i++)
    if (strncasecmp(c->extra[i], name, n) == 0 && c->extra[i][n] == ':') {
      free(c->extra[i]);
      c->extra[i] = line.data;
      return;
    }
  if (c->extra_count < MAX_EXTRA_HEADERS) c->extra[c->extra_count++] = line.data;
  else buf_free(&line);
}

static void http_close(client_conn *base) {
  http_conn *c = (http_conn *)base;
  /* Streams still open (a call we stopped waiting for) are dropped, then
   * the server is told the session is over (the spec's DELETE), briefly. */
  /* A message just sent (a notifications/cancelled after Ctrl-C) still
   * goes out: POSTs the server has not begun to answer get a short grace. */
  uint64_t until = uv_hrtime() / 1000000u + CLIENT_CHILD_GRACE_MS;
  for (;;) {
    bool unsent = false;
    for (http_exchange *x = c->exchanges; x; x = x->next)
      if (x->body && !x->status_line) unsent = true;
    if (!unsent || uv_hrtime() / 1000000u >= until) break;
    http_wait(base, 50);
  }
  while (c->exchanges) exchange_free(c->exchanges);
  if (c->session_id) {
    http_exchange *x = exchange_new(c, "DELETE", NULL, 0, NULL, 0);
    c->api->easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)CLIENT_CHILD_GRACE_MS);
    while (c->exchanges) http_wait(base, 100);
  }
  c->api->multi_cleanup(c->multi);
  for (int i = 0; i < c->extra_count; i++) free(c->extra[i]);
  free(c->session_id);
  free(c->last_event_id);
  free(c->url);
  free(c->unix_socket);
  client_conn_release(base);
  free(c);
}

static const client_conn_ops HTTP_OPS = {
    .send = http_send,
    .wait = http_wait,
    .set_header = http_set_header,
    .send_with = http_send_with,
    .get_stream = http_get_stream,
    .stream_state = http_stream_state,
    .standalone_end = http_standalone_end,
    .close = http_close,
};

client_conn *client_http_open(const char *url, buf *err) {
  char why[300];
  const curl_api *api = curl_lib_load("luamcp call --http", why, sizeof why);
  if (!api) {
    buf_append_str(err, why);
    return NULL;
  }
  char socket[256] = "", local_url[1100], why_not[400];
  if (unix_url_is(url)) {
    if (!unix_url_for_curl(url, socket, sizeof socket, local_url, sizeof local_url, why_not, sizeof why_not)) {
      buf_append_str(err, why_not);
      return NULL;
    }
  } else if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
    buf_printf(err, "%s is not an http:// or https:// URL, nor unix:SOCKET[:/PATH]", url);
    return NULL;
  }
  http_conn *c = calloc(1, sizeof *c);
  c->base.ops = &HTTP_OPS;
  c->api = api;
  c->multi = api->multi_init();
  c->url = strdup(socket[0] ? local_url : url);
  c->unix_socket = socket[0] ? strdup(socket) : NULL;
  c->retry_ms = -1;
  snprintf(c->idle_reason, sizeof c->idle_reason, "%s ended its answer without a response to the request", url);
  c->base.idle_reason = c->idle_reason;
  return &c->base;
}

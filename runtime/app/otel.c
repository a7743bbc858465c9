/*
 * otel.c - OpenTelemetry traces, exported as OTLP/HTTP JSON (otel.h).
 *
 * A span is encoded to its OTLP JSON object when it ends and waits, as
 * text, in a ring of at most max_queue spans and OTEL_MAX_QUEUE_BYTES; a
 * full ring drops the new span and counts it (names and attribute values
 * are cut to OTEL_MAX_ATTRIBUTE_BYTES, so a span is a few KB at most). A batch goes out when max_batch spans wait, or when the timer
 * fires (every schedule_delay ms), as one POST on a curl_loop of its own,
 * with at most OTEL_MAX_EXPORTS_IN_FLIGHT posts running: a collector that
 * is slow or gone holds those posts (until the export timeout), the ring
 * fills, spans are dropped; no call ever waits for it.
 *
 * The configuration is the OpenTelemetry SDK's environment
 * (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
 * OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp or none),
 * OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT,
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER (and
 * _ARG), OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE,
 * OTEL_BSP_MAX_EXPORT_BATCH_SIZE.
 */
#include "app/otel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "core/observe.h"
#include "core/server.h"
#include "core/session.h"
#include "app/curl_lib.h"
#include "app/curl_loop.h"

bool otel_on;

typedef enum sampler { SAMPLE_ALWAYS_ON, SAMPLE_ALWAYS_OFF, SAMPLE_RATIO } sampler;

/* One POST of a batch. Owner: the exporter's list, from export_batch
 * until its transfer ends or the exporter stops. */
typedef struct otel_post {
  curl_transfer transfer;
  char *body;
  size_t spans;
  struct otel_post *next;
} otel_post;

/* The process's one exporter. Owner: this file, from otel_start to
 * otel_stop; the timer is freed in its close callback. */
static struct {
  uv_loop_t *loop;
  server *srv;
  char *url;
  unsigned port;
  struct curl_slist *headers;  /* Content-Type and OTEL_EXPORTER_OTLP_HEADERS */
  long timeout_ms;
  sampler root_sampler;        /* for a span with no parent */
  bool parent_based;           /* a span with a parent follows its sampled flag */
  uint64_t ratio_bound;        /* SAMPLE_RATIO: sampled when the id's low 64 bits are below it */
  buf resource;                /* the resource's attributes, a JSON array */
  size_t max_queue, max_batch;
  uint64_t schedule_delay_ms;

  char **ring;                 /* encoded spans, max_queue slots */
  size_t head, count;
  size_t queued_bytes;         /* the ring's spans' bytes, at most OTEL_MAX_QUEUE_BYTES */
  uint64_t dropped, exported;

  const curl_api *api;
  curl_loop *curl;
  char curl_why[256];
  otel_post *posts;
  int in_flight;
  bool failing;                /* the last export failed (logged once until one succeeds) */
  bool overflowing;            /* the queue was full (logged once until an export makes room) */
  uv_timer_t *timer;
} X;

/* A span being timed: its JSON fields are built as it goes. */
struct otel_span {
  otel_ids ids;
  uint8_t parent_span_id[TRACE_SPAN_ID_BYTES];
  bool has_parent, recording;
  otel_kind kind;
  uint64_t start_ns;
  char *name;
  buf attributes;          /* ,-separated OTLP KeyValue objects */
  char *status_message;    /* status ERROR when set */
  char *trace_state;       /* the remote parent's tracestate, or NULL */
};

/* ---- Configuration ---------------------------------------------------- */

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The signal's variable, else the general one. */
static const char *env2(const char *traces, const char *general) {
  const char *v = env(traces);
  return v ? v : env(general);
}

static bool env_true(const char *name) {
  const char *v = env(name);
  return v && strcasecmp(v, "true") == 0;
}

/* A positive integer variable, or dflt (with a warning when unreadable). */
static uint64_t env_count(const char *name, uint64_t dflt) {
  const char *v = env(name);
  if (!v) return dflt;
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  if (*end || n == 0 || n > 100000000ull) {
    log_write(LOG_WARNING, "traces: %s=%s is not a positive integer; using %llu", name, v,
              (unsigned long long)dflt);
    return dflt;
  }
  return n;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* s[0..n) percent-decoded and trimmed of spaces, into a new string. */
static char *decode_part(const char *s, size_t n) {
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  char *out = malloc(n + 1), *o = out;
  if (!out) abort();
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      *o++ = (char)(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
      i += 2;
    } else {
      *o++ = s[i];
    }
  }
  *o = '\0';
  return out;
}

/* Each "key=value" of a comma-separated list (W3C Baggage's form, used by
 * OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS), decoded, to
 * each(key, value). False at a member without '=' or with an empty key. */
static bool each_pair(const char *list, void (*each)(const char *k, const char *v, void *data), void *data) {
  for (const char *p = list; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    const char *eq = memchr(p, '=', n);
    char *k = eq ? decode_part(p, (size_t)(eq - p)) : NULL;
    if (!k || !*k) {
      free(k);
      return false;
    }
    char *v = decode_part(eq + 1, n - (size_t)(eq - p) - 1);
    each(k, v, data);
    free(k);
    free(v);
    p = comma ? comma + 1 : NULL;
  }
  return true;
}

/* len cut to at most OTEL_MAX_ATTRIBUTE_BYTES, never inside a UTF-8
 * sequence (a cut one would make the export's JSON invalid). */
static size_t cut_len(const char *s, size_t len) {
  if (len <= OTEL_MAX_ATTRIBUTE_BYTES) return len;
  size_t cut = OTEL_MAX_ATTRIBUTE_BYTES;
  while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
  return cut;
}

static void write_kv_str(buf *b, const char *key, const char *value, size_t len) {
  len = cut_len(value, len);
  buf_puts(b, "{\"key\":");
  json_write_string(b, key, strlen(key));
  buf_puts(b, ",\"value\":{\"stringValue\":");
  json_write_string(b, value, len);
  buf_puts(b, "}}");
}

/* The resource's attributes: OTEL_RESOURCE_ATTRIBUTES, then service.name
 * (OTEL_SERVICE_NAME wins over both). */
typedef struct resource_build {
  buf *out;
  bool has_service;
} resource_build;

static void add_resource_attr(const char *k, const char *v, void *data) {
  resource_build *r = data;
  if (strcmp(k, "service.name") == 0) {
    if (env("OTEL_SERVICE_NAME")) return;
    r->has_service = true;
  }
  if (r->out->len > 1) buf_putc(r->out, ',');
  write_kv_str(r->out, k, v, strlen(v));
}

static void add_header(const char *k, const char *v, void *data) {
  (void)data;
  char *line = malloc(strlen(k) + strlen(v) + 3);
  if (!line) abort();
  sprintf(line, "%s: %s", k, v);
  if (strpbrk(line, "\r\n")) {
    log_write(LOG_WARNING, "traces: OTEL_EXPORTER_OTLP_HEADERS: header %s holds a line break: not sent", k);
  } else {
    struct curl_slist *grown = X.api->slist_append(X.headers, line);
    if (grown) X.headers = grown;
  }
  free(line);
}

/* The collector's URL: the traces endpoint as given, or the general one
 * with /v1/traces after it. */
static char *endpoint_url(void) {
  const char *traces = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (traces) return strdup(traces);
  const char *base = env("OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!base) return NULL;
  size_t n = strlen(base);
  while (n && base[n - 1] == '/') n--;
  char *url = malloc(n + sizeof "/v1/traces");
  if (!url) abort();
  memcpy(url, base, n);
  strcpy(url + n, "/v1/traces");
  return url;
}

/* http(s)://host[:port]/...: the port curl connects to (0: unreadable). */
static unsigned url_port(const char *url) {
  bool https = strncasecmp(url, "https://", 8) == 0;
  if (!https && strncasecmp(url, "http://", 7) != 0) return 0;
  const char *host = url + (https ? 8 : 7);
  const char *end = host + strcspn(host, "/?#");
  const char *at = memchr(host, '@', (size_t)(end - host));
  if (at) host = at + 1;
  const char *colon = NULL;
  if (*host == '[') {
    const char *close = memchr(host, ']', (size_t)(end - host));
    if (close && close + 1 < end && close[1] == ':') colon = close + 1;
  } else {
    colon = memchr(host, ':', (size_t)(end - host));
  }
  if (!colon) return https ? 443 : 80;
  unsigned port = 0;
  for (const char *p = colon + 1; p < end; p++) {
    if (*p < '0' || *p > '9' || port > 65535) return 0;
    port = port * 10 + (unsigned)(*p - '0');
  }
  return port > 0 && port <= 65535 ? port : 0;
}

static bool read_sampler(char *why, size_t why_len) {
  const char *s = env("OTEL_TRACES_SAMPLER");
  X.parent_based = true;
  X.root_sampler = SAMPLE_ALWAYS_ON;
  if (!s || strcmp(s, "parentbased_always_on") == 0) return true;
  const char *root = s;
  if (strncmp(s, "parentbased_", 12) == 0) root = s + 12;
  else X.parent_based = false;
  if (strcmp(root, "always_on") == 0) X.root_sampler = SAMPLE_ALWAYS_ON;
  else if (strcmp(root, "always_off") == 0) X.root_sampler = SAMPLE_ALWAYS_OFF;
  else if (strcmp(root, "traceidratio") == 0) {
    const char *arg = env("OTEL_TRACES_SAMPLER_ARG");
    char *end = NULL;
    double r = arg ? strtod(arg, &end) : 1.0;
    if (arg && (*end || !(r >= 0.0 && r <= 1.0))) {
      snprintf(why, why_len, "OTEL_TRACES_SAMPLER_ARG=%s is not a ratio between 0 and 1", arg);
      return false;
    }
    X.root_sampler = SAMPLE_RATIO;
    X.ratio_bound = r >= 1.0 ? UINT64_MAX : (uint64_t)(r * 18446744073709551616.0);
  } else {
    snprintf(why, why_len,
             "OTEL_TRACES_SAMPLER=%s is not one luamcp knows (always_on, always_off, traceidratio, "
             "parentbased_always_on, parentbased_always_off, parentbased_traceidratio)",
             s);
    return false;
  }
  return true;
}

/* ---- The call observer (core/observe.h) ------------------------------- */

static void call_started(void *data, call *c);
static void call_finished(void *data, call *c, call_outcome outcome, uint64_t duration_ns);
static const call_observer OBSERVER = {.started = call_started, .finished = call_finished};

static void on_timer(uv_timer_t *t);

bool otel_start(uv_loop_t *loop, server *srv, char *why, size_t why_len) {
  why[0] = '\0';
  if (env_true("OTEL_SDK_DISABLED")) return true;
  const char *exporter = env("OTEL_TRACES_EXPORTER");
  if (exporter && strcmp(exporter, "none") == 0) return true;
  char *url = endpoint_url();
  if (!url) return true; /* not configured: off */
  if (exporter && strcmp(exporter, "otlp") != 0) {
    snprintf(why, why_len, "OTEL_TRACES_EXPORTER=%s: luamcp exports traces only as otlp (or none)", exporter);
    free(url);
    return false;
  }
  const char *protocol = env2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (protocol && strcmp(protocol, "http/json") != 0)
    log_write(LOG_WARNING, "traces: OTEL_EXPORTER_OTLP_PROTOCOL=%s: luamcp sends http/json", protocol);
  if (!(X.port = url_port(url))) {
    snprintf(why, why_len, "the OTLP endpoint %s is not an http:// or https:// URL", url);
    free(url);
    return false;
  }
  if (!read_sampler(why, why_len)) {
    free(url);
    return false;
  }
  if (!(X.api = curl_lib_load("the OTLP exporter", X.curl_why, sizeof X.curl_why)) ||
      !(X.curl = curl_loop_new(loop, X.api, NULL, NULL))) {
    snprintf(why, why_len, "%s", X.curl_why[0] ? X.curl_why : "libcurl could not make a multi handle");
    free(url);
    return false;
  }
  X.loop = loop;
  X.srv = srv;
  X.url = url;
  X.timeout_ms = (long)env_count("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                                 env_count("OTEL_EXPORTER_OTLP_TIMEOUT", OTEL_DEFAULT_EXPORT_TIMEOUT_MS));
  X.max_queue = (size_t)env_count("OTEL_BSP_MAX_QUEUE_SIZE", OTEL_DEFAULT_MAX_QUEUE);
  X.max_batch = (size_t)env_count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", OTEL_DEFAULT_MAX_BATCH);
  if (X.max_batch > X.max_queue) X.max_batch = X.max_queue;
  X.schedule_delay_ms = env_count("OTEL_BSP_SCHEDULE_DELAY", OTEL_DEFAULT_SCHEDULE_DELAY_MS);
  X.headers = X.api->slist_append(NULL, "Content-Type: application/json");
  X.api->slist_append(X.headers, "Expect:");
  const char *headers = env2("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS");
  if (headers && !each_pair(headers, add_header, NULL))
    log_write(LOG_WARNING, "traces: OTEL_EXPORTER_OTLP_HEADERS is not a list of key=value: some were not sent");
  buf_putc(&X.resource, '[');
  resource_build r = {.out = &X.resource};
  const char *attrs = env("OTEL_RESOURCE_ATTRIBUTES");
  if (attrs && !each_pair(attrs, add_resource_attr, &r))
    log_write(LOG_WARNING, "traces: OTEL_RESOURCE_ATTRIBUTES is not a list of key=value: some were left out");
  const char *service = env("OTEL_SERVICE_NAME");
  if (service || !r.has_service) {
    if (X.resource.len > 1) buf_putc(&X.resource, ',');
    if (!service) service = "unknown_service:luamcp";
    write_kv_str(&X.resource, "service.name", service, strlen(service));
  }
  buf_puts(&X.resource, ",");
  write_kv_str(&X.resource, "telemetry.sdk.name", "luamcp", 6);
  buf_puts(&X.resource, ",");
  write_kv_str(&X.resource, "telemetry.sdk.language", "c", 1);
  buf_printf(&X.resource, ",{\"key\":\"process.pid\",\"value\":{\"intValue\":\"%ld\"}}", (long)uv_os_getpid());
  if (srv->opts.worker_count > 1) /* --workers N: which one sent it */
    buf_printf(&X.resource, ",{\"key\":\"luamcp.worker\",\"value\":{\"intValue\":\"%d\"}}", srv->opts.worker_index);
  buf_putc(&X.resource, ']');
  X.ring = calloc(X.max_queue, sizeof *X.ring);
  X.timer = malloc(sizeof *X.timer);
  if (!X.ring || !X.timer) abort();
  uv_timer_init(loop, X.timer);
  uv_unref((uv_handle_t *)X.timer); /* never keeps the loop alive by itself */
  uv_timer_start(X.timer, on_timer, X.schedule_delay_ms, X.schedule_delay_ms);
  if (!observe_add(srv, &OBSERVER, NULL)) {
    snprintf(why, why_len, "no room for another call observer");
    otel_stop();
    return false;
  }
  otel_on = true;
  log_write(LOG_INFO, "traces: exporting to %s", X.url);
  return true;
}

unsigned otel_collector_port(void) { return otel_on ? X.port : 0; }

uint64_t otel_dropped_spans(void) { return X.dropped; }
uint64_t otel_exported_spans(void) { return X.exported; }

static void free_timer(uv_handle_t *h) { free(h); }

static void post_free(otel_post *p) {
  if (p->transfer.easy) {
    curl_loop_remove(X.curl, &p->transfer);
    X.api->easy_cleanup(p->transfer.easy);
  }
  free(p->body);
  free(p);
}

void otel_stop(void) {
  /* The observer stays: a call freed later still ends (frees) its span. */
  otel_on = false;
  while (X.posts) {
    otel_post *p = X.posts;
    X.posts = p->next;
    post_free(p);
  }
  X.in_flight = 0;
  curl_loop_close(X.curl);
  X.curl = NULL;
  if (X.timer) {
    uv_close((uv_handle_t *)X.timer, free_timer);
    X.timer = NULL;
  }
  for (size_t i = 0; X.ring && i < X.count; i++) free(X.ring[(X.head + i) % X.max_queue]);
  free(X.ring);
  X.ring = NULL;
  X.count = X.head = X.queued_bytes = 0;
  if (X.headers) X.api->slist_free_all(X.headers);
  X.headers = NULL;
  free(X.url);
  X.url = NULL;
  buf_free(&X.resource);
}

/* ---- Exporting -------------------------------------------------------- */

static void on_post_done(curl_transfer *t, CURLcode result) {
  otel_post *p = (otel_post *)((char *)t - offsetof(otel_post, transfer));
  long status = 0;
  if (result == CURLE_OK) X.api->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  bool ok = result == CURLE_OK && status >= 200 && status < 300;
  if (ok) {
    X.exported += p->spans;
    if (X.failing) log_write(LOG_NOTICE, "traces: %s takes spans again", X.url);
    X.failing = false;
  } else {
    X.dropped += p->spans;
    if (!X.failing) {
      char what[160];
      if (result != CURLE_OK) snprintf(what, sizeof what, "%s", X.api->easy_strerror(result));
      else snprintf(what, sizeof what, "HTTP status %ld", status);
      log_write(LOG_WARNING, "traces: exporting %zu spans to %s failed: %s; spans are dropped until it works", p->spans,
                X.url, what);
    }
    X.failing = true;
  }
  for (otel_post **pp = &X.posts; *pp; pp = &(*pp)->next) {
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  }
  X.in_flight--;
  post_free(p);
}

/* The collector's answer is not read (curl's default would write it to
 * stdout: the stdio transport's stream). */
static size_t discard_body(char *data, size_t size, size_t n, void *userp) {
  (void)data;
  (void)userp;
  return size * n;
}

/* POST up to max_batch waiting spans, unless enough posts are running. */
static void export_batch(void) {
  if (!X.count || X.in_flight >= OTEL_MAX_EXPORTS_IN_FLIGHT) return;
  size_t most = X.count < X.max_batch ? X.count : X.max_batch, n = 0;
  buf body = BUF_INIT;
  buf_puts(&body, "{\"resourceSpans\":[{\"resource\":{\"attributes\":");
  buf_append(&body, X.resource.data, X.resource.len);
  buf_puts(&body, "},\"scopeSpans\":[{\"scope\":{\"name\":\"luamcp\"},\"spans\":[");
  /* At least one span, then no more once the body is big enough. */
  while (n < most && (n == 0 || body.len < OTEL_MAX_EXPORT_BYTES)) {
    char *span = X.ring[X.head];
    size_t len = strlen(span);
    X.ring[X.head] = NULL;
    X.head = (X.head + 1) % X.max_queue;
    if (n++) buf_putc(&body, ',');
    buf_append(&body, span, len);
    X.queued_bytes -= len;
    free(span);
  }
  X.count -= n;
  X.overflowing = false;
  buf_puts(&body, "]}]}]}");
  otel_post *p = calloc(1, sizeof *p);
  CURL *e = p ? X.api->easy_init() : NULL;
  if (!e) {
    free(p);
    buf_free(&body);
    X.dropped += n;
    return;
  }
  p->spans = n;
  size_t len = body.len;
  p->body = buf_detach(&body, NULL);
  p->transfer.easy = e;
  p->transfer.done = on_post_done;
  const curl_api *api = X.api;
  api->easy_setopt(e, CURLOPT_URL, X.url);
  api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  api->easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  api->easy_setopt(e, CURLOPT_TIMEOUT_MS, X.timeout_ms);
  api->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, X.timeout_ms);
  api->easy_setopt(e, CURLOPT_USERAGENT, "luamcp");
  api->easy_setopt(e, CURLOPT_WRITEFUNCTION, discard_body);
  api->easy_setopt(e, CURLOPT_HTTPHEADER, X.headers);
  api->easy_setopt(e, CURLOPT_POSTFIELDS, p->body);
  api->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  if (!curl_loop_add(X.curl, &p->transfer)) {
    X.dropped += n;
    post_free(p);
    return;
  }
  p->next = X.posts;
  X.posts = p;
  X.in_flight++;
}

static void on_timer(uv_timer_t *t) {
  (void)t;
  export_batch();
}

static void on_flush_deadline(uv_timer_t *t) { *(bool *)t->data = true; }
static void on_flush_timer_closed(uv_handle_t *h) { *(bool *)h->data = true; }

void otel_flush(void) {
  if (!otel_on || (!X.count && !X.posts)) return;
  /* A referenced timer keeps the loop turning (curl's own timer is not
   * referenced) and bounds the wait; it is closed before it goes out of
   * scope. */
  bool expired = false;
  uv_timer_t deadline;
  uv_timer_init(X.loop, &deadline);
  deadline.data = &expired;
  uv_timer_start(&deadline, on_flush_deadline, OTEL_SHUTDOWN_FLUSH_MS, 0);
  while (!expired && (X.count || X.posts)) {
    export_batch();
    uv_run(X.loop, UV_RUN_ONCE);
  }
  bool closed = false;
  deadline.data = &closed;
  uv_close((uv_handle_t *)&deadline, on_flush_timer_closed);
  while (!closed) uv_run(X.loop, UV_RUN_NOWAIT); /* the closing handle keeps the loop alive */
}

/* An ended span's JSON, into the ring (or dropped when it is full). */
static void enqueue(char *span, size_t len) {
  if (X.count >= X.max_queue || X.queued_bytes + len > OTEL_MAX_QUEUE_BYTES) {
    X.dropped++;
    free(span);
    if (!X.overflowing)
      log_write(LOG_WARNING, "traces: the export queue is full (%zu spans, %zu bytes; the collector at %s is slow "
                             "or away): new spans are dropped until it takes some (%llu dropped so far)",
                X.count, X.queued_bytes, X.url, (unsigned long long)X.dropped);
    X.overflowing = true;
    return;
  }
  X.ring[(X.head + X.count) % X.max_queue] = span;
  X.count++;
  X.queued_bytes += len;
  if (X.count >= X.max_batch) export_batch();
}

/* ---- Spans ------------------------------------------------------------ */

static uint64_t now_unix_ns(void) {
  uv_timeval64_t tv;
  if (uv_gettimeofday(&tv) != 0) return 0;
  return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static bool sample_root(const uint8_t trace_id[TRACE_ID_BYTES]) {
  switch (X.root_sampler) {
    case SAMPLE_ALWAYS_ON: return true;
    case SAMPLE_ALWAYS_OFF: return false;
    case SAMPLE_RATIO: {
      uint64_t low = 0;
      for (int i = 8; i < 16; i++) low = low << 8 | trace_id[i];
      return X.ratio_bound == UINT64_MAX || low < X.ratio_bound;
    }
  }
  return true;
}

otel_span *otel_span_start(const char *name, otel_kind kind, const otel_ids *parent) {
  otel_span *s = calloc(1, sizeof *s);
  /* A name may come from a request (a tool's) or a script: cut like an attribute. */
  if (!s || !(s->name = strndup(name, cut_len(name, strlen(name))))) abort();
  s->kind = kind;
  s->ids.set = true;
  if (parent && parent->set) {
    memcpy(s->ids.trace_id, parent->trace_id, TRACE_ID_BYTES);
    memcpy(s->parent_span_id, parent->span_id, TRACE_SPAN_ID_BYTES);
    s->has_parent = true;
  } else if (!trace_new_trace_id(s->ids.trace_id)) {
    s->ids.trace_id[0] = 1; /* no randomness: still a valid id */
  }
  if (!trace_new_span_id(s->ids.span_id)) s->ids.span_id[0] = 1;
  bool sampled = s->has_parent && X.parent_based ? (parent->flags & TRACE_FLAG_SAMPLED) != 0
                                                 : sample_root(s->ids.trace_id);
  s->ids.flags = (uint8_t)((parent && parent->set ? parent->flags & ~TRACE_FLAG_SAMPLED : 0) |
                           (sampled ? TRACE_FLAG_SAMPLED : 0));
  s->recording = sampled;
  s->start_ns = now_unix_ns();
  return s;
}

void otel_span_ids(const otel_span *s, otel_ids *out) { *out = s->ids; }

void otel_attr_strn(otel_span *s, const char *key, const char *value, size_t len) {
  if (!s->recording || !value) return;
  if (s->attributes.len) buf_putc(&s->attributes, ',');
  write_kv_str(&s->attributes, key, value, len);
}

void otel_attr_str(otel_span *s, const char *key, const char *value) {
  if (value) otel_attr_strn(s, key, value, strlen(value));
}

void otel_attr_int(otel_span *s, const char *key, int64_t value) {
  if (!s->recording) return;
  if (s->attributes.len) buf_putc(&s->attributes, ',');
  buf_puts(&s->attributes, "{\"key\":");
  json_write_string(&s->attributes, key, strlen(key));
  /* OTLP JSON writes 64-bit integers as strings. */
  buf_printf(&s->attributes, ",\"value\":{\"intValue\":\"%lld\"}}", (long long)value);
}

void otel_span_fail(otel_span *s, const char *error_type, const char *message) {
  if (!s->recording) return;
  otel_attr_str(s, "error.type", error_type);
  free(s->status_message);
  const char *why = message ? message : error_type;
  if (!(s->status_message = strndup(why, cut_len(why, strlen(why))))) abort();
}

void otel_span_end(otel_span *s) {
  if (!s) return;
  if (s->recording && otel_on) {
    char hex[TRACE_ID_HEX + 1];
    buf out = BUF_INIT;
    trace_hex(s->ids.trace_id, TRACE_ID_BYTES, hex);
    buf_printf(&out, "{\"traceId\":\"%s\"", hex);
    trace_hex(s->ids.span_id, TRACE_SPAN_ID_BYTES, hex);
    buf_printf(&out, ",\"spanId\":\"%s\"", hex);
    if (s->has_parent) {
      trace_hex(s->parent_span_id, TRACE_SPAN_ID_BYTES, hex);
      buf_printf(&out, ",\"parentSpanId\":\"%s\"", hex);
    }
    if (s->trace_state) {
      buf_puts(&out, ",\"traceState\":");
      json_write_string(&out, s->trace_state, strlen(s->trace_state));
    }
    buf_printf(&out, ",\"flags\":%u", (unsigned)s->ids.flags);
    buf_puts(&out, ",\"name\":");
    json_write_string(&out, s->name, strlen(s->name));
    uint64_t end = now_unix_ns();
    if (end < s->start_ns) end = s->start_ns;
    buf_printf(&out, ",\"kind\":%d,\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\",\"attributes\":[",
               (int)s->kind, (unsigned long long)s->start_ns, (unsigned long long)end);
    buf_append(&out, s->attributes.data, s->attributes.len);
    buf_putc(&out, ']');
    if (s->status_message) {
      buf_puts(&out, ",\"status\":{\"code\":2,\"message\":");
      json_write_string(&out, s->status_message, strlen(s->status_message));
      buf_putc(&out, '}');
    }
    buf_putc(&out, '}');
    size_t len = out.len;
    enqueue(buf_detach(&out, NULL), len);
  }
  buf_free(&s->attributes);
  free(s->status_message);
  free(s->trace_state);
  free(s->name);
  free(s);
}

void otel_traceparent(const otel_ids *ids, char out[TRACEPARENT_LEN + 1]) {
  trace_context c;
  memcpy(c.trace_id, ids->trace_id, TRACE_ID_BYTES);
  memcpy(c.span_id, ids->span_id, TRACE_SPAN_ID_BYTES);
  c.flags = ids->flags;
  trace_format_traceparent(&c, out);
}

/* ---- Server spans, one per call -------------------------------------- */

otel_span *otel_call_span(const call *c) { return c->trace_span; }

/* The request's trace context: params._meta's traceparent (the MCP
 * convention), else the HTTP request's header; false when neither gives
 * a valid one. */
static bool remote_parent(call *c, const json_value *params, otel_ids *out, char *tracestate, size_t cap) {
  const json_value *meta = json_object_get(params, "_meta");
  const json_value *tp = json_object_get(meta, "traceparent");
  const json_value *ts = NULL;
  trace_context ctx;
  bool found = false;
  if (tp && tp->type == JSON_STRING) {
    found = trace_parse_traceparent(tp->u.string, tp->len, &ctx);
    ts = json_object_get(meta, "tracestate");
    if (found && ts && ts->type == JSON_STRING && ts->len < cap && trace_tracestate_valid(ts->u.string, ts->len)) {
      memcpy(tracestate, ts->u.string, ts->len);
      tracestate[ts->len] = '\0';
    }
  } else {
    session *s = c->session;
    const char *h = s->transport && s->transport->request_header
                        ? s->transport->request_header(s, c->transport_data, "traceparent")
                        : NULL;
    found = h && trace_parse_traceparent(h, strlen(h), &ctx);
    const char *hs = found ? s->transport->request_header(s, c->transport_data, "tracestate") : NULL;
    if (hs && strlen(hs) < cap && trace_tracestate_valid(hs, strlen(hs))) strcpy(tracestate, hs);
  }
  if (!found) return false;
  memcpy(out->trace_id, ctx.trace_id, TRACE_ID_BYTES);
  memcpy(out->span_id, ctx.span_id, TRACE_SPAN_ID_BYTES);
  out->flags = ctx.flags;
  out->set = true;
  return true;
}

static void call_started(void *data, call *c) {
  (void)data;
  if (!otel_on) return;
  const json_value *params = call_params(c);
  otel_ids parent = {0};
  char tracestate[TRACESTATE_MAX_BYTES + 1] = "";
  remote_parent(c, params, &parent, tracestate, sizeof tracestate);
  const char *target = call_target(c);
  bool named = target && (strcmp(c->method, "tools/call") == 0 || strcmp(c->method, "prompts/get") == 0);
  buf name = BUF_INIT;
  buf_append_str(&name, c->method);
  if (named) {
    buf_putc(&name, ' ');
    buf_append_str(&name, target);
  }
  otel_span *s = otel_span_start(name.data, OTEL_KIND_SERVER, &parent);
  buf_free(&name);
  otel_attr_str(s, "mcp.method.name", c->method);
  if (target && strcmp(c->method, "tools/call") == 0) {
    otel_attr_str(s, "gen_ai.tool.name", target);
    otel_attr_str(s, "gen_ai.operation.name", "execute_tool");
  } else if (target && strcmp(c->method, "prompts/get") == 0) {
    otel_attr_str(s, "gen_ai.prompt.name", target);
  } else if (target && strcmp(c->method, "resources/read") == 0) {
    otel_attr_str(s, "mcp.resource.uri", target);
  }
  otel_attr_str(s, "mcp.session.id", call_session_name(c));
  /* The id as a string: a string id without its JSON quotes. */
  bool quoted = c->id.raw_len >= 2 && c->id.raw[0] == '"';
  otel_attr_strn(s, "jsonrpc.request.id", c->id.raw + quoted, c->id.raw_len - 2 * quoted);
  otel_attr_str(s, "jsonrpc.protocol.version", "2.0");
  otel_attr_str(s, "mcp.protocol.version", call_protocol_version(c));
  otel_attr_str(s, "network.transport", c->session->transport && c->session->transport->request_header ? "tcp" : "pipe");
  if (tracestate[0] && s->recording && !(s->trace_state = strdup(tracestate))) abort();
  c->trace_span = s;
}

static void call_finished(void *data, call *c, call_outcome outcome, uint64_t duration_ns) {
  (void)data;
  (void)duration_ns;
  otel_span *s = c->trace_span;
  if (!s) return;
  c->trace_span = NULL;
  if (outcome != CALL_OK) otel_span_fail(s, call_outcome_name(outcome), NULL);
  otel_span_end(s);
}

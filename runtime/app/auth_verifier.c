/*
 * auth_verifier.c - bearer tokens checked on the loop (auth_verifier.h).
 *
 * What a check needs may not be here yet: the issuer's metadata (RFC 8414
 * or OpenID discovery), its JWK Set, or an introspection answer (RFC
 * 7662). Then the check waits (an auth_waiter) while one fetch runs for
 * every waiter that needs the same document; when a fetch ends, every
 * waiter is looked at again (settle) and answered, or keeps waiting. A
 * waiter never starts a second fetch of a shared document: a check waits
 * for at most one, so a server that is down answers 503 instead of a
 * request hanging on. Checks of the same opaque token share one
 * introspection.
 *
 * Forged tokens are cheap to refuse: a made-up kid waits for the key set
 * only while fewer than AUTH_MAX_UNKNOWN_KID_WAITERS do (then 503 at
 * once), and at most AUTH_MAX_INTROSPECTIONS introspections run at once
 * (then 503), so neither fills the AUTH_MAX_WAITERS slots that checks of
 * good tokens wait in.
 *
 * Verified tokens are remembered (app/auth_cache.h) until their exp, at
 * most AUTH_TOKEN_CACHE_MAX_MS; introspection's refusals for
 * AUTH_NEGATIVE_CACHE_MS.
 *
 * The URLs fetched are https, or http on a loopback host (the MCP
 * authorization specification's exception for development); TLS is
 * verified, redirects are not followed, every document is bounded.
 */
#include "app/auth_verifier.h"
#include "app/auth_cache.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/base64.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/jwt.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"
#include "app/curl_lib.h"
#include "app/curl_loop.h"

typedef enum fetch_kind { FETCH_DISCOVERY, FETCH_JWKS, FETCH_INTROSPECTION } fetch_kind;

/* Failures logged once each (never a token). */
enum {
  LOGGED_DISCOVERY = 1,
  LOGGED_JWKS = 2,
  LOGGED_INTROSPECTION = 4,
  LOGGED_WAITERS = 8,
  LOGGED_UNKNOWN_KIDS = 16,
  LOGGED_INTROSPECTIONS = 32,
};

struct auth_waiter;

/* One HTTP transfer. Owner: the verifier's list of fetches, from
 * fetch_start until it ends (on_fetch_done) or the verifier is freed. */
typedef struct auth_fetch {
  curl_transfer transfer;
  struct auth_verifier *v;
  fetch_kind kind;
  char *url;
  struct curl_slist *headers;
  char *form;                  /* introspection's request body */
  buf body, head;
  bool too_large;
  /* Introspection: the token's cache key, how many waiters share it (the
   * fetch is freed when the last is cancelled), and whether its answer is
   * being given (then a new check of the token starts its own). */
  uint8_t key[OS_SHA256_BYTES];
  unsigned sharers;
  bool answering;
  struct auth_fetch *next, *prev;
} auth_fetch;

/* A check not answered at once. Owner: the verifier's list of waiters,
 * until it is answered (done called) or cancelled. */
typedef struct auth_waiter {
  struct auth_waiter *next, *prev;
  char *token;
  size_t len;
  char *resource;
  uint8_t key[OS_SHA256_BYTES];
  auth_done_fn done;
  void *data;
  bool refetch_asked;          /* it waits, or waited, for an unknown-kid fetch of the keys */
  auth_fetch *introspection;   /* the introspection it shares, while it runs */
  unsigned pass;               /* the settle pass that last looked at it */
} auth_waiter;

typedef enum discovery_state { DISCOVERY_NOT_STARTED, DISCOVERY_RUNNING, DISCOVERY_DONE, DISCOVERY_FAILED } discovery_state;

/* Owner: whoever called auth_verifier_new, until auth_verifier_free. */
struct auth_verifier {
  uv_loop_t *loop;
  char *issuer, *jwks_uri, *jwks_file, *introspection_endpoint, *client_id, *client_secret, *algorithms;
  int leeway_s;

  const curl_api *api; /* NULL until needed, or when libcurl cannot be loaded */
  curl_loop *curl;
  char curl_why[256];

  discovery_state discovery;
  int discovery_candidate;        /* which of the well-known URLs is being tried */
  uint64_t discovery_started_ms;
  char discovery_why[160];
  char *discovered_jwks_uri, *discovered_introspection;

  jwk_set *keys;
  uint64_t keys_until_ms;         /* fetch again after this (uv_now time) */
  bool jwks_running, jwks_tried;
  uint64_t jwks_started_ms;
  /* Armed when a check names an unknown kid before the floor has passed
   * since the last fetch: the fetch starts when it fires. Owner: this
   * verifier; freed in its close callback (the verifier may go first). */
  uv_timer_t *refetch_timer;
  char jwks_why[160];

  auth_waiter *waiters;
  size_t waiter_count;
  size_t unknown_kid_waiters;     /* of those, with refetch_asked */
  size_t introspections;          /* introspection fetches running */
  unsigned pass;
  auth_fetch *fetches;

  auth_cache cache;

  unsigned logged;
  int settling;                   /* settle() frames on the stack */
  bool freed;                     /* auth_verifier_free came during settle: free when it returns */
};

/* ---- Verdicts --------------------------------------------------------------- */

static void verdict_set(auth_verdict *out, int status, const char *error, const char *fmt, va_list ap) {
  out->status = status;
  out->error = error;
  out->identity = NULL;
  vsnprintf(out->description, sizeof out->description, fmt, ap);
}

static void refuse(auth_verdict *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(auth_verdict *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verdict_set(out, 401, "invalid_token", fmt, ap);
  va_end(ap);
}

static void unavailable(auth_verdict *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void unavailable(auth_verdict *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verdict_set(out, 503, "temporarily_unavailable", fmt, ap);
  va_end(ap);
}

static void accept_identity(auth_verdict *out, auth_identity *id) {
  out->status = 0;
  out->error = NULL;
  out->description[0] = '\0';
  out->identity = id;
}

static void log_once(auth_verifier *v, unsigned kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_once(auth_verifier *v, unsigned kind, const char *fmt, ...) {
  if (v->logged & kind) return;
  v->logged |= kind;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  log_write(LOG_WARNING, "auth: %s", line);
}

/* ---- The cache of answers ---------------------------------------------------- */

static void cache_put(auth_verifier *v, const uint8_t key[OS_SHA256_BYTES], auth_identity *identity,
                      const char *description, uint64_t ttl_ms) {
  auth_cache_put(&v->cache, key, identity, description, uv_now(v->loop), ttl_ms);
}

/* The remembered answer for key, if still good: true with *out filled. */
static bool cache_answer(auth_verifier *v, const uint8_t key[OS_SHA256_BYTES], auth_verdict *out) {
  auth_identity *id = NULL;
  char description[sizeof out->description];
  if (!auth_cache_get(&v->cache, key, uv_now(v->loop), &id, description, sizeof description)) return false;
  if (id) accept_identity(out, id);
  else refuse(out, "%s", description);
  return true;
}

/* How long an identity may be remembered: until its exp, at most
 * AUTH_TOKEN_CACHE_MAX_MS. */
static uint64_t identity_ttl_ms(const auth_identity *id) {
  if (id->expires_s <= 0) return AUTH_TOKEN_CACHE_MAX_MS;
  int64_t left = id->expires_s - (int64_t)time(NULL);
  if (left <= 0) return 0;
  return (uint64_t)left * 1000 < AUTH_TOKEN_CACHE_MAX_MS ? (uint64_t)left * 1000 : AUTH_TOKEN_CACHE_MAX_MS;
}

/* ---- Fetching ------------------------------------------------------------------ */

/* May the verifier fetch url (it sends its client secret and tokens to
 * some)? The one rule of curl_lib_credentials_allowed; false with why,
 * a clause for after the URL. */
static bool url_allowed(auth_verifier *v, const char *url, char *why, size_t why_len) {
  return curl_lib_credentials_allowed(v->api, url, why, why_len);
}

/* libcurl, loaded when the first fetch needs it. */
static bool curl_ready(auth_verifier *v) {
  if (v->curl) return true;
  if (v->curl_why[0]) return false;
  if (!(v->api = curl_lib_load("the token verifier", v->curl_why, sizeof v->curl_why))) return false;
  if (!(v->curl = curl_loop_new(v->loop, v->api, NULL, NULL))) {
    snprintf(v->curl_why, sizeof v->curl_why, "libcurl could not make a multi handle");
    return false;
  }
  return true;
}

static size_t on_body(char *data, size_t size, size_t n, void *userp) {
  auth_fetch *f = userp;
  size_t len = size * n;
  if (f->body.len + len > AUTH_MAX_DOCUMENT_BYTES) {
    f->too_large = true;
    return 0; /* curl stops the transfer */
  }
  buf_append(&f->body, data, len);
  return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *userp) {
  auth_fetch *f = userp;
  size_t len = size * n;
  if (f->head.len + len > AUTH_MAX_DOCUMENT_BYTES) return 0;
  buf_append(&f->head, data, len);
  return len;
}

static void fetch_free(auth_fetch *f) {
  auth_verifier *v = f->v;
  if (f->prev) f->prev->next = f->next;
  else v->fetches = f->next;
  if (f->next) f->next->prev = f->prev;
  if (f->kind == FETCH_INTROSPECTION) v->introspections--;
  if (f->transfer.easy) {
    curl_loop_remove(v->curl, &f->transfer);
    v->api->easy_cleanup(f->transfer.easy);
  }
  if (f->headers) v->api->slist_free_all(f->headers);
  free(f->url);
  free(f->form);
  buf_free(&f->body);
  buf_free(&f->head);
  free(f);
}

static void on_fetch_done(curl_transfer *t, CURLcode result);

/* Start a GET (form NULL) or a form POST of url; NULL with why. */
static auth_fetch *fetch_start(auth_verifier *v, fetch_kind kind, const char *url, char *form,
                               const char *authorization, char *why, size_t why_len) {
  if (!curl_ready(v)) {
    snprintf(why, why_len, "%.150s", v->curl_why);
    free(form);
    return NULL;
  }
  if (!url_allowed(v, url, why, why_len)) { /* why: "it ...", after what the caller fetches */
    free(form);
    return NULL;
  }
  auth_fetch *f = calloc(1, sizeof *f);
  CURL *e = f ? v->api->easy_init() : NULL;
  if (!e || !(f->url = strdup(url))) {
    if (e) v->api->easy_cleanup(e);
    free(f);
    free(form);
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  f->v = v;
  f->kind = kind;
  if (kind == FETCH_INTROSPECTION) v->introspections++;
  f->form = form;
  f->transfer.easy = e;
  f->transfer.done = on_fetch_done;
  f->next = v->fetches;
  if (f->next) f->next->prev = f;
  v->fetches = f;
  const curl_api *api = v->api;
  struct curl_slist *h = api->slist_append(NULL, "Accept: application/json");
  if (h && authorization) {
    struct curl_slist *grown = api->slist_append(h, authorization);
    if (!grown) api->slist_free_all(h);
    h = grown;
  }
  f->headers = h;
  api->easy_setopt(e, CURLOPT_URL, f->url);
  api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  api->easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  api->easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  api->easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  api->easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)AUTH_FETCH_TIMEOUT_MS);
  api->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)AUTH_CONNECT_TIMEOUT_MS);
  api->easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)AUTH_MAX_DOCUMENT_BYTES);
  api->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  api->easy_setopt(e, CURLOPT_WRITEDATA, f);
  api->easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  api->easy_setopt(e, CURLOPT_HEADERDATA, f);
  api->easy_setopt(e, CURLOPT_USERAGENT, "luamcp");
  if (h) api->easy_setopt(e, CURLOPT_HTTPHEADER, h);
  if (form) {
    api->easy_setopt(e, CURLOPT_POSTFIELDS, form);
    api->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(form));
  }
  if (!h || !curl_loop_add(v->curl, &f->transfer)) {
    fetch_free(f);
    snprintf(why, why_len, "libcurl refused the request");
    return NULL;
  }
  return f;
}

/* The max-age of the last response's Cache-Control, in ms; -1 when it
 * gives none. no-store and no-cache count as 0. */
static int64_t cache_control_ms(const buf *head) {
  const char *p = head->data ? head->data : "";
  int64_t found = -1;
  while (*p) {
    const char *eol = strchr(p, '\n');
    size_t line = eol ? (size_t)(eol - p) : strlen(p);
    if (line >= 5 && memcmp(p, "HTTP/", 5) == 0) found = -1; /* a new response starts */
    if (line > 14 && strncasecmp(p, "cache-control:", 14) == 0) {
      for (const char *q = p + 14; q < p + line; q++) {
        if (strncasecmp(q, "max-age=", 8) == 0) {
          int64_t s = 0;
          for (q += 8; q < p + line && *q >= '0' && *q <= '9' && s < 100000000; q++) s = s * 10 + (*q - '0');
          found = s * 1000;
          break;
        }
        if (strncasecmp(q, "no-store", 8) == 0 || strncasecmp(q, "no-cache", 8) == 0) {
          found = 0;
          break;
        }
      }
    }
    p = eol ? eol + 1 : p + line;
  }
  return found;
}

/* ---- Discovery and keys ------------------------------------------------------------ */

/* The i-th well-known URL of the issuer's metadata, in the order of the
 * MCP authorization specification (2025-11-25, "Authorization Server
 * Metadata Discovery"): with a path, OAuth's and OpenID's with the path
 * inserted, then OpenID's appended; without, OAuth's then OpenID's. False
 * past the last. */
static bool discovery_url(const char *issuer, int i, buf *out) {
  const char *host = strstr(issuer, "://");
  host = host ? host + 3 : issuer;
  const char *slash = strchr(host, '/');
  size_t origin_len = slash ? (size_t)(slash - issuer) : strlen(issuer);
  const char *path = slash ? slash : "";
  size_t path_len = strlen(path);
  while (path_len && path[path_len - 1] == '/') path_len--;
  buf_clear(out);
  if (path_len == 0) {
    if (i > 1) return false;
    buf_append(out, issuer, origin_len);
    buf_append_str(out, i == 0 ? "/.well-known/oauth-authorization-server" : "/.well-known/openid-configuration");
    return true;
  }
  if (i > 2) return false;
  buf_append(out, issuer, origin_len);
  if (i == 2) {
    buf_append(out, path, path_len);
    buf_puts(out, "/.well-known/openid-configuration");
  } else {
    buf_append_str(out, i == 0 ? "/.well-known/oauth-authorization-server" : "/.well-known/openid-configuration");
    buf_append(out, path, path_len);
  }
  return true;
}

static void discovery_failed(auth_verifier *v, const char *why) {
  v->discovery = DISCOVERY_FAILED;
  snprintf(v->discovery_why, sizeof v->discovery_why, "%s", why);
  log_once(v, LOGGED_DISCOVERY, "the metadata of %s could not be fetched: %s", v->issuer, why);
}

/* Fetch the candidate-th well-known URL; false (discovery failed) when
 * there is none left or it cannot start. */
static bool discovery_try(auth_verifier *v, int candidate) {
  buf url = BUF_INIT;
  char why[160];
  bool ok = false;
  if (!discovery_url(v->issuer, candidate, &url)) {
    if (!v->discovery_why[0]) snprintf(why, sizeof why, "no well-known URL answered");
    else snprintf(why, sizeof why, "%s", v->discovery_why);
    discovery_failed(v, why);
  } else if (!fetch_start(v, FETCH_DISCOVERY, url.data, NULL, NULL, why, sizeof why)) {
    discovery_failed(v, why);
  } else {
    v->discovery = DISCOVERY_RUNNING;
    v->discovery_candidate = candidate;
    ok = true;
  }
  buf_free(&url);
  return ok;
}

/* Start discovery unless it runs, succeeded, or failed within the floor;
 * true when it runs now. */
static bool discovery_start(auth_verifier *v) {
  if (v->discovery == DISCOVERY_RUNNING) return true;
  if (v->discovery == DISCOVERY_DONE) return false;
  uint64_t now = uv_now(v->loop);
  if (v->discovery == DISCOVERY_FAILED && now - v->discovery_started_ms < AUTH_JWKS_REFETCH_FLOOR_MS) return false;
  v->discovery_started_ms = now;
  v->discovery_why[0] = '\0';
  return discovery_try(v, 0);
}

static const char *jwks_source(const auth_verifier *v) {
  return v->jwks_uri ? v->jwks_uri : v->discovered_jwks_uri;
}

/* Fetch the key set (discovering where it is first if need be), unless
 * that runs already or the floor forbids it; true when a fetch runs now. */
static bool keys_start(auth_verifier *v) {
  if (v->jwks_file) return false;
  if (v->jwks_running) return true;
  const char *uri = jwks_source(v);
  if (!uri) return discovery_start(v) || v->discovery == DISCOVERY_RUNNING;
  uint64_t now = uv_now(v->loop);
  if (v->jwks_tried && now - v->jwks_started_ms < AUTH_JWKS_REFETCH_FLOOR_MS) return false;
  v->jwks_tried = true;
  v->jwks_started_ms = now;
  char why[160];
  if (!fetch_start(v, FETCH_JWKS, uri, NULL, NULL, why, sizeof why)) {
    snprintf(v->jwks_why, sizeof v->jwks_why, "%s", why);
    log_once(v, LOGGED_JWKS, "the key set could not be fetched: %s", why);
    return false;
  }
  v->jwks_running = true;
  return true;
}

static void settle(auth_verifier *v);

/* The floor has passed: fetch the set for the checks that wait on an
 * unknown kid (if none is left, nothing). */
static void on_refetch_timer(uv_timer_t *t) {
  auth_verifier *v = t->data;
  bool wanted = false;
  for (auth_waiter *w = v->waiters; w && !wanted; w = w->next) wanted = w->refetch_asked && !w->introspection;
  if (wanted && !keys_start(v)) settle(v); /* it could not start: they are answered with the keys at hand */
}

/* Fetch the set once the floor has passed since the last fetch; true when
 * that is arranged (the timer runs). */
static bool refetch_later(auth_verifier *v) {
  if (!v->refetch_timer) {
    if (!(v->refetch_timer = malloc(sizeof *v->refetch_timer))) return false;
    uv_timer_init(v->loop, v->refetch_timer);
    v->refetch_timer->data = v;
  }
  if (uv_is_active((uv_handle_t *)v->refetch_timer)) return true;
  uint64_t since = uv_now(v->loop) - v->jwks_started_ms;
  uint64_t wait = since < AUTH_JWKS_REFETCH_FLOOR_MS ? AUTH_JWKS_REFETCH_FLOOR_MS - since : 0;
  uv_timer_start(v->refetch_timer, on_refetch_timer, wait, 0);
  return true;
}

/* A string member that is an allowed URL, copied; else NULL (logged). */
static char *metadata_url(auth_verifier *v, const json_value *doc, const char *name) {
  const json_value *s = json_object_get(doc, name);
  if (!s || s->type != JSON_STRING) return NULL;
  char why[200];
  if (!url_allowed(v, s->u.string, why, sizeof why)) {
    log_write(LOG_WARNING, "auth: the metadata's %s (%s) is ignored: %s", name, s->u.string, why);
    return NULL;
  }
  return strdup(s->u.string);
}

static void discovery_done(auth_verifier *v, auth_fetch *f, bool fetched, CURLcode result, const char *why) {
  char problem[160] = "";
  json_doc *doc = NULL;
  if (fetched) {
    json_error err;
    doc = json_parse(f->body.data ? f->body.data : "", f->body.len, MAX_JSON_DEPTH, &err);
    const json_value *root = doc ? json_doc_root(doc) : NULL;
    const json_value *iss = root ? json_object_get(root, "issuer") : NULL;
    if (!root || root->type != JSON_OBJECT) snprintf(problem, sizeof problem, "%s is not a JSON object", f->url);
    else if (!iss || iss->type != JSON_STRING || strcmp(iss->u.string, v->issuer) != 0)
      snprintf(problem, sizeof problem, "%s names another issuer", f->url);
    else {
      free(v->discovered_jwks_uri);
      free(v->discovered_introspection);
      v->discovered_jwks_uri = metadata_url(v, root, "jwks_uri");
      v->discovered_introspection = metadata_url(v, root, "introspection_endpoint");
      v->discovery = DISCOVERY_DONE;
      log_write(LOG_INFO, "auth: metadata from %s: keys at %s, introspection %s", f->url,
                v->discovered_jwks_uri ? v->discovered_jwks_uri : "(none)",
                v->discovered_introspection ? v->discovered_introspection : "(none)");
    }
  } else {
    snprintf(problem, sizeof problem, "%s", why);
  }
  json_doc_free(doc);
  if (v->discovery == DISCOVERY_DONE) {
    if (!v->keys && !v->jwks_file && !v->jwks_uri) {
      if (!v->discovered_jwks_uri) {
        snprintf(v->jwks_why, sizeof v->jwks_why, "the issuer's metadata names no jwks_uri");
        log_once(v, LOGGED_JWKS, "%s", v->jwks_why);
      } else keys_start(v);
    }
    return;
  }
  snprintf(v->discovery_why, sizeof v->discovery_why, "%s", problem);
  /* An answer that is not the metadata sends us to the next well-known
   * URL; a server that cannot be reached does not. */
  if (result == CURLE_OK) discovery_try(v, v->discovery_candidate + 1);
  else discovery_failed(v, problem);
}

static void jwks_done(auth_verifier *v, auth_fetch *f, bool fetched, const char *why) {
  v->jwks_running = false;
  char problem[160];
  if (!fetched) {
    snprintf(problem, sizeof problem, "%s", why);
  } else {
    char parse_why[128] = "";
    jwk_set *set = jwk_set_parse(f->body.data ? f->body.data : "", f->body.len, parse_why, sizeof parse_why);
    if (set) {
      int64_t ttl = cache_control_ms(&f->head);
      if (ttl < 0) ttl = AUTH_JWKS_DEFAULT_TTL_MS;
      if (ttl < AUTH_JWKS_MIN_TTL_MS) ttl = AUTH_JWKS_MIN_TTL_MS;
      if (ttl > AUTH_JWKS_MAX_TTL_MS) ttl = AUTH_JWKS_MAX_TTL_MS;
      jwk_set_free(v->keys);
      v->keys = set;
      v->keys_until_ms = uv_now(v->loop) + (uint64_t)ttl;
      v->jwks_why[0] = '\0';
      log_write(LOG_DEBUG, "auth: %zu keys from %s, kept %lld s", jwk_set_count(set), f->url, (long long)(ttl / 1000));
      return;
    }
    snprintf(problem, sizeof problem, "%s is not a JWK Set: %s", f->url, parse_why);
  }
  /* The old keys, if any, stay: a set that cannot be fetched now is no
   * reason to refuse tokens signed by keys we have. */
  snprintf(v->jwks_why, sizeof v->jwks_why, "%s", problem);
  log_once(v, LOGGED_JWKS, "the key set could not be fetched: %s%s", problem, v->keys ? " (the old one stays)" : "");
}

/* ---- Checking ----------------------------------------------------------------- */

/* What evaluate decided for a check. */
typedef enum outcome { ANSWERED, WAIT, INTROSPECT } outcome;

/* The parts of a check evaluate reads: the waiter itself once it waits. */
typedef struct check_view {
  const char *token;
  size_t len;
  const char *resource;
  bool *refetch_asked;
} check_view;

static outcome evaluate_jwt(auth_verifier *v, const check_view *c, bool may_start, auth_verdict *out) {
  if (!v->keys) {
    if (v->jwks_running || v->discovery == DISCOVERY_RUNNING) return WAIT;
    if (may_start && keys_start(v)) return WAIT;
    if (!jwks_source(v) && !v->jwks_file && v->discovery != DISCOVERY_DONE)
      unavailable(out, "the authorization server's metadata could not be fetched: %s", v->discovery_why);
    else unavailable(out, "the authorization server's keys could not be fetched: %s", v->jwks_why);
    return ANSWERED;
  }
  /* Keys past their time are fetched again in the background; meanwhile
   * they still verify. */
  if (may_start && !v->jwks_file && uv_now(v->loop) >= v->keys_until_ms) keys_start(v);
  jwt_policy policy = {
      .issuer = v->issuer,
      .audience = c->resource,
      .algorithms = v->algorithms,
      .leeway_s = v->leeway_s,
      .now_s = (int64_t)time(NULL),
  };
  auth_identity *id = NULL;
  char why[160] = "";
  jwt_verdict verdict = jwt_verify(c->token, c->len, v->keys, &policy, &id, why, sizeof why);
  if (verdict == JWT_OK) {
    accept_identity(out, id);
    return ANSWERED;
  }
  /* A kid we do not know: the issuer may have rotated its keys. Fetch the
   * set again, once for this check, and no sooner than the floor (until
   * then the check waits: a key rotated in just after a fetch is found
   * all the same, and a stream of made-up kids costs one fetch per floor). */
  if (verdict == JWT_UNKNOWN_KEY && !*c->refetch_asked && !v->jwks_file && jwks_source(v)) {
    if (v->unknown_kid_waiters >= AUTH_MAX_UNKNOWN_KID_WAITERS) {
      /* Not judged (its key may be rotating in), so not 401: a client
       * must not throw away a token that may be good. */
      log_once(v, LOGGED_UNKNOWN_KIDS, "more than %d checks wait for a key they name: 503 (made-up kids?)",
               AUTH_MAX_UNKNOWN_KID_WAITERS);
      unavailable(out, "%d checks already wait for the key set", AUTH_MAX_UNKNOWN_KID_WAITERS);
      return ANSWERED;
    }
    if (v->jwks_running || (may_start && (keys_start(v) || refetch_later(v)))) {
      *c->refetch_asked = true;
      return WAIT;
    }
  }
  refuse(out, "%s", why[0] ? why : jwt_verdict_text(verdict));
  return ANSWERED;
}

static outcome evaluate_opaque(auth_verifier *v, bool may_start, auth_verdict *out) {
  if (v->introspection_endpoint || v->discovered_introspection) return INTROSPECT;
  if (v->jwks_file || v->discovery == DISCOVERY_DONE) {
    refuse(out, "opaque tokens are not accepted (no introspection endpoint)");
    return ANSWERED;
  }
  if (v->discovery == DISCOVERY_RUNNING || (may_start && discovery_start(v))) return WAIT;
  unavailable(out, "the authorization server's metadata could not be fetched: %s", v->discovery_why);
  return ANSWERED;
}

/* Answer c now, or say what it waits for. may_start: it may start a
 * fetch of a shared document (a new check may; a waiter looked at again
 * after its fetch ended may not, so that it waits for one at most). */
static outcome evaluate(auth_verifier *v, const check_view *c, bool may_start, auth_verdict *out) {
  if (jwt_looks_like(c->token, c->len)) return evaluate_jwt(v, c, may_start, out);
  return evaluate_opaque(v, may_start, out);
}

/* application/x-www-form-urlencoded (RFC 6749 appendix B), appended. */
static void form_encode(buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || strchr("-._~", ch))
      buf_putc(b, (char)ch);
    else {
      buf_putc(b, '%');
      buf_putc(b, hex[ch >> 4]);
      buf_putc(b, hex[ch & 15]);
    }
  }
}

/* Introspect w's token (RFC 7662 section 2.1: a form POST, this server
 * authenticated as a client with HTTP Basic, RFC 6749 2.3.1), or join the
 * introspection of the same token already running; false with why. */
static bool introspection_start(auth_verifier *v, auth_waiter *w, char *why, size_t why_len) {
  for (auth_fetch *f = v->fetches; f; f = f->next) {
    if (f->kind == FETCH_INTROSPECTION && !f->answering && memcmp(f->key, w->key, sizeof f->key) == 0) {
      f->sharers++;
      w->introspection = f;
      return true;
    }
  }
  if (v->introspections >= AUTH_MAX_INTROSPECTIONS) {
    log_once(v, LOGGED_INTROSPECTIONS, "%d introspections already run: 503 for more", AUTH_MAX_INTROSPECTIONS);
    snprintf(why, why_len, "%d introspections are already running", AUTH_MAX_INTROSPECTIONS);
    return false;
  }
  const char *endpoint = v->introspection_endpoint ? v->introspection_endpoint : v->discovered_introspection;
  buf form = BUF_INIT, credentials = BUF_INIT, header = BUF_INIT;
  buf_puts(&form, "token=");
  form_encode(&form, w->token, w->len);
  buf_puts(&form, "&token_type_hint=access_token");
  const char *authorization = NULL;
  if (v->client_id) {
    form_encode(&credentials, v->client_id, strlen(v->client_id));
    buf_putc(&credentials, ':');
    if (v->client_secret) form_encode(&credentials, v->client_secret, strlen(v->client_secret));
    buf_puts(&header, "Authorization: Basic ");
    buf_reserve(&header, base64_encoded_len(credentials.len) + 1);
    base64_encode((const unsigned char *)credentials.data, credentials.len, header.data + header.len);
    header.len += base64_encoded_len(credentials.len);
    header.data[header.len] = '\0';
    authorization = header.data;
  }
  auth_fetch *f = fetch_start(v, FETCH_INTROSPECTION, endpoint, buf_detach(&form, NULL), authorization, why, why_len);
  if (credentials.data) memset(credentials.data, 0, credentials.len);
  if (header.data) memset(header.data, 0, header.len);
  buf_free(&credentials);
  buf_free(&header);
  if (!f) return false;
  memcpy(f->key, w->key, sizeof f->key);
  f->sharers = 1;
  w->introspection = f;
  return true;
}

/* An introspection answer into a verdict; cacheable refusals and
 * identities are remembered. */
static void introspection_verdict(auth_verifier *v, auth_fetch *f, const uint8_t key[OS_SHA256_BYTES],
                                  const char *resource, auth_verdict *out) {
  json_error err;
  json_doc *doc = json_parse(f->body.data ? f->body.data : "", f->body.len, MAX_JSON_DEPTH, &err);
  const json_value *root = doc ? json_doc_root(doc) : NULL;
  if (!root || root->type != JSON_OBJECT) {
    unavailable(out, "the introspection endpoint did not answer a JSON object");
    log_once(v, LOGGED_INTROSPECTION, "the introspection endpoint %s did not answer a JSON object", f->url);
    json_doc_free(doc);
    return;
  }
  /* The rules a JWT's claims follow (jwt_check_claims), with aud required
   * as for a JWT: RFC 7662 makes it optional, MCP (RFC 8707) the guard
   * against a token minted for another resource. */
  jwt_policy policy = {
      .issuer = v->issuer,
      .audience = resource ? resource : "",
      .leeway_s = v->leeway_s,
      .now_s = (int64_t)time(NULL),
  };
  const json_value *active = json_object_get(root, "active");
  char why[160] = "";
  auth_identity *id = NULL;
  if (!active || active->type != JSON_TRUE) refuse(out, "the token is not active");
  else if (jwt_check_claims(root, JWT_CLAIMS_INTROSPECTED, &policy, why, sizeof why) != JWT_OK) refuse(out, "%s", why);
  else if (!(id = jwt_identity_from_claims(root, f->body.data, f->body.len, v->issuer)))
    refuse(out, "the token names neither a subject nor a client");
  else accept_identity(out, id);
  json_doc_free(doc);
  if (id) cache_put(v, key, id, NULL, identity_ttl_ms(id));
  else cache_put(v, key, NULL, out->description, AUTH_NEGATIVE_CACHE_MS);
}

/* Take w out of the list, and out of the introspection it shares (freed
 * when w was its last sharer). */
static void waiter_unlink(auth_verifier *v, auth_waiter *w) {
  auth_fetch *f = w->introspection;
  w->introspection = NULL;
  if (f && --f->sharers == 0) fetch_free(f);
  if (w->prev) w->prev->next = w->next;
  else v->waiters = w->next;
  if (w->next) w->next->prev = w->prev;
  v->waiter_count--;
  if (w->refetch_asked) v->unknown_kid_waiters--;
}

static void waiter_free(auth_waiter *w) {
  free(w->token);
  free(w->resource);
  free(w);
}

/* Tell w's owner and forget w. */
static void waiter_answer(auth_verifier *v, auth_waiter *w, auth_verdict *verdict) {
  waiter_unlink(v, w);
  auth_done_fn done = w->done;
  void *data = w->data;
  waiter_free(w);
  done(data, verdict);
}

static void really_free(auth_verifier *v);

/* Look at every waiter again after a fetch ended: answer those that can
 * be. A done may check or cancel others (or free the verifier: deferred
 * until this returns), so the list is walked again from its head each
 * time, skipping those this pass has seen. */
static void settle(auth_verifier *v) {
  unsigned pass = ++v->pass;
  v->settling++;
  for (;;) {
    auth_waiter *w = v->waiters;
    while (w && w->pass == pass) w = w->next;
    if (!w || v->freed) break;
    w->pass = pass;
    if (w->introspection) continue;
    check_view c = {w->token, w->len, w->resource, &w->refetch_asked};
    auth_verdict verdict;
    /* Waiters with the same token (a client's burst) cost one check. */
    bool remembered = cache_answer(v, w->key, &verdict);
    bool asked = w->refetch_asked;
    outcome o = remembered ? ANSWERED : evaluate(v, &c, false, &verdict);
    if (w->refetch_asked && !asked) v->unknown_kid_waiters++;
    if (o == WAIT) continue;
    char why[160];
    if (o == INTROSPECT) {
      if (introspection_start(v, w, why, sizeof why)) continue;
      unavailable(&verdict, "the introspection endpoint could not be asked: %s", why);
    }
    if (verdict.status == 0 && !remembered)
      cache_put(v, w->key, verdict.identity, NULL, identity_ttl_ms(verdict.identity));
    waiter_answer(v, w, &verdict);
  }
  v->settling--;
  if (v->freed && v->settling == 0) really_free(v);
}

static void on_fetch_done(curl_transfer *t, CURLcode result) {
  auth_fetch *f = (auth_fetch *)((char *)t - offsetof(auth_fetch, transfer));
  auth_verifier *v = f->v;
  long status = 0;
  v->api->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  char why[160];
  bool fetched = result == CURLE_OK && !f->too_large && status == 200;
  if (f->too_large) snprintf(why, sizeof why, "%s is larger than %u bytes", f->url, AUTH_MAX_DOCUMENT_BYTES);
  else if (result != CURLE_OK) snprintf(why, sizeof why, "%s: %s", f->url, v->api->easy_strerror(result));
  else snprintf(why, sizeof why, "%s answered HTTP %ld", f->url, status);
  if (f->kind == FETCH_DISCOVERY) discovery_done(v, f, fetched, f->too_large ? CURLE_OK : result, why);
  else if (f->kind == FETCH_JWKS) jwks_done(v, f, fetched, why);
  else {
    /* Its sharers are still there (the last one cancelled frees it). */
    auth_waiter *w = v->waiters;
    while (w && w->introspection != f) w = w->next;
    auth_verdict verdict;
    if (fetched) introspection_verdict(v, f, f->key, w ? w->resource : "", &verdict);
    else {
      unavailable(&verdict, "the introspection endpoint could not be asked: %s", why);
      log_once(v, LOGGED_INTROSPECTION, "the introspection endpoint could not be asked: %s", why);
    }
    /* Answer every sharer. A done may check (then a new introspection, or
     * the cache), cancel others or free the verifier: the list is searched
     * again each time, and f is held by one more sharer meanwhile. */
    f->answering = true;
    f->sharers++;
    v->settling++;
    while (!v->freed) {
      for (w = v->waiters; w && w->introspection != f; w = w->next) {}
      if (!w) break;
      auth_verdict each = verdict;
      auth_identity_ref(each.identity);
      waiter_answer(v, w, &each);
    }
    auth_identity_unref(verdict.identity);
    v->settling--;
    if (v->freed) {
      if (v->settling == 0) really_free(v); /* frees f */
    } else if (--f->sharers == 0) fetch_free(f);
    return;
  }
  fetch_free(f);
  settle(v);
}

static bool check(void *verifier, const char *token, size_t len, const char *resource, auth_done_fn done, void *data,
                  auth_verdict *out, void **pending) {
  auth_verifier *v = verifier;
  *pending = NULL;
  if (len == 0) {
    refuse(out, "the bearer token is empty");
    return true;
  }
  if (len > AUTH_MAX_TOKEN_BYTES) {
    refuse(out, "the bearer token is longer than %u bytes", AUTH_MAX_TOKEN_BYTES); /* before it is hashed, copied or sent */
    return true;
  }
  uint8_t key[OS_SHA256_BYTES];
  auth_cache_key(token, len, resource, key);
  if (cache_answer(v, key, out)) return true;
  bool refetch_asked = false;
  check_view c = {token, len, resource, &refetch_asked};
  outcome o = evaluate(v, &c, true, out);
  if (o == ANSWERED) {
    if (out->status == 0) cache_put(v, key, out->identity, NULL, identity_ttl_ms(out->identity));
    return true;
  }
  if (v->waiter_count >= AUTH_MAX_WAITERS) {
    log_once(v, LOGGED_WAITERS, "more than %d token checks wait at once: refused with 503", AUTH_MAX_WAITERS);
    unavailable(out, "too many token checks are waiting");
    return true;
  }
  auth_waiter *w = calloc(1, sizeof *w);
  if (!w || !(w->token = malloc(len)) || !(w->resource = strdup(resource ? resource : ""))) {
    if (w) waiter_free(w);
    unavailable(out, "out of memory");
    return true;
  }
  memcpy(w->token, token, len);
  w->len = len;
  memcpy(w->key, key, sizeof key);
  w->done = done;
  w->data = data;
  w->refetch_asked = refetch_asked;
  if (refetch_asked) v->unknown_kid_waiters++;
  w->next = v->waiters;
  if (w->next) w->next->prev = w;
  v->waiters = w;
  v->waiter_count++;
  char why[160];
  if (o == INTROSPECT && !introspection_start(v, w, why, sizeof why)) {
    waiter_unlink(v, w);
    waiter_free(w);
    unavailable(out, "the introspection endpoint could not be asked: %s", why);
    return true;
  }
  *pending = w;
  return false;
}

static void cancel(void *verifier, void *pending) {
  auth_verifier *v = verifier;
  auth_waiter *w = pending;
  if (!w) return;
  waiter_unlink(v, w);
  waiter_free(w);
}

const auth_verifier_ops AUTH_VERIFIER_OPS = {check, cancel};

/* ---- Life ------------------------------------------------------------------------------ */

static char *copy(const char *s) { return s && *s ? strdup(s) : NULL; }

static void free_timer(uv_handle_t *h) { free(h); }

/* The JWK Set of a file, read once. */
static jwk_set *read_jwks_file(const char *path, char *why, size_t why_len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(why, why_len, "cannot read %s", path);
    return NULL;
  }
  buf text = BUF_INIT;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0 && text.len <= AUTH_MAX_DOCUMENT_BYTES) buf_append(&text, chunk, n);
  bool failed = ferror(fp);
  fclose(fp);
  jwk_set *set = NULL;
  char parse_why[128] = "";
  if (failed) snprintf(why, why_len, "cannot read %s", path);
  else if (text.len > AUTH_MAX_DOCUMENT_BYTES) snprintf(why, why_len, "%s is larger than %u bytes", path, AUTH_MAX_DOCUMENT_BYTES);
  else if (!(set = jwk_set_parse(text.data ? text.data : "", text.len, parse_why, sizeof parse_why)))
    snprintf(why, why_len, "%s is not a JWK Set: %s", path, parse_why);
  buf_free(&text);
  return set;
}

auth_verifier *auth_verifier_new(uv_loop_t *loop, const auth_settings *settings, char *why, size_t why_len) {
  const char *issuer = settings->issuer;
  if (!issuer || !*issuer) {
    snprintf(why, why_len, "OAuth needs the authorization server's issuer");
    return NULL;
  }
  if (strpbrk(issuer, "?#")) {
    snprintf(why, why_len, "the issuer %s must be an https URL with no query or fragment", issuer);
    return NULL;
  }
  auth_verifier *v = calloc(1, sizeof *v);
  if (!v) {
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  v->loop = loop;
  v->issuer = strdup(issuer);
  v->jwks_uri = copy(settings->jwks_uri);
  v->jwks_file = copy(settings->jwks_file);
  v->introspection_endpoint = copy(settings->introspection_endpoint);
  v->client_id = copy(settings->client_id);
  v->client_secret = copy(settings->client_secret);
  v->algorithms = copy(settings->algorithms);
  v->leeway_s = settings->leeway_s < 0 ? AUTH_DEFAULT_LEEWAY_S : settings->leeway_s;
  auth_cache_init(&v->cache);
  if (v->jwks_file && !(v->keys = read_jwks_file(v->jwks_file, why, why_len))) {
    really_free(v);
    return NULL;
  }
  if (v->keys) v->keys_until_ms = UINT64_MAX;
  /* libcurl is needed unless every key is on disk and nothing is asked
   * of the authorization server. */
  if ((!v->jwks_file || v->introspection_endpoint) && !curl_ready(v)) {
    snprintf(why, why_len, "%s", v->curl_why);
    really_free(v);
    return NULL;
  }
  if (!v->api) { /* a key file and no introspection: libcurl only judges the issuer */
    char unused[200];
    v->api = curl_lib_load("the token verifier", unused, sizeof unused);
  }
  /* Every URL given is judged as libcurl reads it. A luamcp that cannot
   * load libcurl (a static one) has got here only with a key file and no
   * introspection: it sends nothing anywhere, so has no URL to judge. */
  const struct {
    const char *what, *url;
  } given[] = {
      {"the issuer", v->issuer},
      {"the key set", v->jwks_uri},
      {"the introspection endpoint", v->introspection_endpoint},
  };
  for (size_t i = 0; v->api && i < sizeof given / sizeof *given; i++) {
    char refused[200];
    if (given[i].url && *given[i].url && !url_allowed(v, given[i].url, refused, sizeof refused)) {
      snprintf(why, why_len, "%s %s: %s", given[i].what, given[i].url, refused);
      really_free(v);
      return NULL;
    }
  }
  log_write(LOG_INFO, "auth: tokens from %s; keys %s %s; opaque tokens %s%s", v->issuer,
            v->jwks_file ? "from the file" : v->jwks_uri ? "from" : "found by discovery at",
            v->jwks_file ? v->jwks_file : v->jwks_uri ? v->jwks_uri : v->issuer,
            v->introspection_endpoint ? "introspected at " : v->jwks_file ? "refused" : "introspected as discovery says",
            v->introspection_endpoint ? v->introspection_endpoint : "");
  /* Fetch at once what the first request will need. */
  if (!v->jwks_file && (!v->jwks_uri || !v->introspection_endpoint)) discovery_start(v);
  if (v->jwks_uri) keys_start(v);
  return v;
}

static void really_free(auth_verifier *v) {
  while (v->waiters) {
    auth_waiter *w = v->waiters;
    waiter_unlink(v, w);
    waiter_free(w); /* cancelled: its done is not called */
  }
  while (v->fetches) fetch_free(v->fetches);
  curl_loop_close(v->curl);
  if (v->refetch_timer) {
    uv_timer_stop(v->refetch_timer);
    uv_close((uv_handle_t *)v->refetch_timer, free_timer);
  }
  auth_cache_free(&v->cache);
  jwk_set_free(v->keys);
  if (v->client_secret) memset(v->client_secret, 0, strlen(v->client_secret));
  free(v->issuer);
  free(v->jwks_uri);
  free(v->jwks_file);
  free(v->introspection_endpoint);
  free(v->client_id);
  free(v->client_secret);
  free(v->algorithms);
  free(v->discovered_jwks_uri);
  free(v->discovered_introspection);
  free(v);
}

void auth_verifier_free(auth_verifier *v) {
  if (!v) return;
  if (v->settling) {
    /* A done answered by settle freed us: settle finishes, then frees. */
    v->freed = true;
    return;
  }
  really_free(v);
}

/* auth_setup.c - the --auth-* flags and mcp.server{auth}: see auth_setup.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/auth_setup.h"
#include "core/json.h"
#include "core/luamcp_limits.h"
#include "transport/http_util.h"

_Static_assert(AUTH_MAX_LEEWAY_S == 600, "the --auth-leeway message and lua/mcp/auth.lua's MAX_LEEWAY_S name AUTH_MAX_LEEWAY_S");

void auth_flags_init(auth_flags *f) {
  memset(f, 0, sizeof *f);
  f->leeway_s = -1;
}

/* Each flag, the field of auth_flags it sets, and the key of the script's
 * table (lua/mcp/auth.lua) it overrides. */
#define FLAG(name, field, key) {name, offsetof(auth_flags, field), key}
static const struct {
  const char *flag;
  size_t offset;
  const char *key;
} FLAGS[] = {
    FLAG("--auth-issuer", issuer, "issuer"),
    FLAG("--auth-audience", audience, "audience"),
    FLAG("--auth-scopes", scopes, "scopes"),
    FLAG("--auth-jwks-uri", jwks_uri, "jwks_uri"),
    FLAG("--auth-jwks-file", jwks_file, "jwks_file"),
    FLAG("--auth-introspection-endpoint", introspection_endpoint, "introspection_endpoint"),
    FLAG("--auth-client-id", client_id, "client_id"),
    FLAG("--auth-client-secret-env", client_secret_env, "client_secret_env"),
    FLAG("--auth-algorithms", algorithms, "algorithms"),
};
#undef FLAG

bool auth_flag_parse(auth_flags *f, const char *a, const char *value, const char **err) {
  *err = NULL;
  if (strncmp(a, "--auth-", 7) != 0) return false;
  if (strcmp(a, "--auth-leeway") == 0) {
    char *end;
    long n = value ? strtol(value, &end, 10) : -1;
    if (!value || *end || n < 0 || n > AUTH_MAX_LEEWAY_S) *err = "needs a whole number of seconds (0 to 600)";
    else f->leeway_s = (int)n;
    f->any = true;
    return true;
  }
  for (size_t i = 0; i < sizeof FLAGS / sizeof *FLAGS; i++) {
    if (strcmp(a, FLAGS[i].flag) != 0) continue;
    if (!value || !*value) {
      *err = "needs a value";
      return true;
    }
    *(const char **)((char *)f + FLAGS[i].offset) = value;
    f->any = true;
    return true;
  }
  *err = "unknown option";
  return true;
}

/* The flag's value, else the script's (a string in script_json), else NULL. */
static const char *pick(const auth_flags *f, size_t i, const json_value *script) {
  const char *flag = *(const char *const *)((const char *)f + FLAGS[i].offset);
  if (flag) return flag;
  const json_value *v = json_object_get(script, FLAGS[i].key);
  return v && v->type == JSON_STRING && v->len ? v->u.string : NULL;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* The TCP port an http(s) URL connects to; 0 when it is not one. */
static unsigned url_port(const char *url) {
  unsigned port;
  const char *p;
  if (strncmp(url, "https://", 8) == 0) port = 443, p = url + 8;
  else if (strncmp(url, "http://", 7) == 0) port = 80, p = url + 7;
  else return 0;
  size_t len = strcspn(p, "/?#");
  const char *at = memchr(p, '@', len);
  if (at) len -= (size_t)(at + 1 - p), p = at + 1;
  const char *colon = NULL;
  bool bracket = false;
  for (size_t i = 0; i < len; i++) {
    if (p[i] == '[') bracket = true;
    else if (p[i] == ']') bracket = false;
    else if (p[i] == ':' && !bracket) colon = p + i;
  }
  if (!colon) return port;
  unsigned n = 0;
  for (const char *d = colon + 1; d < p + len; d++) {
    if (*d < '0' || *d > '9' || n > 65535) return 0;
    n = n * 10 + (unsigned)(*d - '0');
  }
  return n >= 1 && n <= 65535 ? n : 0;
}

size_t auth_setup_ports(const auth_flags *f, const char *script_json, unsigned *ports, size_t max) {
  json_doc *doc = script_json ? json_parse(script_json, strlen(script_json), MAX_JSON_DEPTH, NULL) : NULL;
  const json_value *script = doc ? json_doc_root(doc) : NULL;
  size_t n = 0;
  /* issuer, jwks_uri, introspection_endpoint: the URLs the verifier fetches. */
  static const size_t fetched[] = {0, 3, 5};
  if (pick(f, 0, script)) {
    for (size_t i = 0; i < sizeof fetched / sizeof *fetched && n < max; i++) {
      const char *url = pick(f, fetched[i], script);
      unsigned port = url ? url_port(url) : 0;
      bool seen = false;
      for (size_t j = 0; j < n; j++) seen = seen || ports[j] == port;
      if (port && !seen) ports[n++] = port;
    }
  }
  json_doc_free(doc);
  return n;
}

bool auth_setup_start(auth_setup *s, uv_loop_t *loop, const auth_flags *f, const char *script_json, http_options *http,
                      char *why, size_t why_len) {
  memset(s, 0, sizeof *s);
  json_doc *doc = script_json ? json_parse(script_json, strlen(script_json), MAX_JSON_DEPTH, NULL) : NULL;
  const json_value *script = doc ? json_doc_root(doc) : NULL;
  const char *v[sizeof FLAGS / sizeof *FLAGS];
  for (size_t i = 0; i < sizeof FLAGS / sizeof *FLAGS; i++) v[i] = pick(f, i, script);
  enum { ISSUER, AUDIENCE, SCOPES, JWKS_URI, JWKS_FILE, INTROSPECTION, CLIENT_ID, SECRET_ENV, ALGORITHMS };
  int leeway = f->leeway_s;
  const json_value *lw = json_object_get(script, "leeway_s");
  if (leeway < 0 && lw && lw->type == JSON_INTEGER) leeway = (int)lw->u.integer;
  bool ok = false;
  if (!v[ISSUER]) {
    if (f->any) snprintf(why, why_len, "the --auth-* options need an issuer (--auth-issuer URL, or auth.issuer in mcp.server{})");
    else ok = true; /* OAuth off */
    goto done;
  }
  if (http->bearer_token) {
    snprintf(why, why_len, "--bearer-token-env and OAuth (%s) cannot be used together: give one way to authenticate",
             f->issuer ? "--auth-issuer" : "mcp.server{auth}");
    goto done;
  }
  if (!v[AUDIENCE] && !http_is_loopback_address(http->host)) {
    snprintf(why, why_len,
             "OAuth on %s (not loopback) needs --auth-audience URI (this server's canonical URI, e.g. "
             "https://mcp.example.com%s): without it the Host header of each request would decide which tokens are "
             "accepted",
             http->host, http->path);
    goto done;
  }
  if (!v[AUDIENCE] && http->allow_host_count) {
    snprintf(why, why_len,
             "OAuth with --allow-host needs --auth-audience URI (this server's canonical URI, e.g. "
             "https://%s%s): the server is reached by another name than its own, so the Host header of each "
             "request cannot say which tokens are meant for it",
             http->allow_hosts[0], http->path);
    goto done;
  }
  if (v[JWKS_URI] && v[JWKS_FILE]) {
    snprintf(why, why_len, "give --auth-jwks-uri or --auth-jwks-file, not both");
    goto done;
  }
  const char *secret = NULL;
  if (v[SECRET_ENV]) {
    secret = getenv(v[SECRET_ENV]);
    if (!secret || !*secret) {
      snprintf(why, why_len, "--auth-client-secret-env: the environment variable %s is empty or unset", v[SECRET_ENV]);
      goto done;
    }
  }
  auth_settings settings = {.issuer = v[ISSUER],
                            .jwks_uri = v[JWKS_URI],
                            .jwks_file = v[JWKS_FILE],
                            .introspection_endpoint = v[INTROSPECTION],
                            .client_id = v[CLIENT_ID],
                            .client_secret = secret,
                            .algorithms = v[ALGORITHMS],
                            .leeway_s = leeway};
  char verifier_why[300] = "";
  s->verifier = auth_verifier_new(loop, &settings, verifier_why, sizeof verifier_why);
  if (!s->verifier) {
    snprintf(why, why_len, "OAuth: %s", verifier_why[0] ? verifier_why : "cannot set up the token verifier");
    goto done;
  }
  s->issuer = strdup(v[ISSUER]);
  s->audience = dup_or_null(v[AUDIENCE]);
  s->scopes = dup_or_null(v[SCOPES]);
  s->servers[0] = s->issuer;
  http->auth = (auth_config){.ops = &AUTH_VERIFIER_OPS,
                             .verifier = s->verifier,
                             .resource = s->audience,
                             .authorization_servers = s->servers,
                             .authorization_server_count = 1,
                             .scopes = s->scopes};
  /* The verifier has its copy: the scripts' children need not see it. */
  if (v[SECRET_ENV]) unsetenv(v[SECRET_ENV]);
  ok = true;
done:
  json_doc_free(doc);
  return ok;
}

void auth_setup_free(auth_setup *s) {
  if (s->verifier) auth_verifier_free(s->verifier);
  free(s->issuer);
  free(s->audience);
  free(s->scopes);
  memset(s, 0, sizeof *s);
}

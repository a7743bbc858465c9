/* http_util.c - see http_util.h. */
#include "transport/http_util.h"

#include "core/luamcp_limits.h"
#include "core/unix_url.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* Compare [a, a_end) with the NUL-terminated b, ignoring case. */
static bool span_equals(const char *a, const char *a_end, const char *b) {
  size_t n = (size_t)(a_end - a);
  return strlen(b) == n && strncasecmp(a, b, n) == 0;
}

bool http_accepts(const char *accept, const char *media_type) {
  if (!accept) return false;
  const char *slash = strchr(media_type, '/');
  const char *p = accept;
  while (*p) {
    p = skip_space(p);
    const char *start = p;
    while (*p && *p != ',' && *p != ';') p++;
    const char *end = p;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
    bool q_zero = false;
    while (*p == ';') {
      p = skip_space(p + 1);
      if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
        double q = strtod(p + 2, NULL);
        q_zero = q <= 0;
      }
      while (*p && *p != ',' && *p != ';') p++;
    }
    if (*p == ',') p++;
    if (q_zero || end == start) continue;
    if (span_equals(start, end, media_type) || span_equals(start, end, "*/*")) return true;
    /* A type wildcard such as text/(star). */
    if (end - start >= 2 && end[-1] == '*' && end[-2] == '/' && slash &&
        (size_t)(end - 2 - start) == (size_t)(slash - media_type) && strncasecmp(start, media_type, (size_t)(slash - media_type)) == 0)
      return true;
  }
  return false;
}

bool http_is_json(const char *content_type) {
  if (!content_type) return false;
  const char *p = skip_space(content_type);
  const char *end = p;
  while (*end && *end != ';' && *end != ' ' && *end != '\t') end++;
  return span_equals(p, end, "application/json");
}

static void lower_copy(char *out, size_t out_len, const char *s, size_t n) {
  if (n >= out_len) n = out_len - 1;
  for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)s[i]);
  out[n] = '\0';
}

static bool valid_port(const char *p) {
  if (!*p) return false;
  for (; *p; p++)
    if (!isdigit((unsigned char)*p)) return false;
  return true;
}

bool http_host_name(const char *host, char *out, size_t out_len) {
  if (!host || !*host) return false;
  const char *end;
  if (host[0] == '[') {
    end = strchr(host, ']');
    if (!end) return false;
    if (end[1] && !(end[1] == ':' && valid_port(end + 2))) return false;
    if (end == host + 1) return false;
    for (const char *p = host + 1; p < end; p++) /* an IPv6 literal: hex digits, ':' and '.' */
      if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.') return false;
    lower_copy(out, out_len, host + 1, (size_t)(end - host - 1));
    return true;
  }
  end = strchr(host, ':');
  if (end && !valid_port(end + 1)) return false;
  size_t n = end ? (size_t)(end - host) : strlen(host);
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)host[i];
    if (!(isalnum(c) || c == '.' || c == '-' || c == '_')) return false;
  }
  lower_copy(out, out_len, host, n);
  return true;
}

bool http_origin_host(const char *origin, char *out, size_t out_len) {
  if (!origin) return false;
  const char *rest;
  if (strncasecmp(origin, "http://", 7) == 0) rest = origin + 7;
  else if (strncasecmp(origin, "https://", 8) == 0) rest = origin + 8;
  else return false;
  char host[256];
  size_t n = strcspn(rest, "/?#");
  if (n == 0 || n >= sizeof host || rest[n] != '\0') return false; /* an origin has no path */
  memcpy(host, rest, n);
  host[n] = '\0';
  if (strchr(host, '@')) return false;
  return http_host_name(host, out, out_len);
}

bool http_is_loopback_name(const char *name) {
  return strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 || strcmp(name, "::1") == 0;
}

bool http_is_loopback_address(const char *address) {
  return strcmp(address, "localhost") == 0 || strncmp(address, "127.", 4) == 0 || strcmp(address, "::1") == 0;
}

bool http_parse_listen(const char *spec, char *host, size_t host_len, int *port, char *local, size_t local_len,
                       char *path, size_t path_len, char *err, size_t err_len) {
  snprintf(host, host_len, "127.0.0.1");
  snprintf(path, path_len, "/mcp");
  local[0] = '\0';
  *port = 0;
  if (unix_url_is(spec)) {
    char why[300];
    if (unix_url_parse(spec, "/mcp", local, local_len, path, path_len, why, sizeof why)) return true;
    snprintf(err, err_len, "--http unix:SOCKET[:/PATH]: %s", why);
    return false;
  }
  const char *p = spec;
  const char *slash = strchr(spec, '/');
  const char *port_start = spec;
  size_t hostpart_len = slash ? (size_t)(slash - spec) : strlen(spec);
  char hostpart[300];
  if (hostpart_len >= sizeof hostpart) goto bad;
  memcpy(hostpart, p, hostpart_len);
  hostpart[hostpart_len] = '\0';
  if (hostpart[0] == '[') {
    char *close = strchr(hostpart, ']');
    if (!close || close[1] != ':') goto bad;
    *close = '\0';
    snprintf(host, host_len, "%s", hostpart + 1);
    port_start = close + 2;
  } else {
    char *colon = strrchr(hostpart, ':');
    if (colon) {
      *colon = '\0';
      if (hostpart[0]) snprintf(host, host_len, "%s", hostpart);
      port_start = colon + 1;
    } else {
      port_start = hostpart;
    }
  }
  if (!valid_port(port_start)) goto bad;
  long n = strtol(port_start, NULL, 10);
  if (n < 0 || n > 65535) goto bad;
  *port = (int)n;
  if (slash) {
    if (strlen(slash) >= path_len || strpbrk(slash, "?# ")) goto bad;
    snprintf(path, path_len, "%s", slash);
  }
  return true;
bad:
  snprintf(err, err_len, "--http needs [HOST:]PORT[/PATH] or unix:SOCKET[:/PATH], e.g. 8080, 127.0.0.1:8080/mcp, [::1]:8080 or "
           "unix:/run/luamcp.sock; got '%s'", spec);
  return false;
}

bool http_secret_equal(const char *given, size_t given_len, const char *secret, size_t secret_len) {
  /* Always walk the whole secret, so the time taken reveals only its length. */
  unsigned char diff = given_len != secret_len;
  for (size_t i = 0; i < secret_len; i++) {
    unsigned char g = i < given_len ? (unsigned char)given[i] : 0;
    diff |= (unsigned char)(g ^ (unsigned char)secret[i]);
  }
  return diff == 0;
}

int http_session_id_worker(const char *id, const char *node) {
  if (!id) return 0;
  size_t node_len = node ? strlen(node) : 0;
  if (node_len) {
    if (strncmp(id, node, node_len) != 0 || id[node_len] != '.') return 0;
    id += node_len + 1;
  }
  if (id[0] != 'w' || !isdigit((unsigned char)id[1])) return 0;
  int k = 0;
  const char *p = id + 1;
  for (; isdigit((unsigned char)*p); p++) {
    k = k * 10 + (*p - '0');
    if (k > MAX_WORKERS) return 0;
  }
  return *p == '-' ? k : 0;
}

/* Append text to out[*n] while it fits (out_len leaves room for the NUL). */
static bool append_fitting(char *out, size_t out_len, size_t *n, const char *text, size_t len) {
  if (*n + len >= out_len) return false;
  memcpy(out + *n, text, len);
  *n += len;
  return true;
}

void http_target_for_log(const char *target, char *out, size_t out_len) {
  if (out_len == 0) return;
  static const char redacted[] = "[redacted]";
  size_t end = strcspn(target, "#"), path = strcspn(target, "?#"), n = 0;
  bool fits = append_fitting(out, out_len, &n, target, path < out_len ? path : out_len - 1);
  fits = fits && path < out_len;
  /* Each part of the query: "key=[redacted]", or "[redacted]" for a part
   * without '=' (which may be a token all the same). */
  for (size_t at = path; fits && at < end;) {
    size_t part = at + 1, part_end = part;
    while (part_end < end && target[part_end] != '&') part_end++;
    fits = append_fitting(out, out_len, &n, target + at, 1); /* '?' or '&' */
    const char *eq = memchr(target + part, '=', part_end - part);
    if (fits && eq) fits = append_fitting(out, out_len, &n, target + part, (size_t)(eq - (target + part)) + 1);
    if (fits && part_end > part) fits = append_fitting(out, out_len, &n, redacted, sizeof redacted - 1);
    at = part_end;
  }
  out[n] = '\0';
}

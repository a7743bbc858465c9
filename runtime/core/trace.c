/*
 * trace.c - W3C Trace Context, read and written (trace.h).
 */
#include "core/trace.h"

#include <string.h>

#include "os/crypto.h"

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1; /* upper case is invalid in a traceparent */
}

/* n bytes from 2n lower-case hex digits; false on anything else. */
static bool unhex(const char *s, size_t n, uint8_t *out) {
  for (size_t i = 0; i < n; i++) {
    int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

static bool all_zero(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}

bool trace_parse_traceparent(const char *s, size_t len, trace_context *out) {
  uint8_t version, flags;
  uint8_t trace_id[TRACE_ID_BYTES], span_id[TRACE_SPAN_ID_BYTES];
  if (!s || len < TRACEPARENT_LEN) return false;
  if (!unhex(s, 1, &version) || version == 0xff) return false;
  /* Version 00 is exactly this long; a later one keeps 00's fields first
   * and may add more after a dash. */
  if (version == 0 ? len != TRACEPARENT_LEN : len > TRACEPARENT_LEN && s[TRACEPARENT_LEN] != '-') return false;
  if (s[2] != '-' || s[3 + TRACE_ID_HEX] != '-' || s[4 + TRACE_ID_HEX + TRACE_SPAN_ID_HEX] != '-') return false;
  if (!unhex(s + 3, TRACE_ID_BYTES, trace_id) || !unhex(s + 4 + TRACE_ID_HEX, TRACE_SPAN_ID_BYTES, span_id) ||
      !unhex(s + 5 + TRACE_ID_HEX + TRACE_SPAN_ID_HEX, 1, &flags))
    return false;
  if (all_zero(trace_id, sizeof trace_id) || all_zero(span_id, sizeof span_id)) return false;
  memcpy(out->trace_id, trace_id, sizeof trace_id);
  memcpy(out->span_id, span_id, sizeof span_id);
  out->flags = flags;
  out->tracestate[0] = '\0';
  return true;
}

/* ---- tracestate ------------------------------------------------------- */

static bool lcalpha(char c) { return c >= 'a' && c <= 'z'; }
static bool digit(char c) { return c >= '0' && c <= '9'; }
static bool key_char(char c) { return lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '*' || c == '/'; }
static bool ows(char c) { return c == ' ' || c == '\t'; }

/* simple-key, or tenant-id "@" system-id. */
static bool key_valid(const char *k, size_t n) {
  const char *at = memchr(k, '@', n);
  if (!at) {
    if (n < 1 || n > 256 || !lcalpha(k[0])) return false;
    for (size_t i = 1; i < n; i++)
      if (!key_char(k[i])) return false;
    return true;
  }
  size_t tenant = (size_t)(at - k), system = n - tenant - 1;
  if (tenant < 1 || tenant > 241 || system < 1 || system > 14) return false;
  if (!lcalpha(k[0]) && !digit(k[0])) return false;
  for (size_t i = 1; i < tenant; i++)
    if (!key_char(k[i])) return false;
  if (!lcalpha(at[1])) return false;
  for (size_t i = 2; i <= system; i++)
    if (!key_char(at[i])) return false;
  return true;
}

/* Printable ASCII but ',' and '=', at most 256, not ending in a space. */
static bool value_valid(const char *v, size_t n) {
  if (n < 1 || n > 256 || v[n - 1] == ' ') return false;
  for (size_t i = 0; i < n; i++)
    if (v[i] < 0x20 || v[i] > 0x7e || v[i] == ',' || v[i] == '=') return false;
  return true;
}

bool trace_tracestate_valid(const char *s, size_t len) {
  if (!s || len > TRACESTATE_MAX_BYTES || memchr(s, '\0', len)) return false;
  size_t members = 0;
  const char *p = s, *end = s + len;
  while (p <= end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma ? comma : end;
    const char *a = p, *b = stop;
    while (a < b && ows(*a)) a++;
    while (b > a && ows(b[-1])) b--;
    if (a < b) { /* an empty member is allowed, and does not count */
      const char *eq = memchr(a, '=', (size_t)(b - a));
      if (!eq || !key_valid(a, (size_t)(eq - a)) || !value_valid(eq + 1, (size_t)(b - eq - 1))) return false;
      if (++members > TRACESTATE_MAX_MEMBERS) return false;
    }
    if (!comma) break;
    p = comma + 1;
  }
  return true;
}

bool trace_set_tracestate(trace_context *ctx, const char *s, size_t len) {
  if (!trace_tracestate_valid(s, len)) {
    ctx->tracestate[0] = '\0';
    return false;
  }
  memcpy(ctx->tracestate, s, len);
  ctx->tracestate[len] = '\0';
  return true;
}

/* ---- Writing, and new ids --------------------------------------------- */

void trace_hex(const uint8_t *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

void trace_format_traceparent(const trace_context *ctx, char out[TRACEPARENT_LEN + 1]) {
  memcpy(out, "00-", 3);
  trace_hex(ctx->trace_id, TRACE_ID_BYTES, out + 3);
  out[3 + TRACE_ID_HEX] = '-';
  trace_hex(ctx->span_id, TRACE_SPAN_ID_BYTES, out + 4 + TRACE_ID_HEX);
  out[4 + TRACE_ID_HEX + TRACE_SPAN_ID_HEX] = '-';
  trace_hex(&ctx->flags, 1, out + 5 + TRACE_ID_HEX + TRACE_SPAN_ID_HEX);
}

static bool random_nonzero(uint8_t *out, size_t n) {
  for (int tries = 0; tries < 4; tries++) {
    if (!os_random_bytes(out, n)) return false;
    if (!all_zero(out, n)) return true;
  }
  return false;
}

bool trace_new_trace_id(uint8_t out[TRACE_ID_BYTES]) { return random_nonzero(out, TRACE_ID_BYTES); }
bool trace_new_span_id(uint8_t out[TRACE_SPAN_ID_BYTES]) { return random_nonzero(out, TRACE_SPAN_ID_BYTES); }

static bool secret_query_key(const char *k, size_t n) {
  static const char *const keys[] = { "AWSAccessKeyId", "Signature", "sig", "X-Goog-Signature" };
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    if (strlen(keys[i]) == n && memcmp(keys[i], k, n) == 0) return true;
  return false;
}

void trace_redact_url(const char *url, buf *out) {
  const char *rest = url;
  /* The authority follows "scheme://" (the scheme holds no / ? #). */
  const char *sep = strstr(url, "://");
  if (sep && strcspn(url, ":/?#") == (size_t)(sep - url)) {
    const char *authority = sep + 3;
    size_t authority_len = strcspn(authority, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < authority_len; i++)
      if (authority[i] == '@') at = authority + i;
    if (at) {
      buf_append(out, url, (size_t)(authority - url));
      buf_puts(out, "REDACTED:REDACTED");
      rest = at;
    }
  }
  const char *query = strchr(rest, '?');
  if (!query) {
    buf_append_str(out, rest);
    return;
  }
  const char *end = query + strcspn(query, "#");
  buf_append(out, rest, (size_t)(query + 1 - rest));
  for (const char *k = query + 1; k < end;) {
    const char *amp = memchr(k, '&', (size_t)(end - k));
    if (!amp) amp = end;
    const char *eq = memchr(k, '=', (size_t)(amp - k));
    if (eq && secret_query_key(k, (size_t)(eq - k))) {
      buf_append(out, k, (size_t)(eq + 1 - k));
      buf_puts(out, "REDACTED");
    } else {
      buf_append(out, k, (size_t)(amp - k));
    }
    if (amp < end) buf_putc(out, '&');
    k = amp + 1;
  }
  buf_append_str(out, end);
}

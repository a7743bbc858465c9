/*
 * payload.h - the payload sweep's payloads, for bench/loadclient.c (which
 * checks every answer against them) and bench/floor/echo.c (which serves
 * them). The same rules as bench/servers/payload/payload.lua and
 * bench/peer/payload-data.mjs:
 *
 *   text(n)    n bytes repeating a 128-byte block of two lines, with two
 *              double quotes and one é (UTF-8) in it;
 *   blob(n)    byte i = bits 24..31 of i * 2654435761 (all 256 values);
 *   fields(n)  n/16 (at least 1) members k000001.. of an object, cycling
 *              integer i, string "v<i>", boolean i%8==2, float i+0.5.
 *
 * Everything returned is malloc'd; the caller frees it.
 */
#ifndef BENCH_PAYLOAD_H
#define BENCH_PAYLOAD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void payload_line(char *out, const char *s, char fill) {
  size_t n = strlen(s);
  memcpy(out, s, n);
  memset(out + n, fill, 63 - n);
  out[63] = '\n';
}

static inline char *payload_text(size_t n) {
  char block[128];
  payload_line(block, "The quick brown fox said \"hello\" to the lazy dog at the caf\xc3\xa9", '.');
  payload_line(block + 64, "    return value + 1 -- plain code, nothing to escape here", ' ');
  char *t = malloc(n + 1);
  if (!t) return NULL;
  for (size_t o = 0; o < n; o += 128) memcpy(t + o, block, n - o < 128 ? n - o : 128);
  t[n] = 0;
  return t;
}

static inline unsigned char *payload_blob(size_t n) {
  unsigned char *b = malloc(n + 1);
  if (!b) return NULL;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(((unsigned long long)i * 2654435761ull) >> 24);
  return b;
}

static inline char *payload_base64(const unsigned char *s, size_t n, size_t *out_len) {
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
  if (!o) return NULL;
  size_t i = 0;
  for (; i + 2 < n; i += 3) {
    *p++ = a[s[i] >> 2];
    *p++ = a[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
    *p++ = a[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
    *p++ = a[s[i + 2] & 63];
  }
  if (i < n) {
    unsigned x = s[i], y = i + 1 < n ? s[i + 1] : 0;
    *p++ = a[x >> 2];
    *p++ = a[((x & 3) << 4) | (y >> 4)];
    *p++ = i + 1 < n ? a[(y & 15) << 2] : '=';
    *p++ = '=';
  }
  *p = 0;
  *out_len = (size_t)(p - o);
  return o;
}

/* The inside of a JSON string literal for s (no quotes). */
static inline char *payload_escape(const char *s, size_t n, size_t *out_len) {
  char *o = malloc(6 * n + 1), *p = o;
  if (!o) return NULL;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') *p++ = '\\', *p++ = (char)c;
    else if (c == '\n') *p++ = '\\', *p++ = 'n';
    else if (c == '\t') *p++ = '\\', *p++ = 't';
    else if (c < 0x20) p += sprintf(p, "\\u%04x", c);
    else *p++ = (char)c;
  }
  *p = 0;
  *out_len = (size_t)(p - o);
  return o;
}

static inline size_t payload_fields(size_t n) { return n / 16 ? n / 16 : 1; }

/* The fields object as compact JSON. */
static inline char *payload_object_json(size_t n, size_t *out_len) {
  size_t m = payload_fields(n);
  char *o = malloc(m * 40 + 3), *p = o;
  if (!o) return NULL;
  *p++ = '{';
  for (size_t i = 1; i <= m; i++) {
    if (i > 1) *p++ = ',';
    switch (i % 4) {
      case 0: p += sprintf(p, "\"k%06zu\":%zu", i, i); break;
      case 1: p += sprintf(p, "\"k%06zu\":\"v%zu\"", i, i); break;
      case 2: p += sprintf(p, "\"k%06zu\":%s", i, i % 8 == 2 ? "true" : "false"); break;
      default: p += sprintf(p, "\"k%06zu\":%zu.5", i, i); break;
    }
  }
  *p++ = '}';
  *p = 0;
  *out_len = (size_t)(p - o);
  return o;
}

#endif

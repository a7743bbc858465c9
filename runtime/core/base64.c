/* base64.c - see base64.h. */
#include "core/base64.h"

#include <stdint.h>
#include <string.h>

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The two characters of every 12-bit value, filled on first use (the
 * process has one thread that encodes). */
static char pairs[4096][2];
static bool pairs_ready;

static void fill_pairs(void) {
  for (int i = 0; i < 4096; i++) {
    pairs[i][0] = ALPHABET[i >> 6];
    pairs[i][1] = ALPHABET[i & 63];
  }
  pairs_ready = true;
}

void base64_encode(const unsigned char *src, size_t n, char *dst) {
  if (!pairs_ready) fill_pairs();
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
    memcpy(dst, pairs[v >> 12], 2);
    memcpy(dst + 2, pairs[v & 0xFFF], 2);
    dst += 4;
  }
  if (i < n) {
    uint32_t a = src[i], b = i + 1 < n ? src[i + 1] : 0;
    dst[0] = ALPHABET[a >> 2];
    dst[1] = ALPHABET[((a & 3) << 4) | (b >> 4)];
    dst[2] = i + 1 < n ? ALPHABET[(b & 15) << 2] : '=';
    dst[3] = '=';
  }
}

bool base64_decode(const char *s, size_t n, unsigned char *out, size_t *out_len, size_t *bad) {
  static signed char value[256];
  static bool ready;
  if (!ready) {
    memset(value, -1, sizeof value);
    for (int k = 0; k < 64; k++) value[(unsigned char)ALPHABET[k]] = (signed char)k;
    ready = true;
  }
  unsigned char *o = out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n && s[i] != '='; i++) {
    int v = value[(unsigned char)s[i]];
    if (v < 0) {
      *bad = i;
      return false;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *o++ = (unsigned char)(acc >> bits);
    }
  }
  *out_len = (size_t)(o - out);
  return true;
}

static const char URL_ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t base64url_encode(const unsigned char *src, size_t n, char *dst) {
  size_t len = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)src[i] << 16;
    if (i + 1 < n) v |= (uint32_t)src[i + 1] << 8;
    if (i + 2 < n) v |= src[i + 2];
    size_t chars = i + 2 < n ? 4 : i + 1 < n ? 3 : 2;
    for (size_t k = 0; k < chars; k++) dst[len++] = URL_ALPHABET[(v >> (18 - 6 * k)) & 63];
  }
  return len;
}

bool base64url_decode(const char *s, size_t n, unsigned char *out, size_t *out_len) {
  static signed char value[256];
  static bool ready;
  if (!ready) {
    memset(value, -1, sizeof value);
    for (int k = 0; k < 64; k++) value[(unsigned char)URL_ALPHABET[k]] = (signed char)k;
    ready = true;
  }
  if (n % 4 == 1) return false;
  unsigned char *o = out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = value[(unsigned char)s[i]];
    if (v < 0) return false;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *o++ = (unsigned char)(acc >> bits);
    }
  }
  if (acc & ((1u << bits) - 1)) return false; /* bits past the last byte: not the canonical spelling */
  *out_len = (size_t)(o - out);
  return true;
}

/* buf.c - see buf.h. */
#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void buf_reserve(buf *b, size_t extra) {
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    /* Every input is bounded by a limit, so this is the machine, not us. */
    fputs("luamcp: out of memory\n", stderr);
    abort();
  }
  b->data = p;
  b->cap = cap;
}

void buf_free(buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

char *buf_detach(buf *b, size_t *len) {
  if (!b->data) buf_reserve(b, 0);
  char *p = b->data;
  if (len) *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}

void buf_printf(buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    buf_append(b, small, (size_t)n);
    return;
  }
  buf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void buf_append_uint(buf *b, unsigned long long v) {
  char digits[20], *p = digits + sizeof digits;
  do {
    *--p = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  buf_append(b, p, (size_t)(digits + sizeof digits - p));
}

void buf_append_int(buf *b, long long v) {
  if (v < 0) buf_putc(b, '-');
  /* Through unsigned: -LLONG_MIN does not fit a long long. */
  buf_append_uint(b, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v);
}

void buf_consume(buf *b, size_t n) {
  if (n >= b->len) {
    buf_clear(b);
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
  b->data[b->len] = '\0';
}

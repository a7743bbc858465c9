/*
 * buf.h - a growable byte buffer.
 *
 * Ownership: a buf is embedded in its owner's struct; buf_free releases the
 * bytes. Allocation failure aborts the process (see buf.c): the runtime
 * caps every input, so running out of memory here means the machine is out.
 */
#ifndef LUAMCP_BUF_H
#define LUAMCP_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct buf {
  char *data;   /* len bytes, always followed by a NUL (when cap > 0) */
  size_t len;
  size_t cap;
} buf;

#define BUF_INIT {NULL, 0, 0}

void buf_reserve(buf *b, size_t extra);
void buf_free(buf *b);
/* Hand the bytes to the caller (who must free() them) and empty the buffer. */
char *buf_detach(buf *b, size_t *len);
void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void buf_clear(buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

static inline void buf_append(buf *b, const void *p, size_t n) {
  if (b->cap - b->len <= n) buf_reserve(b, n);
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static inline void buf_putc(buf *b, char c) {
  if (b->cap - b->len <= 1) buf_reserve(b, 1);
  b->data[b->len++] = c;
  b->data[b->len] = '\0';
}

/* A string literal only ("" literal does not compile otherwise): sizeof of
 * a pointer or an array would copy the wrong length. buf_append_str takes
 * any string. */
#define buf_puts(b, literal) buf_append((b), "" literal, sizeof(literal) - 1)

static inline void buf_append_str(buf *b, const char *s) { buf_append(b, s, strlen(s)); }

/* v in decimal, as printf's %llu and %lld write it, without printf's cost
 * (status lines and lengths on every response). */
void buf_append_uint(buf *b, unsigned long long v);
void buf_append_int(buf *b, long long v);

/* Drop the first n bytes. */
void buf_consume(buf *b, size_t n);

#endif

/* chain.c - see chain.h. */
#include "core/chain.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"

void chain_borrow(chain *c, const char *data, size_t len) {
  if (c->count == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 4;
    chain_string *s = realloc(c->strings, cap * sizeof *s);
    if (!s) {
      fputs("luamcp: out of memory\n", stderr);
      abort();
    }
    c->strings = s;
    c->cap = cap;
  }
  c->strings[c->count++] = (chain_string){c->own.len, data, len};
}

void chain_append(chain *dst, const chain *src) {
  size_t base = dst->own.len;
  buf_append(&dst->own, src->own.data ? src->own.data : "", src->own.len);
  for (size_t i = 0; i < src->count; i++) {
    chain_borrow(dst, src->strings[i].data, src->strings[i].len);
    dst->strings[dst->count - 1].at = base + src->strings[i].at;
  }
  if (src->lease) dst->lease = src->lease;
}

void chain_flatten(const chain *c, buf *out) {
  size_t from = 0;
  for (size_t i = 0; i < c->count; i++) {
    const chain_string *s = &c->strings[i];
    buf_append(out, c->own.data + from, s->at - from);
    /* json_write_string adds the quotes, which are own bytes here. */
    size_t pos = 0;
    while (pos < s->len) {
      buf_reserve(out, s->len - pos + 2 * JSON_ESCAPE_ROOM);
      out->len += json_escape_chunk(s->data, s->len, &pos, out->data + out->len, out->cap - out->len - 1, NULL);
    }
    out->data[out->len] = '\0';
    from = s->at;
  }
  buf_append(out, c->own.data ? c->own.data + from : "", c->own.len - from);
}

void chain_clear(chain *c) {
  buf_clear(&c->own);
  c->count = 0;
  c->lease = NULL;
}

void chain_free(chain *c) {
  buf_free(&c->own);
  free(c->strings);
  c->strings = NULL;
  c->count = c->cap = 0;
  c->lease = NULL;
}

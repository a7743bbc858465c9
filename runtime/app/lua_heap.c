/*
 * lua_heap.c - the blocks of one Lua state, with a cache of small freed
 * ones. See lua_heap.h.
 */
#include "app/lua_heap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/luamcp_limits.h"

#if defined(__SANITIZE_ADDRESS__)
#define LUA_HEAP_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LUA_HEAP_CACHE 0
#endif
#endif
#ifndef LUA_HEAP_CACHE
#define LUA_HEAP_CACHE 1
#endif

struct lua_heap_block {
  lua_heap_block *next;
};

/* Size classes 16 bytes apart, each the largest size of its class: 8, 24,
 * 40, ... On 64-bit glibc a malloc'd chunk holds 16k+8 bytes, so making
 * every block at its class's size costs no memory there. */
static size_t class_of(size_t n) { return (n + 7) / 16; }
static size_t class_size(size_t c) { return c * 16 + 8; }

static void *take(lua_heap *h, size_t c) {
  lua_heap_block *b = h->free[c];
  if (!b) return malloc(class_size(c));
  h->free[c] = b->next;
  h->cached_bytes -= class_size(c);
  return b;
}

static void give(lua_heap *h, void *p, size_t c) {
  if (!LUA_HEAP_CACHE || h->cached_bytes + class_size(c) > LUA_HEAP_CACHE_BYTES) {
    free(p);
    return;
  }
  lua_heap_block *b = p;
  b->next = h->free[c];
  h->free[c] = b;
  h->cached_bytes += class_size(c);
}

void lua_heap_free(lua_heap *h, void *ptr, size_t osize) {
  if (!ptr) return;
  if (osize > LUA_HEAP_SMALL_MAX) {
    free(ptr);
    return;
  }
  give(h, ptr, class_of(osize));
}

void *lua_heap_resize(lua_heap *h, void *ptr, size_t osize, size_t nsize) {
  bool small_new = nsize <= LUA_HEAP_SMALL_MAX;
  if (!ptr) return small_new ? take(h, class_of(nsize)) : malloc(nsize);
  bool small_old = osize <= LUA_HEAP_SMALL_MAX;
  if (!small_old && !small_new) return realloc(ptr, nsize);
  if (small_old && small_new && class_of(osize) == class_of(nsize)) return ptr;
  void *p = small_new ? take(h, class_of(nsize)) : malloc(nsize);
  /* A shrink must not fail: the old block, bigger than asked, will do (a
   * block only has to hold its class's size). */
  if (!p) return nsize < osize ? ptr : NULL;
  memcpy(p, ptr, osize < nsize ? osize : nsize);
  lua_heap_free(h, ptr, osize);
  return p;
}

void lua_heap_release(lua_heap *h) {
  for (size_t c = 0; c < LUA_HEAP_CLASSES; c++) {
    while (h->free[c]) {
      lua_heap_block *b = h->free[c];
      h->free[c] = b->next;
      free(b);
    }
  }
  h->cached_bytes = 0;
}

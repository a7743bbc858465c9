/*
 * lua_heap.h - the blocks of one Lua state: small blocks it frees are kept
 * for its next allocations of about the same size, because a call makes and
 * drops hundreds of small strings, tables and closures, and malloc's own
 * paths for them (bins, consolidation, realloc's checks) cost several times
 * a free list's push and pop.
 *
 * Lua always tells the allocator the size of the block it frees or resizes
 * (osize), so the cache needs no header: a block Lua sees as n bytes was
 * made in n's size class, and goes back to that class. Blocks beyond
 * LUA_HEAP_SMALL_MAX, and freed ones beyond LUA_HEAP_CACHE_BYTES, go
 * straight to malloc and free. Under AddressSanitizer there is no cache, so
 * a use after free is still seen.
 *
 * Owner: the vm the Lua state belongs to. One thread at a time uses it, as
 * it does the Lua state.
 */
#ifndef LUAMCP_LUA_HEAP_H
#define LUAMCP_LUA_HEAP_H

#include <stddef.h>

/* Blocks of up to this many bytes are cached. */
#define LUA_HEAP_SMALL_MAX 520
#define LUA_HEAP_CLASSES (LUA_HEAP_SMALL_MAX / 16 + 1)

typedef struct lua_heap_block lua_heap_block;

typedef struct lua_heap {
  lua_heap_block *free[LUA_HEAP_CLASSES]; /* freed blocks of each size class */
  size_t cached_bytes;                    /* what the lists hold */
} lua_heap;

/* realloc for the Lua state: ptr (NULL: a new block) is osize bytes as Lua
 * sees it, and becomes nsize bytes (nsize > 0). NULL when memory is out;
 * a shrink never fails. */
void *lua_heap_resize(lua_heap *h, void *ptr, size_t osize, size_t nsize);

/* free for the Lua state: ptr (may be NULL) is osize bytes as Lua sees it. */
void lua_heap_free(lua_heap *h, void *ptr, size_t osize);

/* Give every cached block back to the system (after lua_close, whose last
 * frees come here too). */
void lua_heap_release(lua_heap *h);

#endif

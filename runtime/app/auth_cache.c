/*
 * auth_cache.c - the token verifier's memory of its answers (auth_cache.h).
 */
#include "app/auth_cache.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/buf.h"
#include "core/luamcp_limits.h"

/* A remembered answer. Owner: its cache (by hex key, and in the age list);
 * dropped oldest first, or when found out of date. */
typedef struct auth_cache_entry {
  char hex[2 * OS_SHA256_BYTES + 1];
  struct auth_cache_entry *older, *newer;
  uint64_t until_ms;
  auth_identity *identity; /* one reference; NULL: a refusal */
  char description[160];
} auth_cache_entry;

void auth_cache_key(const char *token, size_t len, const char *resource, uint8_t key[OS_SHA256_BYTES]) {
  buf b = BUF_INIT;
  buf_append(&b, token, len);
  buf_putc(&b, '\0'); /* neither a token nor a URI holds a NUL: the pair is unambiguous */
  buf_append_str(&b, resource ? resource : "");
  os_sha256(b.data, b.len, key);
  buf_free(&b);
}

static void key_hex(const uint8_t key[OS_SHA256_BYTES], char hex[2 * OS_SHA256_BYTES + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < OS_SHA256_BYTES; i++) {
    hex[2 * i] = digits[key[i] >> 4];
    hex[2 * i + 1] = digits[key[i] & 15];
  }
  hex[2 * OS_SHA256_BYTES] = '\0';
}

static void drop(auth_cache *c, auth_cache_entry *e) {
  strmap_remove(&c->by_key, e->hex);
  if (e->older) e->older->newer = e->newer;
  else c->oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else c->newest = e->older;
  c->count--;
  auth_identity_unref(e->identity);
  free(e);
}

void auth_cache_init(auth_cache *c) {
  strmap_init(&c->by_key);
  c->oldest = c->newest = NULL;
  c->count = 0;
}

void auth_cache_free(auth_cache *c) {
  while (c->oldest) drop(c, c->oldest);
  strmap_free(&c->by_key);
}

void auth_cache_put(auth_cache *c, const uint8_t key[OS_SHA256_BYTES], auth_identity *identity, const char *description,
                    uint64_t now_ms, uint64_t ttl_ms) {
  if (ttl_ms == 0) return;
  auth_cache_entry *e = calloc(1, sizeof *e);
  if (!e) return;
  key_hex(key, e->hex);
  auth_cache_entry *old = strmap_get(&c->by_key, e->hex);
  if (old) drop(c, old);
  while (c->count >= AUTH_TOKEN_CACHE_ENTRIES && c->oldest) drop(c, c->oldest);
  e->until_ms = now_ms + ttl_ms;
  e->identity = auth_identity_ref(identity);
  snprintf(e->description, sizeof e->description, "%s", description ? description : "");
  e->older = c->newest;
  if (c->newest) c->newest->newer = e;
  else c->oldest = e;
  c->newest = e;
  c->count++;
  strmap_set(&c->by_key, e->hex, e);
}

bool auth_cache_get(auth_cache *c, const uint8_t key[OS_SHA256_BYTES], uint64_t now_ms, auth_identity **identity,
                    char *description, size_t description_len) {
  char hex[2 * OS_SHA256_BYTES + 1];
  key_hex(key, hex);
  auth_cache_entry *e = strmap_get(&c->by_key, hex);
  if (!e) return false;
  if (now_ms >= e->until_ms) {
    drop(c, e);
    return false;
  }
  *identity = auth_identity_ref(e->identity);
  if (!e->identity) snprintf(description, description_len, "%s", e->description);
  return true;
}

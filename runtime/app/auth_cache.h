/*
 * auth_cache.h - the token verifier's memory of its answers (a token
 * verified, or refused by the authorization server), so the same token on
 * every request costs a hash, not a signature check or an introspection
 * round trip. Kept by the SHA-256 of token and resource, never the token;
 * at most AUTH_TOKEN_CACHE_ENTRIES answers, the oldest going first.
 */
#ifndef LUAMCP_AUTH_CACHE_H
#define LUAMCP_AUTH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/auth.h"
#include "core/strmap.h"
#include "os/crypto.h"

/* Owner: its verifier (embedded), until auth_cache_free. */
typedef struct auth_cache {
  strmap by_key;                       /* hex key -> auth_cache_entry */
  struct auth_cache_entry *oldest, *newest;
  size_t count;
} auth_cache;

/* What a token and the resource it was sent to are remembered by. */
void auth_cache_key(const char *token, size_t len, const char *resource, uint8_t key[OS_SHA256_BYTES]);

void auth_cache_init(auth_cache *c);
void auth_cache_free(auth_cache *c);
/* Remember an answer until now_ms + ttl_ms (any clock, the same for
 * auth_cache_get): identity (a reference is taken), or NULL for a refusal
 * with description. A ttl of 0 remembers nothing. */
void auth_cache_put(auth_cache *c, const uint8_t key[OS_SHA256_BYTES], auth_identity *identity, const char *description,
                    uint64_t now_ms, uint64_t ttl_ms);
/* The answer for key, if remembered and not out of date: true, with
 * *identity a new reference (NULL for a refusal, its description copied
 * into description). */
bool auth_cache_get(auth_cache *c, const uint8_t key[OS_SHA256_BYTES], uint64_t now_ms, auth_identity **identity,
                    char *description, size_t description_len);

#endif

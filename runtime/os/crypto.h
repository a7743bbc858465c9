/*
 * crypto.h - secure randomness and the hashes luamcp needs (requestState's
 * HMAC, task ids, SKILL.md digests), from the platform's own crypto:
 * OpenSSL's libcrypto on POSIX (crypto_posix.c), BCrypt on Windows
 * (crypto_windows.c). Never hand-written. Used by the core: no Lua, no libuv.
 */
#ifndef LUAMCP_OS_CRYPTO_H
#define LUAMCP_OS_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { OS_SHA256_BYTES = 32 };

/* n bytes from the OS's cryptographically secure generator; false (and
 * out untouched or partly written) when it has none to give. */
bool os_random_bytes(void *out, size_t n);

void os_sha256(const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]);

void os_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]);

/* a and b hold the same n bytes, compared in time that does not depend on
 * where they differ (a MAC check). */
bool os_equal_secret(const void *a, const void *b, size_t n);

#endif

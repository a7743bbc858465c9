/*
 * crypto_posix.c - os/crypto.h from OpenSSL's libcrypto (linked
 * statically; the Makefile's CORE_LIBS).
 */
#include "os/crypto.h"

#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

bool os_random_bytes(void *out, size_t n) {
  /* RAND_bytes takes an int: fill larger requests a chunk at a time. */
  unsigned char *p = out;
  while (n > 0) {
    int chunk = n > INT_MAX ? INT_MAX : (int)n;
    if (RAND_bytes(p, chunk) != 1) return false;
    p += chunk;
    n -= (size_t)chunk;
  }
  return true;
}

void os_sha256(const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) { SHA256(data, n, out); }

void os_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) {
  unsigned int out_len = OS_SHA256_BYTES;
  HMAC(EVP_sha256(), key, (int)key_len, data, n, out, &out_len);
}

bool os_equal_secret(const void *a, const void *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

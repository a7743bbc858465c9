/*
 * crypto_windows.c - os/crypto.h from Windows' own crypto API, BCrypt
 * (bcrypt.dll, Vista and later): the system's preferred generator for
 * randomness, and its SHA-256 provider for the hash and the HMAC.
 *
 * The two providers (plain and HMAC) are opened once, on first use, and
 * kept for the life of the process: opening one is the costly step, and
 * a hash object made from an open provider is cheap. InitOnce makes the
 * first use safe from any thread.
 */
#include "os/crypto.h"

#include <windows.h>
#include <bcrypt.h>
#include <stdlib.h>

static BCRYPT_ALG_HANDLE sha256_alg, hmac_alg;
static INIT_ONCE providers_once = INIT_ONCE_STATIC_INIT;

static BOOL CALLBACK open_providers(PINIT_ONCE once, PVOID param, PVOID *context) {
  (void)once, (void)param, (void)context;
  if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&sha256_alg, BCRYPT_SHA256_ALGORITHM, NULL, 0))) sha256_alg = NULL;
  if (!BCRYPT_SUCCESS(
          BCryptOpenAlgorithmProvider(&hmac_alg, BCRYPT_SHA256_ALGORITHM, NULL, BCRYPT_ALG_HANDLE_HMAC_FLAG)))
    hmac_alg = NULL;
  return TRUE;
}

bool os_random_bytes(void *out, size_t n) {
  /* BCryptGenRandom takes a ULONG: fill larger requests a chunk at a time. */
  unsigned char *p = out;
  while (n > 0) {
    ULONG chunk = n > 0x40000000u ? 0x40000000u : (ULONG)n;
    if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, p, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG))) return false;
    p += chunk;
    n -= chunk;
  }
  return true;
}

/* The SHA-256 of data under alg, keyed by key when alg is the HMAC
 * provider. A provider that is missing, or a call that fails, cannot
 * happen on a working Windows (SHA-256 is built in): the process stops
 * rather than hand out a digest of zeros as a MAC. */
static void digest(BCRYPT_ALG_HANDLE alg, const void *key, size_t key_len, const void *data, size_t n,
                   uint8_t out[OS_SHA256_BYTES]) {
  BCRYPT_HASH_HANDLE hash = NULL;
  if (!alg || !BCRYPT_SUCCESS(BCryptCreateHash(alg, &hash, NULL, 0, (PUCHAR)key, (ULONG)key_len, 0))) abort();
  const unsigned char *p = data;
  while (n > 0) {
    ULONG chunk = n > 0x40000000u ? 0x40000000u : (ULONG)n;
    if (!BCRYPT_SUCCESS(BCryptHashData(hash, (PUCHAR)p, chunk, 0))) abort();
    p += chunk;
    n -= chunk;
  }
  if (!BCRYPT_SUCCESS(BCryptFinishHash(hash, out, OS_SHA256_BYTES, 0))) abort();
  BCryptDestroyHash(hash);
}

void os_sha256(const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  digest(sha256_alg, NULL, 0, data, n, out);
}

void os_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  digest(hmac_alg, key, key_len, data, n, out);
}

/* Not crypto, only a comparison whose time does not depend on where the
 * bytes differ: every byte is looked at, the differences OR-ed together.
 * volatile keeps the compiler from stopping at the first difference. */
bool os_equal_secret(const void *a, const void *b, size_t n) {
  const volatile unsigned char *x = a, *y = b;
  unsigned char diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(x[i] ^ y[i]);
  return diff == 0;
}

/*
 * crypto_windows.c - os/crypto.h from Windows' own crypto API, BCrypt
 * (bcrypt.dll, Vista and later): the system's preferred generator for
 * randomness, and its SHA-256 provider for the hash and the HMAC.
 *
 * The providers (SHA-256 plain and HMAC, RSA, ECDSA P-256) are opened
 * once, on first use, and kept for the life of the process: opening one
 * is the costly step, and a hash or key made from an open provider is
 * cheap. InitOnce makes the first use safe from any thread.
 *
 * Public keys (JWT access tokens): RSA (PKCS#1 v1.5 and PSS) and ECDSA
 * P-256 through BCryptImportKeyPair and BCryptVerifySignature. CNG has no
 * Ed25519, so EdDSA keys are refused on Windows.
 *
 * Private keys (private_key_jwt): crypt32 turns the PEM into DER, whose
 * few fields (PKCS#8 around SEC1 or PKCS#1) are read here into CNG's
 * private key blobs; BCryptSignHash signs.
 */
#include "os/crypto.h"

#include <windows.h>
#include <bcrypt.h>
#include <wincrypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static BCRYPT_ALG_HANDLE sha256_alg, sha1_alg, hmac_alg, rsa_alg, p256_alg;
static INIT_ONCE providers_once = INIT_ONCE_STATIC_INIT;

static BOOL CALLBACK open_providers(PINIT_ONCE once, PVOID param, PVOID *context) {
  (void)once, (void)param, (void)context;
  if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&sha256_alg, BCRYPT_SHA256_ALGORITHM, NULL, 0))) sha256_alg = NULL;
  if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&sha1_alg, BCRYPT_SHA1_ALGORITHM, NULL, 0))) sha1_alg = NULL;
  if (!BCRYPT_SUCCESS(
          BCryptOpenAlgorithmProvider(&hmac_alg, BCRYPT_SHA256_ALGORITHM, NULL, BCRYPT_ALG_HANDLE_HMAC_FLAG)))
    hmac_alg = NULL;
  if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&rsa_alg, BCRYPT_RSA_ALGORITHM, NULL, 0))) rsa_alg = NULL;
  if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&p256_alg, BCRYPT_ECDSA_P256_ALGORITHM, NULL, 0))) p256_alg = NULL;
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
                   uint8_t *out, ULONG out_len) {
  BCRYPT_HASH_HANDLE hash = NULL;
  if (!alg || !BCRYPT_SUCCESS(BCryptCreateHash(alg, &hash, NULL, 0, (PUCHAR)key, (ULONG)key_len, 0))) abort();
  const unsigned char *p = data;
  while (n > 0) {
    ULONG chunk = n > 0x40000000u ? 0x40000000u : (ULONG)n;
    if (!BCRYPT_SUCCESS(BCryptHashData(hash, (PUCHAR)p, chunk, 0))) abort();
    p += chunk;
    n -= chunk;
  }
  if (!BCRYPT_SUCCESS(BCryptFinishHash(hash, out, out_len, 0))) abort();
  BCryptDestroyHash(hash);
}

void os_sha256(const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  digest(sha256_alg, NULL, 0, data, n, out, OS_SHA256_BYTES);
}

void os_sha1(const void *data, size_t n, uint8_t out[OS_SHA1_BYTES]) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  digest(sha1_alg, NULL, 0, data, n, out, OS_SHA1_BYTES);
}

void os_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  digest(hmac_alg, key, key_len, data, n, out, OS_SHA256_BYTES);
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

/* ---- Public-key signatures ---------------------------------------------- */

/* RFC 7518 3.3: a key of 2048 bits or larger MUST be used with RS256/PS256. */
enum { RSA_MIN_BITS = 2048, RSA_MAX_BYTES = 2048, P256_COORD_BYTES = 32 };

/* Owner: whoever imported it (os_pubkey_free). */
struct os_pubkey {
  BCRYPT_KEY_HANDLE key;
  bool rsa; /* else ECDSA P-256 */
};

static void say(char *why, size_t why_len, const char *text) {
  if (why && why_len) snprintf(why, why_len, "%s", text);
}

/* A big-endian number without its leading zero bytes. */
static const uint8_t *strip_zeros(const uint8_t *p, size_t *len) {
  while (*len > 0 && *p == 0) p++, (*len)--;
  return p;
}

static BCRYPT_KEY_HANDLE import_rsa(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len, char *why,
                                    size_t why_len) {
  n = strip_zeros(n, &n_len);
  e = strip_zeros(e, &e_len);
  if (!n_len || !e_len || n_len > RSA_MAX_BYTES || e_len > 16) {
    say(why, why_len, "the RSA key's n or e has an impossible size");
    return NULL;
  }
  unsigned bits = (unsigned)n_len * 8;
  for (uint8_t top = n[0]; !(top & 0x80); top <<= 1) bits--;
  if (bits < RSA_MIN_BITS) {
    say(why, why_len, "the RSA key is shorter than 2048 bits");
    return NULL;
  }
  /* BCRYPT_RSAPUBLIC_BLOB: the header, then e and n, big-endian. */
  size_t size = sizeof(BCRYPT_RSAKEY_BLOB) + e_len + n_len;
  BCRYPT_RSAKEY_BLOB *blob = calloc(1, size);
  if (!blob) {
    say(why, why_len, "out of memory");
    return NULL;
  }
  blob->Magic = BCRYPT_RSAPUBLIC_MAGIC;
  blob->BitLength = bits;
  blob->cbPublicExp = (ULONG)e_len;
  blob->cbModulus = (ULONG)n_len;
  memcpy((uint8_t *)(blob + 1), e, e_len);
  memcpy((uint8_t *)(blob + 1) + e_len, n, n_len);
  BCRYPT_KEY_HANDLE key = NULL;
  if (!rsa_alg || !BCRYPT_SUCCESS(BCryptImportKeyPair(rsa_alg, NULL, BCRYPT_RSAPUBLIC_BLOB, &key, (PUCHAR)blob,
                                                      (ULONG)size, 0))) {
    key = NULL;
    say(why, why_len, "the RSA key's n and e do not make a key");
  }
  free(blob);
  return key;
}

static BCRYPT_KEY_HANDLE import_p256(const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len, char *why,
                                     size_t why_len) {
  if (x_len != P256_COORD_BYTES || y_len != P256_COORD_BYTES) {
    say(why, why_len, "a P-256 key's x and y are 32 bytes each");
    return NULL;
  }
  /* BCRYPT_ECCPUBLIC_BLOB: the header, then x and y. CNG checks the point
   * is on the curve. */
  struct {
    BCRYPT_ECCKEY_BLOB header;
    uint8_t xy[2 * P256_COORD_BYTES];
  } blob;
  blob.header.dwMagic = BCRYPT_ECDSA_PUBLIC_P256_MAGIC;
  blob.header.cbKey = P256_COORD_BYTES;
  memcpy(blob.xy, x, P256_COORD_BYTES);
  memcpy(blob.xy + P256_COORD_BYTES, y, P256_COORD_BYTES);
  BCRYPT_KEY_HANDLE key = NULL;
  if (!p256_alg || !BCRYPT_SUCCESS(BCryptImportKeyPair(p256_alg, NULL, BCRYPT_ECCPUBLIC_BLOB, &key, (PUCHAR)&blob,
                                                       sizeof blob, 0))) {
    key = NULL;
    say(why, why_len, "the EC key's x and y are not a point of P-256");
  }
  return key;
}

os_pubkey *os_pubkey_import(const char *kty, const char *crv, const uint8_t *a, size_t a_len, const uint8_t *b,
                            size_t b_len, char *why, size_t why_len) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  BCRYPT_KEY_HANDLE key;
  bool rsa = false;
  if (kty && strcmp(kty, "RSA") == 0) {
    rsa = true;
    key = import_rsa(a, a_len, b, b_len, why, why_len);
  } else if (kty && strcmp(kty, "EC") == 0 && crv && strcmp(crv, "P-256") == 0) {
    key = import_p256(a, a_len, b, b_len, why, why_len);
  } else if (kty && strcmp(kty, "OKP") == 0 && crv && strcmp(crv, "Ed25519") == 0) {
    say(why, why_len, "EdDSA (Ed25519) keys are not available in the Windows build");
    return NULL;
  } else {
    say(why, why_len, "a key type or curve luamcp does not know");
    return NULL;
  }
  if (!key) return NULL;
  os_pubkey *k = malloc(sizeof *k);
  if (!k) {
    BCryptDestroyKey(key);
    say(why, why_len, "out of memory");
    return NULL;
  }
  k->key = key;
  k->rsa = rsa;
  return k;
}

void os_pubkey_free(os_pubkey *key) {
  if (!key) return;
  BCryptDestroyKey(key->key);
  free(key);
}

bool os_pubkey_verify(const os_pubkey *key, os_sig_alg alg, const void *data, size_t n, const uint8_t *sig,
                      size_t sig_len) {
  if (!key || sig_len > 0x10000) return false;
  bool rsa_alg_wanted = alg == OS_SIG_RS256 || alg == OS_SIG_PS256;
  if (alg == OS_SIG_EDDSA || rsa_alg_wanted != key->rsa) return false;
  /* JWS's ES256 signature is r || s, which is CNG's form too. */
  if (alg == OS_SIG_ES256 && sig_len != 2 * P256_COORD_BYTES) return false;
  uint8_t hash[OS_SHA256_BYTES];
  os_sha256(data, n, hash);
  BCRYPT_PKCS1_PADDING_INFO pkcs1 = {BCRYPT_SHA256_ALGORITHM};
  /* RFC 7518 3.5: MGF1 with SHA-256, a salt as long as the hash. */
  BCRYPT_PSS_PADDING_INFO pss = {BCRYPT_SHA256_ALGORITHM, OS_SHA256_BYTES};
  void *padding = alg == OS_SIG_RS256 ? (void *)&pkcs1 : alg == OS_SIG_PS256 ? (void *)&pss : NULL;
  ULONG flags = alg == OS_SIG_RS256 ? BCRYPT_PAD_PKCS1 : alg == OS_SIG_PS256 ? BCRYPT_PAD_PSS : 0;
  return BCRYPT_SUCCESS(
      BCryptVerifySignature(key->key, padding, hash, sizeof hash, (PUCHAR)sig, (ULONG)sig_len, flags));
}

/* ---- Signing with a PEM private key (private_key_jwt) ----------------- */

/* Is the text "-----BEGIN label-----" somewhere in pem? */
static bool pem_has(const char *pem, size_t pem_len, const char *label) {
  char want[64];
  int n = snprintf(want, sizeof want, "-----BEGIN %s-----", label);
  for (size_t i = 0; n > 0 && i + (size_t)n <= pem_len; i++)
    if (memcmp(pem + i, want, (size_t)n) == 0) return true;
  return false;
}

/* A DER element being read: what is left of it. */
typedef struct der_cursor {
  const uint8_t *p;
  size_t n;
} der_cursor;

/* The next element of in (tag and content), or false when in does not
 * hold a whole one. Definite lengths only, as DER has. */
static bool der_next(der_cursor *in, uint8_t *tag, der_cursor *content) {
  if (in->n < 2) return false;
  size_t len = in->p[1], header = 2;
  if (len & 0x80) {
    size_t bytes = len & 0x7f;
    if (bytes == 0 || bytes > 3 || in->n < 2 + bytes) return false;
    len = 0;
    for (size_t i = 0; i < bytes; i++) len = len << 8 | in->p[2 + i];
    header += bytes;
  }
  if (len > in->n - header) return false;
  *tag = in->p[0];
  content->p = in->p + header;
  content->n = len;
  in->p += header + len;
  in->n -= header + len;
  return true;
}

/* The next element, which must have tag want. */
static bool der_expect(der_cursor *in, uint8_t want, der_cursor *content) {
  uint8_t tag;
  return der_next(in, &tag, content) && tag == want;
}

enum { DER_INTEGER = 0x02, DER_BIT_STRING = 0x03, DER_OCTET_STRING = 0x04, DER_OID = 0x06, DER_SEQUENCE = 0x30 };

/* 1.2.840.10045.3.1.7 (P-256) and 1.2.840.10045.2.1 (an EC public key). */
static const uint8_t OID_P256[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const uint8_t OID_EC_KEY[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01};

static bool der_is(const der_cursor *c, const uint8_t *bytes, size_t n) {
  return c->n == n && memcmp(c->p, bytes, n) == 0;
}

/* An ECDSA P-256 signing key from a SEC1 ECPrivateKey, which must carry
 * its public point (OpenSSL and Node write it); curve_known: PKCS#8 named
 * P-256 already. */
static BCRYPT_KEY_HANDLE import_ec_private(der_cursor in, bool curve_known, char *why, size_t why_len) {
  der_cursor key, version, d, field;
  uint8_t tag;
  const uint8_t *point = NULL;
  bool p256 = curve_known;
  if (!der_expect(&in, DER_SEQUENCE, &key) || !der_expect(&key, DER_INTEGER, &version) ||
      !der_expect(&key, DER_OCTET_STRING, &d)) {
    say(why, why_len, "the EC private key cannot be decoded");
    return NULL;
  }
  while (der_next(&key, &tag, &field)) {
    der_cursor inner;
    if (tag == 0xa0 && der_expect(&field, DER_OID, &inner)) p256 = der_is(&inner, OID_P256, sizeof OID_P256);
    else if (tag == 0xa1 && der_expect(&field, DER_BIT_STRING, &inner) && inner.n == 2 + 2 * P256_COORD_BYTES &&
             inner.p[0] == 0 && inner.p[1] == 0x04)
      point = inner.p + 2;
  }
  if (!p256 || d.n != P256_COORD_BYTES) {
    say(why, why_len, "ES256 needs an EC P-256 private key");
    return NULL;
  }
  if (!point) {
    say(why, why_len, "the EC private key does not hold its public point (write it with OpenSSL or Node)");
    return NULL;
  }
  /* BCRYPT_ECCPRIVATE_BLOB: the header, then x, y and d. */
  struct {
    BCRYPT_ECCKEY_BLOB header;
    uint8_t xyd[3 * P256_COORD_BYTES];
  } blob;
  blob.header.dwMagic = BCRYPT_ECDSA_PRIVATE_P256_MAGIC;
  blob.header.cbKey = P256_COORD_BYTES;
  memcpy(blob.xyd, point, 2 * P256_COORD_BYTES);
  memcpy(blob.xyd + 2 * P256_COORD_BYTES, d.p, P256_COORD_BYTES);
  BCRYPT_KEY_HANDLE handle = NULL;
  if (!p256_alg || !BCRYPT_SUCCESS(BCryptImportKeyPair(p256_alg, NULL, BCRYPT_ECCPRIVATE_BLOB, &handle,
                                                       (PUCHAR)&blob, sizeof blob, 0))) {
    handle = NULL;
    say(why, why_len, "ES256 needs an EC P-256 private key");
  }
  SecureZeroMemory(&blob, sizeof blob);
  return handle;
}

/* An RSA signing key from a PKCS#1 RSAPrivateKey: n, e, p and q go into
 * a BCRYPT_RSAPRIVATE_BLOB (CNG works out the rest). */
static BCRYPT_KEY_HANDLE import_rsa_private(der_cursor in, char *why, size_t why_len) {
  der_cursor key, part[6]; /* version, n, e, d, p, q */
  bool ok = der_expect(&in, DER_SEQUENCE, &key);
  for (int i = 0; ok && i < 6; i++) ok = der_expect(&key, DER_INTEGER, &part[i]);
  if (!ok) {
    say(why, why_len, "the RSA private key cannot be decoded");
    return NULL;
  }
  size_t n_len = part[1].n, e_len = part[2].n, p_len = part[4].n, q_len = part[5].n;
  const uint8_t *n = strip_zeros(part[1].p, &n_len), *e = strip_zeros(part[2].p, &e_len),
                *p = strip_zeros(part[4].p, &p_len), *q = strip_zeros(part[5].p, &q_len);
  if (n_len * 8 < RSA_MIN_BITS || n_len > OS_SIG_MAX_BYTES || e_len > 8) {
    say(why, why_len, "RS256 needs an RSA private key of 2048 bits or more");
    return NULL;
  }
  size_t size = sizeof(BCRYPT_RSAKEY_BLOB) + e_len + n_len + p_len + q_len;
  BCRYPT_RSAKEY_BLOB *blob = calloc(1, size);
  if (!blob) {
    say(why, why_len, "out of memory");
    return NULL;
  }
  blob->Magic = BCRYPT_RSAPRIVATE_MAGIC;
  blob->BitLength = (ULONG)(n_len * 8);
  blob->cbPublicExp = (ULONG)e_len;
  blob->cbModulus = (ULONG)n_len;
  blob->cbPrime1 = (ULONG)p_len;
  blob->cbPrime2 = (ULONG)q_len;
  uint8_t *at = (uint8_t *)(blob + 1);
  memcpy(at, e, e_len);
  memcpy(at += e_len, n, n_len);
  memcpy(at += n_len, p, p_len);
  memcpy(at + p_len, q, q_len);
  BCRYPT_KEY_HANDLE handle = NULL;
  if (!rsa_alg || !BCRYPT_SUCCESS(BCryptImportKeyPair(rsa_alg, NULL, BCRYPT_RSAPRIVATE_BLOB, &handle, (PUCHAR)blob,
                                                      (ULONG)size, 0))) {
    handle = NULL;
    say(why, why_len, "the RSA private key cannot be imported");
  }
  SecureZeroMemory(blob, size);
  free(blob);
  return handle;
}

bool os_sign_pem(const char *pem, size_t pem_len, os_sig_alg alg, const void *data, size_t n,
                 uint8_t sig[OS_SIG_MAX_BYTES], size_t *sig_len, char *why, size_t why_len) {
  InitOnceExecuteOnce(&providers_once, open_providers, NULL, NULL);
  if (alg != OS_SIG_ES256 && alg != OS_SIG_RS256) {
    say(why, why_len, "only ES256 and RS256 can sign");
    return false;
  }
  bool sec1 = pem_has(pem, pem_len, "EC PRIVATE KEY"), pkcs1 = pem_has(pem, pem_len, "RSA PRIVATE KEY"),
       pkcs8 = pem_has(pem, pem_len, "PRIVATE KEY");
  DWORD der_len = 0;
  BYTE *der = NULL;
  if (pem_len <= 0x100000 && (sec1 || pkcs1 || pkcs8) &&
      CryptStringToBinaryA(pem, (DWORD)pem_len, CRYPT_STRING_BASE64HEADER, NULL, &der_len, NULL, NULL) &&
      (der = malloc(der_len)) &&
      !CryptStringToBinaryA(pem, (DWORD)pem_len, CRYPT_STRING_BASE64HEADER, der, &der_len, NULL, NULL)) {
    free(der);
    der = NULL;
  }
  if (!der) {
    say(why, why_len, "the file holds no PEM private key that can be read without a passphrase");
    return false;
  }
  der_cursor key = {der, der_len};
  bool ec = sec1, curve_known = false;
  if (!sec1 && !pkcs1) {
    /* PKCS#8: { version, { algorithm OID, parameters }, OCTET STRING key } */
    der_cursor info, version, algorithm, oid, params;
    uint8_t tag;
    if (!der_expect(&key, DER_SEQUENCE, &info) || !der_expect(&info, DER_INTEGER, &version) ||
        !der_expect(&info, DER_SEQUENCE, &algorithm) || !der_expect(&algorithm, DER_OID, &oid) ||
        !der_expect(&info, DER_OCTET_STRING, &key)) {
      SecureZeroMemory(der, der_len);
      free(der);
      say(why, why_len, "the PKCS#8 private key cannot be decoded (an encrypted key is not supported)");
      return false;
    }
    ec = der_is(&oid, OID_EC_KEY, sizeof OID_EC_KEY);
    curve_known = ec && der_next(&algorithm, &tag, &params) && tag == DER_OID && der_is(&params, OID_P256, sizeof OID_P256);
  }
  BCRYPT_KEY_HANDLE handle = NULL;
  if (alg == OS_SIG_ES256 && !ec) say(why, why_len, "ES256 needs an EC P-256 private key");
  else if (alg == OS_SIG_RS256 && ec) say(why, why_len, "RS256 needs an RSA private key of 2048 bits or more");
  else handle = ec ? import_ec_private(key, curve_known, why, why_len) : import_rsa_private(key, why, why_len);
  SecureZeroMemory(der, der_len);
  free(der);
  if (!handle) return false;
  uint8_t hash[OS_SHA256_BYTES];
  os_sha256(data, n, hash);
  BCRYPT_PKCS1_PADDING_INFO pkcs1_padding = {BCRYPT_SHA256_ALGORITHM};
  ULONG out = 0;
  /* CNG's ECDSA signature is r || s already, as JWS wants. */
  bool ok = BCRYPT_SUCCESS(BCryptSignHash(handle, alg == OS_SIG_RS256 ? &pkcs1_padding : NULL, hash, sizeof hash, sig,
                                          OS_SIG_MAX_BYTES, &out, alg == OS_SIG_RS256 ? BCRYPT_PAD_PKCS1 : 0));
  BCryptDestroyKey(handle);
  if (!ok) {
    say(why, why_len, "CNG could not sign with the key");
    return false;
  }
  *sig_len = out;
  return true;
}

/* PKCS#7 SignedData would need CryptSignMessage with an imported key and
 * certificate context; the .mcpb signer is libcrypto's, on Linux. */
bool os_pkcs7_sign_detached(const char *cert_pem, size_t cert_len, const char *key_pem, size_t key_len,
                            const char *chain_pem, size_t chain_len, int64_t signing_time, const void *data, size_t n,
                            uint8_t **der, size_t *der_len, os_pkcs7_input *culprit, char *why, size_t why_len) {
  *culprit = OS_PKCS7_SIGNING;
  say(why, why_len, "signing needs OpenSSL: sign on Linux, or with `mcpb sign`");
  return false;
}

/* DPAPI in the user's scope: only this user on this machine opens it. */
static bool dpapi(bool seal, const void *data, size_t n, uint8_t **out, size_t *out_len) {
  if (n > 0xFFFFFFFFu) return false;
  DATA_BLOB in = {(DWORD)n, (BYTE *)data}, result = {0, NULL};
  BOOL ok = seal ? CryptProtectData(&in, L"luamcp", NULL, NULL, NULL, CRYPTPROTECT_UI_FORBIDDEN, &result)
                 : CryptUnprotectData(&in, NULL, NULL, NULL, NULL, CRYPTPROTECT_UI_FORBIDDEN, &result);
  if (!ok) return false;
  *out = malloc(result.cbData ? result.cbData : 1);
  if (*out) {
    memcpy(*out, result.pbData, result.cbData);
    *out_len = result.cbData;
  }
  SecureZeroMemory(result.pbData, result.cbData);
  LocalFree(result.pbData);
  return *out != NULL;
}

bool os_secret_seal(const void *data, size_t n, uint8_t **out, size_t *out_len) {
  return dpapi(true, data, n, out, out_len);
}

bool os_secret_open(const void *data, size_t n, uint8_t **out, size_t *out_len) {
  return dpapi(false, data, n, out, out_len);
}

/* DPoP keys are made with libcrypto; the Windows build signs with CNG
 * from a PEM and has no PEM writer yet. */
bool os_ec_p256_generate(char **pem, size_t *pem_len, uint8_t x[32], uint8_t y[32], char *why, size_t why_len) {
  (void)pem, (void)pem_len, (void)x, (void)y;
  snprintf(why, why_len, "DPoP keys are not made on Windows yet");
  return false;
}

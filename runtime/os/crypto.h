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

enum { OS_SHA256_BYTES = 32, OS_SHA1_BYTES = 20 };

/* n bytes from the OS's cryptographically secure generator; false (and
 * out untouched or partly written) when it has none to give. */
bool os_random_bytes(void *out, size_t n);

void os_sha256(const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]);
/* SHA-1: only where a protocol names it and nothing rests on its strength
 * (a WebSocket handshake's Sec-WebSocket-Accept, RFC 6455 4.2.2). */
void os_sha1(const void *data, size_t n, uint8_t out[OS_SHA1_BYTES]);

void os_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]);

/* a and b hold the same n bytes, compared in time that does not depend on
 * where they differ (a MAC check). */
bool os_equal_secret(const void *a, const void *b, size_t n);

/* ---- Public-key signatures (JWT access tokens, core/jwt.c) ------------- */

/* A public key to verify signatures with. Owner: whoever imported it. */
typedef struct os_pubkey os_pubkey;

typedef enum os_sig_alg {
  OS_SIG_RS256, /* RSASSA-PKCS1-v1_5 with SHA-256 */
  OS_SIG_PS256, /* RSASSA-PSS with SHA-256, MGF1 SHA-256, salt 32 */
  OS_SIG_ES256, /* ECDSA P-256 with SHA-256; the signature is r || s, 64 bytes (JWS), not DER */
  OS_SIG_EDDSA, /* Ed25519 */
} os_sig_alg;

/* Import a key from its JWK parts, already base64url-decoded: RSA (n, e),
 * EC P-256 (x, y, 32 bytes each) or OKP Ed25519 (x). kty is "RSA", "EC"
 * or "OKP"; crv "P-256" or "Ed25519" (NULL for RSA). NULL with why when
 * the parts do not make a key of that kind, or the platform cannot (an RSA
 * modulus under 2048 bits is refused; Windows' CNG has no Ed25519). */
os_pubkey *os_pubkey_import(const char *kty, const char *crv, const uint8_t *a, size_t a_len, const uint8_t *b,
                            size_t b_len, char *why, size_t why_len);
void os_pubkey_free(os_pubkey *key);
/* Is sig a valid signature by key over data with alg? A key of another
 * type than alg needs is false. */
bool os_pubkey_verify(const os_pubkey *key, os_sig_alg alg, const void *data, size_t n, const uint8_t *sig,
                      size_t sig_len);

/* ---- Signing (private_key_jwt client assertions, luamcp call) ----------- */

/* The largest signature os_sign_pem writes: RS256 with a 8192-bit key. */
enum { OS_SIG_MAX_BYTES = 1024 };

/* Sign data with the private key in pem (PKCS#8 "PRIVATE KEY", or the
 * traditional "EC PRIVATE KEY" / "RSA PRIVATE KEY") by alg: OS_SIG_ES256
 * (a P-256 key; the signature r || s, 64 bytes, as JWS wants) or
 * OS_SIG_RS256 (an RSA key of 2048 bits or more). The signature goes into
 * sig (OS_SIG_MAX_BYTES) and its length into *sig_len. False with why when
 * the PEM holds no such key (an encrypted one included). */
bool os_sign_pem(const char *pem, size_t pem_len, os_sig_alg alg, const void *data, size_t n,
                 uint8_t sig[OS_SIG_MAX_BYTES], size_t *sig_len, char *why, size_t why_len);

/* ---- PKCS#7 signatures (signed .mcpb, cli/release_sign.c) -------------- */

/* The input a PKCS#7 signing failed on, for the caller to name its file. */
typedef enum os_pkcs7_input {
  OS_PKCS7_CERT,    /* cert_pem */
  OS_PKCS7_KEY,     /* key_pem */
  OS_PKCS7_CHAIN,   /* chain_pem */
  OS_PKCS7_SIGNING, /* none of them: the platform or the signing itself */
} os_pkcs7_input;

/* A detached PKCS#7 SignedData over data, as DER: SHA-256, signed with the
 * unencrypted RSA private key in key_pem (RSASSA-PKCS1-v1_5, so the same
 * inputs give the same bytes) for the certificate in cert_pem, with the
 * authenticated attributes contentType (data), signingTime and
 * messageDigest; certificates: cert_pem's, then each of chain_pem's (NULL:
 * none) in their order. signing_time is seconds since 1970, or negative
 * for the certificate's notBefore, so that nothing depends on the clock.
 * *der (free it) and *der_len on success; else false with why and *culprit.
 * Windows: always false, as its build has no libcrypto. */
bool os_pkcs7_sign_detached(const char *cert_pem, size_t cert_len, const char *key_pem, size_t key_len,
                            const char *chain_pem, size_t chain_len, int64_t signing_time, const void *data, size_t n,
                            uint8_t **der, size_t *der_len, os_pkcs7_input *culprit, char *why, size_t why_len);

/* A new P-256 key pair for DPoP (RFC 9449): the private key as PKCS#8 PEM
 * (*pem malloc'd, for os_sign_pem with OS_SIG_ES256) and the public
 * point's x and y (its JWK). False with why when the OS cannot make one. */
bool os_ec_p256_generate(char **pem, size_t *pem_len, uint8_t x[32], uint8_t y[32], char *why, size_t why_len);

/* A secret kept in a file of the user's (luamcp login's tokens), sealed so
 * that only this user on this machine can open it where the OS offers
 * that: on Windows the data protection API (CryptProtectData, the user's
 * scope); elsewhere the file's mode (0600) is the protection and the bytes
 * are kept as they are. *out is malloc'd; false when the OS refuses
 * (a file sealed by another user, or corrupted). */
bool os_secret_seal(const void *data, size_t n, uint8_t **out, size_t *out_len);
bool os_secret_open(const void *data, size_t n, uint8_t **out, size_t *out_len);

#endif

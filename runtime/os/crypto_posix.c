/*
 * crypto_posix.c - os/crypto.h from OpenSSL's libcrypto (linked
 * statically; the Makefile's CORE_LIBS). The public keys are EVP_PKEYs
 * made from their JWK parts with OSSL_PARAM (OpenSSL 3).
 */
#include "os/crypto.h"

#include <limits.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __APPLE__
#include <sys/random.h>
#endif

/* From the kernel (getentropy), not RAND_bytes: the first use of OpenSSL
 * loads its configuration and providers, a cost every start paid for the
 * keys it draws (sessions, requestState) though most never hash anything. */
bool os_random_bytes(void *out, size_t n) {
  unsigned char *p = out;
  while (n > 0) {
    size_t chunk = n > 256 ? 256 : n; /* getentropy's limit per call */
    if (getentropy(p, chunk) != 0) return false;
    p += chunk;
    n -= chunk;
  }
  return true;
}

void os_sha256(const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) { SHA256(data, n, out); }

void os_sha1(const void *data, size_t n, uint8_t out[OS_SHA1_BYTES]) { SHA1(data, n, out); }

void os_hmac_sha256(const void *key, size_t key_len, const void *data, size_t n, uint8_t out[OS_SHA256_BYTES]) {
  unsigned int out_len = OS_SHA256_BYTES;
  HMAC(EVP_sha256(), key, (int)key_len, data, n, out, &out_len);
}

bool os_equal_secret(const void *a, const void *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

/* ---- Public-key signatures ---------------------------------------------- */

/* RFC 7518 3.3: a key of 2048 bits or larger MUST be used with RS256/PS256. */
enum { RSA_MIN_BITS = 2048, P256_COORD_BYTES = 32, ED25519_KEY_BYTES = 32 };

/* Owner: whoever imported it (os_pubkey_free). */
struct os_pubkey {
  EVP_PKEY *pkey;
  int type; /* EVP_PKEY_RSA, EVP_PKEY_EC or EVP_PKEY_ED25519 */
};

static void say(char *why, size_t why_len, const char *text) {
  if (why && why_len) snprintf(why, why_len, "%s", text);
}

/* An EVP_PKEY of keytype from the params, or NULL. */
static EVP_PKEY *from_params(const char *keytype, OSSL_PARAM_BLD *bld) {
  EVP_PKEY *pkey = NULL;
  OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name(NULL, keytype, NULL) : NULL;
  if (ctx && EVP_PKEY_fromdata_init(ctx) == 1) {
    if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = NULL;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  return pkey;
}

static EVP_PKEY *import_rsa(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len, char *why,
                            size_t why_len) {
  if (!n_len || !e_len || n_len > 2048 || e_len > 16) {
    say(why, why_len, "the RSA key's n or e has an impossible size");
    return NULL;
  }
  BIGNUM *bn_n = BN_bin2bn(n, (int)n_len, NULL), *bn_e = BN_bin2bn(e, (int)e_len, NULL);
  EVP_PKEY *pkey = NULL;
  OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
  if (bn_n && bn_e && BN_num_bits(bn_n) < RSA_MIN_BITS) {
    say(why, why_len, "the RSA key is shorter than 2048 bits");
  } else if (bld && bn_n && bn_e && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1 &&
             OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1) {
    pkey = from_params("RSA", bld);
    if (!pkey) say(why, why_len, "the RSA key's n and e do not make a key");
  } else {
    say(why, why_len, "out of memory importing an RSA key");
  }
  OSSL_PARAM_BLD_free(bld);
  BN_free(bn_n);
  BN_free(bn_e);
  return pkey;
}

static EVP_PKEY *import_p256(const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len, char *why,
                             size_t why_len) {
  if (x_len != P256_COORD_BYTES || y_len != P256_COORD_BYTES) {
    say(why, why_len, "a P-256 key's x and y are 32 bytes each");
    return NULL;
  }
  uint8_t point[1 + 2 * P256_COORD_BYTES]; /* SEC 1 uncompressed: 0x04 || x || y */
  point[0] = 0x04;
  memcpy(point + 1, x, P256_COORD_BYTES);
  memcpy(point + 1 + P256_COORD_BYTES, y, P256_COORD_BYTES);
  EVP_PKEY *pkey = NULL;
  OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
  if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
      OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point) == 1) {
    pkey = from_params("EC", bld);
    /* fromdata does not check that the point is on the curve: a point
     * off it is the invalid-curve attack's way in. */
    if (pkey) {
      EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
      if (!check || EVP_PKEY_public_check(check) != 1) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
      }
      EVP_PKEY_CTX_free(check);
    }
    if (!pkey) say(why, why_len, "the EC key's x and y are not a point of P-256");
  } else {
    say(why, why_len, "out of memory importing an EC key");
  }
  OSSL_PARAM_BLD_free(bld);
  return pkey;
}

os_pubkey *os_pubkey_import(const char *kty, const char *crv, const uint8_t *a, size_t a_len, const uint8_t *b,
                            size_t b_len, char *why, size_t why_len) {
  EVP_PKEY *pkey = NULL;
  int type;
  if (kty && strcmp(kty, "RSA") == 0) {
    type = EVP_PKEY_RSA;
    pkey = import_rsa(a, a_len, b, b_len, why, why_len);
  } else if (kty && strcmp(kty, "EC") == 0 && crv && strcmp(crv, "P-256") == 0) {
    type = EVP_PKEY_EC;
    pkey = import_p256(a, a_len, b, b_len, why, why_len);
  } else if (kty && strcmp(kty, "OKP") == 0 && crv && strcmp(crv, "Ed25519") == 0) {
    type = EVP_PKEY_ED25519;
    if (a_len != ED25519_KEY_BYTES) {
      say(why, why_len, "an Ed25519 key's x is 32 bytes");
      return NULL;
    }
    pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, a, a_len);
    if (!pkey) say(why, why_len, "the Ed25519 key's x is not a key");
  } else {
    say(why, why_len, "a key type or curve luamcp does not know");
    return NULL;
  }
  if (!pkey) return NULL;
  os_pubkey *key = malloc(sizeof *key);
  if (!key) {
    EVP_PKEY_free(pkey);
    say(why, why_len, "out of memory");
    return NULL;
  }
  key->pkey = pkey;
  key->type = type;
  return key;
}

void os_pubkey_free(os_pubkey *key) {
  if (!key) return;
  EVP_PKEY_free(key->pkey);
  free(key);
}

/* JWS's ES256 signature is r || s, 32 bytes each (RFC 7518 3.4); libcrypto
 * verifies the DER form of ECDSA-Sig-Value. NULL for another size. */
static unsigned char *es256_to_der(const uint8_t *sig, size_t sig_len, int *der_len) {
  if (sig_len != 2 * P256_COORD_BYTES) return NULL;
  ECDSA_SIG *ecdsa = ECDSA_SIG_new();
  BIGNUM *r = BN_bin2bn(sig, P256_COORD_BYTES, NULL), *s = BN_bin2bn(sig + P256_COORD_BYTES, P256_COORD_BYTES, NULL);
  unsigned char *der = NULL;
  if (ecdsa && r && s && ECDSA_SIG_set0(ecdsa, r, s) == 1) {
    r = s = NULL; /* the signature owns them now */
    *der_len = i2d_ECDSA_SIG(ecdsa, &der);
    if (*der_len <= 0) der = NULL;
  }
  BN_free(r);
  BN_free(s);
  ECDSA_SIG_free(ecdsa);
  return der;
}

bool os_pubkey_verify(const os_pubkey *key, os_sig_alg alg, const void *data, size_t n, const uint8_t *sig,
                      size_t sig_len) {
  if (!key) return false;
  int want = alg == OS_SIG_RS256 || alg == OS_SIG_PS256 ? EVP_PKEY_RSA
             : alg == OS_SIG_ES256                      ? EVP_PKEY_EC
             : alg == OS_SIG_EDDSA                      ? EVP_PKEY_ED25519
                                                        : -1;
  if (want != key->type) return false;
  unsigned char *der = NULL;
  if (alg == OS_SIG_ES256) {
    int der_len = 0;
    if (!(der = es256_to_der(sig, sig_len, &der_len))) return false;
    sig = der;
    sig_len = (size_t)der_len;
  }
  bool ok = false;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  EVP_PKEY_CTX *pctx = NULL;
  /* Ed25519 hashes inside the signature scheme: no digest is named. */
  /* SHA-256 fetched from the provider once and kept: EVP_sha256() makes
   * OpenSSL 3 look it up again on every call, a lock and a search for
   * each token. The core verifies on one thread (the loop's). */
  static EVP_MD *sha256;
  if (!sha256) sha256 = EVP_MD_fetch(NULL, "SHA2-256", NULL);
  const EVP_MD *digest = alg == OS_SIG_EDDSA ? NULL : sha256 ? sha256 : EVP_sha256();
  if (md && EVP_DigestVerifyInit(md, &pctx, digest, NULL, key->pkey) == 1) {
    bool padded = true;
    if (alg == OS_SIG_PS256) /* RFC 7518 3.5: MGF1 with SHA-256, a salt as long as the hash */
      padded = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
               EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) == 1 &&
               EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, OS_SHA256_BYTES) == 1;
    else if (alg == OS_SIG_RS256)
      padded = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) == 1;
    ok = padded && EVP_DigestVerify(md, sig, sig_len, data, n) == 1;
  }
  EVP_MD_CTX_free(md);
  OPENSSL_free(der);
  ERR_clear_error();
  return ok;
}

/* An ECDSA signature in DER (what libcrypto makes) as JWS's r || s, each
 * left-padded to 32 bytes. False when it does not fit. */
static bool der_to_es256(const unsigned char *der, size_t der_len, uint8_t out[2 * P256_COORD_BYTES]) {
  const unsigned char *p = der;
  ECDSA_SIG *ecdsa = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
  if (!ecdsa) return false;
  const BIGNUM *r, *s;
  ECDSA_SIG_get0(ecdsa, &r, &s);
  bool ok = BN_bn2binpad(r, out, P256_COORD_BYTES) == P256_COORD_BYTES &&
            BN_bn2binpad(s, out + P256_COORD_BYTES, P256_COORD_BYTES) == P256_COORD_BYTES;
  ECDSA_SIG_free(ecdsa);
  return ok;
}

bool os_sign_pem(const char *pem, size_t pem_len, os_sig_alg alg, const void *data, size_t n,
                 uint8_t sig[OS_SIG_MAX_BYTES], size_t *sig_len, char *why, size_t why_len) {
  if (alg != OS_SIG_ES256 && alg != OS_SIG_RS256) {
    say(why, why_len, "only ES256 and RS256 can sign");
    return false;
  }
  if (pem_len > INT_MAX) {
    say(why, why_len, "the key file is too large");
    return false;
  }
  BIO *bio = BIO_new_mem_buf(pem, (int)pem_len);
  EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
  BIO_free(bio);
  bool ok = false;
  EVP_MD_CTX *md = NULL;
  unsigned char *der = NULL;
  if (!pkey) {
    say(why, why_len, "the file holds no PEM private key that can be read without a passphrase");
    goto done;
  }
  if (alg == OS_SIG_ES256) {
    char group[32] = "";
    if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC ||
        EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL) != 1 ||
        strcmp(group, "prime256v1") != 0) {
      say(why, why_len, "ES256 needs an EC P-256 private key");
      goto done;
    }
  } else if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA || EVP_PKEY_get_bits(pkey) < RSA_MIN_BITS) {
    say(why, why_len, "RS256 needs an RSA private key of 2048 bits or more");
    goto done;
  }
  size_t len = 0;
  md = EVP_MD_CTX_new();
  EVP_PKEY_CTX *pctx = NULL;
  if (!md || EVP_DigestSignInit(md, &pctx, EVP_sha256(), NULL, pkey) != 1 ||
      (alg == OS_SIG_RS256 && EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1) ||
      EVP_DigestSign(md, NULL, &len, data, n) != 1 || !(der = OPENSSL_malloc(len)) ||
      EVP_DigestSign(md, der, &len, data, n) != 1) {
    say(why, why_len, "libcrypto could not sign with the key");
    goto done;
  }
  if (alg == OS_SIG_ES256) {
    if (!der_to_es256(der, len, sig)) {
      say(why, why_len, "libcrypto made an ECDSA signature that is not P-256's");
      goto done;
    }
    *sig_len = 2 * P256_COORD_BYTES;
  } else {
    if (len > OS_SIG_MAX_BYTES) {
      say(why, why_len, "the RSA key is too large (over 8192 bits)");
      goto done;
    }
    memcpy(sig, der, len);
    *sig_len = len;
  }
  ok = true;
done:
  OPENSSL_free(der);
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(pkey);
  ERR_clear_error();
  return ok;
}

/* ---- PKCS#7 (os_pkcs7_sign_detached) ----------------------------------- */

/* The passphrase callback for a key file: none is given, so an encrypted
 * key fails at once (libcrypto's default would ask on the terminal), and
 * *asked says that was why. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked) {
  (void)buf, (void)size, (void)rwflag;
  *(bool *)asked = true;
  return -1;
}

/* The certificates in pem, in their order, or NULL when it holds none. */
static STACK_OF(X509) *read_certificates(const char *pem, size_t pem_len) {
  BIO *bio = pem_len <= INT_MAX ? BIO_new_mem_buf(pem, (int)pem_len) : NULL;
  STACK_OF(X509) *certs = bio ? sk_X509_new_null() : NULL;
  X509 *cert;
  while (certs && (cert = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
    if (!sk_X509_push(certs, cert)) X509_free(cert);
  BIO_free(bio);
  ERR_clear_error(); /* the end of the file reads as an error */
  if (certs && sk_X509_num(certs) == 0) {
    sk_X509_free(certs);
    certs = NULL;
  }
  return certs;
}

/* The signingTime attribute's value: at seconds since 1970, or the
 * certificate's notBefore when at is negative. UTCTime up to 2049,
 * GeneralizedTime after, as RFC 5652 11.3 wants. */
static ASN1_TIME *signing_time_of(const X509 *cert, int64_t at) {
  if (at >= 0) return (time_t)at == at ? ASN1_TIME_set(NULL, (time_t)at) : NULL;
  ASN1_TIME *t = ASN1_TIME_dup(X509_get0_notBefore(cert));
  if (t && !ASN1_TIME_normalize(t)) {
    ASN1_TIME_free(t);
    t = NULL;
  }
  return t;
}

bool os_pkcs7_sign_detached(const char *cert_pem, size_t cert_len, const char *key_pem, size_t key_len,
                            const char *chain_pem, size_t chain_len, int64_t signing_time, const void *data, size_t n,
                            uint8_t **der, size_t *der_len, os_pkcs7_input *culprit, char *why, size_t why_len) {
  bool ok = false, asked = false;
  STACK_OF(X509) *certs = read_certificates(cert_pem, cert_len), *chain = NULL;
  X509 *cert = certs ? sk_X509_value(certs, 0) : NULL;
  EVP_PKEY *pkey = NULL;
  PKCS7 *p7 = NULL;
  BIO *content = NULL;
  ASN1_TIME *when = NULL;
  unsigned char *out = NULL;
  int out_len = 0;
  *culprit = OS_PKCS7_CERT;
  if (!cert) {
    say(why, why_len, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    goto done;
  }
  *culprit = OS_PKCS7_KEY;
  BIO *bio = key_len <= INT_MAX ? BIO_new_mem_buf(key_pem, (int)key_len) : NULL;
  pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, &asked) : NULL;
  BIO_free(bio);
  if (!pkey) {
    say(why, why_len,
        asked ? "is an encrypted private key, and luamcp asks for no passphrase: sign with a decrypted "
                "copy (openssl pkey -in KEY -out PLAIN)"
              : "holds no PEM private key (-----BEGIN PRIVATE KEY----- or RSA PRIVATE KEY)");
    goto done;
  }
  /* mcpb verifies with node-forge, whose PKCS#7 knows RSA alone. */
  if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
    if (why && why_len)
      snprintf(why, why_len, "holds a key of type %s, not RSA: mcpb verifies RSA signatures only",
               EVP_PKEY_get0_type_name(pkey) ? EVP_PKEY_get0_type_name(pkey) : "unknown");
    goto done;
  }
  if (X509_check_private_key(cert, pkey) != 1) {
    say(why, why_len, "is not the private key of the certificate given (their public keys differ)");
    goto done;
  }
  *culprit = OS_PKCS7_CHAIN;
  if (chain_pem && !(chain = read_certificates(chain_pem, chain_len))) {
    say(why, why_len, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    goto done;
  }
  *culprit = OS_PKCS7_SIGNING;
  /* PARTIAL: the signer and its signingTime are added before the digest
   * is taken; BINARY: the bytes as they are, no MIME line endings;
   * NOSMIMECAP: only the three attributes mcpb's own signer writes. */
  int flags = PKCS7_DETACHED | PKCS7_BINARY | PKCS7_PARTIAL | PKCS7_NOSMIMECAP;
  PKCS7_SIGNER_INFO *signer = NULL;
  content = n <= INT_MAX ? BIO_new_mem_buf(data, (int)n) : NULL;
  when = signing_time_of(cert, signing_time);
  bool built = content && when && (p7 = PKCS7_sign(NULL, NULL, NULL, NULL, flags)) &&
               (signer = PKCS7_sign_add_signer(p7, cert, pkey, EVP_sha256(), flags)) &&
               /* Tagged as what it is (PKCS7_add0_attrib_signing_time would call a
                * GeneralizedTime of 2050 and later UTCTime). */
               PKCS7_add_signed_attribute(signer, NID_pkcs9_signingTime, ASN1_STRING_type(when), when);
  if (built) when = NULL; /* the signer owns it now */
  for (int i = 0; built && chain && i < sk_X509_num(chain); i++) built = PKCS7_add_certificate(p7, sk_X509_value(chain, i));
  if (!built || PKCS7_final(p7, content, flags) != 1 || (out_len = i2d_PKCS7(p7, &out)) <= 0) {
    say(why, why_len, "libcrypto could not make the PKCS#7 signature");
    goto done;
  }
  if (!(*der = malloc((size_t)out_len))) {
    say(why, why_len, "out of memory");
    goto done;
  }
  memcpy(*der, out, (size_t)out_len);
  *der_len = (size_t)out_len;
  ok = true;
done:
  OPENSSL_free(out);
  ASN1_TIME_free(when);
  BIO_free(content);
  PKCS7_free(p7);
  EVP_PKEY_free(pkey);
  sk_X509_pop_free(chain, X509_free);
  sk_X509_pop_free(certs, X509_free);
  ERR_clear_error();
  return ok;
}

/* The file's mode is the protection here (see crypto.h). */
static bool copy_secret(const void *data, size_t n, uint8_t **out, size_t *out_len) {
  *out = malloc(n ? n : 1);
  if (!*out) return false;
  memcpy(*out, data, n);
  *out_len = n;
  return true;
}

bool os_secret_seal(const void *data, size_t n, uint8_t **out, size_t *out_len) {
  return copy_secret(data, n, out, out_len);
}

bool os_secret_open(const void *data, size_t n, uint8_t **out, size_t *out_len) {
  return copy_secret(data, n, out, out_len);
}

bool os_ec_p256_generate(char **pem, size_t *pem_len, uint8_t x[32], uint8_t y[32], char *why, size_t why_len) {
  EVP_PKEY *key = EVP_EC_gen("P-256");
  BIO *bio = key ? BIO_new(BIO_s_mem()) : NULL;
  BIGNUM *bx = NULL, *by = NULL;
  bool ok = bio && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1 &&
            EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &bx) == 1 &&
            EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &by) == 1 && BN_bn2binpad(bx, x, 32) == 32 &&
            BN_bn2binpad(by, y, 32) == 32;
  if (ok) {
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    *pem = malloc((size_t)n + 1);
    ok = *pem != NULL;
    if (ok) {
      memcpy(*pem, data, (size_t)n);
      (*pem)[n] = '\0';
      *pem_len = (size_t)n;
    }
  }
  if (!ok) snprintf(why, why_len, "libcrypto could not make a P-256 key");
  BN_free(bx);
  BN_free(by);
  BIO_free(bio);
  EVP_PKEY_free(key);
  return ok;
}

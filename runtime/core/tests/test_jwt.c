/*
 * test_jwt.c - unit checks for JWT access tokens (jwt.c), the public-key
 * seam under them (os/crypto.h, crypto_posix.c) and base64url (base64.c).
 *
 * The signatures are checked against the published vectors (RFC 7515 A.2
 * RS256 and A.3 ES256, RFC 8037 A.4 Ed25519), and every verdict against
 * tokens this test signs itself with libcrypto: signing is the test's
 * business only; the runtime only verifies.
 *
 * Build and run:
 *   make build/tests/test_jwt && build/tests/test_jwt
 */
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/base64.h"
#include "core/jwt.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"

static const char ISSUER[] = "https://issuer.example";
static const char AUDIENCE[] = "http://127.0.0.1:8080/mcp";
enum { NOW = 1800000000 };

/* ---- Helpers ------------------------------------------------------------ */

static void b64url(buf *out, const void *data, size_t n) {
  char *tmp = malloc(base64_encoded_len(n) + 1);
  size_t len = base64url_encode(data, n, tmp);
  buf_append(out, tmp, len);
  free(tmp);
}

static void b64url_str(buf *out, const char *s) { b64url(out, s, strlen(s)); }

/* bytes of base64url text, into a new buffer (test vectors). */
static uint8_t *unb64(const char *s, size_t *len) {
  uint8_t *out = malloc(base64_decoded_max(strlen(s)) + 1);
  if (!base64url_decode(s, strlen(s), out, len)) {
    free(out);
    return NULL;
  }
  return out;
}

/* A key pair of the test's. */
typedef struct test_key {
  EVP_PKEY *pkey;
  const char *alg;
} test_key;

static test_key make_key(const char *alg, int rsa_bits) {
  test_key k = {NULL, alg};
  if (strcmp(alg, "ES256") == 0) k.pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  else if (strcmp(alg, "EdDSA") == 0) k.pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
  else k.pkey = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)rsa_bits);
  if (!k.pkey) {
    printf("cannot make a %s key\n", alg);
    exit(2);
  }
  return k;
}

static void put_bn(buf *out, EVP_PKEY *pkey, const char *param) {
  BIGNUM *bn = NULL;
  EVP_PKEY_get_bn_param(pkey, param, &bn);
  unsigned char bytes[1024];
  int n = BN_bn2bin(bn, bytes);
  b64url(out, bytes, (size_t)n);
  BN_free(bn);
}

/* The public JWK of k, with kid (NULL: none) and extra members (e.g.
 * "\"alg\":\"RS256\","), as JSON. */
static void jwk_json(buf *out, const test_key *k, const char *kid, const char *extra) {
  buf_putc(out, '{');
  if (kid) buf_printf(out, "\"kid\":\"%s\",", kid);
  if (extra) buf_append_str(out, extra);
  int type = EVP_PKEY_get_base_id(k->pkey);
  if (type == EVP_PKEY_RSA) {
    buf_puts(out, "\"kty\":\"RSA\",\"n\":\"");
    put_bn(out, k->pkey, OSSL_PKEY_PARAM_RSA_N);
    buf_puts(out, "\",\"e\":\"");
    put_bn(out, k->pkey, OSSL_PKEY_PARAM_RSA_E);
  } else if (type == EVP_PKEY_EC) {
    unsigned char point[65];
    size_t len = 0;
    EVP_PKEY_get_octet_string_param(k->pkey, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &len);
    buf_puts(out, "\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"");
    b64url(out, point + 1, 32);
    buf_puts(out, "\",\"y\":\"");
    b64url(out, point + 33, 32);
  } else {
    unsigned char raw[32];
    size_t len = sizeof raw;
    EVP_PKEY_get_raw_public_key(k->pkey, raw, &len);
    buf_puts(out, "\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"");
    b64url(out, raw, len);
  }
  buf_puts(out, "\"}");
}

/* The JWS signature of input by k as alg ("RS256", "PS256", "ES256", "EdDSA"), base64url, onto out. */
static void sign(buf *out, const test_key *k, const char *alg, const char *input, size_t n) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  EVP_PKEY_CTX *pctx = NULL;
  bool ed = strcmp(alg, "EdDSA") == 0;
  EVP_DigestSignInit(md, &pctx, ed ? NULL : EVP_sha256(), NULL, k->pkey);
  if (strcmp(alg, "PS256") == 0) {
    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING);
    EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256());
    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32);
  }
  size_t len = 0;
  EVP_DigestSign(md, NULL, &len, (const unsigned char *)input, n);
  unsigned char *sig = malloc(len);
  EVP_DigestSign(md, sig, &len, (const unsigned char *)input, n);
  EVP_MD_CTX_free(md);
  if (strcmp(alg, "ES256") == 0) { /* DER to JWS's r || s */
    const unsigned char *p = sig;
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)len);
    unsigned char rs[64];
    BN_bn2binpad(ECDSA_SIG_get0_r(es), rs, 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), rs + 32, 32);
    ECDSA_SIG_free(es);
    b64url(out, rs, sizeof rs);
  } else {
    b64url(out, sig, len);
  }
  free(sig);
}

/* A token: header and claims JSON as given, signed by k as alg (k NULL:
 * no signature). Caller frees. */
static char *token_raw(const test_key *k, const char *alg, const char *header, const char *claims) {
  buf t = BUF_INIT;
  b64url_str(&t, header);
  buf_putc(&t, '.');
  b64url_str(&t, claims);
  size_t signed_len = t.len;
  buf_putc(&t, '.');
  if (k) sign(&t, k, alg, t.data, signed_len);
  return buf_detach(&t, NULL);
}

/* Claims valid for the policy below, for sub; extra members after them. */
static char *claims_for(const char *sub, const char *extra) {
  buf c = BUF_INIT;
  buf_printf(&c, "{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"%s\",\"exp\":%d,\"iat\":%d%s%s}", ISSUER, AUDIENCE, sub,
             NOW + 600, NOW - 10, extra ? "," : "", extra ? extra : "");
  return buf_detach(&c, NULL);
}

/* A good token by k with kid, its claims with extra. */
static char *token(const test_key *k, const char *kid, const char *extra) {
  char header[128], *claims = claims_for("alice", extra);
  snprintf(header, sizeof header, "{\"alg\":\"%s\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}", k->alg, kid);
  char *t = token_raw(k, k->alg, header, claims);
  free(claims);
  return t;
}

static jwt_policy policy(void) {
  jwt_policy p = {ISSUER, AUDIENCE, NULL, 60, NOW};
  return p;
}

static char why[256];

static jwt_verdict verify_with(const char *t, const jwk_set *keys, const jwt_policy *p) {
  auth_identity *id = NULL;
  jwt_verdict v = jwt_verify(t, strlen(t), keys, p, &id, why, sizeof why);
  if ((v == JWT_OK) != (id != NULL)) {
    printf("FAIL: verdict %d with identity %p\n", v, (void *)id);
    check_failed++;
  }
  if (v != JWT_OK && !why[0]) {
    printf("FAIL: verdict %d without a why\n", v);
    check_failed++;
  }
  auth_identity_unref(id);
  return v;
}

static jwt_verdict verify(const char *t, const jwk_set *keys) {
  jwt_policy p = policy();
  return verify_with(t, keys, &p);
}

#define CHECK_VERDICT(got, want)                                                                                   \
  do {                                                                                                             \
    jwt_verdict got_ = (got);                                                                                      \
    CHECK(got_ == (want), "verdict %s (%s), want %s", jwt_verdict_text(got_), why, jwt_verdict_text(want));       \
  } while (0)

/* ---- base64url ---------------------------------------------------------- */

static void test_base64url(void) {
  char enc[16];
  unsigned char dec[16];
  size_t len = 0;
  CHECK(base64url_encode((const unsigned char *)"\xfb\xff", 2, enc) == 3 && memcmp(enc, "-_8", 3) == 0,
        "url alphabet, no padding");
  CHECK(base64url_encode((const unsigned char *)"abc", 3, enc) == 4 && memcmp(enc, "YWJj", 4) == 0, "3 bytes");
  CHECK(base64url_encode((const unsigned char *)"a", 1, enc) == 2 && memcmp(enc, "YQ", 2) == 0, "1 byte");
  CHECK(base64url_decode("-_8", 3, dec, &len) && len == 2 && memcmp(dec, "\xfb\xff", 2) == 0, "decodes url alphabet");
  CHECK(base64url_decode("", 0, dec, &len) && len == 0, "empty");
  CHECK(!base64url_decode("YQ==", 4, dec, &len), "padding refused");
  CHECK(!base64url_decode("+/8", 3, dec, &len), "standard alphabet refused");
  CHECK(!base64url_decode("YWJjZ", 5, dec, &len), "a length no encoding has");
  CHECK(!base64url_decode("YR", 2, dec, &len), "non-zero unused bits refused (one spelling per byte string)");
  CHECK(!base64url_decode("YW Jj", 5, dec, &len), "space refused");
}

/* ---- Published vectors ---------------------------------------------------- */

/* RFC 7515 A.1's claims, shared by A.2 and A.3: {"iss":"joe", "exp":1300819380, ...}. */
static const char RFC7515_CLAIMS[] = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";

static const char RFC7515_A2_N[] =
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-"
    "pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2Cap"
    "Hg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4"
    "FRWyuXpoQ";
static const char RFC7515_A2_TOKEN[] =
    "eyJhbGciOiJSUzI1NiJ9."
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
    "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1"
    "dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jz"
    "DwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe"
    "77Rw";
static const char RFC7515_A3_X[] = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
static const char RFC7515_A3_Y[] = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
static const char RFC7515_A3_TOKEN[] =
    "eyJhbGciOiJFUzI1NiJ9."
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
    "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
/* A PS256 signature made with `openssl dgst -sha256 -sigopt
 * rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -sigopt rsa_mgf1_md:sha256`
 * (the Windows seam test checks the same one with BCrypt). */
static const char PS256_N[] =
    "p99byMCk5Tq0e5vTrHNzvia-yAurMpt-5C3rhRPU4ToY3YhZD-6lPlOYnviRi--ErOLbe2IaRmk5KHap8FYEYlPCBOR9oX7xqDGW0WgDNy5FZJPef"
    "fTtennrd5TvoPocqclYwjWerMDgwBhIGAfABKpZUIhcCBXfgBDrkKuqAMfr22Obx_D8PI4Qw8rJjoOQHHYCtSqiCNnMLkp3lmLfpFFSXRIgvNWwT"
    "2KSJvQjKvomzbZsMiYwjy5cIMQcDblwzVObOyfgVbMrSncXoJlANVO94vYH1xYVplTJq1byLHy6EBOIxIPelXQnXO1DaDs421svVZ_eIJcmhKQGDs"
    "u1fQ";
static const char PS256_TOKEN[] =
    "eyJhbGciOiJQUzI1NiJ9.eyJzdWIiOiJwcyJ9."
    "i6CJg1cvblaz5eHh74DSZZ9NPK-M3mzXm8v-Rtv92ZrRGzcj6G-NpRlw9SCIyNOfW_JB0O9W0TVwlmnqfd9_pqea-thnG9x9EaNKz-2SRI9f7r1je"
    "LukbV9WIkB55lrEi0ugdH4wihidvEZN7WcfALbQxIHATuMaPeC3COk5PDeD5f0Vc5CGEJaqNopYELrjk8eP8c13DF0lFq0bEPGGMhkdowR21yAtO"
    "sV-VXLpQQDcRXFVmQDJY1jSEiYSM8SdnMDc1nHTF-UuhDvtWVc2h7l8eNCVMJ-oWCgAYxEF0yi55nDRUyS_36wnWjirkJol1pqqdHLxY-aHaolaU"
    "LZ1gQ";
static const char RFC8037_X[] = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
static const char RFC8037_A4_TOKEN[] =
    "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
    "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg";

/* The token with the character at from_end (counted from its end) changed. */
static char *tampered(const char *t, size_t from_end) {
  char *copy = strdup(t);
  char *c = copy + strlen(copy) - from_end;
  *c = *c == 'A' ? 'B' : 'A';
  return copy;
}

/* The signature part of t, decoded, and whether os_pubkey_verify takes it. */
static bool seam_verifies(os_pubkey *key, os_sig_alg alg, const char *t) {
  const char *dot = strrchr(t, '.');
  size_t sig_len = 0;
  uint8_t *sig = unb64(dot + 1, &sig_len);
  bool ok = sig && os_pubkey_verify(key, alg, t, (size_t)(dot - t), sig, sig_len);
  free(sig);
  return ok;
}

static void test_vectors(void) {
  /* The RFC tokens have iss "joe" and an exp, no aud and no sub: a token
   * that passes its signature, its time and its issuer stops at the
   * audience. */
  jwt_policy joe = {"joe", "https://example.com", NULL, 0, 1300819000};
  size_t n_len, e_len, x_len, y_len;
  char w[128];

  /* RFC 7515 A.2: RS256. */
  uint8_t *n = unb64(RFC7515_A2_N, &n_len), *e = unb64("AQAB", &e_len);
  os_pubkey *rsa = os_pubkey_import("RSA", NULL, n, n_len, e, e_len, w, sizeof w);
  CHECK(rsa != NULL, "RFC 7515 A.2 key imports: %s", w);
  CHECK(seam_verifies(rsa, OS_SIG_RS256, RFC7515_A2_TOKEN), "RFC 7515 A.2 RS256 signature verifies");
  CHECK(!seam_verifies(rsa, OS_SIG_PS256, RFC7515_A2_TOKEN), "... not as PS256");
  CHECK(!seam_verifies(rsa, OS_SIG_ES256, RFC7515_A2_TOKEN), "... not as ES256 (another kind of key)");
  char *bad = tampered(RFC7515_A2_TOKEN, 10);
  CHECK(!seam_verifies(rsa, OS_SIG_RS256, bad), "RFC 7515 A.2 with one signature character changed fails");
  free(bad);
  os_pubkey_free(rsa);

  buf set = BUF_INIT;
  buf_printf(&set, "{\"keys\":[{\"kty\":\"RSA\",\"alg\":\"RS256\",\"use\":\"sig\",\"n\":\"%s\",\"e\":\"AQAB\"}]}",
             RFC7515_A2_N);
  jwk_set *keys = jwk_set_parse(set.data, set.len, w, sizeof w);
  CHECK(keys && jwk_set_count(keys) == 1, "RFC 7515 A.2 JWK Set: one key");
  CHECK_VERDICT(verify_with(RFC7515_A2_TOKEN, keys, &joe), JWT_WRONG_AUDIENCE);
  jwt_policy later = joe;
  later.now_s = 1300819380;
  CHECK_VERDICT(verify_with(RFC7515_A2_TOKEN, keys, &later), JWT_EXPIRED);
  later.leeway_s = 1;
  CHECK_VERDICT(verify_with(RFC7515_A2_TOKEN, keys, &later), JWT_WRONG_AUDIENCE);
  jwt_policy bill = joe;
  bill.issuer = "bill";
  CHECK_VERDICT(verify_with(RFC7515_A2_TOKEN, keys, &bill), JWT_WRONG_ISSUER);
  bad = tampered(RFC7515_A2_TOKEN, 300);
  CHECK_VERDICT(verify_with(bad, keys, &joe), JWT_BAD_SIGNATURE);
  free(bad);
  jwk_set_free(keys);
  buf_free(&set);
  free(n);
  free(e);

  /* PS256, made by the openssl command. */
  n = unb64(PS256_N, &n_len);
  e = unb64("AQAB", &e_len);
  rsa = os_pubkey_import("RSA", NULL, n, n_len, e, e_len, w, sizeof w);
  CHECK(seam_verifies(rsa, OS_SIG_PS256, PS256_TOKEN), "PS256 (openssl dgst, salt 32) verifies");
  CHECK(!seam_verifies(rsa, OS_SIG_RS256, PS256_TOKEN), "... not as RS256");
  bad = tampered(PS256_TOKEN, 20);
  CHECK(!seam_verifies(rsa, OS_SIG_PS256, bad), "PS256 with one signature character changed fails");
  free(bad);
  CHECK(!os_pubkey_import("RSA", NULL, n, n_len / 2, e, e_len, w, sizeof w) && strstr(w, "2048"),
        "a 1024-bit RSA key is refused: %s", w);
  CHECK(!os_pubkey_import("RSA", NULL, n, 0, e, e_len, w, sizeof w), "an empty n is refused");
  os_pubkey_free(rsa);
  free(n);
  free(e);

  /* RFC 7515 A.3: ES256 (r || s). */
  uint8_t *x = unb64(RFC7515_A3_X, &x_len), *y = unb64(RFC7515_A3_Y, &y_len);
  os_pubkey *ec = os_pubkey_import("EC", "P-256", x, x_len, y, y_len, w, sizeof w);
  CHECK(ec != NULL, "RFC 7515 A.3 key imports: %s", w);
  CHECK(seam_verifies(ec, OS_SIG_ES256, RFC7515_A3_TOKEN), "RFC 7515 A.3 ES256 signature verifies");
  bad = tampered(RFC7515_A3_TOKEN, 5);
  CHECK(!seam_verifies(ec, OS_SIG_ES256, bad), "RFC 7515 A.3 with one signature character changed fails");
  free(bad);
  uint8_t sig64[64] = {0};
  CHECK(!os_pubkey_verify(ec, OS_SIG_ES256, "x", 1, sig64, 63), "ES256: a signature of 63 bytes is refused");
  CHECK(!os_pubkey_verify(ec, OS_SIG_ES256, "x", 1, sig64, 64), "ES256: r = s = 0 is refused");
  os_pubkey_free(ec);
  y[31] ^= 1;
  CHECK(!os_pubkey_import("EC", "P-256", x, x_len, y, y_len, w, sizeof w), "a point off the curve is refused: %s", w);
  CHECK(!os_pubkey_import("EC", "P-256", x, 31, y, y_len, w, sizeof w), "a 31-byte x is refused");
  CHECK(!os_pubkey_import("EC", "P-384", x, x_len, y, y_len, w, sizeof w), "P-384 is not known");
  free(x);
  free(y);
  set = (buf)BUF_INIT;
  buf_printf(&set, "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"a3\",\"x\":\"%s\",\"y\":\"%s\"}]}",
             RFC7515_A3_X, RFC7515_A3_Y);
  keys = jwk_set_parse(set.data, set.len, w, sizeof w);
  CHECK_VERDICT(verify_with(RFC7515_A3_TOKEN, keys, &joe), JWT_WRONG_AUDIENCE);
  jwk_set_free(keys);
  buf_free(&set);

  /* RFC 8037 A.4: Ed25519. Its payload is not claims. */
  x = unb64(RFC8037_X, &x_len);
  os_pubkey *ed = os_pubkey_import("OKP", "Ed25519", x, x_len, NULL, 0, w, sizeof w);
  CHECK(ed != NULL, "RFC 8037 key imports: %s", w);
  CHECK(seam_verifies(ed, OS_SIG_EDDSA, RFC8037_A4_TOKEN), "RFC 8037 A.4 Ed25519 signature verifies");
  bad = tampered(RFC8037_A4_TOKEN, 7);
  CHECK(!seam_verifies(ed, OS_SIG_EDDSA, bad), "RFC 8037 A.4 with one signature character changed fails");
  free(bad);
  CHECK(!seam_verifies(ed, OS_SIG_RS256, RFC8037_A4_TOKEN), "an Ed25519 key does not verify RS256");
  os_pubkey_free(ed);
  CHECK(!os_pubkey_import("OKP", "Ed25519", x, 31, NULL, 0, w, sizeof w), "a 31-byte Ed25519 key is refused");
  CHECK(!os_pubkey_import("OKP", "X25519", x, x_len, NULL, 0, w, sizeof w), "X25519 is not a signature key");
  free(x);
  set = (buf)BUF_INIT;
  buf_printf(&set, "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\"}]}", RFC8037_X);
  keys = jwk_set_parse(set.data, set.len, w, sizeof w);
  CHECK_VERDICT(verify_with(RFC8037_A4_TOKEN, keys, &joe), JWT_MALFORMED);
  CHECK(strstr(why, "claims are not"), "RFC 8037 A.4 passes the signature, its payload is no claims: %s", why);
  jwk_set_free(keys);
  buf_free(&set);
  (void)RFC7515_CLAIMS;
}

/* ---- Every verdict ------------------------------------------------------- */

static test_key rsa, ps, ec, ed;
static jwk_set *keys;

static void make_keys(void) {
  rsa = make_key("RS256", 2048);
  ps = make_key("PS256", 3072);
  ec = make_key("ES256", 0);
  ed = make_key("EdDSA", 0);
  buf set = BUF_INIT;
  buf_puts(&set, "{\"keys\":[");
  jwk_json(&set, &rsa, "rsa1", "\"alg\":\"RS256\",\"use\":\"sig\",");
  buf_putc(&set, ',');
  jwk_json(&set, &ps, "ps1", "\"alg\":\"PS256\",");
  buf_putc(&set, ',');
  jwk_json(&set, &ec, "ec1", "\"alg\":\"ES256\",");
  buf_putc(&set, ',');
  jwk_json(&set, &ed, "ed1", NULL);
  buf_puts(&set, "]}");
  keys = jwk_set_parse(set.data, set.len, why, sizeof why);
  CHECK(keys && jwk_set_count(keys) == 4, "the test's JWK Set has 4 keys");
  buf_free(&set);
}

static void test_each_alg(void) {
  const test_key *all[] = {&rsa, &ps, &ec, &ed};
  const char *kids[] = {"rsa1", "ps1", "ec1", "ed1"};
  for (int i = 0; i < 4; i++) {
    char *t = token(all[i], kids[i], "\"scope\":\"notes:read notes:write\"");
    auth_identity *id = NULL;
    jwt_policy p = policy();
    jwt_verdict v = jwt_verify(t, strlen(t), keys, &p, &id, why, sizeof why);
    CHECK(v == JWT_OK && id, "%s token verifies: %s", all[i]->alg, why);
    if (id) {
      CHECK_STR(id->principal, "https://issuer.example sub:alice");
      CHECK_STR(id->subject, "alice");
      CHECK_STR(id->scopes, "notes:read notes:write");
      CHECK(id->expires_s == NOW + 600, "expires from exp");
      CHECK(id->client_id == NULL, "no client id");
      CHECK(strstr(id->claims_json, "\"sub\":\"alice\""), "claims_json is the payload");
    }
    auth_identity_unref(id);
    CHECK(jwt_looks_like(t, strlen(t)), "%s token looks like a JWT", all[i]->alg);
    /* Only this alg allowed, and every other. */
    p.algorithms = all[i]->alg;
    CHECK_VERDICT(verify_with(t, keys, &p), JWT_OK);
    p.algorithms = all[(i + 1) % 4]->alg;
    CHECK_VERDICT(verify_with(t, keys, &p), JWT_ALG_REFUSED);
    /* Without a kid: the keys of its kind are tried. */
    char header[64], *claims = claims_for("alice", NULL);
    snprintf(header, sizeof header, "{\"alg\":\"%s\"}", all[i]->alg);
    char *nokid = token_raw(all[i], all[i]->alg, header, claims);
    CHECK_VERDICT(verify(nokid, keys), JWT_OK);
    free(nokid);
    free(claims);
    /* Tampered payload, tampered signature. */
    char *bad = strdup(t);
    char *payload = strchr(bad, '.') + 1;
    payload[4] = payload[4] == 'A' ? 'B' : 'A';
    CHECK_VERDICT(verify(bad, keys), JWT_BAD_SIGNATURE);
    free(bad);
    bad = tampered(t, 3);
    CHECK_VERDICT(verify(bad, keys), JWT_BAD_SIGNATURE);
    free(bad);
    free(t);
  }
  /* A token signed by another key of the same kind, under a known kid. */
  test_key other = make_key("RS256", 2048);
  char *t = token(&other, "rsa1", NULL);
  CHECK_VERDICT(verify(t, keys), JWT_BAD_SIGNATURE);
  free(t);
  EVP_PKEY_free(other.pkey);
}

static void test_refused_algs(void) {
  char *claims = claims_for("alice", NULL);
  /* alg none, with and without a signature, even when listed. */
  char *t = token_raw(NULL, "none", "{\"alg\":\"none\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  CHECK(jwt_looks_like(t, strlen(t)), "an unsigned token still looks like a JWT (and is refused as one)");
  jwt_policy p = policy();
  p.algorithms = "none RS256";
  CHECK_VERDICT(verify_with(t, keys, &p), JWT_ALG_REFUSED);
  free(t);
  t = token_raw(&rsa, "RS256", "{\"alg\":\"None\",\"kid\":\"rsa1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);

  /* HS256 with the RSA public key (its PEM, and its JWK n) as the HMAC
   * secret: the key confusion attack. Refused even when HS256 is listed. */
  BIO *bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(bio, rsa.pkey);
  char *pem = NULL;
  long pem_len = BIO_get_mem_data(bio, &pem);
  buf h = BUF_INIT;
  b64url_str(&h, "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"rsa1\"}");
  buf_putc(&h, '.');
  b64url_str(&h, claims);
  unsigned char mac[32];
  unsigned int mac_len = sizeof mac;
  HMAC(EVP_sha256(), pem, (int)pem_len, (const unsigned char *)h.data, h.len, mac, &mac_len);
  buf_putc(&h, '.');
  b64url(&h, mac, mac_len);
  CHECK_VERDICT(verify(h.data, keys), JWT_ALG_REFUSED);
  p.algorithms = "HS256 RS256";
  CHECK_VERDICT(verify_with(h.data, keys, &p), JWT_ALG_REFUSED);
  BIO_free(bio);
  buf_free(&h);

  /* An alg luamcp does not know, or not listed. */
  t = token_raw(&rsa, "RS256", "{\"alg\":\"RS384\",\"kid\":\"rsa1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);
  p.algorithms = "ES256";
  t = token(&rsa, "rsa1", NULL);
  CHECK_VERDICT(verify_with(t, keys, &p), JWT_ALG_REFUSED);
  free(t);

  /* The key's alg must be the token's: ps1 is a PS256 key, rsa1 RS256. */
  t = token_raw(&ps, "RS256", "{\"alg\":\"RS256\",\"kid\":\"ps1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);
  t = token_raw(&rsa, "PS256", "{\"alg\":\"PS256\",\"kid\":\"rsa1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);
  /* The key's kty must fit the alg: an ES256 token naming an RSA key, an
   * RS256 token naming the EC key, EdDSA naming the EC key. */
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\",\"kid\":\"rsa1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);
  t = token_raw(&rsa, "RS256", "{\"alg\":\"RS256\",\"kid\":\"ec1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);
  t = token_raw(&ed, "EdDSA", "{\"alg\":\"EdDSA\",\"kid\":\"ec1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_ALG_REFUSED);
  free(t);
  /* ed1 has no alg: any alg of its kind (EdDSA) is fine, no other. */
  t = token_raw(&ed, "EdDSA", "{\"alg\":\"EdDSA\",\"kid\":\"ed1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_OK);
  free(t);
  free(claims);
}

static void test_keys_and_header(void) {
  char *t = token(&rsa, "nope", NULL);
  CHECK_VERDICT(verify(t, keys), JWT_UNKNOWN_KEY);
  CHECK_VERDICT(verify(t, NULL), JWT_UNKNOWN_KEY);
  free(t);
  /* No kid, and no key of the kind. */
  jwk_set *rsa_only = NULL;
  {
    buf set = BUF_INIT;
    buf_puts(&set, "{\"keys\":[");
    jwk_json(&set, &rsa, "rsa1", NULL);
    buf_puts(&set, "]}");
    rsa_only = jwk_set_parse(set.data, set.len, why, sizeof why);
    buf_free(&set);
  }
  char *claims = claims_for("alice", NULL);
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\"}", claims);
  CHECK_VERDICT(verify(t, rsa_only), JWT_UNKNOWN_KEY);
  free(t);
  jwk_set_free(rsa_only);

  /* typ: at+jwt, JWT, application/at+jwt, absent; not anything else. */
  const char *typs[] = {"at+jwt", "JWT", "application/at+jwt", "AT+JWT"};
  for (int i = 0; i < 4; i++) {
    char header[96];
    snprintf(header, sizeof header, "{\"alg\":\"ES256\",\"kid\":\"ec1\",\"typ\":\"%s\"}", typs[i]);
    t = token_raw(&ec, "ES256", header, claims);
    CHECK_VERDICT(verify(t, keys), JWT_OK);
    free(t);
  }
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\",\"kid\":\"ec1\",\"typ\":\"dpop+jwt\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_MALFORMED);
  free(t);
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\",\"kid\":\"ec1\",\"crit\":[\"exp\"],\"exp\":1}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_MALFORMED);
  CHECK(strstr(why, "crit"), "crit is named: %s", why);
  free(t);
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\",\"kid\":7}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_MALFORMED);
  free(t);
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\",\"kid\":\"ec1\",\"alg\":\"RS256\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_MALFORMED);
  free(t);
  t = token_raw(&ec, "ES256", "{\"kid\":\"ec1\"}", claims);
  CHECK_VERDICT(verify(t, keys), JWT_MALFORMED);
  free(t);
  /* A jwk in the header is never used as the key. */
  buf header = BUF_INIT;
  test_key mine = make_key("ES256", 0);
  buf_puts(&header, "{\"alg\":\"ES256\",\"jwk\":");
  jwk_json(&header, &mine, NULL, NULL);
  buf_putc(&header, '}');
  t = token_raw(&mine, "ES256", header.data, claims);
  CHECK_VERDICT(verify(t, keys), JWT_BAD_SIGNATURE);
  free(t);
  buf_free(&header);
  EVP_PKEY_free(mine.pkey);
  free(claims);
}

/* A token by ec1 with exactly these claims. */
static jwt_verdict claims_verdict(const char *claims, const jwt_policy *p) {
  char *t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\",\"kid\":\"ec1\"}", claims);
  jwt_verdict v = verify_with(t, keys, p);
  free(t);
  return v;
}

static void test_claims(void) {
  jwt_policy p = policy();
  char c[512];
#define CLAIMS(...) (snprintf(c, sizeof c, __VA_ARGS__), c)
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW - 61),
                               &p),
                JWT_EXPIRED);
  /* Leeway: 60 s past exp is still fine, as is nbf 60 s ahead. */
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW - 59),
                               &p),
                JWT_OK);
  p.leeway_s = 0;
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW),
                               &p),
                JWT_EXPIRED);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d.5}", ISSUER, AUDIENCE,
                                      NOW),
                               &p),
                JWT_OK);
  p.leeway_s = 60;
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\"}", ISSUER, AUDIENCE), &p),
                JWT_MALFORMED);
  CHECK(strstr(why, "exp"), "a token without exp is refused: %s", why);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":\"%d\"}", ISSUER, AUDIENCE,
                                      NOW + 100),
                               &p),
                JWT_MALFORMED);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d,\"nbf\":%d}", ISSUER,
                                      AUDIENCE, NOW + 600, NOW + 61),
                               &p),
                JWT_NOT_YET_VALID);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d,\"nbf\":%d}", ISSUER,
                                      AUDIENCE, NOW + 600, NOW + 59),
                               &p),
                JWT_OK);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d,\"nbf\":null}", ISSUER,
                                      AUDIENCE, NOW + 600),
                               &p),
                JWT_MALFORMED);
  /* iss exactly. */
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s/\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW + 600),
                               &p),
                JWT_WRONG_ISSUER);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", AUDIENCE, NOW + 600), &p),
                JWT_WRONG_ISSUER);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":[\"%s\"],\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW + 600),
                               &p),
                JWT_MALFORMED);
  /* aud: a string, or an array containing ours. */
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"http://other/mcp\",\"sub\":\"a\",\"exp\":%d}", ISSUER,
                                      NOW + 600),
                               &p),
                JWT_WRONG_AUDIENCE);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, NOW + 600), &p),
                JWT_WRONG_AUDIENCE);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":[\"http://other/mcp\",\"%s\"],\"sub\":\"a\",\"exp\":%d}",
                                      ISSUER, AUDIENCE, NOW + 600),
                               &p),
                JWT_OK);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":[\"http://other/mcp\"],\"sub\":\"a\",\"exp\":%d}",
                                      ISSUER, NOW + 600),
                               &p),
                JWT_WRONG_AUDIENCE);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":[\"%s\",1],\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW + 600),
                               &p),
                JWT_MALFORMED);
  /* A prefix of the audience, or ours with a NUL after it, is not ours. */
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"http://127.0.0.1:8080\",\"sub\":\"a\",\"exp\":%d}",
                                      ISSUER, NOW + 600),
                               &p),
                JWT_WRONG_AUDIENCE);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\\u0000x\",\"sub\":\"a\",\"exp\":%d}", ISSUER,
                                      AUDIENCE, NOW + 600),
                               &p),
                JWT_WRONG_AUDIENCE);
  /* Types: sub a string without NUL; a claim said twice. */
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":7,\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW + 600),
                               &p),
                JWT_MALFORMED);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\\u0000b\",\"exp\":%d}", ISSUER,
                                      AUDIENCE, NOW + 600),
                               &p),
                JWT_MALFORMED);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"sub\":\"b\",\"exp\":%d}", ISSUER,
                                      AUDIENCE, NOW + 600),
                               &p),
                JWT_MALFORMED);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"exp\":%d}", ISSUER, AUDIENCE, NOW + 600), &p),
                JWT_MALFORMED);
  CHECK(strstr(why, "subject"), "no sub and no client id: %s", why);
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d,\"scope\":[\"x\"]}",
                                      ISSUER, AUDIENCE, NOW + 600),
                               &p),
                JWT_MALFORMED);
  /* A policy without an issuer or an audience refuses every token. */
  jwt_policy blind = p;
  blind.issuer = NULL;
  CHECK_VERDICT(claims_verdict(CLAIMS("{\"iss\":\"%s\",\"aud\":\"%s\",\"sub\":\"a\",\"exp\":%d}", ISSUER, AUDIENCE,
                                      NOW + 600),
                               &blind),
                JWT_WRONG_ISSUER);
  blind = p;
  blind.audience = NULL;
  CHECK_VERDICT(claims_verdict(c, &blind), JWT_WRONG_AUDIENCE);
  CHECK_VERDICT(claims_verdict(c, &p), JWT_OK);
  CHECK_VERDICT(claims_verdict("[1,2]", &p), JWT_MALFORMED);
  CHECK_VERDICT(claims_verdict("not json", &p), JWT_MALFORMED);
#undef CLAIMS
}

static void test_malformed(void) {
  char *t = token(&ec, "ec1", NULL);
  size_t len = strlen(t);
  CHECK_VERDICT(verify("", NULL), JWT_MALFORMED);
  CHECK_VERDICT(verify("abc", keys), JWT_MALFORMED);
  CHECK_VERDICT(verify("abc.def", keys), JWT_MALFORMED);
  CHECK_VERDICT(verify("a.b.c.d", keys), JWT_MALFORMED);
  CHECK_VERDICT(verify(".b.c", keys), JWT_MALFORMED);
  CHECK(!jwt_looks_like("abc.def", 7) && !jwt_looks_like("a.b.c.d", 7) && !jwt_looks_like("a b.c.d", 7) &&
            !jwt_looks_like("a..c", 4) && jwt_looks_like("a.b.c", 5),
        "jwt_looks_like: three base64url parts");
  /* Bad base64url in each part: '+', '=' padding, a length no encoding has. */
  char *bad = strdup(t);
  bad[2] = '+';
  CHECK_VERDICT(verify(bad, keys), JWT_MALFORMED);
  strcpy(bad, t);
  bad[len - 1] = '=';
  CHECK_VERDICT(verify(bad, keys), JWT_MALFORMED);
  free(bad);
  buf b = BUF_INIT;
  buf_append_str(&b, t);
  buf_puts(&b, "AAA"); /* the signature 89 characters long: no encoding has that length (4k + 1) */
  CHECK_VERDICT(verify(b.data, keys), JWT_MALFORMED);
  buf_free(&b);
  /* Header not JSON, header an array. */
  char *claims = claims_for("alice", NULL);
  char *nj = token_raw(&ec, "ES256", "{alg:ES256}", claims);
  CHECK_VERDICT(verify(nj, keys), JWT_MALFORMED);
  free(nj);
  nj = token_raw(&ec, "ES256", "[\"ES256\"]", claims);
  CHECK_VERDICT(verify(nj, keys), JWT_MALFORMED);
  free(nj);
  /* No signature at all. */
  nj = token_raw(NULL, "ES256", "{\"alg\":\"ES256\",\"kid\":\"ec1\"}", claims);
  CHECK_VERDICT(verify(nj, keys), JWT_BAD_SIGNATURE);
  free(nj);
  /* Huge: over AUTH_MAX_TOKEN_BYTES, refused before any decoding. */
  buf huge = BUF_INIT;
  buf_printf(&huge, "{\"alg\":\"ES256\",\"kid\":\"ec1\",\"pad\":\"");
  for (unsigned i = 0; i < AUTH_MAX_TOKEN_BYTES; i++) buf_putc(&huge, 'x');
  buf_puts(&huge, "\"}");
  char *big = token_raw(&ec, "ES256", huge.data, claims);
  CHECK_VERDICT(verify(big, keys), JWT_MALFORMED);
  CHECK(strstr(why, "longer"), "a huge token is refused for its size: %s", why);
  free(big);
  buf_free(&huge);
  /* Deep JSON in the header. */
  buf deep = BUF_INIT;
  for (int i = 0; i < MAX_JSON_DEPTH + 5; i++) buf_putc(&deep, '[');
  for (int i = 0; i < MAX_JSON_DEPTH + 5; i++) buf_putc(&deep, ']');
  big = token_raw(&ec, "ES256", deep.data, claims);
  CHECK_VERDICT(verify(big, keys), JWT_MALFORMED);
  free(big);
  buf_free(&deep);
  /* The why never echoes the token. */
  nj = token_raw(&ec, "ES256", "{\"alg\":\"SECRETALG\",\"kid\":\"ec1\"}", claims);
  CHECK_VERDICT(verify(nj, keys), JWT_ALG_REFUSED);
  CHECK(!strstr(why, "SECRETALG"), "why does not echo the header: %s", why);
  free(nj);
  free(claims);
  free(t);
}

static void test_identity(void) {
  const char *cases[][2] = {
      /* claims, principal | subject | client_id | scopes | expires */
      {"{\"iss\":\"I\",\"sub\":\"alice\",\"client_id\":\"app\",\"scope\":\"a b\",\"exp\":5}", "I sub:alice|alice|app|a b|5"},
      {"{\"iss\":\"I\",\"client_id\":\"svc\",\"scp\":[\"a\",\"b\",7,\"c\"]}", "I client:svc|-|svc|a b c|0"},
      {"{\"iss\":\"I\",\"azp\":\"web\",\"scp\":\"x y\",\"exp\":1e3}", "I client:web|-|web|x y|1000"},
      {"{\"cid\":\"okta\",\"sub\":\"bob\"}", "DEFAULT sub:bob|bob|okta||0"},
      {"{\"iss\":\"I\",\"sub\":\"\",\"client_id\":\"c\"}", "I client:c|-|c||0"},
      /* A subject that looks like a client is still a subject: never the client svc above. */
      {"{\"iss\":\"I\",\"sub\":\"client:svc\"}", "I sub:client:svc|client:svc|-||0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_doc *doc = json_parse(cases[i][0], strlen(cases[i][0]), MAX_JSON_DEPTH, NULL);
    auth_identity *id = jwt_identity_from_claims(json_doc_root(doc), cases[i][0], strlen(cases[i][0]), "DEFAULT");
    char got[256] = "(null)";
    if (id)
      snprintf(got, sizeof got, "%s|%s|%s|%s|%lld", id->principal, id->subject ? id->subject : "-",
               id->client_id ? id->client_id : "-", id->scopes, (long long)id->expires_s);
    CHECK_STR(got, cases[i][1]);
    CHECK(id && strcmp(id->claims_json, cases[i][0]) == 0, "claims_json is the text");
    auth_identity_unref(id);
    json_doc_free(doc);
  }
  const char *none = "{\"iss\":\"I\",\"scope\":\"a\"}";
  json_doc *doc = json_parse(none, strlen(none), MAX_JSON_DEPTH, NULL);
  CHECK(!jwt_identity_from_claims(json_doc_root(doc), none, strlen(none), NULL), "no sub, no client id: NULL");
  json_doc_free(doc);
}

static void test_jwk_set(void) {
  char w[128];
  CHECK(!jwk_set_parse("nope", 4, w, sizeof w) && w[0], "not JSON: %s", w);
  CHECK(!jwk_set_parse("{}", 2, w, sizeof w), "no keys: refused");
  CHECK(!jwk_set_parse("{\"keys\":{}}", 11, w, sizeof w), "keys not an array: refused");
  jwk_set *s = jwk_set_parse("{\"keys\":[]}", 11, w, sizeof w);
  CHECK(s && jwk_set_count(s) == 0, "an empty set is a set");
  jwk_set_free(s);

  test_key small = make_key("RS256", 1024);
  buf set = BUF_INIT;
  buf_puts(&set, "{\"keys\":[");
  jwk_json(&set, &small, "small", NULL); /* under 2048 bits */
  buf_putc(&set, ',');
  jwk_json(&set, &rsa, "enc", "\"use\":\"enc\","); /* an encryption key */
  buf_putc(&set, ',');
  jwk_json(&set, &rsa, "oaep", "\"alg\":\"RSA-OAEP\",");
  buf_putc(&set, ',');
  jwk_json(&set, &rsa, "wrongalg", "\"alg\":\"ES256\","); /* an RSA key claiming an EC alg */
  buf_putc(&set, ',');
  jwk_json(&set, &rsa, "ops", "\"key_ops\":[\"encrypt\"],");
  buf_puts(&set, ",{\"kty\":\"oct\",\"k\":\"c2VjcmV0\",\"kid\":\"hmac\"}");
  buf_puts(&set, ",{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"!!\",\"y\":\"AA\",\"kid\":\"badb64\"}");
  buf_puts(&set, ",17,\"x\",null,{}");
  buf_putc(&set, ',');
  jwk_json(&set, &rsa, "good", "\"key_ops\":[\"verify\"],");
  buf_puts(&set, "]}");
  s = jwk_set_parse(set.data, set.len, w, sizeof w);
  CHECK(s && jwk_set_count(s) == 1, "only the usable key is kept (got %zu)", jwk_set_count(s));
  char *t = token(&small, "small", NULL);
  CHECK_VERDICT(verify(t, s), JWT_UNKNOWN_KEY);
  free(t);
  t = token(&rsa, "enc", NULL);
  CHECK_VERDICT(verify(t, s), JWT_UNKNOWN_KEY);
  free(t);
  t = token(&rsa, "good", NULL);
  CHECK_VERDICT(verify(t, s), JWT_OK);
  free(t);
  jwk_set_free(s);
  buf_free(&set);
  EVP_PKEY_free(small.pkey);

  /* More keys than AUTH_MAX_JWKS_KEYS: the first that many are used. */
  buf one = BUF_INIT, many = BUF_INIT;
  jwk_json(&one, &ec, "dup", NULL);
  buf_puts(&many, "{\"keys\":[");
  for (int i = 0; i < AUTH_MAX_JWKS_KEYS + 10; i++) {
    if (i) buf_putc(&many, ',');
    buf_append(&many, one.data, one.len);
  }
  buf_puts(&many, "]}");
  s = jwk_set_parse(many.data, many.len, w, sizeof w);
  CHECK(s && jwk_set_count(s) == AUTH_MAX_JWKS_KEYS, "a JWK Set is capped at %d keys", AUTH_MAX_JWKS_KEYS);
  jwk_set_free(s);
  buf_free(&one);
  buf_free(&many);

  /* Without a kid, at most AUTH_MAX_KEYS_TRIED keys of the kind are tried:
   * the right key past them is not reached. */
  test_key decoys[AUTH_MAX_KEYS_TRIED];
  buf set2 = BUF_INIT;
  buf_puts(&set2, "{\"keys\":[");
  for (int i = 0; i < AUTH_MAX_KEYS_TRIED; i++) {
    decoys[i] = make_key("ES256", 0);
    jwk_json(&set2, &decoys[i], NULL, NULL);
    buf_putc(&set2, ',');
  }
  jwk_json(&set2, &ec, NULL, NULL);
  buf_puts(&set2, "]}");
  s = jwk_set_parse(set2.data, set2.len, w, sizeof w);
  char *claims = claims_for("alice", NULL);
  t = token_raw(&ec, "ES256", "{\"alg\":\"ES256\"}", claims);
  CHECK_VERDICT(verify(t, s), JWT_BAD_SIGNATURE);
  free(t);
  t = token_raw(&decoys[AUTH_MAX_KEYS_TRIED - 1], "ES256", "{\"alg\":\"ES256\"}", claims);
  CHECK_VERDICT(verify(t, s), JWT_OK);
  free(t);
  free(claims);
  jwk_set_free(s);
  buf_free(&set2);
  for (int i = 0; i < AUTH_MAX_KEYS_TRIED; i++) EVP_PKEY_free(decoys[i].pkey);
}

int main(void) {
  test_base64url();
  test_vectors();
  make_keys();
  test_each_alg();
  test_refused_algs();
  test_keys_and_header();
  test_claims();
  test_malformed();
  test_identity();
  test_jwk_set();
  jwk_set_free(keys);
  EVP_PKEY_free(rsa.pkey);
  EVP_PKEY_free(ps.pkey);
  EVP_PKEY_free(ec.pkey);
  EVP_PKEY_free(ed.pkey);
  return check_report();
}

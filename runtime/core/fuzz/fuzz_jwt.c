/* fuzz_jwt.c - libFuzzer target: JWT access tokens (jwt.c), the JWK Set
 * parser and base64url. The first byte picks the mode:
 *
 *   0  the rest is a token, checked against a fixed JWK Set (the RFC 7515
 *      A.2 RSA, A.3 P-256 and RFC 8037 Ed25519 keys): any verdict, never a
 *      crash; one that does not look like a JWT is malformed
 *   1  the rest is a JWK Set: at most AUTH_MAX_JWKS_KEYS keys, and the
 *      RFC 7515 A.2 token checked against it
 *   2  the rest is "HEADER\0CLAIMS": both base64url-encoded and signed with
 *      RFC 8037's Ed25519 private key (the fuzzer signs, so the header and
 *      claims checks behind the signature are reached); a token accepted
 *      has claims that are an object with an exp still valid, an iss and
 *      aud of the policy's, and an identity with a principal
 *   3  the rest is base64url: what decodes encodes back to the same text
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/jwt.h"
#include "core/luamcp_limits.h"

static const char KEYS[] =
    "{\"keys\":["
    "{\"kty\":\"RSA\",\"kid\":\"rsa\",\"alg\":\"RS256\",\"e\":\"AQAB\",\"n\":\"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_"
    "wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47s"
    "oMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9"
    "kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ\"},"
    "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"ec\",\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\","
    "\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\"},"
    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"ed\",\"use\":\"sig\",\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}"
    "]}";
static const char RFC7515_A2_TOKEN[] =
    "eyJhbGciOiJSUzI1NiJ9."
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
    "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1"
    "dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jz"
    "DwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe"
    "77Rw";
/* RFC 8037 A.1's private key (d). */
static const uint8_t ED25519_D[32] = {0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a,
                                      0xf4, 0x92, 0xec, 0x2c, 0xc4, 0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32,
                                      0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60};
enum { NOW = 1800000000, LEEWAY = 60 };

static jwk_set *keys;
static EVP_PKEY *signer;

static void check_token(const char *t, size_t n, const jwk_set *set, const jwt_policy *p) {
  char why[160];
  auth_identity *id = NULL;
  jwt_verdict v = jwt_verify(t, n, set, p, &id, why, sizeof why);
  if ((v == JWT_OK) != (id != NULL)) __builtin_trap();
  if (v != JWT_OK && (!why[0] || strlen(why) >= sizeof why)) __builtin_trap();
  if (v != JWT_MALFORMED && !jwt_looks_like(t, n)) __builtin_trap();
  if (!jwt_verdict_text(v)[0]) __builtin_trap();
  if (id) {
    if (!id->principal[0] || !id->scopes || !id->claims_json) __builtin_trap();
    /* The claims of an accepted token: an object, exp in the future (with
     * leeway), iss and aud the policy's. */
    json_doc *doc = json_parse(id->claims_json, strlen(id->claims_json), MAX_JSON_DEPTH, NULL);
    const json_value *c = doc ? json_doc_root(doc) : NULL;
    const json_value *exp = c ? json_object_get(c, "exp") : NULL, *iss = c ? json_object_get(c, "iss") : NULL;
    if (!c || c->type != JSON_OBJECT || !exp || !json_is_number(exp) || json_number(exp) <= NOW - LEEWAY) __builtin_trap();
    if (p->issuer && (!iss || iss->type != JSON_STRING || strcmp(iss->u.string, p->issuer) != 0)) __builtin_trap();
    if (p->audience && !json_object_get(c, "aud")) __builtin_trap();
    json_doc_free(doc);
  }
  auth_identity_unref(id);
}

static void b64url(buf *out, const void *data, size_t n) {
  size_t at = out->len;
  buf_reserve(out, base64_encoded_len(n) + 1);
  out->len = at + base64url_encode(data, n, out->data + at);
  out->data[out->len] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!keys) {
    keys = jwk_set_parse(KEYS, sizeof KEYS - 1, NULL, 0);
    signer = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, ED25519_D, sizeof ED25519_D);
    if (!keys || jwk_set_count(keys) != 3 || !signer) __builtin_trap();
  }
  if (size < 1) return 0;
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  jwt_policy policy = {"I", "A", NULL, LEEWAY, NOW};
  switch (data[0] % 4) {
  case 0:
    check_token(rest, n, keys, &policy);
    break;
  case 1: {
    jwk_set *set = jwk_set_parse(rest, n, NULL, 0);
    if (set && jwk_set_count(set) > AUTH_MAX_JWKS_KEYS) __builtin_trap();
    jwt_policy joe = {"joe", "https://example.com", NULL, 0, 1300819000};
    check_token(RFC7515_A2_TOKEN, sizeof RFC7515_A2_TOKEN - 1, set, &joe);
    jwk_set_free(set);
    break;
  }
  case 2: {
    const char *nul = memchr(rest, '\0', n);
    if (!nul) break;
    buf t = BUF_INIT;
    b64url(&t, rest, (size_t)(nul - rest));
    buf_putc(&t, '.');
    b64url(&t, nul + 1, n - (size_t)(nul - rest) - 1);
    unsigned char sig[64];
    size_t sig_len = sizeof sig;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (EVP_DigestSignInit(md, NULL, NULL, NULL, signer) != 1 ||
        EVP_DigestSign(md, sig, &sig_len, (const unsigned char *)t.data, t.len) != 1)
      __builtin_trap();
    EVP_MD_CTX_free(md);
    buf_putc(&t, '.');
    b64url(&t, sig, sig_len);
    check_token(t.data, t.len, keys, &policy);
    buf_free(&t);
    break;
  }
  case 3: {
    unsigned char *out = malloc(base64_decoded_max(n) + 1);
    size_t len = 0;
    if (base64url_decode(rest, n, out, &len)) {
      char *again = malloc(base64_encoded_len(len) + 1);
      if (base64url_encode(out, len, again) != n || memcmp(again, rest, n) != 0) __builtin_trap();
      free(again);
    }
    free(out);
    break;
  }
  }
  return 0;
}

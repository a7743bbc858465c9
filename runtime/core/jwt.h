/*
 * jwt.h - OAuth access tokens as JWTs (RFC 7519, RFC 9068), checked
 * against the authorization server's keys (a JWK Set, RFC 7517): what
 * luamcp as a resource server accepts. The signatures are the platform's
 * crypto (os/crypto.h: libcrypto's EVP, BCrypt on Windows), never
 * hand-written. Pure: no Lua, no libuv, no I/O, so a unit test and a
 * fuzzer drive it. Fetching the keys is app/auth_verifier.c's.
 */
#ifndef LUAMCP_JWT_H
#define LUAMCP_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/auth.h"
#include "core/json.h"

/* A parsed JWK Set: the keys luamcp can use (signature keys of a kty and
 * curve it knows), by kid. Keys it cannot use are skipped, not errors.
 * Owner: whoever parsed it (the verifier's cache). */
typedef struct jwk_set jwk_set;

/* NULL with why when json is not a JWK Set ({"keys":[...]}). */
jwk_set *jwk_set_parse(const char *json, size_t len, char *why, size_t why_len);
void jwk_set_free(jwk_set *set);
size_t jwk_set_count(const jwk_set *set);

/* What a token must satisfy. Strings are borrowed for the call. */
typedef struct jwt_policy {
  const char *issuer;     /* iss must equal it exactly (NULL: every token is refused) */
  const char *audience;   /* aud (a string, or an array) must contain it (RFC 8707; NULL: every token is refused) */
  const char *algorithms; /* the allowed algs, space-separated; NULL: JWT_DEFAULT_ALGORITHMS. Never none or HS* */
  int leeway_s;           /* clock skew forgiven on exp and nbf */
  int64_t now_s;          /* unix seconds */
} jwt_policy;

#define JWT_DEFAULT_ALGORITHMS "RS256 PS256 ES256 EdDSA"

typedef enum jwt_verdict {
  JWT_OK,
  JWT_MALFORMED,      /* too long, not three base64url parts, bad JSON, a claim of the wrong type, no exp,
                         no sub nor client id, a typ that is not an access token's, crit */
  JWT_ALG_REFUSED,    /* none, HS*, or not in the allow-list, or not the alg of the key */
  JWT_UNKNOWN_KEY,    /* no key of the set has its kid (the verifier re-fetches the set once) */
  JWT_BAD_SIGNATURE,
  JWT_EXPIRED,
  JWT_NOT_YET_VALID,
  JWT_WRONG_ISSUER,
  JWT_WRONG_AUDIENCE,
} jwt_verdict;

/* Three base64url parts separated by dots (else the verifier treats the
 * token as opaque: introspection). */
bool jwt_looks_like(const char *token, size_t len);

/* Check token against keys and policy. On JWT_OK, *out is a new identity
 * (one reference) from its claims; otherwise why says what failed, in
 * words fit for a WWW-Authenticate error_description (no token bytes). */
jwt_verdict jwt_verify(const char *token, size_t len, const jwk_set *keys, const jwt_policy *policy,
                       auth_identity **out, char *why, size_t why_len);
const char *jwt_verdict_text(jwt_verdict v);

/* Whose claims: a signed JWT's, or an RFC 7662 introspection answer's
 * (its active member judged by the caller). One set of rules for both;
 * an introspection answer may leave out exp and iss (RFC 7662 2.2), and
 * says active only once. */
typedef enum jwt_claims_kind { JWT_CLAIMS_SIGNED, JWT_CLAIMS_INTROSPECTED } jwt_claims_kind;

/* The claims against policy: the type of each claim luamcp reads, none
 * of them (nor active) said twice, then exp, nbf, iss, aud (RFC 8707:
 * none refuses). jwt_verify calls it after the signature; the token
 * verifier on an introspection answer. why as jwt_verify's. */
jwt_verdict jwt_check_claims(const json_value *claims, jwt_claims_kind kind, const jwt_policy *policy, char *why,
                             size_t why_len);

/* The identity of verified claims (a JWT's payload, or an RFC 7662
 * introspection answer): principal "ISS sub:SUB" (else "ISS client:CLIENT_ID"),
 * scopes from "scope" (a string) or "scp" (an array), client id from
 * client_id, azp or cid. issuer is used when the claims carry no iss.
 * NULL when there is neither a sub nor a client id. */
auth_identity *jwt_identity_from_claims(const json_value *claims, const char *claims_json, size_t claims_len,
                                        const char *issuer);

#endif

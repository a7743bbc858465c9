/*
 * jwt.c - JWT access tokens checked against a JWK Set (jwt.h).
 *
 * The order of the checks is the order of trust: the token's shape and
 * size, then its header (alg from the allow-list, never none or HMAC: a
 * resource server holds no shared secret, and "HS256 with the RSA public
 * key as the secret" is the classic confusion), then the key (by kid, of
 * the kind the alg needs), then the signature, and only then the claims,
 * which are not believed before the signature is.
 */
#include "core/jwt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base64.h"
#include "core/buf.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"

/* The kinds of key, and the algs each verifies (RFC 7518 3, RFC 8037). */
typedef enum key_kind { KEY_RSA, KEY_EC_P256, KEY_OKP_ED25519 } key_kind;

typedef struct alg_info {
  const char *name;
  os_sig_alg sig;
  key_kind kind;
} alg_info;

static const alg_info ALGS[] = {
    {"RS256", OS_SIG_RS256, KEY_RSA},
    {"PS256", OS_SIG_PS256, KEY_RSA},
    {"ES256", OS_SIG_ES256, KEY_EC_P256},
    {"EdDSA", OS_SIG_EDDSA, KEY_OKP_ED25519},
};
enum { ALG_COUNT = sizeof ALGS / sizeof ALGS[0] };

static const alg_info *alg_named(const char *name, size_t len) {
  for (int i = 0; i < ALG_COUNT; i++)
    if (strlen(ALGS[i].name) == len && memcmp(ALGS[i].name, name, len) == 0) return &ALGS[i];
  return NULL;
}

/* One usable key of a set. */
typedef struct jwk {
  char *kid;            /* NULL when the JWK has none */
  const alg_info *alg;  /* the JWK's "alg", or NULL: any alg of its kind */
  key_kind kind;
  os_pubkey *key;
} jwk;

/* Owner: whoever parsed it (jwk_set_free). */
struct jwk_set {
  size_t count;
  jwk keys[];
};

static void say(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t why_len, const char *fmt, ...) {
  if (!why || !why_len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, why_len, fmt, ap);
  va_end(ap);
}

/* A JSON string with no NUL inside (a C string can stand for it). */
static bool plain_string(const json_value *v) {
  return v && v->type == JSON_STRING && strlen(v->u.string) == v->len;
}

static bool string_is(const json_value *v, const char *s) {
  return v && v->type == JSON_STRING && v->len == strlen(s) && memcmp(v->u.string, s, v->len) == 0;
}

/* The member name of obj, the last if repeated; *repeated set when it is
 * there more than once (a header or claim said twice is refused, so no
 * reader can take the other one). */
static const json_value *member(const json_value *obj, const char *name, bool *repeated) {
  const json_value *found = NULL;
  size_t len = strlen(name);
  for (uint32_t i = 0; i < obj->len; i++) {
    const json_member *m = &obj->u.members[i];
    if (m->key_len == len && memcmp(m->key, name, len) == 0) {
      if (found) *repeated = true;
      found = &m->value;
    }
  }
  return found;
}

/* Decode a base64url JWK member into a new buffer; NULL when absent or
 * not base64url. */
static uint8_t *jwk_bytes(const json_value *obj, const char *name, size_t *len) {
  const json_value *v = json_object_get(obj, name);
  if (!v || v->type != JSON_STRING || v->len == 0) return NULL;
  uint8_t *out = malloc(base64_decoded_max(v->len));
  if (out && !base64url_decode(v->u.string, v->len, out, len)) {
    free(out);
    out = NULL;
  }
  return out;
}

/* The usable key of one JWK into k; false (skipped) when luamcp cannot use it. */
static bool jwk_read(const json_value *obj, jwk *k) {
  if (obj->type != JSON_OBJECT) return false;
  const json_value *kty = json_object_get(obj, "kty"), *crv = json_object_get(obj, "crv");
  const json_value *use = json_object_get(obj, "use"), *alg = json_object_get(obj, "alg");
  const json_value *kid = json_object_get(obj, "kid"), *ops = json_object_get(obj, "key_ops");
  if (use && !string_is(use, "sig")) return false; /* an encryption key */
  if (ops) {
    bool verify = false;
    for (uint32_t i = 0; ops->type == JSON_ARRAY && i < ops->len; i++) verify |= string_is(&ops->u.items[i], "verify");
    if (!verify) return false;
  }
  if (kid && !plain_string(kid)) return false;
  const char *a_name, *b_name;
  if (string_is(kty, "RSA")) {
    k->kind = KEY_RSA, a_name = "n", b_name = "e";
  } else if (string_is(kty, "EC") && string_is(crv, "P-256")) {
    k->kind = KEY_EC_P256, a_name = "x", b_name = "y";
  } else if (string_is(kty, "OKP") && string_is(crv, "Ed25519")) {
    k->kind = KEY_OKP_ED25519, a_name = "x", b_name = NULL;
  } else {
    return false;
  }
  k->alg = NULL;
  if (alg) {
    k->alg = alg->type == JSON_STRING ? alg_named(alg->u.string, alg->len) : NULL;
    if (!k->alg || k->alg->kind != k->kind) return false; /* RS384, RSA-OAEP, HS256, or an alg of another kind */
  }
  size_t a_len = 0, b_len = 0;
  uint8_t *a = jwk_bytes(obj, a_name, &a_len), *b = b_name ? jwk_bytes(obj, b_name, &b_len) : NULL;
  if (a && (b || !b_name)) {
    char why[128];
    const char *curve = k->kind == KEY_RSA ? NULL : crv->u.string; /* a string: checked above */
    k->key = os_pubkey_import(kty->u.string, curve, a, a_len, b, b_len, why, sizeof why);
  } else {
    k->key = NULL;
  }
  free(a);
  free(b);
  if (!k->key) return false;
  k->kid = kid ? strdup(kid->u.string) : NULL;
  if (kid && !k->kid) {
    os_pubkey_free(k->key);
    return false;
  }
  return true;
}

jwk_set *jwk_set_parse(const char *json, size_t len, char *why, size_t why_len) {
  json_error err;
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    say(why, why_len, "the JWK Set is not JSON: %s", err.message);
    return NULL;
  }
  const json_value *root = json_doc_root(doc), *keys = json_object_get(root, "keys");
  if (!keys || keys->type != JSON_ARRAY) {
    say(why, why_len, "the JWK Set has no \"keys\" array");
    json_doc_free(doc);
    return NULL;
  }
  size_t room = keys->len < AUTH_MAX_JWKS_KEYS ? keys->len : AUTH_MAX_JWKS_KEYS;
  jwk_set *set = calloc(1, sizeof *set + room * sizeof set->keys[0]);
  if (!set) {
    say(why, why_len, "out of memory");
    json_doc_free(doc);
    return NULL;
  }
  for (size_t i = 0; i < room; i++)
    if (jwk_read(&keys->u.items[i], &set->keys[set->count])) set->count++;
  json_doc_free(doc);
  return set;
}

void jwk_set_free(jwk_set *set) {
  if (!set) return;
  for (size_t i = 0; i < set->count; i++) {
    free(set->keys[i].kid);
    os_pubkey_free(set->keys[i].key);
  }
  free(set);
}

size_t jwk_set_count(const jwk_set *set) { return set ? set->count : 0; }

/* ---- Tokens ----------------------------------------------------------- */

static bool base64url_char(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Split at the two dots: the header and the payload are not empty, the
 * signature may be (alg none has none, and is refused by its alg). */
static bool split(const char *token, size_t len, size_t *dot1, size_t *dot2) {
  int dots = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)token[i];
    if (c == '.') {
      if (++dots > 2) return false;
      *(dots == 1 ? dot1 : dot2) = i;
    } else if (!base64url_char(c)) {
      return false;
    }
  }
  return dots == 2 && *dot1 > 0 && *dot2 > *dot1 + 1;
}

bool jwt_looks_like(const char *token, size_t len) {
  size_t dot1, dot2;
  return token && split(token, len, &dot1, &dot2);
}

const char *jwt_verdict_text(jwt_verdict v) {
  switch (v) {
  case JWT_OK: return "valid";
  case JWT_MALFORMED: return "malformed token";
  case JWT_ALG_REFUSED: return "signing algorithm refused";
  case JWT_UNKNOWN_KEY: return "unknown signing key";
  case JWT_BAD_SIGNATURE: return "bad signature";
  case JWT_EXPIRED: return "token expired";
  case JWT_NOT_YET_VALID: return "token not yet valid";
  case JWT_WRONG_ISSUER: return "wrong issuer";
  case JWT_WRONG_AUDIENCE: return "wrong audience";
  }
  return "invalid token";
}

/* Is the alg (len bytes) one of the space-separated list? */
static bool listed(const char *list, const char *alg, size_t len) {
  const char *word;
  size_t word_len;
  for (const char *p = list; auth_scope_next(&p, &word, &word_len);)
    if (word_len == len && memcmp(word, alg, len) == 0) return true;
  return false;
}

/* RFC 7515 4.1.9 and RFC 9068 2.1: typ is compared without case, and
 * "application/" may be left out. A JWT access token says at+jwt; many
 * servers still say JWT, or nothing. */
static bool typ_accepted(const json_value *typ) {
  if (!typ) return true;
  if (!plain_string(typ)) return false;
  const char *t = typ->u.string;
  if (strncasecmp(t, "application/", 12) == 0) t += 12;
  return strcasecmp(t, "at+jwt") == 0 || strcasecmp(t, "jwt") == 0;
}

/* a compared with the time t: <0, 0 or >0. */
static int compare_time(const json_value *a, int64_t t) {
  if (a->type == JSON_INTEGER) return a->u.integer < t ? -1 : a->u.integer > t;
  double d = a->u.number, dt = (double)t;
  return d < dt ? -1 : d > dt;
}

static int64_t saturating_add(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

/* Decoded parts of a token, and what they were parsed into. */
typedef struct token_parts {
  uint8_t *header, *payload, *signature;
  size_t header_len, payload_len, signature_len;
  json_doc *header_doc, *claims_doc;
} token_parts;

static void parts_free(token_parts *t) {
  free(t->header);
  free(t->payload);
  free(t->signature);
  json_doc_free(t->header_doc);
  json_doc_free(t->claims_doc);
}

/* Decode s[0..n) into a new NUL-terminated buffer. */
static bool decode_part(const char *s, size_t n, uint8_t **out, size_t *out_len) {
  *out = malloc(base64_decoded_max(n) + 1);
  if (!*out || !base64url_decode(s, n, *out, out_len)) return false;
  (*out)[*out_len] = '\0';
  return true;
}

/* The header: alg allowed, typ fitting, no crit. The alg in *alg. */
static jwt_verdict check_header(const json_value *header, const jwt_policy *policy, const alg_info **alg, char *why,
                                size_t why_len) {
  bool repeated = false;
  const json_value *a = member(header, "alg", &repeated), *typ = member(header, "typ", &repeated);
  const json_value *crit = member(header, "crit", &repeated), *kid = member(header, "kid", &repeated);
  if (repeated) {
    say(why, why_len, "the token's header names a parameter twice");
    return JWT_MALFORMED;
  }
  if (!plain_string(a)) {
    say(why, why_len, "the token's header has no alg");
    return JWT_MALFORMED;
  }
  /* Never none, never HMAC, whatever the allow-list says: a resource
   * server has no shared secret, and its public key is not one. */
  if (strcasecmp(a->u.string, "none") == 0 || strncasecmp(a->u.string, "HS", 2) == 0) {
    say(why, why_len, "unsigned and HMAC-signed tokens are refused");
    return JWT_ALG_REFUSED;
  }
  const char *allowed = policy->algorithms ? policy->algorithms : JWT_DEFAULT_ALGORITHMS;
  *alg = alg_named(a->u.string, a->len);
  if (!*alg || !listed(allowed, a->u.string, a->len)) {
    say(why, why_len, "the token's signing algorithm is not one of: %s", allowed);
    return JWT_ALG_REFUSED;
  }
  if (!typ_accepted(typ)) {
    say(why, why_len, "the token's typ is not at+jwt or JWT");
    return JWT_MALFORMED;
  }
  if (crit) {
    say(why, why_len, "the token's header has critical extensions (crit) luamcp does not understand");
    return JWT_MALFORMED;
  }
  if (kid && !plain_string(kid)) {
    say(why, why_len, "the token's kid is not a string");
    return JWT_MALFORMED;
  }
  return JWT_OK;
}

/* Does some key of the set, by the header's kid or (without one) of the
 * alg's kind, sign the token? */
static jwt_verdict check_signature(const char *token, size_t signed_len, const json_value *header,
                                   const alg_info *alg, const token_parts *t, const jwk_set *keys, char *why,
                                   size_t why_len) {
  bool repeated = false;
  const json_value *kid = member(header, "kid", &repeated);
  size_t named = 0, fitting = 0;
  for (size_t i = 0; keys && i < keys->count; i++) {
    const jwk *k = &keys->keys[i];
    if (kid && !(k->kid && strcmp(k->kid, kid->u.string) == 0)) continue;
    named++;
    if (k->kind != alg->kind || (k->alg && k->alg != alg)) continue;
    if (!kid && fitting == AUTH_MAX_KEYS_TRIED) break;
    fitting++;
    if (os_pubkey_verify(k->key, alg->sig, token, signed_len, t->signature, t->signature_len)) return JWT_OK;
  }
  if (kid && named == 0) {
    say(why, why_len, "no key of the issuer's JWK Set has the token's kid");
    return JWT_UNKNOWN_KEY;
  }
  if (fitting == 0) {
    if (kid) {
      say(why, why_len, "the key the token names is not a key for its signing algorithm");
      return JWT_ALG_REFUSED;
    }
    say(why, why_len, "the issuer's JWK Set has no key for the token's signing algorithm");
    return JWT_UNKNOWN_KEY;
  }
  say(why, why_len, "the token's signature does not verify");
  return JWT_BAD_SIGNATURE;
}

jwt_verdict jwt_check_claims(const json_value *claims, jwt_claims_kind kind, const jwt_policy *policy, char *why,
                             size_t why_len) {
  static const char *const STRINGS[] = {"iss", "sub", "client_id", "azp", "cid", "scope"};
  static const char *const NUMBERS[] = {"exp", "nbf", "iat"};
  bool repeated = false;
  if (!claims || claims->type != JSON_OBJECT) {
    say(why, why_len, "the token's claims are not a JSON object");
    return JWT_MALFORMED;
  }
  /* The member an introspection answer is judged by first (RFC 7662 2.2). */
  if (kind == JWT_CLAIMS_INTROSPECTED) member(claims, "active", &repeated);
  for (size_t i = 0; i < sizeof STRINGS / sizeof STRINGS[0]; i++) {
    const json_value *v = member(claims, STRINGS[i], &repeated);
    if (v && !plain_string(v)) {
      say(why, why_len, "the token's %s claim is not a string", STRINGS[i]);
      return JWT_MALFORMED;
    }
  }
  for (size_t i = 0; i < sizeof NUMBERS / sizeof NUMBERS[0]; i++) {
    const json_value *v = member(claims, NUMBERS[i], &repeated);
    if (v && !json_is_number(v)) {
      say(why, why_len, "the token's %s claim is not a number", NUMBERS[i]);
      return JWT_MALFORMED;
    }
  }
  const json_value *aud = member(claims, "aud", &repeated), *scp = member(claims, "scp", &repeated);
  if (repeated) {
    say(why, why_len, "the token names a claim twice");
    return JWT_MALFORMED;
  }
  /* scp's items that are not strings are left out of the scopes, not refused. */
  if (scp && !plain_string(scp) && scp->type != JSON_ARRAY) {
    say(why, why_len, "the token's scp claim is not a string or an array of strings");
    return JWT_MALFORMED;
  }
  if (aud && aud->type == JSON_ARRAY) {
    for (uint32_t i = 0; i < aud->len; i++) {
      if (aud->u.items[i].type != JSON_STRING) {
        say(why, why_len, "the token's aud claim is not a string or an array of strings");
        return JWT_MALFORMED;
      }
    }
  } else if (aud && aud->type != JSON_STRING) {
    say(why, why_len, "the token's aud claim is not a string or an array of strings");
    return JWT_MALFORMED;
  }

  int64_t leeway = policy->leeway_s > 0 ? policy->leeway_s : 0;
  const json_value *exp = json_object_get(claims, "exp"), *nbf = json_object_get(claims, "nbf");
  /* RFC 9068 2.2: exp is REQUIRED; a token that never expires is refused.
   * An introspection answer's exp is optional (RFC 7662 2.2): the
   * authorization server says the token is active now. */
  if (!exp && kind == JWT_CLAIMS_SIGNED) {
    say(why, why_len, "the token has no expiry (exp)");
    return JWT_MALFORMED;
  }
  /* RFC 7519 4.1.4: the current time must be before exp. */
  if (exp && compare_time(exp, saturating_add(policy->now_s, -leeway)) <= 0) {
    say(why, why_len, "the token has expired");
    return JWT_EXPIRED;
  }
  if (nbf && compare_time(nbf, saturating_add(policy->now_s, leeway)) > 0) {
    say(why, why_len, "the token is not valid yet (nbf)");
    return JWT_NOT_YET_VALID;
  }
  /* No issuer or audience to check against refuses every token: a
   * verifier that lost its configuration fails closed. */
  const json_value *iss = json_object_get(claims, "iss");
  /* An introspection answer without iss speaks for the authorization
   * server asked (RFC 7662 makes iss optional). */
  bool issuer_implied = kind == JWT_CLAIMS_INTROSPECTED && !iss;
  if (!policy->issuer || (!issuer_implied && !string_is(iss, policy->issuer))) {
    say(why, why_len, "the token was not issued by %s", policy->issuer ? policy->issuer : "the configured issuer");
    return JWT_WRONG_ISSUER;
  }
  if (!aud) {
    say(why, why_len, "the token names no audience (aud), so nothing says it is meant for %s",
        policy->audience ? policy->audience : "this server");
    return JWT_WRONG_AUDIENCE;
  }
  bool ours = policy->audience && string_is(aud, policy->audience);
  for (uint32_t i = 0; policy->audience && !ours && aud && aud->type == JSON_ARRAY && i < aud->len; i++)
    ours = string_is(&aud->u.items[i], policy->audience);
  if (!ours) {
    say(why, why_len, "the token's audience is not %s", policy->audience ? policy->audience : "this server");
    return JWT_WRONG_AUDIENCE;
  }
  return JWT_OK;
}

jwt_verdict jwt_verify(const char *token, size_t len, const jwk_set *keys, const jwt_policy *policy,
                       auth_identity **out, char *why, size_t why_len) {
  *out = NULL;
  if (why && why_len) why[0] = '\0';
  if (len > AUTH_MAX_TOKEN_BYTES) {
    say(why, why_len, "the token is longer than %u bytes", (unsigned)AUTH_MAX_TOKEN_BYTES);
    return JWT_MALFORMED;
  }
  size_t dot1, dot2;
  if (!token || !split(token, len, &dot1, &dot2)) {
    say(why, why_len, "the token is not three base64url parts separated by dots");
    return JWT_MALFORMED;
  }
  token_parts t = {0};
  jwt_verdict verdict = JWT_MALFORMED;
  json_error err;
  if (!decode_part(token, dot1, &t.header, &t.header_len) ||
      !decode_part(token + dot1 + 1, dot2 - dot1 - 1, &t.payload, &t.payload_len) ||
      !decode_part(token + dot2 + 1, len - dot2 - 1, &t.signature, &t.signature_len)) {
    say(why, why_len, "a part of the token is not base64url");
    goto done;
  }
  t.header_doc = json_parse((const char *)t.header, t.header_len, MAX_JSON_DEPTH, &err);
  const json_value *header = t.header_doc ? json_doc_root(t.header_doc) : NULL;
  if (!header || header->type != JSON_OBJECT) {
    say(why, why_len, "the token's header is not a JSON object");
    goto done;
  }
  const alg_info *alg = NULL;
  if ((verdict = check_header(header, policy, &alg, why, why_len)) != JWT_OK) goto done;
  if (t.signature_len == 0) {
    say(why, why_len, "the token has no signature");
    verdict = JWT_BAD_SIGNATURE;
    goto done;
  }
  if ((verdict = check_signature(token, dot2, header, alg, &t, keys, why, why_len)) != JWT_OK) goto done;

  verdict = JWT_MALFORMED;
  t.claims_doc = json_parse((const char *)t.payload, t.payload_len, MAX_JSON_DEPTH, &err);
  const json_value *claims = t.claims_doc ? json_doc_root(t.claims_doc) : NULL;
  if (!claims || claims->type != JSON_OBJECT) {
    say(why, why_len, "the token's claims are not a JSON object");
    goto done;
  }
  if ((verdict = jwt_check_claims(claims, JWT_CLAIMS_SIGNED, policy, why, why_len)) != JWT_OK) goto done;
  *out = jwt_identity_from_claims(claims, (const char *)t.payload, t.payload_len, policy->issuer);
  if (!*out) {
    say(why, why_len, "the token has neither a subject (sub) nor a client id");
    verdict = JWT_MALFORMED;
  }
done:
  parts_free(&t);
  return verdict;
}

/* ---- Identity ----------------------------------------------------------- */

/* The string member name of claims when it is a plain, non-empty string. */
static const char *claim_string(const json_value *claims, const char *name) {
  const json_value *v = json_object_get(claims, name);
  return plain_string(v) && v->len > 0 ? v->u.string : NULL;
}

auth_identity *jwt_identity_from_claims(const json_value *claims, const char *claims_json, size_t claims_len,
                                        const char *issuer) {
  if (!claims || claims->type != JSON_OBJECT) return NULL;
  const char *iss = claim_string(claims, "iss");
  if (!iss) iss = issuer ? issuer : "";
  const char *sub = claim_string(claims, "sub");
  const char *client_id = claim_string(claims, "client_id");
  if (!client_id) client_id = claim_string(claims, "azp");
  if (!client_id) client_id = claim_string(claims, "cid");
  if (!sub && !client_id) return NULL;

  buf principal = BUF_INIT, scopes = BUF_INIT;
  /* Tagged, so that a subject "client:x" is never the client x. */
  if (sub) buf_printf(&principal, "%s sub:%s", iss, sub);
  else buf_printf(&principal, "%s client:%s", iss, client_id);
  /* "scope": space-separated (RFC 9068 2.2.3, RFC 7662); "scp": an array
   * of strings (Okta, Keycloak), or a string (Entra ID). */
  const char *scope = claim_string(claims, "scope");
  const json_value *scp = json_object_get(claims, "scp");
  if (scope) {
    buf_append_str(&scopes, scope);
  } else if (plain_string(scp)) {
    buf_append_str(&scopes, scp->u.string);
  } else if (scp && scp->type == JSON_ARRAY) {
    for (uint32_t i = 0; i < scp->len; i++) {
      const json_value *s = &scp->u.items[i];
      if (!plain_string(s) || s->len == 0) continue;
      if (scopes.len) buf_putc(&scopes, ' ');
      buf_append(&scopes, s->u.string, s->len);
    }
  }
  const json_value *exp = json_object_get(claims, "exp");
  int64_t expires = 0;
  if (exp && exp->type == JSON_INTEGER) expires = exp->u.integer;
  else if (exp && exp->type == JSON_FLOAT && exp->u.number > 0 && exp->u.number < 9.2e18) expires = (int64_t)exp->u.number;

  char *json = malloc(claims_len + 1);
  auth_identity *id = NULL;
  if (json) {
    memcpy(json, claims_json, claims_len);
    json[claims_len] = '\0';
    id = auth_identity_new(principal.data, sub, client_id, scopes.data ? scopes.data : "", expires, json);
  }
  free(json);
  buf_free(&principal);
  buf_free(&scopes);
  return id;
}

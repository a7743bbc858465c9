/*
 * auth.h - who a request comes from (MCP authorization: luamcp is an OAuth
 * 2.1 resource server), and the contract between the transport that reads
 * a bearer token and the verifier that checks it.
 *
 * The transport (HTTP) takes the token from the Authorization header and
 * asks an auth_verifier; the verifier (app/auth_verifier.c: JWTs against the
 * issuer's JWKS, opaque tokens by RFC 7662 introspection) answers at once
 * from its caches or later, on the loop, once it has fetched what it needs.
 * What it answers is an auth_identity, which the exchange, the calls it
 * starts, the legacy session it creates and the MCP tasks they create keep a
 * reference to: every later request to those must come from the same
 * principal (auth_same_principal), or it is told they do not exist.
 *
 * Nothing here needs Lua or libuv: the core checks ownership with it, the
 * app shows it to Lua as ctx.auth.
 */
#ifndef LUAMCP_AUTH_H
#define LUAMCP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* A verified caller. Reference counted (auth_identity_ref/unref); immutable
 * once made. Owner: whoever holds a reference (an HTTP exchange, a call,
 * a session, a job). */
typedef struct auth_identity {
  int refs;
  /* What everything is bound to: the issuer and the subject ("ISS
   * sub:SUB"), or the issuer and the client id for a token with no subject
   * (client credentials: "ISS client:ID"); tagged so the two never
   * collide. Never empty. */
  char *principal;
  char *subject;     /* sub, or NULL */
  char *client_id;   /* client_id (RFC 9068), azp or cid; or NULL */
  char *scopes;      /* the granted scopes, space-separated, "" for none */
  int64_t expires_s; /* exp, unix seconds; 0: none given */
  char *claims_json; /* the verified claims (the JWT's payload, or the introspection answer): a JSON object */
} auth_identity;

/* A new identity with one reference; the strings are copied (NULL stays
 * NULL, except principal and scopes, which must be given). NULL when out
 * of memory. */
auth_identity *auth_identity_new(const char *principal, const char *subject, const char *client_id, const char *scopes,
                                 int64_t expires_s, const char *claims_json);
auth_identity *auth_identity_ref(auth_identity *id); /* NULL passes through */
void auth_identity_unref(auth_identity *id);         /* NULL is fine */

/* The next word of a space-separated list (scopes, algs) at *cursor: true with
 * *word and *len set and the cursor moved past it; false at the end. */
bool auth_scope_next(const char **cursor, const char **word, size_t *len);
/* Does id hold every scope of required (space-separated; NULL or "" needs
 * none)? A NULL id (no authorization configured, stdio, the static bearer
 * token) holds every scope: authorization is the transport's to require. */
bool auth_has_scopes(const auth_identity *id, const char *required);
/* Is b the same caller as a? Two NULLs are (nobody is authenticated); a
 * NULL and a non-NULL are not. */
bool auth_same_principal(const auth_identity *a, const auth_identity *b);
/* The principal, or "" for NULL: what a binding string (requestState, a
 * forwarded task request) carries. */
const char *auth_principal(const auth_identity *id);
/* scopes (space-separated, NULL for none) as a JSON array of strings,
 * appended to out. */
void auth_write_scopes_json(const char *scopes, buf *out);
/* ctx.auth for Lua: {"subject":...,"client_id":...,"scopes":[...],
 * "expires_at":N,"claims":{...}} (absent fields left out), appended to
 * out as JSON; "null" for NULL. */
void auth_identity_write_json(const auth_identity *id, buf *out);

/* ---- The verifier -------------------------------------------------------- */

/* The answer to one token. */
typedef struct auth_verdict {
  /* 0: the token is good (identity set, one reference for the receiver).
   * 401: missing, malformed, expired, not yet valid, wrong issuer or
   *      audience, bad signature, unknown key, an alg not allowed, revoked.
   * 503: it could not be checked now (the authorization server or its JWKS
   *      cannot be reached): try again later, the token may be fine. */
  int status;
  /* Static. 401: "invalid_token", the WWW-Authenticate error (RFC 6750).
   * 503: "temporarily_unavailable", for logs only: the answer goes out
   * with Retry-After and no WWW-Authenticate (the token was not judged). */
  const char *error;
  char description[160];   /* for the WWW-Authenticate error_description and the JSON-RPC message */
  auth_identity *identity;
} auth_verdict;

/* Told the verdict of a check that could not be answered at once. Runs on
 * the loop, never inside check(). */
typedef void (*auth_done_fn)(void *data, auth_verdict *verdict);

typedef struct auth_verifier_ops {
  /* Check token (len bytes, the part after "Bearer ") for a request to
   * resource (this server's canonical URI, RFC 8707: the audience the token
   * must name). Returns true when answered now (*out filled); otherwise
   * false, *pending set, and done(data, ...) is called exactly once later
   * unless cancel(pending) comes first. */
  bool (*check)(void *verifier, const char *token, size_t len, const char *resource, auth_done_fn done, void *data,
                auth_verdict *out, void **pending);
  /* The waiter is gone (its connection closed): done will not be called. */
  void (*cancel)(void *verifier, void *pending);
} auth_verifier_ops;

/* Everything the HTTP transport needs to act as a resource server. Owner:
 * the command that serves (cli), for the life of the server. */
typedef struct auth_config {
  const auth_verifier_ops *ops; /* NULL: OAuth is off */
  void *verifier;
  /* This server's canonical URI (RFC 8707 / RFC 9728 "resource"); NULL:
   * made per request from its Host and the MCP path, which is allowed only
   * on a loopback address (where Host is one of our own names). */
  const char *resource;
  const char **authorization_servers; /* issuers, for the metadata */
  int authorization_server_count;
  /* scopes_supported, and the scope= of a 401 challenge (space-separated),
   * or NULL. */
  const char *scopes;
} auth_config;

#endif

/*
 * auth_verifier.h - checks bearer tokens for the HTTP transport (the
 * auth_verifier_ops of core/auth.h) on the libuv loop, never blocking it:
 *
 *   JWTs (core/jwt.h) against the issuer's JWK Set, found through RFC 8414
 *   (/.well-known/oauth-authorization-server) or OpenID discovery
 *   (/.well-known/openid-configuration) from the issuer, fetched with
 *   libcurl (app/curl_lib.h), kept per its Cache-Control, fetched again
 *   once when a token names an unknown kid (at most once per
 *   AUTH_JWKS_REFETCH_FLOOR_MS);
 *   opaque tokens through RFC 7662 introspection, each answer kept for the
 *   token's remaining life (bounded).
 *
 * Checks waiting for the same fetch wait together; a fetch that fails
 * answers them 503 (temporarily_unavailable), not 401.
 */
#ifndef LUAMCP_AUTH_VERIFIER_H
#define LUAMCP_AUTH_VERIFIER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "core/auth.h"

/* What the operator configured (mcp.server{auth = {...}}, overridden by
 * the command line's --auth-*). Strings are copied. */
typedef struct auth_settings {
  const char *issuer;                 /* required: the authorization server's issuer identifier */
  const char *jwks_uri;               /* instead of the one discovery finds */
  const char *jwks_file;              /* a JWK Set on disk: no fetching (e.g. no libcurl here) */
  const char *introspection_endpoint; /* instead of discovery's; opaque tokens are refused without one */
  const char *client_id;              /* this resource server's credentials at the introspection endpoint */
  const char *client_secret;
  const char *algorithms;             /* allowed algs, space-separated; NULL: JWT_DEFAULT_ALGORITHMS */
  int leeway_s;                       /* < 0: AUTH_DEFAULT_LEEWAY_S */
} auth_settings;

typedef struct auth_verifier auth_verifier;

/* A verifier on loop; NULL with why when the settings cannot work (no
 * issuer, an unreadable jwks_file). Discovery starts at once, in the
 * background. */
auth_verifier *auth_verifier_new(uv_loop_t *loop, const auth_settings *settings, char *why, size_t why_len);
/* Stop its transfers and timers; every waiting check is cancelled (its
 * done is not called). Its handles close on the next loop turns. */
void auth_verifier_free(auth_verifier *v);

extern const auth_verifier_ops AUTH_VERIFIER_OPS;

#endif

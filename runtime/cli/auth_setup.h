/*
 * auth_setup.h - luamcp run's OAuth 2.1 resource server settings: the
 * --auth-* flags, merged field by field over mcp.server{auth = {...}} (the
 * operator's flag wins), checked, and turned into a verifier
 * (app/auth_verifier.h) and the HTTP transport's auth_config.
 */
#ifndef LUAMCP_CLI_AUTH_SETUP_H
#define LUAMCP_CLI_AUTH_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "app/auth_verifier.h"
#include "transport/http_transport.h"

/* The --auth-* flags as given (NULL / -1: not given). */
typedef struct auth_flags {
  const char *issuer, *audience, *scopes, *jwks_uri, *jwks_file, *introspection_endpoint, *client_id,
      *client_secret_env, *algorithms;
  int leeway_s;
  bool any; /* some --auth-* flag was given */
} auth_flags;

void auth_flags_init(auth_flags *f);
/* Is a an --auth-* flag? Then *taken is set (the value is consumed), or
 * *err says what is wrong with its value. */
bool auth_flag_parse(auth_flags *f, const char *a, const char *value, const char **err);

/* What serving with OAuth keeps for its life. Owner: luamcp run's runtime. */
typedef struct auth_setup {
  auth_verifier *verifier;
  char *issuer, *audience, *scopes;
  const char *servers[1];
} auth_setup;

/* Merge the flags over the script's settings (script_json: mcp.server{auth}
 * as the app describes it, or NULL), check them against the rest of the
 * HTTP options (--bearer-token-env, the listen address), start the
 * verifier and fill http->auth. OAuth off (no issuer anywhere): true,
 * nothing done. false with why when it cannot serve. */
bool auth_setup_start(auth_setup *s, uv_loop_t *loop, const auth_flags *f, const char *script_json, http_options *http,
                      char *why, size_t why_len);
void auth_setup_free(auth_setup *s);
/* The TCP ports (at most max, no repeats) of the URLs the verifier will
 * fetch: the issuer's (its discovery), and --auth-jwks-uri's and
 * --auth-introspection-endpoint's when given. 0 when OAuth is off. For the
 * process's confinement, which is applied before serving and cannot
 * grow: a discovered endpoint on another port must be given explicitly. */
size_t auth_setup_ports(const auth_flags *f, const char *script_json, unsigned *ports, size_t max);

#endif

/*
 * client_oauth.h - the C half of luamcp call as an OAuth client (an HTTP
 * fetch for discovery and the token endpoint, a JWS signer for
 * private_key_jwt), added to the client state's luamcp.client table.
 */
#ifndef LUAMCP_CLIENT_OAUTH_H
#define LUAMCP_CLIENT_OAUTH_H

#include <lua.h>
#include <stdbool.h>

/* Add oauth_fetch, jws_sign, base64_encode, random_id and the rest (see
 * client_oauth.c) to the table on the top of L's stack; was_interrupted
 * ends a login's wait on Ctrl-C. */
void client_oauth_register(lua_State *L, bool (*was_interrupted)(void));

#endif

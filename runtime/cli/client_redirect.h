/*
 * client_redirect.h - the loopback listener an OAuth login's browser comes
 * back to (client_redirect.c), added to the client state's luamcp.client.
 */
#ifndef LUAMCP_CLIENT_REDIRECT_H
#define LUAMCP_CLIENT_REDIRECT_H

#include <lua.h>
#include <stdbool.h>

/* Add redirect_listen to the table on the top of L's stack; a wait ends
 * when was_interrupted() says Ctrl-C was pressed. */
void client_redirect_register(lua_State *L, bool (*was_interrupted)(void));

#endif

/*
 * lua_store.h - mcp.store, in the process or in Redis (lua_store.c).
 */
#ifndef LUAMCP_LUA_STORE_H
#define LUAMCP_LUA_STORE_H

#include "app/app.h"

/* Add the store table to the mcp.core module at module_idx. */
void lua_store_register(lua_State *L, int module_idx);

#endif

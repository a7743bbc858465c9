/*
 * lua_core.h - the mcp.core module: the C functions the Lua library builds on.
 */
#ifndef LUAMCP_LUA_CORE_H
#define LUAMCP_LUA_CORE_H

#include <lua.h>

int luaopen_mcp_core(lua_State *L);
/* base64_decode(text) -> bytes | nil, message (also the client side's). */
int lua_base64_decode(lua_State *L);

#endif

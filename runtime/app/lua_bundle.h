/*
 * lua_bundle.h - the mcp.bundle module: a built program's data files.
 */
#ifndef LUAMCP_LUA_BUNDLE_H
#define LUAMCP_LUA_BUNDLE_H

#include <lua.h>

int luaopen_mcp_bundle(lua_State *L);

#endif

/*
 * lua_sqlite.h - core.sqlite: SQLite connections that belong to the app,
 * their statements run on libuv's thread pool (lua/mcp/sqlite.lua is
 * mcp.sqlite, the scripts' face).
 */
#ifndef LUAMCP_LUA_SQLITE_H
#define LUAMCP_LUA_SQLITE_H

#include <lua.h>

/* Add core.sqlite (open, version, methods) to the module table at module_idx. */
void lua_sqlite_register(lua_State *L, int module_idx);

#endif

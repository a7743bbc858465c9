/*
 * lua_fs.h - mcp.fs: file operations on libuv's thread pool.
 */
#ifndef LUAMCP_LUA_FS_H
#define LUAMCP_LUA_FS_H

#include <lua.h>

/* Add the mcp.fs functions to the module table at module_idx. */
void lua_fs_register(lua_State *L, int module_idx);

#endif

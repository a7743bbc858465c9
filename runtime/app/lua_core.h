/*
 * lua_core.h - the mcp.core module: the C functions the Lua library builds on.
 */
#ifndef LUAMCP_LUA_CORE_H
#define LUAMCP_LUA_CORE_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

int luaopen_mcp_core(lua_State *L);
/* Run the mcp.everywhere function name with args (a JSON array) that
 * another process ran (the bus); false with the reason logged. Only where
 * no Lua of v runs (not inside a task, nor under a computing handler). */
struct vm;
bool core_run_everywhere(struct vm *v, const char *name, size_t name_len, const char *args, size_t args_len);

/* base64_decode(text) -> bytes | nil, message (also the client side's). */
int lua_base64_decode(lua_State *L);

#endif

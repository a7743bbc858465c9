/*
 * lua_state.h - mcp.state and mcp.info: what a generation keeps across reloads
 * and knows about the app.
 */
#ifndef LUAMCP_LUA_STATE_H
#define LUAMCP_LUA_STATE_H

#include <lua.h>

/* mcp.state(key, init); upvalue 1: the vm. */
int lua_state_get(lua_State *L);
/* mcp.info(); upvalue 1: the vm. */
int lua_state_info(lua_State *L);

#endif

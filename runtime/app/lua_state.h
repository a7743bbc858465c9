/*
 * lua_state.h - mcp.state and mcp.info: what a generation keeps across reloads
 * and knows about the app.
 */
#ifndef LUAMCP_LUA_STATE_H
#define LUAMCP_LUA_STATE_H

#include "app/app.h"

/* mcp.state(key, init); upvalue 1: the vm. */
int lua_state_get(lua_State *L);
/* mcp.info(); upvalue 1: the vm. */
int lua_state_info(lua_State *L);
/* At a reload, after `to` loaded: copy into it the mcp.state keys of
 * `from` it did not ask for while loading (a handler made them), so state a
 * handler created survives like state the top level created. */
void lua_state_carry(vm *from, vm *to);

#endif

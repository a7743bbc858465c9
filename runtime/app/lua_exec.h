/*
 * lua_exec.h - mcp.exec: run a program without a shell, without blocking.
 */
#ifndef LUAMCP_LUA_EXEC_H
#define LUAMCP_LUA_EXEC_H

#include "app/app.h"

int lua_exec(lua_State *L);
/* Kill every child the generation still runs (it is being freed). */
void lua_exec_kill_all(vm *v);

#endif

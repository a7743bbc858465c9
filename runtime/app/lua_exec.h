/*
 * lua_exec.h - mcp.exec: run a program without a shell, without blocking.
 */
#ifndef LUAMCP_LUA_EXEC_H
#define LUAMCP_LUA_EXEC_H

#include "app/app.h"

int lua_exec(lua_State *L);
/* argv (a list) or env (a map: NAME=value entries; loader variables left
 * out of a confined server's child, with a warning) at list_idx as a
 * NULL-terminated array of strings for uv_spawn; api and what name them
 * in errors ("mcp.exec", "env"). The array is a userdata pushed on the
 * stack and the strings stay referenced from the stack or the list: both
 * live until the calling C function returns, which is all uv_spawn needs. */
char **exec_string_list(lua_State *L, int list_idx, const char *api, const char *what, bool env);

#endif

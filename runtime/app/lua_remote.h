/*
 * lua_remote.h - luamcp.remote: the server's own connections to other MCP
 * servers (a child process over stdio, or a Streamable HTTP URL), owned by
 * the app so that they outlive reloads. lua/mcp/remote.lua builds
 * mcp.client on it; lua_remote.c describes the interface.
 */
#ifndef LUAMCP_LUA_REMOTE_H
#define LUAMCP_LUA_REMOTE_H

#include "app/app.h"

/* package.preload["luamcp.remote"] of a generation (upvalue 1: its vm). */
int luaopen_luamcp_remote(lua_State *L);
/* What it holds is let go through the teardown lists (app/teardown.h): a
 * generation's hold on a connection when the generation is freed, every
 * connection when the app stops. */

#endif

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
/* The generation v has been freed (its Lua state is closed): it holds
 * none of its connections any more (one nobody holds is closed, or kept
 * a while for the next generation when it has a key). */
void lua_remote_release_vm(vm *v);
/* The server stops: close every connection now (children killed, HTTP
 * transfers stopped); the memory goes in the handles' close callbacks. */
void lua_remote_stop_all(lua_app *app);

#endif

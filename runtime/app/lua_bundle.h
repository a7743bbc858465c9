/*
 * lua_bundle.h - the mcp.bundle module: a built program's data files.
 */
#ifndef LUAMCP_LUA_BUNDLE_H
#define LUAMCP_LUA_BUNDLE_H

#include <lua.h>

#include "app/app.h"

int luaopen_mcp_bundle(lua_State *L);
/* Remember a file this generation read from disk (a script, a module, a
 * skill's file), for luamcp dev to watch its folder. */
void bundle_note_file(vm *v, const char *path);

#endif

/* version.h - the luamcp version, and the Lua release it embeds. */
#ifndef LUAMCP_VERSION_H
#define LUAMCP_VERSION_H

#include <lua.h>

#define LUAMCP_VERSION "0.1.0"
#define LUA_RELEASE_STRING LUA_RELEASE

#endif

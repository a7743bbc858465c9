/*
 * lua_skills.h - YAML front matter and SHA-256 digests for serving Agent
 * Skills: mcp.core.yaml_decode and mcp.core.sha256.
 */
#ifndef LUAMCP_LUA_SKILLS_H
#define LUAMCP_LUA_SKILLS_H

#include <lua.h>

/* Add yaml_decode and sha256 to the mcp.core table at core_table. */
void lua_skills_register(lua_State *L, int core_table);

#endif

/*
 * lua_schema.h - compiled JSON Schemas as Lua values, and the check of a
 * tools/call's arguments.
 */
#ifndef LUAMCP_LUA_SCHEMA_H
#define LUAMCP_LUA_SCHEMA_H

#include "app/app.h"

void lua_schema_register(lua_State *L);
int lua_schema_compile(lua_State *L);
int lua_schema_validate(lua_State *L);
int lua_schema_tool_input(lua_State *L);
void lua_schema_forget_tools(vm *v);
/* Check a tools/call's arguments against the tool's inputSchema. Pushes nil
 * (valid, or nothing to check) or {text, errors}; with coercion on, may
 * replace params[params_idx].arguments with the corrected value. Sets
 * *timeout_ms to the tool's own limit when it has one. */
void lua_schema_check_call(lua_State *co, vm *v, const json_value *params, int params_idx, int *timeout_ms);

#endif

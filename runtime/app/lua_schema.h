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
/* Whether a tool's calls may become MCP tasks (mcp.tool{task = ...}). */
typedef enum tool_task_mode { TOOL_TASK_NEVER, TOOL_TASK_OPTIONAL, TOOL_TASK_REQUIRED } tool_task_mode;

/* What tools/call needs to know about the tool before its handler runs.
 * Filled in by lua_schema_check_call; the caller sets the defaults. */
typedef struct tool_plan {
  int timeout_ms;
  bool own_timeout;  /* the tool set timeout_ms (a task keeps it; the default does not apply) */
  tool_task_mode task;
  int task_after_ms;
  int task_poll_ms;
  /* mcp.tool{scopes = ...}: what the caller must hold (space-separated,
   * borrowed from the tool's registration), or NULL. */
  const char *scopes;
  bool known; /* the app has the tool the call names */
} tool_plan;

/* Check a tools/call's arguments against the tool's inputSchema. Pushes nil
 * (valid, or nothing to check) or {text, errors}; with coercion on, may
 * replace params[params_idx].arguments with the corrected value. Fills in
 * plan from the tool's registration. */
void lua_schema_check_call(lua_State *co, vm *v, const json_value *params, int params_idx, tool_plan *plan);

#endif

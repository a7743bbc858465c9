/*
 * lua_json.h - JSON values in and out of Lua, exactly.
 *
 * Into Lua: objects become tables, arrays become tables marked with the
 * array metatable (so an empty one goes back out as []), integers stay Lua
 * integers, fractions are floats, null is mcp.null (a NULL light userdata,
 * the same value as cjson.null).
 *
 * Out of Lua: a table marked with mcp.array is an array, one marked with
 * mcp.object an object; an unmarked table is an array when its keys are
 * exactly 1..n (n > 0), otherwise an object; an empty unmarked table is {}.
 * A table marked raw carries pre-encoded JSON text that is copied verbatim.
 * Floats are written so they read back identical and stay floats (5.0, not
 * 5); NaN, infinities, functions and the like are errors, never null.
 *
 * This codec is ours, not lua-cjson's: a script changing its cjson settings
 * cannot change the wire.
 */
#ifndef LUAMCP_LUA_JSON_H
#define LUAMCP_LUA_JSON_H

#include <lua.h>
#include <stdbool.h>

#include "core/buf.h"
#include "core/chain.h"
#include "core/json.h"

/* Registry keys of the marker metatables. */
#define LJSON_ARRAY_MT "mcp.array"
#define LJSON_OBJECT_MT "mcp.object"
#define LJSON_RAW_MT "mcp.raw_json"

/* Create the marker metatables (once per state). */
void ljson_init(lua_State *L);

/* Push a parsed value. Raises a Lua error only when out of memory. */
/* A read-only view of a table (ctx.auth) keeps the table in this field of
 * its metatable: the encoder writes that table. */
#define LJSON_VIEW_FIELD "__view_of"

void ljson_push(lua_State *L, const json_value *v);

/* Encode the value at idx. On failure returns false and leaves a message in
 * err (the buffer may hold partial output). */
bool ljson_encode(lua_State *L, int idx, buf *out, char *err, size_t errlen);
/* The same into a chain: strings of LJSON_BORROW_BYTES or more are not
 * copied but borrowed (core/chain.h). When any was, a table anchoring them
 * is left on the stack: the caller keeps it (in the registry, for the
 * chain's lease) until the chain has been written, and pops it. Nothing is
 * left otherwise, or on failure. */
#ifndef LJSON_BORROW_BYTES /* the fuzz target lowers it to borrow every string */
#define LJSON_BORROW_BYTES (8 * 1024)
#endif
bool ljson_encode_chain(lua_State *L, int idx, chain *out, char *err, size_t errlen);

/* Lua functions for scripts and the library. */
int ljson_lua_encode(lua_State *L); /* encode(value) -> string | raises */
int ljson_lua_decode(lua_State *L); /* decode(string) -> value | nil, message */
int ljson_lua_array(lua_State *L);  /* array([t]) -> t marked as array */
int ljson_lua_object(lua_State *L); /* object([t]) -> t marked as object */
int ljson_lua_raw(lua_State *L);    /* raw(json_text) -> marker that encodes verbatim (text is validated) */

#endif

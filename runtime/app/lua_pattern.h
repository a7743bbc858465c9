/*
 * lua_pattern.h - string.find, string.match, string.gmatch and string.gsub
 * with a step budget.
 *
 * Lua's own pattern matcher is C code that backtracks without ever running
 * a hook, so one pathological pattern ("a*a*a*...b" against a run of a's)
 * holds the loop for minutes, deadline or not. These four functions are
 * ours: the same Lua 5.4 pattern language and results (a differential fuzz
 * target and spec compare them with the originals), but every
 * PATTERN_STEPS_PER_CHECK steps the matcher lets the caller's interrupt
 * check run, which raises the call's "time limit" or "cancelled" error.
 */
#ifndef LUAMCP_LUA_PATTERN_H
#define LUAMCP_LUA_PATTERN_H

#include <lua.h>

/* Called every so many matching steps on the running thread; it may raise a
 * Lua error to stop the match (nothing the matcher holds leaks). */
typedef void (*pattern_interrupt_fn)(lua_State *L);

/* Replace find, match, gmatch and gsub in the string table at the top of
 * the stack (the string library, also strings' __index). */
void lua_pattern_install(lua_State *L, pattern_interrupt_fn interrupt);

#endif

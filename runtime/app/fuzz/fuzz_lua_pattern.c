/* fuzz_lua_pattern.c - libFuzzer target, differential: our string.find,
 * match, gmatch and gsub (lua_pattern.c) against Lua 5.4's own, on the
 * same subject, pattern, start and replacement. Results, captures and
 * error messages must be identical. Inputs whose match takes more than
 * STEP_BUDGET steps are left out (Lua's matcher, which cannot be stopped,
 * would take as long).
 *
 * Input: [function] [init] [pattern length] pattern subject
 *   function % 8: find, plain find, match, gmatch, then gsub with a string,
 *   a table or a function replacement, or gsub limited to init matches. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "app/lua_pattern.h"
#include "core/luamcp_limits.h"

enum { STEP_BUDGET_CHECKS = 2000 }; /* x PATTERN_STEPS_PER_CHECK steps */

static lua_State *L;
static unsigned checks;

static void budget(lua_State *l) {
  if (++checks > STEP_BUDGET_CHECKS) luaL_error(l, "fuzz: step budget");
}

/* Runs one case with both implementations; returns true when they agree
 * (or ours ran out of budget), else the two results as text. */
static const char DRIVER[] =
    "local lua, ours = ...\n"
    "local function show(v, depth)\n"
    "  if type(v) == 'table' then\n"
    "    local parts = {}\n"
    "    for i = 1, v.n or #v do parts[i] = show(v[i], depth + 1) end\n"
    "    return '{' .. table.concat(parts, ',') .. '}'\n"
    "  end\n"
    "  return type(v) .. ':' .. string.format('%q', tostring(v))\n"
    "end\n"
    "local replacements = {\n"
    "  '<%0|%1>', '%%', '%2%1', '%', 'x%z',\n"
    "  { a = 'A', b = false, c = 1, d = {}, [''] = 'E' },\n"
    "  function(a, b) if a == 'q' then return {} end if b then return b .. a end return a ~= '' and #a % 2 == 0 and a end,\n"
    "}\n"
    "local function run(f, which, s, p, init)\n"
    "  if which == 0 then return table.pack(pcall(f.find, s, p, init)) end\n"
    "  if which == 1 then return table.pack(pcall(f.find, s, p, init, true)) end\n"
    "  if which == 2 then return table.pack(pcall(f.match, s, p, init)) end\n"
    "  if which == 3 then\n"
    "    return table.pack(pcall(function()\n"
    "      local all = {}\n"
    "      for a, b, c in f.gmatch(s, p, init) do\n"
    "        all[#all + 1] = table.pack(a, b, c)\n"
    "        if #all > 64 then break end\n"
    "      end\n"
    "      return all\n"
    "    end))\n"
    "  end\n"
    "  local r = replacements[(which - 4) * 2 + init % 2 + 1] or replacements[init % #replacements + 1]\n"
    "  if which == 7 then return table.pack(pcall(f.gsub, s, p, r, init)) end\n"
    "  return table.pack(pcall(f.gsub, s, p, r))\n"
    "end\n"
    "return function(which, s, p, init)\n"
    "  local mine = show(run(ours, which, s, p, init), 0)\n"
    "  if mine:find('fuzz: step budget', 1, true) then return true end\n"
    "  local theirs = show(run(lua, which, s, p, init), 0)\n"
    "  if mine == theirs then return true end\n"
    "  return false, mine, theirs\n"
    "end\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!L) {
    L = luaL_newstate();
    luaL_openlibs(L);
    if (luaL_loadstring(L, DRIVER) != LUA_OK) __builtin_trap();
    lua_getglobal(L, "string"); /* Lua's own */
    lua_newtable(L);            /* ours */
    lua_pattern_install(L, budget);
    lua_call(L, 2, 1);
    lua_setglobal(L, "check");
  }
  if (size < 3) return 0;
  int which = data[0] % 8;
  int init = (int8_t)data[1];
  size_t plen = data[2];
  data += 3;
  size -= 3;
  if (plen > size) plen = size;
  lua_getglobal(L, "check");
  lua_pushinteger(L, which);
  lua_pushlstring(L, (const char *)data + plen, size - plen);
  lua_pushlstring(L, (const char *)data, plen);
  lua_pushinteger(L, init);
  checks = 0;
  if (lua_pcall(L, 4, 3, 0) != LUA_OK) {
    fprintf(stderr, "driver error: %s\n", lua_tostring(L, -1));
    __builtin_trap();
  }
  if (!lua_toboolean(L, -3)) {
    fprintf(stderr, "ours:   %s\nLua's:  %s\n", lua_tostring(L, -2), lua_tostring(L, -1));
    __builtin_trap();
  }
  lua_settop(L, 0);
  return 0;
}

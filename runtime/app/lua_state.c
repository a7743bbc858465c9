/*
 * lua_state.c - mcp.state, the plain data a script keeps across reloads
 * (copied from the generation being replaced), and mcp.info.
 */
#include <lauxlib.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "app/lua_json.h"
#include "app/lua_state.h"
#include "core/log.h"

/* Copy the value at idx of `from` (another generation's state) onto `to`.
 * Only plain data: tables (shared references and cycles kept), strings,
 * numbers, booleans and mcp.null. Returns false with the reason in why. */
static bool copy_value(lua_State *from, int idx, lua_State *to, int visited, int depth, buf *why);

/* Can a value of this kind be copied (a table: perhaps)? */
static bool copyable(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  return t != LUA_TFUNCTION && t != LUA_TUSERDATA && t != LUA_TTHREAD &&
         !(t == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) != NULL);
}

static bool copy_value(lua_State *from, int idx, lua_State *to, int visited, int depth, buf *why) {
  idx = lua_absindex(from, idx);
  if (!lua_checkstack(from, 4) || !lua_checkstack(to, 6) || depth > 200) {
    buf_puts(why, "nested too deeply");
    return false;
  }
  switch (lua_type(from, idx)) {
    case LUA_TNIL: lua_pushnil(to); return true;
    case LUA_TBOOLEAN: lua_pushboolean(to, lua_toboolean(from, idx)); return true;
    case LUA_TNUMBER:
      if (lua_isinteger(from, idx)) lua_pushinteger(to, lua_tointeger(from, idx));
      else lua_pushnumber(to, lua_tonumber(from, idx));
      return true;
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(from, idx, &n);
      lua_pushlstring(to, s, n);
      return true;
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(from, idx) == NULL) {
        lua_pushlightuserdata(to, NULL);
        return true;
      }
      break;
    case LUA_TTABLE: {
      const void *p = lua_topointer(from, idx);
      if (lua_rawgetp(to, visited, p) == LUA_TTABLE) return true; /* seen: the same table again */
      lua_pop(to, 1);
      lua_newtable(to);
      lua_pushvalue(to, -1);
      lua_rawsetp(to, visited, p);
      if (lua_getmetatable(from, idx)) {
        /* Only the JSON array/object marks carry over. */
        const char *mark = NULL;
        luaL_getmetatable(from, LJSON_ARRAY_MT);
        if (lua_rawequal(from, -1, -2)) mark = LJSON_ARRAY_MT;
        lua_pop(from, 1);
        luaL_getmetatable(from, LJSON_OBJECT_MT);
        if (lua_rawequal(from, -1, -2)) mark = LJSON_OBJECT_MT;
        lua_pop(from, 2);
        if (!mark) {
          buf_puts(why, "a table with a metatable cannot survive a reload");
          return false;
        }
        luaL_setmetatable(to, mark);
      }
      lua_pushnil(from);
      while (lua_next(from, idx)) {
        if (!copyable(from, -2) || !copyable(from, -1)) {
          /* A function stored in the kept data by a handler: dropped (it
           * was refused when given to mcp.state, but a handler may add
           * one later); the rest survives. */
          log_write(LOG_WARNING, "mcp.state: a %s kept under %s%s was dropped at this reload: only tables, strings, "
                                 "numbers and booleans survive",
                    luaL_typename(from, copyable(from, -2) ? -1 : -2),
                    lua_type(from, -2) == LUA_TSTRING ? "key " : "a key of type ",
                    lua_type(from, -2) == LUA_TSTRING ? lua_tostring(from, -2) : luaL_typename(from, -2));
          lua_pop(from, 1);
          continue;
        }
        if (!copy_value(from, -2, to, visited, depth + 1, why) || !copy_value(from, -1, to, visited, depth + 1, why)) {
          lua_pop(from, 2);
          return false;
        }
        lua_rawset(to, -3);
        lua_pop(from, 1);
      }
      return true;
    }
    default: break;
  }
  buf_printf(why, "a %s cannot survive a reload (only tables, strings, numbers and booleans do)",
             luaL_typename(from, idx));
  return false;
}

/* Is the value at idx plain data, as copy_value takes it? If not, the
 * reason in why with where it is under the value ("a function (at
 * .handlers.add)"). visited: a table of the tables already seen. */
static bool plain_data(lua_State *L, int idx, int visited, int depth, buf *path, buf *why) {
  idx = lua_absindex(L, idx);
  int t = lua_type(L, idx);
  if (t == LUA_TNIL || t == LUA_TBOOLEAN || t == LUA_TNUMBER || t == LUA_TSTRING) return true;
  if (t == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) == NULL) return true;
  if (t == LUA_TTABLE) {
    if (depth > 200) {
      buf_printf(why, "a table nested too deeply (at %s)", path->len ? path->data : "the top");
      return false;
    }
    luaL_checkstack(L, 6, "mcp.state");
    if (lua_rawgetp(L, visited, lua_topointer(L, idx)) != LUA_TNIL) {
      lua_pop(L, 1);
      return true;
    }
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
    lua_rawsetp(L, visited, lua_topointer(L, idx));
    if (lua_getmetatable(L, idx)) {
      luaL_getmetatable(L, LJSON_ARRAY_MT);
      luaL_getmetatable(L, LJSON_OBJECT_MT);
      bool mark = lua_rawequal(L, -1, -3) || lua_rawequal(L, -2, -3);
      lua_pop(L, 3);
      if (!mark) {
        buf_printf(why, "a table with a metatable (at %s)", path->len ? path->data : "the top");
        return false;
      }
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      size_t len = path->len;
      int kt = lua_type(L, -2);
      if (kt == LUA_TSTRING) buf_printf(path, ".%s", lua_tostring(L, -2));
      else if (kt == LUA_TNUMBER && lua_isinteger(L, -2)) buf_printf(path, "[%lld]", (long long)lua_tointeger(L, -2));
      else buf_printf(path, "[%s key]", luaL_typename(L, -2));
      bool ok = kt == LUA_TSTRING || kt == LUA_TNUMBER || kt == LUA_TBOOLEAN;
      if (!ok) buf_printf(why, "a %s key (at %s)", luaL_typename(L, -2), path->data);
      ok = ok && plain_data(L, -1, visited, depth + 1, path, why);
      if (!ok) {
        lua_pop(L, 2);
        return false;
      }
      path->len = len;
      if (path->data) path->data[len] = '\0';
      lua_pop(L, 1);
    }
    return true;
  }
  buf_printf(why, "a %s (at %s)", luaL_typename(L, idx), path->len ? path->data : "the top");
  return false;
}

/* mcp.state(key, init) -> the value kept under key: the previous
 * generation's, copied, or else init (called, if it is a function). */
int lua_state_get(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *key = luaL_checkstring(L, 1);
  lua_settop(L, 2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, v->state_ref); /* 3: this generation's state */
  lua_pushvalue(L, 1);
  if (lua_rawget(L, 3) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  bool found = false;
  if (v->previous) {
    lua_State *from = v->previous->L;
    int top = lua_gettop(from);
    lua_rawgeti(from, LUA_REGISTRYINDEX, v->previous->state_ref);
    lua_pushstring(from, key);
    if (lua_rawget(from, -2) != LUA_TNIL) {
      lua_newtable(L); /* tables already copied, by their address in `from` */
      buf why = BUF_INIT;
      found = copy_value(from, -1, L, lua_gettop(L), 0, &why);
      lua_settop(from, top);
      if (!found) {
        /* What the previous generation stored there cannot be copied:
         * this key starts again from init, rather than every reload
         * failing until the process restarts. */
        log_write(LOG_WARNING, "mcp.state(\"%s\"): not carried over: %s; starting again from its initial value", key,
                  why.data ? why.data : "?");
        lua_settop(L, 3);
      } else {
        lua_remove(L, -2); /* the visited table */
      }
      buf_free(&why);
    } else {
      lua_settop(from, top);
    }
  }
  if (!found) {
    lua_pushvalue(L, 2);
    if (lua_type(L, -1) == LUA_TFUNCTION) lua_call(L, 0, 1);
    /* Only plain data survives a reload: refuse anything else now, at
     * the line that stores it, not at the next reload. */
    lua_newtable(L);
    buf path = BUF_INIT, why = BUF_INIT;
    bool plain = plain_data(L, -2, lua_gettop(L), 0, &path, &why);
    lua_pop(L, 1);
    if (!plain) {
      lua_pushfstring(L, "mcp.state(\"%s\"): %s cannot survive a reload: keep only tables, strings, numbers and "
                         "booleans in it (functions belong in the script, which runs again at each reload)",
                      key, why.data ? why.data : "?");
      buf_free(&path);
      buf_free(&why);
      luaL_where(L, 1);
      lua_insert(L, -2);
      lua_concat(L, 2);
      return lua_error(L);
    }
    buf_free(&path);
    buf_free(&why);
  }
  lua_pushvalue(L, 1);
  lua_pushvalue(L, -2);
  lua_rawset(L, 3);
  return 1;
}

/* mcp.info() -> {generation, generations_open, reloads, memory, tasks, worker, workers, pid}. */
int lua_state_info(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, v->generation);
  lua_setfield(L, -2, "generation");
  lua_pushinteger(L, v->app ? app_generations_open(v->app) : 1);
  lua_setfield(L, -2, "generations_open");
  lua_pushinteger(L, v->app ? v->app->reloads : 0);
  lua_setfield(L, -2, "reloads");
  lua_pushinteger(L, (lua_Integer)v->mem_used);
  lua_setfield(L, -2, "memory");
  lua_pushinteger(L, v->live_tasks);
  lua_setfield(L, -2, "tasks");
  /* Which process of --workers N runs this (1 of 1 alone), and its pid:
   * each worker has its own Lua state. */
  const server_options *so = &v->srv->opts;
  lua_pushinteger(L, so->worker_index ? so->worker_index : 1);
  lua_setfield(L, -2, "worker");
  lua_pushinteger(L, so->worker_count ? so->worker_count : 1);
  lua_setfield(L, -2, "workers");
  lua_pushinteger(L, (lua_Integer)getpid());
  lua_setfield(L, -2, "pid");
  return 1;
}

/* Carry the keys of from's mcp.state that `to` did not ask for while it
 * loaded (a handler, not the script's top level, created them) into `to`,
 * copied; lua_pcall'd on to->L: copying allocates. */
static int carry_missing_keys(lua_State *L) {
  vm *to = lua_touserdata(L, 1);
  vm *from = lua_touserdata(L, 2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, to->state_ref); /* 3: the new generation's state */
  lua_State *F = from->L;
  luaL_checkstack(F, 4, "mcp.state");
  lua_rawgeti(F, LUA_REGISTRYINDEX, from->state_ref);
  int state = lua_gettop(F);
  lua_pushnil(F);
  while (lua_next(F, state)) {
    if (lua_type(F, -2) == LUA_TSTRING) {
      const char *key = lua_tostring(F, -2);
      int top = lua_gettop(L);
      if (lua_getfield(L, 3, key) == LUA_TNIL) {
        lua_newtable(L); /* tables already copied, by their address in F */
        buf why = BUF_INIT;
        if (copy_value(F, -1, L, lua_gettop(L), 0, &why)) {
          lua_setfield(L, 3, key);
        } else {
          log_write(LOG_WARNING, "mcp.state(\"%s\") not carried over: %s", key, why.data ? why.data : "?");
        }
        buf_free(&why);
      }
      lua_settop(L, top);
    }
    lua_pop(F, 1);
  }
  lua_pop(F, 1);
  return 0;
}

void lua_state_carry(vm *from, vm *to) {
  lua_State *L = to->L;
  int from_top = lua_gettop(from->L);
  lua_pushcfunction(L, carry_missing_keys);
  lua_pushlightuserdata(L, to);
  lua_pushlightuserdata(L, from);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    log_write(LOG_WARNING, "mcp.state not carried over: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_settop(from->L, from_top); /* an error may have left values there */
}


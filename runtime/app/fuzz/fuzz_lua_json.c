/* fuzz_lua_json.c - libFuzzer target: the Lua <-> JSON bridge (lua_json.c).
 * The first byte picks the direction:
 *
 *   even  the rest is JSON text: parsed, pushed into Lua, encoded again;
 *         the encoding must be valid JSON, and a fixed point (pushing and
 *         encoding it once more gives the same text)
 *   odd   the rest is a little program that builds Lua values (numbers of
 *         every kind, strings, nested, sparse, mixed and cyclic tables,
 *         marked arrays and objects, raw JSON, functions, userdata):
 *         encoding the result either fails with a message or gives valid
 *         JSON that is again a fixed point
 *
 * fuzz.sh builds this with LJSON_RADIX_KEYS so low that every object's
 * keys are sorted by radix, and LJSON_STASH_KEYS at 1 so that its values
 * are found both ways (the first by its key's text, the rest on the
 * stack); every encoding's keys must be in byte order. Every value is also encoded into a chain
 * (ljson_encode_chain, with LJSON_BORROW_BYTES so low that nearly every
 * string is borrowed):
 * flattened, it must be exactly the plain encoding, and it must fail
 * where that fails, with the same message.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "app/lua_json.h"
#include "core/luamcp_limits.h"

static lua_State *L;

/* The value at idx into a chain: the same text as plain (or the same
 * failure, with the same message), and the anchoring table left exactly
 * when a string was borrowed. */
static void check_chain(int idx, bool plain_ok, const buf *plain, const char *plain_err) {
  idx = lua_absindex(L, idx);
  int top = lua_gettop(L);
  chain c = CHAIN_INIT;
  char err[160];
  bool ok = ljson_encode_chain(L, idx, &c, err, sizeof err);
  if (ok != plain_ok) __builtin_trap();
  if (!ok) {
    if (strcmp(err, plain_err) != 0 || lua_gettop(L) != top) __builtin_trap();
  } else {
    if (lua_gettop(L) != top + (c.count ? 1 : 0)) __builtin_trap();
    if (c.count && !lua_istable(L, -1)) __builtin_trap();
    buf flat = BUF_INIT;
    chain_flatten(&c, &flat);
    if (flat.len != plain->len || (flat.len && memcmp(flat.data, plain->data, flat.len) != 0)) __builtin_trap();
    buf_free(&flat);
  }
  lua_settop(L, top);
  chain_free(&c);
}

/* The text must parse; push + encode gives it again (into again). */
static void reencode(const buf *text, buf *again) {
  json_doc *doc = json_parse(text->data ? text->data : "", text->len, MAX_JSON_DEPTH + 2, NULL);
  if (!doc) __builtin_trap(); /* the encoder wrote something that is not JSON */
  int top = lua_gettop(L);
  ljson_push(L, json_doc_root(doc));
  json_doc_free(doc);
  char err[160];
  if (!ljson_encode(L, -1, again, err, sizeof err)) __builtin_trap();
  lua_settop(L, top);
}

/* Every object's keys in strictly increasing byte order. */
static void check_order(const json_value *v) {
  if (v->type == JSON_ARRAY)
    for (uint32_t i = 0; i < v->len; i++) check_order(&v->u.items[i]);
  if (v->type != JSON_OBJECT) return;
  for (uint32_t i = 0; i < v->len; i++) {
    check_order(&v->u.members[i].value);
    if (i == 0) continue;
    const json_member *a = &v->u.members[i - 1], *b = &v->u.members[i];
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);
    if (c > 0 || (c == 0 && a->key_len >= b->key_len)) __builtin_trap();
  }
}

/* The text must parse, and push + encode must give it back unchanged. */
static void check_fixed_point(const buf *text) {
  json_doc *doc = json_parse(text->data ? text->data : "", text->len, MAX_JSON_DEPTH + 2, NULL);
  if (!doc) __builtin_trap(); /* the encoder wrote something that is not JSON */
  check_order(json_doc_root(doc));
  int top = lua_gettop(L);
  ljson_push(L, json_doc_root(doc));
  json_doc_free(doc);
  buf again = BUF_INIT;
  char err[160];
  if (!ljson_encode(L, -1, &again, err, sizeof err)) __builtin_trap();
  if (again.len != text->len || memcmp(again.data, text->data, text->len) != 0) {
    fprintf(stderr, "not a fixed point:\n  %.*s\n  %.*s\n", (int)text->len, text->data, (int)again.len, again.data);
    __builtin_trap();
  }
  buf_free(&again);
  lua_settop(L, top);
}

static int push_and_encode(lua_State *l) {
  const json_value *root = lua_touserdata(l, 1);
  buf *out = lua_touserdata(l, 2);
  ljson_push(l, root);
  char err[160];
  if (!ljson_encode(l, -1, out, err, sizeof err)) __builtin_trap(); /* every JSON value can be sent back */
  check_chain(-1, true, out, "");
  return 0;
}

static const double DOUBLES[] = {0.5, -0.0, 1e308, -1e-320, 9007199254740993.0, 9.2233720368547758e18, 3.0,
                                 -2.5e-7, 1.0 / 3.0, 123456789.125};

static int fn(lua_State *l) { return 0 * lua_gettop(l); }

/* Run the builder program; leaves its result on top. */
static int build(lua_State *l) {
  const uint8_t *p = lua_touserdata(l, 1), *end = p + lua_tointeger(l, 2);
  lua_settop(l, 0);
  while (p < end) {
    int op = *p++ % 18;
    int top = lua_gettop(l);
    if (top > 200) lua_settop(l, top = 100);
    luaL_checkstack(l, 4, "builder"); /* a C function is sure of LUA_MINSTACK slots only */
    switch (op) {
      case 0: lua_pushinteger(l, p < end ? (int8_t)*p++ : 0); break;
      case 1: lua_pushinteger(l, p < end && *p++ & 1 ? LUA_MAXINTEGER : LUA_MININTEGER); break;
      case 2: lua_pushnumber(l, DOUBLES[p < end ? *p++ % 10 : 0]); break;
      case 3: lua_pushnumber(l, p < end && *p++ & 1 ? (double)NAN : (double)INFINITY); break;
      case 4: {
        size_t n = p < end ? *p++ % 16 : 0;
        if (n > (size_t)(end - p)) n = (size_t)(end - p);
        lua_pushlstring(l, (const char *)p, n);
        p += n;
        break;
      }
      case 5: lua_pushnil(l); break;
      case 6: lua_pushboolean(l, p < end && *p++ & 1); break;
      case 7: lua_pushlightuserdata(l, NULL); break;
      case 8: lua_newtable(l); break;
      case 9: /* t[k] = v: t, k, v on top */
        if (top >= 3 && lua_istable(l, -3) && !lua_isnil(l, -2) && !(lua_isnumber(l, -2) && isnan(lua_tonumber(l, -2)))) {
          lua_rawset(l, -3);
        }
        break;
      case 10: /* append v to t: t, v on top */
        if (top >= 2 && lua_istable(l, -2)) lua_rawseti(l, -2, (lua_Integer)lua_rawlen(l, -2) + 1);
        break;
      case 11: if (top >= 1 && lua_istable(l, -1)) luaL_setmetatable(l, LJSON_ARRAY_MT); break;
      case 12: if (top >= 1 && lua_istable(l, -1)) luaL_setmetatable(l, LJSON_OBJECT_MT); break;
      case 13: /* mcp.raw_json(s): refuses text that is not JSON */
        if (top >= 1 && lua_type(l, -1) == LUA_TSTRING) {
          lua_pushcfunction(l, ljson_lua_raw);
          lua_insert(l, -2);
          if (lua_pcall(l, 1, 1, 0) != LUA_OK) lua_pop(l, 1);
        }
        break;
      case 14: lua_pushcfunction(l, fn); break;
      case 15: /* a cycle: t[k] = t */
        if (top >= 1 && lua_istable(l, -1)) {
          lua_pushvalue(l, -1);
          lua_rawseti(l, -2, p < end ? *p++ % 4 + 1 : 1);
        }
        break;
      case 16: if (top >= 1) lua_pushvalue(l, -(int)(p < end ? *p++ % (unsigned)top : 0) - 1); break;
      case 17: lua_pushlightuserdata(l, (void *)&L); break;
    }
  }
  if (lua_gettop(l) == 0) lua_pushnil(l);
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!L) {
    L = luaL_newstate();
    ljson_init(L);
  }
  if (size == 0) return 0;
  bool from_json = (data[0] & 1) == 0;
  data++;
  size--;
  buf out = BUF_INIT;
  if (from_json) {
    json_doc *doc = json_parse((const char *)data, size, MAX_JSON_DEPTH, NULL);
    if (!doc) return 0;
    lua_pushcfunction(L, push_and_encode);
    lua_pushlightuserdata(L, (void *)json_doc_root(doc));
    lua_pushlightuserdata(L, &out);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) __builtin_trap();
    json_doc_free(doc);
    check_fixed_point(&out);
  } else {
    lua_pushcfunction(L, build);
    lua_pushlightuserdata(L, (void *)data);
    lua_pushinteger(L, (lua_Integer)size);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) __builtin_trap();
    char err[160];
    bool ok = ljson_encode(L, -1, &out, err, sizeof err);
    check_chain(-1, ok, &out, err);
    if (ok) {
      /* Raw JSON is copied verbatim (spaces and all): the fixed point is
       * the text encoded once more. */
      buf again = BUF_INIT;
      reencode(&out, &again);
      check_fixed_point(&again);
      buf_free(&again);
    } else if (!err[0]) {
      __builtin_trap(); /* a failure always says why */
    }
    lua_settop(L, 0);
  }
  buf_free(&out);
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}

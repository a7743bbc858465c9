/* lua_json.c - JSON values in and out of Lua. See lua_json.h. */
#include "app/lua_json.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/luamcp_limits.h"

void ljson_init(lua_State *L) {
  luaL_newmetatable(L, LJSON_ARRAY_MT);
  lua_pushliteral(L, "array");
  lua_setfield(L, -2, "__jsontype");
  lua_pop(L, 1);
  luaL_newmetatable(L, LJSON_OBJECT_MT);
  lua_pushliteral(L, "object");
  lua_setfield(L, -2, "__jsontype");
  lua_pop(L, 1);
  luaL_newmetatable(L, LJSON_RAW_MT);
  lua_pop(L, 1);
}

/* ---- Into Lua -------------------------------------------------------- */

static void push_value(lua_State *L, const json_value *v) {
  switch (v->type) {
    case JSON_NULL: lua_pushlightuserdata(L, NULL); break;
    case JSON_FALSE: lua_pushboolean(L, 0); break;
    case JSON_TRUE: lua_pushboolean(L, 1); break;
    case JSON_INTEGER: lua_pushinteger(L, (lua_Integer)v->u.integer); break;
    case JSON_FLOAT: lua_pushnumber(L, (lua_Number)v->u.number); break;
    case JSON_STRING: lua_pushlstring(L, v->u.string, v->len); break;
    case JSON_ARRAY:
      luaL_checkstack(L, 3, "JSON nested too deeply");
      lua_createtable(L, (int)v->len, 0);
      for (uint32_t i = 0; i < v->len; i++) {
        push_value(L, &v->u.items[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      luaL_setmetatable(L, LJSON_ARRAY_MT);
      break;
    case JSON_OBJECT:
      luaL_checkstack(L, 3, "JSON nested too deeply");
      lua_createtable(L, 0, (int)v->len);
      for (uint32_t i = 0; i < v->len; i++) {
        const json_member *m = &v->u.members[i];
        lua_pushlstring(L, m->key, m->key_len);
        push_value(L, &m->value);
        lua_rawset(L, -3);
      }
      break;
  }
}

void ljson_push(lua_State *L, const json_value *v) { push_value(L, v); }

/* ---- Out of Lua ------------------------------------------------------ */

/* State of one ljson_encode call, on its stack. The marker metatables sit
 * at fixed stack slots so each table costs one metatable fetch. */
typedef struct encoder {
  lua_State *L;
  buf *out;
  char *err;
  size_t errlen;
  int array_mt, object_mt, raw_mt; /* stack indices */
  /* ljson_encode_chain: long strings are borrowed into the chain and
   * anchored in a table at stack index anchor (nil until the first). */
  chain *chain;
  int anchor, anchored;
  /* Where a failure happened, built while unwinding, in Lua's notation:
   * .items[2].name (the innermost part kept when it grows too long). */
  char path[200];
  size_t path_len;
} encoder;

static bool encode_fail(encoder *e, const char *fmt, const char *arg) {
  snprintf(e->err, e->errlen, fmt, arg);
  return false;
}

/* Put one step of the failing value's path in front of the steps below it. */
static void path_prepend(encoder *e, const char *step, size_t n) {
  if (e->path_len + n + 1 >= sizeof e->path) return;
  memmove(e->path + n, e->path, e->path_len + 1);
  memcpy(e->path, step, n);
  e->path_len += n;
}

static void path_prepend_key(encoder *e, const char *key, size_t len, bool is_number) {
  char step[64];
  int n;
  bool identifier = !is_number && len > 0 && len < 48 && !(key[0] >= '0' && key[0] <= '9');
  for (size_t i = 0; identifier && i < len; i++) {
    char ch = key[i];
    identifier = ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
  }
  if (identifier) n = snprintf(step, sizeof step, ".%.*s", (int)len, key);
  else if (is_number) n = snprintf(step, sizeof step, "[%.*s]", (int)(len < 40 ? len : 40), key);
  else n = snprintf(step, sizeof step, "[\"%.*s%s\"]", (int)(len < 40 ? len : 40), key, len < 40 ? "" : "...");
  if (n > 0) path_prepend(e, step, (size_t)n < sizeof step ? (size_t)n : sizeof step - 1);
}

/* Which marker metatable, if any, the table at idx carries. */
typedef enum { MARK_NONE, MARK_ARRAY, MARK_OBJECT, MARK_RAW, MARK_VIEW } table_mark;

static table_mark get_mark(encoder *e, int idx) {
  lua_State *L = e->L;
  if (!lua_getmetatable(L, idx)) return MARK_NONE;
  table_mark mark = MARK_NONE;
  if (lua_rawequal(L, -1, e->array_mt)) mark = MARK_ARRAY;
  else if (lua_rawequal(L, -1, e->object_mt)) mark = MARK_OBJECT;
  else if (lua_rawequal(L, -1, e->raw_mt)) mark = MARK_RAW;
  else {
    lua_pushliteral(L, LJSON_VIEW_FIELD);
    if (lua_rawget(L, -2) == LUA_TTABLE) mark = MARK_VIEW;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return mark;
}

static bool encode_value(encoder *e, int idx, int depth);

/* One key of an object being encoded. The key and its value wait on the
 * Lua stack (at slot, slot + 1), so writing them needs neither the key
 * pushed again (interned anew) nor the object searched. Only when the
 * stack cannot grow are a string key's pairs let go, and its value looked
 * up again by its text (slot 0). The stack grows with lua_checkstack,
 * which fails without raising: the encoder allocates nothing it could not
 * give back (an error raised here, outside any protected call, would
 * abort the process). */
typedef struct object_key {
  const char *text;  /* a string key's own bytes, or a number key's digits */
  size_t len;
  uint64_t head;     /* the first 8 bytes, big-endian and zero-padded: most comparisons end here */
  int slot;
  bool is_number;
} object_key;

/* Keys of an object that are looked up again by their text even when the
 * stack has room: none, but the fuzz target raises it to mix both ways in
 * one object. */
#ifndef LJSON_STASH_KEYS
#define LJSON_STASH_KEYS 0
#endif

static uint64_t key_head(const char *s, size_t len) {
  unsigned char b[8] = {0};
  memcpy(b, s, len < 8 ? len : 8);
  uint64_t h = 0;
  for (int i = 0; i < 8; i++) h = h << 8 | b[i];
  return h;
}

static int compare_keys(const void *a, const void *b) {
  const object_key *x = a, *y = b;
  if (x->head != y->head) return x->head < y->head ? -1 : 1;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = n > 8 ? memcmp(x->text + 8, y->text + 8, n - 8) : 0;
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Sort a few keys by insertion (most objects have a handful: qsort's
 * calls through a pointer cost more than the sort), more by qsort. */
static void sort_run(object_key *keys, size_t count) {
  if (count > 16) {
    qsort(keys, count, sizeof *keys, compare_keys);
    return;
  }
  for (size_t i = 1; i < count; i++) {
    object_key k = keys[i];
    size_t j = i;
    for (; j > 0 && compare_keys(&keys[j - 1], &k) > 0; j--) keys[j] = keys[j - 1];
    keys[j] = k;
  }
}

/* Sort keys into byte order. An object of LJSON_RADIX_KEYS fields or more
 * goes by radix on the 8-byte heads (8 bits a pass, 16 for a huge one;
 * passes where every key has the same digit cost one count), then
 * compares only the runs whose heads tie; a smaller one by sort_run. */
#ifndef LJSON_RADIX_KEYS /* the fuzz target lowers it to sort every object both ways */
#define LJSON_RADIX_KEYS 1024
#endif
static bool sort_keys(object_key *keys, size_t count) {
  if (count < LJSON_RADIX_KEYS) {
    sort_run(keys, count);
    return true;
  }
  int bits = count >= 65536 ? 16 : 8;
  size_t buckets = (size_t)1 << bits, mask = buckets - 1;
  object_key *tmp = malloc(count * sizeof *tmp);
  size_t *counts = malloc(buckets * sizeof *counts);
  if (!tmp || !counts) {
    free(tmp);
    free(counts);
    return false;
  }
  object_key *from = keys, *to = tmp;
  for (int shift = 0; shift < 64; shift += bits) {
    memset(counts, 0, buckets * sizeof *counts);
    for (size_t i = 0; i < count; i++) counts[(from[i].head >> shift) & mask]++;
    if (counts[(from[0].head >> shift) & mask] == count) continue; /* all alike in this digit */
    size_t at = 0;
    for (size_t d = 0; d < buckets; d++) {
      size_t n = counts[d];
      counts[d] = at;
      at += n;
    }
    for (size_t i = 0; i < count; i++) to[counts[(from[i].head >> shift) & mask]++] = from[i];
    object_key *t = from;
    from = to;
    to = t;
  }
  if (from != keys) memcpy(keys, from, count * sizeof *keys);
  for (size_t i = 0; i < count;) {
    size_t j = i + 1;
    while (j < count && keys[j].head == keys[i].head) j++;
    if (j - i > 1) sort_run(keys + i, j - i);
    i = j;
  }
  free(tmp);
  free(counts);
  return true;
}

/* Objects are written with their keys in byte order, so the same table
 * always encodes to the same text (Lua's own order changes from run to
 * run). */
static bool encode_object(encoder *e, int idx, int depth) {
  lua_State *L = e->L;
  object_key small[16], *keys = small;
  size_t count = 0, cap = 16;
  buf digits = BUF_INIT; /* number keys' text; their text fields hold offsets until it stops growing */
  bool ok = true;
  int base = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (count == cap) {
      cap *= 2;
      object_key *bigger = malloc(cap * sizeof *bigger);
      if (!bigger) {
        lua_pop(L, 2);
        ok = encode_fail(e, "%s", "out of memory");
        goto done;
      }
      memcpy(bigger, keys, count * sizeof *keys);
      if (keys != small) free(keys);
      keys = bigger;
    }
    object_key *k = &keys[count];
    int type = lua_type(L, -2);
    if (type == LUA_TSTRING) {
      k->is_number = false;
      k->text = lua_tolstring(L, -2, &k->len);
      k->head = key_head(k->text, k->len);
    } else if (type == LUA_TNUMBER) {
      /* A sparse or mixed table: number keys become their decimal text. */
      k->is_number = true;
      size_t at = digits.len;
      if (lua_isinteger(L, -2)) {
        json_write_integer(&digits, (int64_t)lua_tointeger(L, -2));
      } else {
        /* A table key is never NaN; an infinity is written as Lua does. */
        lua_Number d = lua_tonumber(L, -2);
        if (!json_write_double(&digits, (double)d)) buf_append_str(&digits, d > 0 ? "inf" : "-inf");
      }
      k->text = (const char *)(uintptr_t)at;
      k->len = digits.len - at;
    } else {
      ok = encode_fail(e, "cannot encode a table key of type %s", luaL_typename(L, -2));
      lua_pop(L, 2);
      goto done;
    }
    count++;
    if ((count > LJSON_STASH_KEYS || k->is_number) && lua_checkstack(L, 3)) {
      /* key, value stay; a copy of the key goes on for lua_next */
      k->slot = lua_gettop(L) - 1;
      lua_pushvalue(L, -2);
    } else if (k->is_number) {
      lua_pop(L, 2);
      ok = encode_fail(e, "%s", "out of Lua stack");
      goto done;
    } else {
      k->slot = 0;
      lua_pop(L, 1);
    }
  }
  for (size_t i = 0; i < count; i++) {
    if (!keys[i].is_number) continue;
    keys[i].text = digits.data + (uintptr_t)keys[i].text;
    keys[i].head = key_head(keys[i].text, keys[i].len);
  }
  if (count > 1 && !sort_keys(keys, count)) {
    ok = encode_fail(e, "%s", "out of memory");
    goto done;
  }
  /* A number key and a string key with the same text (1 and "1") would be
   * one JSON key twice: the receiver would keep only one of the values. */
  for (size_t i = 1; i < count && ok; i++) {
    if (compare_keys(&keys[i - 1], &keys[i]) == 0) {
      char text[48];
      snprintf(text, sizeof text, "%.*s", (int)(keys[i].len < 40 ? keys[i].len : 40), keys[i].text);
      ok = encode_fail(e, "cannot encode a table with a number key and a string key that are both \"%s\"", text);
    }
  }
  if (!ok) goto done;
  buf_putc(e->out, '{');
  for (size_t i = 0; i < count && ok; i++) {
    object_key *k = &keys[i];
    if (i) buf_putc(e->out, ',');
    json_write_string(e->out, k->text, k->len);
    buf_putc(e->out, ':');
    if (k->slot) {
      lua_pushvalue(L, k->slot + 1);
    } else {
      lua_pushlstring(L, k->text, k->len);
      lua_rawget(L, idx);
    }
    ok = encode_value(e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
    if (!ok) path_prepend_key(e, k->text, k->len, k->is_number);
  }
  if (ok) buf_putc(e->out, '}');
done:
  lua_settop(L, base); /* the pairs waiting on the stack */
  if (keys != small) free(keys);
  buf_free(&digits);
  return ok;
}

static bool encode_array(encoder *e, int idx, lua_Integer n, int depth) {
  lua_State *L = e->L;
  buf_putc(e->out, '[');
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) buf_putc(e->out, ',');
    lua_rawgeti(L, idx, i);
    bool ok = encode_value(e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
    if (!ok) {
      char step[32];
      int n = snprintf(step, sizeof step, "[%lld]", (long long)i);
      path_prepend(e, step, (size_t)n);
      return false;
    }
  }
  buf_putc(e->out, ']');
  return true;
}

static bool encode_table(encoder *e, int idx, int depth) {
  lua_State *L = e->L;
  if (depth > MAX_ENCODE_DEPTH) return encode_fail(e, "cannot encode tables nested more than %s deep (a cycle?)", "128");
  if (!lua_checkstack(L, 4)) return encode_fail(e, "%s", "out of Lua stack");
  switch (get_mark(e, idx)) {
    case MARK_ARRAY: return encode_array(e, idx, (lua_Integer)lua_rawlen(L, idx), depth);
    case MARK_OBJECT: return encode_object(e, idx, depth);
    case MARK_RAW: {
      lua_rawgeti(L, idx, 1);
      size_t n;
      const char *s = lua_tolstring(L, -1, &n);
      if (s) buf_append(e->out, s, n);
      lua_pop(L, 1);
      return s != NULL || encode_fail(e, "%s", "a raw JSON marker lost its text");
    }
    case MARK_VIEW: {
      /* A read-only view (ctx.auth): the table behind it. */
      lua_getmetatable(L, idx);
      lua_pushliteral(L, LJSON_VIEW_FIELD);
      lua_rawget(L, -2);
      lua_remove(L, -2);
      bool ok = encode_table(e, lua_gettop(L), depth + 1);
      lua_pop(L, 1);
      return ok;
    }
    case MARK_NONE: break;
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  if (n > 0) {
    /* An array exactly when the keys are 1..n and nothing else. */
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      count++;
      lua_pop(L, 1);
      if (count > n) {
        lua_pop(L, 1);
        break;
      }
    }
    if (count == n) return encode_array(e, idx, n, depth);
  }
  return encode_object(e, idx, depth);
}

/* anchor_string's protected part: (anchors or nil, s) -> anchors with s. */
static int anchor_add(lua_State *L) {
  if (lua_isnil(L, 1)) {
    lua_createtable(L, 4, 0);
    lua_replace(L, 1);
  }
  lua_pushvalue(L, 2);
  lua_rawseti(L, 1, (lua_Integer)lua_rawlen(L, 1) + 1);
  lua_settop(L, 1);
  return 1;
}

/* Keep the string at idx alive with the others the chain borrows. In a
 * protected call: the table (and its growth) is an allocation, and an
 * error raised here would abort the process. False when it cannot: the
 * string is copied instead. */
static bool anchor_string(encoder *e, int idx) {
  lua_State *L = e->L;
  if (!lua_checkstack(L, 3)) return false;
  lua_pushcfunction(L, anchor_add);
  lua_pushvalue(L, e->anchor);
  lua_pushvalue(L, idx);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    lua_pop(L, 1);
    return false;
  }
  lua_replace(L, e->anchor);
  e->anchored++;
  return true;
}

static bool encode_value(encoder *e, int idx, int depth) {
  lua_State *L = e->L;
  switch (lua_type(L, idx)) {
    case LUA_TNIL: buf_puts(e->out, "null"); return true;
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, idx)) buf_puts(e->out, "true");
      else buf_puts(e->out, "false");
      return true;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        json_write_integer(e->out, (int64_t)lua_tointeger(L, idx));
        return true;
      }
      if (json_write_double(e->out, (double)lua_tonumber(L, idx))) return true;
      return encode_fail(e, "cannot encode %s: JSON has no NaN or infinity", "a number");
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      if (e->chain && n >= LJSON_BORROW_BYTES && anchor_string(e, idx)) {
        buf_putc(e->out, '"');
        chain_borrow(e->chain, s, n);
        buf_putc(e->out, '"');
        return true;
      }
      json_write_string(e->out, s, n);
      return true;
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == NULL) {
        buf_puts(e->out, "null");
        return true;
      }
      return encode_fail(e, "cannot encode a %s", "light userdata");
    case LUA_TTABLE: return encode_table(e, idx, depth);
    default: return encode_fail(e, "cannot encode a %s", luaL_typename(L, idx));
  }
}

static bool encode(lua_State *L, int idx, buf *out, chain *pieces, char *err, size_t errlen) {
  encoder e = {L, out, err, errlen, 0, 0, 0, pieces, 0, 0, {0}, 0};
  err[0] = '\0';
  idx = lua_absindex(L, idx);
  if (!lua_checkstack(L, 8)) {
    snprintf(err, errlen, "out of Lua stack");
    return false;
  }
  int top = lua_gettop(L);
  if (pieces) {
    lua_pushnil(L);
    e.anchor = lua_gettop(L);
  }
  luaL_getmetatable(L, LJSON_ARRAY_MT);
  e.array_mt = lua_gettop(L);
  luaL_getmetatable(L, LJSON_OBJECT_MT);
  e.object_mt = lua_gettop(L);
  luaL_getmetatable(L, LJSON_RAW_MT);
  e.raw_mt = lua_gettop(L);
  bool ok = encode_value(&e, idx, 0);
  if (ok && e.anchored) {
    lua_pushvalue(L, e.anchor);
    lua_replace(L, top + 1);
    top++;
  }
  lua_settop(L, top);
  if (!ok && e.path_len) {
    size_t used = strlen(err);
    snprintf(err + used, errlen > used ? errlen - used : 0, " (at %s)", e.path);
  }
  return ok;
}

bool ljson_encode(lua_State *L, int idx, buf *out, char *err, size_t errlen) {
  return encode(L, idx, out, NULL, err, errlen);
}

bool ljson_encode_chain(lua_State *L, int idx, chain *out, char *err, size_t errlen) {
  return encode(L, idx, &out->own, out, err, errlen);
}

/* ---- Lua functions --------------------------------------------------- */

int ljson_lua_encode(lua_State *L) {
  luaL_checkany(L, 1);
  buf out = BUF_INIT;
  char err[160];
  bool ok = ljson_encode(L, 1, &out, err, sizeof err);
  if (ok) lua_pushlstring(L, out.data ? out.data : "", out.len);
  buf_free(&out);
  if (!ok) return luaL_error(L, "%s", err);
  return 1;
}

int ljson_lua_decode(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  json_error err;
  json_doc *doc = json_parse(s, n, MAX_JSON_DEPTH, &err);
  if (!doc) {
    lua_pushnil(L);
    lua_pushstring(L, err.message);
    return 2;
  }
  ljson_push(L, json_doc_root(doc));
  json_doc_free(doc);
  return 1;
}

static int mark_table(lua_State *L, const char *mt) {
  if (lua_isnoneornil(L, 1)) lua_newtable(L);
  else luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  if (lua_getmetatable(L, 1)) {
    lua_pushliteral(L, LJSON_VIEW_FIELD);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
      /* A read-only view (ctx.auth) stays as it is: the marked table is a
       * copy of what it shows (its nested views encode as theirs). */
      lua_newtable(L);
      lua_pushnil(L);
      while (lua_next(L, -3)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
      }
      lua_replace(L, 1);
    }
    lua_settop(L, 1);
  }
  luaL_setmetatable(L, mt);
  return 1;
}

int ljson_lua_array(lua_State *L) { return mark_table(L, LJSON_ARRAY_MT); }
int ljson_lua_object(lua_State *L) { return mark_table(L, LJSON_OBJECT_MT); }

int ljson_lua_raw(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  json_error err;
  json_doc *doc = json_parse(s, n, MAX_JSON_DEPTH, &err);
  if (!doc) return luaL_error(L, "not valid JSON: %s", err.message);
  json_doc_free(doc);
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  luaL_setmetatable(L, LJSON_RAW_MT);
  return 1;
}

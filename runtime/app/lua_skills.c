/*
 * lua_skills.c - what serving Agent Skills (lua/mcp/skills.lua) needs from
 * C: a SKILL.md's YAML front matter as a Lua value (libyaml, never a
 * hand-written parser) and the SHA-256 digests of the files served
 * (the platform's crypto, os/crypto.h, as for requestState).
 *
 * YAML is read with the 1.2 core schema, as the JSON-minded YAML parsers
 * clients use (the suite's `yaml` package) read it: a plain scalar is null,
 * a boolean, an integer or a float when it looks like one, and a string
 * otherwise; a quoted or block scalar is always a string. Anchors, aliases,
 * tags other than the standard ones and multi-document streams are refused:
 * front matter is a flat description, and an alias bomb must not load.
 */
#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/luamcp_limits.h"
#include "app/lua_json.h"
#include "app/lua_skills.h"
#include "os/crypto.h"

/* A plain scalar, resolved by the core schema; pushes its value. */
static void push_plain(lua_State *L, const char *s, size_t n) {
  if (n == 0 || (n == 1 && s[0] == '~') || (n == 4 && (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")))) {
    lua_pushlightuserdata(L, NULL); /* JSON null, as lua_json.c writes it */
    return;
  }
  if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
    lua_pushboolean(L, 1);
    return;
  }
  if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
    lua_pushboolean(L, 0);
    return;
  }
  char *end;
  const char *p = s + (s[0] == '-' || s[0] == '+');
  bool digits = *p != 0;
  for (const char *q = p; *q; q++) digits = digits && *q >= '0' && *q <= '9';
  if (digits) {
    long long v = strtoll(s, &end, 10);
    if (*end == 0 && n < 19) {
      lua_pushinteger(L, (lua_Integer)v);
      return;
    }
  }
  if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    long long v = strtoll(s + 2, &end, s[1] == 'x' ? 16 : 8);
    if (*end == 0) {
      lua_pushinteger(L, (lua_Integer)v);
      return;
    }
  }
  if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF")) {
    lua_pushnumber(L, s[0] == '-' ? -HUGE_VAL : HUGE_VAL);
    return;
  }
  if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) {
    lua_pushnumber(L, NAN);
    return;
  }
  /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
  const char *q = p;
  size_t int_digits = 0, frac_digits = 0;
  while (*q >= '0' && *q <= '9') q++, int_digits++;
  if (*q == '.') {
    q++;
    while (*q >= '0' && *q <= '9') q++, frac_digits++;
  }
  bool number = int_digits + frac_digits > 0 && !(int_digits == 0 && frac_digits == 0);
  if (number && (*q == 'e' || *q == 'E')) {
    q++;
    if (*q == '-' || *q == '+') q++;
    number = *q >= '0' && *q <= '9';
    while (*q >= '0' && *q <= '9') q++;
  }
  if (number && *q == 0) {
    lua_pushnumber(L, strtod(s, NULL));
    return;
  }
  lua_pushlstring(L, s, n);
}

typedef struct yaml_reader {
  yaml_parser_t parser;
  yaml_event_t event;
  bool has_event;
  char error[200];
} yaml_reader;

static bool next_event(yaml_reader *r) {
  if (r->has_event) yaml_event_delete(&r->event);
  r->has_event = false;
  if (!yaml_parser_parse(&r->parser, &r->event)) {
    snprintf(r->error, sizeof r->error, "line %zu: %s", r->parser.problem_mark.line + 1,
             r->parser.problem ? r->parser.problem : "not valid YAML");
    return false;
  }
  r->has_event = true;
  return true;
}

static bool refuse(yaml_reader *r, const char *what) {
  snprintf(r->error, sizeof r->error, "line %zu: %s", r->event.start_mark.line + 1, what);
  return false;
}

/* Push the value that starts at the current event. */
static bool read_value(lua_State *L, yaml_reader *r, int depth) {
  if (depth > 64) return refuse(r, "nested too deeply");
  if (!lua_checkstack(L, 4)) return refuse(r, "nested too deeply");
  yaml_event_t *e = &r->event;
  switch (e->type) {
    case YAML_ALIAS_EVENT: return refuse(r, "aliases (*name) are not allowed in front matter");
    case YAML_SCALAR_EVENT:
      if (e->data.scalar.anchor) return refuse(r, "anchors (&name) are not allowed in front matter");
      if (e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !e->data.scalar.tag)
        push_plain(L, (const char *)e->data.scalar.value, e->data.scalar.length);
      else lua_pushlstring(L, (const char *)e->data.scalar.value, e->data.scalar.length);
      return true;
    case YAML_SEQUENCE_START_EVENT: {
      if (e->data.sequence_start.anchor) return refuse(r, "anchors (&name) are not allowed in front matter");
      lua_newtable(L);
      luaL_setmetatable(L, LJSON_ARRAY_MT);
      lua_Integer i = 0;
      for (;;) {
        if (!next_event(r)) return false;
        if (r->event.type == YAML_SEQUENCE_END_EVENT) return true;
        if (!read_value(L, r, depth + 1)) return false;
        lua_rawseti(L, -2, ++i);
      }
    }
    case YAML_MAPPING_START_EVENT: {
      if (e->data.mapping_start.anchor) return refuse(r, "anchors (&name) are not allowed in front matter");
      lua_newtable(L);
      luaL_setmetatable(L, LJSON_OBJECT_MT);
      for (;;) {
        if (!next_event(r)) return false;
        if (r->event.type == YAML_MAPPING_END_EVENT) return true;
        if (r->event.type != YAML_SCALAR_EVENT) return refuse(r, "a key must be a plain string");
        lua_pushlstring(L, (const char *)r->event.data.scalar.value, r->event.data.scalar.length);
        if (lua_rawget(L, -2) != LUA_TNIL) return refuse(r, "a key appears twice");
        lua_pop(L, 1);
        lua_pushlstring(L, (const char *)r->event.data.scalar.value, r->event.data.scalar.length);
        if (!next_event(r)) return false;
        if (!read_value(L, r, depth + 1)) return false;
        lua_rawset(L, -3);
      }
    }
    default: return refuse(r, "unexpected YAML");
  }
}

/* yaml_decode(text) -> value | nil, "line N: problem" (one document). */
static int skills_yaml_decode(lua_State *L) {
  size_t n;
  const char *text = luaL_checklstring(L, 1, &n);
  yaml_reader r;
  memset(&r, 0, sizeof r);
  if (!yaml_parser_initialize(&r.parser)) return luaL_error(L, "out of memory");
  yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, n);
  bool ok = next_event(&r) && r.event.type == YAML_STREAM_START_EVENT && next_event(&r);
  int top = lua_gettop(L);
  if (ok && r.event.type == YAML_STREAM_END_EVENT) {
    lua_pushnil(L); /* empty */
  } else if (ok && r.event.type == YAML_DOCUMENT_START_EVENT) {
    ok = next_event(&r) && read_value(L, &r, 0) && next_event(&r) && r.event.type == YAML_DOCUMENT_END_EVENT &&
         next_event(&r);
    if (ok && r.event.type != YAML_STREAM_END_EVENT) ok = refuse(&r, "only one YAML document is allowed");
  } else if (ok) {
    ok = refuse(&r, "not a YAML document");
  }
  if (r.has_event) yaml_event_delete(&r.event);
  yaml_parser_delete(&r.parser);
  if (!ok) {
    lua_settop(L, top);
    luaL_pushfail(L);
    lua_pushstring(L, r.error[0] ? r.error : "not valid YAML");
    return 2;
  }
  return 1;
}

/* sha256(bytes) -> 64 lowercase hex digits */
static int skills_sha256(lua_State *L) {
  size_t n;
  const char *data = luaL_checklstring(L, 1, &n);
  uint8_t md[OS_SHA256_BYTES];
  os_sha256(data, n, md);
  char hex[2 * OS_SHA256_BYTES + 1];
  for (int i = 0; i < OS_SHA256_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  lua_pushlstring(L, hex, 2 * OS_SHA256_BYTES);
  return 1;
}

void lua_skills_register(lua_State *L, int core_table) {
  core_table = lua_absindex(L, core_table);
  lua_pushcfunction(L, skills_yaml_decode);
  lua_setfield(L, core_table, "yaml_decode");
  lua_pushcfunction(L, skills_sha256);
  lua_setfield(L, core_table, "sha256");
}

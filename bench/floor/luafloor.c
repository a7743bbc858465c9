/*
 * luafloor: the cheapest honest MCP stdio server on luamcp's stack.
 *
 * Newline-delimited JSON-RPC on stdin/stdout. Every line is decoded with
 * lua-cjson (cjson.decode) inside a Lua 5.4 state, the response is built as a
 * Lua table and encoded with cjson.encode -- exactly the per-message work any
 * server built on Lua 5.4 + lua-cjson has to do at least. No event loop, no
 * schema validation, no dispatch tables: read(), one Lua call per line,
 * write() once per batch of input.
 *
 * Answers initialize, ping, tools/list and tools/call "add" (sum as integer
 * text); ignores notifications; anything else gets -32601.
 * Exits on stdin EOF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int luaopen_cjson(lua_State *L);

static const char *handler_src =
    "local cjson = require 'cjson'\n"
    "local decode, encode = cjson.decode, cjson.encode\n"
    "local tointeger, type, tostring = math.tointeger, type, tostring\n"
    "local empty = setmetatable({}, { __newindex = function() error('read-only') end })\n"
    "local schema = { type = 'object', required = { 'a', 'b' },\n"
    "  properties = { a = { type = 'integer' }, b = { type = 'integer' } } }\n"
    "local function reply(id, result) return encode { jsonrpc = '2.0', id = id, result = result } end\n"
    "local function fail(id, code, msg)\n"
    "  return encode { jsonrpc = '2.0', id = id, error = { code = code, message = msg } }\n"
    "end\n"
    "return function(line)\n"
    "  local ok, msg = pcall(decode, line)\n"
    "  if not ok or type(msg) ~= 'table' then return fail(cjson.null, -32700, 'Parse error') end\n"
    "  local id, method = msg.id, msg.method\n"
    "  if id == nil then return nil end -- notification\n"
    "  local params = msg.params\n"
    "  if method == 'tools/call' then\n"
    "    if type(params) ~= 'table' or params.name ~= 'add' then return fail(id, -32602, 'Unknown tool') end\n"
    "    local args = params.arguments\n"
    "    local a = type(args) == 'table' and tointeger(args.a)\n"
    "    local b = type(args) == 'table' and tointeger(args.b)\n"
    "    if not a or not b then\n"
    "      return reply(id, { content = { { type = 'text', text = 'a and b must be integers' } }, isError = true })\n"
    "    end\n"
    "    return reply(id, { content = { { type = 'text', text = tostring(a + b) } } })\n"
    "  elseif method == 'initialize' then\n"
    "    local v = type(params) == 'table' and params.protocolVersion or '2025-11-25'\n"
    "    return reply(id, { protocolVersion = v, capabilities = { tools = empty },\n"
    "                       serverInfo = { name = 'luafloor', version = '1.0.0' } })\n"
    "  elseif method == 'ping' then\n"
    "    return reply(id, empty)\n"
    "  elseif method == 'tools/list' then\n"
    "    return reply(id, { tools = { { name = 'add', description = 'Add two integers', inputSchema = schema } } })\n"
    "  end\n"
    "  return fail(id, -32601, 'Method not found')\n"
    "end\n";

static int write_all(const char *p, size_t n) {
  while (n) {
    ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "cjson", luaopen_cjson, 0);
  lua_pop(L, 1);
  if (luaL_loadstring(L, handler_src) || lua_pcall(L, 0, 1, 0)) {
    fprintf(stderr, "luafloor: %s\n", lua_tostring(L, -1));
    return 1;
  }
  int handler = luaL_ref(L, LUA_REGISTRYINDEX);

  size_t cap = 1 << 16, len = 0;
  char *in = malloc(cap);
  size_t ocap = 1 << 16, olen = 0;
  char *out = malloc(ocap);
  if (!in || !out) return 1;
  for (;;) {
    if (len == cap) {
      if (cap >= (64u << 20)) { fprintf(stderr, "luafloor: line too long\n"); return 1; }
      cap *= 2;
      in = realloc(in, cap);
      if (!in) return 1;
    }
    ssize_t n = read(0, in + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    size_t start = 0;
    char *nl;
    while ((nl = memchr(in + start, '\n', len - start))) {
      size_t l = (size_t)(nl - (in + start));
      if (l && in[start + l - 1] == '\r') l--;
      if (l) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, handler);
        lua_pushlstring(L, in + start, l);
        if (lua_pcall(L, 1, 1, 0)) {
          fprintf(stderr, "luafloor: %s\n", lua_tostring(L, -1));
        } else if (lua_type(L, -1) == LUA_TSTRING) {
          size_t rl;
          const char *r = lua_tolstring(L, -1, &rl);
          while (olen + rl + 1 > ocap) {
            ocap *= 2;
            out = realloc(out, ocap);
            if (!out) return 1;
          }
          memcpy(out + olen, r, rl);
          olen += rl;
          out[olen++] = '\n';
        }
        lua_pop(L, 1);
      }
      start = (size_t)(nl - in) + 1;
    }
    memmove(in, in + start, len - start);
    len -= start;
    /* one write per read: answers everything that arrived together */
    if (olen) {
      if (write_all(out, olen)) break;
      olen = 0;
    }
  }
  lua_close(L);
  free(in);
  free(out);
  return 0;
}

/*
 * lua_core.c - the mcp.core module: what the Lua library (lua/mcp.lua) needs
 * from the runtime. Scripts use the library, never this module directly.
 * Every function has the vm as its first upvalue.
 */
#include <errno.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base64.h"
#include "core/clock.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "core/state_token.h"
#include "os/path.h"
#include "os/sock.h"
#include "app/lua_json.h"
#include "app/app.h"
#include "app/lua_core.h"
#include "app/metrics.h"
#include "app/lua_exec.h"
#include "app/lua_http.h"
#include "app/lua_fs.h"
#include "app/lua_sqlite.h"
#include "app/lua_schema.h"
#include "app/lua_skills.h"
#include "app/lua_state.h"
#include "app/lua_store.h"
#include "app/lua_task.h"
#include "app/bus.h"

static vm *core_vm(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* Encode argument idx or raise with what went wrong. */
static void encode_arg(lua_State *L, int idx, buf *out, const char *what) {
  char err[160];
  if (!ljson_encode(L, idx, out, err, sizeof err)) {
    buf_free(out);
    luaL_error(L, "%s: %s", what, err);
  }
}

/* rpc_error(code, message [, data]): raise the JSON-RPC error that answers
 * the current request. */
static int core_rpc_error(lua_State *L) {
  lua_Integer code = luaL_checkinteger(L, 1);
  luaL_checkstring(L, 2);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, code);
  lua_setfield(L, -2, "code");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "message");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "data");
  luaL_setmetatable(L, VM_RPC_ERROR_MT);
  return lua_error(L);
}

/* free_port(): a TCP port on 127.0.0.1 that nothing listens on now, found
 * by binding port 0 and letting it go (mcp.a2a tells a child agent to
 * listen there); or nil and why. Another process may take it meanwhile:
 * the child then fails to listen and says so. */
static int core_free_port(lua_State *L) {
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  int s = os_sock_listen_shared((const struct sockaddr *)&addr, 1);
  if (s < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "no free port on 127.0.0.1: %s", uv_strerror(s));
    return 2;
  }
  struct sockaddr_in bound;
  socklen_t len = sizeof bound;
  int rc = getsockname((uv_os_sock_t)s, (struct sockaddr *)&bound, &len);
  os_sock_close((uv_os_sock_t)s);
  if (rc != 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "no free port on 127.0.0.1: getsockname failed");
    return 2;
  }
  lua_pushinteger(L, ntohs(bound.sin_port));
  return 1;
}

/* is_rpc_error(value): was value raised by rpc_error? */
static int core_is_rpc_error(lua_State *L) {
  bool is = false;
  if (lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1)) {
    luaL_getmetatable(L, VM_RPC_ERROR_MT);
    is = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  lua_pushboolean(L, is);
  return 1;
}

/* broadcast(method [, params [, here_only]]): a notification to every
 * initialized session, and a list_changed to the other processes' too (the
 * bus), as a reload's; here_only: not to the others (a change every process
 * makes itself: mcp.everywhere). */
static int core_broadcast(lua_State *L) {
  const char *method = luaL_checkstring(L, 1);
  buf params = BUF_INIT;
  if (!lua_isnoneornil(L, 2)) encode_arg(L, 2, &params, "broadcast");
  vm *v = core_vm(L);
  server_broadcast(v->srv, method, params.data, params.len);
  if (v->app && !lua_toboolean(L, 3)) bus_list_changed(v->app->bus, method);
  buf_free(&params);
  return 0;
}

/* everywhere(name, args_json): the other processes run the mcp.everywhere
 * function name with these arguments too (the bus; none: nothing to do). */
static int core_everywhere(lua_State *L) {
  size_t name_len, args_len;
  const char *name = luaL_checklstring(L, 1, &name_len);
  const char *args = luaL_checklstring(L, 2, &args_len);
  vm *v = core_vm(L);
  if (v->app) bus_everywhere(v->app->bus, name, name_len, args, args_len);
  return 0;
}

/* shared() -> whether other processes serve this server too (--workers,
 * --redis): a list changed here outside mcp.everywhere is this one's. */
static int core_shared(lua_State *L) {
  vm *v = core_vm(L);
  lua_pushboolean(L, v->app && bus_is_shared(v->app->bus));
  return 1;
}

/* resource_updated(uri): this process's subscribers, and the other
 * processes' (the bus: --redis, or the other workers). */
static int core_resource_updated(lua_State *L) {
  size_t n;
  const char *uri = luaL_checklstring(L, 1, &n);
  vm *v = core_vm(L);
  server_resource_updated(v->srv, uri, n);
  if (v->app) bus_resource_updated(v->app->bus, uri, n);
  return 0;
}

/* log(level, data [, logger]): stderr and every session's notifications/message. */
static int core_log(lua_State *L) {
  size_t n;
  const char *name = luaL_checklstring(L, 1, &n);
  int level = log_level_parse(name, n);
  if (level < 0) return luaL_argerror(L, 1, "not a log level");
  luaL_checkany(L, 2);
  const char *logger = luaL_optstring(L, 3, NULL);
  buf data = BUF_INIT;
  encode_arg(L, 2, &data, "mcp.log");
  if (lua_type(L, 2) == LUA_TSTRING) log_write(level, "%s", lua_tostring(L, 2));
  else log_write(level, "%s", data.data);
  server_log(core_vm(L)->srv, level, logger, data.data, data.len);
  buf_free(&data);
  return 0;
}

/* stderr(level, message): the server's own log only, never the client. */
static int core_stderr(lua_State *L) {
  size_t n;
  const char *name = luaL_checklstring(L, 1, &n);
  int level = log_level_parse(name, n);
  if (level < 0) return luaL_argerror(L, 1, "not a log level");
  log_write(level, "%s", luaL_checkstring(L, 2));
  return 0;
}

static int core_base64_encode(lua_State *L) {
  size_t n;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &n);
  size_t len = base64_encoded_len(n);
  luaL_Buffer b;
  base64_encode(s, n, luaL_buffinitsize(L, &b, len));
  luaL_pushresultsize(&b, len);
  return 1;
}

int lua_base64_decode(lua_State *L) {
  size_t n, len, bad;
  const char *s = luaL_checklstring(L, 1, &n);
  luaL_Buffer b;
  unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, base64_decoded_max(n));
  if (!base64_decode(s, n, out, &len, &bad)) {
    lua_pushnil(L);
    lua_pushfstring(L, "invalid base64 character at byte %d", (int)bad + 1);
    return 2;
  }
  luaL_pushresultsize(&b, len);
  return 1;
}

/* core.random_hex(bytes) -> hex of that many random bytes (at most 64)
 * from the system's generator: ids that are the key to what they name (an
 * agent's task ids). Drawn 4 KiB at a time (a system call per id was a
 * tenth of a small A2A request). Raises without randomness. */
static int core_random_hex(lua_State *L) {
  static unsigned char pool[4096];
  static size_t left;
  static const char digits[] = "0123456789abcdef";
  lua_Integer n = luaL_optinteger(L, 1, 16);
  if (n < 1 || n > 64) return luaL_error(L, "random_hex: 1 to 64 bytes");
  if (left < (size_t)n) {
    if (uv_random(NULL, NULL, pool, sizeof pool, 0, NULL) != 0) return luaL_error(L, "no randomness available");
    left = sizeof pool;
  }
  char hex[128];
  const unsigned char *bytes = pool + sizeof pool - left;
  for (lua_Integer i = 0; i < n; i++) {
    hex[2 * i] = digits[bytes[i] >> 4];
    hex[2 * i + 1] = digits[bytes[i] & 15];
  }
  memset((void *)bytes, 0, (size_t)n); /* an id handed out is not kept */
  left -= (size_t)n;
  lua_pushlstring(L, hex, (size_t)(2 * n));
  return 1;
}

static int core_page_size(lua_State *L) {
  lua_pushinteger(L, core_vm(L)->srv->opts.page_size);
  return 1;
}

/* state_seal(binding, payload [, ttl_ms]): a requestState token
 * (core/state_token.h). */
static int core_state_seal(lua_State *L) {
  size_t blen, plen;
  const char *binding = luaL_checklstring(L, 1, &blen);
  const char *payload = luaL_checklstring(L, 2, &plen);
  lua_Integer ttl = luaL_optinteger(L, 3, MRTR_STATE_TTL_MS);
  size_t n;
  char *token = state_seal(binding, blen, payload, plen, (uint64_t)clock_wall_ms() + (uint64_t)(ttl > 0 ? ttl : 0), &n);
  if (!token) return luaL_error(L, "no key to seal requestState with (no randomness available)");
  lua_pushlstring(L, token, n);
  free(token);
  return 1;
}

/* state_open(binding, token): the payload, or nil and why not. */
static int core_state_open(lua_State *L) {
  size_t blen, tlen;
  const char *binding = luaL_checklstring(L, 1, &blen);
  const char *token = luaL_checklstring(L, 2, &tlen);
  char *payload;
  size_t n;
  state_verdict v = state_open(binding, blen, token, tlen, (uint64_t)clock_wall_ms(), &payload, &n);
  if (v != STATE_OK) {
    lua_pushnil(L);
    lua_pushstring(L, state_verdict_text(v));
    return 2;
  }
  lua_pushlstring(L, payload, n);
  free(payload);
  return 1;
}

/* state_digest(text): SHA-256 of text in hex (core/state_token.h). */
static int core_state_digest(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  char hex[65];
  state_digest(text, len, hex);
  lua_pushlstring(L, hex, 64);
  return 1;
}

/* realpath(path) -> the absolute path, symlinks and .. resolved | nil,
 * message, code (ENOENT, ...). */
static int core_realpath(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char *real = os_path_real(path);
  if (!real) {
    int e = errno;
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(e));
    lua_pushstring(L, e == ENOENT ? "ENOENT" : e == EACCES ? "EACCES" : e == ENOTDIR ? "ENOTDIR" : "EIO");
    return 3;
  }
  lua_pushstring(L, real);
  free(real);
  return 1;
}

/* which(name) -> the absolute path of the program name runs, as the
 * platform finds it (os/path.h: PATH on POSIX, a name with a separator
 * taken as a path), symlinks resolved | nil. */
static int core_which(lua_State *L) {
  char *real = os_path_which(luaL_checkstring(L, 1));
  if (!real) return 0;
  lua_pushstring(L, real);
  free(real);
  return 1;
}

/* The real getenv, for the permission checks themselves (os.getenv is a
 * door they guard). */
static int core_getenv(lua_State *L) {
  const char *v = getenv(luaL_checkstring(L, 1));
  if (!v) return 0;
  lua_pushstring(L, v);
  return 1;
}

static int core_current_ctx(lua_State *L) { return task_push_current_ctx(L, core_vm(L)); }

/* readlink(path) -> what the symbolic link at path points to | nil. */
static int core_readlink(lua_State *L) {
  char *target = os_path_readlink(luaL_checkstring(L, 1));
  if (!target) return 0;
  lua_pushstring(L, target);
  free(target);
  return 1;
}

/* permission_overrides() -> the command line's --allow-* JSON text, or nil;
 * script_dir() -> the folder the scripts were loaded from. */
static int core_permission_overrides(lua_State *L) {
  const char *json = core_vm(L)->srv->opts.permissions_json;
  if (!json) return 0;
  lua_pushstring(L, json);
  return 1;
}

static int core_script_dir(lua_State *L) {
  lua_pushstring(L, core_vm(L)->module_dir);
  return 1;
}

/* The name a server gets when mcp.server{} gives none: the script folder's
 * (or file's) base name. */
static int core_default_name(lua_State *L) {
  const char *path = core_vm(L)->path;
  size_t n = strlen(path);
  while (n > 1 && os_path_is_separator(path[n - 1])) n--;
  size_t start = n;
  while (start > 0 && !os_path_is_separator(path[start - 1])) start--;
  size_t len = n - start;
  if (len > 4 && memcmp(path + start + len - 4, ".lua", 4) == 0) len -= 4;
  if (len == 0 || (len == 1 && path[start] == '.')) lua_pushliteral(L, "luamcp");
  else lua_pushlstring(L, path + start, len);
  return 1;
}

int luaopen_mcp_core(lua_State *L) {
  static const luaL_Reg functions[] = {
      {"json_encode", ljson_lua_encode},
      {"json_decode", ljson_lua_decode},
      {"array", ljson_lua_array},
      {"object", ljson_lua_object},
      {"raw", ljson_lua_raw},
      {"sleep", task_lua_sleep},
      {"spawn", task_lua_spawn},
      {"background", task_lua_background},
      {"signal", task_lua_signal},
      {"exec", lua_exec},
      {"http_request", lua_http_request},
      {"rpc_error", core_rpc_error},
      {"metric_define", metrics_lua_define},
      {"metric_add", metrics_lua_add},
      {"is_rpc_error", core_is_rpc_error},
      {"free_port", core_free_port},
      {"broadcast", core_broadcast},
      {"everywhere", core_everywhere}, {"shared", core_shared},
      {"resource_updated", core_resource_updated},
      {"log", core_log},
      {"stderr", core_stderr},
      {"base64_encode", core_base64_encode},
      {"base64_decode", lua_base64_decode},
      {"page_size", core_page_size},
      {"random_hex", core_random_hex},
      {"state_seal", core_state_seal},
      {"state_open", core_state_open},
      {"state_digest", core_state_digest},
      {"default_name", core_default_name},
      {"realpath", core_realpath},
      {"which", core_which},
      {"getenv", core_getenv},
      {"permission_overrides", core_permission_overrides},
      {"script_dir", core_script_dir},
      {"current_ctx", core_current_ctx},
      {"readlink", core_readlink},
      {"schema_compile", lua_schema_compile},
      {"schema_validate", lua_schema_validate},
      {"tool_input", lua_schema_tool_input},
      {"state", lua_state_get},
      {"info", lua_state_info},
      {NULL, NULL},
  };
  luaL_newlibtable(L, functions);
  lua_pushvalue(L, lua_upvalueindex(1)); /* the vm */
  luaL_setfuncs(L, functions, 1);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  /* Whose path rules lua/mcp/path.lua applies: "posix" or "windows". */
  lua_pushstring(L, os_path_platform());
  lua_setfield(L, -2, "platform");
  /* The error codes and limits Lua needs, from their one place in C. */
  static const struct { const char *name; lua_Integer value; } constants[] = {
      {"INVALID_PARAMS", JSONRPC_INVALID_PARAMS},
      {"METHOD_NOT_FOUND", JSONRPC_METHOD_NOT_FOUND},
      {"INTERNAL_ERROR", JSONRPC_INTERNAL_ERROR},
      {"RESOURCE_NOT_FOUND", MCP_RESOURCE_NOT_FOUND},
      {"MISSING_CAPABILITY", MCP_MISSING_CAPABILITY},
      {"HEADER_MISMATCH", MCP_HEADER_MISMATCH},
      {"INSUFFICIENT_SCOPE", MCP_INSUFFICIENT_SCOPE},
      {"MAX_COMPLETION_VALUES", MAX_COMPLETION_VALUES},
  };
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
    lua_pushinteger(L, constants[i].value);
    lua_setfield(L, -2, constants[i].name);
  }
  lua_getfield(L, LUA_REGISTRYINDEX, TASK_CTX_METHODS);
  lua_setfield(L, -2, "ctx_methods");
  lua_fs_register(L, lua_gettop(L));
  lua_sqlite_register(L, lua_gettop(L));
  lua_store_register(L, lua_gettop(L));
  lua_skills_register(L, lua_gettop(L));
  return 1;
}

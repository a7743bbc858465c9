/*
 * vm.c - a generation of scripts: the Lua state, how modules are found, how
 * scripts are loaded, and the app_ops the protocol core calls.
 */
#include "vm.h"

#include <dirent.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "embedded.h"
#include "jsonrpc.h"
#include "log.h"
#include "lua_json.h"

int luaopen_cjson(lua_State *L);
int luaopen_cjson_safe(lua_State *L);

/* ---- Module search --------------------------------------------------- */

static int try_load_file(lua_State *L, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  if (luaL_loadfilex(L, path, "bt") != LUA_OK) return lua_error(L);
  lua_pushstring(L, path);
  return 2;
}

/* package.searchers entry: modules in the script folder come first, so a
 * script can ship its own helpers next to it. */
static int search_script_folder(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  const char *rel = luaL_gsub(L, name, ".", "/");
  const char *candidates[2] = {
      lua_pushfstring(L, "%s/%s.lua", v->module_dir, rel),
      lua_pushfstring(L, "%s/%s/init.lua", v->module_dir, rel),
  };
  for (int i = 0; i < 2; i++) {
    int n = try_load_file(L, candidates[i]);
    if (n) return n;
  }
  lua_pushfstring(L, "no file '%s'\n\tno file '%s'", candidates[0], candidates[1]);
  return 1;
}

/* package.searchers entry: the Lua library built into the binary. */
static int search_embedded(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  for (size_t i = 0; i < EMBEDDED_LUA_COUNT; i++) {
    const embedded_file *f = &EMBEDDED_LUA[i];
    if (strcmp(f->name, name) != 0) continue;
    const char *chunkname = lua_pushfstring(L, "@[luamcp]/%s", f->path);
    if (luaL_loadbufferx(L, (const char *)f->data, f->len, chunkname, "t") != LUA_OK) return lua_error(L);
    lua_pushstring(L, chunkname + 1);
    return 2;
  }
  lua_pushfstring(L, "no module '%s' in luamcp's built-in library", name);
  return 1;
}

static void add_searchers(lua_State *L, vm *v) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  /* Shift the standard searchers up two places after package.preload. */
  lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
  for (lua_Integer i = n; i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 2);
  }
  lua_pushlightuserdata(L, v);
  lua_pushcclosure(L, search_script_folder, 1);
  lua_rawseti(L, -2, 2);
  lua_pushcfunction(L, search_embedded);
  lua_rawseti(L, -2, 3);
  lua_pop(L, 1);

  lua_getfield(L, -1, "preload");
  lua_pushlightuserdata(L, v);
  lua_pushcclosure(L, luaopen_mcp_core, 1);
  lua_setfield(L, -2, "mcp.core");
  lua_pushcfunction(L, luaopen_cjson);
  lua_setfield(L, -2, "cjson");
  lua_pushcfunction(L, luaopen_cjson_safe);
  lua_setfield(L, -2, "cjson.safe");
  lua_pop(L, 2);
}

/* os.execute and io.popen wait for the child, which would stop every other
 * request; they are replaced by functions that say so. */
static int blocked_function(lua_State *L) {
  return luaL_error(L, "%s is not available in luamcp: it blocks every other request while it waits; use mcp.exec",
                    lua_tostring(L, lua_upvalueindex(1)));
}

static void block_global(lua_State *L, const char *lib, const char *name) {
  lua_getglobal(L, lib);
  lua_pushfstring(L, "%s.%s", lib, name);
  lua_pushcclosure(L, blocked_function, 1);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

static int rpc_error_tostring(lua_State *L) {
  lua_getfield(L, 1, "message");
  return 1;
}

/* ---- Loading scripts ------------------------------------------------- */

static int traceback_handler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Run fn (already pushed with nargs arguments) in protected mode with a
 * traceback; on error append the message to err. */
static bool protected_call(lua_State *L, int nargs, int nresults, buf *err) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (status == LUA_OK) return true;
  if (err) buf_append_str(err, lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)");
  lua_pop(L, 1);
  return false;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.lua files directly inside dir, sorted. Returns the count; *out must
 * be freed with each entry. */
static int list_scripts(const char *dir, char ***out) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || e->d_name[0] == '.' || strcmp(e->d_name + len - 4, ".lua") != 0) continue;
    char *full = malloc(strlen(dir) + len + 2);
    sprintf(full, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
      free(full);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      names = realloc(names, (size_t)cap * sizeof *names);
    }
    names[n++] = full;
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, compare_names);
  *out = names;
  return n;
}

static bool load_scripts(vm *v, buf *err) {
  lua_State *L = v->L;
  struct stat st;
  if (stat(v->path, &st) != 0) {
    buf_printf(err, "%s: no such file or folder", v->path);
    return false;
  }
  char **files = NULL;
  int count;
  if (S_ISDIR(st.st_mode)) {
    count = list_scripts(v->path, &files);
    if (count < 0) {
      buf_printf(err, "%s: cannot read the folder", v->path);
      return false;
    }
    if (count == 0) {
      buf_printf(err, "%s: no .lua files in this folder", v->path);
      free(files);
      return false;
    }
  } else {
    files = malloc(sizeof *files);
    files[0] = strdup(v->path);
    count = 1;
  }
  bool ok = true;
  for (int i = 0; i < count; i++) {
    if (ok) {
      if (luaL_loadfilex(L, files[i], "bt") != LUA_OK) {
        buf_append_str(err, lua_tostring(L, -1));
        lua_pop(L, 1);
        ok = false;
      } else {
        ok = protected_call(L, 0, 0, err);
      }
    }
    free(files[i]);
  }
  free(files);
  return ok;
}

/* After the scripts ran: fetch the library's entry points. */
static bool bind_library(vm *v, buf *err) {
  lua_State *L = v->L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mcp");
  if (!protected_call(L, 1, 1, err)) return false;
  lua_getfield(L, -1, "_dispatch");
  v->dispatch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "_describe");
  v->describe_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "_start");
  bool started = protected_call(L, 0, 0, err);
  lua_pop(L, 1);
  return started;
}

vm *vm_new(server *srv, uv_loop_t *loop, const char *path, buf *err) {
  vm *v = calloc(1, sizeof *v);
  v->srv = srv;
  v->loop = loop;
  v->path = strdup(path);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    v->module_dir = strdup(path);
  } else {
    const char *slash = strrchr(path, '/');
    v->module_dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
  }
  v->dispatch_ref = v->describe_ref = LUA_NOREF;
  strmap_init(&v->tool_inputs);
  lua_State *L = v->L = luaL_newstate();
  *(task **)lua_getextraspace(L) = NULL; /* copied into every new thread */
  luaL_openlibs(L);
  ljson_init(L);
  task_register_ctx(L);
  lua_schema_register(L);
  luaL_newmetatable(L, VM_RPC_ERROR_MT);
  lua_pushcfunction(L, rpc_error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  add_searchers(L, v);
  block_global(L, "os", "execute");
  block_global(L, "io", "popen");
  if (!load_scripts(v, err) || !bind_library(v, err)) {
    vm_free(v);
    return NULL;
  }
  return v;
}

void vm_free(vm *v) {
  if (!v) return;
  if (v->L) lua_close(v->L);
  lua_schema_forget_tools(v);
  free(v->path);
  free(v->module_dir);
  free(v->server_info_json);
  free(v->instructions);
  free(v);
}

/* ---- app_ops --------------------------------------------------------- */

static void app_call_start(void *app, call *c, const json_value *params, const char *src) {
  (void)src;
  vm *v = ((lua_app *)app)->current;
  task_start_call(v, c, params);
}

static void app_call_cancel(void *app, call *c) {
  (void)app;
  task *t = c->app_data;
  if (t) task_cancel(t);
}

static char *string_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  char *s = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
  lua_pop(L, 1);
  return s;
}

static bool bool_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  bool b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

static void app_describe(void *app, app_description *out) {
  vm *v = ((lua_app *)app)->current;
  lua_State *L = v->L;
  buf err = BUF_INIT;
  lua_rawgeti(L, LUA_REGISTRYINDEX, v->describe_ref);
  if (!protected_call(L, 0, 1, &err)) {
    log_write(LOG_ERROR, "describing the server failed: %s", err.data);
    buf_free(&err);
    return;
  }
  int idx = lua_gettop(L);
  free(v->server_info_json);
  free(v->instructions);
  lua_getfield(L, idx, "server_info");
  buf info = BUF_INIT;
  char why[160];
  if (ljson_encode(L, -1, &info, why, sizeof why)) v->server_info_json = buf_detach(&info, NULL);
  else v->server_info_json = NULL, buf_free(&info);
  lua_pop(L, 1);
  v->instructions = string_field(L, idx, "instructions");
  out->server_info_json = v->server_info_json;
  out->instructions = v->instructions;
  out->tools = bool_field(L, idx, "tools");
  out->resources = bool_field(L, idx, "resources");
  out->prompts = bool_field(L, idx, "prompts");
  out->completions = bool_field(L, idx, "completions");
  lua_settop(L, idx - 1);
  buf_free(&err);
}

const app_ops VM_APP_OPS = {
    .call_start = app_call_start,
    .call_cancel = app_call_cancel,
    .describe = app_describe,
};

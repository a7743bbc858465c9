/*
 * vm.c - a generation of scripts: the Lua state, how modules are found, how
 * scripts are loaded, and the app_ops the protocol core calls.
 */
#include "app/vm.h"

#include <dirent.h>
#include <stdint.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/embedded.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "app/lua_bundle.h"
#include "app/metrics.h"
#include "app/lua_core.h"
#include "app/lua_remote.h"
#include "app/lua_heap.h"
#include "app/lua_json.h"
#include "app/lua_pattern.h"
#include "app/lua_schema.h"
#include "app/lua_task.h"
#include "app/bus.h"
#include "app/watchdog.h"
#include "os/path.h"

int luaopen_cjson(lua_State *L);
int luaopen_cjson_safe(lua_State *L);

/* ---- Memory ---------------------------------------------------------- */

/* A generation and the blocks of its Lua state, allocated together:
 * vm_alloc is given the vm (vm_of finds it there) and reaches the heap
 * beside it. */
typedef struct {
  vm v;
  lua_heap heap;
} vm_with_heap;

static lua_heap *heap_of(vm *v) { return &((vm_with_heap *)v)->heap; }

/* The Lua allocator, with a cap per generation: an allocation beyond it
 * fails, and Lua raises "not enough memory" in the code that asked, which
 * ends that call and nothing else. mem_used counts the sizes Lua asked
 * for, not what the heap caches. */
static void *vm_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  vm *v = ud;
  size_t old = ptr ? osize : 0; /* without ptr, osize tells the type of object */
  if (nsize == 0) {
    lua_heap_free(heap_of(v), ptr, old);
    v->mem_used -= old;
    return NULL;
  }
  if (v->mem_limit && nsize > old && nsize - old > v->mem_limit - (v->mem_used < v->mem_limit ? v->mem_used : v->mem_limit))
    return NULL;
  void *p = lua_heap_resize(heap_of(v), ptr, old, nsize);
  if (p) v->mem_used = v->mem_used - old + nsize;
  return p;
}

/* Debian's lua-cjson 2.1.0 builds its output in a malloc'd buffer whose
 * size arithmetic overflows near 357 MB, crashing the process. Before
 * cjson.encode runs, estimate its output (6 bytes per string byte, the
 * worst case of \u escapes) and refuse what could overflow or would not
 * fit the memory limit. */
static size_t estimate_encoded(lua_State *L, int idx, int depth) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: return lua_rawlen(L, idx) * 6 + 2;
    case LUA_TTABLE: {
      if (depth > 1000 || !lua_checkstack(L, 3)) return 0;
      size_t total = 2;
      idx = lua_absindex(L, idx);
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        total += estimate_encoded(L, -2, depth + 1) + estimate_encoded(L, -1, depth + 1) + 2;
        lua_pop(L, 1);
      }
      return total;
    }
    default: return 32;
  }
}

static int guarded_cjson_encode(lua_State *L) {
  vm *v = vm_of(L);
  size_t estimate = estimate_encoded(L, 1, 0);
  size_t room = v->mem_limit ? (v->mem_limit > v->mem_used ? v->mem_limit - v->mem_used : 0) : (size_t)1 << 40;
  if (estimate > (size_t)INT32_MAX / 2 || estimate > room)
    return luaL_error(L, "not enough memory: cjson.encode's output could reach %d MiB", (int)(estimate >> 20));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

static int open_guarded(lua_State *L, lua_CFunction opener) {
  opener(L);
  lua_getfield(L, -1, "encode");
  lua_pushcclosure(L, guarded_cjson_encode, 1);
  lua_setfield(L, -2, "encode");
  return 1;
}

static int open_cjson(lua_State *L) { return open_guarded(L, luaopen_cjson); }
static int open_cjson_safe(lua_State *L) { return open_guarded(L, luaopen_cjson_safe); }

/* ---- Module search --------------------------------------------------- */

#define note_file bundle_note_file

static int try_load_file(lua_State *L, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  if (luaL_loadfilex(L, path, "bt") != LUA_OK) return lua_error(L);
  lua_pushstring(L, path);
  return 2;
}

/* Modules require found in the folder (or bundle): registry[FOLDER_MODULES]. */
#define FOLDER_MODULES "luamcp.folder_modules"

static void note_folder_module(lua_State *L, const char *module) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, FOLDER_MODULES) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, FOLDER_MODULES);
  }
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, module);
  lua_pop(L, 1);
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
    if (n) {
      note_file(v, candidates[i]);
      note_folder_module(L, name);
      return n;
    }
  }
  lua_pushfstring(L, "no file '%s'\n\tno file '%s'", candidates[0], candidates[1]);
  return 1;
}

int vm_search_embedded(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  for (size_t i = 0; i < EMBEDDED_LUA_COUNT; i++) {
    const embedded_file *f = &EMBEDDED_LUA[i];
    if (strcmp(f->name, name) != 0) continue;
    const char *chunkname = lua_pushfstring(L, "@[luamcp]/%s", f->path);
    /* bytecode compiled at build time, named as this chunkname (tools/embed.c) */
    if (luaL_loadbufferx(L, (const char *)f->data, f->len, chunkname, "b") != LUA_OK) return lua_error(L);
    lua_pushstring(L, chunkname + 1);
    return 2;
  }
  lua_pushfstring(L, "no module '%s' in luamcp's built-in library", name);
  return 1;
}

/* Load a file of the bundle as a chunk named "@bundle/NAME", so errors and
 * tracebacks say which file. Bytecode keeps the name it was compiled with
 * (the same one), or none when built with --strip. */
static int load_bundle_file(lua_State *L, const bundle_file *f) {
  const char *chunkname = lua_pushfstring(L, "@bundle/%s", f->name);
  int status = luaL_loadbufferx(L, (const char *)f->data, f->size, chunkname, "bt");
  lua_remove(L, -2);
  return status;
}

/* package.searchers entry in a built program: modules from the bundle,
 * found the way search_script_folder finds them in a folder. */
static int search_bundle(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  const char *rel = luaL_gsub(L, name, ".", "/");
  const char *candidates[2] = {
      lua_pushfstring(L, "%s.lua", rel),
      lua_pushfstring(L, "%s/init.lua", rel),
  };
  for (int i = 0; i < 2; i++) {
    const bundle_file *f = bundle_find(v->bundle, candidates[i]);
    if (!f) continue;
    if (load_bundle_file(L, f) != LUA_OK) return lua_error(L);
    note_folder_module(L, name);
    lua_pushfstring(L, "bundle/%s", f->name);
    return 2;
  }
  lua_pushfstring(L, "no file 'bundle/%s'\n\tno file 'bundle/%s'", candidates[0], candidates[1]);
  return 1;
}

/* package.searchers entry in a built program, after the built-in library
 * as package.path is after it under luamcp run: the pure-Lua modules the
 * scripts loaded from package.path when they were built, which `luamcp
 * build` packs under BUNDLE_LUA_DEPS_DIR (they need not be installed where
 * the program runs). */
static int search_bundled_deps(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  const char *rel = luaL_gsub(L, name, ".", "/");
  const char *candidates[2] = {
      lua_pushfstring(L, BUNDLE_LUA_DEPS_DIR "%s.lua", rel),
      lua_pushfstring(L, BUNDLE_LUA_DEPS_DIR "%s/init.lua", rel),
  };
  for (int i = 0; i < 2; i++) {
    const bundle_file *f = bundle_find(v->bundle, candidates[i]);
    if (!f) continue;
    if (load_bundle_file(L, f) != LUA_OK) return lua_error(L);
    lua_pushfstring(L, "bundle/%s", f->name);
    return 2;
  }
  lua_pushfstring(L, "no file 'bundle/%s'", candidates[0]);
  return 1;
}

/* package.searchers entry around Lua's own package.path searcher: records
 * each module it loads, name -> file (registry[VM_LUA_MODULES]), for
 * `luamcp build` to pack. */
/* Run the standard searcher (upvalue 1) for the module named at 1 and,
 * when it found a file, note module -> file in the registry table key. */
static int search_and_record(lua_State *L, const char *key) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_call(L, 1, 2);
  if (lua_isfunction(L, -2) && lua_type(L, -1) == LUA_TSTRING) {
    lua_getfield(L, LUA_REGISTRYINDEX, key);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  return 2;
}

static int search_lua_path(lua_State *L) { return search_and_record(L, VM_LUA_MODULES); }

/* package.path and package.cpath without relative entries ("./?.lua"):
 * what a script requires must not depend on the directory luamcp was
 * started from (the script folder is searched first, by its own searcher). */
static void drop_relative_entries(lua_State *L, const char *field) {
  lua_getfield(L, -1, field);
  const char *path = lua_tostring(L, -1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  bool first = true;
  while (path && *path) {
    const char *end = strchr(path, ';');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    if (len > 0 && os_path_is_absolute(path)) {
      if (!first) luaL_addchar(&b, ';');
      luaL_addlstring(&b, path, len);
      first = false;
    }
    path = end ? end + 1 : NULL;
  }
  luaL_pushresult(&b);
  lua_setfield(L, -3, field);
  lua_pop(L, 1);
}

/* package.searchers entry around Lua's own C-module searchers: records
 * each C module loaded (registry[VM_C_MODULES]); in a fully static luamcp,
 * which cannot load shared libraries, a C module found on package.cpath
 * fails with an error that says so instead. */
static int search_c_modules(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (!app_can_load_shared_libraries()) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushvalue(L, 1);
    lua_getfield(L, -3, "cpath");
    lua_call(L, 2, 1);
    if (lua_isstring(L, -1))
      return luaL_error(L, "cannot load the C module %s (%s): a fully static luamcp (luamcp build --static) cannot "
                           "load shared libraries; use the dynamically linked luamcp",
                        name, lua_tostring(L, -1));
    lua_pushfstring(L, "no C module '%s' (a fully static luamcp loads none)", name);
    return 1;
  }
  return search_and_record(L, VM_C_MODULES);
}

static void add_searchers(lua_State *L, vm *v) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
  if (v->bundle) {
    /* A built program runs exactly what was built: after package.preload
     * only the bundle and the built-in library; the standard searchers
     * (package.path from LUA_PATH, C modules) are dropped. */
    for (lua_Integer i = n; i >= 2; i--) {
      lua_pushnil(L);
      lua_rawseti(L, -2, i);
    }
    lua_pushlightuserdata(L, v);
    lua_pushcclosure(L, search_bundled_deps, 1);
    lua_rawseti(L, -2, 4);
  } else {
    /* Shift the standard searchers up two places after package.preload;
     * the Lua one (Lua's second) goes through search_lua_path, the C ones
     * (third and fourth) through search_c_modules. */
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, VM_C_MODULES);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, VM_LUA_MODULES);
    for (lua_Integer i = n; i >= 2; i--) {
      lua_rawgeti(L, -1, i);
      if (i >= 3) lua_pushcclosure(L, search_c_modules, 1);
      else lua_pushcclosure(L, search_lua_path, 1);
      lua_rawseti(L, -2, i + 2);
    }
  }
  lua_pushlightuserdata(L, v);
  lua_pushcclosure(L, v->bundle ? search_bundle : search_script_folder, 1);
  lua_rawseti(L, -2, 2);
  lua_pushcfunction(L, vm_search_embedded);
  lua_rawseti(L, -2, 3);
  lua_pop(L, 1);
  if (v->bundle) {
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "path");
    lua_pushliteral(L, "");
    lua_setfield(L, -2, "cpath");
  } else {
    drop_relative_entries(L, "path");
    drop_relative_entries(L, "cpath");
  }

  lua_getfield(L, -1, "preload");
  lua_pushlightuserdata(L, v);
  lua_pushcclosure(L, luaopen_mcp_core, 1);
  lua_setfield(L, -2, "mcp.core");
  lua_pushcfunction(L, open_cjson);
  lua_setfield(L, -2, "cjson");
  lua_pushcfunction(L, open_cjson_safe);
  lua_setfield(L, -2, "cjson.safe");
  lua_pushlightuserdata(L, v);
  lua_pushcclosure(L, luaopen_mcp_bundle, 1);
  lua_setfield(L, -2, "mcp.bundle");
  lua_pushlightuserdata(L, v);
  lua_pushcclosure(L, luaopen_luamcp_remote, 1);
  lua_setfield(L, -2, "luamcp.remote");
  lua_pop(L, 2);
}

/* print, through the log's buffer: stderr never blocks the loop, even when
 * the client does not read it (io.write and io.stdout still use stdio). */
static int print_to_log(lua_State *L) {
  int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '\n');
  luaL_pushresult(&b);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  log_print(text, len);
  return 0;
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

/* An error outside any protected call: nothing can be unwound, so say what
 * happened instead of dying silently. */
static int vm_panic(lua_State *L) {
  log_write(LOG_CRITICAL, "unrecoverable Lua error: %s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  abort();
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
    size_t size = strlen(dir) + len + 2;
    char *full = malloc(size);
    if (!full) goto out_of_memory;
    snprintf(full, size, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
      free(full);
      continue;
    }
    if (n == cap) {
      int grown_cap = cap ? cap * 2 : 8;
      char **grown = realloc(names, (size_t)grown_cap * sizeof *names);
      if (!grown) {
        free(full);
        goto out_of_memory;
      }
      names = grown;
      cap = grown_cap;
    }
    names[n++] = full;
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, compare_names);
  *out = names;
  return n;
out_of_memory:
  closedir(d);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return -1;
}

/* A script at the top of the folder is also a module the others may
 * require by its name (helper.lua is require "helper"), and it runs once:
 * a script an earlier one required is not run again, and what a script
 * returns is what a later require gets. The module name of a file path,
 * or NULL when no require could name it (dots, dashes...). */
static const char *script_module(const char *path, char *name, size_t size) {
  const char *base = path;
  for (const char *c = path; *c; c++)
    if (os_path_is_separator(*c)) base = c + 1;
  size_t len = strlen(base) - 4; /* without ".lua" */
  if (len == 0 || len >= size) return NULL;
  for (size_t i = 0; i < len; i++) {
    char c = base[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return NULL;
  }
  memcpy(name, base, len);
  name[len] = '\0';
  return name;
}

/* Did a script already require this top-level file as a module? (Not:
 * is a module of that name loaded: math.lua is a script even though the
 * math library is.) */
static bool already_required(lua_State *L, const char *module) {
  if (!module) return false;
  bool required = false;
  if (lua_getfield(L, LUA_REGISTRYINDEX, FOLDER_MODULES) == LUA_TTABLE) {
    required = lua_getfield(L, -1, module) != LUA_TNIL;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return required;
}

/* What a script returned (on top of the stack; true for none) becomes
 * package.loaded[module], unless a module of that name (a standard
 * library) is loaded already. Pops it. */
static void keep_script_result(lua_State *L, const char *module) {
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (module && lua_getfield(L, -1, module) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, module);
    note_folder_module(L, module);
  } else {
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}

/* mcp.bundle is written in C (lua_bundle.c); it joins the library table
 * before any script runs, so scripts write mcp.bundle.read(name). */
static bool attach_bundle_module(vm *v, buf *err) {
  static const char attach[] = "local mcp = require 'mcp'\n"
                               "if mcp.bundle == nil then mcp.bundle = require 'mcp.bundle' end\n";
  if (luaL_loadbufferx(v->L, attach, sizeof attach - 1, "=[luamcp]", "t") != LUA_OK) {
    buf_append_str(err, lua_tostring(v->L, -1));
    lua_pop(v->L, 1);
    return false;
  }
  return protected_call(v->L, 0, 0, err);
}

/* Where the load of a generation is (vm.load). Owner: its vm; made when
 * the load begins, freed when it ends (vm_load_step) or with the vm. Each
 * script's top level runs on a coroutine of its own, so that a reload can
 * pause it between loop turns (task_hook yields it) and the current
 * generation keeps serving meanwhile. */
typedef struct vm_load {
  char **scripts;   /* the scripts to run, in order: paths, or names in the bundle */
  int count, next;  /* next: the first one not started yet */
  bool slices;      /* a reload's load: the hook may pause it */
  lua_State *co;    /* the coroutine running a script's top level, or NULL */
  int co_ref;       /* anchors it in the registry */
  char module[128]; /* that script's module name (script_module) ... */
  bool has_module;  /* ... if it has one */
} vm_load;

static void load_free(vm *v) {
  vm_load *ld = v->load;
  if (!ld) return;
  if (ld->co) luaL_unref(v->L, LUA_REGISTRYINDEX, ld->co_ref);
  for (int i = 0; i < ld->count; i++) free(ld->scripts[i]);
  free(ld->scripts);
  free(ld);
  v->load = NULL;
}

/* The scripts a load runs: the *.lua files at the top of the bundle, in
 * its order; or of the folder, sorted; or the one file. */
static bool list_load(vm *v, vm_load *ld, buf *err) {
  if (v->bundle) {
    ld->scripts = calloc(v->bundle->file_count + 1, sizeof *ld->scripts);
    for (size_t i = 0; i < v->bundle->file_count; i++) {
      const char *name = v->bundle->files[i].name;
      size_t len = strlen(name);
      if (!strchr(name, '/') && len >= 5 && strcmp(name + len - 4, ".lua") == 0)
        ld->scripts[ld->count++] = strdup(name);
    }
    if (ld->count == 0) buf_printf(err, "%s: no .lua files in this bundle", v->bundle->path);
    return ld->count > 0;
  }
  struct stat st;
  if (stat(v->path, &st) != 0) {
    buf_printf(err, "%s: no such file or folder", v->path);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    ld->scripts = malloc(sizeof *ld->scripts);
    ld->scripts[0] = strdup(v->path);
    ld->count = 1;
    return true;
  }
  int count = list_scripts(v->path, &ld->scripts);
  if (count < 0) {
    ld->scripts = NULL;
    buf_printf(err, "%s: cannot read the folder", v->path);
    return false;
  }
  ld->count = count;
  if (count == 0) buf_printf(err, "%s: no .lua files in this folder", v->path);
  return count > 0;
}

/* lua_pcall'd (it allocates): a new coroutine holding the chunk given as
 * argument 1, anchored in the registry; returns the reference. */
static int new_script_thread(lua_State *L) {
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushinteger(L, luaL_ref(L, LUA_REGISTRYINDEX));
  return 1;
}

/* Start the next script: compile it and put its chunk on a new coroutine.
 * A script an earlier one required as a module is not run again. */
static bool start_script(vm *v, buf *err) {
  vm_load *ld = v->load;
  lua_State *L = v->L;
  const char *script = ld->scripts[ld->next++];
  if (!v->bundle) note_file(v, script);
  const char *module = script_module(script, ld->module, sizeof ld->module);
  ld->has_module = module != NULL;
  if (already_required(L, module)) return true;
  int status = v->bundle ? load_bundle_file(L, bundle_find(v->bundle, script)) : luaL_loadfilex(L, script, "bt");
  if (status == LUA_OK) {
    lua_pushcfunction(L, new_script_thread);
    lua_insert(L, -2);
    status = lua_pcall(L, 1, 1, 0);
  }
  if (status != LUA_OK) {
    buf_append_str(err, lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)");
    lua_pop(L, 1);
    return false;
  }
  ld->co_ref = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ld->co_ref);
  ld->co = lua_tothread(L, -1);
  lua_pop(L, 1);
  return true;
}

/* Is this line of a traceback a frame of the author's scripts (not a C
 * function, the library or a "(...tail calls...)" marker)? */
static bool script_frame(const char *line, size_t len) {
  static const char *const not_scripts[] = {"\t[C]:", "\t[luamcp]", "\t(...tail calls...)"};
  for (size_t i = 0; i < sizeof not_scripts / sizeof *not_scripts; i++) {
    size_t n = strlen(not_scripts[i]);
    if (len >= n && memcmp(line, not_scripts[i], n) == 0) return false;
  }
  return true;
}

/* lua_pcall'd (it allocates): the traceback of the failed coroutine
 * (argument 1) under its message (argument 2), both light userdata. Only
 * the scripts' frames are kept: the author fixes their own lines, and the
 * library's frames above them (error, check.fields, ...) only hide them. */
static int script_traceback(lua_State *L) {
  const char *msg = lua_touserdata(L, 2);
  luaL_traceback(L, lua_touserdata(L, 1), msg, 0);
  size_t full_len, msg_len = strlen(msg);
  const char *full = lua_tolstring(L, -1, &full_len);
  const char *header = full + msg_len; /* "\nstack traceback:" then "\n\t..." per frame */
  if (msg_len > full_len || strncmp(header, "\nstack traceback:", 17) != 0) return 1;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, full, msg_len);
  bool any = false;
  const char *end = full + full_len;
  for (const char *line = header + 17; line < end;) {
    line++; /* the '\n' before it */
    const char *next = memchr(line, '\n', (size_t)(end - line));
    if (!next) next = end;
    if (script_frame(line, (size_t)(next - line))) {
      if (!any) luaL_addstring(&b, "\nstack traceback:");
      any = true;
      luaL_addchar(&b, '\n');
      luaL_addlstring(&b, line, (size_t)(next - line));
    }
    line = next;
  }
  luaL_pushresult(&b);
  return 1;
}

/* Run the current script's top level until it ends (VM_LOAD_DONE: the
 * script, not the load), fails, or the hook pauses it. */
static vm_load_status resume_script(vm *v, buf *err) {
  vm_load *ld = v->load;
  lua_State *L = v->L, *co = ld->co;
  int nres = 0;
  v->load_thread = ld->slices ? co : NULL;
  v->load_paused = false;
  lua_State *before = watchdog_switch(co);
  int status = lua_resume(co, L, 0, &nres);
  watchdog_switch(before);
  v->load_thread = NULL;
  if (status == LUA_YIELD && v->load_paused) return VM_LOAD_PAUSED;
  bool ok = status == LUA_OK && lua_checkstack(L, 2);
  if (ok) {
    lua_settop(co, nres > 0 ? lua_gettop(co) - nres + 1 : 0); /* the first result, if any */
    if (nres == 0) lua_pushnil(L);
    else lua_xmove(co, L, 1);
    keep_script_result(L, ld->has_module ? ld->module : NULL);
  } else {
    /* A yield the hook did not ask for is the script's own, at its top
     * level, where there is nothing to yield to. */
    const char *msg = status == LUA_YIELD ? "attempt to yield from outside a coroutine"
                      : status == LUA_OK  ? "stack overflow"
                      : lua_tostring(co, -1);
    if (!msg) msg = "(error object is not a string)";
    lua_pushcfunction(L, script_traceback);
    lua_pushlightuserdata(L, co);
    lua_pushlightuserdata(L, (void *)msg);
    if (lua_pcall(L, 2, 1, 0) == LUA_OK) buf_append_str(err, lua_tostring(L, -1));
    else buf_append_str(err, msg);
    lua_pop(L, 1);
  }
  luaL_unref(L, LUA_REGISTRYINDEX, ld->co_ref);
  ld->co = NULL;
  return ok ? VM_LOAD_DONE : VM_LOAD_FAILED;
}

/* After the scripts ran: fetch the library's entry points. */
static bool bind_library(vm *v, buf *err) {
  lua_State *L = v->L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mcp");
  if (!protected_call(L, 1, 1, err)) return false;
  lua_getfield(L, -1, "_dispatch");
  v->dispatch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "_foreign_dispatch");
  v->foreign_dispatch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "_describe");
  v->describe_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushliteral(L, "isError");
  v->is_error_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "_start");
  bool started = protected_call(L, 0, 0, err);
  lua_pop(L, 1);
  return started;
}

void vm_check_environment(vm *v) {
  lua_State *L = v->L;
  buf err = BUF_INIT;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mcp");
  if (protected_call(L, 1, 1, &err)) {
    lua_getfield(L, -1, "_check_environment");
    lua_remove(L, -2);
    protected_call(L, 0, 0, &err);
  }
  if (err.len) log_write(LOG_ERROR, "checking the environment failed: %s", err.data);
  buf_free(&err);
}

bool vm_call_library(vm *v, const char *name, int nargs) {
  lua_State *L = v->L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mcp");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    lua_rotate(L, -nargs - 1, 1); /* the message below the arguments */
    lua_pop(L, nargs);
    return false;
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  lua_insert(L, -nargs - 1);
  return lua_pcall(L, nargs, 1, 0) == LUA_OK;
}

static vm *load_begin(server *srv, uv_loop_t *loop, const char *path, const bundle *source, vm *previous, bool slices,
                      buf *err) {
  vm_with_heap *vh = calloc(1, sizeof *vh);
  vm *v = &vh->v;
  v->srv = srv;
  v->previous = previous;
  v->loop = loop;
  v->path = strdup(path);
  v->bundle = source;
  struct stat st;
  if (!source && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    v->module_dir = strdup(path);
  } else {
    v->module_dir = os_path_dir(path);
  }
  v->dispatch_ref = v->foreign_dispatch_ref = v->describe_ref = v->is_error_ref = LUA_NOREF;
  strmap_init(&v->tool_inputs);
  v->mem_limit = srv->opts.memory_limit;
  v->default_timeout_ms = srv->opts.call_timeout_ms;
  lua_State *L = v->L = lua_newstate(vm_alloc, v);
  lua_atpanic(L, vm_panic);
  *(task **)lua_getextraspace(L) = NULL; /* copied into every new thread */
  luaL_openlibs(L);
  metrics_watch_gc(L);
  /* string.find/match/gmatch/gsub that a deadline can stop. */
  lua_getglobal(L, "string");
  lua_pattern_install(L, task_interrupt_point);
  lua_pop(L, 1);
  /* Generational: nearly everything a call makes dies with it, and a minor
   * collection frees that without walking the long-lived modules and
   * registry each cycle (~3% fewer instructions per A2A request than
   * incremental with pause 150, which earlier held RSS flat where Lua's
   * default 200 drifted; this holds it flat too: +12 kB over 300k calls). */
  lua_gc(L, LUA_GCGEN, 0, 0);
  ljson_init(L);
  task_register_ctx(L);
  task_register_handle(L);
  lua_schema_register(L);
  luaL_newmetatable(L, VM_RPC_ERROR_MT);
  lua_pushcfunction(L, rpc_error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lua_newtable(L);
  v->state_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  add_searchers(L, v);
  lua_pushcfunction(L, print_to_log);
  lua_setglobal(L, "print");
  block_global(L, "os", "execute");
  block_global(L, "io", "popen");
  task_guard_coroutines(L);
  /* Loading runs the scripts' top level: it gets a deadline too, enforced
   * by the watchdog and task_hook like a call's, across every slice. */
  if (srv->opts.load_timeout_ms > 0) {
    v->load_timeout_ms = srv->opts.load_timeout_ms;
    v->load_deadline_ns = uv_hrtime() + (uint64_t)srv->opts.load_timeout_ms * 1000000u;
  }
  v->load = calloc(1, sizeof *v->load);
  v->load->slices = slices;
  v->load->co_ref = LUA_NOREF;
  watchdog_enter(L, v->load_deadline_ns);
  bool ok = attach_bundle_module(v, err) && list_load(v, v->load, err);
  watchdog_leave();
  if (!ok) {
    vm_free(v);
    return NULL;
  }
  return v;
}

vm *vm_load_begin(server *srv, uv_loop_t *loop, const char *path, const bundle *source, vm *previous, buf *err) {
  return load_begin(srv, loop, path, source, previous, true, err);
}

vm_load_status vm_load_step(vm *v, buf *err) {
  vm_load *ld = v->load;
  vm_load_status status;
  watchdog_enter(v->L, v->load_deadline_ns);
  for (;;) {
    if (ld->co) {
      status = resume_script(v, err);
      if (status != VM_LOAD_DONE) break;
    } else if (ld->next < ld->count) {
      if (!start_script(v, err)) {
        status = VM_LOAD_FAILED;
        break;
      }
    } else {
      status = bind_library(v, err) ? VM_LOAD_DONE : VM_LOAD_FAILED;
      break;
    }
  }
  watchdog_leave();
  if (status != VM_LOAD_PAUSED) {
    load_free(v);
    v->load_deadline_ns = 0;
    v->previous = NULL; /* mcp.state copies only while loading */
  }
  return status;
}

vm *vm_new(server *srv, uv_loop_t *loop, const char *path, const bundle *source, vm *previous, buf *err) {
  vm *v = load_begin(srv, loop, path, source, previous, false, err);
  if (!v) return NULL;
  if (vm_load_step(v, err) != VM_LOAD_DONE) { /* never paused: no slices */
    vm_free(v);
    return NULL;
  }
  return v;
}

void vm_free(vm *v) {
  if (!v) return;
  task_stop_all(v); /* tasks still waiting at exit (an MCP task's question, a sleep): before their Lua state goes */
  load_free(v);      /* a load abandoned or failed midway */
  teardown_run_all(&v->on_end); /* the children and transfers its tasks waited on */
  task_orphan_leases(v);
  metrics_unwatch_gc(v->L);
  if (v->L) lua_close(v->L);
  lua_heap_release(heap_of(v)); /* after lua_close, whose frees it caches */
  teardown_run_all(&v->on_closed); /* after the state: its __gc code could still use a connection */
  lua_schema_forget_tools(v);
  free(v->path);
  free(v->module_dir);
  free(v->server_info_json);
  free(v->instructions);
  free(v->extensions_json);
  free(v->cache_json);
  free(v->param_headers);
  free(v->auth_json);
  for (size_t i = 0; i < v->file_count; i++) free(v->files[i]);
  free(v->files);
  free((vm_with_heap *)v);
}

/* ---- app_ops --------------------------------------------------------- */

/* Ask generation g whether it holds the foreign task the request names. */
static bool generation_holds(vm *g, const char *method, const char *params_json, size_t len, const char *principal) {
  if (g->running) return false; /* its Lua is mid-call: not to be entered */
  lua_State *L = g->L;
  int top = lua_gettop(L);
  lua_pushstring(L, method);
  lua_pushlstring(L, params_json, len);
  lua_pushstring(L, principal);
  bool holds = vm_call_library(g, "_foreign_holds", 3) && lua_toboolean(L, -1);
  lua_settop(L, top);
  return holds;
}

vm *app_foreign_holder(lua_app *app, const char *method, const char *params_json, size_t len, const char *principal) {
  if (app->current && generation_holds(app->current, method, params_json, len, principal)) return app->current;
  for (vm *g = app->retired; g; g = g->next_retired)
    if (generation_holds(g, method, params_json, len, principal)) return g;
  return NULL;
}

void app_foreign_lists(lua_app *app, const char *params_json, size_t len, const char *principal, int first, buf *out) {
  for (vm *g = app->current; g; g = g == app->current ? app->retired : g->next_retired) {
    if (g->running) continue; /* the asking generation (or one mid-call): not to be entered */
    lua_State *L = g->L;
    int top = lua_gettop(L);
    lua_pushlstring(L, params_json, len);
    lua_pushstring(L, principal);
    lua_pushinteger(L, first);
    if (vm_call_library(g, "_foreign_list", 3) && lua_type(L, -1) == LUA_TSTRING) {
      size_t n;
      const char *text = lua_tolstring(L, -1, &n);
      buf_putc(out, ',');
      buf_append(out, text, n);
    }
    lua_settop(L, top);
  }
}

static void app_call_start(void *app, call *c, const json_value *params, const char *src) {
  (void)src;
  lua_app *a = app;
  if (c->job_elsewhere) {
    bus_forward_job(a->bus, c, params);
    return;
  }
  vm *v = a->current;
  if (c->session->foreign && a->retired && params) {
    /* An agent's task a reload left running in a retired generation: its
     * requests (a stream too) run there, as if no reload had happened. */
    buf text = BUF_INIT;
    json_write_value(&text, params);
    vm *holder = app_foreign_holder(a, c->method, text.data, text.len, auth_principal(c->identity));
    buf_free(&text);
    if (holder) v = holder;
  }
  task_start_call(v, c, params);
}

static void app_call_cancel(void *app, call *c) {
  if (bus_forward_cancel(((lua_app *)app)->bus, c)) return;
  task *t = c->app_data;
  if (t && c->session->foreign && t->handle) {
    /* An agent's handler running in its request (ctx:_handle, lua/mcp/
     * a2a.lua): the task outlives the request, whose client went; only
     * CancelTask (the handle) stops it. */
    t->call = NULL;
    c->app_data = NULL;
    return;
  }
  if (t) task_cancel(t);
}

static void app_job_cancel(void *app, void *work) {
  (void)app;
  task_job_cancel(work);
}

static void app_job_answered(void *app, job *j) {
  (void)app;
  task_job_answered(j);
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
  free(v->extensions_json);
  free(v->cache_json);
  free(v->param_headers);
  free(v->auth_json);
  lua_getfield(L, idx, "server_info");
  buf info = BUF_INIT;
  char why[160];
  if (ljson_encode(L, -1, &info, why, sizeof why)) v->server_info_json = buf_detach(&info, NULL);
  else v->server_info_json = NULL, buf_free(&info);
  lua_pop(L, 1);
  v->instructions = string_field(L, idx, "instructions");
  v->extensions_json = string_field(L, idx, "extensions");
  v->cache_json = string_field(L, idx, "cache");
  v->param_headers = string_field(L, idx, "param_headers");
  v->auth_json = string_field(L, idx, "auth");
  out->auth_json = v->auth_json;
  out->param_headers = v->param_headers;
  out->server_info_json = v->server_info_json;
  out->instructions = v->instructions;
  out->extensions_json = v->extensions_json;
  out->cache_json = v->cache_json;
  out->tools = bool_field(L, idx, "tools");
  out->resources = bool_field(L, idx, "resources");
  out->prompts = bool_field(L, idx, "prompts");
  out->completions = bool_field(L, idx, "completions");
  lua_settop(L, idx - 1);
  buf_free(&err);
}

/* mcp._resource_known(uri), as describe runs: between calls, on the main
 * state. A failure counts as unknown. */
static bool app_resource_known(void *app, const char *uri, size_t len) {
  vm *v = ((lua_app *)app)->current;
  lua_State *L = v->L;
  int top = lua_gettop(L);
  lua_pushlstring(L, uri, len);
  bool known = vm_call_library(v, "_resource_known", 1) && lua_toboolean(L, -1);
  if (!known && lua_type(L, -1) == LUA_TSTRING)
    log_write(LOG_ERROR, "checking a resource URI failed: %s", lua_tostring(L, -1));
  lua_settop(L, top);
  return known;
}

/* mcp._resource_scopes(uri): nil (unknown) or the scopes reading it
 * needs, as resource_known runs. */
static bool app_resource_scopes(void *app, const char *uri, size_t len, buf *required) {
  vm *v = ((lua_app *)app)->current;
  lua_State *L = v->L;
  int top = lua_gettop(L);
  lua_pushlstring(L, uri, len);
  bool ok = vm_call_library(v, "_resource_scopes", 1);
  bool known = ok && lua_type(L, -1) == LUA_TSTRING;
  if (known) buf_append_str(required, lua_tostring(L, -1));
  else if (!ok && lua_type(L, -1) == LUA_TSTRING)
    log_write(LOG_ERROR, "checking a resource URI failed: %s", lua_tostring(L, -1));
  lua_settop(L, top);
  return known;
}

const app_ops VM_APP_OPS = {
    .call_start = app_call_start,
    .call_cancel = app_call_cancel,
    .job_cancel = app_job_cancel,
    .job_answered = app_job_answered,
    .describe = app_describe,
    .resource_known = app_resource_known,
    .resource_scopes = app_resource_scopes,
};

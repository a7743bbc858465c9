/*
 * lua_bundle.c - the mcp.bundle module: the files that ship with the
 * scripts. mcp.bundle.read(name) returns a file of the script folder: from
 * the bundle in a program made by `luamcp build`, from the folder itself
 * under `luamcp run`. A script reads its data the same way in development
 * and once shipped.
 */
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"

/* The rule for names, the same with and without a bundle: a relative path
 * inside the folder, '/' between parts, and no part that is empty, "..",
 * or hidden (starts with '.'), since `luamcp build` leaves hidden files
 * out. */
static bool valid_name(const char *name) {
  if (!*name) return false;
  for (const char *part = name;;) {
    const char *slash = strchr(part, '/');
    size_t len = slash ? (size_t)(slash - part) : strlen(part);
    if (len == 0 || part[0] == '.') return false;
    if (!slash) return true;
    part = slash + 1;
  }
}

/* Is the file at path inside dir once every symlink is resolved? A link
 * in the script folder must not hand out files from elsewhere: a built
 * program (which stores the files themselves) could not either. */
static bool inside_folder(const char *dir, const char *path) {
  char real_dir[PATH_MAX], real_path[PATH_MAX];
  if (!realpath(dir, real_dir) || !realpath(path, real_path)) return true; /* fopen reports what is wrong */
  size_t n = strlen(real_dir);
  return strncmp(real_path, real_dir, n) == 0 && (real_path[n] == '/' || (n == 1 && real_dir[0] == '/'));
}

static int read_from_disk(lua_State *L, const char *dir, const char *name) {
  const char *path = lua_pushfstring(L, "%s/%s", dir, name);
  if (!inside_folder(dir, path)) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: a symbolic link that leads out of the script folder", name);
    return 2;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", name, strerror(e));
    return 2;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  size_t n;
  do {
    char *into = luaL_prepbuffer(&b);
    n = fread(into, 1, LUAL_BUFFERSIZE, f);
    luaL_addsize(&b, n);
  } while (n == LUAL_BUFFERSIZE);
  bool failed = ferror(f);
  fclose(f);
  if (failed) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: read error", name);
    return 2;
  }
  luaL_pushresult(&b);
  return 1;
}

/* read(name) -> the file's bytes | nil, message */
static int bundle_read(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  luaL_argcheck(L, valid_name(name), 1, "a file inside the script folder, like \"data/words.txt\"");
  if (!v->bundle) return read_from_disk(L, v->module_dir, name);
  const bundle_file *f = bundle_find(v->bundle, name);
  if (!f) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: no such file in the bundle", name);
    return 2;
  }
  lua_pushlstring(L, (const char *)f->data, f->size);
  return 1;
}

int luaopen_mcp_bundle(lua_State *L) {
  static const luaL_Reg functions[] = {
      {"read", bundle_read},
      {NULL, NULL},
  };
  luaL_newlibtable(L, functions);
  lua_pushvalue(L, lua_upvalueindex(1)); /* the vm */
  luaL_setfuncs(L, functions, 1);
  return 1;
}

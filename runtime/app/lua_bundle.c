/*
 * lua_bundle.c - the mcp.bundle module: the files that ship with the
 * scripts. mcp.bundle.read(name) returns a file of the script folder: from
 * the bundle in a program made by `luamcp build`, from the folder itself
 * under `luamcp run`. A script reads its data the same way in development
 * and once shipped.
 */
#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/lua_bundle.h"
#include "os/path.h"

void bundle_note_file(vm *v, const char *path) {
  for (size_t i = 0; i < v->file_count; i++)
    if (strcmp(v->files[i], path) == 0) return;
  v->files = realloc(v->files, (v->file_count + 1) * sizeof *v->files);
  v->files[v->file_count++] = strdup(path);
}

/* The rule for names, the same with and without a bundle: a relative path
 * inside the folder, '/' between parts, and no part that is empty, "..",
 * or hidden (starts with '.'), since `luamcp build` leaves hidden files
 * out, nor one the OS would read as another name or a device (on Windows:
 * "data." is "data", "a\b" two names, NUL a device; os/path.h). */
static bool valid_name(const char *name) {
  if (!*name) return false;
  for (const char *part = name;;) {
    const char *slash = strchr(part, '/');
    size_t len = slash ? (size_t)(slash - part) : strlen(part);
    if (len == 0 || part[0] == '.' || !os_path_name_ok(part, len)) return false;
    if (!slash) return true;
    part = slash + 1;
  }
}

/* Is the file at path inside dir once every symlink is resolved? A link
 * in the script folder must not hand out files from elsewhere: a built
 * program (which stores the files themselves) could not either. */
static bool inside_folder(const char *dir, const char *path) {
  char *real_dir = os_path_real(dir), *real_path = os_path_real(path);
  bool inside = !real_dir || !real_path || os_path_inside(real_dir, real_path); /* if not found, fopen says so */
  free(real_dir);
  free(real_path);
  return inside;
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

/* Walk dir/rel on disk, appending the regular files' names (relative to the
 * folder) to the list at index `list`; hidden names are skipped, as build
 * skips them, and so are links that lead out of the folder. */
static void list_disk(lua_State *L, vm *v, const char *rel, int list, int depth) {
  const char *path = lua_pushfstring(L, "%s/%s", v->module_dir, rel);
  DIR *d = depth < 16 ? opendir(path) : NULL;
  lua_pop(L, 1);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    const char *name = lua_pushfstring(L, "%s/%s", rel, e->d_name);
    const char *full = lua_pushfstring(L, "%s/%s", v->module_dir, name);
    DIR *sub = opendir(full);
    if (sub) {
      closedir(sub);
      lua_pop(L, 1);
      list_disk(L, v, name, list, depth + 1);
    } else if (inside_folder(v->module_dir, full)) {
      bundle_note_file(v, full);
      lua_pop(L, 1);
      lua_rawseti(L, list, (lua_Integer)lua_rawlen(L, list) + 1);
      continue;
    } else {
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  closedir(d);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* list(dir) -> the names of the files under dir (every level), sorted, as
 * read() takes them; an empty list when there is no such folder. */
static int bundle_list(lua_State *L) {
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  const char *dir = luaL_checkstring(L, 1);
  luaL_argcheck(L, valid_name(dir), 1, "a folder inside the script folder, like \"skills\"");
  lua_newtable(L);
  int list = lua_gettop(L);
  if (v->bundle) {
    size_t n = strlen(dir);
    for (size_t i = 0; i < v->bundle->file_count; i++) {
      const char *name = v->bundle->files[i].name;
      if (strncmp(name, dir, n) == 0 && name[n] == '/') {
        lua_pushstring(L, name);
        lua_rawseti(L, list, (lua_Integer)lua_rawlen(L, list) + 1);
      }
    }
    return 1;
  }
  /* The folder itself is watched too, so a new file there reloads. */
  const char *folder = lua_pushfstring(L, "%s/%s", v->module_dir, dir);
  DIR *d = opendir(folder);
  if (d) {
    closedir(d);
    bundle_note_file(v, lua_pushfstring(L, "%s/.", folder));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  list_disk(L, v, dir, list, 0);
  size_t count = lua_rawlen(L, list);
  char **names = malloc((count ? count : 1) * sizeof *names);
  for (size_t i = 0; i < count; i++) {
    lua_rawgeti(L, list, (lua_Integer)i + 1);
    names[i] = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  qsort(names, count, sizeof *names, by_name);
  for (size_t i = 0; i < count; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, list, (lua_Integer)i + 1);
    free(names[i]);
  }
  free(names);
  return 1;
}

int luaopen_mcp_bundle(lua_State *L) {
  static const luaL_Reg functions[] = {
      {"read", bundle_read},
      {"list", bundle_list},
      {NULL, NULL},
  };
  luaL_newlibtable(L, functions);
  lua_pushvalue(L, lua_upvalueindex(1)); /* the vm */
  luaL_setfuncs(L, functions, 1);
  return 1;
}

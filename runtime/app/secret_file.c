/*
 * secret_file.c - files of secrets kept for the user (secret_file.h).
 */
#include "app/secret_file.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "os/crypto.h"
#include "os/fs.h"

/* A token file bigger than this is not luamcp's. */
#define SECRET_FILE_MAX_BYTES (4u * 1024u * 1024u)

static int fail(lua_State *L, const char *why) {
  lua_pushnil(L);
  lua_pushstring(L, why);
  return 2;
}

/* write_private(path, text) -> true | nil, why: a file only its user reads
 * (mode 0600, sealed by os_secret_seal), replaced whole. */
static int write_private(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t n;
  const char *text = luaL_checklstring(L, 2, &n);
  uint8_t *sealed = NULL;
  size_t sealed_len = 0;
  if (!os_secret_seal(text, n, &sealed, &sealed_len)) return fail(L, "the OS would not protect the tokens");
  bool ok = os_fs_replace(path, sealed, sealed_len, 0600);
  int err = errno;
  free(sealed);
  if (!ok) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot write %s: %s", path, strerror(err));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* read_private(path) -> text | nil (no such file) | nil, why */
static int read_private(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  FILE *f = os_fs_open(path, "rb");
  if (!f) {
    if (errno == ENOENT) return 0;
    lua_pushnil(L);
    lua_pushfstring(L, "cannot read %s: %s", path, strerror(errno));
    return 2;
  }
  buf data = BUF_INIT;
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && data.len <= SECRET_FILE_MAX_BYTES)
    buf_append(&data, chunk, got);
  fclose(f);
  uint8_t *opened = NULL;
  size_t opened_len = 0;
  bool ok = os_secret_open(data.data ? data.data : "", data.len, &opened, &opened_len);
  buf_free(&data);
  if (!ok) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot open %s: it was protected for another user or machine", path);
    return 2;
  }
  lua_pushlstring(L, (const char *)opened, opened_len);
  free(opened);
  return 1;
}

void secret_file_register(lua_State *L) {
  lua_pushcfunction(L, read_private);
  lua_setfield(L, -2, "read_private");
  lua_pushcfunction(L, write_private);
  lua_setfield(L, -2, "write_private");
}

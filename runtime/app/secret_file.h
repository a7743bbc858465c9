/*
 * secret_file.h - the files luamcp keeps secrets in for the user (luamcp
 * login's tokens): written whole through a temporary file and a rename,
 * mode 0600, sealed by os_secret_seal (DPAPI on Windows); read back and
 * opened. One place for both the command line (client_oauth.c) and a
 * server's mcp.client (lua_remote.c), which uses the logins kept.
 */
#ifndef LUAMCP_SECRET_FILE_H
#define LUAMCP_SECRET_FILE_H

#include <lua.h>

/* Add to the table on the top of L's stack:
 *   read_private(path) -> text | nil (no such file) | nil, why
 *   write_private(path, text) -> true | nil, why */
void secret_file_register(lua_State *L);

#endif

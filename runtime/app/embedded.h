/*
 * embedded.h - the Lua library (lua/) compiled into the binary, so that
 * build/luamcp works wherever it is copied. The table is generated at build
 * time by tools/embed.c, each module compiled to Lua bytecode (with its
 * debug information) so that no start parses the library.
 */
#ifndef LUAMCP_EMBEDDED_H
#define LUAMCP_EMBEDDED_H

#include <stddef.h>

typedef struct embedded_file {
  const char *name; /* module name, e.g. "mcp.dispatch" */
  const char *path; /* path under lua/, for error messages */
  const unsigned char *data; /* Lua 5.4 bytecode */
  size_t len;
} embedded_file;

extern const embedded_file EMBEDDED_LUA[];
extern const size_t EMBEDDED_LUA_COUNT;

#endif

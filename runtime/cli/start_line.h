/*
 * start_line.h - the line `luamcp run` writes on stderr once it serves:
 * what (the server's name and version, how many tools, resources,
 * templates and prompts it registered) and where (stdio, or the URL).
 */
#ifndef LUAMCP_START_LINE_H
#define LUAMCP_START_LINE_H

#include <stdbool.h>

#include "app/vm.h"

/* where: "on stdio", or "over HTTP at http://HOST:PORT/mcp (legacy SSE:
 * /sse)" (the SSE part unless --no-sse). Written at info level,
 * or always when always is set (the HTTP line carries the port that
 * --http 0 picked, which callers read). Keep "luamcp: serving MCP over
 * HTTP at http://HOST:PORT/" as it is: scripts and specs look for it. */
void start_line_write(vm *v, const char *where, bool always);

#endif

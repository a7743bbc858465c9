/*
 * build.h - `luamcp build`, which makes one self-contained executable from
 * a script folder (and optionally an MCP Bundle for Claude Desktop), and
 * what a built program prints about itself (--bundle-info).
 */
#ifndef LUAMCP_BUILD_H
#define LUAMCP_BUILD_H

#include <stdio.h>

#include "core/bundle.h"

/* `luamcp build PATH -o OUT [options]`; argv holds what follows "build".
 * Returns the process exit code. */
int build_command(int argc, char **argv);
/* The help text of the build command. */
void build_usage(FILE *to);
/* What a built program carries: files, sizes, checksums, the runtime that
 * built it. */
void build_print_info(const bundle *b, FILE *to);
/* Before a server loads its scripts: unset every environment variable
 * whose value is still an MCPB "${user_config.KEY}" placeholder (see
 * build.c), so that os.getenv returns nil for a setting the user left
 * empty rather than the placeholder's text. */
void build_unset_unfilled_settings(void);

#endif

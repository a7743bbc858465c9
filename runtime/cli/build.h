/*
 * build.h - `luamcp build`, which makes one self-contained executable from
 * a script folder (and optionally an MCP Bundle for Claude Desktop), and
 * what a built program prints about itself (--bundle-info).
 */
#ifndef LUAMCP_BUILD_H
#define LUAMCP_BUILD_H

#include <stdio.h>

#include "cli/target.h"
#include "core/bundle.h"

/* `luamcp build PATH -o OUT [options]`; argv holds what follows "build".
 * Returns the process exit code. */
int build_command(int argc, char **argv);
/* One mcp.server{ config } setting as the .mcpb manifest declares it:
 * each field's name and its value as JSON text, in the manifest's order. */
typedef struct build_setting {
  char *key, *env;
  size_t field_count;
  char **field_names, **field_json;
} build_setting;

/* What a build made, for luamcp release (cli/release.c). Owner: the
 * caller of build_run; build_report_free releases every string. */
typedef struct build_report {
  char *name, *version, *description, *license, *author; /* the manifest's (author: its name) */
  build_setting *settings;
  size_t setting_count;
  const build_target *targets[TARGET_COUNT];
  char *programs[TARGET_COUNT]; /* the file written for targets[i] */
  size_t program_count;
  char *mcpb; /* the .mcpb written */
} build_report;

/* Called by build_run once the scripts are loaded and the manifest's
 * facts are complete, before anything is written: facts holds the names,
 * version, description and the targets asked for (no programs yet).
 * False, with the reason in err, stops the build there. */
typedef bool (*build_check_fn)(const build_report *facts, void *data, buf *err);

/* `luamcp build` for luamcp release: argv as build takes it (no -o or
 * --mcpb, and --target given), every program written to
 * into_dir/NAME-TARGET and the .mcpb to into_dir/NAME.mcpb, NAME the
 * manifest's name, once check (when not NULL) has accepted the facts;
 * what was made goes into report. Returns the exit code. */
int build_run(int argc, char **argv, const char *into_dir, build_check_fn check, void *check_data,
              build_report *report);
void build_report_free(build_report *r);
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

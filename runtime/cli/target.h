/*
 * target.h - the platforms `luamcp build --target` makes programs for, and
 * where the runtime for each is found: a built program is that platform's
 * runtime with the bundle appended (bundle.h), so building for Windows on
 * Linux needs only the Windows runtime's file, never a Windows machine.
 */
#ifndef LUAMCP_TARGET_H
#define LUAMCP_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/exe.h"

/* One platform. The table in target.c is the one place that names them. */
typedef struct build_target {
  const char *name;          /* "windows-x64": what --target takes */
  const char *mcpb_platform; /* the MCPB manifest's name for its OS: "win32", "linux" */
  exe_format format;
  exe_machine machine;
  const char *suffix;        /* what its executables' names end with: ".exe" or "" */
  const char *uname_m;       /* a sh case pattern of `uname -m` on it (Linux only), else NULL */
  const char *dev_runtime;   /* where luamcp's own tree builds it, beside build/luamcp */
  const char *make_hint;     /* the make command that builds it there */
} build_target;

#define TARGET_COUNT 3
/* The targets in the table's order. */
extern const build_target TARGETS[TARGET_COUNT];

/* The target called name, or NULL. */
const build_target *target_find(const char *name);
/* The target whose executables look like the file at path (the running
 * luamcp, for "this machine"), or NULL when none does or it cannot be read. */
const build_target *target_of_file(const char *path);

/* Where the runtime for t is, when no --runtime names one: the installed
 * runtime (self/../share/luamcp/runtimes/NAME/luamcp[.exe]), then the one a
 * development tree builds beside self, then self itself when self is for
 * t. self is the running luamcp's path. Returns a malloc'ed path, or NULL
 * with the places looked at and how to get one in err. */
char *target_find_runtime(const build_target *t, const char *self, buf *err);

/* The bytes of the runtime at path, without any bundle it carries itself,
 * into into. t, when not NULL, is the target it must be for: a runtime of
 * another format or machine, or a file that is not a luamcp runtime, is
 * refused with the reason in err. */
bool target_read_runtime(const char *path, const build_target *t, buf *into, buf *err);

/* Calls fn for each thing the runtime whose bytes are in runtime lacks, as
 * the runtime itself says (core/lacks.h): api as a script names it
 * ("mcp.http") or a run option ("--workers"), and why. Entries that apply
 * only to a static program are left out when this one loads shared
 * libraries. A runtime older than these entries lacks nothing here. */
typedef void (*target_lack_fn)(const char *api, const char *why, void *data);
void target_runtime_lacks(const buf *runtime, target_lack_fn fn, void *data);

#endif

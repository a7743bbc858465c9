/*
 * lacks.h - what a runtime cannot do, written into the runtime itself, so
 * that `luamcp build --target` can read it from the runtime's file (a
 * foreign binary is never run here) and warn before a program that cannot
 * work is shipped (cli/build.c, cli/target.c).
 *
 * The truth comes from what was compiled and linked, never from a table
 * kept by hand: the file that stands in for a missing capability (a
 * runtime/<part>/absent/ file, or the branch of a file that is compiled when a
 * library is not linked in) says LUAMCP_LACKS beside its code, and a build
 * that links the real thing carries no such entry. A runtime that leaves
 * out mcp.sqlite, say, would link an absent/sqlite.c holding
 *     LUAMCP_LACKS(sqlite, LACKS_ALWAYS, "mcp.sqlite", "built without SQLite");
 *
 * Each entry is one C string in the executable:
 *     LACKS_MARK WHEN ":" API ":" WHY
 * WHEN is LACKS_ALWAYS, or LACKS_IF_STATIC for what only a program that
 * cannot load shared libraries lacks (an ELF file without a PT_DYNAMIC
 * segment: exe.h); API is what a script names, as `mcp.http`, or a run
 * option (`--workers`); WHY finishes "API is missing there: ...".
 */
#ifndef LUAMCP_LACKS_H
#define LUAMCP_LACKS_H

#define LACKS_MARK "luamcp-lacks/1:"
#define LACKS_ALWAYS "always"
#define LACKS_IF_STATIC "static"

/* used: nothing refers to the entry; it is there to be found in the file. */
#define LUAMCP_LACKS(id, when, api, why) \
  __attribute__((used)) const char luamcp_lacks_##id[] = LACKS_MARK when ":" api ":" why

#endif

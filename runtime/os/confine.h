/*
 * confine.h - the OS confining this process to what its scripts declared:
 * defence in depth under luamcp's own checks (app/confine.c holds the
 * policy and its log; this is only the mechanism). Linux
 * (confine_linux.c): Landlock, whose rules the kernel enforces on every
 * later system call of this process and of the children it starts, and
 * which can only ever narrow. Windows (confine_windows.c): none; luamcp's
 * own checks are all there is, and the report says so.
 *
 * Besides the rules added here, the implementation lets the runtime
 * itself keep what it needs once confined (on Linux: the C library, TLS
 * certificates, name resolution, its own executable for mcp.exec's
 * go-between, a few /proc and /dev files), and nothing else of the system.
 */
#ifndef LUAMCP_OS_CONFINE_H
#define LUAMCP_OS_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

/* What a path rule allows, under it (its whole tree for a folder). */
enum {
  OS_CONFINE_READ = 1,  /* read files, list folders */
  OS_CONFINE_WRITE = 2, /* also create, write, truncate, remove, rename */
  OS_CONFINE_EXEC = 4,  /* run programs (and read them) */
  /* make Unix socket files, and remove files (any: the OS says no more
   * precisely), in a folder: luamcp's own local sockets (--http unix:PATH) */
  OS_CONFINE_SOCKET = 8,
};

/* Owner: the caller of os_confine_begin, until os_confine_apply frees it. */
typedef struct os_confinement os_confinement;

/* Called for each rule the OS refused (the rest still apply). */
typedef void (*os_confine_warn)(void *arg, const char *text);

/* Start a set of rules. files: confine file access to the paths added
 * (false: files stay with luamcp's own checks, for scripts whose files
 * are the client's roots, learnt only after this; the OS's own private
 * files, such as other processes' /proc entries, stay out all the same).
 * ports: confine outgoing TCP connections to the ports added, where the
 * OS can. NULL when the OS cannot confine this process at all, with a
 * sentence for the log in why ("... : only luamcp's own checks apply"). */
os_confinement *os_confine_begin(bool files, bool ports, os_confine_warn warn, void *arg, char *why, size_t why_size);

/* Allow rights (OS_CONFINE_*) under path. A path that does not exist is
 * allowed where the OS can name it before it exists; where it cannot
 * (Landlock names only what exists), the nearest folder above it may
 * create, write and read, and os_confine_apply's notes say so. */
void os_confine_allow_path(os_confinement *c, const char *path, unsigned rights);

/* Allow outgoing TCP connections to port. */
void os_confine_allow_port(os_confinement *c, unsigned port);

/* Confine the process, irreversibly, and free c. True with a sentence for
 * the log in report ("Landlock ABI 4 also confines the process: ...") and
 * in *notes what the rules could not say exactly (malloc'd, for the
 * caller to free; NULL when nothing); false with the reason in report,
 * nothing confined. */
bool os_confine_apply(os_confinement *c, char *report, size_t report_size, char **notes);

#endif

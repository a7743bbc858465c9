/*
 * dynlib.h - loading a shared library at run time (libcurl for mcp.http,
 * on first use): dlopen on POSIX (dynlib_posix.c), LoadLibraryExW on
 * Windows (dynlib_windows.c). A platform build that links the library
 * statically instead (the Windows .exe links libcurl) says so with
 * LUAMCP_CURL_STATIC and never calls these for it.
 */
#ifndef LUAMCP_OS_DYNLIB_H
#define LUAMCP_OS_DYNLIB_H

#include <stdbool.h>
#include <stddef.h>

typedef struct os_dynlib os_dynlib; /* opaque: the OS's handle */

/* Whether this program can load shared libraries at all: false in a
 * fully static Linux program (luamcp build --static), which has no
 * dynamic loader to do it. */
bool os_dynlib_available(void);

/* The first of names that loads, or NULL with the last error in why. */
os_dynlib *os_dynlib_open(const char *const *names, size_t count, char *why, size_t why_size);

/* The address of symbol name in lib, or NULL. */
void *os_dynlib_symbol(os_dynlib *lib, const char *name);

/* Unload lib (when it turned out unusable). */
void os_dynlib_close(os_dynlib *lib);

#endif

/*
 * dynlib.h - loading a shared library at run time (libcurl for mcp.http,
 * on first use): dlopen on POSIX (dynlib_posix.c), LoadLibraryW on Windows
 * (dynlib_windows.c). A platform build that links the library statically
 * instead (the Windows .exe links libcurl) says so with LUAMCP_CURL_STATIC
 * and never calls these for it.
 */
#ifndef LUAMCP_OS_DYNLIB_H
#define LUAMCP_OS_DYNLIB_H

#include <stddef.h>

typedef struct os_dynlib os_dynlib; /* opaque: the OS's handle */

/* The first of names that loads, or NULL with the last error in why. */
os_dynlib *os_dynlib_open(const char *const *names, size_t count, char *why, size_t why_size);

/* The address of symbol name in lib, or NULL. */
void *os_dynlib_symbol(os_dynlib *lib, const char *name);

#endif

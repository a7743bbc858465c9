/*
 * self.h - where the running program's executable is (a built program
 * reads its bundle from it; mcp.exec starts children through it; build
 * copies it). /proc/self/exe on Linux (self_linux.c), GetModuleFileNameW
 * on Windows (self_windows.c). No Lua, no libuv: the core uses it.
 */
#ifndef LUAMCP_OS_SELF_H
#define LUAMCP_OS_SELF_H

#include <stdbool.h>
#include <stddef.h>

/* The absolute path of the running executable, NUL-terminated in out (in
 * UTF-8 on Windows); argv0 is the fallback where the OS cannot tell (a
 * chroot without /proc) and it names a path. False when neither works or
 * out is too small. */
bool os_self_exe(const char *argv0, char *out, size_t n);

#endif

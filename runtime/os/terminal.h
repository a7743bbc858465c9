/*
 * terminal.h - whether a descriptor is a terminal, where a person reads
 * and types (a question asked on stdin, colour on stderr). POSIX
 * (terminal_posix.c): isatty. Windows (terminal_windows.c): a console, as
 * the console API says and libuv's uv_guess_handle decides UV_TTY; the C
 * runtime's isatty is true of any character device, the NUL device too,
 * so `< NUL` would pass for a person who typed nothing. Used by the core
 * (the log's colour): no libuv.
 */
#ifndef LUAMCP_OS_TERMINAL_H
#define LUAMCP_OS_TERMINAL_H

#include <stdbool.h>

bool os_is_terminal(int fd);

#endif

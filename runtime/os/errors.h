/*
 * errors.h - the words a message uses for a libuv error code: the C
 * library's own (strerror) on POSIX, where the code is -errno, so that a
 * message reads as every other program's on that system
 * (errors_posix.c); libuv's on Windows (errors_windows.c).
 */
#ifndef LUAMCP_OS_ERRORS_H
#define LUAMCP_OS_ERRORS_H

/* "No such file or directory" for UV_ENOENT, ... */
const char *os_error_text(int uv_code);

#endif

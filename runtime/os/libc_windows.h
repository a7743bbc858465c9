/*
 * libc_windows.h - the few POSIX functions of the C library the layers use
 * that mingw-w64's C runtime lacks. The Windows build includes this before
 * every file (windows.mk: -include), so no file above os/ needs to know;
 * what is more than a line is in libc_windows.c.
 */
#ifndef LUAMCP_OS_LIBC_WINDOWS_H
#define LUAMCP_OS_LIBC_WINDOWS_H

/* Every header whose names are redefined below, first: a later include
 * would meet the macros. */
#include <direct.h>
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h> /* declares clock_gettime (winpthread's) */

static inline char *luamcp_strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *copy = malloc(len + 1);
  if (!copy) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  return copy;
}
#define strndup luamcp_strndup

static inline void *luamcp_memmem(const void *hay, size_t hay_len, const void *needle, size_t needle_len) {
  if (needle_len == 0) return (void *)hay;
  const char *h = hay, *end = h + hay_len;
  while ((size_t)(end - h) >= needle_len) {
    const char *p = memchr(h, *(const char *)needle, (size_t)(end - h) - needle_len + 1);
    if (!p) return NULL;
    if (memcmp(p, needle, needle_len) == 0) return (void *)p;
    h = p + 1;
  }
  return NULL;
}
#define memmem luamcp_memmem

/* Setting a variable to "" removes it from the environment on Windows. */
static inline int luamcp_unsetenv(const char *name) { return _putenv_s(name, "") == 0 ? 0 : -1; }
#define unsetenv luamcp_unsetenv

/* clock_gettime without winpthread (the build uses the -win32 compiler,
 * which links none): libc_windows.c. */
int luamcp_clock_gettime(clockid_t clock, struct timespec *ts);
#define clock_gettime luamcp_clock_gettime

/* mkdir(path, mode): Windows has no mode bits; the path is UTF-8. */
int luamcp_mkdir(const char *path, int mode);
#undef mkdir
#define mkdir(path, mode) luamcp_mkdir(path, mode)


/* fcntl(fd, F_SETFD, FD_CLOEXEC) only: the descriptor's handle is no
 * longer inherited by children. Any other use fails with EINVAL. */
#define F_SETFD 2
#define FD_CLOEXEC 1
int luamcp_fcntl(int fd, int cmd, int arg);
#define fcntl luamcp_fcntl
/* Not inherited, for open(): the same thing from the start. */
#define O_CLOEXEC _O_NOINHERIT

/* The name of a signal: on Windows only the ones libuv's uv_process_kill
 * reports a process ended by (SIGTERM, SIGKILL, SIGINT). */
char *luamcp_strsignal(int sig);
#define strsignal luamcp_strsignal

#endif

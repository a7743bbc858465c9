/* libc_windows.c - the longer parts of os/libc_windows.h. */
#include "os/libc_windows.h"

#include <errno.h>
#include <limits.h>
#include <windows.h>


/* CLOCK_REALTIME from the system time (100 ns since 1601); anything else
 * (CLOCK_MONOTONIC) from the performance counter. */
int luamcp_clock_gettime(clockid_t clock, struct timespec *ts) {
  if (clock == CLOCK_REALTIME) {
    FILETIME ft;
    GetSystemTimePreciseAsFileTime(&ft);
    unsigned long long t = ((unsigned long long)ft.dwHighDateTime << 32 | ft.dwLowDateTime) - 116444736000000000ull;
    ts->tv_sec = (time_t)(t / 10000000u);
    ts->tv_nsec = (long)(t % 10000000u) * 100;
    return 0;
  }
  static LARGE_INTEGER freq;
  LARGE_INTEGER now;
  if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
  QueryPerformanceCounter(&now);
  ts->tv_sec = (time_t)(now.QuadPart / freq.QuadPart);
  ts->tv_nsec = (long)((now.QuadPart % freq.QuadPart) * 1000000000 / freq.QuadPart);
  return 0;
}

int luamcp_mkdir(const char *path, int mode) {
  (void)mode;
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
  if (n <= 0) {
    errno = EINVAL;
    return -1;
  }
  wchar_t *w = malloc((size_t)n * sizeof *w);
  MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n);
  int rc = _wmkdir(w);
  free(w);
  return rc;
}

int luamcp_fcntl(int fd, int cmd, int arg) {
  HANDLE h = (HANDLE)_get_osfhandle(fd);
  if (cmd != F_SETFD || h == INVALID_HANDLE_VALUE) {
    errno = EINVAL;
    return -1;
  }
  return SetHandleInformation(h, HANDLE_FLAG_INHERIT, arg & FD_CLOEXEC ? 0 : HANDLE_FLAG_INHERIT) ? 0 : -1;
}

char *luamcp_strsignal(int sig) {
  switch (sig) {
  case 2: return "Interrupt";   /* SIGINT */
  case 9: return "Killed";      /* SIGKILL (libuv's, for uv_process_kill) */
  case 15: return "Terminated"; /* SIGTERM */
  default: return "Unknown signal";
  }
}

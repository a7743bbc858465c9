/*
 * self_windows.c - os/self.h on Windows: GetModuleFileNameW of the
 * running .exe, turned into UTF-8 (what every path in luamcp is).
 */
#include "os/self.h"

#include <windows.h>
#include <limits.h>
#include <stdlib.h>

bool os_self_exe(const char *argv0, char *out, size_t n) {
  (void)argv0; /* Windows always knows its module's path */
  if (n == 0) return false;
  /* The longest path Windows allows (with the \\?\ prefix) is 32767
   * UTF-16 units; a buffer that is filled exactly means it was cut. */
  enum { WIDE_MAX = 32768 };
  wchar_t *wide = malloc(WIDE_MAX * sizeof *wide);
  if (!wide) return false;
  DWORD len = GetModuleFileNameW(NULL, wide, WIDE_MAX);
  int bytes = 0;
  if (len > 0 && len < WIDE_MAX)
    bytes = WideCharToMultiByte(CP_UTF8, 0, wide, (int)len, out, (int)(n > INT_MAX ? INT_MAX : n) - 1, NULL, NULL);
  free(wide);
  if (bytes <= 0) return false;
  out[bytes] = '\0';
  return true;
}

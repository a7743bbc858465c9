/* stdfds_windows.c - os/stdfds.h on Windows, through the C runtime's
 * descriptors (libuv maps them to their handles with _get_osfhandle). */
#include "os/stdfds.h"

#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <windows.h>

/* A copy of fd that a child does not inherit (_dup's handle would be). */
static int private_copy(int fd) {
  HANDLE h = (HANDLE)_get_osfhandle(fd), copy;
  if (h == INVALID_HANDLE_VALUE) return -1;
  if (!DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &copy, 0, FALSE, DUPLICATE_SAME_ACCESS))
    return -1;
  int c = _open_osfhandle((intptr_t)copy, _O_BINARY);
  if (c < 0) CloseHandle(copy);
  return c;
}

bool os_stdfds_claim(int *in_fd, int *out_fd) {
  *in_fd = private_copy(0);
  *out_fd = private_copy(1);
  int nul = _open("NUL", _O_RDONLY | _O_BINARY | _O_NOINHERIT);
  if (*in_fd < 0 || *out_fd < 0 || nul < 0) return false;
  if (_dup2(nul, 0) < 0 || _dup2(2, 1) < 0) return false;
  _close(nul);
  /* The handles a child started with inherited standard handles gets. */
  SetStdHandle(STD_INPUT_HANDLE, (HANDLE)_get_osfhandle(0));
  SetStdHandle(STD_OUTPUT_HANDLE, (HANDLE)_get_osfhandle(2));
  /* stdout is now a log stream, flushed as written: the C runtime's
   * _IOLBF is full buffering. */
  setvbuf(stdout, NULL, _IONBF, 0);
  return true;
}

long os_stdfds_write(int fd, const void *p, unsigned long n) { return (long)_write(fd, p, (unsigned)n); }

/* terminal_windows.c - os/terminal.h on Windows: a console answers
 * GetConsoleMode; NUL, a file or a pipe does not. */
#include "os/terminal.h"

#include <io.h>
#include <windows.h>

bool os_is_terminal(int fd) {
  if (fd < 0) return false;
  HANDLE h = (HANDLE)_get_osfhandle(fd);
  DWORD mode;
  return h != INVALID_HANDLE_VALUE && GetFileType(h) == FILE_TYPE_CHAR && GetConsoleMode(h, &mode);
}

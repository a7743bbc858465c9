/* stderr_windows.c - os/stderr.h on Windows: the C runtime's fd 2, in
 * binary mode (the log's lines end in \n, as on every platform). */
#include "os/stderr.h"

#include <fcntl.h>
#include <io.h>
#include <stdbool.h>

static bool binary;

void os_stderr_nonblocking(void) {}

long os_stderr_write(const char *p, size_t n) {
  if (!binary) {
    _setmode(2, _O_BINARY);
    binary = true;
  }
  return (long)_write(2, p, (unsigned)(n > 0x40000000u ? 0x40000000u : n));
}

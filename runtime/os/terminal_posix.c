/* terminal_posix.c - os/terminal.h on POSIX. */
#include "os/terminal.h"

#include <unistd.h>

bool os_is_terminal(int fd) { return isatty(fd) == 1; }

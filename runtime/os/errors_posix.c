/* errors_posix.c - os/errors.h on POSIX: libuv's codes are -errno. */
#include "os/errors.h"

#include <string.h>

const char *os_error_text(int uv_code) { return strerror(-uv_code); }

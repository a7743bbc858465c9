/* errors_windows.c - os/errors.h on Windows: libuv's codes are its own
 * (it translated the system's error), so are the words. */
#include "os/errors.h"

#include <uv.h>

const char *os_error_text(int uv_code) { return uv_strerror(uv_code); }

/* wslay_posix.c - libwslay, loaded on first use (see wslay.h). */
#include "os/wslay.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "os/dynlib.h"

/* Owner: this file, for the life of the process. */
static struct {
  bool tried, loaded;
  char failure[240];
  os_wslay_api api;
} W;

static bool load(void) {
  if (!os_dynlib_available()) {
    snprintf(W.failure, sizeof W.failure,
             "WebSockets need libwslay, a shared library, which a fully static luamcp cannot load; build without --static");
    return false;
  }
  static const char *const names[] = {"libwslay.so.1", "libwslay.so"};
  char why[160];
  os_dynlib *lib = os_dynlib_open(names, sizeof names / sizeof *names, why, sizeof why);
  if (!lib) {
    snprintf(W.failure, sizeof W.failure, "WebSockets need libwslay (Debian: apt install libwslay1): %s", why);
    return false;
  }
#define OS_WSLAY_LOOKUP(name)                                                                                    \
  if (!(*(void **)&W.api.name = os_dynlib_symbol(lib, #name))) {                                                  \
    snprintf(W.failure, sizeof W.failure, "cannot use the libwslay found: it has no %s (too old?)", #name);      \
    os_dynlib_close(lib);                                                                                        \
    return false;                                                                                                \
  }
  OS_WSLAY_FUNCTIONS(OS_WSLAY_LOOKUP)
#undef OS_WSLAY_LOOKUP
  return true;
}

const os_wslay_api *os_wslay(char *why, size_t why_len) {
  if (!W.tried) {
    W.tried = true;
    W.loaded = load();
  }
  if (!W.loaded && why && why_len) snprintf(why, why_len, "%s", W.failure);
  return W.loaded ? &W.api : NULL;
}

/* wslay_windows.c - no libwslay on Windows yet (see wslay.h): the
 * WebSocket transport and client say so. */
#include "os/wslay.h"

#include <stdio.h>

const os_wslay_api *os_wslay(char *why, size_t why_len) {
  if (why && why_len) snprintf(why, why_len, "WebSockets are not available in the Windows build yet (no libwslay)");
  return NULL;
}

/* observe.c - the call observers. See observe.h. */
#include "core/observe.h"

#include <string.h>

#include "core/server.h"

const char *call_outcome_name(call_outcome o) {
  static const char *const names[CALL_OUTCOME_COUNT] = {"ok", "tool_error", "protocol_error", "timeout", "cancelled"};
  return (unsigned)o < CALL_OUTCOME_COUNT ? names[o] : "unknown";
}

bool observe_add(server *srv, const call_observer *ops, void *data) {
  if (srv->observer_count >= OBSERVE_MAX_OBSERVERS) return false;
  srv->observers[srv->observer_count].ops = ops;
  srv->observers[srv->observer_count].data = data;
  srv->observer_count++;
  return true;
}

void observe_remove(server *srv, const call_observer *ops, void *data) {
  for (int i = 0; i < srv->observer_count; i++) {
    if (srv->observers[i].ops != ops || srv->observers[i].data != data) continue;
    memmove(&srv->observers[i], &srv->observers[i + 1], (size_t)(srv->observer_count - i - 1) * sizeof srv->observers[0]);
    srv->observer_count--;
    return;
  }
}


size_t observe_utf8_cut(const char *s, size_t len, size_t max) {
  if (len <= max) return len;
  size_t n = max;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* s[n] continues a character: cut before it */
  return n;
}

/* wire.c - the wire observers. See wire.h. */
#include "core/wire.h"

#include <string.h>

#include "core/server.h"

bool wire_watch(server *srv, const wire_observer *ops, void *data) {
  if (srv->wire_observer_count >= WIRE_MAX_OBSERVERS) return false;
  srv->wire_observers[srv->wire_observer_count].ops = ops;
  srv->wire_observers[srv->wire_observer_count].data = data;
  srv->wire_observer_count++;
  return true;
}

void wire_unwatch(server *srv, const wire_observer *ops, void *data) {
  for (int i = 0; i < srv->wire_observer_count; i++) {
    if (srv->wire_observers[i].ops != ops || srv->wire_observers[i].data != data) continue;
    memmove(&srv->wire_observers[i], &srv->wire_observers[i + 1],
            (size_t)(srv->wire_observer_count - i - 1) * sizeof srv->wire_observers[0]);
    srv->wire_observer_count--;
    return;
  }
}

bool wire_watched(const server *srv) { return srv->wire_observer_count > 0; }

void wire_seen(const server *srv, const session *s, wire_direction dir, const char *json, size_t len) {
  for (int i = 0; i < srv->wire_observer_count; i++)
    srv->wire_observers[i].ops->message(srv->wire_observers[i].data, s, dir, json, len);
}

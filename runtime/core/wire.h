/*
 * wire.h - watching the wire: every JSON-RPC message a session receives
 * or sends, exactly as it went, for whoever registered to see it (the web
 * inspector, luamcp dev --ui). The core calls wire_seen where it traces;
 * with no observer that costs one test of a counter.
 */
#ifndef LUAMCP_WIRE_H
#define LUAMCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct server server;
typedef struct session session;

typedef enum wire_direction {
  WIRE_FROM_CLIENT, /* the client sent it: a request, a notification, its reply to ours */
  WIRE_TO_CLIENT,   /* the server sent it */
} wire_direction;

/* An observer: called on the loop, inside the core, with the message's
 * text (not NUL-terminated, valid only during the call). It must not send,
 * close or free anything of the session. Owner: whoever registers it, for
 * as long as it is registered. */
typedef struct wire_observer {
  void (*message)(void *data, const session *s, wire_direction dir, const char *json, size_t len);
} wire_observer;

/* At most WIRE_MAX_OBSERVERS (luamcp_limits.h); false when full. */
bool wire_watch(server *srv, const wire_observer *ops, void *data);
void wire_unwatch(server *srv, const wire_observer *ops, void *data);
/* Is anyone watching (worth flattening a message in pieces for)? */
bool wire_watched(const server *srv);
/* For session.c: a message of s (a session of srv) went by. */
void wire_seen(const server *srv, const session *s, wire_direction dir, const char *json, size_t len);

#endif

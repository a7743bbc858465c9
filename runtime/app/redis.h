/*
 * redis.h - the link to Redis behind --redis URL: one connection for
 * commands (mcp.store, PUBLISH) and one for the bus's SUBSCRIBE, both
 * hiredis async contexts on the libuv loop (hiredis's libuv adapter), never
 * blocking it.
 *
 * A connection that drops (or never came up) is retried with backoff,
 * REDIS_BACKOFF_MIN_MS doubling to REDIS_BACKOFF_MAX_MS, with one log line
 * when it is lost and one when it is back. Meanwhile redis_command refuses
 * at once (its caller says "redis unavailable: ..."), and commands in flight
 * when the link drops get their callback with no reply: nothing waits for a
 * Redis that is not there, and nothing that does not need it stops.
 *
 * Keys live under one fixed namespace, REDIS_PREFIX ("luamcp:"): the store's
 * values at luamcp:store:KEY, the shared requestState key at
 * luamcp:state-key, and the bus on the channel luamcp:bus:DB (pub/sub
 * ignores the database number, so the channel carries it: two deployments
 * on one Redis keep apart by using different databases).
 *
 * The bus (app/bus.h): every process subscribes to the channel, and a
 * message PUBLISHed there reaches every other process's bus.
 */
#ifndef LUAMCP_REDIS_H
#define LUAMCP_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "app/bus.h"
#include "core/server.h"

#define REDIS_PREFIX "luamcp:"
#define REDIS_BACKOFF_MIN_MS 100
#define REDIS_BACKOFF_MAX_MS 5000
/* A connection attempt that has not completed by then is abandoned and
 * retried (hiredis 0.14's async connect has no timeout of its own). */
#define REDIS_CONNECT_TIMEOUT_MS 3000
/* How long `run` waits for Redis before it serves anyway. */
#define REDIS_STARTUP_WAIT_MS 2000

typedef struct redis_link redis_link;
struct redisReply;

/* A command's outcome: reply, or NULL with why (the link dropped, or the
 * server is stopping). Called exactly once for every command
 * redis_command accepted, on the loop, never from inside redis_command. */
typedef void (*redis_reply_fn)(void *data, const struct redisReply *reply, const char *why);

/* Parse URL (redis://[[user]:password@]host[:port][/db] or unix:///path[?db=N])
 * and make the link (not connected yet). NULL with the reason in err. When
 * share_state_key, the link agrees on the requestState key with every
 * other process through Redis (state_key_set). The link carries bus's
 * messages (bus_set_transport) until it is closed. Owner: the caller, who
 * ends it with redis_link_close. */
redis_link *redis_link_new(uv_loop_t *loop, server *srv, bus *bus, const char *url, bool share_state_key, char *err,
                           size_t errlen);
/* Start connecting, then run the loop until both connections are up (and
 * the key agreed) or wait_ms passed. Returns whether they are up; if not,
 * the link keeps retrying in the background. */
bool redis_link_start(redis_link *l, int wait_ms);
/* Drop both connections (pending callbacks get no reply) and free the link
 * once its handles are closed. */
void redis_link_close(redis_link *l);

/* Is the command connection up? When not, *why says why. */
bool redis_ready(const redis_link *l, const char **why);
/* Send a command. Returns false (with *why) when the link is down: fn is
 * then never called. */
bool redis_command(redis_link *l, redis_reply_fn fn, void *data, int argc, const char **argv, const size_t *lens,
                   const char **why);

#endif

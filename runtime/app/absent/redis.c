/*
 * absent/redis.c - app/redis.h in a build without Redis (the Windows .exe
 * links this instead of redis.c: no hiredis; README "Platforms"). --redis
 * is refused with the reason, so no link ever exists and the rest is
 * never reached.
 */
#include "app/redis.h"

#include <stdio.h>

#include "core/lacks.h"

LUAMCP_LACKS(redis, LACKS_ALWAYS, "mcp.store",
             "--redis is refused (no Redis support), so mcp.store keeps its values in one process");

redis_link *redis_link_new(uv_loop_t *loop, server *srv, bus *bus, const char *url, bool share_state_key, char *err,
                           size_t errlen) {
  snprintf(err, errlen, "--redis: this build of luamcp has no Redis support (the Windows build leaves it out; "
                        "mcp.store keeps its values in the process)");
  return NULL;
}

bool redis_link_start(redis_link *l, int wait_ms) { return false; }

void redis_link_close(redis_link *l) {}

bool redis_ready(const redis_link *l, const char **why) {
  *why = "no Redis support in this build";
  return false;
}

bool redis_command(redis_link *l, redis_reply_fn fn, void *data, int argc, const char **argv, const size_t *lens,
                   const char **why) {
  *why = "no Redis support in this build";
  return false;
}

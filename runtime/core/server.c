/* server.c - options and messages for every session. See server.h. */
#include "core/server.h"

#include <string.h>

#include "core/log.h"
#include "core/luamcp_limits.h"

void server_options_defaults(server_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES;
  opts->page_size = DEFAULT_PAGE_SIZE;
  opts->client_timeout_ms = DEFAULT_CLIENT_TIMEOUT_MS;
  opts->default_log_level = LOG_INFO;
  opts->call_timeout_ms = DEFAULT_CALL_TIMEOUT_MS;
  opts->load_timeout_ms = DEFAULT_LOAD_TIMEOUT_MS;
  opts->memory_limit = (size_t)DEFAULT_MEMORY_LIMIT_MB * 1024 * 1024;
  opts->max_tasks = DEFAULT_MAX_TASKS;
}

void server_init(server *srv, const server_options *opts, const app_ops *app, void *app_data) {
  memset(srv, 0, sizeof *srv);
  srv->opts = *opts;
  srv->app = app;
  srv->app_data = app_data;
}

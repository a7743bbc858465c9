/* server.c - options and messages for every session. See server.h. */
#include "server.h"

#include <string.h>

#include "luamcp_limits.h"
#include "log.h"

void server_options_defaults(server_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES;
  opts->page_size = DEFAULT_PAGE_SIZE;
  opts->client_timeout_ms = DEFAULT_CLIENT_TIMEOUT_MS;
  opts->default_log_level = LOG_INFO;
  opts->call_timeout_ms = DEFAULT_CALL_TIMEOUT_MS;
  opts->memory_limit = (size_t)DEFAULT_MEMORY_LIMIT_MB * 1024 * 1024;
}

void server_init(server *srv, const server_options *opts, const app_ops *app, void *app_data) {
  memset(srv, 0, sizeof *srv);
  srv->opts = *opts;
  srv->app = app;
  srv->app_data = app_data;
}

/* Sessions that have answered initialize and are still open. */
static bool session_live(const session *s) { return s->state == SESSION_READY || s->state == SESSION_INITIALIZED; }

void server_broadcast(server *srv, const char *method, const char *params_json, size_t len) {
  for (session *s = srv->sessions; s; s = s->next)
    if (session_live(s)) session_notify(s, NULL, method, params_json, len);
}

void server_resource_updated(server *srv, const char *uri, size_t len) {
  buf params = BUF_INIT;
  buf_puts(&params, "{\"uri\":");
  json_write_string(&params, uri, len);
  buf_putc(&params, '}');
  for (session *s = srv->sessions; s; s = s->next)
    if (session_live(s) && session_subscribed(s, uri, len))
      session_notify(s, NULL, "notifications/resources/updated", params.data, params.len);
  buf_free(&params);
}

void server_log(server *srv, int level, const char *logger, const char *data_json, size_t len) {
  for (session *s = srv->sessions; s; s = s->next)
    if (session_live(s)) session_log(s, NULL, level, logger, data_json, len);
}

/* session.c - JSON-RPC handling and the MCP lifecycle for one client. See session.h. */
#include "core/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/luamcp_limits.h"
#include "core/log.h"
#include "core/server.h"

/* ---- Sending --------------------------------------------------------- */

static void send_message(session *s, session_message *m) {
  if (s->state == SESSION_CLOSED) return;
  trace_message("->", s->name, m->json, m->len);
  s->transport->send(s, m);
}

/* A reply that is not the end of a call: an error for a message we could not
 * accept, or an answer the core gives itself (ping, initialize, ...). */
static void send_reply(session *s, batch *b, void *origin, buf *reply, bool unaddressed) {
  if (b) {
    if (b->answered++) buf_putc(&b->out, ',');
    buf_append(&b->out, reply->data, reply->len);
    return;
  }
  session_message m = {.json = reply->data, .len = reply->len, .origin = origin, .final = true,
                       .unaddressed_error = unaddressed};
  send_message(s, &m);
}

static void reply_error(session *s, batch *b, void *origin, const json_value *id, const char *src, int code,
                        const char *message, const char *data_json, size_t data_len) {
  buf out = BUF_INIT;
  jsonrpc_write_error(&out, id ? src + id->src_off : NULL, id ? id->src_len : 0, code, message, data_json,
                      data_len);
  send_reply(s, b, origin, &out, id == NULL);
  buf_free(&out);
}

void session_send_error(session *s, void *origin, int code, const char *message) {
  reply_error(s, NULL, origin, NULL, NULL, code, message, NULL, 0);
}

static void reply_result(session *s, batch *b, void *origin, const json_value *id, const char *src,
                         const char *result, size_t len) {
  buf out = BUF_INIT;
  jsonrpc_write_result_start(&out, src + id->src_off, id->src_len);
  buf_append(&out, result, len);
  jsonrpc_write_result_end(&out);
  send_reply(s, b, origin, &out, false);
  buf_free(&out);
}

static void batch_release(session *s, batch *b) {
  if (--b->pending > 0) return;
  if (b->answered > 0) {
    buf out = BUF_INIT;
    buf_reserve(&out, b->out.len + 2);
    buf_putc(&out, '[');
    buf_append(&out, b->out.data, b->out.len);
    buf_putc(&out, ']');
    session_message m = {.json = out.data, .len = out.len, .batch = b, .origin = b->origin, .final = true};
    send_message(s, &m);
    buf_free(&out);
  } else if (s->transport) {
    /* An all-notification batch: nothing to send, but HTTP must still end
     * the exchange. */
    session_message m = {.json = NULL, .len = 0, .batch = b, .origin = b->origin, .final = true};
    if (s->state != SESSION_CLOSED) s->transport->send(s, &m);
  }
  buf_free(&b->out);
  free(b);
}

/* ---- Calls ----------------------------------------------------------- */

static call *find_call(session *s, const json_value *id) {
  for (call *c = s->calls; c; c = c->next)
    if (jsonrpc_id_matches(&c->id, id)) return c;
  return NULL;
}

static void call_free(call *c) {
  session *s = c->session;
  if (s->transport && s->transport->call_ended) s->transport->call_ended(s, c);
  if (c->prev) c->prev->next = c->next;
  else s->calls = c->next;
  if (c->next) c->next->prev = c->prev;
  batch *b = c->batch;
  jsonrpc_id_free(&c->id);
  free(c->method);
  free(c->progress_token);
  free(c);
  if (b) batch_release(s, b);
}

static void call_send_response(call *c, buf *out) {
  session *s = c->session;
  if (c->batch) {
    if (c->batch->answered++) buf_putc(&c->batch->out, ',');
    buf_append(&c->batch->out, out->data, out->len);
  } else {
    session_message m = {.json = out->data, .len = out->len, .related = c, .origin = c->transport_data, .final = true};
    send_message(s, &m);
  }
  call_free(c);
}

void call_respond(call *c, const char *result_json, size_t len) {
  /* One buffer for every response: transports copy what they send. */
  static buf out;
  buf_clear(&out);
  buf_reserve(&out, len + c->id.raw_len + 40);
  jsonrpc_write_result_start(&out, c->id.raw, c->id.raw_len);
  buf_append(&out, result_json, len);
  jsonrpc_write_result_end(&out);
  call_send_response(c, &out);
  if (out.cap > 1024 * 1024) buf_free(&out);
}

void call_fail(call *c, int code, const char *message, const char *data_json, size_t data_len) {
  buf out = BUF_INIT;
  jsonrpc_write_error(&out, c->id.raw, c->id.raw_len, code, message, data_json, data_len);
  call_send_response(c, &out);
  buf_free(&out);
}

static void call_cancel(call *c) {
  server *srv = c->session->server;
  if (srv->app && srv->app->call_cancel) srv->app->call_cancel(srv->app_data, c);
  call_free(c);
}

const char *call_progress(call *c, double progress, double total, const char *message, size_t message_len) {
  if (!c->progress_token) return NULL;
  if (!isfinite(progress)) return "progress must be a finite number";
  if (c->has_progress && !(progress > c->last_progress)) return "progress must increase with each notification";
  c->has_progress = true;
  c->last_progress = progress;
  buf params = BUF_INIT;
  buf_puts(&params, "{\"progressToken\":");
  buf_append_str(&params, c->progress_token);
  buf_puts(&params, ",\"progress\":");
  json_write_number(&params, progress);
  if (isfinite(total)) {
    buf_puts(&params, ",\"total\":");
    json_write_number(&params, total);
  }
  if (message) {
    buf_puts(&params, ",\"message\":");
    json_write_string(&params, message, message_len);
  }
  buf_putc(&params, '}');
  session_notify(c->session, c, "notifications/progress", params.data, params.len);
  buf_free(&params);
  return NULL;
}

/* ---- Notifications and requests to the client ------------------------ */

void session_notify(session *s, call *related, const char *method, const char *params_json, size_t len) {
  buf out = BUF_INIT;
  jsonrpc_write_notification(&out, method, params_json, len);
  session_message m = {.json = out.data, .len = out.len, .related = related,
                       .origin = related ? related->transport_data : NULL};
  send_message(s, &m);
  buf_free(&out);
}

void session_log(session *s, call *related, int level, const char *logger, const char *data_json, size_t len) {
  if (level > s->log_level || s->state == SESSION_NEW) return;
  buf params = BUF_INIT;
  buf_puts(&params, "{\"level\":\"");
  buf_append_str(&params, log_level_name(level));
  buf_putc(&params, '"');
  if (logger) {
    buf_puts(&params, ",\"logger\":");
    json_write_string(&params, logger, strlen(logger));
  }
  buf_puts(&params, ",\"data\":");
  buf_append(&params, data_json, len);
  buf_putc(&params, '}');
  session_notify(s, related, "notifications/message", params.data, params.len);
  buf_free(&params);
}

long long session_request(session *s, call *related, const char *method, const char *params_json, size_t len,
                          client_reply_fn on_reply, void *data) {
  pending_request *p = calloc(1, sizeof *p);
  p->id = s->next_request_id++;
  p->on_reply = on_reply;
  p->data = data;
  p->next = s->pending;
  s->pending = p;
  buf out = BUF_INIT;
  jsonrpc_write_request(&out, p->id, method, params_json, len);
  session_message m = {.json = out.data, .len = out.len, .related = related,
                       .origin = related ? related->transport_data : NULL};
  long long id = p->id;
  send_message(s, &m);
  buf_free(&out);
  return id;
}

static pending_request *take_pending(session *s, long long id) {
  for (pending_request **pp = &s->pending; *pp; pp = &(*pp)->next) {
    if ((*pp)->id == id) {
      pending_request *p = *pp;
      *pp = p->next;
      return p;
    }
  }
  return NULL;
}

void session_forget_request(session *s, long long id) { free(take_pending(s, id)); }

bool session_subscribed(const session *s, const char *uri, size_t len) {
  for (subscription *sub = s->subscriptions; sub; sub = sub->next)
    if (strlen(sub->uri) == len && memcmp(sub->uri, uri, len) == 0) return true;
  return false;
}

void session_cancel_from(session *s, void *origin) {
  for (call *c = s->calls, *next; c; c = next) {
    next = c->next;
    if (c->transport_data == origin) {
      call_cancel(c);
      next = s->calls; /* cancelling may have ended others: start over */
    }
  }
}

bool session_has_calls_from(const session *s, const void *origin) {
  for (const call *c = s->calls; c; c = c->next)
    if (c->transport_data == origin) return true;
  return false;
}

bool session_client_has_capability(const session *s, const char *name) {
  if (!s->client_capabilities_json) return false;
  json_doc *doc = json_parse(s->client_capabilities_json, strlen(s->client_capabilities_json), MAX_JSON_DEPTH, NULL);
  if (!doc) return false;
  const json_value *v = json_object_get(json_doc_root(doc), name);
  bool has = v && v->type != JSON_NULL && v->type != JSON_FALSE;
  json_doc_free(doc);
  return has;
}

/* ---- Lifecycle ------------------------------------------------------- */

session *session_new(server *srv, const transport_ops *ops, void *transport_data, const char *name) {
  session *s = calloc(1, sizeof *s);
  s->server = srv;
  s->transport = ops;
  s->transport_data = transport_data;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->state = SESSION_NEW;
  s->log_level = srv->opts.default_log_level;
  s->next_request_id = 1;
  s->next = srv->sessions;
  if (s->next) s->next->prev = s;
  srv->sessions = s;
  srv->session_count++;
  return s;
}

void session_close(session *s) {
  if (s->state == SESSION_CLOSED) return;
  s->state = SESSION_CLOSED;
  while (s->calls) call_cancel(s->calls);
  while (s->pending) {
    pending_request *p = s->pending;
    s->pending = p->next;
    p->on_reply(p->data, NULL, NULL);
    free(p);
  }
}

void session_free(session *s) {
  session_close(s);
  while (s->subscriptions) {
    subscription *sub = s->subscriptions;
    s->subscriptions = sub->next;
    free(sub->uri);
    free(sub);
  }
  server *srv = s->server;
  if (s->prev) s->prev->next = s->next;
  else srv->sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  srv->session_count--;
  for (int i = 0; i < SESSION_EARLY_CANCELS; i++) free(s->early_cancels[i]);
  free(s->client_info_json);
  free(s->client_capabilities_json);
  free(s);
}

static char *value_to_json(const json_value *v) {
  if (!v) return NULL;
  buf b = BUF_INIT;
  json_write_value(&b, v);
  return buf_detach(&b, NULL);
}

static bool is_method(const jsonrpc_message *m, const char *name) {
  return m->method_len == strlen(name) && memcmp(m->method, name, m->method_len) == 0;
}

static void handle_initialize(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin) {
  if (s->state != SESSION_NEW) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_REQUEST,
                "Invalid Request: the session is already initialized", NULL, 0);
    return;
  }
  const json_value *requested = json_object_get(m->params, "protocolVersion");
  if (!m->params || m->params->type != JSON_OBJECT || !requested || requested->type != JSON_STRING) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_PARAMS,
                "Invalid params: initialize needs params.protocolVersion (a string)", NULL, 0);
    return;
  }
  const protocol_version *v = protocol_find(requested->u.string, requested->len);
  if (!v || v->era != PROTOCOL_ERA_INITIALIZE) v = protocol_preferred();
  s->version = v;
  s->client_info_json = value_to_json(json_object_get(m->params, "clientInfo"));
  s->client_capabilities_json = value_to_json(json_object_get(m->params, "capabilities"));

  app_description d = {0};
  server *srv = s->server;
  if (srv->app && srv->app->describe) srv->app->describe(srv->app_data, &d);
  buf r = BUF_INIT;
  buf_puts(&r, "{\"protocolVersion\":\"");
  buf_append_str(&r, v->name);
  buf_puts(&r, "\",\"capabilities\":{\"logging\":{}");
  if (d.completions) buf_puts(&r, ",\"completions\":{}");
  if (d.prompts) buf_puts(&r, ",\"prompts\":{\"listChanged\":true}");
  if (d.resources) buf_puts(&r, ",\"resources\":{\"subscribe\":true,\"listChanged\":true}");
  if (d.tools) buf_puts(&r, ",\"tools\":{\"listChanged\":true}");
  buf_puts(&r, "},\"serverInfo\":");
  if (d.server_info_json) buf_append_str(&r, d.server_info_json);
  else buf_puts(&r, "{\"name\":\"luamcp\",\"version\":\"0\"}");
  if (d.instructions) {
    buf_puts(&r, ",\"instructions\":");
    json_write_string(&r, d.instructions, strlen(d.instructions));
  }
  buf_putc(&r, '}');
  s->state = SESSION_READY;
  reply_result(s, b, origin, m->id, src, r.data, r.len);
  buf_free(&r);
}

static void handle_set_level(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin) {
  const json_value *level = json_object_get(m->params, "level");
  int parsed = level && level->type == JSON_STRING ? log_level_parse(level->u.string, level->len) : -1;
  if (parsed < 0) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_PARAMS,
                "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, "
                "emergency",
                NULL, 0);
    return;
  }
  s->log_level = parsed;
  reply_result(s, b, origin, m->id, src, "{}", 2);
}

static void handle_subscription(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin,
                                bool subscribe) {
  const json_value *uri = json_object_get(m->params, "uri");
  if (!uri || uri->type != JSON_STRING) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_PARAMS, "Invalid params: uri must be a string", NULL, 0);
    return;
  }
  subscription **pp = &s->subscriptions;
  while (*pp && !(strlen((*pp)->uri) == uri->len && memcmp((*pp)->uri, uri->u.string, uri->len) == 0))
    pp = &(*pp)->next;
  if (subscribe && !*pp) {
    subscription *sub = calloc(1, sizeof *sub);
    sub->uri = strdup(uri->u.string);
    sub->next = s->subscriptions;
    s->subscriptions = sub;
  } else if (!subscribe && *pp) {
    subscription *sub = *pp;
    *pp = sub->next;
    free(sub->uri);
    free(sub);
  }
  reply_result(s, b, origin, m->id, src, "{}", 2);
}

/* ---- Cancellations that came before their request ----------------- */

static char *id_text(const json_value *id) {
  if (!id || (id->type != JSON_STRING && id->type != JSON_INTEGER)) return NULL;
  buf b = BUF_INIT;
  json_write_value(&b, id);
  return buf_detach(&b, NULL);
}

static void remember_early_cancel(session *s, const json_value *id) {
  char *text = id_text(id);
  if (!text) return;
  char **slot = &s->early_cancels[s->early_cancel_next++ % SESSION_EARLY_CANCELS];
  free(*slot);
  *slot = text;
}

/* Whether a cancellation for this request id came before the request (and
 * forget it: it cancels one request). */
static bool take_early_cancel(session *s, const json_value *id) {
  char *text = id_text(id);
  if (!text) return false;
  bool found = false;
  for (int i = 0; i < SESSION_EARLY_CANCELS && !found; i++) {
    if (s->early_cancels[i] && strcmp(s->early_cancels[i], text) == 0) {
      free(s->early_cancels[i]);
      s->early_cancels[i] = NULL;
      found = true;
    }
  }
  free(text);
  return found;
}

static void start_call(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin) {
  call *c = calloc(1, sizeof *c);
  c->session = s;
  jsonrpc_id_copy(&c->id, m->id, src);
  c->method = strndup(m->method, m->method_len);
  c->version = s->version;
  c->transport_data = origin;
  const json_value *token = json_object_get(json_object_get(m->params, "_meta"), "progressToken");
  if (token && (token->type == JSON_STRING || token->type == JSON_INTEGER)) c->progress_token = value_to_json(token);
  if (b) {
    c->batch = b;
    b->pending++;
  }
  c->next = s->calls;
  if (c->next) c->next->prev = c;
  s->calls = c;
  if (take_early_cancel(s, m->id)) {
    /* Cancelled before it started: no answer (the transport still ends an
     * HTTP exchange, as for any cancelled call). */
    log_write(LOG_DEBUG, "%s: request %s was cancelled before it arrived", s->name, c->id.raw);
    call_free(c);
    return;
  }
  server *srv = s->server;
  if (!srv->app) {
    call_fail(c, JSONRPC_METHOD_NOT_FOUND, NULL, NULL, 0);
    return;
  }
  srv->app->call_start(srv->app_data, c, m->params, src);
}

static void handle_request(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin) {
  if (find_call(s, m->id)) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_REQUEST,
                "Invalid Request: this id is already used by a request in progress", NULL, 0);
    return;
  }
  if (is_method(m, "initialize")) return handle_initialize(s, m, src, b, origin);
  if (is_method(m, "ping")) return reply_result(s, b, origin, m->id, src, "{}", 2);
  if (s->state == SESSION_NEW) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_REQUEST,
                "Invalid Request: the server is not initialized; send initialize first", NULL, 0);
    return;
  }
  if (is_method(m, "logging/setLevel")) return handle_set_level(s, m, src, b, origin);
  if (is_method(m, "resources/subscribe")) return handle_subscription(s, m, src, b, origin, true);
  if (is_method(m, "resources/unsubscribe")) return handle_subscription(s, m, src, b, origin, false);
  start_call(s, m, src, b, origin);
}

static void handle_notification(session *s, const jsonrpc_message *m, const char *src) {
  if (is_method(m, "notifications/initialized")) {
    if (s->state == SESSION_READY) s->state = SESSION_INITIALIZED;
    return;
  }
  if (s->state == SESSION_NEW) return;
  if (is_method(m, "notifications/cancelled")) {
    const json_value *id = json_object_get(m->params, "requestId");
    call *c = id ? find_call(s, id) : NULL;
    if (c) {
      log_write(LOG_DEBUG, "%s: request %s cancelled by the client", s->name, c->id.raw);
      call_cancel(c);
    } else {
      remember_early_cancel(s, id);
    }
    return;
  }
  server *srv = s->server;
  if (srv->app && srv->app->notification) srv->app->notification(srv->app_data, s, m->method, m->params, src);
}

static void handle_response(session *s, const jsonrpc_message *m) {
  if (!m->id) {
    /* An error with id null (the client could not read one of our
     * requests, and cannot say which), or an id of no valid type: no
     * waiting request can be matched to it. */
    log_write(LOG_WARNING, "%s: the client answered with no usable id%s", s->name,
              m->error ? " (an error: it may have failed to read one of our requests)" : "");
    return;
  }
  pending_request *p = m->id->type == JSON_INTEGER ? take_pending(s, m->id->u.integer) : NULL;
  if (!p) {
    log_write(LOG_DEBUG, "%s: ignoring a response to no request of ours", s->name);
    return;
  }
  p->on_reply(p->data, m->result, m->error);
  free(p);
}

static void handle_one(session *s, const json_value *v, const char *src, batch *b, void *origin) {
  jsonrpc_message m;
  jsonrpc_classify(v, src, &m);
  switch (m.kind) {
    case JSONRPC_INVALID:
      reply_error(s, b, origin, m.id, src, m.error_code, m.error_message, NULL, 0);
      break;
    case JSONRPC_NOTIFICATION: handle_notification(s, &m, src); break;
    case JSONRPC_RESPONSE: handle_response(s, &m); break;
    case JSONRPC_REQUEST: handle_request(s, &m, src, b, origin); break;
  }
}

bool session_receive_urgent(session *s, const char *json, size_t len) {
  if (s->state == SESSION_NEW || s->state == SESSION_CLOSED) return false;
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, NULL);
  if (!doc) return false;
  jsonrpc_message m;
  jsonrpc_classify(json_doc_root(doc), json, &m);
  bool cancel = m.kind == JSONRPC_NOTIFICATION && is_method(&m, "notifications/cancelled");
  if (cancel) handle_notification(s, &m, json);
  json_doc_free(doc);
  return cancel;
}

void session_receive(session *s, const char *json, size_t len, void *origin) {
  if (s->state == SESSION_CLOSED) return;
  trace_message("<-", s->name, json, len);
  json_error err;
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    char message[200];
    snprintf(message, sizeof message, "Parse error: %s", err.message);
    reply_error(s, NULL, origin, NULL, json, JSONRPC_PARSE_ERROR, message, NULL, 0);
    return;
  }
  const json_value *root = json_doc_root(doc);
  if (root->type != JSON_ARRAY) {
    handle_one(s, root, json, NULL, origin);
  } else if (root->len == 0 || !s->version || !s->version->batches) {
    reply_error(s, NULL, origin, NULL, json, JSONRPC_INVALID_REQUEST,
                root->len == 0 ? "Invalid Request: empty batch"
                               : "Invalid Request: batches are only allowed on a 2025-03-26 session",
                NULL, 0);
  } else {
    batch *b = calloc(1, sizeof *b);
    b->origin = origin;
    b->pending = 1; /* held while the elements are read */
    for (uint32_t i = 0; i < root->len && s->state != SESSION_CLOSED; i++) handle_one(s, &root->u.items[i], json, b, origin);
    batch_release(s, b);
  }
  json_doc_free(doc);
}

/* ---- Every session of a server --------------------------------------- */

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

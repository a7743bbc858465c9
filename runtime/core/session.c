/* session.c - JSON-RPC handling and the MCP lifecycle for one client. See session.h. */
#include "core/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jobs.h"
#include "core/luamcp_limits.h"
#include "core/log.h"
#include "core/observe.h"
#include "core/server.h"
#include "core/wire.h"

/* ---- Sending --------------------------------------------------------- */

static void send_message(session *s, session_message *m) {
  if (s->state == SESSION_CLOSED) return;
  if (!m->chain) {
    trace_message("->", s->name, m->json, m->len);
    wire_seen(s->server, s, WIRE_TO_CLIENT, m->json, m->len);
    s->transport->send(s, m);
    return;
  }
  /* The text in one piece, for the trace or a transport that takes no
   * chains. */
  buf flat = BUF_INIT;
  if (trace_enabled() || wire_watched(s->server) || !s->transport->chains) {
    chain_flatten(m->chain, &flat);
    trace_message("->", s->name, flat.data, flat.len);
    wire_seen(s->server, s, WIRE_TO_CLIENT, flat.data, flat.len);
  }
  if (!s->transport->chains) {
    m->json = flat.data;
    m->len = flat.len;
    m->chain = NULL;
  }
  s->transport->send(s, m);
  buf_free(&flat);
}

/* A reply that is not the end of a call: an error for a message we could not
 * accept, or an answer the core gives itself (ping, initialize, ...). */
static void send_reply(session *s, batch *b, void *origin, buf *reply, bool unaddressed, int http_status) {
  if (b) {
    if (b->answered++) buf_putc(&b->out, ',');
    buf_append(&b->out, reply->data, reply->len);
    return;
  }
  session_message m = {.json = reply->data, .len = reply->len, .origin = origin, .final = true,
                       .unaddressed_error = unaddressed, .http_status = http_status};
  send_message(s, &m);
}

static void reply_error_status(session *s, batch *b, void *origin, const json_value *id, const char *src, int code,
                               const char *message, const char *data_json, size_t data_len, int http_status) {
  buf out = BUF_INIT, tmp = BUF_INIT;
  size_t id_len = 0;
  const char *id_text = id ? jsonrpc_id_text(id, src, &tmp, &id_len) : NULL;
  jsonrpc_write_error(&out, id_text, id_len, code, message, data_json, data_len);
  send_reply(s, b, origin, &out, id == NULL, http_status);
  buf_free(&out);
  buf_free(&tmp);
}

static void reply_error(session *s, batch *b, void *origin, const json_value *id, const char *src, int code,
                        const char *message, const char *data_json, size_t data_len) {
  reply_error_status(s, b, origin, id, src, code, message, data_json, data_len, 0);
}

void session_send_error(session *s, void *origin, int code, const char *message) {
  reply_error(s, NULL, origin, NULL, NULL, code, message, NULL, 0);
}

static void reply_result(session *s, batch *b, void *origin, const json_value *id, const char *src,
                         const char *result, size_t len) {
  buf out = BUF_INIT, tmp = BUF_INIT;
  size_t id_len;
  const char *id_text = jsonrpc_id_text(id, src, &tmp, &id_len);
  jsonrpc_write_result_start(&out, id_text, id_len);
  buf_append(&out, result, len);
  jsonrpc_write_result_end(&out);
  send_reply(s, b, origin, &out, false, 0);
  buf_free(&out);
  buf_free(&tmp);
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

/* The call in progress with this id. A sessionless session's ids are only
 * unique within one exchange (origin): many clients share it. */
static call *find_call(session *s, const json_value *id, const void *origin) {
  for (call *c = s->calls; c; c = c->next)
    if (jsonrpc_id_matches(&c->id, id) && (!s->sessionless || c->transport_data == origin)) return c;
  return NULL;
}

static void listener_free(listener *l) {
  if (!l) return;
  for (size_t i = 0; i < l->uri_count; i++) free(l->uris[i]);
  free(l->uris);
  for (size_t i = 0; i < l->task_id_count; i++) free(l->task_ids[i]);
  free(l->task_ids);
  free(l);
}

static void call_free(call *c) {
  session *s = c->session;
  if (c->observed) observe_call_finished(c);
  if (s->transport && s->transport->call_ended) s->transport->call_ended(s, c);
  if (c->prev) c->prev->next = c->next;
  else s->calls = c->next;
  if (c->next) c->next->prev = c->prev;
  batch *b = c->batch;
  jsonrpc_id_free(&c->id);
  free(c->method);
  free(c->progress_token);
  free(c->client_capabilities_json);
  free(c->client_info_json);
  auth_identity_unref(c->identity);
  listener_free(c->listener);
  free(c);
  if (b) batch_release(s, b);
}

/* Who sent origin, per the transport (borrowed), or NULL. */
static auth_identity *request_identity(session *s, void *origin) {
  return s->transport && s->transport->request_identity ? s->transport->request_identity(s, origin) : NULL;
}

/* Who a request on origin comes from (borrowed): the token it carries,
 * whose scopes are the current ones (a client that stepped up for more
 * scopes presents a new token; the transport has already made sure a
 * legacy session's requests come from its owner's principal), else the
 * session's owner. */
static auth_identity *identity_of(session *s, void *origin) {
  auth_identity *id = request_identity(s, origin);
  return id ? id : s->owner;
}

/* The response is out, or pieces when not NULL. */
static void call_send_response_scoped(call *c, const buf *out, const chain *pieces, int http_status,
                                      const char *required_scopes);
static void call_send_response(call *c, const buf *out, const chain *pieces, int http_status) {
  call_send_response_scoped(c, out, pieces, http_status, NULL);
}

static void call_send_response_scoped(call *c, const buf *out, const chain *pieces, int http_status,
                                      const char *required_scopes) {
  session *s = c->session;
  if (c->batch) {
    if (c->batch->answered++) buf_putc(&c->batch->out, ',');
    if (pieces) chain_flatten(pieces, &c->batch->out);
    else buf_append(&c->batch->out, out->data, out->len);
  } else {
    session_message m = {.json = out ? out->data : NULL, .len = out ? out->len : 0, .chain = pieces, .related = c,
                         .origin = c->transport_data, .final = true, .http_status = http_status,
                         .required_scopes = required_scopes};
    send_message(s, &m);
  }
  call_free(c);
}

void call_respond_chain(call *c, const chain *result) {
  if (!result->count) {
    call_respond(c, result->own.data, result->own.len);
    return;
  }
  /* One chain for every response, as call_respond's buffer; the strings
   * stay borrowed. */
  static chain out;
  chain_clear(&out);
  buf_reserve(&out.own, result->own.len + c->id.raw_len + 40);
  jsonrpc_write_result_start(&out.own, c->id.raw, c->id.raw_len);
  chain_append(&out, result);
  jsonrpc_write_result_end(&out.own);
  call_send_response(c, NULL, &out, 0);
  if (out.own.cap > 1024 * 1024) chain_free(&out);
}

void call_respond(call *c, const char *result_json, size_t len) {
  /* One buffer for every response: transports copy what they send. */
  static buf out;
  buf_clear(&out);
  buf_reserve(&out, len + c->id.raw_len + 40);
  jsonrpc_write_result_start(&out, c->id.raw, c->id.raw_len);
  buf_append(&out, result_json, len);
  jsonrpc_write_result_end(&out);
  call_send_response(c, &out, NULL, 0);
  if (out.cap > 1024 * 1024) buf_free(&out);
}

void call_respond_partial(call *c, const char *result_json, size_t len) {
  buf out = BUF_INIT;
  jsonrpc_write_result_start(&out, c->id.raw, c->id.raw_len);
  buf_append(&out, result_json, len);
  jsonrpc_write_result_end(&out);
  session_message m = {.json = out.data, .len = out.len, .related = c, .origin = c->transport_data};
  send_message(c->session, &m);
  buf_free(&out);
}

void call_fail(call *c, int code, const char *message, const char *data_json, size_t data_len) {
  if (c->outcome == CALL_OK) c->outcome = CALL_PROTOCOL_ERROR;
  if (code == JSONRPC_METHOD_NOT_FOUND) c->method_unknown = true;
  buf out = BUF_INIT;
  jsonrpc_write_error(&out, c->id.raw, c->id.raw_len, code, message, data_json, data_len);
  /* 2026-07-28 over HTTP: an unknown method is a 404 as well. */
  int status = 0;
  if (c->modern && code == JSONRPC_METHOD_NOT_FOUND) status = 404;
  if (c->modern && (code == MCP_MISSING_CAPABILITY || code == MCP_HEADER_MISMATCH)) status = 400;
  call_send_response(c, &out, NULL, status);
  buf_free(&out);
}

static void write_scope_data(buf *data, const char *required_scopes);

void call_fail_scope(call *c, const char *required_scopes, const char *message) {
  c->outcome = CALL_PROTOCOL_ERROR;
  buf data = BUF_INIT, out = BUF_INIT;
  write_scope_data(&data, required_scopes);
  jsonrpc_write_error(&out, c->id.raw, c->id.raw_len, MCP_INSUFFICIENT_SCOPE,
                      message ? message : "Forbidden: insufficient scope", data.data, data.len);
  call_send_response_scoped(c, &out, NULL, 403, required_scopes);
  buf_free(&out);
  buf_free(&data);
}

static void call_cancel(call *c) {
  server *srv = c->session->server;
  c->outcome = CALL_CANCELLED;
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
  if (related && related->modern) {
    /* 2026-07-28: only when the request asked, at its level, on its stream. */
    if (level > related->log_level) return;
  } else if (level > s->log_level || s->state == SESSION_NEW) {
    return;
  }
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
  /* No subscription is longer, or has a NUL inside (handle_subscription). */
  if (!s->subscription_count || len > MAX_RESOURCE_URI_BYTES || memchr(uri, '\0', len)) return false;
  char key[MAX_RESOURCE_URI_BYTES + 1]; /* the map's keys end with a NUL; uri need not */
  memcpy(key, uri, len);
  key[len] = '\0';
  return strmap_get(&s->subscribed, key) != NULL;
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

const char *call_client_capabilities(const call *c) {
  return c->modern ? c->client_capabilities_json : c->session->client_capabilities_json;
}

const char *call_client_info(const call *c) { return c->modern ? c->client_info_json : c->session->client_info_json; }

static bool capabilities_have(const char *json, const char *name) {
  if (!json) return false;
  json_doc *doc = json_parse(json, strlen(json), MAX_JSON_DEPTH, NULL);
  if (!doc) return false;
  const json_value *v = json_object_get(json_doc_root(doc), name);
  bool has = v && v->type != JSON_NULL && v->type != JSON_FALSE;
  json_doc_free(doc);
  return has;
}

bool call_client_has_capability(const call *c, const char *name) {
  return capabilities_have(call_client_capabilities(c), name);
}

bool session_client_has_capability(const session *s, const char *name) {
  return capabilities_have(s->client_capabilities_json, name);
}

/* ---- Scopes ------------------------------------------------------------ */

/* The data of an insufficient-scope error: {"requiredScopes":[...]}. */
static void write_scope_data(buf *data, const char *required_scopes) {
  buf_puts(data, "{\"requiredScopes\":");
  auth_write_scopes_json(required_scopes, data);
  buf_putc(data, '}');
}

/* May who read uri (for following it)? 1: yes; 0: the app knows no such
 * URI; -1: it needs scopes who lacks (appended to required, when given). */
static int resource_access(server *srv, const char *uri, size_t len, const auth_identity *who, buf *required) {
  const app_ops *app = srv->app;
  if (!app) return 1;
  if (!app->resource_scopes) return !app->resource_known || app->resource_known(srv->app_data, uri, len) ? 1 : 0;
  buf scopes = BUF_INIT;
  bool known = app->resource_scopes(srv->app_data, uri, len, &scopes);
  int access = !known ? 0 : auth_has_scopes(who, scopes.data) ? 1 : -1;
  if (access < 0 && required) buf_append(required, scopes.data, scopes.len);
  buf_free(&scopes);
  return access;
}

/* A request the core answers itself, refused for want of scopes: as
 * call_fail_scope (MCP_INSUFFICIENT_SCOPE, HTTP 403 with a challenge). */
static void reply_scope_error(session *s, batch *b, void *origin, const json_value *id, const char *src,
                              const char *required_scopes, const char *message) {
  buf out = BUF_INIT, tmp = BUF_INIT, data = BUF_INIT;
  size_t id_len = 0;
  const char *id_text = jsonrpc_id_text(id, src, &tmp, &id_len);
  write_scope_data(&data, required_scopes);
  jsonrpc_write_error(&out, id_text, id_len, MCP_INSUFFICIENT_SCOPE, message, data.data, data.len);
  if (b) {
    send_reply(s, b, origin, &out, false, 403);
  } else {
    session_message m = {.json = out.data, .len = out.len, .origin = origin, .final = true, .http_status = 403,
                         .required_scopes = required_scopes};
    send_message(s, &m);
  }
  buf_free(&out);
  buf_free(&tmp);
  buf_free(&data);
}

/* ---- What a session keeps from its client ---------------------------- */

/* Ask the transport for room (HTTP charges it to its buffer budget). */
static bool session_keep(session *s, size_t bytes) {
  if (s->transport && s->transport->keep && !s->transport->keep(s, bytes)) return false;
  s->kept_bytes += bytes;
  return true;
}

static void session_release(session *s, size_t bytes) {
  if (bytes > s->kept_bytes) bytes = s->kept_bytes;
  s->kept_bytes -= bytes;
  if (bytes && s->transport && s->transport->release) s->transport->release(s, bytes);
}

/* What one subscription holds: its URI twice (the list's and the map's
 * key), its list node and its map entry. */
static size_t subscription_bytes(size_t uri_len) {
  return 2 * (uri_len + 1) + sizeof(subscription) + sizeof(strmap_entry);
}

static void subscription_remove(session *s, subscription *sub) {
  strmap_remove(&s->subscribed, sub->uri);
  if (sub->prev) sub->prev->next = sub->next;
  else s->subscriptions = sub->next;
  if (sub->next) sub->next->prev = sub->prev;
  s->subscription_count--;
  session_release(s, subscription_bytes(strlen(sub->uri)));
  free(sub->uri);
  free(sub);
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
  if (s->subscribed.buckets) strmap_free(&s->subscribed);
  session_release(s, s->kept_bytes);
  server *srv = s->server;
  if (s->prev) s->prev->next = s->next;
  else srv->sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  srv->session_count--;
  for (int i = 0; i < SESSION_EARLY_CANCELS; i++) free(s->early_cancels[i]);
  free(s->client_info_json);
  free(s->client_capabilities_json);
  auth_identity_unref(s->owner);
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

/* The capabilities object of initialize and server/discover. */
static void write_capabilities(buf *r, const app_description *d) {
  buf_puts(r, "{\"logging\":{}");
  if (d->completions) buf_puts(r, ",\"completions\":{}");
  if (d->prompts) buf_puts(r, ",\"prompts\":{\"listChanged\":true}");
  if (d->resources) buf_puts(r, ",\"resources\":{\"subscribe\":true,\"listChanged\":true}");
  if (d->tools) buf_puts(r, ",\"tools\":{\"listChanged\":true}");
  if (d->extensions_json) {
    buf_puts(r, ",\"extensions\":");
    buf_append_str(r, d->extensions_json);
  }
  buf_putc(r, '}');
}

static void write_server_info(buf *r, const app_description *d) {
  if (d->server_info_json) buf_append_str(r, d->server_info_json);
  else buf_puts(r, "{\"name\":\"luamcp\",\"version\":\"0\"}");
}

static void describe_app(session *s, app_description *d) {
  memset(d, 0, sizeof *d);
  server *srv = s->server;
  if (srv->app && srv->app->describe) srv->app->describe(srv->app_data, d);
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
  /* The session keeps these for its whole life: bounded, and charged to
   * the transport's budget. */
  const json_value *info = json_object_get(m->params, "clientInfo");
  const json_value *caps = json_object_get(m->params, "capabilities");
  const char *too_big = info && info->src_len > MAX_CLIENT_FIELD_BYTES   ? "clientInfo"
                        : caps && caps->src_len > MAX_CLIENT_FIELD_BYTES ? "capabilities"
                                                                         : NULL;
  if (too_big) {
    char message[160];
    snprintf(message, sizeof message, "Invalid params: %s is larger than %u bytes, the most a session keeps", too_big,
             MAX_CLIENT_FIELD_BYTES);
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_PARAMS, message, NULL, 0);
    return;
  }
  char *info_json = value_to_json(info), *caps_json = value_to_json(caps);
  size_t kept = (info_json ? strlen(info_json) + 1 : 0) + (caps_json ? strlen(caps_json) + 1 : 0);
  if (kept && !session_keep(s, kept)) {
    free(info_json);
    free(caps_json);
    reply_error_status(s, b, origin, m->id, src, MCP_SERVER_BUSY,
                       "Server busy: the memory the server gives sessions is full; try again later", NULL, 0, 503);
    return;
  }
  const protocol_version *v = protocol_find(requested->u.string, requested->len);
  if (!v || v->era != PROTOCOL_ERA_INITIALIZE) v = protocol_preferred();
  s->version = v;
  s->client_info_json = info_json;
  s->client_capabilities_json = caps_json;
  s->owner = auth_identity_ref(request_identity(s, origin));

  app_description d;
  describe_app(s, &d);
  buf r = BUF_INIT;
  buf_puts(&r, "{\"protocolVersion\":\"");
  buf_append_str(&r, v->name);
  buf_puts(&r, "\",\"capabilities\":");
  write_capabilities(&r, &d);
  buf_puts(&r, ",\"serverInfo\":");
  write_server_info(&r, &d);
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
  if (uri->len > MAX_RESOURCE_URI_BYTES || memchr(uri->u.string, '\0', uri->len)) {
    char message[120];
    snprintf(message, sizeof message, "Invalid params: uri must be at most %u bytes, with no NUL",
             MAX_RESOURCE_URI_BYTES);
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_PARAMS, message, NULL, 0);
    return;
  }
  subscription *sub = s->subscription_count ? strmap_get(&s->subscribed, uri->u.string) : NULL;
  if (!subscribe || sub) {
    if (!subscribe && sub) subscription_remove(s, sub);
    reply_result(s, b, origin, m->id, src, "{}", 2);
    return;
  }
  if (s->subscription_count >= LISTEN_MAX_URIS) {
    char message[160];
    snprintf(message, sizeof message,
             "Invalid params: this session already follows %d resources, the most it may; unsubscribe from one first",
             LISTEN_MAX_URIS);
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_PARAMS, message, NULL, 0);
    return;
  }
  server *srv = s->server;
  buf required = BUF_INIT;
  int access = resource_access(srv, uri->u.string, uri->len, identity_of(s, origin), &required);
  if (access < 0) {
    reply_scope_error(s, b, origin, m->id, src, required.data,
                      "Forbidden: subscribing to this resource needs scopes the token does not grant");
    buf_free(&required);
    return;
  }
  buf_free(&required);
  if (access == 0) {
    /* As resources/read answers an unknown URI in the session's version. */
    buf message = BUF_INIT, data = BUF_INIT;
    buf_puts(&message, "Resource not found: ");
    buf_append(&message, uri->u.string, uri->len);
    buf_puts(&data, "{\"uri\":");
    json_write_string(&data, uri->u.string, uri->len);
    buf_putc(&data, '}');
    int code = s->version && s->version->not_found_invalid_params ? JSONRPC_INVALID_PARAMS : MCP_RESOURCE_NOT_FOUND;
    reply_error(s, b, origin, m->id, src, code, message.data, data.data, data.len);
    buf_free(&message);
    buf_free(&data);
    return;
  }
  if (!session_keep(s, subscription_bytes(uri->len))) {
    reply_error(s, b, origin, m->id, src, MCP_SERVER_BUSY,
                "Server busy: the memory the server gives sessions is full; try again later", NULL, 0);
    return;
  }
  if (!s->subscribed.buckets) strmap_init(&s->subscribed);
  sub = calloc(1, sizeof *sub);
  sub->uri = strdup(uri->u.string);
  strmap_set(&s->subscribed, sub->uri, sub);
  sub->next = s->subscriptions;
  if (sub->next) sub->next->prev = sub;
  s->subscriptions = sub;
  s->subscription_count++;
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
  if (id && id->src_len > SESSION_EARLY_CANCEL_ID_BYTES) return;
  char *text = id_text(id);
  if (!text) return;
  if (strlen(text) > SESSION_EARLY_CANCEL_ID_BYTES) {
    free(text);
    return;
  }
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

/* ---- Starting calls ----------------------------------------------------- */

/* A call for the request, in the session's list; NULL when a cancellation
 * for it came first (the call is then already ended). */
static call *call_new(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin) {
  call *c = calloc(1, sizeof *c);
  c->session = s;
  jsonrpc_id_copy(&c->id, m->id, src);
  c->method = strndup(m->method, m->method_len);
  c->version = s->version;
  c->transport_data = origin;
  c->log_level = -1;
  c->identity = auth_identity_ref(identity_of(s, origin));
  const json_value *token = json_object_get(json_object_get(m->params, "_meta"), "progressToken");
  if (token && (token->type == JSON_STRING || token->type == JSON_INTEGER)) c->progress_token = value_to_json(token);
  if (b) {
    c->batch = b;
    b->pending++;
  }
  c->next = s->calls;
  if (c->next) c->next->prev = c;
  s->calls = c;
  if (!s->sessionless && take_early_cancel(s, m->id)) {
    /* Cancelled before it started: no answer (the transport still ends an
     * HTTP exchange, as for any cancelled call). */
    log_write(LOG_DEBUG, "%s: request %s was cancelled before it arrived", s->name, c->id.raw);
    call_free(c);
    return NULL;
  }
  return c;
}

/* Hand the call to the app. */
static void call_begin(call *c, const jsonrpc_message *m, const char *src) {
  server *srv = c->session->server;
  if (srv->observer_count) observe_call_started(c, m->params);
  if (!srv->app) {
    call_fail(c, JSONRPC_METHOD_NOT_FOUND, NULL, NULL, 0);
    return;
  }
  srv->app->call_start(srv->app_data, c, m->params, src);
}

void session_receive_foreign(session *s, const jsonrpc_message *m, const char *src, void *origin) {
  call *c = call_new(s, m, src, NULL, origin);
  if (c) call_begin(c, m, src);
}

/* ---- The 2026-07-28 era: every request stands alone ------------------ */

/* server/discover: what initialize said, without a session. */
static void handle_discover(session *s, const jsonrpc_message *m, const char *src, void *origin) {
  app_description d;
  describe_app(s, &d);
  buf r = BUF_INIT;
  buf_puts(&r, "{\"supportedVersions\":");
  buf_append_str(&r, protocol_supported_json());
  buf_puts(&r, ",\"capabilities\":");
  write_capabilities(&r, &d);
  if (d.instructions) {
    buf_puts(&r, ",\"instructions\":");
    json_write_string(&r, d.instructions, strlen(d.instructions));
  }
  if (d.cache_json) {
    buf_putc(&r, ',');
    buf_append_str(&r, d.cache_json);
  }
  buf_puts(&r, ",\"resultType\":\"complete\",\"_meta\":{\"" MCP_META_SERVER_INFO "\":");
  write_server_info(&r, &d);
  buf_puts(&r, "}}");
  reply_result(s, NULL, origin, m->id, src, r.data, r.len);
  buf_free(&r);
}

static bool is_removed_method(const jsonrpc_message *m) {
  static const char *const removed[] = {"initialize", "ping", "logging/setLevel", "resources/subscribe",
                                        "resources/unsubscribe"};
  for (size_t i = 0; i < sizeof removed / sizeof *removed; i++)
    if (is_method(m, removed[i])) return true;
  return false;
}

/* The methods of the tasks extension the core answers (jobs.c). */
static bool is_jobs_method(const jsonrpc_message *m) {
  return is_method(m, "tasks/get") || is_method(m, "tasks/update") || is_method(m, "tasks/cancel");
}

static bool declares_jobs(const json_value *caps) {
  const json_value *ext = json_object_get(json_object_get(caps, "extensions"), JOBS_EXTENSION);
  return ext && ext->type == JSON_OBJECT;
}

static void reply_missing_jobs(session *s, void *origin, const jsonrpc_message *m, const char *src, const char *what) {
  static const char data[] = "{\"requiredCapabilities\":{\"extensions\":{\"" JOBS_EXTENSION "\":{}}}}";
  char message[200];
  snprintf(message, sizeof message, "Missing required client capability: %s needs the " JOBS_EXTENSION
           " extension in the request's client capabilities", what);
  reply_error_status(s, NULL, origin, m->id, src, MCP_MISSING_CAPABILITY, message, data, sizeof data - 1, 400);
}

/* A job another process may hold: not here, and a bus reaches the others
 * (the request then becomes a call the app forwards). */
static bool job_elsewhere(server *srv, const json_value *params, const char *principal) {
  const json_value *id = json_object_get(params, "taskId");
  /* Another principal's job here is looked for elsewhere too, as an
   * unknown id is: the same answer ("no such task"), after the same wait. */
  return srv->jobs_elsewhere && id && id->type == JSON_STRING && !job_find_for(srv, id->u.string, id->len, principal);
}

/* tasks/get, tasks/update, tasks/cancel: the store answers; listeners hear
 * of what changed. Only for a client that declared the extension. */
static void handle_jobs(session *s, const jsonrpc_message *m, const char *src, void *origin, const json_value *caps) {
  if (!declares_jobs(caps)) return reply_missing_jobs(s, origin, m, src, m->method);
  buf out = BUF_INIT;
  job *changed = NULL;
  const char *message = NULL;
  int code = jobs_handle(s->server, m->method, m->params, auth_principal(identity_of(s, origin)), &out, &changed,
                         &message);
  if (code) reply_error(s, NULL, origin, m->id, src, code, message, NULL, 0);
  else reply_result(s, NULL, origin, m->id, src, out.data, out.len);
  buf_free(&out);
  if (changed) server_job_changed(s->server, changed);
}

/* What names the request's target (Mcp-Name): tools/call and prompts/get
 * name one, resources/read a URI. */
static const json_value *request_target(const jsonrpc_message *m) {
  if (is_method(m, "tools/call") || is_method(m, "prompts/get")) return json_object_get(m->params, "name");
  if (is_method(m, "resources/read")) return json_object_get(m->params, "uri");
  if (is_jobs_method(m)) return json_object_get(m->params, "taskId"); /* the tasks extension's routing header */
  return NULL;
}

static bool string_is(const json_value *v, const char *text) {
  return v && v->type == JSON_STRING && text && strlen(text) == v->len && memcmp(v->u.string, text, v->len) == 0;
}

/* Over HTTP the headers repeat what the body says, for proxies and
 * gateways that route on them; a disagreement is -32020. Returns the
 * problem, or NULL. */
static const char *header_mismatch(session *s, const jsonrpc_message *m, void *origin, const json_value *version) {
  const transport_ops *t = s->transport;
  if (!t || !t->request_header) return NULL;
  const char *header = t->request_header(s, origin, "mcp-protocol-version");
  if (!string_is(version, header)) return "the MCP-Protocol-Version header does not match _meta's protocolVersion";
  const char *method = t->request_header(s, origin, "mcp-method");
  if (!method) return "the Mcp-Method header is required";
  if (!(strlen(method) == m->method_len && memcmp(method, m->method, m->method_len) == 0))
    return "the Mcp-Method header does not match the request's method";
  const json_value *target = request_target(m);
  const char *name = t->request_header(s, origin, "mcp-name");
  if (target && target->type == JSON_STRING && !name) return "the Mcp-Name header is required for this request";
  if (name && target && !string_is(target, name)) return "the Mcp-Name header does not match the request's params";
  return NULL;
}

/* subscriptions/listen: the call stays open, and the core sends it the
 * notifications its filter asks for (server_broadcast and
 * server_resource_updated), each tagged with the subscription's id (the
 * request's). It ends when the client cancels it or closes its stream. */
static void listen_start(call *c, const jsonrpc_message *m) {
  session *s = c->session;
  const json_value *filter = json_object_get(m->params, "notifications");
  if (!filter || filter->type != JSON_OBJECT) {
    call_fail(c, JSONRPC_INVALID_PARAMS, "Invalid params: notifications (a subscription filter object) is required",
              NULL, 0);
    return;
  }
  app_description d;
  describe_app(s, &d);
  listener *l = calloc(1, sizeof *l);
  const json_value *v;
  l->tools = d.tools && (v = json_object_get(filter, "toolsListChanged")) && v->type == JSON_TRUE;
  l->prompts = d.prompts && (v = json_object_get(filter, "promptsListChanged")) && v->type == JSON_TRUE;
  l->resources = d.resources && (v = json_object_get(filter, "resourcesListChanged")) && v->type == JSON_TRUE;
  const json_value *uris = json_object_get(filter, "resourceSubscriptions");
  buf agreed = BUF_INIT;
  buf_puts(&agreed, "{\"notifications\":{");
  const char *sep = "";
  if (l->tools) buf_puts(&agreed, "\"toolsListChanged\":true"), sep = ",";
  if (l->prompts) buf_printf(&agreed, "%s\"promptsListChanged\":true", sep), sep = ",";
  if (l->resources) buf_printf(&agreed, "%s\"resourcesListChanged\":true", sep), sep = ",";
  if (d.resources && uris && uris->type == JSON_ARRAY) {
    l->uris = calloc(uris->len ? uris->len : 1, sizeof *l->uris);
    buf_printf(&agreed, "%s\"resourceSubscriptions\":[", sep);
    for (uint32_t i = 0; i < uris->len && i < LISTEN_MAX_URIS; i++) {
      const json_value *u = &uris->u.items[i];
      if (u->type != JSON_STRING || u->len > MAX_RESOURCE_URI_BYTES) continue;
      /* Only what this caller may read (a resource's scopes). */
      if (resource_access(s->server, u->u.string, u->len, c->identity, NULL) < 0) continue;
      if (l->uri_count) buf_putc(&agreed, ',');
      l->uris[l->uri_count++] = strndup(u->u.string, u->len);
      json_write_string(&agreed, u->u.string, u->len);
    }
    buf_putc(&agreed, ']');
    sep = ",";
  }
  const json_value *ids = json_object_get(filter, "taskIds");
  if (ids && ids->type == JSON_ARRAY) {
    /* Only tasks that exist: an unknown id would never be heard of. */
    l->task_ids = calloc(ids->len ? ids->len : 1, sizeof *l->task_ids);
    buf_printf(&agreed, "%s\"taskIds\":[", sep);
    for (uint32_t i = 0; i < ids->len && i < LISTEN_MAX_URIS; i++) {
      const json_value *id = &ids->u.items[i];
      /* With a bus, another process may hold it and tell of it. */
      /* Another principal's task is unknown to this caller; one held
       * elsewhere is told of only to its owner (server_job_notify). */
      if (id->type != JSON_STRING || id->len > 64) continue;
      job *held = job_find(s->server, id->u.string, id->len);
      if (held ? !job_owned_by(held, auth_principal(c->identity)) : !s->server->jobs_elsewhere) continue;
      if (l->task_id_count) buf_putc(&agreed, ',');
      l->task_ids[l->task_id_count++] = strndup(id->u.string, id->len);
      json_write_string(&agreed, id->u.string, id->len);
    }
    buf_putc(&agreed, ']');
  }
  buf_puts(&agreed, "},\"_meta\":{\"" MCP_META_SUBSCRIPTION_ID "\":");
  buf_append(&agreed, c->id.raw, c->id.raw_len);
  buf_puts(&agreed, "}}");
  c->listener = l;
  session_notify(s, c, "notifications/subscriptions/acknowledged", agreed.data, agreed.len);
  buf_free(&agreed);
}

/* A request of the 2026-07-28 era: it carries its version, the client's
 * capabilities and info and its log level in _meta, and needs no session. */
static void handle_modern(session *s, const jsonrpc_message *m, const char *src, void *origin) {
  /* The order of the checks is the spec's: the header must be there, the
   * required _meta must be there, the two must agree, and only then is the
   * version itself judged. */
  const transport_ops *t = s->transport;
  const char *header = t && t->request_header ? t->request_header(s, origin, "mcp-protocol-version") : NULL;
  if (t && t->request_header && !header) {
    reply_error_status(s, NULL, origin, m->id, src, MCP_HEADER_MISMATCH,
                       "Header mismatch: the MCP-Protocol-Version header is required", NULL, 0, 400);
    return;
  }
  const json_value *meta = json_object_get(m->params, "_meta");
  const json_value *version = json_object_get(meta, MCP_META_PROTOCOL_VERSION);
  const json_value *caps = json_object_get(meta, MCP_META_CLIENT_CAPABILITIES);
  const json_value *info = json_object_get(meta, MCP_META_CLIENT_INFO);
  const json_value *level = json_object_get(meta, MCP_META_LOG_LEVEL);
  int log_level = -1;
  const char *bad = NULL;
  if (!meta || meta->type != JSON_OBJECT) bad = "_meta (an object) is required";
  else if (!version || version->type != JSON_STRING) bad = "_meta[\"" MCP_META_PROTOCOL_VERSION "\"] (a string) is required";
  else if (!caps || caps->type != JSON_OBJECT) bad = "_meta[\"" MCP_META_CLIENT_CAPABILITIES "\"] (an object) is required";
  else if (info && info->type != JSON_OBJECT) bad = "_meta[\"" MCP_META_CLIENT_INFO "\"] must be an object";
  else if (level && (level->type != JSON_STRING || (log_level = log_level_parse(level->u.string, level->len)) < 0))
    bad = "_meta[\"" MCP_META_LOG_LEVEL "\"] must be a log level (debug ... emergency)";
  char too_big[200];
  if (!bad && (caps->src_len > MAX_CLIENT_FIELD_BYTES || (info && info->src_len > MAX_CLIENT_FIELD_BYTES))) {
    /* The call keeps them while it runs, as a session would (session.h). */
    snprintf(too_big, sizeof too_big, "_meta[\"%s\"] is larger than %u bytes, the most the server keeps",
             caps->src_len > MAX_CLIENT_FIELD_BYTES ? MCP_META_CLIENT_CAPABILITIES : MCP_META_CLIENT_INFO,
             MAX_CLIENT_FIELD_BYTES);
    bad = too_big;
  }
  if (bad) {
    char message[240];
    snprintf(message, sizeof message, "Invalid params: %s", bad);
    reply_error_status(s, NULL, origin, m->id, src, JSONRPC_INVALID_PARAMS, message, NULL, 0, 400);
    return;
  }
  const char *mismatch = header_mismatch(s, m, origin, version);
  if (mismatch) {
    char message[160];
    snprintf(message, sizeof message, "Header mismatch: %s", mismatch);
    reply_error_status(s, NULL, origin, m->id, src, MCP_HEADER_MISMATCH, message, NULL, 0, 400);
    return;
  }
  const protocol_version *v = protocol_find(version->u.string, version->len);
  if (!v || v->era != PROTOCOL_ERA_MODERN) {
    buf data = BUF_INIT;
    buf_puts(&data, "{\"supported\":");
    buf_append_str(&data, protocol_supported_json());
    buf_puts(&data, ",\"requested\":");
    json_write_string(&data, version->u.string, version->len);
    buf_putc(&data, '}');
    reply_error_status(s, NULL, origin, m->id, src, MCP_UNSUPPORTED_VERSION,
                       v ? "Unsupported protocol version: this version starts with initialize"
                         : "Unsupported protocol version",
                       data.data, data.len, 400);
    buf_free(&data);
    return;
  }
  if (is_removed_method(m)) {
    char message[160];
    snprintf(message, sizeof message, "Method not found: %s is not part of protocol %s", m->method, v->name);
    reply_error_status(s, NULL, origin, m->id, src, JSONRPC_METHOD_NOT_FOUND, message, NULL, 0, 404);
    return;
  }
  if (is_method(m, "server/discover")) return handle_discover(s, m, src, origin);
  bool elsewhere = is_jobs_method(m) && declares_jobs(caps) &&
                   job_elsewhere(s->server, m->params, auth_principal(identity_of(s, origin)));
  if (is_jobs_method(m) && !elsewhere) return handle_jobs(s, m, src, origin, caps);
  const json_value *task_ids = json_object_get(json_object_get(m->params, "notifications"), "taskIds");
  if (is_method(m, "subscriptions/listen") && task_ids && !declares_jobs(caps))
    return reply_missing_jobs(s, origin, m, src, "following tasks (notifications.taskIds)");
  call *c = call_new(s, m, src, NULL, origin);
  if (!c) return;
  c->modern = true;
  c->version = v;
  c->client_capabilities_json = value_to_json(caps);
  c->client_info_json = value_to_json(info);
  c->log_level = log_level;
  c->job_elsewhere = elsewhere;
  if (is_method(m, "subscriptions/listen")) {
    if (s->server->observer_count) observe_call_started(c, m->params);
    return listen_start(c, m);
  }
  call_begin(c, m, src);
}

/* Which era a request speaks, decided for each request (the 2026-07-28
 * versioning and backward-compatibility rules): _meta naming a protocol
 * version (or, over HTTP, a 2026-07-28 MCP-Protocol-Version header) makes
 * it modern, unless an initialized session's client merely labels a
 * legacy request with its own version; everything on the sessionless
 * session is modern. */
static bool is_modern_request(session *s, const jsonrpc_message *m, void *origin) {
  if (s->sessionless) return true;
  const json_value *version = json_object_get(json_object_get(m->params, "_meta"), MCP_META_PROTOCOL_VERSION);
  if (version && version->type == JSON_STRING) {
    const protocol_version *v = protocol_find(version->u.string, version->len);
    if (v && v->era == PROTOCOL_ERA_MODERN) return true;
    /* A legacy version: the request belongs to an initialize handshake
     * (initialize itself, or a session's later request). */
    return s->state == SESSION_NEW && !is_method(m, "initialize");
  }
  if (version) return s->state == SESSION_NEW && !is_method(m, "initialize");
  const char *header = s->transport && s->transport->request_header
                           ? s->transport->request_header(s, origin, "mcp-protocol-version")
                           : NULL;
  const protocol_version *hv = header ? protocol_find(header, strlen(header)) : NULL;
  return hv && hv->era == PROTOCOL_ERA_MODERN;
}

static void handle_request(session *s, const jsonrpc_message *m, const char *src, batch *b, void *origin) {
  if (find_call(s, m->id, origin)) {
    reply_error(s, b, origin, m->id, src, JSONRPC_INVALID_REQUEST,
                "Invalid Request: this id is already used by a request in progress", NULL, 0);
    return;
  }
  if (!b && is_modern_request(s, m, origin)) return handle_modern(s, m, src, origin);
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
  call *c = call_new(s, m, src, b, origin);
  if (c) call_begin(c, m, src);
}

static void handle_notification(session *s, const jsonrpc_message *m, const char *src) {
  if (is_method(m, "notifications/initialized")) {
    if (s->state == SESSION_READY) s->state = SESSION_INITIALIZED;
    return;
  }
  /* Before the state check: a 2026-07-28 client on stdio never
   * initializes (its session stays NEW), and its calls are cancelled too. */
  if (is_method(m, "notifications/cancelled")) {
    const json_value *id = json_object_get(m->params, "requestId");
    call *c = id && !s->sessionless ? find_call(s, id, NULL) : NULL;
    if (c) {
      log_write(LOG_DEBUG, "%s: request %s cancelled by the client", s->name, c->id.raw);
      call_cancel(c);
    } else if (s->state != SESSION_NEW) {
      remember_early_cancel(s, id);
    }
    return;
  }
  if (s->state == SESSION_NEW) return;
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

void session_note_received(session *s, const char *json, size_t len) {
  trace_message("<-", s->name, json, len);
  wire_seen(s->server, s, WIRE_FROM_CLIENT, json, len);
}

static void receive(session *s, char *json, size_t len, void *origin, bool in_place) {
  if (s->state == SESSION_CLOSED) return;
  trace_message("<-", s->name, json, len);
  wire_seen(s->server, s, WIRE_FROM_CLIENT, json, len);
  json_error err;
  json_doc *doc = in_place ? json_parse_in_place(json, len, MAX_JSON_DEPTH, &err) : json_parse(json, len, MAX_JSON_DEPTH, &err);
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

void session_receive(session *s, const char *json, size_t len, void *origin) {
  receive(s, (char *)json, len, origin, false); /* not changed: in_place is false */
}

void session_receive_in_place(session *s, char *json, size_t len, void *origin) {
  receive(s, json, len, origin, true);
}

/* ---- Every session of a server --------------------------------------- */

/* Sessions that have answered initialize and are still open. */
static bool session_live(const session *s) { return s->state == SESSION_READY || s->state == SESSION_INITIALIZED; }

/* A notification on a listen call's stream, tagged with its subscription. */
static void listener_notify(call *c, const char *method, const char *params_json, size_t len) {
  buf params = BUF_INIT;
  buf_puts(&params, "{\"_meta\":{\"" MCP_META_SUBSCRIPTION_ID "\":");
  buf_append(&params, c->id.raw, c->id.raw_len);
  buf_putc(&params, '}');
  /* The caller's params (an object) lose their braces and follow. */
  if (params_json && len > 2 && params_json[0] == '{') {
    buf_putc(&params, ',');
    buf_append(&params, params_json + 1, len - 2);
  }
  buf_putc(&params, '}');
  session_notify(c->session, c, method, params.data, params.len);
  buf_free(&params);
}

static bool listener_wants(const listener *l, const char *method) {
  if (strcmp(method, "notifications/tools/list_changed") == 0) return l->tools;
  if (strcmp(method, "notifications/prompts/list_changed") == 0) return l->prompts;
  if (strcmp(method, "notifications/resources/list_changed") == 0) return l->resources;
  return false;
}

/* Notify every listen call for which wants(listener) holds. A notification
 * cannot end a call, so the lists stay as they are while we walk them. */
static void notify_listeners(server *srv, const char *method, const char *uri, size_t uri_len, const char *params_json,
                             size_t len) {
  for (session *s = srv->sessions; s; s = s->next) {
    if (s->state == SESSION_CLOSED) continue;
    for (call *c = s->calls; c; c = c->next) {
      listener *l = c->listener;
      if (!l) continue;
      bool wanted = false;
      if (uri) {
        for (size_t i = 0; i < l->uri_count && !wanted; i++)
          wanted = strlen(l->uris[i]) == uri_len && memcmp(l->uris[i], uri, uri_len) == 0;
      } else {
        wanted = listener_wants(l, method);
      }
      if (wanted) listener_notify(c, method, params_json, len);
    }
  }
}

void server_broadcast(server *srv, const char *method, const char *params_json, size_t len) {
  for (session *s = srv->sessions; s; s = s->next)
    if (session_live(s)) session_notify(s, NULL, method, params_json, len);
  notify_listeners(srv, method, NULL, 0, params_json, len);
}

void server_resource_updated(server *srv, const char *uri, size_t len) {
  buf params = BUF_INIT;
  buf_puts(&params, "{\"uri\":");
  json_write_string(&params, uri, len);
  buf_putc(&params, '}');
  for (session *s = srv->sessions; s; s = s->next)
    if (session_live(s) && session_subscribed(s, uri, len))
      session_notify(s, NULL, "notifications/resources/updated", params.data, params.len);
  notify_listeners(srv, "notifications/resources/updated", uri, len, params.data, params.len);
  buf_free(&params);
}

void server_job_notify(server *srv, const char *id, const char *owner_principal, const char *params_json, size_t len) {
  const char *owner = owner_principal ? owner_principal : "";
  for (session *s = srv->sessions; s; s = s->next) {
    if (s->state == SESSION_CLOSED) continue;
    for (call *c = s->calls; c; c = c->next) {
      listener *l = c->listener;
      if (!l || strcmp(auth_principal(c->identity), owner) != 0) continue;
      for (size_t i = 0; i < l->task_id_count; i++) {
        if (strcmp(l->task_ids[i], id) != 0) continue;
        listener_notify(c, "notifications/tasks", params_json, len);
        break;
      }
    }
  }
}

void server_job_changed(server *srv, const job *j) {
  buf params = BUF_INIT;
  job_write(&params, j, JOB_VIEW_NOTIFICATION);
  server_job_notify(srv, j->id, j->owner_principal, params.data, params.len);
  if (srv->job_changed) srv->job_changed(srv->job_changed_data, j->id, j->owner_principal, params.data, params.len);
  buf_free(&params);
}

/* A subscriptions/listen call is the client waiting to hear, not work
 * being done: a server that drains ends them first (call_ended closes
 * their streams cleanly). Cancelling one frees only that call, but start
 * over after each, as session_cancel_from does, in case it freed more. */
int server_end_listeners(server *srv) {
  int ended = 0;
  for (session *s = srv->sessions; s; s = s->next) {
    for (call *c = s->calls, *next; c; c = next) {
      next = c->next;
      if (!c->listener) continue;
      call_cancel(c);
      ended++;
      next = s->calls;
    }
  }
  return ended;
}

int server_calls_in_flight(const server *srv) {
  int n = 0;
  for (const session *s = srv->sessions; s; s = s->next)
    for (const call *c = s->calls; c; c = c->next) n++;
  return n;
}

void server_log(server *srv, int level, const char *logger, const char *data_json, size_t len) {
  for (session *s = srv->sessions; s; s = s->next)
    if (session_live(s)) session_log(s, NULL, level, logger, data_json, len);
}

/* ---- Observation (observe.h) -------------------------------------------- */

const char *call_target(const call *c) { return c->target; }
const char *call_session_name(const call *c) { return c->session->name; }
const char *call_protocol_version(const call *c) { return c->version ? c->version->name : NULL; }
const json_value *call_params(const call *c) { return c->observed_params; }

void call_set_outcome(call *c, call_outcome o) { c->outcome = (unsigned char)o; }
bool call_observed(const call *c) { return c->observed; }
void call_mark_target_known(call *c) { c->target_known = true; }
bool call_target_known(const call *c) { return c->target_known; }
bool call_method_known(const call *c) { return !c->method_unknown; }

/* The name a call is about: what metrics label it with and traces name
 * its span after; copied into c->target_small, cut at its size on a
 * UTF-8 character boundary (a client's name may be megabytes long). */
static char *target_of(call *c, const char *method, const json_value *params) {
  const char *key = NULL;
  if (!strcmp(method, "tools/call") || !strcmp(method, "prompts/get")) key = "name";
  else if (!strcmp(method, "resources/read")) key = "uri";
  if (!key) return NULL;
  const json_value *v = json_object_get(params, key);
  if (!v || v->type != JSON_STRING) return NULL;
  size_t n = v->len;
  const char *nul = memchr(v->u.string, '\0', n);
  if (nul) n = (size_t)(nul - v->u.string);
  n = observe_utf8_cut(v->u.string, n, OBSERVE_TARGET_MAX_BYTES);
  memcpy(c->target_small, v->u.string, n);
  c->target_small[n] = '\0';
  return c->target_small;
}

void observe_call_started(call *c, const json_value *params) {
  server *srv = c->session->server;
  c->observed = true;
  c->target = target_of(c, c->method, params);
  c->started_ns = clock_monotonic_ns();
  c->observed_params = params;
  for (int i = 0; i < srv->observer_count; i++)
    if (srv->observers[i].ops->started) srv->observers[i].ops->started(srv->observers[i].data, c);
  c->observed_params = NULL;
}

void observe_call_finished(call *c) {
  server *srv = c->session->server;
  uint64_t took = clock_monotonic_ns() - c->started_ns;
  for (int i = 0; i < srv->observer_count; i++)
    if (srv->observers[i].ops->finished)
      srv->observers[i].ops->finished(srv->observers[i].data, c, (call_outcome)c->outcome, took);
}

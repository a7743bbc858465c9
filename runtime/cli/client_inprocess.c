/*
 * client_inprocess.c - a server loaded in this process from a folder, as
 * `luamcp run` loads it, spoken to through a loopback session: every
 * message goes through the real protocol core (versions, validation,
 * sessions) and the real app (generations, tasks on the loop), with no
 * pipe and no child. Used by mcp.testing and by `luamcp call PATH`.
 *
 * The client pumps the loop (uv_run, one turn at a time) from outside any
 * libuv callback, only while it waits for a message, so the server's tasks
 * run exactly as they do under `luamcp run`.
 */
#include <stdlib.h>
#include <string.h>

#include "app/reload.h"
#include "app/vm.h"
#include "cli/client_conn.h"
#include "cli/inspect.h"
#include "core/auth.h"
#include "core/jobs.h"
#include "core/json.h"
#include "core/luamcp_limits.h"
#include "core/server.h"
#include "core/session.h"

/* Owner: the client (client_conn's owner); the server, the app and the
 * session live and die with it. */
typedef struct inprocess_conn {
  client_conn base;
  server srv;
  lua_app app;
  session *session;
  loop_waiter waiter;
  int closing_handles; /* the waiter's, once closed: the struct goes after them */
  /* Who the message being received comes from (send_as), while
   * session_receive runs; the calls it starts keep their own reference. */
  auth_identity *identity;
} inprocess_conn;

/* transport_ops.send: the server's message goes to the client's inbox.
 * Never calls back into the server (the core is mid-answer). */
static void loopback_send(session *s, const session_message *m) {
  inprocess_conn *c = s->transport_data;
  client_conn_deliver(&c->base, m->json, m->len);
}

/* transport_ops.request_identity: what HTTP learns from a verified bearer
 * token, mcp.testing says with send_as. */
static auth_identity *loopback_identity(session *s, void *origin) {
  (void)origin;
  inprocess_conn *c = s->transport_data;
  return c->identity;
}

static const transport_ops LOOPBACK_OPS = {.send = loopback_send, .request_identity = loopback_identity};

/* The identity described by mcp.testing (client.lua's auth_json). */
static auth_identity *identity_from_json(const char *text, buf *err) {
  json_doc *doc = json_parse(text, strlen(text), MAX_JSON_DEPTH, NULL);
  const json_value *root = doc ? json_doc_root(doc) : NULL;
  const json_value *principal = json_object_get(root, "principal");
  if (!principal || principal->type != JSON_STRING || principal->len == 0) {
    json_doc_free(doc);
    buf_puts(err, "an identity needs a principal");
    return NULL;
  }
  const json_value *subject = json_object_get(root, "subject"), *client_id = json_object_get(root, "client_id");
  const json_value *scopes = json_object_get(root, "scopes"), *expires = json_object_get(root, "expires_at");
  const json_value *claims = json_object_get(root, "claims");
  char *p = strndup(principal->u.string, principal->len);
  char *sub = subject && subject->type == JSON_STRING ? strndup(subject->u.string, subject->len) : NULL;
  char *cid = client_id && client_id->type == JSON_STRING ? strndup(client_id->u.string, client_id->len) : NULL;
  char *sc = scopes && scopes->type == JSON_STRING ? strndup(scopes->u.string, scopes->len) : NULL;
  buf claims_json = BUF_INIT;
  if (claims && claims->type == JSON_OBJECT) json_write_value(&claims_json, claims);
  else buf_puts(&claims_json, "{}");
  int64_t exp = expires && expires->type == JSON_INTEGER ? (int64_t)expires->u.integer : 0;
  auth_identity *id = auth_identity_new(p, sub, cid, sc ? sc : "", exp, claims_json.data);
  free(p);
  free(sub);
  free(cid);
  free(sc);
  buf_free(&claims_json);
  json_doc_free(doc);
  if (!id) buf_puts(err, "out of memory");
  return id;
}

static bool inprocess_send(client_conn *base, const char *json, size_t len, buf *err) {
  inprocess_conn *c = (inprocess_conn *)base;
  (void)err;
  session_receive(c->session, json, len, NULL);
  return true;
}

static bool inprocess_send_as(client_conn *base, const char *json, size_t len, const char *identity_json, buf *err) {
  inprocess_conn *c = (inprocess_conn *)base;
  auth_identity *id = identity_from_json(identity_json, err);
  if (!id) return false;
  c->identity = id;
  session_receive(c->session, json, len, NULL);
  c->identity = NULL;
  auth_identity_unref(id);
  return true;
}

/* When nothing is alive on the loop (no task sleeping, no child, no
 * transfer), no answer can come. */
static bool inprocess_wait(client_conn *base, int timeout_ms) {
  inprocess_conn *c = (inprocess_conn *)base;
  return loop_waiter_turn(&c->waiter, timeout_ms) != 0 || base->inbox != NULL;
}

static bool inprocess_reload(client_conn *base, buf *err) {
  inprocess_conn *c = (inprocess_conn *)base;
  unsigned failed = c->app.failed_reloads;
  bool ok = app_reload(&c->app, "mcp.testing reload");
  if (!ok || c->app.failed_reloads != failed)
    buf_puts(err, "the reload failed (the previous version keeps serving; its error is on stderr)");
  return ok;
}

static bool inprocess_inspect(client_conn *base, bool as_json, buf *out, buf *err) {
  inprocess_conn *c = (inprocess_conn *)base;
  return inspect_generation(c->app.current, as_json, out, err);
}

static void on_waiter_closed(uv_handle_t *h) {
  inprocess_conn *c = h->data;
  c->closing_handles--;
}

static void inprocess_close(client_conn *base) {
  inprocess_conn *c = (inprocess_conn *)base;
  session_free(c->session);
  app_stop(&c->app);
  jobs_release(&c->srv);
  /* app_stop closed the app's handles (which live in this struct) with no
   * callback, and libuv finishes closes in no promised order: the struct
   * is freed only after the turn that finished all of them, which is the
   * turn that ran the waiter's callbacks (every handle closed before a
   * turn is finished in that turn). */
  c->closing_handles = 2;
  loop_waiter_close(&c->waiter, on_waiter_closed);
  while (c->closing_handles > 0) uv_run(base->loop, UV_RUN_NOWAIT);
  client_conn_release(&c->base);
  free(c);
}

static const client_conn_ops INPROCESS_OPS = {
    .send = inprocess_send,
    .send_as = inprocess_send_as,
    .wait = inprocess_wait,
    .reload = inprocess_reload,
    .inspect = inprocess_inspect,
    .close = inprocess_close,
};

client_conn *client_inprocess_open(uv_loop_t *loop, const char *path, const inprocess_options *o, buf *err) {
  inprocess_conn *c = calloc(1, sizeof *c);
  c->base.ops = &INPROCESS_OPS;
  c->base.loop = loop;
  server_options opts;
  server_options_defaults(&opts);
  if (o->call_timeout_ms) opts.call_timeout_ms = o->call_timeout_ms;
  if (o->client_timeout_ms) opts.client_timeout_ms = o->client_timeout_ms;
  if (o->page_size) opts.page_size = o->page_size;
  if (o->memory_limit) opts.memory_limit = o->memory_limit;
  server_init(&c->srv, &opts, &VM_APP_OPS, &c->app);
  if (!app_start(&c->app, &c->srv, loop, path, NULL, false, err)) {
    jobs_release(&c->srv);
    free(c);
    return NULL;
  }
  c->session = session_new(&c->srv, &LOOPBACK_OPS, c, "in-process");
  loop_waiter_init(&c->waiter, loop, c);
  return &c->base;
}

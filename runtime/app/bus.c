/*
 * bus.c - the bus between the processes that serve as one server: the
 * messages, the tasks/ requests waiting for their job's process, and what
 * a message from another process does here. bus.h says what travels; the
 * transports are redis.c (pub/sub) and the workers' IPC pipe (wired by
 * cli/main.c).
 */
#include "app/bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/jobs.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/auth.h"
#include "core/luamcp_limits.h"
#include "os/crypto.h"

/* mcp.everywhere calls of the other processes, waiting until no Lua runs
 * here. Owner: the bus; freed by its idle handle's close (bus_free). */
typedef struct everywhere_queue {
  server *srv;
  bus_everywhere_fn run;
  void *arg;
  uv_idle_t idle; /* runs them on the next turn with no Lua running */
  buf *messages;  /* each one whole message's text, in arrival order */
  size_t count, cap;
} everywhere_queue;

/* Owner: main (bus_new .. bus_free). */
struct bus {
  uv_loop_t *loop;
  server *srv;
  char node[33];                /* this process: 128 random bits in hex */
  bool has_transport;
  bus_transport transport;
  struct job_forward *forwards; /* tasks/ requests waiting for their job's process */
  long long next_seq;
  everywhere_queue *everywhere; /* NULL until bus_on_everywhere */
  bus_holds_fn holds;           /* NULL until bus_on_foreign */
  bus_list_fn list;
  void *foreign_arg;
  /* Other processes' requests about agent tasks this process holds, each
   * a call on this session, whose answers go back to the asker. */
  session *session;
  struct bus_asker *askers;
  uv_timer_t *alive;            /* tells each asker that its call still runs here */
  struct bus_gather *gathers;   /* ListTasks waiting for the others' shares */
};

/* Another process's request running here (on bus.session) for a task this
 * process holds: each of its answers, partial ones too, goes back to the
 * asking node. Owner: the bus's list; freed when its call ends. */
typedef struct bus_asker {
  bus *bus;
  char node[33];
  long long seq;                /* the asker's forward */
  auth_identity *identity;      /* the asker's principal, as the call's caller */
  bool answered;                /* its final answer went */
  int silent;                   /* task_alive ticks the asker left unanswered (task_following) */
  struct bus_asker *next;
} bus_asker;

/* A ListTasks waiting for the other processes' shares. Owner: the bus's
 * list; unlinked when all came, the wait timed out or the task went
 * (bus_gather_cancel), freed when its timer has closed. */
typedef struct bus_gather {
  bus *bus;
  long long seq;
  int expected, got;            /* replies; expected -1 until the transport says how many heard */
  buf shares;                   /* the replies' lists, each preceded by a comma */
  bus_gather_fn done;
  void *data;
  uv_timer_t timer;
  struct bus_gather *next;
} bus_gather;

/* A tasks/ request for a job another process may hold, waiting for the
 * owner's reply. Owner: the bus's list; unlinked when the reply comes, the
 * wait times out, or the call is cancelled, and freed when its timer has
 * closed (which needs nothing of the bus). */
typedef struct job_forward {
  bus *bus;
  call *call; /* NULL once answered or cancelled */
  long long seq;
  /* A foreign request some process said it holds (its node): from then on
   * the call waits as long as the holder says, every
   * BUS_FOLLOW_ALIVE_MS, that it still runs there (a stream's events may
   * be far apart), and its answers, partial ones too, come from there. */
  bool held;
  char holder[33];
  int not_found_code;            /* a foreign call's answer when nobody holds it (0: a job's) */
  const char *not_found_message;
  uv_timer_t timer;
  struct job_forward *next;
} job_forward;

/* The notifications the bus carries: a message is no way to make every
 * client of every process receive anything at all. */
static const char *const LIST_CHANGED[] = {"notifications/tools/list_changed", "notifications/resources/list_changed",
                                           "notifications/prompts/list_changed"};

static bool text_is(const json_value *v, const char *text) {
  return v && v->type == JSON_STRING && v->len == strlen(text) && memcmp(v->u.string, text, v->len) == 0;
}

void bus_random_hex(char *out, size_t bytes) {
  unsigned char raw[64];
  if (bytes > sizeof raw) bytes = sizeof raw;
  if (!os_random_bytes(raw, bytes)) {
    uint64_t seed = uv_hrtime() ^ (uint64_t)(uintptr_t)out;
    for (size_t i = 0; i < bytes; i++) raw[i] = (unsigned char)((seed = seed * 6364136223846793005u + 1) >> 56);
  }
  for (size_t i = 0; i < bytes; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static void start_message(bus *b, buf *m, const char *kind) {
  buf_printf(m, "{\"node\":\"%s\",\"kind\":\"%s\"", b->node, kind);
}

/* Send m (a whole message); false with *why when it cannot leave now. */
static bool publish(bus *b, const buf *m, const char **why) {
  const char *reason = "nothing carries it";
  if (b && b->has_transport && b->transport.send(b->transport.arg, m->data, m->len, &reason)) return true;
  if (b && b->has_transport)
    log_write(LOG_DEBUG, "bus: message not sent (%s: %s): %.*s", b->transport.name, reason, (int)m->len, m->data);
  if (why) *why = reason;
  return false;
}

/* ---- Tasks held by another process ------------------------------------- */

static void on_forward_closed(uv_handle_t *h) { free(h->data); }

static void forward_end(job_forward *f) {
  bus *b = f->bus;
  for (job_forward **p = &b->forwards; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      break;
    }
  f->call = NULL;
  uv_close((uv_handle_t *)&f->timer, on_forward_closed);
}

/* A message about our request seq to the process running it (node). */
static void tell_holder(bus *b, const char *kind, const char *node, size_t node_len, long long seq) {
  buf m = BUF_INIT;
  start_message(b, &m, kind);
  buf_puts(&m, ",\"to\":");
  json_write_string(&m, node, node_len);
  buf_printf(&m, ",\"seq\":%lld}", seq);
  publish(b, &m, NULL);
  buf_free(&m);
}

/* A held foreign request ends here (its call was cancelled, or its holder
 * fell silent): the holder stops running it, if it still can hear. */
static void unfollow(job_forward *f) {
  if (f->held) tell_holder(f->bus, "task_unfollow", f->holder, strlen(f->holder), f->seq);
}

/* Nobody answered: no process holds the job. The same answer as when
 * this process alone is asked (jobs_handle). */
static void on_forward_timeout(uv_timer_t *t) {
  job_forward *f = t->data;
  call *c = f->call;
  int code = f->not_found_code;
  const char *message = f->not_found_message;
  bool held = f->held;
  unfollow(f);
  forward_end(f);
  if (c && held)
    call_fail(c, JSONRPC_INTERNAL_ERROR, "Internal error: the process that holds the task stopped answering", NULL, 0);
  else if (c && code) call_fail(c, code, message, NULL, 0);
  else if (c) call_fail(c, JSONRPC_INVALID_PARAMS, "Invalid params: no such task (unknown, or expired and discarded)", NULL, 0);
}

void bus_forward_job(bus *b, call *c, const json_value *params) {
  if (!b || !b->has_transport) {
    call_fail(c, JSONRPC_INVALID_PARAMS, "Invalid params: no such task (unknown, or expired and discarded)", NULL, 0);
    return;
  }
  long long seq = ++b->next_seq;
  buf m = BUF_INIT;
  start_message(b, &m, "task_request");
  buf_printf(&m, ",\"seq\":%lld,\"method\":", seq);
  json_write_string(&m, c->method, strlen(c->method));
  buf_puts(&m, ",\"params\":");
  json_write_value(&m, params);
  /* Who asks: the job's process answers only its owner (jobs_handle). */
  buf_puts(&m, ",\"principal\":");
  const char *principal = auth_principal(c->identity);
  json_write_string(&m, principal, strlen(principal));
  buf_putc(&m, '}');
  const char *why = NULL;
  bool sent = publish(b, &m, &why);
  buf_free(&m);
  if (!sent) {
    char message[240];
    snprintf(message, sizeof message, "%s unavailable: %s (the task may belong to another process)",
             b->transport.name, why);
    call_fail(c, JSONRPC_INTERNAL_ERROR, message, NULL, 0);
    return;
  }
  job_forward *f = calloc(1, sizeof *f);
  f->bus = b;
  f->call = c;
  f->seq = seq;
  uv_timer_init(b->loop, &f->timer);
  f->timer.data = f;
  uv_timer_start(&f->timer, on_forward_timeout, BUS_FORWARD_TIMEOUT_MS, 0);
  f->next = b->forwards;
  b->forwards = f;
}

void bus_forward_foreign(bus *b, call *c, const char *params_json, size_t len, int not_found_code,
                         const char *not_found_message) {
  if (!b || !b->has_transport) {
    call_fail(c, not_found_code, not_found_message, NULL, 0);
    return;
  }
  long long seq = ++b->next_seq;
  buf m = BUF_INIT;
  start_message(b, &m, "task_request");
  buf_printf(&m, ",\"foreign\":true,\"seq\":%lld,\"method\":", seq);
  json_write_string(&m, c->method, strlen(c->method));
  buf_puts(&m, ",\"params\":");
  buf_append(&m, params_json, len);
  buf_puts(&m, ",\"principal\":");
  const char *principal = auth_principal(c->identity);
  json_write_string(&m, principal, strlen(principal));
  buf_putc(&m, '}');
  const char *why = NULL;
  bool sent = publish(b, &m, &why);
  buf_free(&m);
  if (!sent) {
    char message[240];
    snprintf(message, sizeof message, "%s unavailable: %s (the task may belong to another process)",
             b->transport.name, why);
    call_fail(c, JSONRPC_INTERNAL_ERROR, message, NULL, 0);
    return;
  }
  job_forward *f = calloc(1, sizeof *f);
  f->bus = b;
  f->call = c;
  f->seq = seq;
  f->not_found_code = not_found_code;
  f->not_found_message = not_found_message;
  uv_timer_init(b->loop, &f->timer);
  f->timer.data = f;
  uv_timer_start(&f->timer, on_forward_timeout, BUS_FORWARD_TIMEOUT_MS, 0);
  f->next = b->forwards;
  b->forwards = f;
}

void bus_on_foreign(bus *b, bus_holds_fn holds, bus_list_fn list, void *arg) {
  if (!b) return;
  b->holds = holds;
  b->list = list;
  b->foreign_arg = arg;
}

/* ---- Foreign requests run here for another process --------------------- */

static void asker_reply(bus_asker *a, const char *kind, const char *members) {
  buf m = BUF_INIT;
  start_message(a->bus, &m, kind);
  buf_puts(&m, ",\"to\":");
  json_write_string(&m, a->node, strlen(a->node));
  buf_printf(&m, ",\"seq\":%lld", a->seq);
  buf_append_str(&m, members);
  buf_putc(&m, '}');
  publish(a->bus, &m, NULL);
  buf_free(&m);
}

/* transport_ops.send of the bus's session: a response of an asker's call
 * goes back to it, a partial one marked so (the asker's call goes on). */
static void bus_session_send(session *s, const session_message *m) {
  (void)s;
  bus_asker *a = m->origin;
  if (!a || !m->json) return;
  json_doc *doc = json_parse(m->json, m->len, MAX_JSON_DEPTH, NULL);
  const json_value *root = doc ? json_doc_root(doc) : NULL;
  const json_value *result = json_object_get(root, "result");
  const json_value *error = json_object_get(root, "error");
  if (result || error) {
    buf members = BUF_INIT;
    if (!m->final) buf_puts(&members, ",\"partial\":true");
    buf_append_str(&members, result ? ",\"result\":" : ",\"error\":");
    json_write_value(&members, result ? result : error);
    asker_reply(a, "task_reply", members.data);
    buf_free(&members);
    if (m->final) a->answered = true;
  }
  if (doc) json_doc_free(doc);
}

static void bus_session_call_ended(session *s, call *c) {
  bus *b = s->transport_data;
  bus_asker *a = c->transport_data;
  for (bus_asker **p = &b->askers; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      /* Cancelled here (this process stops): the asker's call ends now,
       * not when it stops hearing from us. */
      if (!a->answered)
        asker_reply(a, "task_reply", ",\"error\":{\"code\":-32603,\"message\":\"Internal error: the process that "
                                     "holds the task stopped the request\"}");
      auth_identity_unref(a->identity);
      free(a);
      return;
    }
}

static auth_identity *bus_session_identity(session *s, void *origin) {
  (void)s;
  return origin ? ((bus_asker *)origin)->identity : NULL;
}

static const transport_ops BUS_SESSION_OPS = {
    .send = bus_session_send,
    .call_ended = bus_session_call_ended,
    .request_identity = bus_session_identity,
};

/* Every BUS_FOLLOW_ALIVE_MS: each asker hears that its call still runs,
 * and answers that it still follows it (task_following). An asker silent
 * for BUS_FOLLOW_SILENCE_MS (its process died, or its task_unfollow was
 * lost) is taken as gone: its request stops here, instead of running, a
 * stream perhaps for ever, for nobody. */
static void on_alive(uv_timer_t *t) {
  bus *b = t->data;
  const int most = BUS_FOLLOW_SILENCE_MS / BUS_FOLLOW_ALIVE_MS;
  for (bus_asker *a = b->askers; a; a = a->next)
    if (++a->silent <= most) asker_reply(a, "task_alive", "");
  for (bool again = b->session != NULL; again;) {
    again = false;
    for (bus_asker *a = b->askers; a; a = a->next)
      if (a->silent > most) {
        log_write(LOG_DEBUG, "bus: %s stopped following its request %lld: it stops here", a->node, a->seq);
        session_cancel_from(b->session, a); /* frees a (bus_session_call_ended): the list changed */
        again = true;
        break;
      }
  }
}

/* The asker still follows its request (it heard task_alive). */
static void take_following(bus *b, const json_value *root, const json_value *sender) {
  const json_value *to = json_object_get(root, "to");
  const json_value *seq = json_object_get(root, "seq");
  if (!text_is(to, b->node) || !seq || seq->type != JSON_INTEGER) return;
  for (bus_asker *a = b->askers; a; a = a->next)
    if (a->seq == seq->u.integer && text_is(sender, a->node)) a->silent = 0;
}

/* Another process asks about a foreign task (A2A): if a generation here
 * holds it, the request runs here as a call of the bus's session, as it
 * would have in the asker's process, a stream too. */
static void answer_foreign_request(bus *b, const json_value *root, const json_value *sender) {
  const json_value *method = json_object_get(root, "method");
  const json_value *params = json_object_get(root, "params");
  const json_value *seq = json_object_get(root, "seq");
  const json_value *who = json_object_get(root, "principal");
  if (!b->holds || !b->session || !method || method->type != JSON_STRING ||
      memchr(method->u.string, '\0', method->len) || !params || params->type != JSON_OBJECT || !seq ||
      seq->type != JSON_INTEGER || !who || who->type != JSON_STRING || memchr(who->u.string, '\0', who->len) ||
      sender->len >= sizeof ((bus_asker *)0)->node)
    return;
  buf request = BUF_INIT;
  buf_printf(&request, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":", (long long)seq->u.integer);
  json_write_string(&request, method->u.string, method->len);
  buf_puts(&request, ",\"params\":");
  size_t params_at = request.len;
  json_write_value(&request, params);
  size_t params_len = request.len - params_at;
  buf_putc(&request, '}');
  char *name = strndup(method->u.string, method->len), *principal = strndup(who->u.string, who->len);
  bool ours = b->holds(b->foreign_arg, name, request.data + params_at, params_len, principal);
  free(name);
  if (ours) {
    bus_asker *a = calloc(1, sizeof *a);
    a->bus = b;
    memcpy(a->node, sender->u.string, sender->len);
    a->seq = seq->u.integer;
    if (principal[0]) a->identity = auth_identity_new(principal, NULL, NULL, "", 0, NULL);
    a->next = b->askers;
    b->askers = a;
    asker_reply(a, "task_reply", ",\"held\":true"); /* before any answer: the asker now waits for this process */
    json_doc *doc = json_parse(request.data, request.len, MAX_JSON_DEPTH, NULL);
    jsonrpc_message m;
    if (doc) {
      jsonrpc_classify(json_doc_root(doc), request.data, &m);
      session_receive_foreign(b->session, &m, request.data, a);
      json_doc_free(doc);
    }
  }
  free(principal);
  buf_free(&request);
}

/* The asker's call ended (its stream closed): the request running here
 * for it stops. */
static void take_unfollow(bus *b, const json_value *root, const json_value *sender) {
  const json_value *to = json_object_get(root, "to");
  const json_value *seq = json_object_get(root, "seq");
  if (!text_is(to, b->node) || !seq || seq->type != JSON_INTEGER) return;
  for (bus_asker *a = b->askers; a; a = a->next)
    if (a->seq == seq->u.integer && text_is(sender, a->node)) {
      session_cancel_from(b->session, a);
      return;
    }
}

/* ---- ListTasks: every process's share ------------------------------------ */

static void on_gather_closed(uv_handle_t *h) {
  bus_gather *g = h->data;
  buf_free(&g->shares);
  free(g);
}

static void gather_end(bus_gather *g) {
  for (bus_gather **p = &g->bus->gathers; *p; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  uv_close((uv_handle_t *)&g->timer, on_gather_closed);
}

static void gather_finish(bus_gather *g) {
  bus_gather_fn done = g->done;
  void *data = g->data;
  buf all = BUF_INIT;
  buf_putc(&all, '[');
  if (g->shares.len) buf_append(&all, g->shares.data + 1, g->shares.len - 1);
  buf_putc(&all, ']');
  gather_end(g);
  done(data, all.data, all.len);
  buf_free(&all);
}

static void on_gather_timeout(uv_timer_t *t) {
  bus_gather *g = t->data;
  if (g->expected >= 0)
    log_write(LOG_DEBUG, "bus: ListTasks: %d of %d other processes answered within %d ms", g->got, g->expected,
              BUS_FORWARD_TIMEOUT_MS);
  else
    log_write(LOG_DEBUG, "bus: ListTasks: %d other processes answered within %d ms (how many heard it is not known)",
              g->got, BUS_FORWARD_TIMEOUT_MS);
  gather_finish(g);
}

/* Which gather a counted send's reply is for. Owner: the transport, until
 * on_gather_heard (freed there; the gather may be gone by then). */
typedef struct gather_heard {
  bus *bus;
  long long seq;
} gather_heard;

/* The transport counted who heard a ListTasks question: every other one
 * answers (the replies may have come first). */
static void on_gather_heard(void *ctx, long long heard) {
  gather_heard *h = ctx;
  bus_gather *g = heard >= 1 ? h->bus->gathers : NULL;
  while (g && g->seq != h->seq) g = g->next;
  free(h);
  if (!g) return;
  g->expected = heard - 1 > INT32_MAX ? INT32_MAX : (int)(heard - 1);
  if (g->got >= g->expected) gather_finish(g);
}

bus_gather *bus_gather_tasks(bus *b, const char *params_json, size_t len, const char *principal, int first,
                             bus_gather_fn done, void *data) {
  if (!b || !b->has_transport) return NULL;
  long long seq = ++b->next_seq;
  buf m = BUF_INIT;
  start_message(b, &m, "task_list");
  buf_printf(&m, ",\"seq\":%lld,\"first\":%d,\"params\":", seq, first);
  buf_append(&m, params_json, len);
  buf_puts(&m, ",\"principal\":");
  json_write_string(&m, principal, strlen(principal));
  buf_putc(&m, '}');
  /* --workers N: the N - 1 others answer, so the list is answered when the
   * last has; over Redis PUBLISH's reply says how many heard the question. */
  bool counted = b->has_transport && b->transport.peers <= 0 && b->transport.send_counted;
  bool sent;
  if (counted) {
    gather_heard *h = malloc(sizeof *h);
    h->bus = b;
    h->seq = seq;
    const char *why = "nothing carries it";
    sent = b->transport.send_counted(b->transport.arg, m.data, m.len, &why, on_gather_heard, h);
    if (!sent) {
      free(h);
      log_write(LOG_DEBUG, "bus: message not sent (%s: %s): %.*s", b->transport.name, why, (int)m.len, m.data);
    }
  } else {
    sent = publish(b, &m, NULL);
  }
  buf_free(&m);
  if (!sent) return NULL; /* the others cannot be asked now: this process's share is the list */
  bus_gather *g = calloc(1, sizeof *g);
  g->bus = b;
  g->seq = seq;
  g->expected = b->transport.peers > 0 ? b->transport.peers : -1;
  g->done = done;
  g->data = data;
  uv_timer_init(b->loop, &g->timer);
  g->timer.data = g;
  uv_timer_start(&g->timer, on_gather_timeout, BUS_FORWARD_TIMEOUT_MS, 0);
  g->next = b->gathers;
  b->gathers = g;
  return g;
}

void bus_gather_cancel(bus_gather *g) {
  if (g) gather_end(g);
}

void bus_local_lists(bus *b, const char *params_json, size_t len, const char *principal, int first, buf *out) {
  if (b && b->list) b->list(b->foreign_arg, params_json, len, principal, first, out);
}

/* Another process lists its caller's tasks: this process's share. */
static void answer_list(bus *b, const json_value *root, const json_value *sender) {
  const json_value *params = json_object_get(root, "params");
  const json_value *seq = json_object_get(root, "seq");
  const json_value *first = json_object_get(root, "first");
  const json_value *who = json_object_get(root, "principal");
  if (!b->list || !params || params->type != JSON_OBJECT || !seq || seq->type != JSON_INTEGER || !first ||
      first->type != JSON_INTEGER || first->u.integer < 0 || first->u.integer > INT32_MAX || !who ||
      who->type != JSON_STRING || memchr(who->u.string, '\0', who->len))
    return;
  buf text = BUF_INIT, shares = BUF_INIT;
  json_write_value(&text, params);
  char *principal = strndup(who->u.string, who->len);
  b->list(b->foreign_arg, text.data, text.len, principal, (int)first->u.integer, &shares);
  free(principal);
  buf m = BUF_INIT;
  start_message(b, &m, "task_list_reply");
  buf_puts(&m, ",\"to\":");
  json_write_string(&m, sender->u.string, sender->len);
  buf_printf(&m, ",\"seq\":%lld,\"lists\":[", (long long)seq->u.integer);
  if (shares.len) buf_append(&m, shares.data + 1, shares.len - 1);
  buf_puts(&m, "]}");
  publish(b, &m, NULL);
  buf_free(&m);
  buf_free(&text);
  buf_free(&shares);
}

static void take_list_reply(bus *b, const json_value *root) {
  const json_value *to = json_object_get(root, "to");
  const json_value *seq = json_object_get(root, "seq");
  const json_value *lists = json_object_get(root, "lists");
  if (!text_is(to, b->node) || !seq || seq->type != JSON_INTEGER || !lists || lists->type != JSON_ARRAY) return;
  bus_gather *g = b->gathers;
  while (g && g->seq != seq->u.integer) g = g->next;
  if (!g) return;
  for (uint32_t i = 0; i < lists->len; i++) {
    buf_putc(&g->shares, ',');
    json_write_value(&g->shares, &lists->u.items[i]);
  }
  if (++g->got >= g->expected && g->expected >= 0) gather_finish(g);
}

bool bus_forward_cancel(bus *b, call *c) {
  if (!b) return false;
  for (job_forward *f = b->forwards; f; f = f->next)
    if (f->call == c) {
      unfollow(f);
      forward_end(f);
      return true;
    }
  return false;
}

bool bus_owns_session(const bus *b, const session *s) { return b && s && b->session == s; }

/* Another process asks about a job: answer if it is ours. */
static void answer_task_request(bus *b, const json_value *root, const json_value *sender) {
  const json_value *foreign = json_object_get(root, "foreign");
  if (foreign && foreign->type == JSON_TRUE) {
    answer_foreign_request(b, root, sender);
    return;
  }
  const json_value *method = json_object_get(root, "method");
  const json_value *params = json_object_get(root, "params");
  const json_value *seq = json_object_get(root, "seq");
  const json_value *id = json_object_get(params, "taskId");
  const json_value *who = json_object_get(root, "principal");
  /* Another principal's job is not ours to speak of: silence, as for a
   * job we do not hold (the asker times out into "no such task"). */
  if (!(text_is(method, "tasks/get") || text_is(method, "tasks/update") || text_is(method, "tasks/cancel")) ||
      !seq || seq->type != JSON_INTEGER || !id || id->type != JSON_STRING || !who || who->type != JSON_STRING ||
      memchr(who->u.string, '\0', who->len))
    return;
  char *principal = strndup(who->u.string, who->len);
  bool ours = job_find_for(b->srv, id->u.string, id->len, principal) != NULL;
  if (!ours) {
    free(principal);
    return;
  }
  char name[16];
  snprintf(name, sizeof name, "%.*s", (int)method->len, method->u.string);
  buf out = BUF_INIT;
  job *changed = NULL;
  const char *message = NULL;
  int code = jobs_handle(b->srv, name, params, principal, &out, &changed, &message);
  free(principal);
  buf m = BUF_INIT;
  start_message(b, &m, "task_reply");
  buf_puts(&m, ",\"to\":");
  json_write_string(&m, sender->u.string, sender->len);
  buf_printf(&m, ",\"seq\":%lld,", (long long)seq->u.integer);
  if (code) {
    buf_printf(&m, "\"error\":{\"code\":%d,\"message\":", code);
    json_write_string(&m, message, strlen(message));
    buf_puts(&m, "}}");
  } else {
    buf_puts(&m, "\"result\":");
    buf_append(&m, out.data, out.len);
    buf_putc(&m, '}');
  }
  publish(b, &m, NULL);
  buf_free(&m);
  buf_free(&out);
  if (changed) server_job_changed(b->srv, changed);
}

/* The owner answered one of our forwarded requests: a foreign request's
 * holder first says it holds the task, then answers, perhaps many times
 * (a stream), and says it is alive between. */
static void take_task_reply(bus *b, const json_value *root, const json_value *sender) {
  const json_value *to = json_object_get(root, "to");
  const json_value *seq = json_object_get(root, "seq");
  if (!text_is(to, b->node) || !seq || seq->type != JSON_INTEGER) return;
  job_forward *f = b->forwards;
  while (f && f->seq != seq->u.integer) f = f->next;
  const json_value *kind = json_object_get(root, "kind");
  if ((!f || !f->call) && text_is(kind, "task_alive")) {
    /* A request that ended here still runs there (its task_unfollow was
     * lost): it stops. */
    tell_holder(b, "task_unfollow", sender->u.string, sender->len, seq->u.integer);
    return;
  }
  if (!f || !f->call) return;
  if (f->held && !text_is(sender, f->holder)) return;
  const json_value *held = json_object_get(root, "held");
  if (!f->held && held && held->type == JSON_TRUE && sender->len < sizeof f->holder) {
    f->held = true;
    memcpy(f->holder, sender->u.string, sender->len);
  }
  if ((held && held->type == JSON_TRUE) || text_is(kind, "task_alive")) {
    if (f->held) {
      uv_timer_start(&f->timer, on_forward_timeout, BUS_FOLLOW_SILENCE_MS, 0);
      /* The holder hears that this process still follows the request. */
      if (text_is(kind, "task_alive")) tell_holder(b, "task_following", f->holder, strlen(f->holder), f->seq);
    }
    return;
  }
  call *c = f->call;
  const json_value *result = json_object_get(root, "result");
  const json_value *error = json_object_get(root, "error");
  const json_value *partial = json_object_get(root, "partial");
  if (partial && partial->type == JSON_TRUE) {
    if (result && c->session->foreign) {
      buf text = BUF_INIT;
      json_write_value(&text, result);
      call_respond_partial(c, text.data, text.len);
      buf_free(&text);
    }
    /* Writing it may have ended the call (its client went): f is then
     * ended too (bus_forward_cancel), its timer closing. */
    if (f->call == c && f->held) uv_timer_start(&f->timer, on_forward_timeout, BUS_FOLLOW_SILENCE_MS, 0);
    return;
  }
  forward_end(f);
  if (result && (result->type == JSON_OBJECT || c->session->foreign)) {
    buf text = BUF_INIT;
    json_write_value(&text, result);
    call_respond(c, text.data, text.len);
    buf_free(&text);
    return;
  }
  const json_value *code = json_object_get(error, "code");
  const json_value *message = json_object_get(error, "message");
  const json_value *data = json_object_get(error, "data");
  char text[400];
  snprintf(text, sizeof text, "%.*s", message && message->type == JSON_STRING ? (int)message->len : 5,
           message && message->type == JSON_STRING ? message->u.string : "error");
  buf data_text = BUF_INIT;
  if (data) json_write_value(&data_text, data);
  call_fail(c, code && code->type == JSON_INTEGER ? (int)code->u.integer : JSONRPC_INTERNAL_ERROR, text,
            data ? data_text.data : NULL, data_text.len);
  buf_free(&data_text);
}

/* srv->job_changed: tell the others of a change to one of our jobs. */
static void publish_job_changed(void *data, const char *id, const char *owner_principal, const char *params_json,
                                size_t len) {
  bus *b = data;
  buf m = BUF_INIT;
  start_message(b, &m, "job_changed");
  buf_puts(&m, ",\"id\":");
  json_write_string(&m, id, strlen(id));
  if (owner_principal) {
    /* Only its owner's listeners hear of it, in every process. */
    buf_puts(&m, ",\"owner\":");
    json_write_string(&m, owner_principal, strlen(owner_principal));
  }
  buf_puts(&m, ",\"params\":");
  buf_append(&m, params_json, len);
  buf_putc(&m, '}');
  publish(b, &m, NULL);
  buf_free(&m);
}

/* ---- The bus ------------------------------------------------------------ */

bus *bus_new(uv_loop_t *loop, server *srv) {
  bus *b = calloc(1, sizeof *b);
  b->loop = loop;
  b->srv = srv;
  bus_random_hex(b->node, 16);
  b->session = session_new(srv, &BUS_SESSION_OPS, b, "bus");
  b->session->sessionless = true; /* many askers: a request id is unique only with its asker */
  b->session->foreign = true;
  b->alive = calloc(1, sizeof *b->alive);
  uv_timer_init(loop, b->alive);
  b->alive->data = b;
  uv_timer_start(b->alive, on_alive, BUS_FOLLOW_ALIVE_MS, BUS_FOLLOW_ALIVE_MS);
  uv_unref((uv_handle_t *)b->alive); /* nothing to keep the loop running for */
  return b;
}

void bus_set_transport(bus *b, const bus_transport *t) {
  b->has_transport = t != NULL;
  if (t) b->transport = *t;
  b->srv->jobs_elsewhere = t != NULL;
  b->srv->job_changed = t ? publish_job_changed : NULL;
  b->srv->job_changed_data = t ? b : NULL;
}

bool bus_is_shared(const bus *b) { return b && b->has_transport; }

/* ---- mcp.everywhere ------------------------------------------------------ */

static void on_everywhere_closed(uv_handle_t *h) {
  everywhere_queue *q = h->data;
  for (size_t i = 0; i < q->count; i++) buf_free(&q->messages[i]);
  free(q->messages);
  free(q);
}

/* Each message in order, once no Lua runs: a computing handler's turn, or
 * a task's callback, must not be entered. */
static void on_everywhere_idle(uv_idle_t *h) {
  everywhere_queue *q = h->data;
  size_t done = 0;
  while (done < q->count && q->srv->nested_poll == 0) {
    buf *m = &q->messages[done];
    json_error err;
    json_doc *doc = json_parse(m->data, m->len, MAX_JSON_DEPTH, &err);
    const json_value *root = doc ? json_doc_root(doc) : NULL;
    const json_value *name = root ? json_object_get(root, "name") : NULL;
    const json_value *args = root ? json_object_get(root, "args") : NULL;
    bool ran = true;
    if (name && name->type == JSON_STRING && args && args->type == JSON_ARRAY) {
      buf a = BUF_INIT;
      json_write_value(&a, args);
      ran = q->run(q->arg, name->u.string, name->len, a.data, a.len);
      buf_free(&a);
    }
    if (doc) json_doc_free(doc);
    if (!ran) break;
    buf_free(m);
    done++;
  }
  memmove(q->messages, q->messages + done, (q->count - done) * sizeof *q->messages);
  q->count -= done;
  if (!q->count) uv_idle_stop(h);
}

void bus_on_everywhere(bus *b, bus_everywhere_fn fn, void *arg) {
  everywhere_queue *q = calloc(1, sizeof *q);
  if (!q) return;
  q->srv = b->srv;
  q->run = fn;
  q->arg = arg;
  uv_idle_init(b->loop, &q->idle);
  q->idle.data = q;
  b->everywhere = q;
}

static void queue_everywhere(bus *b, const char *text, size_t len) {
  everywhere_queue *q = b->everywhere;
  if (!q) return;
  if (q->count == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 4;
    buf *grown = realloc(q->messages, cap * sizeof *grown);
    if (!grown) return;
    q->messages = grown;
    q->cap = cap;
  }
  q->messages[q->count] = (buf)BUF_INIT;
  buf_append(&q->messages[q->count++], text, len);
  uv_idle_start(&q->idle, on_everywhere_idle);
}

void bus_everywhere(bus *b, const char *name, size_t name_len, const char *args, size_t args_len) {
  if (!b || !b->has_transport) return;
  buf m = BUF_INIT;
  start_message(b, &m, "everywhere");
  buf_puts(&m, ",\"name\":");
  json_write_string(&m, name, name_len);
  buf_puts(&m, ",\"args\":");
  buf_append(&m, args, args_len);
  buf_putc(&m, '}');
  publish(b, &m, NULL);
  buf_free(&m);
}

static void on_alive_closed(uv_handle_t *h) { free(h); }

void bus_stop_requests(bus *b) {
  if (!b || !b->session) return;
  session_free(b->session); /* cancels the askers' calls (their generations still run) */
  b->session = NULL;
}

void bus_free(bus *b) {
  if (!b) return;
  bus_stop_requests(b);
  uv_close((uv_handle_t *)b->alive, on_alive_closed);
  while (b->gathers) {
    /* Their tasks were stopped with their generations. */
    gather_end(b->gathers);
  }
  if (b->everywhere) uv_close((uv_handle_t *)&b->everywhere->idle, on_everywhere_closed);
  bus_set_transport(b, NULL);
  while (b->forwards) {
    /* Their calls were cancelled with their sessions; any left go now. */
    job_forward *f = b->forwards;
    call *c = f->call;
    forward_end(f);
    if (c) call_fail(c, JSONRPC_INTERNAL_ERROR, "the server is stopping", NULL, 0);
  }
  free(b);
}

void bus_receive(bus *b, const char *text, size_t len) {
  json_error err;
  json_doc *doc = json_parse(text, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    log_write(LOG_WARNING, "bus: a message that is not JSON was ignored: %s", err.message);
    return;
  }
  const json_value *root = json_doc_root(doc);
  const json_value *node = json_object_get(root, "node");
  const json_value *kind = json_object_get(root, "kind");
  if (!node || node->type != JSON_STRING || !kind || kind->type != JSON_STRING) goto done;
  if (text_is(node, b->node)) goto done; /* our own */
  const json_value *uri = json_object_get(root, "uri");
  const json_value *method = json_object_get(root, "method");
  if (text_is(kind, "resource_updated") && uri && uri->type == JSON_STRING) {
    server_resource_updated(b->srv, uri->u.string, uri->len);
  } else if (text_is(kind, "broadcast")) {
    for (size_t i = 0; i < sizeof LIST_CHANGED / sizeof *LIST_CHANGED; i++)
      if (text_is(method, LIST_CHANGED[i])) server_broadcast(b->srv, LIST_CHANGED[i], NULL, 0);
  } else if (text_is(kind, "everywhere")) {
    queue_everywhere(b, text, len);
  } else if (text_is(kind, "task_request")) {
    answer_task_request(b, root, node);
  } else if (text_is(kind, "task_reply") || text_is(kind, "task_alive")) {
    take_task_reply(b, root, node);
  } else if (text_is(kind, "task_unfollow")) {
    take_unfollow(b, root, node);
  } else if (text_is(kind, "task_following")) {
    take_following(b, root, node);
  } else if (text_is(kind, "task_list")) {
    answer_list(b, root, node);
  } else if (text_is(kind, "task_list_reply")) {
    take_list_reply(b, root);
  } else if (text_is(kind, "job_changed")) {
    const json_value *id = json_object_get(root, "id");
    const json_value *params = json_object_get(root, "params");
    const json_value *owner = json_object_get(root, "owner");
    if (id && id->type == JSON_STRING && params && params->type == JSON_OBJECT &&
        (!owner || owner->type == JSON_STRING)) {
      char *key = strndup(id->u.string, id->len);
      char *owner_principal = owner ? strndup(owner->u.string, owner->len) : NULL;
      buf p = BUF_INIT;
      json_write_value(&p, params);
      server_job_notify(b->srv, key, owner_principal, p.data, p.len);
      buf_free(&p);
      free(key);
      free(owner_principal);
    }
  }
done:
  json_doc_free(doc);
}

void bus_resource_updated(bus *b, const char *uri, size_t len) {
  if (!b || !b->has_transport) return;
  buf m = BUF_INIT;
  start_message(b, &m, "resource_updated");
  buf_puts(&m, ",\"uri\":");
  json_write_string(&m, uri, len);
  buf_putc(&m, '}');
  publish(b, &m, NULL);
  buf_free(&m);
}

void bus_list_changed(bus *b, const char *method) {
  if (!b || !b->has_transport) return;
  bool carried = false;
  for (size_t i = 0; i < sizeof LIST_CHANGED / sizeof *LIST_CHANGED; i++)
    if (strcmp(method, LIST_CHANGED[i]) == 0) carried = true;
  if (!carried) return;
  buf m = BUF_INIT;
  start_message(b, &m, "broadcast");
  buf_puts(&m, ",\"method\":");
  json_write_string(&m, method, strlen(method));
  buf_putc(&m, '}');
  publish(b, &m, NULL);
  buf_free(&m);
}

/*
 * redis.c - the --redis link: two hiredis async connections on the loop,
 * reconnected with backoff, the bus across processes, and the shared
 * requestState key (redis.h says what each is for).
 */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "app/redis.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "core/session.h"
#include "core/state_token.h"
#include "os/sock_watch.h"

typedef enum conn_state { CONN_DOWN, CONN_CONNECTING, CONN_UP } conn_state;

/* One of the link's two connections. Owner: its link. ac belongs to
 * hiredis, which frees it after its connect callback reports a failure or
 * after its disconnect callback; we only forget it then. */
typedef struct redis_conn {
  redis_link *link;
  const char *name;       /* "command" or "bus", for the log */
  bool subscriber;        /* the bus: SUBSCRIBE once connected */
  redisAsyncContext *ac;  /* NULL while down */
  conn_state state;
  int backoff_ms;         /* the next retry's delay */
  bool ever_up;
  bool loss_logged;       /* one warning per outage, one notice when it ends */
  char why[160];          /* why it is down */
  uv_timer_t retry;       /* reconnect after backoff_ms */
  uv_timer_t connect_timeout;
} redis_conn;

/* Owner: main (redis_link_new .. redis_link_close); freed when its timers
 * have closed. */
struct redis_link {
  uv_loop_t *loop;
  server *srv;
  char *host;             /* or NULL for a Unix socket ... */
  char *unix_path;        /* ... at this path */
  int port;
  char *user, *password;  /* AUTH [user] password, when given */
  int db;
  char where[300];        /* host:port/db or the socket, for the log (never the password) */
  char channel[64];       /* luamcp:bus:DB */
  bus *bus;               /* what the bus connection hears goes there */
  bool share_state_key;
  bool state_key_agreed;
  char *state_secret;     /* the secret adopted from Redis */
  redis_conn cmd, sub;
  bool closing;
  int open_handles;
};

/* A command in flight: whom to tell. Owner: hiredis's callback list, freed
 * by on_reply, which hiredis calls exactly once (with NULL when the
 * connection goes first). */
typedef struct pending_cmd {
  redis_reply_fn fn;
  void *data;
  redis_conn *conn;
} pending_cmd;

static void conn_connect(redis_conn *c);
static void on_retry(uv_timer_t *t) { conn_connect(t->data); }

/* ---- The URL ------------------------------------------------------------ */

static char *dup_range(const char *s, size_t n) {
  char *d = malloc(n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static bool parse_db(const char *s, int *db) {
  char *end;
  long n = strtol(s, &end, 10);
  if (!*s || *end || n < 0 || n > INT_MAX) return false;
  *db = (int)n;
  return true;
}

static bool parse_url(redis_link *l, const char *url, char *err, size_t errlen) {
  if (strncmp(url, "unix://", 7) == 0) {
    const char *path = url + 7;
    const char *query = strchr(path, '?');
    size_t n = query ? (size_t)(query - path) : strlen(path);
    if (n == 0 || path[0] != '/') {
      snprintf(err, errlen, "--redis %s: a Unix socket needs an absolute path (unix:///run/redis.sock)", url);
      return false;
    }
    l->unix_path = dup_range(path, n);
    if (query && !(strncmp(query, "?db=", 4) == 0 && parse_db(query + 4, &l->db))) {
      snprintf(err, errlen, "--redis %s: the only option of a Unix socket is ?db=N", url);
      return false;
    }
    snprintf(l->where, sizeof l->where, "%s (db %d)", l->unix_path, l->db);
    return true;
  }
  if (strncmp(url, "redis://", 8) != 0) {
    snprintf(err, errlen, "--redis %s: expected redis://[:password@]host[:port][/db] or unix:///path", url);
    return false;
  }
  const char *p = url + 8;
  const char *at = strrchr(p, '@');
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (!colon) {
      snprintf(err, errlen, "--redis: the credentials must be [user]:password@");
      return false;
    }
    if (colon > p) l->user = dup_range(p, (size_t)(colon - p));
    l->password = dup_range(colon + 1, (size_t)(at - colon - 1));
    p = at + 1;
  }
  const char *slash = strchr(p, '/');
  size_t hostport = slash ? (size_t)(slash - p) : strlen(p);
  const char *colon = memchr(p, ':', hostport);
  size_t hostlen = colon ? (size_t)(colon - p) : hostport;
  l->port = 6379;
  if (colon) {
    char port[16];
    size_t n = hostport - hostlen - 1;
    if (n == 0 || n >= sizeof port) goto bad;
    memcpy(port, colon + 1, n);
    port[n] = '\0';
    char *end;
    long v = strtol(port, &end, 10);
    if (*end || v <= 0 || v > 65535) goto bad;
    l->port = (int)v;
  }
  if (hostlen == 0) goto bad;
  l->host = dup_range(p, hostlen);
  if (slash && slash[1] && !parse_db(slash + 1, &l->db)) goto bad;
  snprintf(l->where, sizeof l->where, "%s:%d/%d", l->host, l->port, l->db);
  return true;
bad:
  snprintf(err, errlen, "--redis %s: expected redis://[:password@]host[:port][/db] or unix:///path", url);
  return false;
}

/* ---- Connections ---------------------------------------------------------- */

/* Down: say so once per outage, and try again after the backoff. */
static void conn_lost(redis_conn *c, const char *why) {
  redis_link *l = c->link;
  c->state = CONN_DOWN;
  c->ac = NULL;
  uv_timer_stop(&c->connect_timeout);
  snprintf(c->why, sizeof c->why, "%s", why && *why ? why : "connection lost");
  if (l->closing) return;
  if (!c->loss_logged) {
    c->loss_logged = true;
    log_write(LOG_WARNING, "redis: %s connection to %s %s: %s; retrying every %d ms up to every %d s", c->name,
              l->where, c->ever_up ? "lost" : "not established", c->why, REDIS_BACKOFF_MIN_MS,
              REDIS_BACKOFF_MAX_MS / 1000);
  }
  uv_timer_start(&c->retry, on_retry, (uint64_t)c->backoff_ms, 0);
  c->backoff_ms = c->backoff_ms * 2 > REDIS_BACKOFF_MAX_MS ? REDIS_BACKOFF_MAX_MS : c->backoff_ms * 2;
}

static void conn_up(redis_conn *c) {
  redis_link *l = c->link;
  c->state = CONN_UP;
  c->backoff_ms = REDIS_BACKOFF_MIN_MS;
  if (c->loss_logged) log_write(LOG_NOTICE, "redis: %s connection to %s is back", c->name, l->where);
  else if (!c->ever_up) log_write(LOG_INFO, "redis: %s connection to %s up", c->name, l->where);
  c->loss_logged = false;
  c->ever_up = true;
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
  redis_conn *c = ac->data;
  conn_lost(c, status == REDIS_OK ? "closed" : ac->errstr);
}

/* AUTH or SELECT: a refusal is a configuration error the log must show;
 * the connection is dropped and retried (the password may be fixed). */
static void on_setup_reply(redisAsyncContext *ac, void *r, void *privdata) {
  redisReply *reply = r;
  const char *what = privdata;
  if (!reply || reply->type != REDIS_REPLY_ERROR) return;
  redis_conn *c = ac->data;
  log_write(LOG_ERROR, "redis: %s on %s refused: %s", what, c->link->where, reply->str);
  redisAsyncDisconnect(ac);
}

static void on_state_key(redisAsyncContext *ac, void *r, void *privdata) {
  redisReply *reply = r;
  redis_link *l = privdata;
  if (!reply || reply->type != REDIS_REPLY_STRING || reply->len < 16) return;
  if (l->state_secret && strlen(l->state_secret) == reply->len && memcmp(l->state_secret, reply->str, reply->len) == 0)
    return;
  if (l->state_secret)
    log_write(LOG_WARNING, "redis: the shared requestState key at " REDIS_PREFIX
                           "state-key changed (was Redis flushed?); adopting it: pending input_required states "
                           "sealed with the old one are refused");
  else
    log_write(LOG_INFO, "redis: requestState is sealed with the key shared at %s " REDIS_PREFIX "state-key",
              l->where);
  free(l->state_secret);
  l->state_secret = dup_range(reply->str, reply->len);
  state_key_set(l->state_secret, reply->len);
  l->state_key_agreed = true;
  (void)ac;
}

/* The bus connection's SUBSCRIBE: called for its confirmation, then for
 * every message, and with NULL when the connection goes. */
static void on_bus(redisAsyncContext *ac, void *r, void *privdata) {
  redisReply *reply = r;
  redis_conn *c = privdata;
  (void)ac;
  if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return;
  const redisReply *type = reply->element[0];
  if (type->type != REDIS_REPLY_STRING) return;
  if (strcmp(type->str, "subscribe") == 0) {
    conn_up(c);
  } else if (strcmp(type->str, "message") == 0 && reply->element[2]->type == REDIS_REPLY_STRING) {
    bus_receive(c->link->bus, reply->element[2]->str, reply->element[2]->len);
  }
}

static void on_connect(const redisAsyncContext *cac, int status) {
  redisAsyncContext *ac = (redisAsyncContext *)cac;
  redis_conn *c = ac->data;
  redis_link *l = c->link;
  if (status != REDIS_OK) {
    conn_lost(c, ac->errstr); /* hiredis frees ac after this callback */
    return;
  }
  uv_timer_stop(&c->connect_timeout);
  /* Redis runs a connection's commands in order: whatever is sent after
   * these runs authenticated, in the right database. */
  if (l->password) {
    if (l->user) redisAsyncCommand(ac, on_setup_reply, "AUTH", "AUTH %s %s", l->user, l->password);
    else redisAsyncCommand(ac, on_setup_reply, "AUTH", "AUTH %s", l->password);
  }
  if (c->subscriber) {
    redisAsyncCommand(ac, on_bus, c, "SUBSCRIBE %s", l->channel);
    return; /* up once the subscription is confirmed */
  }
  if (l->db) redisAsyncCommand(ac, on_setup_reply, "SELECT", "SELECT %d", l->db);
  if (l->share_state_key) {
    /* The first process to get here sets the key; every one adopts
     * what is there. */
    char secret[65];
    bus_random_hex(secret, 32);
    redisAsyncCommand(ac, NULL, NULL, "SET " REDIS_PREFIX "state-key %s NX", secret);
    redisAsyncCommand(ac, on_state_key, l, "GET " REDIS_PREFIX "state-key");
  }
  conn_up(c);
}

static void on_connect_timeout(uv_timer_t *t) {
  redis_conn *c = t->data;
  if (c->state != CONN_CONNECTING || !c->ac) return;
  /* Not connected: hiredis calls neither callback for it. */
  redisAsyncContext *ac = c->ac;
  c->ac = NULL;
  redisAsyncFree(ac);
  conn_lost(c, "connection timed out");
}

/* A connection's socket on the loop: hiredis's event hooks (ac->ev) start
 * and stop a watch on it (os/sock_watch.h). Our own rather than hiredis's
 * adapters/libuv.h: that one watches a descriptor with uv_poll, which on
 * Windows breaks (os/sock_watch.h says how), and it returns from its poll
 * callback on an error status (libuv reports a refused connect or a reset
 * that way, and stops the watch), so hiredis never hears of it and the
 * connection hangs: here, on an error, hiredis is handed the events it
 * waited for, reads the error and reports it (connect or disconnect
 * callback). Owner: hiredis (ac->ev.data), until its cleanup hook closes
 * the watch and frees it (or on_ready does, when hiredis let go during it). */
typedef struct redis_poll {
  os_sock_watch *watch;
  int events;
  redisAsyncContext *ac; /* NULL once hiredis let go of it (cleanup) */
  bool dispatching;      /* in on_ready: cleanup leaves the freeing to it */
} redis_poll;

static void on_ready(void *data, int status, int events) {
  redis_poll *p = data;
  int ev = status ? p->events : events;
  p->dispatching = true;
  if (p->ac && (ev & UV_READABLE)) redisAsyncHandleRead(p->ac);
  if (p->ac && (ev & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
  p->dispatching = false;
  if (!p->ac) free(p);
}

static void set_events(redis_poll *p, int events) {
  p->events = events;
  os_sock_watch_set(p->watch, events);
}

static void add_read(void *data) { set_events(data, ((redis_poll *)data)->events | UV_READABLE); }
static void del_read(void *data) { set_events(data, ((redis_poll *)data)->events & ~UV_READABLE); }
static void add_write(void *data) { set_events(data, ((redis_poll *)data)->events | UV_WRITABLE); }
static void del_write(void *data) { set_events(data, ((redis_poll *)data)->events & ~UV_WRITABLE); }

static void poll_cleanup(void *data) {
  redis_poll *p = data;
  p->ac = NULL;
  os_sock_watch_close(p->watch);
  if (!p->dispatching) free(p);
}

static bool poll_attach(redisAsyncContext *ac, uv_loop_t *loop) {
  redis_poll *p = calloc(1, sizeof *p);
  if (!p) return false;
  if (!(p->watch = os_sock_watch_new(loop, (uv_os_sock_t)ac->c.fd, on_ready, p))) {
    free(p);
    return false;
  }
  p->ac = ac;
  ac->ev.data = p;
  ac->ev.addRead = add_read;
  ac->ev.delRead = del_read;
  ac->ev.addWrite = add_write;
  ac->ev.delWrite = del_write;
  ac->ev.cleanup = poll_cleanup;
  return true;
}

static void conn_connect(redis_conn *c) {
  redis_link *l = c->link;
  if (l->closing || c->ac) return;
  log_write(LOG_DEBUG, "redis: connecting the %s connection to %s", c->name, l->where);
  redisAsyncContext *ac = l->unix_path ? redisAsyncConnectUnix(l->unix_path) : redisAsyncConnect(l->host, l->port);
  if (!ac) return conn_lost(c, "out of memory");
  if (ac->err) {
    char why[160];
    snprintf(why, sizeof why, "%s", ac->errstr);
    redisAsyncFree(ac);
    return conn_lost(c, why);
  }
  ac->data = c;
  if (!poll_attach(ac, l->loop)) {
    redisAsyncFree(ac);
    return conn_lost(c, "cannot watch the socket");
  }
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  c->ac = ac;
  c->state = CONN_CONNECTING;
  uv_timer_start(&c->connect_timeout, on_connect_timeout, REDIS_CONNECT_TIMEOUT_MS, 0);
}

static void conn_init(redis_link *l, redis_conn *c, const char *name, bool subscriber) {
  c->link = l;
  c->name = name;
  c->subscriber = subscriber;
  c->backoff_ms = REDIS_BACKOFF_MIN_MS;
  snprintf(c->why, sizeof c->why, "not connected yet");
  uv_timer_init(l->loop, &c->retry);
  uv_timer_init(l->loop, &c->connect_timeout);
  c->retry.data = c->connect_timeout.data = c;
  /* Retrying is no reason to keep the loop alive at shutdown. */
  uv_unref((uv_handle_t *)&c->retry);
  uv_unref((uv_handle_t *)&c->connect_timeout);
}

/* The bus's transport: PUBLISH on the command connection. */
static bool bus_send(void *arg, const char *message, size_t len, const char **why) {
  redis_link *l = arg;
  if (!redis_ready(l, why)) return false;
  const char *argv[3] = {"PUBLISH", l->channel, message};
  size_t lens[3] = {7, strlen(l->channel), len};
  if (redisAsyncCommandArgv(l->cmd.ac, NULL, NULL, 3, argv, lens) == REDIS_OK) return true;
  *why = "the connection is closing";
  return false;
}

/* PUBLISH's reply: how many subscribers got the message. */
typedef struct counted_publish {
  bus_heard_fn heard;
  void *ctx;
} counted_publish;

static void on_counted_publish(void *data, const redisReply *r, const char *why) {
  (void)why;
  counted_publish *p = data;
  p->heard(p->ctx, r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1);
  free(p);
}

/* The bus's counted transport: PUBLISH, and its reply told. */
static bool bus_send_counted(void *arg, const char *message, size_t len, const char **why, bus_heard_fn heard,
                             void *ctx) {
  redis_link *l = arg;
  const char *argv[3] = {"PUBLISH", l->channel, message};
  size_t lens[3] = {7, strlen(l->channel), len};
  counted_publish *p = malloc(sizeof *p);
  p->heard = heard;
  p->ctx = ctx;
  if (redis_command(l, on_counted_publish, p, 3, argv, lens, why)) return true;
  free(p);
  return false;
}

redis_link *redis_link_new(uv_loop_t *loop, server *srv, bus *bus, const char *url, bool share_state_key, char *err,
                           size_t errlen) {
  redis_link *l = calloc(1, sizeof *l);
  l->loop = loop;
  l->srv = srv;
  l->bus = bus;
  l->share_state_key = share_state_key;
  if (!parse_url(l, url, err, errlen)) {
    free(l->host);
    free(l->unix_path);
    free(l->user);
    free(l->password);
    free(l);
    return NULL;
  }
  snprintf(l->channel, sizeof l->channel, REDIS_PREFIX "bus:%d", l->db);
  conn_init(l, &l->cmd, "command", false);
  conn_init(l, &l->sub, "bus", true);
  bus_set_transport(bus, &(bus_transport){.send = bus_send, .send_counted = bus_send_counted, .arg = l, .name = "redis"});
  return l;
}

static bool link_up(const redis_link *l) {
  return l->cmd.state == CONN_UP && l->sub.state == CONN_UP && (!l->share_state_key || l->state_key_agreed);
}

static void on_wait_over(uv_timer_t *t) { *(bool *)t->data = true; }
static void on_wait_closed(uv_handle_t *h) { *(bool *)h->data = true; }

bool redis_link_start(redis_link *l, int wait_ms) {
  conn_connect(&l->cmd);
  conn_connect(&l->sub);
  bool over = false, closed = false;
  uv_timer_t wait;
  uv_timer_init(l->loop, &wait);
  wait.data = &over;
  uv_timer_start(&wait, on_wait_over, (uint64_t)wait_ms, 0);
  while (!over && !link_up(l)) uv_run(l->loop, UV_RUN_ONCE);
  wait.data = &closed;
  uv_close((uv_handle_t *)&wait, on_wait_closed);
  while (!closed) uv_run(l->loop, UV_RUN_ONCE);
  return link_up(l);
}

static void on_link_handle_closed(uv_handle_t *h) {
  redis_conn *c = h->data;
  redis_link *l = c->link;
  if (--l->open_handles > 0) return;
  free(l->host);
  free(l->unix_path);
  free(l->user);
  free(l->password);
  free(l->state_secret);
  free(l);
}

void redis_link_close(redis_link *l) {
  if (!l || l->closing) return;
  l->closing = true;
  bus_set_transport(l->bus, NULL);
  redis_conn *conns[2] = {&l->cmd, &l->sub};
  for (int i = 0; i < 2; i++) {
    redis_conn *c = conns[i];
    snprintf(c->why, sizeof c->why, "the server is stopping");
    c->state = CONN_DOWN;
    if (c->ac) {
      redisAsyncContext *ac = c->ac;
      c->ac = NULL;
      redisAsyncFree(ac); /* every pending callback hears of it, with no reply */
    }
  }
  for (int i = 0; i < 2; i++) {
    l->open_handles += 2;
    uv_close((uv_handle_t *)&conns[i]->retry, on_link_handle_closed);
    uv_close((uv_handle_t *)&conns[i]->connect_timeout, on_link_handle_closed);
  }
}

/* ---- Commands ------------------------------------------------------------- */

bool redis_ready(const redis_link *l, const char **why) {
  if (l->cmd.state == CONN_UP && l->cmd.ac) return true;
  if (why) *why = l->cmd.state == CONN_CONNECTING && !l->cmd.ever_up ? "connecting" : l->cmd.why;
  return false;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata) {
  pending_cmd *p = privdata;
  const char *why = NULL;
  if (!r) why = p->conn->link->closing ? "the server is stopping" : ac->err ? ac->errstr : "the connection was lost";
  p->fn(p->data, r, why);
  free(p);
}

bool redis_command(redis_link *l, redis_reply_fn fn, void *data, int argc, const char **argv, const size_t *lens,
                   const char **why) {
  if (!redis_ready(l, why)) return false;
  pending_cmd *p = malloc(sizeof *p);
  p->fn = fn;
  p->data = data;
  p->conn = &l->cmd;
  if (redisAsyncCommandArgv(l->cmd.ac, on_reply, p, argc, argv, lens) != REDIS_OK) {
    free(p);
    if (why) *why = "the connection is closing";
    return false;
  }
  return true;
}


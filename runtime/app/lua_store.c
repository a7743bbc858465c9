/*
 * lua_store.c - mcp.store: a key-value store of JSON values, shared by
 * every generation of the scripts, and with --redis by every process.
 *
 *   mcp.store.get(key)                        -> value | nil
 *   mcp.store.set(key, value [, {ttl = s}])   -> true
 *   mcp.store.incr(key [, by])                -> the new integer
 *   mcp.store.delete(key)                     -> whether it was there
 *   mcp.store.cas(key, expected, new [, {ttl = s}]) -> whether it swapped
 *
 * Values are kept as their JSON text (the runtime's codec, keys sorted), so
 * cas compares texts and incr works on the text of an integer. Two
 * backends behind one API: in the process (a map the lua_app owns, so it
 * survives reloads), or Redis (luamcp:store:KEY; redis.h), where a call
 * yields its coroutine until the reply. Both are callable only from a
 * handler or mcp.spawn, so a script that works on one works on the other.
 */
#include <errno.h>
#include <limits.h>
#include <hiredis/hiredis.h>
#include <lauxlib.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/lua_json.h"
#include "app/lua_store.h"
#include "app/lua_task.h"
#include "app/redis.h"
#include "core/log.h"

#define STORE_KEY_PREFIX REDIS_PREFIX "store:"
/* Every so many writes the in-process store drops the expired entries
 * nobody read again. */
#define STORE_SWEEP_EVERY 1024

typedef enum store_kind { STORE_GET, STORE_SET, STORE_INCR, STORE_DELETE, STORE_CAS } store_kind;

static const char *const STORE_WHAT[] = {"mcp.store.get", "mcp.store.set", "mcp.store.incr", "mcp.store.delete",
                                         "mcp.store.cas"};

/* ---- In the process --------------------------------------------------------- */

/* One value. Owner: the store's map. */
typedef struct mem_entry {
  char *json;
  size_t len;
  uint64_t expires_ms; /* uv_hrtime in ms; 0: never */
} mem_entry;

/* Owner: the lua_app (app->store), freed when it stops (app->on_stop). */
typedef struct store_mem {
  strmap map;
  unsigned writes;
  lua_app *app;
  teardown freed_with_app; /* in app->on_stop */
} store_mem;

static uint64_t now_ms(void) { return uv_hrtime() / 1000000u; }

static void entry_free(mem_entry *e) {
  if (!e) return;
  free(e->json);
  free(e);
}

static bool expired(const mem_entry *e, uint64_t now) { return e->expires_ms && now >= e->expires_ms; }

static void sweep(store_mem *m) {
  uint64_t now = now_ms();
  for (size_t b = 0; b < m->map.bucket_count; b++) {
    strmap_entry *e = m->map.buckets[b];
    while (e) {
      strmap_entry *next = e->next;
      if (expired(e->value, now)) entry_free(strmap_remove(&m->map, e->key));
      e = next;
    }
  }
}

/* app->on_stop: the server stops. */
static void store_free(teardown *entry) {
  store_mem *m = (store_mem *)((char *)entry - offsetof(store_mem, freed_with_app));
  lua_app *app = m->app;
  for (size_t b = 0; b < m->map.bucket_count; b++)
    for (strmap_entry *e = m->map.buckets[b]; e; e = e->next) entry_free(e->value);
  strmap_free(&m->map);
  free(m);
  app->store = NULL;
}

static store_mem *mem_of(lua_State *L, vm *v) {
  if (!v->app) luaL_error(L, "mcp.store is not available here");
  if (!v->app->store) {
    store_mem *m = calloc(1, sizeof *m);
    if (!m) luaL_error(L, "mcp.store: out of memory");
    strmap_init(&m->map);
    m->app = v->app;
    teardown_add(&v->app->on_stop, &m->freed_with_app, store_free);
    v->app->store = m;
  }
  return v->app->store;
}

/* The live entry under key, dropping it if it has expired. */
static mem_entry *mem_get(store_mem *m, const char *key) {
  mem_entry *e = strmap_get(&m->map, key);
  if (e && expired(e, now_ms())) {
    entry_free(strmap_remove(&m->map, key));
    return NULL;
  }
  return e;
}

static void mem_put(store_mem *m, const char *key, const char *json, size_t len, uint64_t ttl_ms) {
  mem_entry *e = malloc(sizeof *e);
  e->json = malloc(len + 1);
  memcpy(e->json, json, len);
  e->json[len] = '\0';
  e->len = len;
  e->expires_ms = ttl_ms ? now_ms() + ttl_ms : 0;
  entry_free(strmap_remove(&m->map, key));
  strmap_set(&m->map, key, e);
  if (++m->writes % STORE_SWEEP_EVERY == 0) sweep(m);
}

/* ---- Arguments ---------------------------------------------------------------- */

static const char *check_key(lua_State *L, int idx, size_t *len) {
  const char *key = luaL_checklstring(L, idx, len);
  if (*len == 0) luaL_argerror(L, idx, "the key must not be empty");
  if (memchr(key, '\0', *len)) luaL_argerror(L, idx, "the key must not contain a NUL byte");
  return key;
}

/* {ttl = seconds} at idx (optional): the TTL in ms, 0 for none. */
static uint64_t check_ttl(lua_State *L, int idx, const char *what) {
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "ttl") != 0)
      luaL_error(L, "%s: unknown option %s (the only option is ttl, in seconds)", what, luaL_tolstring(L, -1, NULL));
  }
  if (lua_getfield(L, idx, "ttl") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  int ok;
  lua_Number s = lua_tonumberx(L, -1, &ok);
  lua_pop(L, 1);
  if (!ok || !(s > 0) || s > 1e9) luaL_error(L, "%s: ttl must be a positive number of seconds", what);
  uint64_t ms = (uint64_t)ceil(s * 1000);
  return ms ? ms : 1;
}

/* The JSON text of the value at idx, into out, or raise. */
static void encode_value(lua_State *L, int idx, buf *out, const char *what) {
  char err[160];
  if (lua_isnoneornil(L, idx)) luaL_error(L, "%s: the value must not be nil (mcp.store.delete removes a key)", what);
  if (!ljson_encode(L, idx, out, err, sizeof err)) {
    buf_free(out);
    luaL_error(L, "%s: the value has no JSON form: %s", what, err);
  }
}

/* Push the value a JSON text stands for, or raise. */
static void push_json(lua_State *L, const char *json, size_t len, const char *what, const char *key) {
  json_error err;
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, &err);
  if (!doc) luaL_error(L, "%s(\"%s\"): the stored value is not JSON (%s)", what, key, err.message);
  ljson_push(L, json_doc_root(doc));
  json_doc_free(doc);
}

/* A JSON integer's text as an int64, or false. */
static bool parse_integer(const char *s, size_t len, long long *out) {
  if (len == 0 || len > 20) return false;
  char text[24];
  memcpy(text, s, len);
  text[len] = '\0';
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) return false;
  *out = v;
  return true;
}

/* ---- In Redis ---------------------------------------------------------------- */

/* One Redis call. Owner: itself: made by the Lua function, freed by the
 * continuation that reads it, or by the reply callback when its task went
 * away (cancel sets task to NULL, or frees it if the reply came already). */
typedef struct store_op {
  task_op op; /* first member: the task waits on it */
  task *task;
  bool done;
  store_kind kind;
  char *key;
  char *why;       /* the link failed: why (malloc'd) */
  int type;        /* the reply's REDIS_REPLY_* */
  long long integer;
  char *str;       /* string, status or error text */
  size_t len;
} store_op;

static void op_free(store_op *op) {
  free(op->key);
  free(op->why);
  free(op->str);
  free(op);
}

static void cancel_op(task_op *base) {
  store_op *op = (store_op *)base;
  if (op->done) op_free(op);
  else op->task = NULL;
}

/* Copy what the continuation needs: hiredis frees the reply after this. */
static void on_store_reply(void *data, const redisReply *reply, const char *why) {
  store_op *op = data;
  op->done = true;
  if (!reply) {
    op->why = strdup(why ? why : "the connection was lost");
  } else {
    op->type = reply->type;
    op->integer = reply->integer;
    if (reply->str) {
      op->str = malloc(reply->len + 1);
      memcpy(op->str, reply->str, reply->len);
      op->str[reply->len] = '\0';
      op->len = reply->len;
    }
  }
  task *t = op->task;
  /* Resume only the task that still waits on this op: one that ended
   * meanwhile was never resumed again (the deferred-resume rule). */
  if (!t || t->wait != TASK_WAIT_OP || t->wait_op != &op->op) {
    op_free(op);
    return;
  }
  task_resume(t, 0); /* store_continue reads the op and frees it */
}

static int store_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  store_op *op = lua_touserdata(L, 1);
  lua_settop(L, 0);
  const char *what = STORE_WHAT[op->kind];
  char message[400];
  message[0] = '\0';
  if (op->why) {
    snprintf(message, sizeof message, "redis unavailable: %s", op->why);
  } else if (op->type == REDIS_REPLY_ERROR) {
    if (op->kind == STORE_INCR && op->str && strstr(op->str, "not an integer"))
      snprintf(message, sizeof message, "%s(\"%s\"): the stored value is not an integer", what, op->key);
    else snprintf(message, sizeof message, "%s(\"%s\"): redis: %s", what, op->key, op->str ? op->str : "error");
  }
  if (message[0]) {
    op_free(op);
    lua_pushstring(L, message);
    return lua_error(L);
  }
  switch (op->kind) {
    case STORE_GET:
      if (op->type == REDIS_REPLY_STRING) {
        /* Decoding may raise: the op goes first. */
        lua_pushlstring(L, op->str, op->len);
        char key[200];
        snprintf(key, sizeof key, "%s", op->key);
        op_free(op);
        size_t n;
        const char *json = lua_tolstring(L, -1, &n);
        push_json(L, json, n, what, key);
        return 1;
      }
      lua_pushnil(L);
      break;
    case STORE_SET: lua_pushboolean(L, 1); break;
    case STORE_INCR: lua_pushinteger(L, (lua_Integer)op->integer); break;
    case STORE_DELETE:
    case STORE_CAS: lua_pushboolean(L, op->type == REDIS_REPLY_INTEGER && op->integer > 0); break;
  }
  op_free(op);
  return 1;
}

/* cas in one step on the server: KEYS[1]; ARGV: whether a value is
 * expected, its JSON text, the new JSON text ("" deletes), the TTL in ms
 * (0: none). A missing key reads as false in Redis's Lua. */
static const char CAS_SCRIPT[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if ARGV[1] == '1' then if cur ~= ARGV[2] then return 0 end elseif cur then return 0 end\n"
    "if ARGV[3] == '' then redis.call('DEL', KEYS[1])\n"
    "elseif ARGV[4] ~= '0' then redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])\n"
    "else redis.call('SET', KEYS[1], ARGV[3]) end\n"
    "return 1\n";

/* Send argv for the running task and yield until the reply. */
static int redis_call(lua_State *L, task *t, redis_link *link, store_kind kind, const char *key, int argc,
                      const char **argv, const size_t *lens) {
  store_op *op = calloc(1, sizeof *op);
  op->op.cancel = cancel_op;
  op->task = t;
  op->kind = kind;
  op->key = strdup(key);
  const char *why = NULL;
  if (!redis_command(link, on_store_reply, op, argc, argv, lens, &why)) {
    op_free(op);
    return luaL_error(L, "redis unavailable: %s", why ? why : "not connected");
  }
  lua_settop(L, 0);
  lua_pushlightuserdata(L, op);
  return task_wait_op(L, t, &op->op, store_continue);
}

/* ---- The functions -------------------------------------------------------------- */

/* What every function starts with. The Redis key and the JSON texts are
 * kept on the Lua stack, so nothing leaks when a later check raises. */
typedef struct store_call {
  vm *vm;
  task *task;
  redis_link *redis; /* NULL: in the process */
  const char *key;
  size_t key_len;
  const char *rkey;  /* with Redis: luamcp:store:KEY */
  size_t rkey_len;
} store_call;

static void begin(lua_State *L, store_call *c, store_kind kind) {
  c->key = check_key(L, 1, &c->key_len);
  c->task = task_check(L, STORE_WHAT[kind]);
  c->vm = c->task->vm;
  c->redis = c->vm->app ? c->vm->app->redis : NULL;
  c->rkey = NULL;
  c->rkey_len = 0;
}

static void redis_key(lua_State *L, store_call *c) {
  lua_pushfstring(L, STORE_KEY_PREFIX "%s", c->key);
  c->rkey = lua_tolstring(L, -1, &c->rkey_len);
}

/* The JSON text of the value at idx, pushed as a string. */
static const char *push_encoded(lua_State *L, int idx, size_t *len, const char *what) {
  buf out = BUF_INIT;
  encode_value(L, idx, &out, what);
  lua_pushlstring(L, out.data, out.len);
  buf_free(&out);
  return lua_tolstring(L, -1, len);
}

static int store_get(lua_State *L) {
  store_call c;
  begin(L, &c, STORE_GET);
  if (c.redis) {
    redis_key(L, &c);
    const char *argv[2] = {"GET", c.rkey};
    size_t lens[2] = {3, c.rkey_len};
    return redis_call(L, c.task, c.redis, STORE_GET, c.key, 2, argv, lens);
  }
  mem_entry *e = mem_get(mem_of(L, c.vm), c.key);
  if (!e) return 0;
  push_json(L, e->json, e->len, "mcp.store.get", c.key);
  return 1;
}

static int store_set(lua_State *L) {
  store_call c;
  begin(L, &c, STORE_SET);
  uint64_t ttl = check_ttl(L, 3, "mcp.store.set");
  size_t len;
  const char *value = push_encoded(L, 2, &len, "mcp.store.set");
  if (c.redis) {
    redis_key(L, &c);
    char ms[24];
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)ttl);
    const char *argv[5] = {"SET", c.rkey, value, "PX", ms};
    size_t lens[5] = {3, c.rkey_len, len, 2, strlen(ms)};
    return redis_call(L, c.task, c.redis, STORE_SET, c.key, ttl ? 5 : 3, argv, lens);
  }
  mem_put(mem_of(L, c.vm), c.key, value, len, ttl);
  lua_pushboolean(L, 1);
  return 1;
}

static int store_incr(lua_State *L) {
  store_call c;
  begin(L, &c, STORE_INCR);
  lua_Integer by = luaL_optinteger(L, 2, 1);
  if (c.redis) {
    redis_key(L, &c);
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)by);
    const char *argv[3] = {"INCRBY", c.rkey, text};
    size_t lens[3] = {6, c.rkey_len, strlen(text)};
    return redis_call(L, c.task, c.redis, STORE_INCR, c.key, 3, argv, lens);
  }
  store_mem *m = mem_of(L, c.vm);
  mem_entry *e = mem_get(m, c.key);
  long long now = 0;
  if (e && !parse_integer(e->json, e->len, &now))
    return luaL_error(L, "mcp.store.incr(\"%s\"): the stored value is not an integer", c.key);
  if ((by > 0 && now > LLONG_MAX - by) || (by < 0 && now < LLONG_MIN - by))
    return luaL_error(L, "mcp.store.incr(\"%s\"): the result would overflow a 64-bit integer", c.key);
  now += by;
  char text[24];
  int n = snprintf(text, sizeof text, "%lld", now);
  if (e) {
    /* incr keeps the key's TTL, as Redis's INCRBY does. */
    char *json = strdup(text);
    free(e->json);
    e->json = json;
    e->len = (size_t)n;
  } else {
    mem_put(m, c.key, text, (size_t)n, 0);
  }
  lua_pushinteger(L, (lua_Integer)now);
  return 1;
}

static int store_delete(lua_State *L) {
  store_call c;
  begin(L, &c, STORE_DELETE);
  if (c.redis) {
    redis_key(L, &c);
    const char *argv[2] = {"DEL", c.rkey};
    size_t lens[2] = {3, c.rkey_len};
    return redis_call(L, c.task, c.redis, STORE_DELETE, c.key, 2, argv, lens);
  }
  store_mem *m = mem_of(L, c.vm);
  bool was = mem_get(m, c.key) != NULL;
  entry_free(strmap_remove(&m->map, c.key));
  lua_pushboolean(L, was);
  return 1;
}

static int store_cas(lua_State *L) {
  store_call c;
  begin(L, &c, STORE_CAS);
  uint64_t ttl = check_ttl(L, 4, "mcp.store.cas");
  bool expect = !lua_isnoneornil(L, 2);
  bool replace = !lua_isnoneornil(L, 3);
  size_t expected_len = 0, fresh_len = 0;
  const char *expected = expect ? push_encoded(L, 2, &expected_len, "mcp.store.cas (expected)") : "";
  const char *fresh = replace ? push_encoded(L, 3, &fresh_len, "mcp.store.cas (new)") : "";
  if (c.redis) {
    redis_key(L, &c);
    char ms[24];
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)ttl);
    const char *argv[8] = {"EVAL", CAS_SCRIPT, "1", c.rkey, expect ? "1" : "0", expected, fresh, ms};
    size_t lens[8] = {4, sizeof CAS_SCRIPT - 1, 1, c.rkey_len, 1, expected_len, fresh_len, strlen(ms)};
    return redis_call(L, c.task, c.redis, STORE_CAS, c.key, 8, argv, lens);
  }
  store_mem *m = mem_of(L, c.vm);
  mem_entry *e = mem_get(m, c.key);
  bool match = expect ? e && e->len == expected_len && memcmp(e->json, expected, e->len) == 0 : e == NULL;
  if (match) {
    if (replace) mem_put(m, c.key, fresh, fresh_len, ttl);
    else entry_free(strmap_remove(&m->map, c.key));
  }
  lua_pushboolean(L, match);
  return 1;
}

void lua_store_register(lua_State *L, int module_idx) {
  static const luaL_Reg functions[] = {{"get", store_get},       {"set", store_set}, {"incr", store_incr},
                                       {"delete", store_delete}, {"cas", store_cas}, {NULL, NULL}};
  luaL_newlib(L, functions);
  lua_setfield(L, module_idx, "store");
}

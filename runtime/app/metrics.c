/* metrics.c - the process's figures for Prometheus. See metrics.h.
 *
 * Hot path: metrics_finished, the call observer's end, finds the method's
 * and the tool's counters by name (a hash lookup each; a name's first
 * call makes its entry) and adds to plain integers. Everything else is
 * read when scraped. */
#include "app/metrics.h"

#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/redis.h"
#include "core/jobs.h"
#include "core/luamcp_limits.h"
#include "core/observe.h"
#include "core/session.h"
#include "core/strmap.h"

/* Latency buckets of every tool's histogram, in seconds (and ns). */
#define LATENCY_BUCKETS 14
static const double LATENCY_LE[LATENCY_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1,    0.25,  0.5,    1,     2.5,  5,     10};
static uint64_t latency_le_ns[LATENCY_BUCKETS];

/* Counts of one method or tool. Owner: the metrics state, for the life of
 * the process (names are few and bounded: METRICS_MAX_*). */
typedef struct call_counts {
  char *name;
  uint64_t outcomes[CALL_OUTCOME_COUNT];
  uint64_t buckets[LATENCY_BUCKETS]; /* not cumulative: the first bucket the duration fits */
  uint64_t over;                     /* beyond the last bucket */
  uint64_t sum_ns;
} call_counts;

typedef struct count_table {
  strmap by_name;
  call_counts *last; /* the last one found: a run of calls to one name skips the hash */
  call_counts **items;
  size_t count, cap, max;
  call_counts other; /* past max names */
} count_table;

/* One series of a script's metric: its label set and value(s). */
typedef struct user_series {
  char *labels; /* `k="v",...`, sorted by key; "" for none */
  double value; /* counter: the total; histogram: the sum */
  uint64_t count;
  uint64_t *buckets; /* histogram: per bucket, not cumulative */
} user_series;

/* mcp.metrics.counter or histogram. Owner: the metrics state; kept across
 * reloads (a generation defining the same name gets the same metric). */
typedef struct user_metric {
  char *name, *help;
  bool histogram;
  double *le;
  int le_count;
  user_series series[METRICS_MAX_SERIES];
  int series_count;
  uint64_t refused; /* label sets past METRICS_MAX_SERIES */
} user_metric;

static struct {
  bool on;
  server *srv;
  lua_app *app;
  int worker;
  count_table methods, tools;
  call_counts unknown_tools; /* tools/call of a tool the app does not have */
  uint64_t gc_cycles;
  user_metric *user[METRICS_MAX_USER_METRICS];
  int user_count;
} M;

static call_counts *counts_for(count_table *t, const char *name) {
  if (t->last && strcmp(t->last->name, name) == 0) return t->last;
  call_counts *c = strmap_get(&t->by_name, name);
  if (c) return t->last = c;
  if (t->count >= t->max) return &t->other;
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    call_counts **items = realloc(t->items, cap * sizeof *items);
    if (!items) return &t->other;
    t->items = items;
    t->cap = cap;
  }
  c = calloc(1, sizeof *c);
  if (!c || !(c->name = strdup(name))) {
    free(c);
    return &t->other;
  }
  t->items[t->count++] = c;
  strmap_set(&t->by_name, c->name, c);
  return c;
}

static void count(call_counts *c, call_outcome o, uint64_t took) {
  c->outcomes[o]++;
  c->sum_ns += took;
  for (int i = 0; i < LATENCY_BUCKETS; i++)
    if (took <= latency_le_ns[i]) {
      c->buckets[i]++;
      return;
    }
  c->over++;
}

static void metrics_finished(void *data, call *c, call_outcome o, uint64_t took) {
  (void)data;
  if ((unsigned)o >= CALL_OUTCOME_COUNT) o = CALL_PROTOCOL_ERROR;
  /* Only names the app knows become labels: a client may send any. */
  count(call_method_known(c) ? counts_for(&M.methods, c->method) : &M.methods.other, o, took);
  if (strcmp(c->method, "tools/call") != 0) return;
  const char *target = call_target(c);
  count(target && call_target_known(c) ? counts_for(&M.tools, target) : &M.unknown_tools, o, took);
}

static const call_observer METRICS_OBSERVER = {.finished = metrics_finished};

void metrics_start(server *srv, lua_app *app, int worker) {
  if (M.on) return;
  M.on = true;
  M.srv = srv;
  M.app = app;
  M.worker = worker;
  for (int i = 0; i < LATENCY_BUCKETS; i++) latency_le_ns[i] = (uint64_t)llround(LATENCY_LE[i] * 1e9);
  strmap_init(&M.methods.by_name);
  strmap_init(&M.tools.by_name);
  M.methods.max = METRICS_MAX_METHODS;
  M.tools.max = METRICS_MAX_TOOLS;
  M.methods.other.name = M.tools.other.name = "_other";
  M.unknown_tools.name = "_unknown";
  observe_add(srv, &METRICS_OBSERVER, NULL);
  if (app && app->current) metrics_watch_gc(app->current->L);
}

bool metrics_enabled(void) { return M.on; }

/* ---- Lua's GC cycles ----------------------------------------------------- */

#define GC_SENTINEL_MT "luamcp.gc_sentinel"

static void new_sentinel(lua_State *L);
static int sentinel_gc(lua_State *L) {
  M.gc_cycles++;
  /* The next cycle's: a finalizer may make objects (Lua 5.4 §2.5.3). A
   * closing state collects this one too and must not make another. */
  if (lua_toboolean(L, lua_upvalueindex(1))) new_sentinel(L);
  return 0;
}

static void new_sentinel(lua_State *L) {
  if (!lua_checkstack(L, 2)) return;
  lua_newuserdatauv(L, 1, 0);
  luaL_setmetatable(L, GC_SENTINEL_MT);
  lua_pop(L, 1); /* garbage at once: its finalizer runs at the next cycle's end */
}

void metrics_watch_gc(lua_State *L) {
  if (!M.on || !L) return;
  if (luaL_newmetatable(L, GC_SENTINEL_MT)) {
    lua_pushboolean(L, 1);
    lua_pushcclosure(L, sentinel_gc, 1);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  new_sentinel(L);
}

void metrics_unwatch_gc(lua_State *L) {
  if (!M.on || !L) return;
  int top = lua_gettop(L);
  luaL_getmetatable(L, GC_SENTINEL_MT);
  if (lua_istable(L, -1) && lua_getfield(L, -1, "__gc") == LUA_TFUNCTION) {
    lua_pushboolean(L, 0);
    lua_setupvalue(L, -2, 1);
  }
  lua_settop(L, top);
}

/* ---- Formatting (at a scrape) -------------------------------------------- */

static void head(buf *out, const char *name, const char *type, const char *help) {
  buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The labels every series carries: `worker="K",` under --workers. */
static const char *worker_label(char *tmp, size_t n) {
  if (!M.worker) return "";
  snprintf(tmp, n, "worker=\"%d\",", M.worker);
  return tmp;
}

/* A label value as the text format escapes it: \\, \" and \n; cut at
 * METRICS_LABEL_VALUE_MAX_BYTES (UTF-8 safe). */
static void put_label_value(buf *out, const char *v) {
  const char *end = v + observe_utf8_cut(v, strlen(v), METRICS_LABEL_VALUE_MAX_BYTES);
  for (; v < end; v++) {
    if (*v == '\\') buf_puts(out, "\\\\");
    else if (*v == '"') buf_puts(out, "\\\"");
    else if (*v == '\n') buf_puts(out, "\\n");
    else buf_putc(out, *v);
  }
}

/* A sample `name{labels} value`; labels is text already escaped, without
 * braces (may be ""). */
static void sample(buf *out, const char *name, const char *labels, double v) {
  char w[32];
  const char *wl = worker_label(w, sizeof w);
  size_t wn = strlen(wl);
  buf_append_str(out, name);
  if (wn || *labels) {
    buf_putc(out, '{');
    buf_append(out, wl, *labels ? wn : wn - 1);
    buf_append_str(out, labels);
    buf_putc(out, '}');
  }
  if (isinf(v)) buf_append_str(out, v > 0 ? " +Inf\n" : " -Inf\n");
  else if (isnan(v)) buf_puts(out, " NaN\n");
  else if (v == floor(v) && fabs(v) < 1e15) buf_printf(out, " %.0f\n", v);
  else buf_printf(out, " %.10g\n", v);
}

static void outcome_samples(buf *out, const char *metric, const char *key, const call_counts *c) {
  buf labels = BUF_INIT;
  for (int o = 0; o < CALL_OUTCOME_COUNT; o++) {
    if (!c->outcomes[o]) continue;
    buf_clear(&labels);
    buf_printf(&labels, "%s=\"", key);
    put_label_value(&labels, c->name);
    buf_printf(&labels, "\",outcome=\"%s\"", call_outcome_name((call_outcome)o));
    sample(out, metric, labels.data, (double)c->outcomes[o]);
  }
  buf_free(&labels);
}

static uint64_t total_calls(const call_counts *c) {
  uint64_t n = 0;
  for (int o = 0; o < CALL_OUTCOME_COUNT; o++) n += c->outcomes[o];
  return n;
}

static void histogram_samples(buf *out, const char *metric, const char *key, const call_counts *c) {
  buf labels = BUF_INIT, name = BUF_INIT;
  uint64_t cumulative = 0;
  buf_printf(&name, "%s_bucket", metric);
  for (int i = 0; i <= LATENCY_BUCKETS; i++) {
    cumulative += i < LATENCY_BUCKETS ? c->buckets[i] : c->over;
    buf_clear(&labels);
    buf_printf(&labels, "%s=\"", key);
    put_label_value(&labels, c->name);
    if (i < LATENCY_BUCKETS) buf_printf(&labels, "\",le=\"%g\"", LATENCY_LE[i]);
    else buf_puts(&labels, "\",le=\"+Inf\"");
    sample(out, name.data, labels.data, (double)cumulative);
  }
  buf_clear(&labels);
  buf_printf(&labels, "%s=\"", key);
  put_label_value(&labels, c->name);
  buf_putc(&labels, '"');
  buf_clear(&name);
  buf_printf(&name, "%s_sum", metric);
  sample(out, name.data, labels.data, (double)c->sum_ns / 1e9);
  buf_clear(&name);
  buf_printf(&name, "%s_count", metric);
  sample(out, name.data, labels.data, (double)cumulative);
  buf_free(&labels);
  buf_free(&name);
}

static void table_samples(buf *out, const count_table *t, const char *metric, const char *key, bool histogram,
                          const call_counts *unknown) {
  for (size_t i = 0; i < t->count; i++) {
    if (histogram) histogram_samples(out, metric, key, t->items[i]);
    else outcome_samples(out, metric, key, t->items[i]);
  }
  const call_counts *extra[2] = {&t->other, unknown};
  for (int i = 0; i < 2; i++) {
    if (!extra[i] || !total_calls(extra[i])) continue;
    if (histogram) histogram_samples(out, metric, key, extra[i]);
    else outcome_samples(out, metric, key, extra[i]);
  }
}

static void user_metric_samples(buf *out, const user_metric *um) {
  head(out, um->name, um->histogram ? "histogram" : "counter", um->help);
  buf name = BUF_INIT, labels = BUF_INIT;
  for (int s = 0; s < um->series_count; s++) {
    const user_series *se = &um->series[s];
    const char *sep = *se->labels ? "," : "";
    if (!um->histogram) {
      sample(out, um->name, se->labels, se->value);
      continue;
    }
    uint64_t cumulative = 0;
    buf_clear(&name);
    buf_printf(&name, "%s_bucket", um->name);
    for (int i = 0; i <= um->le_count; i++) {
      cumulative += se->buckets[i];
      buf_clear(&labels);
      if (i < um->le_count) buf_printf(&labels, "%s%sle=\"%g\"", se->labels, sep, um->le[i]);
      else buf_printf(&labels, "%s%sle=\"+Inf\"", se->labels, sep);
      sample(out, name.data, labels.data, (double)cumulative);
    }
    buf_clear(&name);
    buf_printf(&name, "%s_sum", um->name);
    sample(out, name.data, se->labels, se->value);
    buf_clear(&name);
    buf_printf(&name, "%s_count", um->name);
    sample(out, name.data, se->labels, (double)se->count);
  }
  buf_free(&name);
  buf_free(&labels);
}

void metrics_format(buf *out) {
  if (!M.on) return;
  head(out, "luamcp_up", "gauge", "1 while the process serves.");
  sample(out, "luamcp_up", "", 1);
  head(out, "luamcp_calls_total", "counter",
       "Requests handed to the scripts, by method and outcome (ok, tool_error, protocol_error, timeout, cancelled).");
  table_samples(out, &M.methods, "luamcp_calls_total", "method", false, NULL);
  head(out, "luamcp_tool_calls_total", "counter", "tools/call requests, by tool and outcome.");
  table_samples(out, &M.tools, "luamcp_tool_calls_total", "tool", false, &M.unknown_tools);
  head(out, "luamcp_tool_duration_seconds", "histogram", "How long tools/call requests took, by tool.");
  table_samples(out, &M.tools, "luamcp_tool_duration_seconds", "tool", true, &M.unknown_tools);
  head(out, "luamcp_calls_in_flight", "gauge", "Requests being answered now.");
  sample(out, "luamcp_calls_in_flight", "", server_calls_in_flight(M.srv));
  head(out, "luamcp_sessions", "gauge", "MCP sessions open now.");
  {
    /* Not HTTP's shared session for sessionless requests: nobody opened it. */
    int sessions = 0;
    for (const session *se = M.srv->sessions; se; se = se->next)
      if (!se->sessionless) sessions++;
    sample(out, "luamcp_sessions", "", sessions);
  }
  head(out, "luamcp_tasks", "gauge", "MCP tasks this process holds, by status.");
  {
    static const char *const names[] = {"working", "input_required", "completed", "failed", "cancelled"};
    uint64_t by_status[5] = {0};
    if (M.srv->jobs)
      for (const job *j = M.srv->jobs->first; j; j = j->next)
        if ((unsigned)j->status < 5) by_status[j->status]++;
    for (int i = 0; i < 5; i++) {
      char labels[48];
      snprintf(labels, sizeof labels, "status=\"%s\"", names[i]);
      sample(out, "luamcp_tasks", labels, (double)by_status[i]);
    }
  }
  if (M.app) {
    head(out, "luamcp_reloads_total", "counter", "Reloads of the scripts that took effect.");
    sample(out, "luamcp_reloads_total", "", M.app->reloads);
    head(out, "luamcp_reload_failures_total", "counter", "Reloads that failed (the previous scripts kept serving).");
    sample(out, "luamcp_reload_failures_total", "", M.app->failed_reloads);
    if (M.app->current && M.app->current->L) {
      lua_State *L = M.app->current->L;
      head(out, "luamcp_lua_memory_bytes", "gauge", "Memory the current generation's Lua state holds.");
      sample(out, "luamcp_lua_memory_bytes", "", (double)lua_gc(L, LUA_GCCOUNT) * 1024 + lua_gc(L, LUA_GCCOUNTB));
    }
    head(out, "luamcp_lua_gc_cycles_total", "counter", "Lua garbage-collection cycles completed.");
    sample(out, "luamcp_lua_gc_cycles_total", "", (double)M.gc_cycles);
    if (M.app->redis) {
      const char *why = NULL;
      head(out, "luamcp_redis_up", "gauge", "1 when the --redis link is up.");
      sample(out, "luamcp_redis_up", "", redis_ready(M.app->redis, &why) ? 1 : 0);
    }
  }
  for (int i = 0; i < M.user_count; i++) user_metric_samples(out, M.user[i]);
}

/* ---- mcp.metrics --------------------------------------------------------- */

static bool valid_name(const char *s) { /* a metric's: ':' is allowed there */
  if (!*s || !(s[0] == '_' || s[0] == ':' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (const char *p = s; *p; p++)
    if (!(*p == '_' || *p == ':' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
      return false;
  return strncmp(s, "luamcp_", 7) != 0;
}

static int script_error(lua_State *L, const char *message, const char *name);
#define METRICS_STR_(x) #x
#define METRICS_STR(x) METRICS_STR_(x)

/* define(kind, name, help [, buckets]) -> id. The same name again (a
 * reload) gives the same metric, if of the same kind. */
int metrics_lua_define(lua_State *L) {
  const char *kind = luaL_checkstring(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const char *help = luaL_optstring(L, 3, "");
  bool histogram = strcmp(kind, "histogram") == 0;
  if (!valid_name(name))
    return script_error(L, "mcp.metrics: %s is not a metric name (letters, digits, _ and :, not beginning with a digit "
                         "or luamcp_)", name);
  for (int i = 0; i < M.user_count; i++) {
    if (strcmp(M.user[i]->name, name) != 0) continue;
    if (M.user[i]->histogram != histogram) return luaL_error(L, "mcp.metrics: %s is already defined as another kind", name);
    lua_pushinteger(L, i + 1);
    return 1;
  }
  if (M.user_count >= METRICS_MAX_USER_METRICS)
    return luaL_error(L, "mcp.metrics: at most %d metrics", METRICS_MAX_USER_METRICS);
  double le[32];
  int le_count = 0;
  if (histogram) {
    if (lua_istable(L, 4)) {
      for (lua_Integer i = 1; lua_rawgeti(L, 4, i) != LUA_TNIL; i++) {
        if (le_count >= 32) return luaL_error(L, "mcp.metrics.histogram: at most 32 buckets");
        if (!lua_isnumber(L, -1)) return luaL_error(L, "mcp.metrics.histogram: buckets must be numbers");
        le[le_count] = lua_tonumber(L, -1);
        if (le_count && le[le_count] <= le[le_count - 1])
          return luaL_error(L, "mcp.metrics.histogram: buckets must increase");
        le_count++;
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    } else {
      static const double defaults[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
      le_count = (int)(sizeof defaults / sizeof defaults[0]);
      memcpy(le, defaults, sizeof defaults);
    }
  }
  user_metric *um = calloc(1, sizeof *um);
  if (!um) return luaL_error(L, "mcp.metrics: out of memory");
  um->name = strdup(name);
  /* HELP text escapes \\ and line breaks (the text format's rule). */
  buf escaped = BUF_INIT;
  for (const char *p = *help ? help : name; *p; p++) {
    if (*p == '\\') buf_puts(&escaped, "\\\\");
    else if (*p == '\n') buf_puts(&escaped, "\\n");
    else buf_putc(&escaped, *p);
  }
  um->help = strdup(escaped.data ? escaped.data : "");
  buf_free(&escaped);
  um->histogram = histogram;
  um->le_count = le_count;
  if (le_count) {
    um->le = malloc((size_t)le_count * sizeof *um->le);
    memcpy(um->le, le, (size_t)le_count * sizeof *um->le);
  }
  M.user[M.user_count++] = um;
  lua_pushinteger(L, M.user_count);
  return 1;
}

static int compare_keys(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The label set at index idx (a table of string keys and values, or nil)
 * as `k="v",...` sorted by key, in out. */
static bool valid_label_name(const char *s) {
  if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (const char *p = s; *p; p++)
    if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) return false;
  return strncmp(s, "__", 2) != 0 && strlen(s) <= METRICS_LABEL_NAME_MAX_BYTES;
}

/* An error at the script's line: level 1 is this C function, 2 the
 * mcp.metrics method, 3 the script that called it. */
static int script_error(lua_State *L, const char *message, const char *name) {
  luaL_where(L, 3);
  lua_pushfstring(L, message, name);
  lua_concat(L, 2);
  return lua_error(L);
}

static void label_text(lua_State *L, int idx, buf *out) {
  if (lua_isnoneornil(L, idx)) return;
  luaL_checktype(L, idx, LUA_TTABLE);
  const char *keys[16];
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    if (!k || !valid_label_name(k))
      script_error(L, "mcp.metrics: %s is not a label name (letters, digits and _, not beginning with a digit or __, "
                      "at most " METRICS_STR(METRICS_LABEL_NAME_MAX_BYTES) " bytes)", k ? k : luaL_typename(L, -2));
    if (strcmp(k, "le") == 0 || strcmp(k, "worker") == 0)
      script_error(L, "mcp.metrics: the label %s is luamcp's (reserved)", k);
    if (n >= 16) script_error(L, "mcp.metrics: at most %s labels", "16");
    keys[n++] = k; /* the key stays in the table: the string lives */
    lua_pop(L, 1);
  }
  qsort(keys, (size_t)n, sizeof keys[0], compare_keys);
  /* Every value as a string first (luaL_tolstring may raise: nothing of
   * ours is allocated yet), left on the stack while the text is made. */
  luaL_checkstack(L, n + 2, "mcp.metrics: labels");
  int base = lua_gettop(L);
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    lua_getfield(L, idx, keys[i]);
    size_t len;
    luaL_tolstring(L, -1, &len);
    lua_remove(L, -2);
    total += strlen(keys[i]) + 4 + observe_utf8_cut(lua_tostring(L, -1), len, METRICS_LABEL_VALUE_MAX_BYTES);
  }
  if (total > METRICS_SERIES_LABELS_MAX_BYTES) {
    lua_settop(L, base);
    script_error(L, "mcp.metrics: a label set of at most %s bytes", METRICS_STR(METRICS_SERIES_LABELS_MAX_BYTES));
  }
  for (int i = 0; i < n; i++) {
    buf_printf(out, "%s%s=\"", i ? "," : "", keys[i]);
    put_label_value(out, lua_tostring(L, base + 1 + i));
    buf_putc(out, '"');
  }
  lua_settop(L, base);
}

/* add(id, value, labels) -> true, or nil and why when the metric has
 * METRICS_MAX_SERIES label sets already. */
int metrics_lua_add(lua_State *L) {
  lua_Integer id = luaL_checkinteger(L, 1);
  double v = luaL_checknumber(L, 2);
  if (id < 1 || id > M.user_count) return luaL_error(L, "mcp.metrics: no such metric");
  user_metric *um = M.user[id - 1];
  if (!um->histogram && (v < 0 || isnan(v))) return luaL_error(L, "mcp.metrics: a counter only goes up (inc by %f)", v);
  buf labels = BUF_INIT;
  label_text(L, 3, &labels);
  const char *text = labels.data ? labels.data : "";
  user_series *se = NULL;
  for (int i = 0; i < um->series_count && !se; i++)
    if (strcmp(um->series[i].labels, text) == 0) se = &um->series[i];
  if (!se) {
    if (um->series_count >= METRICS_MAX_SERIES) {
      um->refused++;
      buf_free(&labels);
      lua_pushnil(L);
      lua_pushfstring(L, "mcp.metrics: %s has %d label sets already (the most one metric may have)", um->name,
                      METRICS_MAX_SERIES);
      return 2;
    }
    se = &um->series[um->series_count++];
    se->labels = strdup(text);
    if (um->histogram) se->buckets = calloc((size_t)um->le_count + 1, sizeof *se->buckets);
  }
  buf_free(&labels);
  se->value += v;
  se->count++;
  if (um->histogram) {
    int i = 0;
    while (i < um->le_count && v > um->le[i]) i++;
    se->buckets[i]++;
  }
  lua_pushboolean(L, 1);
  return 1;
}


/*
 * lua_sqlite.c - the C side of mcp.sqlite (lua/mcp/sqlite.lua is its face):
 * SQLite connections whose statements run on libuv's thread pool, so a
 * long query never stops the loop.
 *
 *   local db, how = core.sqlite.open(path, {readonly=, wal=, busy_timeout_ms=})
 *       -- how: "new", or "reused" (an open connection with the same path
 *       -- and options, made by this or an earlier generation)
 *   n, rowid = db:exec(sql, params...)   every statement of sql; changes, last rowid
 *   rows     = db:query(sql, params...)  {{column = value, ...}, ...}
 *   row      = db:first(sql, params...)  the first row, or nil
 *   token = db:_begin(mode) / db:_commit(token) / db:_abort(token)   (sqlite.lua's transaction)
 *   t = db:stats()   {on_loop, on_pool, checkpoints, checkpoint_pending}
 *   db:close()
 *
 * params: one table (positional values at 1..n for `?`, and names for
 * `:name`, `@name`, `$name`), or the values themselves, positional. A
 * statement runs inside a task (it yields until done); outside one (the
 * scripts' top level, at load) it runs right away on the loop.
 *
 * Ownership: a connection (sql_conn) belongs to the app, not to a Lua
 * state, so a reload keeps it: open with the same path and options gets it
 * back ("reused"). Each Lua handle counts as a reference; it is freed once
 * closed, idle and unreferenced. Its statements run one at a time, in the
 * order they were asked (the queue); while a call holds a transaction,
 * only that call's statements run. A task that goes away while its
 * statement runs interrupts it (sqlite3_interrupt); one still queued is
 * dropped. A thread never touches Lua: the statement's rows come back as C
 * values and become Lua tables on the loop. A short statement may run on
 * the loop itself, within a budget of SQLite's steps (run_on_loop: the
 * trip to a thread costs more than a point query).
 */
#include <lauxlib.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/lua_sqlite.h"
#include "app/lua_task.h"

#define CONN_MT "mcp.sqlite.Database"

typedef enum sql_kind { SQL_EXEC, SQL_QUERY, SQL_FIRST, SQL_BEGIN, SQL_COMMIT, SQL_ROLLBACK, SQL_CHECKPOINT, SQL_CLOSE } sql_kind;

/* A value crossing between Lua and a thread. */
typedef struct sql_value {
  int type; /* SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL */
  sqlite3_int64 i;
  double d;
  char *s;
  size_t len;
} sql_value;

typedef struct sql_param {
  char *name; /* without its prefix; NULL: positional */
  sql_value value;
} sql_param;

typedef struct sql_conn sql_conn;

/* One statement (or a transaction step, or the close). Owner: its conn's
 * queue until it runs, then the after-work callback, which hands it to the
 * waiting task (sql_continue frees it) or frees it when nobody waits. */
typedef struct sql_op {
  task_op op; /* first member: the task waits on it */
  uv_work_t work;
  sql_conn *conn;
  task *task;       /* who waits, or NULL (gone, or nobody ever did) */
  const void *owner; /* the call (root task) it is for: the transaction lock's key */
  sql_kind kind;
  char *sql;
  sql_param *params;
  size_t param_count, positional_count;
  /* results */
  int rc;
  char *error;
  char **columns; /* the names, per row batch: rows share the last statement's */
  int column_count;
  sql_value *cells; /* row-major, column_count per row */
  size_t row_count, cell_cap;
  sqlite3_int64 changes, last_rowid;
  bool done;
  /* Set on the loop when nobody wants the statement any more (its call was
   * cancelled or is past its deadline, the server stops); read by the pool
   * thread's progress handler. sqlite3_interrupt alone can be lost: a
   * statement that starts after it clears the flag. */
  atomic_bool stop;
  struct sql_op *next;
} sql_op;

/* Owner: the app (its list, app->on_stop), or the vm where there is no app. */
struct sql_conn {
  sqlite3 *db;
  char *key; /* path and options: what open matches to reuse it */
  int refs;  /* Lua handles pointing at it */
  int busy_ms; /* its busy timeout (run_on_loop turns it off for a moment) */
  bool in_memory; /* ":memory:": no disk behind it */
  /* A file's commits that cannot wait on the disk (refresh_mode): WAL,
   * synchronous NORMAL or OFF, nothing attached. Read back when a
   * statement may have changed it (mode_stale: it named a PRAGMA or
   * ATTACH/DETACH). */
  bool wal_no_sync, mode_stale;
  /* The checkpoint is ours, not SQLite's (which runs inside the commit
   * that passes the threshold, on whatever thread): wal_committed notes
   * the -wal file's frames, and past checkpoint_pages (PRAGMA
   * wal_autocheckpoint, 1000; 0: none) a PASSIVE checkpoint is queued as
   * one of the connection's operations. wal_frames is written by the
   * thread running a statement, read on the loop once it is done. */
  int checkpoint_pages, wal_frames;
  bool closed; /* no new statements; sqlite3_close runs once idle */
  sql_op *head, *tail; /* waiting to run, in order */
  sql_op *running;
  const void *lock_owner; /* the call holding a transaction, or NULL */
  lua_Integer lock_token; /* which transaction: _commit/_abort name it */
  lua_Integer next_token;
  /* Where its statements ran, and its checkpoints (db:stats()). */
  lua_Integer on_loop, on_pool, checkpoints;
  bool checkpoint_queued;
  uv_loop_t *loop;
  teardown stopped; /* in app->on_stop (or the vm's on_end) */
  sql_conn **list_head;
  sql_conn *next;
};

typedef struct conn_handle {
  sql_conn *conn;
} conn_handle;

/* The connections opened where there is no app (luamcp build's load):
 * only the loop's thread touches it. */
static sql_conn *g_no_app_conns;

static void value_free(sql_value *v) { free(v->s); }

static void op_free(sql_op *op) {
  free(op->sql);
  for (size_t i = 0; i < op->param_count; i++) {
    free(op->params[i].name);
    value_free(&op->params[i].value);
  }
  free(op->params);
  if (op->columns)
    for (int i = 0; i < op->column_count; i++) free(op->columns[i]);
  free(op->columns);
  for (size_t i = 0; i < op->row_count * (size_t)op->column_count; i++) value_free(&op->cells[i]);
  free(op->cells);
  free(op->error);
  free(op);
}

static void conn_unlist(sql_conn *c) {
  if (!c->list_head) return;
  for (sql_conn **p = c->list_head; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  c->list_head = NULL;
}

/* Free it if nothing can use it any more. */
static void conn_maybe_free(sql_conn *c) {
  if (!c->closed || c->running || c->head || c->refs > 0) return;
  if (c->db) sqlite3_close_v2(c->db);
  teardown_remove(&c->stopped);
  conn_unlist(c);
  free(c->key);
  free(c);
}

/* ---- On a thread: no Lua here ---------------------------------------------- */

static void set_error(sql_op *op, sqlite3 *db, int rc) {
  op->rc = rc;
  if (!op->error) op->error = strdup(rc == SQLITE_INTERRUPT ? "interrupted" : sqlite3_errmsg(db));
}

/* The value of each parameter: `:name`, `@name`, `$name` by name; `?NNN`
 * the NNN-th positional value; each plain `?` the next positional value
 * (counting plain ones only, so that named ones mixed in shift nothing). */
static int bind_params(sql_op *op, sqlite3_stmt *st) {
  int n = sqlite3_bind_parameter_count(st);
  size_t plain = 0;
  for (int i = 1; i <= n; i++) {
    const char *name = sqlite3_bind_parameter_name(st, i);
    const sql_value *v = NULL;
    size_t want = 0; /* positional: which one */
    if (name && name[0] != '?') {
      for (size_t k = 0; k < op->param_count; k++)
        if (op->params[k].name && strcmp(op->params[k].name, name + 1) == 0) v = &op->params[k].value;
    } else {
      want = name ? (size_t)strtoul(name + 1, NULL, 10) : ++plain;
      size_t seen = 0;
      for (size_t k = 0; k < op->param_count && !v; k++)
        if (!op->params[k].name && ++seen == want) v = &op->params[k].value;
    }
    if (!v) {
      char msg[200];
      if (name && name[0] != '?') snprintf(msg, sizeof msg, "no value for the parameter %s", name);
      else snprintf(msg, sizeof msg, "no value for the parameter ?%zu (%zu given)", want, op->positional_count);
      op->error = strdup(msg);
      return SQLITE_RANGE;
    }
    int rc;
    switch (v->type) {
      case SQLITE_INTEGER: rc = sqlite3_bind_int64(st, i, v->i); break;
      case SQLITE_FLOAT: rc = sqlite3_bind_double(st, i, v->d); break;
      case SQLITE_TEXT: rc = sqlite3_bind_text64(st, i, v->s, v->len, SQLITE_STATIC, SQLITE_UTF8); break;
      case SQLITE_BLOB: rc = sqlite3_bind_blob64(st, i, v->s, v->len, SQLITE_STATIC); break;
      default: rc = sqlite3_bind_null(st, i); break;
    }
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static void add_row(sql_op *op, sqlite3_stmt *st) {
  int n = op->column_count;
  size_t need = (op->row_count + 1) * (size_t)n;
  if (need > op->cell_cap) {
    op->cell_cap = need * 2;
    op->cells = realloc(op->cells, op->cell_cap * sizeof *op->cells);
  }
  sql_value *row = op->cells + op->row_count * (size_t)n;
  for (int i = 0; i < n; i++) {
    sql_value *v = &row[i];
    memset(v, 0, sizeof *v);
    v->type = sqlite3_column_type(st, i);
    switch (v->type) {
      case SQLITE_INTEGER: v->i = sqlite3_column_int64(st, i); break;
      case SQLITE_FLOAT: v->d = sqlite3_column_double(st, i); break;
      case SQLITE_TEXT:
      case SQLITE_BLOB: {
        const void *p = v->type == SQLITE_TEXT ? (const void *)sqlite3_column_text(st, i) : sqlite3_column_blob(st, i);
        v->len = (size_t)sqlite3_column_bytes(st, i);
        v->s = malloc(v->len + 1);
        if (v->len) memcpy(v->s, p, v->len);
        v->s[v->len] = '\0';
        break;
      }
      default: break;
    }
  }
  op->row_count++;
}

/* The names of st's columns, for the rows that follow (a statement with
 * other columns than the last one's starts the rows over: exec keeps no
 * rows, and query's rows are its last row-returning statement's). */
static void take_columns(sql_op *op, sqlite3_stmt *st) {
  for (size_t i = 0; i < op->row_count * (size_t)op->column_count; i++) value_free(&op->cells[i]);
  op->row_count = 0;
  if (op->columns)
    for (int i = 0; i < op->column_count; i++) free(op->columns[i]);
  free(op->columns);
  op->column_count = sqlite3_column_count(st);
  op->columns = calloc((size_t)op->column_count + 1, sizeof *op->columns);
  for (int i = 0; i < op->column_count; i++) {
    const char *name = sqlite3_column_name(st, i);
    op->columns[i] = strdup(name ? name : "?");
  }
}

/* Step st to its end, keeping its rows as op->kind asks; SQLite's code. */
static int step_statement(sql_op *op, sqlite3_stmt *st) {
  int rc = bind_params(op, st);
  bool columns_taken = false;
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && op->kind != SQL_EXEC) {
      if (!columns_taken) take_columns(op, st);
      columns_taken = true;
      add_row(op, st);
      if (op->kind == SQL_FIRST) rc = SQLITE_DONE; /* the rest is not wanted */
    }
  }
  return rc;
}

static void run_sql(sql_op *op, sqlite3 *db) {
  const char *sql = op->sql;
  while (sql && *sql) {
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, &tail);
    if (rc != SQLITE_OK) {
      set_error(op, db, rc);
      return;
    }
    sql = tail;
    if (!st) continue; /* a comment or white space */
    rc = step_statement(op, st);
    if (rc != SQLITE_DONE) set_error(op, db, rc);
    sqlite3_finalize(st);
    if (op->error) return;
  }
  op->changes = sqlite3_changes64(db);
  op->last_rowid = sqlite3_last_insert_rowid(db);
}

/* sqlite3_wal_hook: a commit appended to the -wal file (on the loop or a
 * thread: only notes it). */
static int wal_committed(void *arg, sqlite3 *db, const char *schema, int frames) {
  (void)db;
  if (strcmp(schema, "main") == 0) ((sql_conn *)arg)->wal_frames = frames;
  return SQLITE_OK;
}

static void checkpoint(sql_conn *c, sql_op *op) {
  int rc = sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
  if (rc != SQLITE_OK && op) set_error(op, c->db, rc);
}

/* How often (in SQLite VM steps) a statement on the pool asks whether it
 * should stop: often enough to end an endless query at once, seldom enough
 * to cost nothing. */
#define POOL_STOP_CHECK_STEPS 1000

static int pool_stop_asked(void *data) { return atomic_load(&((sql_op *)data)->stop) ? 1 : 0; }

static void do_work(uv_work_t *w) {
  sql_op *op = w->data;
  sqlite3 *db = op->conn->db;
  switch (op->kind) {
    case SQL_EXEC:
    case SQL_QUERY:
    case SQL_FIRST:
    case SQL_BEGIN:
    case SQL_COMMIT:
    case SQL_ROLLBACK:
      sqlite3_progress_handler(db, POOL_STOP_CHECK_STEPS, pool_stop_asked, op);
      if (atomic_load(&op->stop)) set_error(op, db, SQLITE_INTERRUPT);
      else run_sql(op, db);
      sqlite3_progress_handler(db, 0, NULL, NULL);
      break;
    case SQL_CHECKPOINT: checkpoint(op->conn, op); break;
    case SQL_CLOSE:
      sqlite3_close_v2(db);
      op->conn->db = NULL;
      break;
  }
}

/* ---- On the loop ------------------------------------------------------------ */

static void pump(sql_conn *c);
static void enqueue(sql_conn *c, sql_op *op);

/* Roll back the transaction now held, behind no statement of its call: its
 * owner becomes the ROLLBACK itself (the call may be gone, its pointer
 * free to be reused), which gives the lock back when it has run. */
static void roll_back_held(sql_conn *c) {
  sql_op *op = calloc(1, sizeof *op);
  op->kind = SQL_ROLLBACK;
  op->sql = strdup("ROLLBACK");
  c->lock_token = 0;
  c->lock_owner = op;
  op->owner = op;
  enqueue(c, op);
}

/* The -wal file past its threshold: checkpoint it on the thread pool,
 * behind what is queued (the statements after it wait, as behind any). */
static void queue_checkpoint(sql_conn *c) {
  if (c->checkpoint_pages <= 0 || c->wal_frames < c->checkpoint_pages || c->checkpoint_queued || c->closed) return;
  c->wal_frames = 0;
  c->checkpoint_queued = true;
  sql_op *op = calloc(1, sizeof *op);
  op->kind = SQL_CHECKPOINT;
  enqueue(c, op);
}

static void after_work(uv_work_t *w, int status) {
  sql_op *op = w->data;
  sql_conn *c = op->conn;
  c->running = NULL;
  if (op->kind == SQL_EXEC || op->kind == SQL_QUERY || op->kind == SQL_FIRST) c->on_pool++;
  if (op->kind == SQL_CHECKPOINT) {
    c->checkpoints++;
    c->checkpoint_queued = false;
  }
  if (status == UV_ECANCELED && !op->error) op->error = strdup("cancelled");
  op->done = true;
  /* The lock: taken by a BEGIN that worked, given back by a COMMIT that
   * worked or any ROLLBACK (a COMMIT that failed keeps it: the caller
   * rolls back). */
  if (op->kind == SQL_BEGIN && op->error) c->lock_owner = NULL;
  if ((op->kind == SQL_COMMIT && !op->error) || op->kind == SQL_ROLLBACK) c->lock_owner = NULL;
  task *t = op->task;
  if (t && t->wait == TASK_WAIT_OP && t->wait_op == &op->op) {
    task_resume(t, 0); /* sql_continue frees op (or cancel_op, if the task goes first) */
  } else {
    /* Nobody waits: a transaction it began is nobody's. */
    if (op->kind == SQL_BEGIN && !op->error) roll_back_held(c);
    op_free(op);
  }
  queue_checkpoint(c);
  pump(c);
  conn_maybe_free(c);
}

/* Start the next statement that may run: the first queued one, or while a
 * call holds a transaction, that call's first. */
static void pump(sql_conn *c) {
  if (c->running) return;
  sql_op *prev = NULL;
  for (sql_op *op = c->head; op; prev = op, op = op->next) {
    if (c->lock_owner && op->owner != c->lock_owner) continue;
    if (prev) prev->next = op->next;
    else c->head = op->next;
    if (c->tail == op) c->tail = prev;
    op->next = NULL;
    if (op->kind == SQL_BEGIN) c->lock_owner = op->owner;
    c->running = op;
    int rc = uv_queue_work(c->loop, &op->work, do_work, after_work);
    if (rc != 0) {
      /* Only when the work item is invalid: say so as the statement's failure. */
      op->error = strdup(uv_strerror(rc));
      op->work.data = op;
      after_work(&op->work, 0);
    }
    return;
  }
}

/* Stop the statement running on the pool: the flag its progress handler
 * reads (which a statement not yet started sees too), and the interrupt. */
static void stop_running(sql_conn *c) {
  atomic_store(&c->running->stop, true);
  sqlite3_interrupt(c->db);
}

/* task_op.cancel: the task went away (cancelled, past its deadline, its
 * generation freed). Queued: it never runs. Running: stop the statement;
 * after_work frees it. */
static void cancel_op(task_op *base) {
  sql_op *op = (sql_op *)base;
  sql_conn *c = op->conn;
  op->task = NULL;
  if (op->done) {
    /* Its resume was still queued: a transaction it began is nobody's. */
    if (op->kind == SQL_BEGIN && !op->error && c->lock_owner == op->owner) roll_back_held(c);
    op_free(op);
    return;
  }
  if (c->running == op) {
    stop_running(c);
    return;
  }
  sql_op *prev = NULL;
  for (sql_op *q = c->head; q; prev = q, q = q->next)
    if (q == op) {
      if (prev) prev->next = q->next;
      else c->head = q->next;
      if (c->tail == q) c->tail = prev;
      break;
    }
  /* A BEGIN never run holds no lock; anything else the call queued in its
   * transaction is rolled back by its __close (sqlite.lua). */
  op_free(op);
  pump(c);
  conn_maybe_free(c);
}

static void enqueue(sql_conn *c, sql_op *op) {
  op->conn = c;
  op->work.data = op;
  if (c->tail) c->tail->next = op;
  else c->head = op;
  c->tail = op;
  pump(c);
}

/* ---- Lua values in and out -------------------------------------------------- */

static bool to_value(lua_State *L, int idx, sql_value *v) {
  memset(v, 0, sizeof *v);
  switch (lua_type(L, idx)) {
    case LUA_TNIL: v->type = SQLITE_NULL; break;
    case LUA_TBOOLEAN:
      v->type = SQLITE_INTEGER;
      v->i = lua_toboolean(L, idx);
      break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        v->type = SQLITE_INTEGER;
        v->i = lua_tointeger(L, idx);
      } else {
        v->type = SQLITE_FLOAT;
        v->d = lua_tonumber(L, idx);
      }
      break;
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      v->type = SQLITE_TEXT;
      v->s = malloc(len + 1);
      memcpy(v->s, s, len + 1);
      v->len = len;
      break;
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == NULL) { /* mcp.null */
        v->type = SQLITE_NULL;
        break;
      }
      /* fall through */
    default:
      if (lua_istable(L, idx) && lua_getfield(L, idx, "blob") == LUA_TSTRING) { /* mcp.sqlite.blob(s) */
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        v->type = SQLITE_BLOB;
        v->s = malloc(len ? len : 1);
        memcpy(v->s, s, len);
        v->len = len;
        lua_pop(L, 1);
        break;
      }
      if (lua_istable(L, idx)) lua_pop(L, 1);
      return false;
  }
  return true;
}

static bool bad_param(lua_State *L, int idx) {
  lua_pushstring(L, luaL_typename(L, idx));
  return false;
}

static void add_param(sql_op *op, const char *name) {
  op->params = realloc(op->params, (op->param_count + 1) * sizeof *op->params);
  op->params[op->param_count].name = name ? strdup(name) : NULL;
  op->param_count++;
}

/* The parameters from index first on: one table, or the values. False
 * (with the Lua type of the value it cannot bind pushed) on a value SQLite
 * cannot take. */
static bool take_params(lua_State *L, sql_op *op, int first) {
  int top = lua_gettop(L);
  if (top == first && lua_istable(L, first) && luaL_getmetafield(L, first, "__name") == LUA_TNIL) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, first);
    if (lua_getfield(L, first, "n") == LUA_TNUMBER && lua_isinteger(L, -1) && lua_tointeger(L, -1) > n)
      n = lua_tointeger(L, -1); /* table.pack's count: nils inside */
    lua_pop(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, first, i);
      add_param(op, NULL);
      if (!to_value(L, -1, &op->params[op->param_count - 1].value)) return bad_param(L, -1);
      lua_pop(L, 1);
    }
    op->positional_count = (size_t)n;
    lua_pushnil(L);
    while (lua_next(L, first)) {
      if (lua_type(L, -2) == LUA_TNUMBER && lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 &&
          lua_tointeger(L, -2) <= n) {
        lua_pop(L, 1);
        continue;
      }
      if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), "n") != 0) {
        add_param(op, lua_tostring(L, -2));
        if (!to_value(L, -1, &op->params[op->param_count - 1].value)) return bad_param(L, -1);
      }
      lua_pop(L, 1);
    }
    return true;
  }
  for (int i = first; i <= top; i++) {
    add_param(op, NULL);
    if (!to_value(L, i, &op->params[op->param_count - 1].value)) return bad_param(L, i);
  }
  op->positional_count = (size_t)(top >= first ? top - first + 1 : 0);
  return true;
}

static void push_value(lua_State *L, const sql_value *v) {
  switch (v->type) {
    case SQLITE_INTEGER: lua_pushinteger(L, (lua_Integer)v->i); break;
    case SQLITE_FLOAT: lua_pushnumber(L, (lua_Number)v->d); break;
    case SQLITE_TEXT:
    case SQLITE_BLOB: lua_pushlstring(L, v->s, v->len); break;
    default: lua_pushnil(L); break;
  }
}

static void push_row(lua_State *L, const sql_op *op, size_t r) {
  lua_createtable(L, 0, op->column_count);
  const sql_value *row = op->cells + r * (size_t)op->column_count;
  for (int i = 0; i < op->column_count; i++) {
    if (row[i].type == SQLITE_NULL) continue;
    push_value(L, &row[i]);
    lua_setfield(L, -2, op->columns[i]);
  }
}

/* The op's outcome on L's stack (its number), or a Lua error at the
 * scripts' line with SQLite's message. Frees op. */
static int finish(lua_State *L, sql_op *op) {
  if (op->error) {
    luaL_where(L, task_script_level(L));
    lua_pushfstring(L, "sqlite: %s", op->error);
    lua_concat(L, 2);
    op_free(op);
    return lua_error(L);
  }
  int n = 1;
  switch (op->kind) {
    case SQL_EXEC:
      lua_pushinteger(L, (lua_Integer)op->changes);
      lua_pushinteger(L, (lua_Integer)op->last_rowid);
      n = 2;
      break;
    case SQL_QUERY:
      lua_createtable(L, (int)op->row_count, 0);
      for (size_t r = 0; r < op->row_count; r++) {
        push_row(L, op, r);
        lua_rawseti(L, -2, (lua_Integer)r + 1);
      }
      break;
    case SQL_FIRST:
      if (op->row_count) push_row(L, op, 0);
      else lua_pushnil(L);
      break;
    default: lua_pushboolean(L, 1); break;
  }
  op_free(op);
  return n;
}

static int sql_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  return finish(L, lua_touserdata(L, 1));
}

static sql_conn *check_conn(lua_State *L, const char *what) {
  conn_handle *h = luaL_checkudata(L, 1, CONN_MT);
  if (!h->conn || h->conn->closed) luaL_error(L, "%s: the database is closed", what);
  return h->conn;
}

/* ---- Short statements on the loop ------------------------------------------- */

/* A handoff to the thread pool and back costs tens of microseconds, far
 * more than a point query or a one-row insert into memory. So a statement
 * that cannot wait on anything first runs right here, within a budget of
 * SQLite's virtual-machine steps, and moves to the thread pool when that
 * runs out: a long query still never holds the loop longer than the budget
 * (microseconds). Taken only where giving up is harmless: one statement,
 * the connection idle, and either reading (an interrupted read changes
 * nothing) or writing outside a transaction (an interrupted write rolls
 * back only itself) where the commit cannot wait on the disk: an
 * in-memory database, or a file in WAL mode with synchronous NORMAL or
 * OFF, whose commit appends to the -wal file without fsync (its
 * checkpoint, which does sync, is queued for the thread pool:
 * queue_checkpoint), and then only INSERT, UPDATE, DELETE or REPLACE (not
 * a PRAGMA, VACUUM or DROP, whose single steps can be long). SQLite's busy
 * handler is off meanwhile: a lock held by another process sends it to
 * the thread pool too, where it may wait. */
#define LOOP_STEP_BUDGET 20000

static int budget_spent(void *unused) {
  (void)unused;
  return 1;
}

static bool only_space(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != ';') return false;
  return true;
}

static int pragma_int(sqlite3 *db, const char *sql, int otherwise) {
  sqlite3_stmt *st = NULL;
  int n = otherwise;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_type(st, 0) == SQLITE_INTEGER ? sqlite3_column_int(st, 0)
        : sqlite3_stricmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
  sqlite3_finalize(st);
  return n;
}

/* Read back what decides where a file's writes run (wal_no_sync), and
 * take over its checkpoints: a PRAGMA wal_autocheckpoint puts SQLite's
 * own back (sqlite3_wal_autocheckpoint replaces the hook), so its value is
 * the new threshold; with ours still in place (it reads 0 then) the
 * threshold stays. Only on the loop, the connection idle. */
static void refresh_mode(sql_conn *c) {
  sqlite3 *db = c->db;
  c->mode_stale = false;
  if (c->in_memory || sqlite3_db_readonly(db, "main") != 0) return;
  int pages = pragma_int(db, "PRAGMA main.wal_autocheckpoint", 0);
  if (sqlite3_wal_hook(db, wal_committed, c) != c) c->checkpoint_pages = pages;
  c->wal_no_sync = pragma_int(db, "PRAGMA main.journal_mode", 0) == 1 &&
                   pragma_int(db, "PRAGMA main.synchronous", 2) <= 1 && !sqlite3_db_name(db, 2);
}

/* Whether word appears in sql, in any case (SQLite's own comparison:
 * strcasestr is GNU's, and Windows' C library lacks it). */
static bool mentions(const char *sql, const char *word) {
  int n = (int)strlen(word);
  for (; *sql; sql++)
    if (sqlite3_strnicmp(sql, word, n) == 0) return true;
  return false;
}

/* A statement that may change refresh_mode's answer. */
static void note_sql(sql_conn *c, const char *sql) {
  if (mentions(sql, "pragma") || mentions(sql, "attach") || mentions(sql, "detach")) c->mode_stale = true;
}

static bool plain_write(const char *sql) {
  static const char *const verbs[] = {"INSERT", "UPDATE", "DELETE", "REPLACE"};
  while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r') sql++;
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
    size_t n = strlen(verbs[i]);
    if (strncasecmp(sql, verbs[i], n) == 0 && !(sql[n] == '_' || (sql[n] >= 'a' && sql[n] <= 'z') ||
                                                 (sql[n] >= 'A' && sql[n] <= 'Z') || (sql[n] >= '0' && sql[n] <= '9')))
      return true;
  }
  return false;
}

/* Ran op to its end (its outcome is in op), or false: nothing happened,
 * queue it. */
static bool run_on_loop(sql_conn *c, sql_op *op, const void *owner) {
  if (c->running || c->head || (c->lock_owner && c->lock_owner != owner)) return false;
  if (op->kind != SQL_EXEC && op->kind != SQL_QUERY && op->kind != SQL_FIRST) return false;
  sqlite3 *db = c->db;
  if (c->mode_stale) refresh_mode(c);
  bool may_write = sqlite3_get_autocommit(db) && (c->in_memory || (c->wal_no_sync && plain_write(op->sql)));
  sqlite3_busy_timeout(db, 0);
  sqlite3_progress_handler(db, LOOP_STEP_BUDGET, budget_spent, NULL);
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  bool done = false;
  int rc = sqlite3_prepare_v2(db, op->sql, -1, &st, &tail);
  if (rc == SQLITE_OK && st && only_space(tail) &&
      (sqlite3_stmt_readonly(st) || may_write)) {
    rc = step_statement(op, st);
    if (rc == SQLITE_DONE) {
      op->changes = sqlite3_changes64(db);
      op->last_rowid = sqlite3_last_insert_rowid(db);
      done = true;
    } else if (rc != SQLITE_INTERRUPT && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) {
      set_error(op, db, rc);
      done = true;
    }
  } else if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED && rc != SQLITE_INTERRUPT) {
    set_error(op, db, rc); /* bad SQL: no need for a thread to say so */
    done = true;
  }
  sqlite3_finalize(st);
  sqlite3_progress_handler(db, 0, NULL, NULL);
  sqlite3_busy_timeout(db, c->busy_ms);
  if (!done) {
    /* Whatever rows it had are the thread's to find again. */
    for (size_t i = 0; i < op->row_count * (size_t)op->column_count; i++) value_free(&op->cells[i]);
    op->row_count = 0;
    free(op->error);
    op->error = NULL;
  }
  return done;
}

/* Run op on c: inside a task, queue it and yield; outside one (the
 * scripts' top level, at load), right here on the loop, when nothing else
 * uses the connection. */
static int submit(lua_State *L, sql_conn *c, sql_op *op, const char *what) {
  op->conn = c;
  task *t = task_of(L);
  if (!t) {
    const char *why = NULL;
    if (op->kind == SQL_BEGIN || op->kind == SQL_COMMIT || op->kind == SQL_ROLLBACK)
      why = "a transaction runs inside a handler";
    else if (c->running || c->head || c->lock_owner)
      why = "outside a handler a statement runs only while no request uses the database";
    if (why) {
      op_free(op);
      return luaL_error(L, "%s: %s", what, why);
    }
    run_sql(op, c->db);
    note_sql(c, op->sql);
    if (c->checkpoint_pages > 0 && c->wal_frames >= c->checkpoint_pages) {
      /* Blocking here anyway (at load), and nothing queued. */
      c->wal_frames = 0;
      checkpoint(c, NULL);
      c->checkpoints++;
    }
    lua_settop(L, 0);
    return finish(L, op);
  }
  note_sql(c, op->sql);
  if (run_on_loop(c, op, t->root)) {
    c->on_loop++;
    queue_checkpoint(c);
    lua_settop(L, 0);
    return finish(L, op);
  }
  op->task = t;
  op->owner = t->root;
  op->op.cancel = cancel_op;
  enqueue(c, op);
  lua_settop(L, 0);
  lua_pushlightuserdata(L, op);
  return task_wait_op(L, t, &op->op, sql_continue);
}

static int statement(lua_State *L, sql_kind kind, const char *what) {
  sql_conn *c = check_conn(L, what);
  size_t len;
  const char *sql = luaL_checklstring(L, 2, &len);
  sql_op *op = calloc(1, sizeof *op);
  op->kind = kind;
  op->sql = malloc(len + 1);
  memcpy(op->sql, sql, len + 1);
  if (!take_params(L, op, 3)) {
    op_free(op);
    return luaL_error(L, "%s: a parameter must be nil, mcp.null, a boolean, a number, a string or "
                         "mcp.sqlite.blob(s), not %s", what, lua_tostring(L, -1));
  }
  return submit(L, c, op, what);
}

static int conn_exec(lua_State *L) { return statement(L, SQL_EXEC, "db:exec"); }
static int conn_query(lua_State *L) { return statement(L, SQL_QUERY, "db:query"); }
static int conn_first(lua_State *L) { return statement(L, SQL_FIRST, "db:first"); }

/* db:_begin(mode): wait for the connection's lock (other calls' statements
 * wait while it is held), then BEGIN; the token names this transaction. */
static int begin_continue(lua_State *L, int status, lua_KContext k) {
  sql_op *op = lua_touserdata(L, 1);
  sql_conn *c = op->conn;
  finish(L, op); /* raises if BEGIN failed (the lock is free again then) */
  lua_pushinteger(L, c->lock_token = ++c->next_token);
  return 1;
}

static int conn_begin(lua_State *L) {
  sql_conn *c = check_conn(L, "db:transaction");
  const char *mode = luaL_optstring(L, 2, "deferred");
  if (strcmp(mode, "deferred") != 0 && strcmp(mode, "immediate") != 0 && strcmp(mode, "exclusive") != 0)
    return luaL_error(L, "db:transaction: the mode is \"deferred\", \"immediate\" or \"exclusive\", not \"%s\"", mode);
  task *t = task_check(L, "db:transaction");
  if (c->lock_owner == t->root)
    return luaL_error(L, "db:transaction: this call is already in a transaction on this database");
  sql_op *op = calloc(1, sizeof *op);
  op->kind = SQL_BEGIN;
  char sql[32];
  snprintf(sql, sizeof sql, "BEGIN %s", mode);
  op->sql = strdup(sql);
  op->conn = c;
  op->task = t;
  op->owner = t->root;
  op->op.cancel = cancel_op;
  enqueue(c, op);
  lua_settop(L, 0);
  lua_pushlightuserdata(L, op);
  return task_wait_op(L, t, &op->op, begin_continue);
}

static int conn_commit(lua_State *L) {
  sql_conn *c = check_conn(L, "db:transaction");
  lua_Integer token = luaL_checkinteger(L, 2);
  if (!c->lock_owner || c->lock_token != token) return luaL_error(L, "db:transaction: the transaction has ended");
  sql_op *op = calloc(1, sizeof *op);
  op->kind = SQL_COMMIT;
  op->sql = strdup("COMMIT");
  return submit(L, c, op, "db:transaction");
}

/* db:_abort(token): roll the transaction back without waiting (its
 * __close runs it, also while a cancelled call's coroutine is being
 * closed): the ROLLBACK runs next, and the lock is given back after it. */
static int conn_abort(lua_State *L) {
  conn_handle *h = luaL_checkudata(L, 1, CONN_MT);
  lua_Integer token = luaL_checkinteger(L, 2);
  sql_conn *c = h->conn;
  if (!c || !c->lock_owner || c->lock_token != token) return 0;
  roll_back_held(c);
  return 0;
}

static int conn_close(lua_State *L) {
  conn_handle *h = luaL_checkudata(L, 1, CONN_MT);
  sql_conn *c = h->conn;
  if (!c || c->closed) return 0;
  c->closed = true;
  conn_unlist(c); /* a later open makes a new connection */
  sql_op *op = calloc(1, sizeof *op);
  op->kind = SQL_CLOSE;
  op->owner = c->lock_owner; /* after a transaction in progress */
  enqueue(c, op);
  return 0;
}

/* db:stats(): how many of its statements ran on the loop and on the
 * thread pool, its checkpoints done, and whether one waits to run. */
static int conn_stats(lua_State *L) {
  sql_conn *c = check_conn(L, "db:stats");
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, c->on_loop);
  lua_setfield(L, -2, "on_loop");
  lua_pushinteger(L, c->on_pool);
  lua_setfield(L, -2, "on_pool");
  lua_pushinteger(L, c->checkpoints);
  lua_setfield(L, -2, "checkpoints");
  lua_pushboolean(L, c->checkpoint_queued);
  lua_setfield(L, -2, "checkpoint_pending");
  return 1;
}

static int conn_gc(lua_State *L) {
  conn_handle *h = luaL_checkudata(L, 1, CONN_MT);
  sql_conn *c = h->conn;
  h->conn = NULL;
  if (c) {
    c->refs--;
    conn_maybe_free(c);
  }
  return 0;
}

static int conn_tostring(lua_State *L) {
  conn_handle *h = luaL_checkudata(L, 1, CONN_MT);
  lua_pushfstring(L, "sqlite database %s%s", h->conn ? h->conn->key : "?",
                  !h->conn || h->conn->closed ? " (closed)" : "");
  return 1;
}

/* app->on_stop (or the vm's on_end): the server stops. A statement still
 * running is interrupted and the connection closes when it returns. */
static void conn_stop(teardown *entry) {
  sql_conn *c = (sql_conn *)((char *)entry - offsetof(sql_conn, stopped));
  conn_unlist(c);
  c->closed = true;
  while (c->head) {
    sql_op *op = c->head;
    c->head = op->next;
    op_free(op); /* the tasks are gone by now: the generations were freed first */
  }
  c->tail = NULL;
  if (c->running) {
    stop_running(c);
    return;
  }
  conn_maybe_free(c); /* or when the last handle is collected */
}

static int sqlite_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_getfield(L, 2, "readonly");
  bool readonly = lua_toboolean(L, -1);
  lua_getfield(L, 2, "wal");
  bool wal = lua_toboolean(L, -1);
  lua_getfield(L, 2, "busy_timeout_ms");
  lua_Integer busy = luaL_optinteger(L, -1, 5000);
  lua_getfield(L, 2, "create");
  bool create = lua_isnil(L, -1) || lua_toboolean(L, -1);
  lua_pop(L, 4);
  vm *v = vm_of(L);
  sql_conn **list = v->app ? &v->app->sqlite : &g_no_app_conns;
  char key[64];
  snprintf(key, sizeof key, " (%s%s%s, busy %lld ms)", readonly ? "readonly" : "readwrite", wal ? ", wal" : "",
           create ? "" : ", no create", (long long)busy);
  lua_pushstring(L, path);
  lua_pushstring(L, key);
  lua_concat(L, 2);
  const char *full_key = lua_tostring(L, -1);
  sql_conn *c = NULL;
  for (sql_conn *p = *list; p; p = p->next)
    if (strcmp(p->key, full_key) == 0) c = p;
  const char *how = "reused";
  if (!c) {
    sqlite3 *db = NULL;
    int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) |
                SQLITE_OPEN_FULLMUTEX;
    int rc = sqlite3_open_v2(path, &db, flags, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(db, busy > INT32_MAX ? INT32_MAX : (int)busy);
    /* Temporary tables and big sorts in memory: a file in the system's
     * temporary folder is outside what a confined server may write (and
     * Landlock would refuse it). */
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA temp_store = MEMORY", NULL, NULL, NULL);
    if (rc == SQLITE_OK && wal) rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
      lua_pushnil(L);
      lua_pushfstring(L, "%s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
      lua_pushstring(L, rc == SQLITE_CANTOPEN ? "ENOENT" : rc == SQLITE_PERM || rc == SQLITE_READONLY ? "EACCES" : "EIO");
      sqlite3_close_v2(db);
      return 3;
    }
    sqlite3_extended_result_codes(db, 0);
    c = calloc(1, sizeof *c);
    c->db = db;
    c->busy_ms = busy > INT32_MAX ? INT32_MAX : (int)busy;
    c->in_memory = strcmp(path, ":memory:") == 0;
    refresh_mode(c);
    c->key = strdup(full_key);
    c->loop = v->loop;
    c->list_head = list;
    c->next = *list;
    *list = c;
    teardown_add(v->app ? &v->app->on_stop : &v->on_end, &c->stopped, conn_stop);
    how = "new";
  }
  conn_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->conn = c;
  c->refs++;
  luaL_setmetatable(L, CONN_MT);
  lua_pushstring(L, how);
  return 2;
}

void lua_sqlite_register(lua_State *L, int module_idx) {
  static const luaL_Reg methods[] = {{"exec", conn_exec},   {"query", conn_query}, {"first", conn_first},
                                     {"_begin", conn_begin}, {"_commit", conn_commit}, {"_abort", conn_abort},
                                     {"close", conn_close}, {"stats", conn_stats}, {NULL, NULL}};
  if (luaL_newmetatable(L, CONN_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, conn_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, conn_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_getfield(L, -1, "__index");
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "methods"); /* sqlite.lua adds transaction() */
  lua_pushcfunction(L, sqlite_open);
  lua_setfield(L, -2, "open");
  lua_pushstring(L, sqlite3_libversion());
  lua_setfield(L, -2, "version");
  lua_setfield(L, module_idx, "sqlite");
  lua_pop(L, 2);
}

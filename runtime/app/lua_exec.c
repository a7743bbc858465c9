/*
 * lua_exec.c - mcp.exec: run a program without a shell, without blocking.
 *
 *   local r = mcp.exec { argv = { "git", "log", "-1" }, cwd = "/repo", timeout_ms = 5000 }
 *   -- r.code, r.signal, r.stdout, r.stderr, r.timed_out, r.truncated, r.pid
 *
 * The calling task waits (yields) while the child runs. The child is its
 * own process group; on timeout, on cancellation of the call, or when the
 * server exits, the whole group gets SIGTERM and, after a grace period,
 * SIGKILL; a server killed outright takes the child with it (os/proc.h).
 * libuv reaps every child, so none is left a zombie. With
 * stream = function(chunk, which) the output is also delivered as it
 * arrives, in the task's own coroutine.
 */
#include <lauxlib.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/luamcp_limits.h"
#include "core/log.h"
#include "app/app.h"
#include "app/otel.h"
#include "app/lua_exec.h"
#include "app/lua_task.h"
#include "os/proc.h"

/* A chunk of output waiting to be handed to the stream function. */
typedef struct exec_chunk {
  struct exec_chunk *next;
  bool is_stderr;
  size_t len;
  char data[];
} exec_chunk;

/* One mcp.exec: a child process and what it said. Owner: its vm (listed in
 * vm->on_end while it runs) and the waiting task together; created by lua_exec, freed once every
 * handle is closed AND the task has let go of it (op->task NULL: it took
 * the result in exec_continue, or it went away). The handles can close
 * while the task's resume still waits in the deferred queue (another
 * handler was computing), so closing alone must not free what
 * exec_continue is about to read. A task that goes away first (cancelled,
 * timed out) has the process killed and reaped all the same. */
typedef struct exec_op {
  task_op op; /* first member: the task waits on it */
  task *task; /* the task that started it; NULL once that task went away */
  uv_process_t process;
  uv_pipe_t in, out, err;
  uv_timer_t timer;   /* the timeout, then the grace period before SIGKILL */
  int open_handles;
  bool streaming;
  buf output[2];      /* stdout, stderr */
  bool truncated;
  size_t max_output;
  bool out_eof, err_eof, exited, finished, timed_out, term_sent;
  int64_t exit_status;
  int term_signal;
  exec_chunk *chunks, *chunks_tail;
  char *stdin_data;
  size_t stdin_len;
  uv_write_t write_req;
  uv_shutdown_t shutdown_req;
  teardown held; /* in vm->on_end: the generation kills the child if it ends first */
  otel_span *span; /* its client span (traces on), until the process is reaped or abandoned */
} exec_op;

/* The child's span ends: exited (with its code or signal), or abandoned
 * (its task went away, or it never started: error_type). */
static void end_span(exec_op *op, const char *error_type, const char *message) {
  otel_span *s = op->span;
  op->span = NULL;
  if (op->exited) otel_attr_int(s, "process.exit.code", op->exit_status);
  if (op->term_signal) otel_attr_int(s, "luamcp.exec.signal", op->term_signal);
  if (!error_type && op->timed_out) error_type = "timeout";
  else if (!error_type && (op->exit_status != 0 || op->term_signal)) error_type = "exit_status";
  if (error_type) otel_span_fail(s, error_type, message);
  otel_span_end(s);
}

static void start_span(exec_op *op, const task *t, const char *file) {
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char name[96];
  snprintf(name, sizeof name, "exec %s", base);
  op->span = otel_span_start(name, OTEL_KIND_CLIENT, &t->root->trace);
  otel_attr_str(op->span, "process.executable.name", base);
}

static void kill_with_generation(teardown *entry);

static void op_release(exec_op *op) {
  if (op->span) end_span(op, "cancelled", NULL);
  teardown_remove(&op->held);
  buf_free(&op->output[0]);
  buf_free(&op->output[1]);
  while (op->chunks) {
    exec_chunk *c = op->chunks;
    op->chunks = c->next;
    free(c);
  }
  free(op->stdin_data);
  free(op);
}

/* Free the op once both owners are done with it (see exec_op). */
static void op_maybe_release(exec_op *op) {
  if (op->open_handles == 0 && op->task == NULL) op_release(op);
}

static void on_handle_closed(uv_handle_t *h) {
  exec_op *op = h->data;
  op->open_handles--;
  op_maybe_release(op);
}

static void close_handle(exec_op *op, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

/* The process is gone and its output read (or given up on): hand the
 * result to the task, and release everything. The task runs first and the
 * handles close after: we are inside one of their callbacks, which libuv
 * goes on using once we return, and the task's Lua may give the loop a
 * turn (task_hook), which would run the close callbacks and free the op
 * under libuv (Windows: it then queued a read on the freed pipe). */
static void maybe_finish(exec_op *op) {
  if (op->finished || !op->exited || !op->out_eof || !op->err_eof) return;
  op->finished = true;
  if (op->span) end_span(op, NULL, NULL);
  uv_timer_stop(&op->timer);
  os_proc_release(&op->process);
  task *t = op->task;
  if (t && t->wait == TASK_WAIT_OP && t->wait_op == &op->op) task_resume(t, 0);
  /* Still ours: the op is freed only once its handles are closed. */
  close_handle(op, (uv_handle_t *)&op->process);
  close_handle(op, (uv_handle_t *)&op->timer);
  close_handle(op, (uv_handle_t *)&op->out);
  close_handle(op, (uv_handle_t *)&op->err);
  if (op->in.loop) close_handle(op, (uv_handle_t *)&op->in);
}

static void signal_group(exec_op *op, int signum) {
  /* No process (it never started) means pid 0, and kill(0) would signal our
   * own process group: never. */
  if (op->exited || op->finished || op->process.pid <= 0) return;
  /* The child leads its own process group: take its children along. */
  os_proc_kill(&op->process, signum);
}

static void on_kill_grace(uv_timer_t *timer) {
  exec_op *op = timer->data;
  signal_group(op, SIGKILL);
}

static void stop_child(exec_op *op) {
  if (op->exited || op->term_sent) return;
  op->term_sent = true;
  signal_group(op, SIGTERM);
  uv_timer_start(&op->timer, on_kill_grace, EXEC_KILL_GRACE_MS, 0);
}

static void on_timeout(uv_timer_t *timer) {
  exec_op *op = timer->data;
  op->timed_out = true;
  stop_child(op);
}

static void on_child_exit(uv_process_t *p, int64_t status, int term_signal) {
  exec_op *op = p->data;
  op->exited = true;
  op->exit_status = status;
  op->term_signal = term_signal;
  maybe_finish(op);
}

/* task_op.cancel: the task went away; the child must not outlive it. */
static void cancel_op(task_op *base) {
  exec_op *op = (exec_op *)base;
  op->task = NULL;
  stop_child(op);
  op_maybe_release(op);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

static void on_output(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
  exec_op *op = stream->data;
  bool is_err = stream == (uv_stream_t *)&op->err;
  if (n > 0) {
    buf *out = &op->output[is_err];
    size_t room = out->len < op->max_output ? op->max_output - out->len : 0;
    size_t keep = (size_t)n < room ? (size_t)n : room;
    if (keep) buf_append(out, b->base, keep);
    if (keep < (size_t)n) op->truncated = true; /* keep reading, so the child never blocks on a full pipe */
    if (op->streaming && op->task && keep) {
      exec_chunk *c = malloc(sizeof *c + keep);
      c->next = NULL;
      c->is_stderr = is_err;
      c->len = keep;
      memcpy(c->data, b->base, keep);
      if (op->chunks_tail) op->chunks_tail->next = c;
      else op->chunks = c;
      op->chunks_tail = c;
      task *t = op->task;
      if (t->wait == TASK_WAIT_OP && t->wait_op == &op->op) task_resume(t, 0);
    }
  }
  free(b->base);
  if (n < 0) {
    uv_read_stop(stream);
    if (is_err) op->err_eof = true;
    else op->out_eof = true;
    maybe_finish(op);
  }
}

static void on_stdin_closed(uv_shutdown_t *req, int status) {
  (void)status;
  exec_op *op = req->data;
  close_handle(op, (uv_handle_t *)&op->in);
}

static void on_stdin_written(uv_write_t *req, int status) {
  exec_op *op = req->data;
  if (status < 0 || uv_shutdown(&op->shutdown_req, (uv_stream_t *)&op->in, on_stdin_closed) != 0)
    close_handle(op, (uv_handle_t *)&op->in);
}

/* Build the result table (the op has finished). */
static void push_result(lua_State *L, exec_op *op) {
  lua_createtable(L, 0, 7);
  lua_pushinteger(L, op->process.pid);
  lua_setfield(L, -2, "pid");
  lua_pushinteger(L, op->exit_status);
  lua_setfield(L, -2, "code");
  lua_pushinteger(L, op->term_signal);
  lua_setfield(L, -2, "signal");
  lua_pushlstring(L, op->output[0].data ? op->output[0].data : "", op->output[0].len);
  lua_setfield(L, -2, "stdout");
  lua_pushlstring(L, op->output[1].data ? op->output[1].data : "", op->output[1].len);
  lua_setfield(L, -2, "stderr");
  lua_pushboolean(L, op->timed_out);
  lua_setfield(L, -2, "timed_out");
  lua_pushboolean(L, op->truncated);
  lua_setfield(L, -2, "truncated");
}

/* Where the task comes back to, after each event: hand queued chunks to
 * the stream function (slot 2), then either return the result or wait
 * again. Slot 1 holds the op as light userdata. */
static int exec_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  exec_op *op = lua_touserdata(L, 1);
  task *t = task_of(L);
  if (op->chunks) {
    exec_chunk *c = op->chunks;
    op->chunks = c->next;
    if (!op->chunks) op->chunks_tail = NULL;
    lua_settop(L, 2);
    lua_pushvalue(L, 2);
    lua_pushlstring(L, c->data, c->len);
    lua_pushstring(L, c->is_stderr ? "stderr" : "stdout");
    free(c);
    lua_callk(L, 2, 0, 0, exec_continue);
    return exec_continue(L, LUA_OK, 0);
  }
  if (op->finished) {
    push_result(L, op);
    op->task = NULL;
    op_maybe_release(op);
    return 1;
  }
  return task_wait_op(L, t, &op->op, exec_continue);
}

static char *dup_string_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  char *s = NULL;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "mcp.exec: %s must be a string", name);
    s = strdup(lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  return s;
}

char **exec_string_list(lua_State *L, int list_idx, const char *api, const char *what, bool env) {
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, list_idx)) {
    n++;
    lua_pop(L, 1);
  }
  char **out = lua_newuserdatauv(L, (n + 1) * sizeof *out, 0);
  size_t i = 0;
  if (env) {
    luaL_checkstack(L, (int)n + 8, "too many environment variables");
    lua_pushnil(L);
    while (lua_next(L, list_idx)) {
      if (lua_type(L, -2) != LUA_TSTRING || (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER))
        luaL_error(L, "%s: %s must map names to strings", api, what);
      /* A confined server's child gets no loader variables: LD_PRELOAD
       * would run the caller's code inside an allowed program. */
      if (os_proc_drops_variable(lua_tostring(L, -2))) {
        log_write(LOG_WARNING, "%s: %s left out of the child's environment: the server is confined", api,
                  lua_tostring(L, -2));
        lua_pop(L, 1);
        continue;
      }
      const char *entry = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
      out[i++] = (char *)entry;
      lua_insert(L, -3); /* keep the string below the key and value */
      lua_pop(L, 1);
    }
  } else {
    for (i = 0; i < n; i++) {
      lua_rawgeti(L, list_idx, (lua_Integer)i + 1);
      if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: %s must be a list of strings", api, what);
      out[i] = (char *)lua_tostring(L, -1);
      lua_pop(L, 1); /* still referenced by the list */
    }
  }
  out[i] = NULL;
  return out;
}

int lua_exec(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  task *t = task_check(L, "mcp.exec");
  vm *v = t->vm;
  lua_getfield(L, 1, "argv");
  if (lua_type(L, -1) != LUA_TTABLE || lua_rawlen(L, -1) == 0)
    return luaL_error(L, "mcp.exec needs argv, a list such as {\"ls\", \"-l\"} (no shell is used)");
  int argv_idx = lua_gettop(L);
  char **argv = exec_string_list(L, argv_idx, "mcp.exec", "argv", false);
  /* file: what to run, when it is not argv[1] found on PATH (a confined
   * server runs the resolved program and keeps argv[0] as given). */
  lua_getfield(L, 1, "file");
  const char *file = lua_isnil(L, -1) ? argv[0] : luaL_checkstring(L, -1);
  char **env = NULL;
  lua_getfield(L, 1, "env");
  int env_idx = lua_gettop(L);
  if (!lua_isnil(L, env_idx)) {
    luaL_checktype(L, env_idx, LUA_TTABLE);
    env = exec_string_list(L, env_idx, "mcp.exec", "env", true);
  }
  lua_getfield(L, 1, "stdin");
  size_t stdin_len = 0;
  const char *stdin_data = lua_isnil(L, -1) ? NULL : luaL_checklstring(L, -1, &stdin_len);
  lua_getfield(L, 1, "timeout_ms");
  lua_Integer timeout_ms = luaL_optinteger(L, -1, 0);
  lua_getfield(L, 1, "max_output_bytes");
  lua_Integer max_output = luaL_optinteger(L, -1, DEFAULT_EXEC_MAX_OUTPUT_BYTES);
  lua_getfield(L, 1, "stream");
  bool streaming = !lua_isnil(L, -1);
  if (streaming) luaL_checktype(L, -1, LUA_TFUNCTION);
  char *cwd = dup_string_field(L, 1, "cwd");

  exec_op *op = calloc(1, sizeof *op);
  op->op.cancel = cancel_op;
  op->task = t;
  op->streaming = streaming;
  op->max_output = max_output > 0 ? (size_t)max_output : 0;
  uv_loop_t *loop = v->loop;
  uv_pipe_init(loop, &op->out, 0);
  uv_pipe_init(loop, &op->err, 0);
  uv_timer_init(loop, &op->timer);
  op->out.data = op->err.data = op->timer.data = op->process.data = op;
  op->open_handles = 3; /* out, err, timer; the process and stdin join below */
  uv_stdio_container_t stdio[3];
  if (stdin_data) {
    uv_pipe_init(loop, &op->in, 0);
    op->in.data = op;
    op->open_handles++;
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&op->in;
  } else {
    stdio[0].flags = UV_IGNORE; /* /dev/null */
  }
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&op->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&op->err;
  uv_process_options_t options = {
      .exit_cb = on_child_exit,
      .file = file,
      .args = argv,
      .env = env,
      .cwd = cwd,
      .stdio_count = 3,
      .stdio = stdio,
  };
  /* Its own process group, killed as one, and killed with the server
   * whatever ends it (SIGKILL included): see os/proc.h. */
  if (otel_on && t->root->trace.set) start_span(op, t, argv[0]);
  int rc = os_proc_spawn(loop, &op->process, &options);
  free(cwd);
  if (op->span && rc == 0) otel_attr_int(op->span, "process.pid", op->process.pid);
  if (op->span && rc != 0) end_span(op, uv_err_name(rc), uv_strerror(rc));
  teardown_add(&v->on_end, &op->held, kill_with_generation);
  if (rc != 0) {
    /* An expected failure (no such program, no permission): nil, message, code. */
    op->finished = true;
    op->task = NULL;
    op->open_handles++; /* a failed spawn leaves the handle initialized: it must be closed too */
    uv_close((uv_handle_t *)&op->process, on_handle_closed);
    uv_close((uv_handle_t *)&op->out, on_handle_closed);
    uv_close((uv_handle_t *)&op->err, on_handle_closed);
    uv_close((uv_handle_t *)&op->timer, on_handle_closed);
    if (op->in.loop) uv_close((uv_handle_t *)&op->in, on_handle_closed);
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", argv[0], uv_strerror(rc));
    lua_pushstring(L, uv_err_name(rc));
    return 3;
  }
  op->open_handles++; /* the process handle */
  uv_read_start((uv_stream_t *)&op->out, on_alloc, on_output);
  uv_read_start((uv_stream_t *)&op->err, on_alloc, on_output);
  if (stdin_data) {
    op->stdin_data = malloc(stdin_len ? stdin_len : 1);
    memcpy(op->stdin_data, stdin_data, stdin_len);
    op->stdin_len = stdin_len;
    op->write_req.data = op->shutdown_req.data = op;
    uv_buf_t b = uv_buf_init(op->stdin_data, (unsigned)stdin_len);
    if (uv_write(&op->write_req, (uv_stream_t *)&op->in, &b, 1, on_stdin_written) != 0)
      close_handle(op, (uv_handle_t *)&op->in);
  }
  if (timeout_ms > 0) uv_timer_start(&op->timer, on_timeout, (uint64_t)timeout_ms, 0);
  /* Slot 1: the op; slot 2: the stream function (or nil). */
  lua_getfield(L, 1, "stream");
  lua_pushlightuserdata(L, op);
  lua_replace(L, 1);
  lua_replace(L, 2);
  lua_settop(L, 2);
  return task_wait_op(L, t, &op->op, exec_continue);
}

/* vm->on_end: the generation is going away, its task with it: kill the
 * child. Its handles close later: the op is freed in the last close
 * callback. */
static void kill_with_generation(teardown *entry) {
  exec_op *op = (exec_op *)((char *)entry - offsetof(exec_op, held));
  op->task = NULL;
  signal_group(op, SIGKILL);
  op_maybe_release(op);
}

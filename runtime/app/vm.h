/*
 * vm.h - the Lua side of the runtime: a generation of loaded scripts (vm),
 * the coroutines that run requests (task), and the app_ops the protocol
 * core calls.
 *
 * Only vm.c, lua_task.c, lua_core.c and lua_json.c include Lua headers.
 */
#ifndef LUAMCP_VM_H
#define LUAMCP_VM_H

#include <lua.h>
#include <stdbool.h>
#include <uv.h>

#include "buf.h"
#include "bundle.h"
#include "server.h"
#include "luamcp_limits.h"
#include "strmap.h"

typedef struct vm vm;
typedef struct task task;

/* One generation of the scripts: a Lua state and everything registered in
 * it. Owner: the lua_app; freed by vm_free when it is no longer current and
 * its last task has ended. */
struct vm {
  lua_State *L;
  server *srv;
  uv_loop_t *loop;
  char *path;             /* the script file or folder given to luamcp */
  char *module_dir;       /* where require looks first */
  const bundle *bundle;   /* a built program's scripts (not owned); NULL: they are at path */
  /* Generations (reload.c). */
  unsigned generation;    /* 1 for the first load, then one more per reload */
  struct lua_app *app;    /* the app it belongs to, or NULL (luamcp build) */
  bool retired;           /* replaced by a newer generation; freed once drained */
  vm *next_retired;
  vm *previous;           /* while loading: the generation being replaced (mcp.state) */
  int state_ref;          /* registry: the mcp.state table */
  char **files;           /* the script and module files it loaded from disk */
  size_t file_count;
  int dispatch_ref;       /* mcp._dispatch(method, params, ctx, check) */
  int describe_ref;       /* mcp._describe() */
  int live_tasks;
  char *server_info_json; /* last describe: serverInfo */
  char *instructions;     /* last describe: instructions, or NULL */
  strmap tool_inputs;     /* tool name -> what tools/call validates (lua_schema.c) */
  /* Limits (lua_task.c, and the allocator in vm.c). */
  size_t mem_used, mem_limit; /* bytes the Lua state holds, and its cap (0: none) */
  int default_timeout_ms;     /* a call's deadline unless its tool says otherwise (0: none) */
  task *running;              /* the task inside lua_resume right now, innermost */
  task *deferred, *deferred_tail; /* tasks with an event that arrived while another ran */
  struct exec_op *execs;      /* child processes still running (lua_exec.c) */
  /* Finished coroutines kept for the next tasks: a new thread, its stack
   * and call frames cost more than the rest of a simple call. */
  lua_State *idle_threads[TASK_THREAD_POOL];
  int idle_refs[TASK_THREAD_POOL];
  int idle_count;
};

/* What a task is waiting for between resumes. */
typedef enum task_wait {
  TASK_NOT_WAITING, /* running, or ready to run */
  TASK_WAIT_TIMER,  /* mcp.sleep */
  TASK_WAIT_CLIENT, /* a reply to a request we sent the client */
  TASK_WAIT_OP,     /* mcp.exec or mcp.fs: see wait_op */
  TASK_WAIT_TASK,   /* another task to finish (handle:wait, mcp.all) */
} task_wait;

/* An operation a task waits on (a child process, a file request). Owner:
 * the module that started it; cancel() is called when the task ends before
 * the operation does, and must make sure the task is never resumed by it. */
typedef struct task_op {
  void (*cancel)(struct task_op *op);
} task_op;

/* A coroutine the runtime resumes: one per request (its root task), plus one
 * per mcp.spawn inside it. Owner: its vm; created by task_start_call or
 * mcp.spawn, freed when the coroutine ends, its call is cancelled or its
 * deadline passes. The coroutine is anchored in the registry (co_ref) while
 * the task lives, and its extra space points back at the task. */
struct task {
  vm *vm;
  lua_State *co;
  int co_ref;
  call *call;             /* root: the request it answers; NULL once detached */
  task *root;             /* the call's root task (itself for the root) */
  task *children;         /* root: tasks spawned inside the call ... */
  task *next_child, *prev_child; /* ... linked here */
  struct task_handle *handle; /* spawned: its mcp.Task handle, while it runs */
  int handle_ref;         /* spawned: keeps the handle alive while it runs */
  task *waiter;           /* a task waiting for this one to finish */
  struct ctx_handle *ctx; /* root: the ctx userdata given to the handler */
  task_wait wait;
  task_op *wait_op;       /* TASK_WAIT_OP: the operation */
  long long client_request_id; /* TASK_WAIT_CLIENT: our request's id ... */
  session *client_session;     /* ... and the session it went to */
  uint64_t deadline_ns;   /* root: when the call must be done (uv_hrtime), 0: never */
  int timeout_ms;         /* root: that limit, for the message */
  bool running;           /* inside lua_resume right now */
  bool cancelled;         /* stop it; free it as soon as it stops running */
  bool timed_out;         /* root: the deadline passed */
  bool in_deferred;       /* queued in vm->deferred */
  int deferred_nargs;     /* values waiting on its stack for that resume */
  task *deferred_next;
  bool timer_initialized; /* mcp.sleep and client timeouts */
  uv_timer_t timer;
  bool deadline_timer_initialized;
  bool deadline_armed;    /* root: deadline_timer runs while it waits */
  uv_timer_t deadline_timer;
  int open_handles;       /* timers still closing; the task is freed after */
};

/* Load the scripts at path into a new generation. On failure returns NULL
 * with the error (file and line) in err. With a source bundle the scripts
 * come from it instead, and path only names them (the default server name). */
vm *vm_new(server *srv, uv_loop_t *loop, const char *path, const bundle *source, vm *previous, buf *err);
void vm_free(vm *v);

/* The vm a Lua state belongs to (the allocator's userdata). */
vm *vm_of(lua_State *L);

/* The task running on co, or NULL when co is not one of ours (the main
 * thread, or a coroutine a script created itself). */
task *task_of(lua_State *co);
void task_start_call(vm *v, call *c, const json_value *params);
void task_cancel(task *t);
/* Resume a waiting task with nargs values already pushed on its stack. If
 * another task is running (a long computation let the loop read), the
 * resume is queued until it stops. */
void task_resume(task *t, int nargs);
/* Start waiting on an operation (mcp.exec, mcp.fs) and yield. */
int task_wait_op(lua_State *co, task *t, task_op *op, lua_KFunction k);
/* The task calling a yielding API from co, or a Lua error saying why that
 * is not possible here. */
task *task_check(lua_State *co, const char *what);
/* Make the coroutine library tell the watchdog which Lua thread runs, and
 * start the watchdog (once per process). */
void task_guard_coroutines(lua_State *L);
int task_lua_spawn(lua_State *L);
void task_register_handle(lua_State *L);

/* mcp.exec and mcp.fs (lua_exec.c, lua_fs.c). */
int lua_exec(lua_State *L);
void lua_exec_kill_all(vm *v);
void lua_fs_register(lua_State *L, int module_idx);

/* JSON Schemas (lua_schema.c). */
void lua_schema_register(lua_State *L);
int lua_schema_compile(lua_State *L);
int lua_schema_validate(lua_State *L);
int lua_schema_tool_input(lua_State *L);
void lua_schema_forget_tools(vm *v);
/* Check a tools/call's arguments against the tool's inputSchema. Pushes nil
 * (valid, or nothing to check) or {text, errors}; with coercion on, may
 * replace params[params_idx].arguments with the corrected value. Sets
 * *timeout_ms to the tool's own limit when it has one. */
void lua_schema_check_call(lua_State *co, vm *v, const json_value *params, int params_idx, int *timeout_ms);

/* The mcp.core module (lua_core.c). */
int luaopen_mcp_core(lua_State *L);
/* The mcp.bundle module (lua_bundle.c). */
int luaopen_mcp_bundle(lua_State *L);
/* Context methods and metatable (lua_task.c). The methods table is also
 * registry[TASK_CTX_METHODS], where the library adds its Lua methods. */
#define TASK_CTX_METHODS "mcp.Context.methods"
void task_register_ctx(lua_State *L);
int task_lua_sleep(lua_State *L);

/* A directory watched for script changes (luamcp dev). Owner: the app. */
typedef struct app_watch {
  uv_fs_event_t handle;
  char *dir;
  struct lua_app *app;
  struct app_watch *next;
} app_watch;

/* The app behind the server: the generation new requests go to, and older
 * generations still finishing their calls. Owner: main, for the life of the
 * process (app_start .. app_stop). */
typedef struct lua_app {
  server *srv;
  uv_loop_t *loop;
  const char *path;
  const bundle *source;
  vm *current;
  vm *retired;            /* replaced generations with calls still running */
  unsigned generations;   /* loaded so far */
  unsigned reloads, failed_reloads;
  bool watch;             /* luamcp dev: reload when a script changes */
  app_watch *watches;
  uv_timer_t debounce;    /* one reload for a burst of file events */
  uv_signal_t sighup;     /* reload on SIGHUP, in run and dev */
  uv_check_t reaper;      /* frees drained generations outside any task */
} lua_app;

/* Load the first generation and start watching (watch) and SIGHUP. */
bool app_start(lua_app *app, server *srv, uv_loop_t *loop, const char *path, const bundle *source, bool watch,
               buf *err);
/* Load a new generation and swap it in, or keep the current one and report
 * why not. */
bool app_reload(lua_app *app, const char *why);
/* A retired generation's last task ended (called from task_free). */
void app_generation_drained(vm *v);
/* Close the app's handles and free every generation. */
void app_stop(lua_app *app);
/* How many generations are alive (current + retired). */
int app_generations_open(const lua_app *app);
/* mcp.state and mcp.info (reload.c). */
int reload_lua_state(lua_State *L);
int reload_lua_info(lua_State *L);

/* The app_ops over a lua_app. */
extern const app_ops VM_APP_OPS;

/* Raise the JSON-RPC error {code, message, data} from Lua (used by the
 * library through mcp.core.rpc_error). */
#define VM_RPC_ERROR_MT "mcp.rpc_error"

#endif

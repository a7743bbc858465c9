/*
 * app.h - the types every file of the app layer shares: a generation of
 * loaded scripts (vm), the coroutines that run requests (task), and the app
 * that owns the generations (lua_app). Types only: each file's functions
 * are declared in its own header, so the includes show who calls whom, and
 * they point one way:
 *
 *   reload.c -> vm.c -> lua_core.c -> lua_exec.c, lua_fs.c -> task_wait.c -> lua_task.c
 *                                  -> task_ctx.c -> task_wait.c, lua_task.c
 *                                  -> lua_schema.c, lua_state.c, lua_json.c
 *
 * A generation tells its owner that it has drained through a hook
 * (vm.on_drained), not a call, so lua_task.c needs nothing above it; and
 * what the APIs hold is stopped through the teardown lists (teardown.h),
 * so vm.c and reload.c call none of them back.
 */
#ifndef LUAMCP_APP_H
#define LUAMCP_APP_H

#include <lua.h>
#include <stdbool.h>
#include <uv.h>

#include "core/buf.h"
#include "core/bundle.h"
#include "core/server.h"
#include "core/session.h"
#include "core/luamcp_limits.h"
#include "core/strmap.h"
#include "os/dynlib.h"
#include "os/signals.h"
#include "core/trace.h"
#include "app/teardown.h"

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
  /* Called (from task code) when a retired generation's last task ends: the
   * owner frees it later, outside any task. Set by reload.c; NULL: nobody
   * waits for it. */
  void (*on_drained)(vm *v);
  bool retired;           /* replaced by a newer generation; freed once drained */
  vm *next_retired;
  vm *previous;           /* while loading: the generation being replaced (mcp.state) */
  int state_ref;          /* registry: the mcp.state table */
  char **files;           /* the script and module files it loaded from disk */
  size_t file_count;
  int dispatch_ref;       /* mcp._dispatch(method, params, ctx, check) */
  int foreign_dispatch_ref; /* mcp._foreign_dispatch(method, params, ctx): a foreign session's calls (A2A) */
  /* The string "isError", kept: a result is checked for it on every call
   * when calls are counted, and pushing the literal would go through
   * Lua's string cache, which it thrashes (~1000 instructions a call). */
  int is_error_ref;
  int describe_ref;       /* mcp._describe() */
  int live_tasks;
  task *tasks;            /* every live task (task.live_next): freed at the latest by vm_free */
  /* Results whose long strings a transport still writes (lua_task.c's
   * leases): the generation stays until they are written too. */
  int leases;
  struct task_lease *lease_list;
  /* Bytes of big arguments let go since the last full collection this
   * runtime asked for (lua_task.c). */
  size_t big_garbage;
  char *server_info_json; /* last describe: serverInfo */
  char *instructions;     /* last describe: instructions, or NULL */
  char *extensions_json;  /* last describe: capabilities.extensions (JSON object), or NULL */
  char *cache_json;       /* last describe: server/discover's cache hints, or NULL */
  char *param_headers;    /* last describe: the tools' Mcp-Param-* headers, or NULL */
  char *auth_json;        /* last describe: mcp.server{auth} as JSON, or NULL */
  strmap tool_inputs;     /* tool name -> what tools/call validates (lua_schema.c) */
  /* Limits (lua_task.c, and the allocator in vm.c). */
  size_t mem_used, mem_limit; /* bytes the Lua state holds, and its cap (0: none) */
  int default_timeout_ms;     /* a call's deadline unless its tool says otherwise (0: none) */
  uint64_t load_deadline_ns;  /* while the scripts load: when they must be done (0: none) */
  int load_timeout_ms;        /* that limit, for the message */
  struct vm_load *load;       /* while the scripts load: where they are (vm.c) */
  /* A reload's load runs in slices: task_hook yields this coroutine (the
   * script's top level) when it has computed for TASK_POLL_INTERVAL_MS, and
   * sets load_paused; NULL: the load runs to its end in one go. */
  lua_State *load_thread;
  bool load_paused;
  task *running;              /* the task inside lua_resume right now, innermost */
  task *deferred, *deferred_tail; /* tasks with an event that arrived while another ran */
  bool draining;              /* drain_deferred's loop is running: nobody else drains */
  /* What the Lua APIs hold for the generation and stop when it is freed
   * (app/teardown.h): on_end runs before its Lua state closes (child
   * processes, transfers: nothing may resume its tasks after), on_closed
   * after (connections its __gc code could still have used). */
  teardown_list on_end, on_closed;
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
  TASK_WAIT_INPUT,  /* answers to questions its MCP task asked (tasks/update) */
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
  /* root: the MCP task (tasks extension) its call became: the call was
   * answered with the task's handle, and the outcome goes to the job. The
   * store owns the job; a running job is never discarded. */
  struct job *job;
  task *root;             /* the call's root task (itself for the root) */
  task *children;         /* root: tasks spawned inside the call ... */
  task *next_child, *prev_child; /* ... linked here */
  struct task_handle *handle; /* spawned: its mcp.Task handle, while it runs */
  int handle_ref;         /* spawned: keeps the handle alive while it runs */
  task *waiter;           /* a task waiting for this one to finish */
  struct ctx_handle *ctx; /* root: the ctx userdata given to the handler ... */
  int ctx_ref;            /* ... anchored in the registry while the call runs (core.current_ctx) */
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
  task *deferred_next, *deferred_prev;
  bool timer_initialized; /* mcp.sleep and client timeouts */
  uv_timer_t timer;
  bool deadline_timer_initialized;
  bool deadline_armed;    /* root: deadline_timer runs while it waits */
  uv_timer_t deadline_timer;
  bool own_timeout;       /* root: the tool set its deadline (a task keeps it; the default does not apply) */
  size_t params_bytes;    /* root: the size of its request's params (big ones become garbage when it ends) */
  int job_poll_ms;        /* root: the pollIntervalMs its task suggests (0: the default) */
  bool promote_timer_initialized; /* root: mcp.tool{task = {after_ms = N}} ... */
  uv_timer_t promote_timer;       /* ... turns the call into a task when it fires */
  int open_handles;       /* timers still closing; the task is freed after */
  task *live_next, *live_prev; /* vm->tasks */
  bool input_timed_out;   /* TASK_WAIT_INPUT: --client-timeout passed before the answers came */
  char *tool;             /* root: the tool a tools/call runs (owned), so that messages name it */
  /* root: who made the request (a reference, auth.h), or NULL: ctx.auth,
   * the scopes checks, and what the call's MCP task keeps when the call
   * is gone. */
  auth_identity *identity;
  /* root: the request's server span (app/otel.h), parent of the spans of
   * what it does; not set while traces are off. */
  trace_ids trace;
  struct otel_span *client_span; /* TASK_WAIT_CLIENT: the span of our request to the client, or NULL */
};

/* A directory watched for script changes (luamcp dev). Owner: the app. */
typedef struct app_watch {
  uv_fs_event_t handle;
  char *dir;
  bool any_file;          /* a folder of data (skills/): any file's change reloads, not only a script's */
  struct lua_app *app;
  struct app_watch *next;
} app_watch;

/* The app behind the server: the generation new requests go to, and older
 * generations still finishing their calls. Owner: main, for the life of the
 * process (app_start .. app_stop). */
/* How a reload ended, for lua_app.on_reload: valid during the call. */
typedef struct reload_outcome {
  bool ok;
  unsigned generation; /* the one serving now (the previous one when !ok) */
  const char *why;     /* what started it ("math.lua changed") */
  const char *changed; /* ok: the lists that changed, "tools, prompts" ("" for none) */
  const char *error;   /* !ok: why the load failed (its file:line: first) */
} reload_outcome;

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
  /* mcp.server{auth} as JSON as the first generation declared it, which
   * the HTTP server was set up with: a reload cannot change it (reload.c
   * warns). Known once the first reload swaps a generation in. */
  char *auth_at_start;
  bool auth_at_start_known;
  app_watch *watches;
  uv_timer_t debounce;    /* one reload for a burst of file events */
  os_signals *signals;    /* reload on SIGHUP, in run and dev (os/signals.h) */
  uv_check_t reaper;      /* frees drained generations outside any task */
  /* A reload's generation still loading, in slices between loop turns, so
   * the current one keeps serving; NULL: none. A newer reload abandons it. */
  vm *loading;
  const char *loading_why;
  double loading_since_ms;  /* when it began (reload.c's clock, for the log) */
  uv_idle_t load_slice;   /* runs the next slice of that load, once per loop turn */
  unsigned reload_causes; /* why the reload the debounce timer will start happens (reload.c) */
  /* --redis: the link (main's, set after app_start; redis.h); NULL: the
   * store is in the process and there is no bus. */
  struct redis_link *redis;
  /* The bus to the other processes (main's, set after app_start; bus.h):
   * over Redis, or the workers' IPC; never NULL while serving. */
  struct bus *bus;
  /* mcp.store without Redis: made on first use, freed by app_stop, so it
   * outlives every generation (lua_store.c). */
  struct store_mem *store;
  /* luamcp.remote's connections to other MCP servers: made on first use,
   * they outlive generations; app_stop closes them (lua_remote.c). */
  struct remote_hub *remote;
  /* mcp.sqlite's connections: made on first use, kept across reloads (a
   * generation opening the same path with the same options gets one
   * back); app_stop closes them (lua_sqlite.c). */
  struct sql_conn *sqlite;
  /* What the Lua APIs hold for the process beyond any generation (the
   * store, the connections, libcurl's): registered on first use, run by
   * app_stop once the generations are freed (app/teardown.h). */
  teardown_list on_stop;
  /* Told how each reload ended (luamcp dev --ui shows it); NULL: nobody.
   * Owner of the hook: whoever set it, for the life of the app. */
  void (*on_reload)(void *data, const reload_outcome *r);
  void *on_reload_data;
} lua_app;


/* Raise the JSON-RPC error {code, message, data} from Lua (used by the
 * library through mcp.core.rpc_error). */
#define VM_RPC_ERROR_MT "mcp.rpc_error"
/* registry[VM_C_MODULES]: the Lua C modules the scripts loaded, name ->
 * file (luamcp build refuses them: a built program carries only Lua). */
#define VM_C_MODULES "luamcp.c_modules"
/* registry[VM_LUA_MODULES]: the Lua modules the scripts loaded through
 * package.path, name -> file (luamcp build packs them into the bundle). */
#define VM_LUA_MODULES "luamcp.lua_modules"
/* The ctx methods table, registry[TASK_CTX_METHODS]: lua_task.c fills in
 * the C methods, the library adds its Lua ones. */
#define TASK_CTX_METHODS "mcp.Context.methods"

/* False in a fully static luamcp, which cannot dlopen shared libraries
 * (libcurl for mcp.http, Lua C modules). Here, not in vm.c, so that
 * curl_lib.c, which vm.c's APIs call, calls nothing back up. */
static inline bool app_can_load_shared_libraries(void) { return os_dynlib_available(); }

/* The vm a Lua state belongs to (the allocator's userdata). */
static inline vm *vm_of(lua_State *L) {
  void *ud;
  lua_getallocf(L, &ud);
  return ud;
}

/* The task running on co, or NULL when co is not one of ours (the main
 * thread, or a coroutine a script created itself). */
static inline task *task_of(lua_State *co) { return *(task **)lua_getextraspace(co); }

/* Nothing of a generation runs or is still being written. */
static inline bool vm_drained(const vm *v) { return v->live_tasks == 0 && v->leases == 0; }

/* How many generations are alive (current + retired). */
static inline int app_generations_open(const lua_app *app) {
  int n = app->current ? 1 : 0;
  for (vm *v = app->retired; v; v = v->next_retired) n++;
  return n;
}

#endif

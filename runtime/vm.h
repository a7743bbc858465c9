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
#include "server.h"
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
  int dispatch_ref;       /* mcp._dispatch(method, params, ctx) */
  int describe_ref;       /* mcp._describe() */
  int live_tasks;
  char *server_info_json; /* last describe: serverInfo */
  char *instructions;     /* last describe: instructions, or NULL */
  strmap tool_inputs;     /* tool name -> what tools/call validates (lua_schema.c) */
};

/* What the task is waiting for between resumes. */
typedef enum task_wait {
  TASK_RUNNING_OR_READY,
  TASK_WAIT_TIMER,
  TASK_WAIT_CLIENT, /* a reply to a request we sent the client */
} task_wait;

/* A coroutine the runtime resumes: one per request. Owner: its vm; created
 * by task_start_call, freed when the coroutine ends or its call is
 * cancelled. The coroutine is anchored in the registry (co_ref) while the
 * task lives, and its extra space points back at the task. */
struct task {
  vm *vm;
  lua_State *co;
  int co_ref;
  call *call;             /* the request it answers; NULL once detached */
  struct ctx_handle *ctx; /* the ctx userdata given to the handler */
  task_wait wait;
  long long client_request_id; /* TASK_WAIT_CLIENT: our request's id ... */
  session *client_session;     /* ... and the session it went to */
  bool running;           /* inside lua_resume right now */
  bool cancelled;         /* free it as soon as it stops running */
  bool timer_initialized;
  uv_timer_t timer;
};

/* Load the scripts at path into a new generation. On failure returns NULL
 * with the error (file and line) in err. */
vm *vm_new(server *srv, uv_loop_t *loop, const char *path, buf *err);
void vm_free(vm *v);

/* The task running on co, or NULL when co is not one of ours (the main
 * thread, or a coroutine a script created itself). */
task *task_of(lua_State *co);
void task_start_call(vm *v, call *c, const json_value *params);
void task_cancel(task *t);
/* Resume a waiting task with nargs values already pushed on its stack. */
void task_resume(task *t, int nargs);

/* JSON Schemas (lua_schema.c). */
void lua_schema_register(lua_State *L);
int lua_schema_compile(lua_State *L);
int lua_schema_validate(lua_State *L);
int lua_schema_tool_input(lua_State *L);
void lua_schema_forget_tools(vm *v);
/* Check a tools/call's arguments against the tool's inputSchema. Pushes nil
 * (valid, or nothing to check) or {text, errors}; with coercion on, may
 * replace params[params_idx].arguments with the corrected value. */
void lua_schema_check_call(lua_State *co, vm *v, const json_value *params, int params_idx);

/* The mcp.core module (lua_core.c). */
int luaopen_mcp_core(lua_State *L);
/* Context methods and metatable (lua_task.c). The methods table is also
 * registry[TASK_CTX_METHODS], where the library adds its Lua methods. */
#define TASK_CTX_METHODS "mcp.Context.methods"
void task_register_ctx(lua_State *L);
int task_lua_sleep(lua_State *L);

/* The app behind the server: the generation new requests go to. Owner:
 * main, for the life of the process. */
typedef struct lua_app {
  vm *current;
} lua_app;

/* The app_ops over a lua_app. */
extern const app_ops VM_APP_OPS;

/* Raise the JSON-RPC error {code, message, data} from Lua (used by the
 * library through mcp.core.rpc_error). */
#define VM_RPC_ERROR_MT "mcp.rpc_error"

#endif

/*
 * task_internal.h - what the three files of the tasks share and nobody
 * else uses: lua_task.c (a task's life), task_wait.c (what it waits on)
 * and task_ctx.c (ctx, its face for the scripts). The two latter call the
 * first, never the other way (lua_task.h is the tasks' face for the rest
 * of the app).
 */
#ifndef LUAMCP_TASK_INTERNAL_H
#define LUAMCP_TASK_INTERNAL_H

#include "app/app.h"

#define CTX_MT "mcp.Context"
#define TASK_HANDLE_MT "mcp.Task"

/* The ctx userdata a handler receives. Owner: Lua's GC; the root task
 * points at it and clears `task` when it ends, so a ctx kept past its
 * request fails cleanly instead of touching freed memory; and when the GC
 * takes it first (the handler returned), its __gc clears the task's
 * pointer. */
typedef struct ctx_handle {
  task *task;
} ctx_handle;

typedef enum handle_state { HANDLE_RUNNING, HANDLE_FINISHED, HANDLE_CANCELLED } handle_state;

/* What mcp.spawn returns. Owner: Lua's GC. While the task runs, the task
 * keeps the handle alive (handle_ref); once it has finished, the handle
 * keeps the finished coroutine, whose stack holds the results (results_ref),
 * until they are collected by wait() or the handle is garbage. */
typedef struct task_handle {
  task *task;
  handle_state state;
  bool ok;
  int nresults;
  lua_State *results_co;
  int results_ref;
  vm *vm;
} task_handle;

/* ---- lua_task.c ---- */

/* A new task of v: a root (root NULL) or one spawned inside root's call. */
task *task_new(vm *v, task *root);
/* Does the root still owe an answer (to its call, or to the MCP task its
 * call became)? */
bool task_has_destination(const task *root);
/* What log lines call a request ("tool add", or its method), in out. */
const char *task_answer_subject(const task *t, char *out, size_t cap);
/* Answer the root's call or MCP task: a result (ok) or an error. */
void task_answer(task *t, bool ok, const char *json, size_t len, int code, const char *message);
/* Stop waiting for the client's reply, and tell the client we no longer
 * need it. */
void task_cancel_client_request(task *t);
/* The span of a request to the client ends (error_type NULL: answered). */
void task_end_client_span(task *t, const char *error_type);

/* ---- task_wait.c ---- */

/* ctx:_request's wait: send method with the params table at params_idx to
 * the client on call c's stream and yield until it answers (the method's
 * name must be in slot 2, which is all the stack keeps). */
int task_request_client(lua_State *co, task *t, call *c, const char *method, int params_idx);

#endif

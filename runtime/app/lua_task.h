/*
 * lua_task.h - the coroutines that run requests: starting, resuming, cancelling
 * and limiting them; ctx, mcp.sleep and mcp.spawn.
 */
#ifndef LUAMCP_LUA_TASK_H
#define LUAMCP_LUA_TASK_H

#include "app/app.h"

void task_start_call(vm *v, call *c, const json_value *params);
/* The generation is being freed: results still being written no longer
 * point at it (their strings go with it; transports have stopped by then). */
void task_orphan_leases(vm *v);
/* tasks/update answered questions of the MCP task j: resume the tasks of its
 * call that have all their answers now. */
void task_job_answered(struct job *j);
/* tasks/cancel: stop the work (the root task) behind an MCP task. */
void task_job_cancel(void *work);
void task_cancel(task *t);
/* The generation is being freed (the server stops): free every task it
 * still has, the MCP tasks waiting for answers included (theirs fail as
 * the server stops). Not while any of its Lua runs. */
void task_stop_all(vm *v);
/* A reload retired v: its MCP tasks waiting for the client's answers
 * fail now (calling the tool again runs the new scripts) instead of
 * keeping the old generation open until the client answers. */
void task_end_input_waits(vm *v);
/* Resume a waiting task with nargs values already pushed on its stack. If
 * another task is running (a long computation let the loop read), the
 * resume is queued until it stops. */
void task_resume(task *t, int nargs);
/* Start waiting on an operation (mcp.exec, mcp.fs) and yield. */
int task_wait_op(lua_State *co, task *t, task_op *op, lua_KFunction k);
/* The task calling a yielding API from co, or a Lua error saying why that
 * is not possible here. */
task *task_check(lua_State *co, const char *what);
/* The stack level of the nearest function of the scripts (not C, not the
 * library), for luaL_where: where an error the scripts caused is raised. */
int task_script_level(lua_State *co);
/* Make the coroutine library tell the watchdog which Lua thread runs, and
 * start the watchdog (once per process). */
void task_guard_coroutines(lua_State *L);
/* For C functions that loop without running Lua (the pattern matcher):
 * do now what the watchdog asked the instruction hook to do, if it did
 * (stop the call past its deadline or cancelled, or poll the loop). */
void task_interrupt_point(lua_State *L);
int task_lua_spawn(lua_State *L);
/* core.background(fn, ...) -> handle: fn(...) as a task of its own, which
 * outlives the call that started it (an A2A agent's task runs on after
 * the request that created it is answered); its handle can cancel it. */
int task_lua_background(lua_State *L);
/* core.signal() -> signal: sig:wait() waits without blocking until another
 * task calls sig:notify(), which wakes every waiter. */
int task_lua_signal(lua_State *L);
/* Push the handle of root (a root task: made on first use), with which
 * another task can cancel it; returns 1. */
int task_push_root_handle(lua_State *L, task *root);
void task_register_handle(lua_State *L);
/* Context methods and metatable (registry[TASK_CTX_METHODS]). */
void task_register_ctx(lua_State *L);
int task_lua_sleep(lua_State *L);
/* core.current_ctx(): push the ctx of the call the running coroutine works
 * for (a task spawned inside the call, or a coroutine the script made in
 * it, included) and return 1, or return 0 outside a call. */
int task_push_current_ctx(lua_State *L, vm *v);

#endif

/*
 * vm.h - one generation of the scripts: a Lua state with everything they
 * registered, and the app_ops the protocol core calls.
 */
#ifndef LUAMCP_VM_H
#define LUAMCP_VM_H

#include "app/app.h"

/* Load the scripts at path into a new generation. On failure returns NULL
 * with the error (file and line) in err. With a source bundle the scripts
 * come from it instead, and path only names them (the default server name). */
vm *vm_new(server *srv, uv_loop_t *loop, const char *path, const bundle *source, vm *previous, buf *err);
void vm_free(vm *v);

/* A reload's load, in slices, so the current generation keeps serving
 * while the new one loads (reload.c). vm_load_begin sets the generation up
 * (NULL and err if that fails); each vm_load_step then runs the scripts'
 * top level until the load is done, fails (err; the caller frees the vm)
 * or has computed for TASK_POLL_INTERVAL_MS (paused: call again after a
 * loop turn). The --load-timeout deadline runs from vm_load_begin, across
 * the slices. vm_new is the same load in one go. */
typedef enum vm_load_status { VM_LOAD_DONE, VM_LOAD_PAUSED, VM_LOAD_FAILED } vm_load_status;
vm *vm_load_begin(server *srv, uv_loop_t *loop, const char *path, const bundle *source, vm *previous, buf *err);
vm_load_status vm_load_step(vm *v, buf *err);
/* Warn on stderr about what the scripts declare they need from the
 * environment and do not get (mcp.server{config}, lua/mcp/config.lua).
 * Called once when a server starts serving, not by build or inspect, which
 * load the scripts too. */
void vm_check_environment(vm *v);

/* Call mcp.NAME(...) of the generation's library: the nargs values on top
 * of the stack are the arguments; on return the one result (true) or the
 * error message (false) replaces them. For what asks the loaded library
 * (inspect, install, build, the start line, reload's fingerprints). */
bool vm_call_library(vm *v, const char *name, int nargs);

/* Agent tasks (A2A, lua/mcp/a2a.lua) live in the generation that started
 * them, which a reload may have retired. app_foreign_holder: the
 * generation (the current one first) holding the task a foreign request
 * (method, params as JSON) names for principal, or NULL. app_foreign_lists:
 * ListTasks's share of each generation (mcp._foreign_list), appended to
 * out as JSON objects each preceded by a comma. Both skip a generation
 * whose Lua runs now (the asking one). */
vm *app_foreign_holder(lua_app *app, const char *method, const char *params_json, size_t len, const char *principal);
void app_foreign_lists(lua_app *app, const char *params_json, size_t len, const char *principal, int first, buf *out);

/* package.searchers entry: the Lua library built into the binary (also
 * the client side's, cli/client.c). */
int vm_search_embedded(lua_State *L);

/* The app_ops over a lua_app. */
extern const app_ops VM_APP_OPS;

#endif

/*
 * inspect.c - see inspect.h. A folder is inspected through the client
 * (client_inprocess.c serves it in this process): its lists are asked for
 * first, so what it mounts from other servers is fetched, and then its own
 * library describes it, with what no client sees (its permissions, when a
 * tool becomes a task).
 */
#include "cli/inspect.h"

#include <lauxlib.h>

bool inspect_generation(vm *v, bool as_json, buf *out, buf *err) {
  lua_State *L = v->L;
  lua_pushboolean(L, as_json);
  if (!vm_call_library(v, "_inspect", 1)) {
    buf_printf(err, "inspect: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return false;
  }
  size_t n;
  const char *text = lua_tolstring(L, -1, &n);
  buf_append(out, text, n);
  lua_pop(L, 1);
  return true;
}

/* start_line.c - see start_line.h. */
#include "cli/start_line.h"

#include <lauxlib.h>
#include <stdio.h>

#include "core/buf.h"
#include "core/log.h"

static lua_Integer count_field(lua_State *L, int table, const char *key) {
  lua_getfield(L, table, key);
  lua_Integer n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return n;
}

/* "demo 1.0.0: 5 tools, 3 resources, 1 prompt" from mcp._summary(). */
static bool describe(vm *v, buf *out) {
  static const struct { const char *field, *one, *many; } lists[] = {
      {"tools", "tool", "tools"},
      {"resources", "resource", "resources"},
      {"templates", "resource template", "resource templates"},
      {"prompts", "prompt", "prompts"},
  };
  lua_State *L = v->L;
  int base = lua_gettop(L);
  if (!vm_call_library(v, "_summary", 0)) goto failed;
  int summary = lua_gettop(L);
  lua_getfield(L, summary, "name");
  lua_getfield(L, summary, "version");
  bool color = log_color();
  buf_printf(out, "%s%s %s%s:", color ? "\x1b[1m" : "", lua_tostring(L, -2), lua_tostring(L, -1),
             color ? "\x1b[0m" : "");
  bool any = false;
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    lua_Integer n = count_field(L, summary, lists[i].field);
    if (n == 0) continue;
    buf_printf(out, "%s %lld %s", any ? "," : "", (long long)n, n == 1 ? lists[i].one : lists[i].many);
    any = true;
  }
  if (!any) buf_puts(out, " nothing registered yet");
  lua_settop(L, base);
  return true;
failed:
  lua_settop(L, base);
  return false;
}

void start_line_write(vm *v, const char *where, bool always) {
  if (!always && log_get_level() < LOG_INFO) return;
  buf line = BUF_INIT;
  buf_printf(&line, "%s %s", log_color() ? "\x1b[32mluamcp:\x1b[0m serving MCP" : "luamcp: serving MCP", where);
  buf what = BUF_INIT;
  if (describe(v, &what)) buf_printf(&line, " (%s)", what.data);
  buf_putc(&line, '\n');
  log_raw(line.data, line.len);
  buf_free(&what);
  buf_free(&line);
}

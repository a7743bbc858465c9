/*
 * confine.c - see confine.h. The policy: what the scripts declared
 * (lua/mcp/permissions.lua's _confinement) turned into the OS's rules
 * (os/confine.h: Landlock on Linux, none on Windows), and the log of it.
 */
#include "app/confine.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/log.h"
#include "os/confine.h"
#include "os/proc.h"

static void warn_rule(void *arg, const char *text) {
  (void)arg;
  log_write(LOG_WARNING, "confine: %s", text);
}

/* Each string of list t[field], allowed rights. */
static void allow_each(lua_State *L, int t, const char *field, os_confinement *c, unsigned rights) {
  lua_getfield(L, t, field);
  for (lua_Integer i = 1; lua_istable(L, -1) && i <= (lua_Integer)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    if (lua_type(L, -1) == LUA_TSTRING) os_confine_allow_path(c, lua_tostring(L, -1), rights);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static bool field_true(lua_State *L, int t, const char *field) {
  lua_getfield(L, t, field);
  bool on = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return on;
}

/* The folder a socket file is made in ("." for a bare name). */
static void socket_folder(const char *path, char *dir, size_t dir_len) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, dir_len, ".");
  else if (slash == path) snprintf(dir, dir_len, "/");
  else snprintf(dir, dir_len, "%.*s", (int)(slash - path), path);
}

/* The OS's rules for confinement table t; false (nothing confined) with
 * the reason in report. *notes: what the rules could not say exactly. */
static bool confine_by_os(lua_State *L, int t, const confine_port *own_ports, size_t own_port_count,
                          const char *const *own_sockets, size_t own_socket_count, char *report, size_t report_size,
                          char **notes) {
  *notes = NULL;
  /* $ROOTS are known only when a client tells them, after the process is
   * confined, and rules cannot grow: with them, files stay with the Lua
   * checks. */
  bool roots = field_true(L, t, "roots");
  os_confinement *c = os_confine_begin(!roots, !field_true(L, t, "any_port"), warn_rule, NULL, report, report_size);
  if (!c) return false;
  lua_getfield(L, t, "script_dir");
  if (lua_type(L, -1) == LUA_TSTRING) os_confine_allow_path(c, lua_tostring(L, -1), OS_CONFINE_READ); /* reloads */
  lua_pop(L, 1);
  if (!roots) {
    allow_each(L, t, "read", c, OS_CONFINE_READ);
    allow_each(L, t, "write", c, OS_CONFINE_WRITE);
  }
  allow_each(L, t, "exec", c, OS_CONFINE_EXEC);
  lua_getfield(L, t, "ports");
  for (lua_Integer i = 1; lua_istable(L, -1) && i <= (lua_Integer)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    /* permissions.lua refuses other ports; a wider value would wrap to another port here. */
    lua_Integer port = lua_tointeger(L, -1);
    if (port >= 1 && port <= 65535) os_confine_allow_port(c, (unsigned)port);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  for (size_t i = 0; i < own_port_count; i++) os_confine_allow_port(c, own_ports[i].port);
  for (size_t i = 0; i < own_socket_count; i++) {
    char dir[4096];
    socket_folder(own_sockets[i], dir, sizeof dir);
    os_confine_allow_path(c, dir, OS_CONFINE_SOCKET);
  }
  return os_confine_apply(c, report, report_size, notes);
}

/* The kernel's rules, once applied: what the first generation declared, as
 * kernel_rules() writes it; NULL while the process is not confined by the
 * OS. A reload cannot change them (Landlock only ever narrows). */
static char *applied_rules;

/* What of confinement table t the kernel enforces (files, programs,
 * ports), as one comparable string. */
static void kernel_rules(lua_State *L, int t, buf *out) {
  static const char *const lists[] = {"read", "write", "exec", "ports"};
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
    buf_printf(out, "%s:", lists[i]);
    lua_getfield(L, t, lists[i]);
    for (lua_Integer j = 1; lua_istable(L, -1) && j <= (lua_Integer)lua_rawlen(L, -1); j++) {
      lua_rawgeti(L, -1, j);
      const char *s = lua_tostring(L, -1);
      buf_printf(out, "%s\n", s ? s : "");
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  buf_printf(out, "any_port:%d roots:%d", field_true(L, t, "any_port"), field_true(L, t, "roots"));
}

void confine_after_reload(vm *fresh) {
  if (!applied_rules) return;
  lua_State *L = fresh->L;
  int top = lua_gettop(L);
  buf now = BUF_INIT;
  if (vm_call_library(fresh, "_confinement", 0)) {
    if (lua_istable(L, -1)) kernel_rules(L, lua_gettop(L), &now);
    else buf_puts(&now, "unconfined");
  }
  lua_settop(L, top);
  if (now.len && strcmp(now.data, applied_rules) != 0) {
    log_write(LOG_WARNING, "permissions changed at this reload, but the kernel rules (Landlock) stay as first loaded "
                           "until a restart: a file, program or port the new permissions add is still denied by the "
                           "kernel; restart luamcp dev to apply them");
    lua_pushstring(L, "denied by the kernel: its rules (Landlock) stay as first loaded until a restart; restart "
                      "luamcp dev to apply the permissions a reload changed");
    if (!vm_call_library(fresh, "_kernel_rules_stale", 1)) log_write(LOG_DEBUG, "confine: %s", lua_tostring(L, -1));
    lua_settop(L, top);
  }
  buf_free(&now);
}

void confine_process(vm *v, const confine_port *own_ports, size_t own_port_count, const char *const *own_sockets,
                     size_t own_socket_count) {
  lua_State *L = v->L;
  int top = lua_gettop(L);
  if (!vm_call_library(v, "_confinement", 0)) {
    log_write(LOG_ERROR, "confine: %s", lua_tostring(L, -1));
  } else if (lua_isnil(L, -1)) {
    log_write(LOG_INFO, "running unconfined: the scripts declare no permissions (mcp.server{permissions = ...}), "
                        "so their tools can read, write, run and reach whatever you can");
  } else {
    os_proc_drop_loader_variables();
    int t = lua_gettop(L);
    lua_getfield(L, t, "summary");
    log_write(LOG_INFO, "permissions: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    char report[300];
    char *notes;
    bool confined = confine_by_os(L, t, own_ports, own_port_count, own_sockets, own_socket_count, report,
                                  sizeof report, &notes);
    log_write(confined ? LOG_INFO : LOG_WARNING, "%s", report);
    /* One line per purpose: "TCP port 9000, 9001 for the OAuth ...". */
    for (size_t i = 0; confined && !field_true(L, t, "any_port") && i < own_port_count;) {
      buf list = BUF_INIT;
      size_t first = i;
      for (; i < own_port_count && own_ports[i].purpose == own_ports[first].purpose; i++)
        buf_printf(&list, "%s%u", i > first ? ", " : "", own_ports[i].port);
      log_write(LOG_INFO, "confine: luamcp itself may also connect to TCP port %s %s", list.data,
                own_ports[first].purpose);
      buf_free(&list);
    }
    for (size_t i = 0; confined && i < own_socket_count; i++) {
      char dir[4096];
      socket_folder(own_sockets[i], dir, sizeof dir);
      log_write(LOG_INFO, "confine: luamcp itself may also make its socket %s and remove files in %s (give the "
                "socket a folder of its own)", own_sockets[i], dir);
    }
    if (confined) {
      buf rules = BUF_INIT;
      kernel_rules(L, t, &rules);
      free(applied_rules);
      applied_rules = buf_detach(&rules, NULL);
    }
    if (notes) log_write(LOG_WARNING, "%s", notes);
    free(notes);
  }
  lua_settop(L, top);
}

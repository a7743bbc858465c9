/*
 * client.c - luamcp's client side: `luamcp call`, `read`, `prompt`, `test`
 * and `init` run a Lua program (lua/mcp/cli.lua, with lua/mcp/client.lua
 * and lua/mcp/testing.lua) in a Lua state of their own, separate from any
 * server's. This file gives that state its one C module, luamcp.client:
 * connections to servers (client_conn.h), the exact JSON codec servers use,
 * and the few system calls the programs need.
 *
 * The program runs outside every libuv callback; a connection lets the loop
 * turn only inside conn:receive, while the program waits for a message.
 * That is what makes an in-process server safe to drive from a busted spec.
 */
#include "cli/client.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/lua_core.h"
#include "app/lua_json.h"
#include "app/vm.h"
#include "cli/client_conn.h"
#include "cli/client_oauth.h"
#include "cli/version.h"
#include "core/log.h"
#include "core/luamcp_limits.h"
#include "os/path.h"
#include "os/self.h"
#include "os/terminal.h"

/* ---- conn userdata ------------------------------------------------------ */

#define CONN_MT "luamcp.client.conn"

typedef struct conn_ud {
  client_conn *c; /* NULL once closed */
} conn_ud;

static client_conn *check_conn(lua_State *L) {
  conn_ud *u = luaL_checkudata(L, 1, CONN_MT);
  if (!u->c) luaL_error(L, "the connection is closed");
  return u->c;
}

static int push_conn(lua_State *L, client_conn *c, buf *err) {
  if (!c) {
    lua_pushnil(L);
    lua_pushstring(L, err->data ? err->data : "cannot connect");
    buf_free(err);
    return 2;
  }
  buf_free(err);
  conn_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->c = c;
  luaL_setmetatable(L, CONN_MT);
  return 1;
}

/* true, or nil and the message in err (fallback when it is empty);
 * frees err. */
static int push_outcome(lua_State *L, bool ok, buf *err, const char *fallback) {
  if (ok) lua_pushboolean(L, 1);
  else {
    lua_pushnil(L);
    lua_pushstring(L, err->data ? err->data : fallback);
  }
  buf_free(err);
  return ok ? 1 : 2;
}

/* conn:send(json [, identity_json [, headers]]) -> true | nil, message
 * With an identity (mcp.testing's auth), the message reaches the server as
 * one whose token was verified as that caller: in process only. headers
 * ({Name = value}) go with this one request (HTTP). */
static int conn_send(lua_State *L) {
  client_conn *c = check_conn(L);
  size_t len;
  const char *json = luaL_checklstring(L, 2, &len);
  const char *identity = luaL_optstring(L, 3, NULL);
  buf err = BUF_INIT;
  if (lua_istable(L, 4) && c->ops->send_with && !identity) {
    char *lines[CLIENT_MAX_REQUEST_HEADERS];
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      const char *value = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
      if (name && value && n < CLIENT_MAX_REQUEST_HEADERS && !strpbrk(name, ":\r\n") && !strpbrk(value, "\r\n")) {
        buf line = BUF_INIT;
        buf_printf(&line, "%s: %s", name, value);
        lines[n++] = line.data; /* freed below */
      }
      lua_pop(L, 1);
    }
    bool ok = c->ops->send_with(c, json, len, lines, n, &err);
    for (int i = 0; i < n; i++) free(lines[i]);
    return push_outcome(L, ok, &err, "cannot send");
  }
  if (identity && !c->ops->send_as) {
    buf_puts(&err, "an identity (auth) can only be given to a server loaded in process");
    return push_outcome(L, false, &err, "cannot send");
  }
  bool ok = identity ? c->ops->send_as(c, json, len, identity, &err) : c->ops->send(c, json, len, &err);
  return push_outcome(L, ok, &err, "cannot send");
}

static int take_reason(lua_State *L, char **reason, const char *kind, bool clear) {
  lua_pushnil(L);
  lua_pushstring(L, *reason);
  lua_pushstring(L, kind);
  if (clear) {
    free(*reason);
    *reason = NULL;
  }
  return 3;
}

/* A failed request: nil, why, "failed", status, challenge, body, and the
 * server's last DPoP nonce. */
static int take_failure(lua_State *L, client_conn *c) {
  take_reason(L, &c->failure, "failed", true);
  if (c->failure_status) lua_pushinteger(L, c->failure_status);
  else lua_pushnil(L);
  if (c->failure_challenge) lua_pushstring(L, c->failure_challenge);
  else lua_pushnil(L);
  if (c->failure_body) lua_pushstring(L, c->failure_body);
  else lua_pushnil(L);
  if (c->dpop_nonce) lua_pushstring(L, c->dpop_nonce);
  else lua_pushnil(L);
  free(c->failure_challenge);
  free(c->failure_body);
  c->failure_challenge = c->failure_body = NULL;
  c->failure_status = 0;
  return 7;
}

/* conn:receive([timeout_ms]) -> json | nil, why, kind
 * kind: "ended" (no more messages will come), "failed" (the transport
 * failed the last request; then also the HTTP status, WWW-Authenticate
 * and body when there was one), "stream_ended" (HTTP: an SSE answer
 * stream ended; conn:stream_state says where to resume), "timeout",
 * "interrupted" (Ctrl-C, once
 * catch_interrupt() was called), or "idle" (nothing left running that
 * could ever answer). Lets the loop turn until a message comes. */
static int conn_receive(lua_State *L) {
  client_conn *c = check_conn(L);
  lua_Integer timeout = luaL_optinteger(L, 2, CLIENT_DEFAULT_TIMEOUT_MS);
  uint64_t deadline = timeout >= 0 ? uv_hrtime() + (uint64_t)timeout * 1000000u : 0;
  bool waited = false; /* even receive(0) lets the loop turn once */
  for (;;) {
    if (c->inbox) {
      client_message *m = c->inbox;
      c->inbox = m->next;
      if (!c->inbox) c->inbox_tail = NULL;
      lua_pushlstring(L, m->json, m->len);
      free(m);
      return 1;
    }
    if (c->failure) return take_failure(L, c);
    if (c->ended) return take_reason(L, &c->ended, "ended", false);
    if (c->stream_ended) {
      c->stream_ended = false;
      lua_pushnil(L);
      lua_pushliteral(L, "an answer stream ended");
      lua_pushliteral(L, "stream_ended");
      return 3;
    }
    if (client_conn_take_interrupt()) {
      lua_pushnil(L);
      lua_pushliteral(L, "interrupted");
      lua_pushliteral(L, "interrupted");
      return 3;
    }
    uint64_t now = uv_hrtime();
    if (timeout >= 0 && now >= deadline && waited) {
      lua_pushnil(L);
      lua_pushfstring(L, "no message from the server within %d ms", (int)timeout);
      lua_pushliteral(L, "timeout");
      return 3;
    }
    int left = timeout < 0 ? -1 : now >= deadline ? 0 : (int)((deadline - now) / 1000000u) + 1;
    waited = true;
    if (left < 0 || left > CLIENT_INTERRUPT_POLL_MS) left = CLIENT_INTERRUPT_POLL_MS; /* Ctrl-C is seen soon */
    if (!c->ops->wait(c, left) && !c->inbox && !c->failure && !c->ended) {
      lua_pushnil(L);
      lua_pushstring(L, c->idle_reason ? c->idle_reason
                                       : "the server has nothing running that could answer (a request it dropped?)");
      lua_pushliteral(L, "idle");
      return 3;
    }
  }
}

/* conn:reload() -> true | nil, message (in process only) */
static int conn_reload(lua_State *L) {
  client_conn *c = check_conn(L);
  if (!c->ops->reload) return luaL_error(L, "only a server loaded in process can be reloaded");
  buf err = BUF_INIT;
  bool ok = c->ops->reload(c, &err);
  return push_outcome(L, ok, &err, "the reload failed");
}

/* conn:inspect(as_json) -> text | nil, message | false: what the server's
 * own library says it serves (luamcp inspect); false for a server that
 * is not loaded in process. */
static int conn_inspect(lua_State *L) {
  client_conn *c = check_conn(L);
  bool as_json = lua_toboolean(L, 2);
  if (!c->ops->inspect) {
    lua_pushboolean(L, 0);
    return 1;
  }
  buf out = BUF_INIT, err = BUF_INIT;
  if (!c->ops->inspect(c, as_json, &out, &err)) {
    buf_free(&out);
    return push_outcome(L, false, &err, "cannot inspect the server");
  }
  lua_pushlstring(L, out.data ? out.data : "", out.len);
  buf_free(&out);
  buf_free(&err);
  return 1;
}

/* conn:set_header(name, value): HTTP only; elsewhere nothing to do. */
static int conn_set_header(lua_State *L) {
  client_conn *c = check_conn(L);
  const char *name = luaL_checkstring(L, 2), *value = luaL_checkstring(L, 3);
  if (strpbrk(name, ":\r\n") || strpbrk(value, "\r\n")) return luaL_error(L, "a header name or value with a newline or a colon in the name");
  if (c->ops->set_header) c->ops->set_header(c, name, value);
  return 0;
}

/* conn:get_stream([last_event_id [, delay_ms]]) -> true | nil, why (HTTP):
 * a GET stream: resuming after last_event_id, or the standalone one. */
static int conn_get_stream(lua_State *L) {
  client_conn *c = check_conn(L);
  const char *last = luaL_optstring(L, 2, NULL);
  lua_Integer delay = luaL_optinteger(L, 3, 0);
  if (!c->ops->get_stream) {
    lua_pushnil(L);
    lua_pushliteral(L, "only an HTTP connection has GET streams");
    return 2;
  }
  if (delay < 0) delay = 0;
  if (delay > CLIENT_DEFAULT_TIMEOUT_MS) delay = CLIENT_DEFAULT_TIMEOUT_MS;
  buf err = BUF_INIT;
  bool ok = c->ops->get_stream(c, last, (int)delay, &err);
  return push_outcome(L, ok, &err, "cannot open the stream");
}

/* conn:stream_state() -> last_event_id|nil, retry_ms|nil, streams_ended */
static int conn_stream_state(lua_State *L) {
  client_conn *c = check_conn(L);
  const char *last = NULL;
  long retry = -1;
  int ended = 0;
  if (c->ops->stream_state) c->ops->stream_state(c, &last, &retry, &ended);
  if (last) lua_pushstring(L, last);
  else lua_pushnil(L);
  if (retry >= 0) lua_pushinteger(L, retry);
  else lua_pushnil(L);
  lua_pushinteger(L, ended);
  return 3;
}

/* conn:standalone_end() -> why the standalone GET stream is over | nil
 * (open, not yet answered, or not HTTP). */
static int conn_standalone_end(lua_State *L) {
  client_conn *c = check_conn(L);
  const char *why = c->ops->standalone_end ? c->ops->standalone_end(c) : NULL;
  if (why) lua_pushstring(L, why);
  else lua_pushnil(L);
  return 1;
}

/* catch_interrupt(): from now on Ctrl-C does not kill the program; the
 * waiting conn:receive returns nil, "interrupted", "interrupted". */
static int l_catch_interrupt(lua_State *L) {
  (void)L;
  client_conn_catch_interrupt();
  return 0;
}

static int conn_close(lua_State *L) {
  conn_ud *u = luaL_checkudata(L, 1, CONN_MT);
  client_conn *c = u->c;
  u->c = NULL;
  if (c) c->ops->close(c);
  return 0;
}

/* ---- Opening --------------------------------------------------------------- */

static int opt_int_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  lua_Integer n = luaL_optinteger(L, -1, 0);
  lua_pop(L, 1);
  if (n < 0 || n > INT32_MAX) return luaL_error(L, "%s must be a whole number of at least 0", name);
  return (int)n;
}

/* open_inprocess(path [, {timeout_ms, client_timeout_ms, page_size, memory_limit_mb}]) */
static int open_inprocess(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  inprocess_options o = {0};
  if (lua_istable(L, 2)) {
    o.call_timeout_ms = opt_int_field(L, 2, "timeout_ms");
    o.client_timeout_ms = opt_int_field(L, 2, "client_timeout_ms");
    o.page_size = opt_int_field(L, 2, "page_size");
    o.memory_limit = (size_t)opt_int_field(L, 2, "memory_limit_mb") * 1024 * 1024;
  }
  buf err = BUF_INIT;
  return push_conn(L, client_inprocess_open(uv_default_loop(), path, &o, &err), &err);
}

/* open_child({program, arg...}) */
static int open_child(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  if (n < 1) return luaL_error(L, "the command is empty");
  char **argv = lua_newuserdatauv(L, sizeof *argv * (size_t)(n + 1), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    argv[i - 1] = (char *)luaL_checkstring(L, -1);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
  argv[n] = NULL;
  buf err = BUF_INIT;
  return push_conn(L, client_child_open(uv_default_loop(), argv, &err), &err);
}

/* open_http(url) */
static int open_http(lua_State *L) {
  buf err = BUF_INIT;
  return push_conn(L, client_http_open(luaL_checkstring(L, 1), &err), &err);
}

/* open_ws(url [, {Name = value}]): the headers go with the upgrade. */
static int open_ws(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  buf headers = BUF_INIT, err = BUF_INIT;
  if (lua_istable(L, 2)) {
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
      if (name && value && !strpbrk(name, "\r\n:") && !strpbrk(value, "\r\n"))
        buf_printf(&headers, "%s: %s\r\n", name, value);
      lua_pop(L, 1);
    }
  }
  client_conn *c = client_ws_open(uv_default_loop(), url, headers.len ? headers.data : NULL, &err);
  buf_free(&headers);
  return push_conn(L, c, &err);
}

/* ---- Small system calls ---------------------------------------------------- */

static int l_is_terminal(lua_State *L) {
  lua_pushboolean(L, os_is_terminal((int)luaL_checkinteger(L, 1)));
  return 1;
}

/* mkdir(path) -> true | nil, message (an existing folder is fine) */
static int l_mkdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (mkdir(path, 0755) == 0 || (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushnil(L);
  lua_pushfstring(L, "cannot make the folder %s: %s", path, strerror(errno));
  return 2;
}

/* exists(path) -> "file" | "directory" | "other" | nil */
static int l_exists(lua_State *L) {
  struct stat st;
  if (stat(luaL_checkstring(L, 1), &st) != 0) return 0;
  lua_pushstring(L, S_ISDIR(st.st_mode) ? "directory" : S_ISREG(st.st_mode) ? "file" : "other");
  return 1;
}

/* realpath(path) -> absolute path | nil, message */
static int l_realpath(lua_State *L) {
  char *p = os_path_real(luaL_checkstring(L, 1));
  if (!p) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  lua_pushstring(L, p);
  free(p);
  return 1;
}

/* now_ms() -> a monotonic clock in ms (request deadlines). */
static int l_now_ms(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uv_hrtime() / 1000000u));
  return 1;
}

/* The running luamcp's own file (for the paths init writes). */
static int l_executable(lua_State *L) {
  char path[4096];
  if (!os_self_exe(NULL, path, sizeof path)) return 0;
  lua_pushstring(L, path);
  return 1;
}

/* visible(text): the text with its control bytes written out, its lines
 * and tabs kept (log_escape): what call, read and prompt print of what a
 * server or an authorization server sent, so it cannot act on the
 * terminal. */
static int l_visible(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  buf shown = BUF_INIT;
  log_escape(&shown, text, len, true);
  lua_pushlstring(L, shown.data ? shown.data : "", shown.len);
  buf_free(&shown);
  return 1;
}

static int luaopen_client(lua_State *L) {
  static const luaL_Reg conn_methods[] = {
      {"send", conn_send},       {"receive", conn_receive}, {"reload", conn_reload},
      {"get_stream", conn_get_stream}, {"stream_state", conn_stream_state},
      {"standalone_end", conn_standalone_end},
      {"set_header", conn_set_header}, {"inspect", conn_inspect}, {"close", conn_close}, {NULL, NULL},
  };
  luaL_newmetatable(L, CONN_MT);
  luaL_newlib(L, conn_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, conn_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, conn_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {
      {"open_inprocess", open_inprocess},
      {"open_child", open_child},
      {"open_ws", open_ws},
      {"open_http", open_http},
      {"json_encode", ljson_lua_encode},
      {"json_decode", ljson_lua_decode},
      {"array", ljson_lua_array},
      {"object", ljson_lua_object},
      {"base64_decode", lua_base64_decode},
      {"is_terminal", l_is_terminal},
      {"now_ms", l_now_ms},
      {"mkdir", l_mkdir},
      {"exists", l_exists},
      {"realpath", l_realpath},
      {"executable", l_executable},
      {"catch_interrupt", l_catch_interrupt},
      {"visible", l_visible},
      {NULL, NULL},
  };
  luaL_newlib(L, fns);
  client_oauth_register(L, client_conn_interrupted);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  lua_pushliteral(L, LUAMCP_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, CLIENT_DEFAULT_TIMEOUT_MS);
  lua_setfield(L, -2, "default_timeout_ms");
  return 1;
}

/* ---- The program ------------------------------------------------------------ */

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  luaL_traceback(L, L, msg ? msg : "(an error that is not a string)", 1);
  return 1;
}

int client_command(int argc, char **argv) {
  /* A server served in process logs to stderr like `luamcp run`; what it
   * sends the client (ctx:log) is shown as a notification, so only its
   * warnings and errors go to stderr as well. */
  log_set_level(LOG_WARNING);
  /* A server that exits while we write to it (a child's stdin, a child
   * process of an in-process tool) is an error to report, not a signal
   * that ends the command. */
  os_signals_ignore_broken_pipe();
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  ljson_init(L);
  /* require finds the built-in library (mcp.client, mcp.testing, ...) after
   * package.preload and before the standard searchers (busted and what the
   * user's specs require come from package.path). */
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  for (lua_Integer i = (lua_Integer)lua_rawlen(L, -1); i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, vm_search_embedded);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 1);
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_client);
  lua_setfield(L, -2, "luamcp.client");
  lua_pop(L, 2);
  /* arg, as the standalone interpreter sets it: arg[0] the command. */
  lua_createtable(L, argc, 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  lua_setglobal(L, "arg");

  lua_pushcfunction(L, traceback);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mcp.cli");
  int code = 1;
  if (lua_pcall(L, 1, 1, -3) == LUA_OK) {
    lua_getfield(L, -1, "main");
    lua_remove(L, -2);
    lua_pushstring(L, argv[0]);
    lua_createtable(L, argc, 0);
    for (int i = 1; i < argc; i++) {
      lua_pushstring(L, argv[i]);
      lua_rawseti(L, -2, i);
    }
    if (lua_pcall(L, 2, 1, -4) == LUA_OK) code = (int)luaL_optinteger(L, -1, 0);
    else fprintf(stderr, "luamcp %s: %s\n", argv[0], lua_tostring(L, -1));
  } else {
    fprintf(stderr, "luamcp %s: %s\n", argv[0], lua_tostring(L, -1));
  }
  fflush(stdout);
  lua_close(L); /* closes the connections still open */
  uv_loop_close(uv_default_loop());
  return code;
}

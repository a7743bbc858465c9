/*
 * lua_remote.c - luamcp.remote: connections from this server to other MCP
 * servers, on the one loop, for lua/mcp/remote.lua (mcp.client):
 *
 *   local remote = require "luamcp.remote"
 *   local h, how = remote.open{ key = KEY, command = {argv...}, cwd = DIR, env = {NAME = VAL} }
 *   local h, how = remote.open{ key = KEY, url = "http://...", headers = {Name = "value"} }
 *   local h, how = remote.open{ key = KEY, url = "ws://...", headers = {...} }  -- a WebSocket
 *       -- how: "new", or "reused" (an open connection with that key, made
 *       -- by this or an earlier generation); nil, message on failure
 *   h:next_id()                   a request id unique on this connection
 *   h:send(json_text, headers)    true, or nil, why; never blocks
 *   h:set_header(name, value)     on every later HTTP request (nil: removed)
 *   kind, text, extra = h:wait(id, timeout_ms)   (inside a task; yields)
 *       "answer", json | "message", json | "failed", why, {status, challenge, body}
 *       | "ended", why | "timeout"
 *   h:on_message(fn)              fn(json) for messages no request takes;
 *                                 fn(nil, why) once when it ends
 *   h:info()                      {kind, pid, url, session_id, ended, key}
 *   h:close()
 *
 * A child speaks newline-delimited JSON-RPC on its stdin and stdout; its
 * stderr goes to ours, a line at a time, behind its name. Over HTTP each
 * message is a POST (Streamable HTTP): the answer is a JSON body or an SSE
 * stream read as it arrives, whose messages before the answer belong to
 * that request; a stream that ends before the answer is resumed with GET
 * and Last-Event-ID after the server's retry delay.
 *
 * Ownership: a connection belongs to the app (remote_hub), not to a Lua
 * state. Each generation that opened or reused it holds it (remote_gen);
 * when the last holder is freed it is closed (a keyed one lingers a while
 * first, for the next generation after a reload). A task waiting in h:wait
 * is resumed from a 0 ms timer (hub->kick), never from inside curl or
 * another task's Lua: each resume re-checks that its task still waits on
 * that wait. A task that goes away while waiting (cancelled, past its
 * deadline, its generation freed) has notifications/cancelled sent for its
 * request (task_op.cancel).
 *
 * This file is the Lua face; the connections and their transports are
 * remote_conn.c's (remote_internal.h).
 */
#include <lauxlib.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "core/unix_url.h"
#include "core/luamcp_limits.h"
#include "core/sse_reader.h"
#include "app/app.h"
#include "app/curl_lib.h"
#include "app/curl_loop.h"
#include "app/lua_exec.h"
#include "app/lua_remote.h"
#include "app/lua_task.h"
#include "app/remote_internal.h"
#include "app/secret_file.h"
#include "os/proc.h"

/* ---- Cancellation ------------------------------------------------------ */

/* Send it; over HTTP, the stream of the request (stream, or NULL) stops
 * once the notification's POST is done. false: not sent. */
static bool send_cancelled(remote_conn *c, int64_t id, const char *reason, remote_post *stream) {
  if (c->ended || c->hub->stopping) return false;
  buf msg = {0};
  buf_printf(&msg,
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":%lld,"
             "\"reason\":",
             (long long)id);
  json_write_string(&msg, reason, strlen(reason));
  buf_append_str(&msg, "}}");
  char why[200];
  bool ok = c->http ? remote_post_start(c, POST_MESSAGE, msg.data, msg.len, 0, false, NULL, 0, why, sizeof why)
                    : remote_child_send(c, msg.data, msg.len, why, sizeof why);
  if (!ok) log_write(LOG_DEBUG, "mcp.client %s: notifications/cancelled not sent: %s", c->name, why);
  buf_free(&msg);
  if (ok && c->http && stream) {
    remote_post *note = c->posts; /* post_start puts it first */
    note->has_abandons = true;
    note->abandons = id;
    stream->abandoned = true;
    stream->id = id;
  }
  return ok;
}

/* task_op.cancel: the task went away while it waited (cancelled, past its
 * deadline, its generation freed): the inner server hears of it, and an
 * HTTP request's stream stops. */
static void cancel_wait(task_op *op) {
  remote_wait *w = (remote_wait *)op;
  remote_conn *c = w->conn;
  task *t = w->task;
  remote_pending *p = remote_find_pending(c, w->id);
  if (p) {
    p->waiter = NULL;
    if (!p->answered) {
      const char *reason = t && t->root && t->root->timed_out ? "the caller's deadline passed"
                                                              : "the caller cancelled the request";
      remote_post *stream = p->post && p->post->what != POST_DELETE ? p->post : NULL;
      if (!send_cancelled(c, w->id, reason, stream) && stream) remote_post_abort(stream);
    }
    remote_pending_remove(c, p);
  }
  remote_wait_release(w);
}

/* ---- The Lua interface ------------------------------------------------- */

typedef struct remote_ud {
  remote_conn *conn;
} remote_ud;

static remote_conn *check_conn(lua_State *L) {
  remote_conn *c = ((remote_ud *)luaL_checkudata(L, 1, REMOTE_MT))->conn;
  if (!c) luaL_error(L, "a luamcp.remote connection used after it was collected");
  return c;
}

/* A new userdata for c in L's generation, which holds c (hold). */
static void push_handle(lua_State *L, remote_conn *c) {
  remote_ud *ud = lua_newuserdatauv(L, sizeof *ud, 0);
  ud->conn = c;
  luaL_setmetatable(L, REMOTE_MT);
  remote_gen *g = remote_gen_of(c, vm_of(L));
  if (g) g->handles++;
}

/* __gc: a generation whose every handle to c is garbage lets go of it (an
 * un-keyed connection a script dropped closes; a keyed one lingers for
 * the next open). */
static int conn_gc(lua_State *L) {
  remote_ud *ud = luaL_checkudata(L, 1, REMOTE_MT);
  remote_conn *c = ud->conn;
  ud->conn = NULL;
  if (!c) return 0;
  vm *v = vm_of(L);
  for (remote_gen **p = &c->gens; *p; p = &(*p)->next) {
    remote_gen *g = *p;
    if (g->vm != v) continue;
    if (--g->handles > 0) return 0;
    if (g->fn_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, g->fn_ref);
    remote_gen_drop(p);
    remote_conn_unheld(c);
    return 0;
  }
  return 0;
}

static remote_conn *conn_new(remote_hub *hub, const char *key, const char *name) {
  remote_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->hub = hub;
  c->key = key ? strdup(key) : NULL;
  c->name = strdup(name);
  c->next_id = 1;
  uv_timer_init(hub->app->loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 1;
  hub->open_handles++;
  hub->count++;
  c->next = hub->conns;
  if (c->next) c->next->prev = c;
  hub->conns = c;
  return c;
}

/* remote.endpoint(url): the URL as libcurl reads it — scheme, host (lower
 * case, no IPv6 brackets: as permissions name it), port (the scheme's
 * default when none is given) and the URL as curl writes it back — or nil
 * and why. The net permission judges this parse, and the connection is
 * opened with the URL it writes back, so what is judged is what is used
 * (a Lua reading of "http://a\0@b/" would judge b where curl goes to a). */
static int remote_endpoint(lua_State *L) {
  size_t len;
  const char *url = luaL_checklstring(L, 1, &len);
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)url[i] < 0x20 || url[i] == 0x7f) {
      lua_pushnil(L);
      lua_pushliteral(L, "the URL has a control character (a NUL, a line break, ...)");
      return 2;
    }
  /* unix:SOCKET[:/PATH]: "unix", the socket's path (what the net
   * permission judges), 0, the URL as given. */
  if (unix_url_is(url)) {
    char socket[256], http_url[1100], why[400];
    if (!unix_url_for_curl(url, socket, sizeof socket, http_url, sizeof http_url, why, sizeof why)) {
      lua_pushnil(L);
      lua_pushstring(L, why);
      return 2;
    }
    lua_pushliteral(L, "unix");
    lua_pushstring(L, socket);
    lua_pushinteger(L, 0);
    lua_pushstring(L, url);
    return 4;
  }
  /* ws:// and wss://: libcurl (Debian 12's has no WebSocket support)
   * reads the same authority as http://'s and https://'s; the URL it
   * writes back is ws:// or wss:// again. */
  bool wss = strncasecmp(url, "wss://", 6) == 0, ws = wss || strncasecmp(url, "ws://", 5) == 0;
  char as_http[2048];
  if (ws) {
    if (len + 3 >= sizeof as_http) {
      lua_pushnil(L);
      lua_pushliteral(L, "the URL is too long");
      return 2;
    }
    snprintf(as_http, sizeof as_http, "%s://%s", wss ? "https" : "http", url + (wss ? 6 : 5));
    url = as_http;
  }
  char why[300] = "";
  const curl_api *api = curl_lib_load("mcp.client", why, sizeof why);
  if (!api) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  CURLU *u = api->url();
  char *scheme = NULL, *host = NULL, *port = NULL, *full = NULL;
  bool ok = u && api->url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
            api->url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            api->url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            api->url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
            api->url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK && *host;
  int n;
  if (!ok) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: not a URL libcurl can read", url);
    n = 2;
  } else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: not an http:// or https:// URL", url);
    n = 2;
  } else {
    size_t hl = strlen(host);
    char *h = host;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2;
    for (size_t i = 0; i < hl; i++)
      if (h[i] >= 'A' && h[i] <= 'Z') h[i] = (char)(h[i] + 32);
    lua_pushstring(L, ws ? (wss ? "wss" : "ws") : scheme);
    lua_pushlstring(L, h, hl);
    lua_pushinteger(L, strtol(port, NULL, 10));
    if (ws) lua_pushfstring(L, "%s://%s", wss ? "wss" : "ws", full + (wss ? 8 : 7)); /* curl wrote http(s)://... */
    else lua_pushstring(L, full);
    n = 4;
  }
  api->free(scheme);
  api->free(host);
  api->free(port);
  api->free(full);
  if (u) api->url_cleanup(u);
  return n;
}

/* remote.open{ key, command, cwd, env } or { key, url, headers } */
static int remote_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  vm *v = lua_touserdata(L, lua_upvalueindex(1));
  if (!v->app) return luaL_error(L, "luamcp.remote.open: not available here (no server runs these scripts)");
  lua_getfield(L, 1, "key");
  const char *key = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  lua_getfield(L, 1, "command");
  int cmd_idx = lua_gettop(L);
  lua_getfield(L, 1, "url");
  const char *url = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  bool is_cmd = lua_type(L, cmd_idx) == LUA_TTABLE;
  if (is_cmd == (url != NULL)) return luaL_error(L, "luamcp.remote.open: give command (a list) or url, not both");
  if (is_cmd && lua_rawlen(L, cmd_idx) == 0) return luaL_error(L, "luamcp.remote.open: command is empty");
  remote_hub *hub = remote_hub_get(v->app);
  if (!hub || hub->stopping) {
    lua_pushnil(L);
    lua_pushliteral(L, "the server is stopping");
    return 2;
  }
  if (key) {
    for (remote_conn *c = hub->conns; c; c = c->next) {
      if (!c->key || c->ended || c->exited || strcmp(c->key, key) != 0) continue;
      if (!remote_hold(c, v)) return luaL_error(L, "luamcp.remote.open: out of memory");
      push_handle(L, c);
      lua_pushliteral(L, "reused");
      return 2;
    }
  }
  int open_count = 0; /* ended ones wait only for their handles to be collected: they hold nothing */
  for (remote_conn *c = hub->conns; c; c = c->next)
    if (!c->ended) open_count++;
  if (open_count >= REMOTE_MAX_CONNECTIONS) {
    lua_pushnil(L);
    lua_pushfstring(L, "too many connections to other servers (%d, the limit)", REMOTE_MAX_CONNECTIONS);
    return 2;
  }
  char unix_socket[256] = "", unix_http_url[1100];
  if (url) {
    char why[400];
    if (unix_url_is(url) &&
        !unix_url_for_curl(url, unix_socket, sizeof unix_socket, unix_http_url, sizeof unix_http_url, why, sizeof why)) {
      lua_pushnil(L);
      lua_pushstring(L, why);
      return 2;
    }
    if (!unix_socket[0] && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0 &&
        strncmp(url, "ws://", 5) != 0 && strncmp(url, "wss://", 6) != 0) {
      lua_pushnil(L);
      lua_pushfstring(L, "%s: not an http://, https://, ws:// or wss:// URL, nor unix:SOCKET[:/PATH]", url);
      return 2;
    }
    size_t url_len = 0;
    lua_getfield(L, 1, "url");
    lua_tolstring(L, -1, &url_len);
    lua_pop(L, 1);
    if (!remote_header_ok(url) || strlen(url) != url_len) /* a NUL would make curl read less than was judged */
      return luaL_error(L, "luamcp.remote.open: the URL has a control character");
  }
  lua_getfield(L, 1, "headers");
  int headers_idx = lua_gettop(L);
  if (!lua_isnil(L, headers_idx)) luaL_checktype(L, headers_idx, LUA_TTABLE);
  const char *name = key;
  if (!name && is_cmd) {
    lua_rawgeti(L, cmd_idx, 1);
    name = lua_tostring(L, -1);
    if (!name) return luaL_error(L, "luamcp.remote.open: command must be a list of strings");
  }
  if (!name) name = url;
  /* Everything that can raise an error comes before the connection exists. */
  char **argv = NULL, **env = NULL;
  const char *cwd = NULL;
  if (is_cmd) {
    argv = exec_string_list(L, cmd_idx, "mcp.client", "command", false);
    lua_getfield(L, 1, "env");
    if (!lua_isnil(L, -1)) {
      luaL_checktype(L, -1, LUA_TTABLE);
      env = exec_string_list(L, lua_gettop(L), "mcp.client", "env", true);
    }
    lua_getfield(L, 1, "cwd");
    cwd = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  }
  remote_conn *c = conn_new(hub, key, name);
  if (!c) return luaL_error(L, "luamcp.remote.open: out of memory");
  bool ws = url && (strncmp(url, "ws://", 5) == 0 || strncmp(url, "wss://", 6) == 0);
  if (url) {
    c->http = !ws;
    c->url = strdup(unix_socket[0] ? unix_http_url : url);
    c->unix_socket = unix_socket[0] ? strdup(unix_socket) : NULL;
    if (!lua_isnil(L, headers_idx)) {
      lua_pushnil(L);
      while (lua_next(L, headers_idx)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_isstring(L, -1) && remote_header_ok(lua_tostring(L, -2)) &&
            remote_header_ok(lua_tostring(L, -1))) {
          remote_header *x = calloc(1, sizeof *x);
          x->name = strdup(lua_tostring(L, -2));
          x->value = strdup(lua_tostring(L, -1));
          x->next = c->headers;
          c->headers = x;
        }
        lua_pop(L, 1);
      }
    }
  }
  if (ws) {
    char why[300];
    if (!remote_ws_start(c, url, why, sizeof why)) {
      lua_pushnil(L);
      lua_pushstring(L, why);
      remote_conn_end(c, why);
      remote_conn_maybe_free(c); /* no holder: closes its handles */
      return 2;
    }
  } else if (!url) {
    int rc = remote_spawn_child(c, argv, env, cwd);
    if (rc != 0) {
      lua_rawgeti(L, cmd_idx, 1);
      lua_pushnil(L);
      lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), uv_strerror(rc));
      remote_conn_end(c, "the server could not be started");
      remote_conn_maybe_free(c); /* no holder: closes its handles */
      return 2;
    }
  }
  if (!remote_hold(c, v)) return luaL_error(L, "luamcp.remote.open: out of memory");
  push_handle(L, c);
  lua_pushliteral(L, "new");
  return 2;
}

static int conn_next_id(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_pushinteger(L, c->next_id++);
  return 1;
}

/* h:send(json_text, headers) */
static int conn_send(lua_State *L) {
  remote_conn *c = check_conn(L);
  size_t len;
  const char *text = luaL_checklstring(L, 2, &len);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  if (c->ended) {
    lua_pushnil(L);
    lua_pushstring(L, c->ended);
    return 2;
  }
  if (len > DEFAULT_MAX_MESSAGE_BYTES) {
    lua_pushnil(L);
    lua_pushfstring(L, "the message is over %d bytes (the limit)", (int)DEFAULT_MAX_MESSAGE_BYTES);
    return 2;
  }
  if (!c->http && !c->ws && memchr(text, '\n', len)) {
    lua_pushnil(L);
    lua_pushliteral(L, "a message to a server over stdio must be one line (no newline in it)");
    return 2;
  }
  json_error err;
  json_doc *doc = json_parse(text, len, MAX_JSON_DEPTH, &err);
  if (!doc) {
    lua_pushnil(L);
    lua_pushfstring(L, "not JSON: %s", err.message);
    return 2;
  }
  const json_value *root = json_doc_root(doc);
  int64_t id = 0;
  bool is_request = root->type == JSON_OBJECT && json_object_get(root, "method") &&
                    remote_id_of(json_object_get(root, "id"), &id) && json_object_get(root, "id")->type == JSON_INTEGER;
  json_doc_free(doc);
  if (is_request) {
    if (remote_find_pending(c, id)) {
      lua_pushnil(L);
      lua_pushfstring(L, "a request with id %I is already in flight", (lua_Integer)id);
      return 2;
    }
    if (c->pending_count >= REMOTE_MAX_IN_FLIGHT) {
      /* Make room: the oldest answer nobody waits for (its task gave up). */
      for (remote_pending *p = c->pending; p; p = p->next)
        if (p->answered && !p->waiter) {
          remote_pending_remove(c, p);
          break;
        }
    }
    if (c->pending_count >= REMOTE_MAX_IN_FLIGHT) {
      lua_pushnil(L);
      lua_pushfstring(L, "too many requests in flight on this connection (%d, the limit)", REMOTE_MAX_IN_FLIGHT);
      return 2;
    }
    remote_pending *p = calloc(1, sizeof *p);
    if (!p) return luaL_error(L, "out of memory");
    p->id = id;
    p->prev = c->pending_tail;
    if (c->pending_tail) c->pending_tail->next = p;
    else c->pending = p;
    c->pending_tail = p;
    c->pending_count++;
  }
  char why[300];
  bool ok = c->http ? remote_post_start(c, POST_MESSAGE, text, len, id, is_request, L, lua_isnoneornil(L, 3) ? 0 : 3, why,
                                 sizeof why)
                    : c->ws ? remote_ws_send(c, text, len, why, sizeof why)
                            : remote_child_send(c, text, len, why, sizeof why);
  if (!ok) {
    if (is_request) {
      remote_pending *p = remote_find_pending(c, id);
      if (p) remote_pending_remove(c, p);
    }
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int conn_set_header(lua_State *L) {
  remote_conn *c = check_conn(L);
  const char *name = luaL_checkstring(L, 2);
  const char *value = luaL_optstring(L, 3, NULL);
  if (!*name || !remote_header_ok(name) || (value && !remote_header_ok(value)))
    return luaL_error(L, "set_header: a header name or value with a line break");
  for (remote_header **p = &c->headers; *p; p = &(*p)->next) {
    if (strcasecmp((*p)->name, name) != 0) continue;
    remote_header *x = *p;
    if (value) {
      char *copy = strdup(value);
      if (!copy) return luaL_error(L, "out of memory");
      free(x->value);
      x->value = copy;
    } else {
      *p = x->next;
      free(x->name);
      free(x->value);
      free(x);
    }
    return 0;
  }
  if (value) {
    remote_header *x = calloc(1, sizeof *x);
    if (!x) return luaL_error(L, "out of memory");
    x->name = strdup(name);
    x->value = strdup(value);
    x->next = c->headers;
    c->headers = x;
  }
  return 0;
}

static void on_wait_timeout(uv_timer_t *timer) {
  remote_wait *w = timer->data;
  w->timed_out = true;
  remote_wake(w);
}

/* Where a waiting task comes back to: what came for its request, or
 * wait again. Slot 1 holds the wait as light userdata. */
static int wait_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  remote_wait *w = lua_touserdata(L, 1);
  remote_conn *c = w->conn;
  remote_pending *p = remote_find_pending(c, w->id);
  lua_settop(L, 2);
  if (p && p->items) {
    remote_item *it = p->items;
    p->items = it->next;
    if (!p->items) p->items_tail = NULL;
    p->item_count--;
    int n = 2;
    if (it->kind == ITEM_ANSWER) {
      lua_pushliteral(L, "answer");
      lua_pushlstring(L, it->text, it->len);
    } else if (it->kind == ITEM_MESSAGE) {
      lua_pushliteral(L, "message");
      lua_pushlstring(L, it->text, it->len);
    } else {
      lua_pushliteral(L, "failed");
      lua_pushlstring(L, it->text, it->len);
      lua_createtable(L, 0, 3);
      lua_pushinteger(L, it->status);
      lua_setfield(L, -2, "status");
      if (it->challenge) {
        lua_pushstring(L, it->challenge);
        lua_setfield(L, -2, "challenge");
      }
      if (it->body) {
        lua_pushlstring(L, it->body, it->body_len);
        lua_setfield(L, -2, "body");
      }
      n = 3;
    }
    bool final = it->kind != ITEM_MESSAGE;
    remote_free_item(it);
    p->waiter = NULL;
    if (final) remote_pending_remove(c, p);
    remote_wait_release(w);
    return n;
  }
  if (!p || c->ended) {
    if (p) p->waiter = NULL;
    lua_pushliteral(L, "ended");
    lua_pushstring(L, c->ended ? c->ended : "no answer will come for this request");
    remote_wait_release(w);
    return 2;
  }
  if (w->timed_out) {
    p->waiter = NULL;
    remote_wait_release(w);
    lua_pushliteral(L, "timeout");
    return 1;
  }
  return task_wait_op(L, task_of(L), &w->op, wait_continue);
}

/* h:wait(id, timeout_ms) */
static int conn_wait(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_Integer id = luaL_checkinteger(L, 2);
  lua_Integer timeout_ms = luaL_optinteger(L, 3, 0);
  task *t = task_check(L, "mcp.client's wait");
  remote_pending *p = remote_find_pending(c, id);
  if (!p) return luaL_error(L, "wait: no request with id %I was sent on this connection, or its answer was taken", id);
  if (p->waiter) return luaL_error(L, "wait: another task already waits for request %I", id);
  remote_wait *w = calloc(1, sizeof *w);
  if (!w) return luaL_error(L, "out of memory");
  w->op.cancel = cancel_wait;
  w->conn = c;
  w->id = id;
  w->task = t;
  uv_timer_init(c->hub->app->loop, &w->timer);
  w->timer.data = w;
  p->waiter = w;
  lua_settop(L, 1); /* the handle stays on the stack (slot 2): a waiting task keeps its connection */
  lua_pushlightuserdata(L, w);
  lua_insert(L, 1);
  if (!p->items && !c->ended && timeout_ms > 0) uv_timer_start(&w->timer, on_wait_timeout, (uint64_t)timeout_ms, 0);
  if (p->items || c->ended) return wait_continue(L, LUA_OK, 0);
  return task_wait_op(L, t, &w->op, wait_continue);
}

static int conn_on_message(lua_State *L) {
  remote_conn *c = check_conn(L);
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  remote_gen *g = remote_gen_of(c, vm_of(L));
  if (!g) return luaL_error(L, "on_message: this generation does not hold the connection");
  if (g->fn_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, g->fn_ref);
  g->fn_ref = LUA_NOREF;
  if (!lua_isnil(L, 2)) {
    lua_settop(L, 2);
    g->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    remote_hub_kick(c->hub); /* what waited for it */
  }
  return 0;
}

static int conn_info(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_createtable(L, 0, 6);
  lua_pushstring(L, c->http ? "http" : "child");
  lua_setfield(L, -2, "kind");
  if (c->key) {
    lua_pushstring(L, c->key);
    lua_setfield(L, -2, "key");
  }
  if (c->spawned) {
    lua_pushinteger(L, c->process.pid);
    lua_setfield(L, -2, "pid");
  }
  if (c->url) {
    lua_pushstring(L, c->url);
    lua_setfield(L, -2, "url");
  }
  if (c->session_id) {
    lua_pushstring(L, c->session_id);
    lua_setfield(L, -2, "session_id");
  }
  if (c->ended) {
    lua_pushstring(L, c->ended);
    lua_setfield(L, -2, "ended");
  }
  if (c->exited) {
    lua_pushinteger(L, c->term_signal ? -c->term_signal : c->exit_status);
    lua_setfield(L, -2, "exit_status");
  }
  return 1;
}

static int conn_close_lua(lua_State *L) {
  remote_conn *c = check_conn(L);
  remote_conn_close(c, "closed by the script");
  return 0;
}

static int conn_tostring(lua_State *L) {
  remote_conn *c = check_conn(L);
  lua_pushfstring(L, "luamcp.remote connection (%s %s)", c->http ? "http" : "child", c->name);
  return 1;
}

int luaopen_luamcp_remote(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"next_id", conn_next_id},     {"send", conn_send}, {"set_header", conn_set_header},
      {"wait", conn_wait},           {"on_message", conn_on_message}, {"info", conn_info},
      {"close", conn_close_lua},     {NULL, NULL},
  };
  if (luaL_newmetatable(L, REMOTE_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, conn_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, conn_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, lua_upvalueindex(1)); /* the vm */
  lua_pushcclosure(L, remote_open, 1);
  lua_setfield(L, -2, "open");
  lua_pushcfunction(L, remote_endpoint);
  lua_setfield(L, -2, "endpoint");
  secret_file_register(L); /* the logins luamcp login kept (mcp.token_store) */
  return 1;
}

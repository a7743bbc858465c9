/*
 * reload.c - generations of scripts, swapped in place (luamcp dev, SIGHUP).
 *
 * A reload loads every script into a fresh Lua state, in slices between
 * loop turns (vm_load_step), so the current generation keeps serving while
 * the new one loads; a newer reload abandons a load still in progress. If
 * anything fails (--load-timeout included), the current generation keeps
 * serving untouched and the error goes to stderr and, as
 * notifications/message at level error, to every client. If it
 * succeeds, new requests go to the new generation at once; calls already
 * running finish on the old one, which is freed when its last task ends.
 * Sessions, their negotiated version, subscriptions and log level live in
 * the protocol core, not in Lua, so they carry over untouched. Clients hear
 * list_changed only for the lists that changed, and resources/updated for
 * what they subscribed to.
 */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "core/log.h"
#include "core/luamcp_limits.h"
#include "app/lua_json.h"
#include "app/lua_state.h"
#include "app/bus.h"
#include "app/confine.h"
#include "app/lua_task.h"
#include "app/reload.h"
#include "app/vm.h"
#include "os/path.h"

/* ---- Generations ----------------------------------------------------- */

/* An agent's tasks (A2A) are kept after they end, to be read and listed:
 * those of a generation being freed go to the current one (both are
 * idle here: the reaper runs outside any task). */
static void hand_over_agent_tasks(vm *from, vm *to) {
  if (!to || to->running) return;
  lua_State *L = from->L;
  int top = lua_gettop(L);
  if (vm_call_library(from, "_foreign_export", 0) && lua_type(L, -1) == LUA_TSTRING) {
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    if (len > 2) { /* not [] */
      int to_top = lua_gettop(to->L);
      lua_pushlstring(to->L, text, len);
      if (!vm_call_library(to, "_foreign_adopt", 1))
        log_write(LOG_WARNING, "generation %u's agent tasks were not kept: %s", from->generation,
                  lua_tostring(to->L, -1));
      lua_settop(to->L, to_top);
    }
  }
  lua_settop(L, top);
}

static void on_reaper(uv_check_t *h) {
  lua_app *app = h->data;
  if (app->srv->nested_poll > 0) return;
  uv_check_stop(h);
  for (vm **pp = &app->retired; *pp;) {
    vm *v = *pp;
    if (vm_drained(v)) {
      *pp = v->next_retired;
      hand_over_agent_tasks(v, app->current);
      log_write(LOG_DEBUG, "generation %u closed", v->generation);
      vm_free(v);
    } else {
      pp = &v->next_retired;
    }
  }
}

/* vm.on_drained. */
static void app_generation_drained(vm *v) {
  lua_app *app = v->app;
  if (!app || !v->retired) return;
  /* Not now: this runs inside the generation's own task code. */
  if (!uv_is_active((uv_handle_t *)&app->reaper)) uv_check_start(&app->reaper, on_reaper);
}

/* {tools = "...", resources = "...", prompts = "..."}: what clients see of
 * each list, to tell which lists a reload changed. */
static bool fingerprints(vm *v, char *out[3]) {
  lua_State *L = v->L;
  int top = lua_gettop(L);
  bool ok = vm_call_library(v, "_fingerprints", 0);
  static const char *const names[3] = {"tools", "resources", "prompts"};
  for (int i = 0; i < 3; i++) {
    out[i] = NULL;
    if (ok) {
      lua_getfield(L, -1, names[i]);
      out[i] = strdup(lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  return ok;
}

static double now_ms(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec * 1e3 + tv.tv_usec / 1e3;
}

static void watch_files(lua_app *app);
static void on_watch_closed(uv_handle_t *h);

/* The load failed: the current generation keeps serving; say why on
 * stderr and to every client. */
static void report_failure(lua_app *app, const char *why, const buf *err) {
  app->failed_reloads++;
  log_write(LOG_ERROR, "reload failed (%s); still serving generation %u: %s", why, app->current->generation,
            err->data ? err->data : "?");
  buf data = BUF_INIT;
  buf message = BUF_INIT;
  buf_printf(&message, "luamcp: reload failed, still serving the previous version: %s", err->data ? err->data : "?");
  json_write_string(&data, message.data, message.len);
  server_log(app->srv, LOG_ERROR, "luamcp", data.data, data.len);
  buf_free(&data);
  buf_free(&message);
  if (app->on_reload) {
    reload_outcome r = {.ok = false, .generation = app->current->generation, .why = why,
                        .error = err->data ? err->data : "?"};
    app->on_reload(app->on_reload_data, &r);
  }
}

/* The load of fresh succeeded: new requests go to it from now on. */
/* The script's mcp.server{auth} of the current generation (its describe). */
static const char *current_auth_json(lua_app *app) {
  app_description d;
  memset(&d, 0, sizeof d);
  if (app->srv->app && app->srv->app->describe) app->srv->app->describe(app->srv->app_data, &d);
  return d.auth_json;
}

/* The OAuth settings are read once, at start (cli/auth_setup.c): a reload
 * that changes mcp.server{auth} must not look applied. */
static void warn_auth_changed(lua_app *app) {
  const char *now = current_auth_json(app);
  const char *then = app->auth_at_start;
  if ((now ? now : "")[0] == '\0' && (then ? then : "")[0] == '\0') return;
  if (now && then && strcmp(now, then) == 0) return;
  log_write(LOG_WARNING, "mcp.server{auth} changed at this reload, but the auth settings (OAuth) take effect at "
                         "restart: the server still checks tokens as it did when it started; restart luamcp to "
                         "apply them");
}

static void swap_in(lua_app *app, vm *fresh, const char *why, double t0) {
  vm *old = app->current;
  if (!app->auth_at_start_known) {
    const char *start = current_auth_json(app);
    app->auth_at_start = start ? strdup(start) : NULL;
    app->auth_at_start_known = true;
  }
  lua_state_carry(old, fresh);
  fresh->app = app;
  fresh->generation = ++app->generations;
  char *before[3], *after[3];
  bool compared = fingerprints(old, before) && fingerprints(fresh, after);
  app->current = fresh;
  old->retired = true;
  old->on_drained = app_generation_drained;
  old->next_retired = app->retired;
  app->retired = old;
  app->reloads++;
  task_end_input_waits(old);
  if (vm_drained(old)) app_generation_drained(old);

  static const char *const notifications[3] = {"notifications/tools/list_changed",
                                               "notifications/resources/list_changed",
                                               "notifications/prompts/list_changed"};
  static const char *const lists[3] = {"tools", "resources", "prompts"};
  buf changed = BUF_INIT;
  for (int i = 0; i < 3; i++) {
    if (!compared || strcmp(before[i], after[i]) != 0) {
      server_broadcast(app->srv, notifications[i], NULL, 0);
      /* Every process's clients see one server: tell theirs too (they
       * emit the notification; their scripts did not change). */
      bus_list_changed(app->bus, notifications[i]);
      buf_printf(&changed, "%s%s", changed.len ? ", " : "", lists[i]);
    }
    if (compared) {
      free(before[i]);
      free(after[i]);
    }
  }
  /* The code behind every resource may have changed: tell subscribers. */
  for (session *s = app->srv->sessions; s; s = s->next) {
    if (s->state != SESSION_READY && s->state != SESSION_INITIALIZED) continue;
    for (subscription *sub = s->subscriptions; sub; sub = sub->next) {
      buf params = BUF_INIT;
      buf_puts(&params, "{\"uri\":");
      json_write_string(&params, sub->uri, strlen(sub->uri));
      buf_putc(&params, '}');
      session_notify(s, NULL, "notifications/resources/updated", params.data, params.len);
      buf_free(&params);
    }
  }
  log_write(LOG_NOTICE, "reloaded (%s) in %.1f ms: generation %u, %s changed", why, now_ms() - t0,
            fresh->generation, changed.len ? changed.data : "no list");
  if (app->on_reload) {
    reload_outcome r = {.ok = true, .generation = fresh->generation, .why = why, .changed = changed.len ? changed.data : ""};
    app->on_reload(app->on_reload_data, &r);
  }
  buf_free(&changed);
  confine_after_reload(fresh);
  warn_auth_changed(app);
  if (app->watch) watch_files(app);
}

/* A newer reload replaces the one still loading: nothing of it runs now
 * (slices run from the loop, never inside one another), so it is freed at
 * once; nothing else points at it. */
static void abandon_load(lua_app *app, const char *why) {
  vm *v = app->loading;
  if (!v) return;
  app->loading = NULL;
  uv_idle_stop(&app->load_slice);
  log_write(LOG_INFO, "reload (%s) abandoned before it finished loading: a newer one (%s) starts", app->loading_why,
            why);
  vm_free(v);
}

bool app_reload(lua_app *app, const char *why) {
  double t0 = now_ms();
  abandon_load(app, why);
  buf err = BUF_INIT;
  vm *fresh = vm_new(app->srv, app->loop, app->path, app->source, app->current, &err);
  if (!fresh) report_failure(app, why, &err);
  else swap_in(app, fresh, why, t0);
  buf_free(&err);
  return fresh != NULL;
}

/* One slice of the load in progress, once per loop turn until it ends.
 * It re-reads app->loading each time: a newer reload may have replaced
 * the load that armed it. */
static void on_load_slice(uv_idle_t *h) {
  lua_app *app = h->data;
  if (app->srv->nested_poll > 0) return; /* under a computing handler: its Lua runs; next turn */
  vm *fresh = app->loading;
  if (!fresh) {
    uv_idle_stop(h);
    return;
  }
  buf err = BUF_INIT;
  vm_load_status status = vm_load_step(fresh, &err);
  if (status != VM_LOAD_PAUSED) {
    uv_idle_stop(h);
    app->loading = NULL;
    double t0 = app->loading_since_ms;
    if (status == VM_LOAD_DONE) {
      swap_in(app, fresh, app->loading_why, t0);
    } else {
      vm_free(fresh);
      report_failure(app, app->loading_why, &err);
    }
  }
  buf_free(&err);
}

/* Start loading a new generation in slices (luamcp dev, SIGHUP): the
 * current one keeps serving until it has loaded, and keeps serving if it
 * fails. why is a string literal. */
static void reload_start(lua_app *app, const char *why) {
  abandon_load(app, why);
  buf err = BUF_INIT;
  double t0 = now_ms();
  vm *fresh = vm_load_begin(app->srv, app->loop, app->path, app->source, app->current, &err);
  if (!fresh) {
    report_failure(app, why, &err);
  } else {
    log_write(LOG_DEBUG, "reloading (%s): loading the scripts while generation %u serves", why,
              app->current->generation);
    app->loading = fresh;
    app->loading_why = why;
    app->loading_since_ms = t0;
    uv_idle_start(&app->load_slice, on_load_slice);
  }
  buf_free(&err);
}

/* ---- Watching (luamcp dev) ------------------------------------------- */

/* What asked for a reload (app.reload_causes), for the log. */
enum { RELOAD_SCRIPT_CHANGED = 1, RELOAD_SIGHUP = 2 };

static const char *reload_cause(unsigned causes) {
  switch (causes) {
    case RELOAD_SIGHUP: return "SIGHUP";
    case RELOAD_SIGHUP | RELOAD_SCRIPT_CHANGED: return "SIGHUP and a script changed";
    default: return "a script changed";
  }
}

static void on_debounced(uv_timer_t *t) {
  lua_app *app = t->data;
  if (app->srv->nested_poll > 0) { /* not under a computing handler: try again shortly */
    uv_timer_start(&app->debounce, on_debounced, 10, 0);
    return;
  }
  unsigned causes = app->reload_causes;
  app->reload_causes = 0;
  reload_start(app, reload_cause(causes));
}

static void on_file_event(uv_fs_event_t *h, const char *filename, int events, int status) {
  (void)events;
  app_watch *w = h->data;
  if (status < 0 || !filename) return;
  size_t n = strlen(filename);
  bool script = n >= 4 && strcmp(filename + n - 4, ".lua") == 0;
  /* In a folder of data the scripts serve (skills/), any file counts, but
   * not editors' swap and backup files. */
  bool data = w->any_file && n > 0 && filename[0] != '.' && filename[n - 1] != '~' &&
              !(n > 4 && strcmp(filename + n - 4, ".swp") == 0);
  if (!script && !data) return;
  w->app->reload_causes |= RELOAD_SCRIPT_CHANGED;
  uv_timer_start(&w->app->debounce, on_debounced, RELOAD_DEBOUNCE_MS, 0);
}

/* Did the generation read a file other than a script in dir (skills)? */
static bool holds_data(const vm *v, const char *dir) {
  for (size_t i = 0; i < v->file_count; i++) {
    size_t n = strlen(v->files[i]);
    if (n >= 4 && strcmp(v->files[i] + n - 4, ".lua") == 0) continue;
    char *d = os_path_dir(v->files[i]);
    bool same = strcmp(d, dir) == 0;
    free(d);
    if (same) return true;
  }
  return false;
}

/* Watch the folders of every file the current generation loaded (a
 * folder, not a file: editors save by renaming a new file over the old). */
static void watch_files(lua_app *app) {
  vm *v = app->current;
  size_t n = v->file_count + 1;
  char **dirs = calloc(n, sizeof *dirs);
  size_t count = 0;
  char **candidates = calloc(n, sizeof *candidates);
  candidates[0] = v->module_dir ? strdup(v->module_dir) : os_path_dir(app->path);
  for (size_t i = 0; i < v->file_count; i++) candidates[i + 1] = os_path_dir(v->files[i]);
  for (size_t i = 0; i < n; i++) {
    bool seen = false;
    for (size_t j = 0; j < count && !seen; j++) seen = strcmp(dirs[j], candidates[i]) == 0;
    if (seen) free(candidates[i]);
    else dirs[count++] = candidates[i];
  }
  for (size_t i = 0; i < count; i++) {
    bool watched = false, data = holds_data(v, dirs[i]);
    for (app_watch *w = app->watches; w && !watched; w = w->next)
      if (strcmp(w->dir, dirs[i]) == 0) watched = true, w->any_file = w->any_file || data;
    if (watched) {
      free(dirs[i]);
      continue;
    }
    app_watch *w = calloc(1, sizeof *w);
    w->dir = dirs[i];
    w->app = app;
    w->any_file = data;
    uv_fs_event_init(app->loop, &w->handle);
    w->handle.data = w;
    if (uv_fs_event_start(&w->handle, on_file_event, w->dir, 0) != 0) {
      log_write(LOG_WARNING, "cannot watch %s for changes", w->dir);
      /* Freed in its close callback, never before: libuv still holds it. */
      uv_close((uv_handle_t *)&w->handle, on_watch_closed);
      continue;
    }
    log_write(LOG_DEBUG, "watching %s", w->dir);
    w->next = app->watches;
    app->watches = w;
  }
  free(candidates);
  free(dirs);
}

static void on_sighup(void *arg, os_signal_kind kind, const char *name) {
  (void)kind, (void)name;
  lua_app *app = arg;
  app->reload_causes |= RELOAD_SIGHUP;
  /* Under a computing handler the reload waits for it to stop, and says
   * why it happens once it does. A script change waiting for its debounce
   * is covered by this reload too. */
  bool computing = app->srv->nested_poll > 0;
  if (computing) log_write(LOG_INFO, "SIGHUP while a handler computes: reloading once it stops");
  uv_timer_start(&app->debounce, on_debounced, computing ? 10 : 0, 0);
}

bool app_start(lua_app *app, server *srv, uv_loop_t *loop, const char *path, const bundle *source, bool watch,
               buf *err) {
  memset(app, 0, sizeof *app);
  app->srv = srv;
  app->loop = loop;
  app->path = path;
  app->source = source;
  app->watch = watch && !source;
  app->current = vm_new(srv, loop, path, source, NULL, err);
  if (!app->current) return false;
  app->current->app = app;
  app->current->generation = ++app->generations;
  vm_check_environment(app->current);
  uv_timer_init(loop, &app->debounce);
  app->debounce.data = app;
  uv_check_init(loop, &app->reaper);
  app->reaper.data = app;
  uv_idle_init(loop, &app->load_slice);
  app->load_slice.data = app;
  /* Windows has no reload signal: dev's file watch is its reload. */
  if (os_signals_start(&app->signals, loop, OS_SIGNAL_RELOAD, on_sighup, app) == 0) os_signals_unref(app->signals);
  if (app->watch) watch_files(app);
  return true;
}

static void on_watch_closed(uv_handle_t *h) {
  app_watch *w = h->data;
  free(w->dir);
  free(w);
}

/* ---- Waiting for a fix (luamcp dev's first load) ---------------------- */

/* The wait of app_wait_for_change: a folder's watch and its debounce. */
typedef struct change_wait {
  uv_fs_event_t event;
  uv_timer_t quiet;
  uv_poll_t client; /* stdin, for its hang-up only (its data waits for the transport) */
  bool polling;
  bool changed, client_gone;
} change_wait;

static void on_client_hangup(uv_poll_t *p, int status, int events) {
  change_wait *cw = p->data;
  if (status < 0 || (events & UV_DISCONNECT)) {
    cw->client_gone = true;
    uv_poll_stop(p);
  }
}

static void on_quiet(uv_timer_t *t) {
  change_wait *cw = t->data;
  cw->changed = true;
}

static void on_wait_event(uv_fs_event_t *h, const char *filename, int events, int status) {
  (void)events;
  change_wait *cw = h->data;
  if (status < 0 || !filename) return;
  size_t n = strlen(filename);
  if (n < 4 || strcmp(filename + n - 4, ".lua") != 0) return;
  uv_timer_start(&cw->quiet, on_quiet, RELOAD_DEBOUNCE_MS, 0);
}

bool app_wait_for_change(uv_loop_t *loop, const char *path, int client_fd) {
  change_wait cw = {0};
  struct stat st;
  char *dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? strdup(path) : os_path_dir(path);
  uv_fs_event_init(loop, &cw.event);
  uv_timer_init(loop, &cw.quiet);
  cw.event.data = cw.quiet.data = cw.client.data = &cw;
  /* A pipe or socket only (a file cannot be polled, nor on Windows a pipe). */
  if (client_fd >= 0 && uv_poll_init(loop, &cw.client, client_fd) == 0) {
    cw.polling = true;
    if (uv_poll_start(&cw.client, UV_DISCONNECT, on_client_hangup) != 0) uv_poll_stop(&cw.client);
  }
  int rc = uv_fs_event_start(&cw.event, on_wait_event, dir, 0);
  if (rc == 0) {
    /* Said once the watch is on: a save that follows it is seen. */
    log_write(LOG_NOTICE, "luamcp dev: waiting for a change to the scripts in %s to load them again", dir);
    while (!cw.changed && !cw.client_gone && uv_run(loop, UV_RUN_ONCE) != 0) {
    }
    if (cw.client_gone) log_write(LOG_NOTICE, "luamcp dev: the client closed stdin while the scripts waited for a fix");
  } else {
    log_write(LOG_ERROR, "cannot watch %s for changes: %s", dir, uv_strerror(rc));
  }
  /* Both live on this stack frame: closed and their callbacks run before
   * it returns. */
  uv_close((uv_handle_t *)&cw.event, NULL);
  uv_close((uv_handle_t *)&cw.quiet, NULL);
  if (cw.polling) uv_close((uv_handle_t *)&cw.client, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  free(dir);
  return cw.changed;
}

void app_stop(lua_app *app) {
  if (!app->loop) return;
  while (app->watches) {
    app_watch *w = app->watches;
    app->watches = w->next;
    uv_close((uv_handle_t *)&w->handle, on_watch_closed);
  }
  uv_close((uv_handle_t *)&app->debounce, NULL);
  uv_close((uv_handle_t *)&app->reaper, NULL);
  os_signals_stop(app->signals);
  app->signals = NULL;
  uv_close((uv_handle_t *)&app->load_slice, NULL);
  vm_free(app->loading); /* a reload still loading */
  app->loading = NULL;
  while (app->retired) {
    vm *v = app->retired;
    app->retired = v->next_retired;
    vm_free(v);
  }
  vm_free(app->current);
  app->current = NULL;
  free(app->auth_at_start);
  app->auth_at_start = NULL;
  app->auth_at_start_known = false;
  /* What the Lua APIs hold beyond a generation (the store, the
   * connections, libcurl's): after the generations, whose waiting tasks
   * sent their cancellations through those connections. */
  teardown_run_all(&app->on_stop);
  app->loop = NULL;
}

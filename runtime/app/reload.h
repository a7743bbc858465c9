/*
 * reload.h - generations of scripts, swapped in place (luamcp dev, SIGHUP).
 */
#ifndef LUAMCP_RELOAD_H
#define LUAMCP_RELOAD_H

#include "app/app.h"

/* Load the first generation and start watching (watch) and SIGHUP. */
bool app_start(lua_app *app, server *srv, uv_loop_t *loop, const char *path, const bundle *source, bool watch,
               buf *err);
/* Load a new generation in one go and swap it in, or keep the current one
 * and report why not (mcp.testing's reload, which waits for it). luamcp
 * dev and SIGHUP load in slices instead, serving meanwhile (reload.c). */
bool app_reload(lua_app *app, const char *why);
/* luamcp dev, when the first load failed: block until a script in path's
 * folder changes (and stays unchanged for a moment). false if it cannot be
 * watched, or if client_fd (stdin on stdio, else -1) hangs up meanwhile. */
bool app_wait_for_change(uv_loop_t *loop, const char *path, int client_fd);
/* Close the app's handles and free every generation. */
void app_stop(lua_app *app);

#endif

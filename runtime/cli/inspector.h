/*
 * inspector.h - the web inspector (luamcp dev --ui, luamcp inspect --ui):
 * what it watches and how the page reaches a server. The listener and the
 * page are transport/ui_http.h's; the history is core/wire_log.h's.
 *
 *   dev --ui, inspect --ui PATH   the scripts served in this process: every
 *       session's messages (wire.h), every reload, and a session of the
 *       page's own ("ui") that the page drives
 *   inspect --ui -- COMMAND, --http URL   any server: luamcp is the page's
 *       client to it (client_conn.h), and the wire is what goes between
 */
#ifndef LUAMCP_INSPECTOR_H
#define LUAMCP_INSPECTOR_H

#include <stdbool.h>
#include <uv.h>

#include "app/app.h"
#include "core/server.h"

typedef struct inspector inspector;

/* Watch srv (and app's reloads) and serve the page on 127.0.0.1:port (0:
 * a free one); the address is printed on stderr. target names what is
 * served (the scripts' path); dev: luamcp dev (the scripts have a client
 * of their own), else inspect PATH (the page is the only one). NULL with
 * the reason in err. */
inspector *inspector_start(uv_loop_t *loop, server *srv, lua_app *app, const char *target, bool dev, int port,
                           char *err, size_t err_len);
/* Stop watching, end the page's session and stop the listener (its
 * handles close on the next loop turns). */
void inspector_stop(inspector *ins);

/* luamcp inspect --ui -- COMMAND ARGS, or --http URL: the page drives any
 * server through luamcp (args after "inspect"). Returns the exit code. */
int inspector_proxy_command(int argc, char **argv);

#endif

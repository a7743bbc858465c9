/*
 * metrics.h - the process's figures in the Prometheus text exposition
 * format (version 0.0.4): calls by method and by tool with their outcome,
 * a latency histogram per tool, what is open now, reloads, Lua's memory,
 * Redis's link, and the scripts' own mcp.metrics counters and histograms.
 *
 * Counting happens on the hot path as plain integers in C structs (a call
 * observer, core/observe.h): no formatting, no lock, no allocation after a
 * name's first call. All the text is made at a scrape, by metrics_format.
 */
#ifndef LUAMCP_METRICS_H
#define LUAMCP_METRICS_H

#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

#include "app/app.h"
#include "core/buf.h"
#include "core/server.h"

/* Start counting the server's calls (registers the observer) and read the
 * app's figures at each scrape. worker is this process's --workers index
 * (0 alone): with it, every series carries worker="K". Once per process. */
void metrics_start(server *srv, lua_app *app, int worker);
bool metrics_enabled(void);
/* Append every metric (HELP, TYPE, samples) to out. */
void metrics_format(buf *out);
/* Lua's garbage collector: count its cycles in L (a sentinel whose
 * finalizer runs once a cycle). For each new generation's state. */
void metrics_watch_gc(lua_State *L);
/* Before L closes: its last sentinel makes no other. */
void metrics_unwatch_gc(lua_State *L);

/* mcp.metrics's C side, as mcp.core.metric_define(kind, name, help
 * [, buckets]) -> id and mcp.core.metric_add(id, value [, labels]) -> true
 * | nil, why (the label sets are full). Work without metrics_start too (a
 * stdio server without --metrics still runs scripts that count). */
int metrics_lua_define(lua_State *L);
int metrics_lua_add(lua_State *L);

#endif

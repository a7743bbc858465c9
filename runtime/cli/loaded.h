/*
 * loaded.h - the scripts of a folder loaded the way `luamcp run` loads them,
 * into a generation that serves nothing: for commands that only look at
 * what the scripts register (build, inspect, install).
 */
#ifndef LUAMCP_LOADED_H
#define LUAMCP_LOADED_H

#include <stdbool.h>

#include "core/buf.h"
#include "app/vm.h"

/* Load PATH (a broken folder fails with the message run would print, in
 * err), call look(v, arg, err), then free everything. Returns what look
 * returned, or false when loading failed. */
bool with_loaded_scripts(const char *path, bool (*look)(vm *v, void *arg, buf *err), void *arg, buf *err);
/* The same for the scripts a built program carries (bundle_open). */
bool with_loaded_bundle(const bundle *b, bool (*look)(vm *v, void *arg, buf *err), void *arg, buf *err);

#endif

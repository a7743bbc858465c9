/*
 * inspect.h - the server side of `luamcp inspect` (whose command is Lua:
 * lua/mcp/cli.lua): what a generation loaded in this process serves, as
 * its own library sees it.
 */
#ifndef LUAMCP_INSPECT_H
#define LUAMCP_INSPECT_H

#include <stdbool.h>

#include "app/vm.h"
#include "core/buf.h"

/* mcp._inspect(as_json) in v, between calls: the text to print, appended
 * to out; false with the reason in err. */
bool inspect_generation(vm *v, bool as_json, buf *out, buf *err);

#endif

/* fuzz_app.h - the stub app behind the transport fuzz targets. Methods:
 * "echo" answers at once; "hold" waits for fuzz_app_answer_one; "notify"
 * sends progress, a log message and a request to the client, then waits;
 * "compute" takes loop turns from inside the call (server.nested_poll), as
 * a handler computing in Lua does, then answers. Everything else fails. */
#ifndef LUAMCP_FUZZ_APP_H
#define LUAMCP_FUZZ_APP_H

#include <stdbool.h>
#include <uv.h>

#include "core/server.h"

/* The app ops; app_data must be the loop the transport runs on. */
extern const app_ops FUZZ_APP;
/* Answer (or fail) the oldest waiting call; false when none waits. */
bool fuzz_app_answer_one(void);
/* Forget waiting calls (their sessions are gone). */
void fuzz_app_reset(void);

#endif

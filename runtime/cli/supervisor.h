/*
 * supervisor.h - `luamcp run --http ... --workers N`: one process that
 * reserves the port, starts N workers (this same program, run again with
 * --worker K), restarts the ones that die, passes reloads and shutdowns on,
 * and relays connections from the worker that read a request to the worker
 * that owns its session. It loads no scripts itself.
 */
#ifndef LUAMCP_SUPERVISOR_H
#define LUAMCP_SUPERVISOR_H

#include "transport/http_transport.h"

typedef struct supervisor_options {
  int workers;
  int drain_time_s; /* --drain-time: the workers' drain, which the stop waits for */
  const http_options *http; /* the address to reserve */
  /* How this process was started (main's argc and argv): every worker runs
   * the same command, with "--worker K --worker-port PORT" added. */
  int argc;
  char **argv;
} supervisor_options;

/* Run until SIGTERM or SIGINT (or until the first workers cannot start);
 * returns the exit status. */
int supervisor_run(const supervisor_options *o);

#endif

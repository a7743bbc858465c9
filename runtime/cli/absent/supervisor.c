/*
 * absent/supervisor.c - cli/supervisor.h in a build without worker
 * processes (the Windows .exe links this instead of supervisor.c: its
 * workers share one listening socket through fd passing and SO_REUSEPORT,
 * which Windows does not offer; README "Platforms"). --workers N refuses.
 */
#include "cli/supervisor.h"

#include <stdio.h>

#include "core/lacks.h"

LUAMCP_LACKS(workers, LACKS_ALWAYS, "--workers", "it serves from one process only");

int supervisor_run(const supervisor_options *o) {
  fprintf(stderr, "luamcp: --workers: this build of luamcp serves from one process only (the Windows build "
                  "leaves worker processes out); run without --workers\n");
  return 2;
}

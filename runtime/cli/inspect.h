/*
 * inspect.h - `luamcp inspect`: what a script folder serves, without
 * serving it.
 */
#ifndef LUAMCP_INSPECT_H
#define LUAMCP_INSPECT_H

#include <stdio.h>

/* argv holds what follows "inspect". Returns the process exit code. */
int inspect_command(int argc, char **argv);
void inspect_usage(FILE *to);

#endif

/*
 * confine.h - the scripts' declared permissions (lua/mcp/permissions.lua)
 * applied to the whole process by the kernel, where Linux has Landlock:
 * defence in depth under luamcp's own checks, so that a Lua C module, or a
 * bug, cannot step outside the declared files, programs and ports either.
 */
#ifndef LUAMCP_CONFINE_H
#define LUAMCP_CONFINE_H

#include "app/vm.h"

/* A TCP port luamcp itself connects to, allowed beside the scripts' ports,
 * and what for, as the start log says it after the port: "for the
 * OpenTelemetry collector (traces)". Ports with the same purpose (the same
 * pointer, next to each other) share one line. */
typedef struct confine_port {
  unsigned port;
  const char *purpose;
} confine_port;

/* Once the first generation has loaded and before serving (run, dev, a
 * built program; never build, inspect or mcp.testing): log what the
 * process may do, and confine it with Landlock when the scripts are
 * confined. Irreversible. own_ports: the ports luamcp itself connects to
 * (the OAuth authorization server's, the OpenTelemetry collector's);
 * own_sockets: the local sockets it listens on (--http unix:PATH), whose
 * files it makes, and removes when it stops. */
void confine_process(vm *v, const confine_port *own_ports, size_t own_port_count, const char *const *own_sockets,
                     size_t own_socket_count);
/* After a reload swapped in fresh: if its permissions differ from the
 * rules the kernel was given at start (which cannot change), say so on
 * stderr, and tell the library, whose denials then say so too. */
void confine_after_reload(vm *fresh);

#endif

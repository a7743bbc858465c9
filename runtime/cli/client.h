/*
 * client.h - the commands that act as an MCP client: luamcp call, read,
 * prompt, inspect, test and init (their code is Lua: lua/mcp/cli.lua).
 */
#ifndef LUAMCP_CLIENT_H
#define LUAMCP_CLIENT_H

/* Run the command argv[0] ("call", ...) with its arguments; returns the
 * process's exit status. */
int client_command(int argc, char **argv);

#endif

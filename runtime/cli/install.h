/*
 * install.h - `luamcp install CLIENT PATH`: add a server that runs PATH to
 * the MCP configuration of a client application (Claude Desktop, Claude
 * Code, Cursor, VS Code, Gemini CLI).
 */
#ifndef LUAMCP_INSTALL_H
#define LUAMCP_INSTALL_H

#include <stdio.h>

/* argv holds what follows "install". Returns the process exit code. */
int install_command(int argc, char **argv);
/* `luamcp uninstall CLIENT NAME`: argv holds what follows "uninstall". */
int uninstall_command(int argc, char **argv);
void install_usage(FILE *to);

#endif

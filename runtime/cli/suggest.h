/*
 * suggest.h - "did you mean" for the command line: the option or command
 * a mistyped word most likely meant, taken from the help text the command
 * prints, so every option a command documents is a candidate without a
 * second list to keep in step.
 */
#ifndef LUAMCP_SUGGEST_H
#define LUAMCP_SUGGEST_H

#include <stdio.h>

/* " (did you mean --allow-read?)" when the text usage writes names an
 * option (-x, --xyz) like given ("--allow-reed"), else "". The text lives
 * until the next call. */
const char *suggest_option(const char *given, void (*usage)(FILE *to));
/* The same for a command: the words after "luamcp " in usage's text. */
const char *suggest_command(const char *given, void (*usage)(FILE *to));

#endif

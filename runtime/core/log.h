/*
 * log.h - the server's own log on stderr, the wire trace, and the RFC 5424
 * severities shared with MCP's notifications/message.
 */
#ifndef LUAMCP_LOG_H
#define LUAMCP_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

/* RFC 5424 severities: a smaller number is more severe. */
typedef enum log_level {
  LOG_EMERGENCY = 0,
  LOG_ALERT = 1,
  LOG_CRITICAL = 2,
  LOG_ERROR = 3,
  LOG_WARNING = 4,
  LOG_NOTICE = 5,
  LOG_INFO = 6,
  LOG_DEBUG = 7,
} log_level;

/* Parse an MCP level name ("debug" ... "emergency"); -1 if unknown. */
int log_level_parse(const char *name, size_t len);
const char *log_level_name(int level);

/* Messages at or above this severity reach stderr (--log-level). */
void log_set_level(int level);
int log_get_level(void);
/* Colour the stderr log and the trace on stderr. */
void log_set_color(bool on);
/* Name this process in every log line ("w2": luamcp[w2] info: ...), for
 * the workers of --workers, which share one stderr. */
void log_set_tag(const char *tag);
bool log_color(void);
/* Whether output to fd should be coloured: fd is a terminal, and NO_COLOR
 * (https://no-color.org) is unset or empty. */
bool log_color_wanted(int fd);
/* --log-format json: each line of log_write is one JSON object (time,
 * level, message, and the context below when set). */
void log_set_json(bool on);
bool log_json(void);
/* The request the loop is running now, named in JSON lines: its session,
 * JSON-RPC id (JSON text), tool and W3C trace id, each NULL when unknown
 * (copied, cut at a bounded length). The app sets it before it resumes a
 * request's Lua and clears it (all NULL) after. */
void log_set_context(const char *session, const char *request_id, const char *tool, const char *trace_id);
/* Text that others chose (a caller, a remote server, a tool's message),
 * made safe to show on a terminal or in a log line: every control byte
 * (C0 and DEL, and the C1 controls U+0080..U+009F as UTF-8, which terminals
 * also obey) is appended to out written out as \xHH (\r, \n, \t by name),
 * so it can neither move the cursor, set the title nor forge a line.
 * keep_lines keeps newlines and tabs (output made of lines: print, a
 * tool's text); else only tabs (one log line). Backslashes stay as they
 * are: the escapes are for reading, not for undoing. */
void log_escape(buf *out, const char *text, size_t len, bool keep_lines);
/* Text mode: one line, "TIME luamcp LEVEL: message", the message escaped
 * (log_escape, one line) so that nothing it carries acts on a terminal or
 * starts a line of its own (a traceback's lines show as \n\t). */
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* While serving, stderr must never block (a client may not read it): call
 * once, after fds 0 and 1 are set up. Lines then wait in a bounded buffer
 * (LOG_BUFFER_BYTES; beyond it they are dropped and counted), and the
 * transport's loop calls log_flush while log_pending. */
void log_nonblocking(void);
void log_flush(void);
/* Text that already ends in a newline, through the same buffer, as it is
 * (luamcp's own lines). */
void log_raw(const char *text, size_t len);
bool log_pending(void);
/* Lua's print (and a remote server's stderr): text ending in a newline,
 * its lines kept and its control bytes escaped (log_escape), or as one
 * JSON line at level info under --log-format json. */
void log_print(const char *text, size_t len);

/* --trace: every message in and out, with direction and timestamp, one
 * line each, or indented over several lines when the trace goes to a
 * terminal. path "-" means stderr. Returns false if the file cannot be
 * opened. */
bool trace_open(const char *path);
void trace_close(void);
bool trace_enabled(void);
/* direction: "<-" for received, "->" for sent. where names the transport or
 * session (never a session id, which is a secret). */
void trace_message(const char *direction, const char *where, const char *json, size_t len);

#endif

/*
 * log.h - the server's own log on stderr, the wire trace, and the RFC 5424
 * severities shared with MCP's notifications/message.
 */
#ifndef LUAMCP_LOG_H
#define LUAMCP_LOG_H

#include <stdbool.h>
#include <stddef.h>

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
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* While serving, stderr must never block (a client may not read it): call
 * once, after fds 0 and 1 are set up. Lines then wait in a bounded buffer
 * (LOG_BUFFER_BYTES; beyond it they are dropped and counted), and the
 * transport's loop calls log_flush while log_pending. */
void log_nonblocking(void);
void log_flush(void);
/* Text that already ends in a newline (Lua's print), through the same
 * buffer. */
void log_raw(const char *text, size_t len);
bool log_pending(void);
/* Lua's print: text ending in a newline, as it is (log_raw), or as one
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

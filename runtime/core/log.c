/* log.c - stderr log and wire trace. See log.h. */
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/luamcp_limits.h"
#include "os/stderr.h"
#include "os/terminal.h"

static const char *const LEVEL_NAMES[] = {"emergency", "alert", "critical", "error",
                                          "warning",   "notice", "info",    "debug"};

static int stderr_level = LOG_INFO;
static bool use_color;
/* Which process of several wrote a line ("w2" under --workers); "" alone. */
static char process_tag[16];
static bool json_lines; /* --log-format json */
/* What the loop is running now, for JSON lines: see log_set_context. */
static char context_session[64], context_request[128], context_tool[128], context_trace[40];
static FILE *trace_file;
static bool trace_to_stderr;
static bool trace_pretty; /* the trace goes to a terminal: indented JSON */

/* Everything written to stderr while serving goes through here, and never
 * blocks: a client may pipe our stderr and never read it (the MCP spec
 * allows that). Lines wait in a bounded buffer; past LOG_BUFFER_BYTES they
 * are dropped and counted, and a marker says how many once there is room.
 * Owner: this file, for the life of the process. */
static struct {
  buf pending;            /* bytes not yet written */
  bool nonblocking;       /* log_nonblocking has run */
  unsigned long dropped;  /* lines dropped since the last marker */
} out;

void log_nonblocking(void) {
  if (out.nonblocking) return;
  out.nonblocking = true;
  os_stderr_nonblocking();
}

void log_flush(void) {
  while (out.pending.len > 0) {
    long n = os_stderr_write(out.pending.data, out.pending.len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) buf_clear(&out.pending); /* stderr is gone */
      break;
    }
    buf_consume(&out.pending, (size_t)n);
  }
  if (out.pending.len == 0 && out.pending.cap > 64 * 1024) buf_free(&out.pending);
}

bool log_pending(void) { return out.pending.len > 0; }

/* One whole line (or several) for stderr. */
void log_raw(const char *text, size_t len) {
  if (out.dropped && out.pending.len + 96 <= LOG_BUFFER_BYTES) {
    char marker[96];
    int n = snprintf(marker, sizeof marker, "luamcp warning: %lu log lines dropped (stderr was not read)\n",
                     out.dropped);
    buf_append(&out.pending, marker, (size_t)n);
    out.dropped = 0;
  }
  if (out.pending.len + len > LOG_BUFFER_BYTES) {
    out.dropped++;
    return;
  }
  buf_append(&out.pending, text, len);
  log_flush();
}

int log_level_parse(const char *name, size_t len) {
  for (int i = 0; i <= LOG_DEBUG; i++)
    if (strlen(LEVEL_NAMES[i]) == len && memcmp(LEVEL_NAMES[i], name, len) == 0) return i;
  return -1;
}

const char *log_level_name(int level) {
  return level >= 0 && level <= LOG_DEBUG ? LEVEL_NAMES[level] : "info";
}

void log_set_level(int level) { stderr_level = level; }
int log_get_level(void) { return stderr_level; }
void log_set_color(bool on) { use_color = on; }
void log_set_tag(const char *tag) { snprintf(process_tag, sizeof process_tag, "%s", tag ? tag : ""); }
bool log_color(void) { return use_color; }

bool log_color_wanted(int fd) {
  /* https://no-color.org: set and not empty means no colour. */
  const char *no_color = getenv("NO_COLOR");
  return os_is_terminal(fd) && !(no_color && *no_color);
}

static void timestamp(char *out, size_t n) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  time_t seconds = tv.tv_sec; /* a long in Windows' timeval */
  gmtime_r(&seconds, &tm);
  size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + k, n - k, ".%03dZ", (int)(tv.tv_usec / 1000));
}

void log_set_json(bool on) { json_lines = on; }
bool log_json(void) { return json_lines; }

void log_set_context(const char *session, const char *request_id, const char *tool, const char *trace_id) {
  snprintf(context_session, sizeof context_session, "%s", session ? session : "");
  snprintf(context_request, sizeof context_request, "%s", request_id ? request_id : "");
  snprintf(context_tool, sizeof context_tool, "%s", tool ? tool : "");
  snprintf(context_trace, sizeof context_trace, "%s", trace_id ? trace_id : "");
}

void log_escape(buf *out, const char *text, size_t len, bool keep_lines) {
  size_t plain = 0; /* text[plain, i) is appended as it is */
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)text[i];
    bool c1 = c == 0xc2 && i + 1 < len && (unsigned char)text[i + 1] >= 0x80 && (unsigned char)text[i + 1] <= 0x9f;
    bool control = (c < 0x20 && !(c == '\t' || (keep_lines && c == '\n'))) || c == 0x7f || c1;
    if (!control) continue;
    buf_append(out, text + plain, i - plain);
    if (c == '\n') buf_puts(out, "\\n");
    else if (c == '\r') buf_puts(out, "\\r");
    else if (c1) buf_printf(out, "\\xc2\\x%02x", (unsigned char)text[++i]);
    else buf_printf(out, "\\x%02x", c);
    plain = i + 1;
  }
  buf_append(out, text + plain, len - plain);
}

/* fmt and ap as text in line. */
static void format_into(buf *line, const char *fmt, va_list ap) {
  char small[512];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  if (n >= 0 && (size_t)n < sizeof small) {
    buf_append(line, small, (size_t)n);
  } else if (n > 0) {
    char *big = malloc((size_t)n + 1);
    if (big) {
      vsnprintf(big, (size_t)n + 1, fmt, again);
      buf_append(line, big, (size_t)n);
      free(big);
    }
  }
  va_end(again);
}

static void json_field(buf *line, const char *key, const char *value) {
  if (!value || !*value) return;
  buf_printf(line, ",\"%s\":", key);
  json_write_string(line, value, strlen(value));
}

/* One JSON object per line: {"time","level","message"[,"worker","session",
 * "request_id","tool","trace_id"]}. The request id is its JSON text
 * (a number or a string's quotes), so it goes in as a string. */
static void write_json_line(int level, const char *when, const char *message, size_t len) {
  buf line = BUF_INIT;
  buf_puts(&line, "{\"time\":");
  json_write_string(&line, when, strlen(when));
  buf_puts(&line, ",\"level\":");
  json_write_string(&line, LEVEL_NAMES[level], strlen(LEVEL_NAMES[level]));
  buf_puts(&line, ",\"message\":");
  json_write_string(&line, message, len);
  json_field(&line, "worker", process_tag);
  json_field(&line, "session", context_session);
  json_field(&line, "request_id", context_request);
  json_field(&line, "tool", context_tool);
  json_field(&line, "trace_id", context_trace);
  buf_puts(&line, "}\n");
  log_raw(line.data, line.len);
  buf_free(&line);
}

void log_print(const char *text, size_t len) {
  if (!json_lines) {
    buf shown = BUF_INIT;
    log_escape(&shown, text, len, true);
    log_raw(shown.data ? shown.data : "", shown.len);
    buf_free(&shown);
    return;
  }
  char when[40];
  timestamp(when, sizeof when);
  while (len && text[len - 1] == '\n') len--;
  write_json_line(LOG_INFO, when, text, len);
}

void log_write(int level, const char *fmt, ...) {
  if (level > stderr_level) return;
  static const char *const colors[] = {"\x1b[1;31m", "\x1b[1;31m", "\x1b[1;31m", "\x1b[31m",
                                       "\x1b[33m",   "\x1b[36m",   "\x1b[32m",   "\x1b[2m"};
  char when[40];
  timestamp(when, sizeof when);
  buf message = BUF_INIT;
  va_list ap;
  va_start(ap, fmt);
  format_into(&message, fmt, ap);
  va_end(ap);
  if (json_lines) {
    write_json_line(level, when, message.data ? message.data : "", message.len);
    buf_free(&message);
    return;
  }
  buf line = BUF_INIT;
  if (use_color) buf_printf(&line, "\x1b[2m%s\x1b[0m %s%s%s%-7s\x1b[0m ", when, process_tag, *process_tag ? " " : "",
                            colors[level], LEVEL_NAMES[level]);
  else buf_printf(&line, "%s luamcp%s%s%s %s: ", when, *process_tag ? "[" : "", process_tag, *process_tag ? "]" : "",
                  LEVEL_NAMES[level]);
  log_escape(&line, message.data ? message.data : "", message.len, false);
  buf_putc(&line, '\n');
  log_raw(line.data, line.len);
  buf_free(&line);
  buf_free(&message);
}

bool trace_open(const char *path) {
  if (strcmp(path, "-") == 0) {
    trace_file = stderr;
    trace_to_stderr = true;
    trace_pretty = os_is_terminal(2);
    return true;
  }
  trace_file = fopen(path, "a");
  if (!trace_file) return false;
  setvbuf(trace_file, NULL, _IOLBF, 0);
  trace_pretty = os_is_terminal(fileno(trace_file));
  return true;
}

void trace_close(void) {
  if (trace_file && trace_file != stderr) fclose(trace_file);
  trace_file = NULL;
  trace_to_stderr = trace_pretty = false;
}

bool trace_enabled(void) { return trace_file != NULL; }

/* One message of the trace: as it went over the wire (one line, which
 * tools can grep), or indented for a person at a terminal. A message that
 * does not parse is shown as it came. */
static void append_message(buf *line, const char *json, size_t len) {
  json_doc *doc = trace_pretty ? json_parse(json, len, MAX_JSON_DEPTH, NULL) : NULL;
  if (doc) json_write_pretty(line, json_doc_root(doc), json, 0);
  else log_escape(line, json, len, false); /* as it came, but one line that cannot act on a terminal */
  json_doc_free(doc);
  buf_putc(line, '\n');
}

void trace_message(const char *direction, const char *where, const char *json, size_t len) {
  if (!trace_file) return;
  char when[40];
  timestamp(when, sizeof when);
  buf line = BUF_INIT;
  if (!trace_to_stderr) { /* a file of its own: plain writes */
    buf_printf(&line, "%s %s %s ", when, where, direction);
    append_message(&line, json, len);
    fwrite(line.data, 1, line.len, trace_file);
    buf_free(&line);
    return;
  }
  if (use_color)
    buf_printf(&line, "\x1b[2m%s %s\x1b[0m %s%s\x1b[0m ", when, where, direction[0] == '<' ? "\x1b[36m" : "\x1b[35m",
               direction);
  else buf_printf(&line, "%s %s %s ", when, where, direction);
  append_message(&line, json, len);
  log_raw(line.data, line.len);
  buf_free(&line);
}

/* log.c - stderr log and wire trace. See log.h. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static const char *const LEVEL_NAMES[] = {"emergency", "alert", "critical", "error",
                                          "warning",   "notice", "info",    "debug"};

static int stderr_level = LOG_INFO;
static bool use_color;
static FILE *trace_file;

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

static void timestamp(char *out, size_t n) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + k, n - k, ".%03dZ", (int)(tv.tv_usec / 1000));
}

void log_write(int level, const char *fmt, ...) {
  if (level > stderr_level) return;
  static const char *const colors[] = {"\x1b[1;31m", "\x1b[1;31m", "\x1b[1;31m", "\x1b[31m",
                                       "\x1b[33m",   "\x1b[36m",   "\x1b[32m",   "\x1b[2m"};
  char when[40];
  timestamp(when, sizeof when);
  va_list ap;
  va_start(ap, fmt);
  if (use_color) fprintf(stderr, "\x1b[2m%s\x1b[0m %s%-7s\x1b[0m ", when, colors[level], LEVEL_NAMES[level]);
  else fprintf(stderr, "%s luamcp %s: ", when, LEVEL_NAMES[level]);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

bool trace_open(const char *path) {
  if (strcmp(path, "-") == 0) {
    trace_file = stderr;
    return true;
  }
  trace_file = fopen(path, "a");
  if (trace_file) setvbuf(trace_file, NULL, _IOLBF, 0);
  return trace_file != NULL;
}

void trace_close(void) {
  if (trace_file && trace_file != stderr) fclose(trace_file);
  trace_file = NULL;
}

bool trace_enabled(void) { return trace_file != NULL; }

void trace_message(const char *direction, const char *where, const char *json, size_t len) {
  if (!trace_file) return;
  char when[40];
  timestamp(when, sizeof when);
  if (use_color && trace_file == stderr)
    fprintf(trace_file, "\x1b[2m%s %s\x1b[0m %s%s\x1b[0m %.*s\n", when, where,
            direction[0] == '<' ? "\x1b[36m" : "\x1b[35m", direction, (int)len, json);
  else fprintf(trace_file, "%s %s %s %.*s\n", when, where, direction, (int)len, json);
}

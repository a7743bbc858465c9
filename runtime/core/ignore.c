/* ignore.c - see ignore.h. */
#include "core/ignore.h"

#include <stdlib.h>
#include <string.h>

/* Longest pattern kept: glob_match backtracks, and a line this long is no
 * pattern anyone means. */
#define IGNORE_MAX_PATTERN 1024

static void add_rule(ignore_list *list, const char *line, size_t len) {
  ignore_rule r = {0};
  if (len && line[0] == '!') r.negated = true, line++, len--;
  if (len && line[len - 1] == '/') r.dirs_only = true, len--;
  if (len && line[0] == '/') r.anchored = true, line++, len--;
  if (len == 0 || len > IGNORE_MAX_PATTERN) return;
  if (memchr(line, '/', len)) r.anchored = true;
  r.pattern = strndup(line, len);
  list->rules = realloc(list->rules, (list->count + 1) * sizeof *list->rules);
  list->rules[list->count++] = r;
}

void ignore_list_parse(ignore_list *list, const char *text, size_t len) {
  const char *end = text + len;
  while (text < end) {
    const char *nl = memchr(text, '\n', (size_t)(end - text));
    const char *stop = nl ? nl : end;
    size_t n = (size_t)(stop - text);
    while (n && (text[n - 1] == '\r' || text[n - 1] == ' ' || text[n - 1] == '\t')) n--;
    if (n && text[0] != '#') add_rule(list, text, n);
    text = nl ? nl + 1 : end;
  }
}

/* Does pattern p match all of s? */
static bool glob_match(const char *p, const char *s) {
  while (*p) {
    if (p[0] == '*' && p[1] == '*') {
      p += 2;
      if (*p == '/') {
        /* "**" "/": none or more whole folders. */
        p++;
        if (glob_match(p, s)) return true;
        for (const char *q = s; *q; q++)
          if (*q == '/' && glob_match(p, q + 1)) return true;
        return false;
      }
      for (const char *q = s;; q++) {
        if (glob_match(p, q)) return true;
        if (!*q) return false;
      }
    }
    if (*p == '*') {
      p++;
      for (const char *q = s;; q++) {
        if (glob_match(p, q)) return true;
        if (!*q || *q == '/') return false;
      }
    }
    if (!*s || (*p == '?' ? *s == '/' : *p != *s)) return false;
    p++, s++;
  }
  return *s == '\0';
}

bool ignore_list_match(const ignore_list *list, const char *path, bool is_dir) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  bool ignored = false;
  for (size_t i = 0; i < list->count; i++) {
    const ignore_rule *r = &list->rules[i];
    if (r->dirs_only && !is_dir) continue;
    if (glob_match(r->pattern, r->anchored ? path : base)) ignored = !r->negated;
  }
  return ignored;
}

void ignore_list_free(ignore_list *list) {
  for (size_t i = 0; i < list->count; i++) free(list->rules[i].pattern);
  free(list->rules);
  *list = (ignore_list){0};
}

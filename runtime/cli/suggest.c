/* suggest.c - see suggest.h. */
#include "cli/suggest.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

/* Longest word compared: options and commands are short, and the distance
 * table is on the stack. */
#define SUGGEST_MAX_WORD 64

/* What usage writes, read back through a temporary file (the usage
 * functions write to a FILE *). */
static bool usage_text(void (*usage)(FILE *), buf *text) {
  FILE *f = tmpfile();
  if (!f) return false;
  usage(f);
  rewind(f);
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(text, chunk, n);
  fclose(f);
  return text->len > 0;
}

/* Optimal string alignment distance (Levenshtein with transpositions), as
 * lua/mcp/check.lua computes it for fields. */
static size_t distance(const char *a, size_t la, const char *b, size_t lb) {
  size_t d[SUGGEST_MAX_WORD + 1][SUGGEST_MAX_WORD + 1];
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    for (size_t j = 1; j <= lb; j++) {
      size_t v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + (a[i - 1] != b[j - 1]) < v) v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  }
  return d[la][lb];
}

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

/* The candidate closest to given, within a quarter of its length (at
 * least 1), as check.lua's suggest; ties go to the first in the text. */
typedef struct best_match {
  const char *given;
  size_t given_len;
  char word[SUGGEST_MAX_WORD + 1];
  size_t dist;
} best_match;

static void consider(best_match *m, const char *word, size_t len) {
  /* -o, -h: one letter off any other is no evidence of a typo. */
  if (len <= 2 || len > SUGGEST_MAX_WORD || m->given_len > SUGGEST_MAX_WORD) return;
  if (len == m->given_len && memcmp(word, m->given, len) == 0) {
    /* Known: only a value glued on with = (--http=8080) can be wrong. */
    if (m->given[len] == '=') snprintf(m->word, sizeof m->word, "%.*s %.*s", (int)len, word, SUGGEST_MAX_WORD / 2, m->given + len + 1);
    if (m->given[len] == '=') m->dist = 0;
    return;
  }
  size_t d = distance(m->given, m->given_len, word, len);
  size_t limit = len / 4 > 1 ? len / 4 : 1;
  if (d <= limit && d < m->dist) {
    memcpy(m->word, word, len);
    m->word[len] = '\0';
    m->dist = d;
  }
}

static const char *answer(const best_match *m) {
  static char text[SUGGEST_MAX_WORD + 32];
  if (m->dist == (size_t)-1) return "";
  snprintf(text, sizeof text, " (did you mean %s?)", m->word);
  return text;
}

const char *suggest_option(const char *given, void (*usage)(FILE *)) {
  best_match m = {.given = given, .given_len = strlen(given), .dist = (size_t)-1};
  buf text = BUF_INIT;
  /* An option with its value glued on (--http=8080) is judged by its name. */
  const char *eq = strchr(given, '=');
  if (eq) m.given_len = (size_t)(eq - given);
  if (usage_text(usage, &text)) {
    for (size_t i = 0; i < text.len; i++) {
      /* -x or --word, where a word starts: after a space, "(", "[", "," or "|" */
      bool starts = i == 0 || strchr(" \t\n([,|'", text.data[i - 1]);
      if (!starts || text.data[i] != '-') continue;
      size_t k = i + (i + 1 < text.len && text.data[i + 1] == '-' ? 2 : 1);
      if (k >= text.len || !isalpha((unsigned char)text.data[k])) continue;
      size_t end = k;
      while (end < text.len && word_char(text.data[end])) end++;
      consider(&m, text.data + i, end - i);
      i = end;
    }
  }
  buf_free(&text);
  return answer(&m);
}

const char *suggest_command(const char *given, void (*usage)(FILE *)) {
  best_match m = {.given = given, .given_len = strlen(given), .dist = (size_t)-1};
  buf text = BUF_INIT;
  static const char prefix[] = "luamcp ";
  if (usage_text(usage, &text)) {
    for (const char *p = text.data; (p = strstr(p, prefix)) != NULL;) {
      p += sizeof prefix - 1;
      if (!isalpha((unsigned char)*p)) continue;
      const char *end = p;
      while (word_char(*end)) end++;
      consider(&m, p, (size_t)(end - p));
      p = end;
    }
  }
  buf_free(&text);
  return answer(&m);
}

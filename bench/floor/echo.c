/*
 * echo: the pipe's ceiling. A stdio "MCP server" that does not parse JSON:
 * for every newline-delimited request it finds the "id" member by scanning
 * bytes, copies its value into a fixed response template and writes it back.
 * initialize gets a fixed initialize result (so clients can start); lines
 * without an id (notifications) get nothing; every other request gets
 *   {"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"0"}]}}
 * so the load client must run with --no-sum-check against it.
 * Exits on stdin EOF.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char init_head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
static const char init_tail[] =
    ",\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tools\":{}},"
    "\"serverInfo\":{\"name\":\"echo\",\"version\":\"1.0.0\"}}}\n";
static const char call_tail[] = ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"0\"}]}}\n";

/* finds the value of "id" in a line; returns its length (0: none) */
static size_t find_id(const char *s, size_t n, const char **v) {
  for (size_t i = 0; i + 4 < n; i++) {
    if (s[i] != '"' || s[i + 1] != 'i' || s[i + 2] != 'd' || s[i + 3] != '"') continue;
    size_t p = i + 4;
    while (p < n && (s[p] == ' ' || s[p] == '\t')) p++;
    if (p >= n || s[p] != ':') continue;
    p++;
    while (p < n && (s[p] == ' ' || s[p] == '\t')) p++;
    size_t e = p;
    if (p < n && s[p] == '"') {
      e++;
      while (e < n && s[e] != '"') e += (s[e] == '\\') ? 2 : 1;
      e++;
    } else {
      while (e < n && s[e] != ',' && s[e] != '}' && s[e] != ' ') e++;
    }
    if (e > n || e == p) return 0;
    *v = s + p;
    return e - p;
  }
  return 0;
}

static int write_all(const char *p, size_t n) {
  while (n) {
    ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int main(void) {
  size_t cap = 1 << 16, len = 0, ocap = 1 << 16, olen = 0;
  char *in = malloc(cap), *out = malloc(ocap);
  if (!in || !out) return 1;
  for (;;) {
    if (len == cap) {
      if (cap >= (64u << 20)) return 1;
      cap *= 2;
      if (!(in = realloc(in, cap))) return 1;
    }
    ssize_t n = read(0, in + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    size_t start = 0;
    char *nl;
    while ((nl = memchr(in + start, '\n', len - start))) {
      const char *line = in + start, *id;
      size_t l = (size_t)(nl - line);
      size_t il = find_id(line, l, &id);
      if (il) {
        int init = memmem(line, l, "\"initialize\"", 12) != NULL;
        const char *tail = init ? init_tail : call_tail;
        size_t tl = init ? sizeof init_tail - 1 : sizeof call_tail - 1;
        size_t need = sizeof init_head - 1 + il + tl;
        while (olen + need > ocap) {
          ocap *= 2;
          if (!(out = realloc(out, ocap))) return 1;
        }
        memcpy(out + olen, init_head, sizeof init_head - 1);
        olen += sizeof init_head - 1;
        memcpy(out + olen, id, il);
        olen += il;
        memcpy(out + olen, tail, tl);
        olen += tl;
      }
      start = (size_t)(nl - in) + 1;
    }
    memmove(in, in + start, len - start);
    len -= start;
    if (olen) {
      if (write_all(out, olen)) break;
      olen = 0;
    }
  }
  return 0;
}

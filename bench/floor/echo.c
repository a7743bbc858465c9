/*
 * echo: the pipe's ceiling. A stdio "MCP server" that does not parse JSON:
 * for every newline-delimited request it finds the "id" member by scanning
 * bytes, copies its value into a fixed response template and writes it back.
 * initialize gets a fixed initialize result (so clients can start); lines
 * without an id (notifications) get nothing; every other request gets
 *   {"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"0"}]}}
 * so the load client must run with --no-sum-check against it.
 *
 * The payload sweep's requests (bench/payload.h, loadclient --payload) get
 * their payload: tools/call text and structured {bytes} and resources/read
 * blob://BYTES an answer made once per size, tools/call echo {text} its
 * argument's JSON string copied as it came (not decoded). Exits on stdin EOF.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../payload.h"

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

/* ---- the payload sweep ---- */

enum { KIND_TEXT, KIND_STRUCTURED, KIND_BLOB, KINDS };
/* Answers after the id, made once per kind and size. */
static struct answer {
  int kind;
  size_t bytes;
  char *tail;
  size_t len;
  struct answer *next;
} *answers;

static void append(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
  while (*len + n + 1 > *cap) *cap = *cap ? *cap * 2 : 4096;
  *p = realloc(*p, *cap);
  if (!*p) exit(1);
  memcpy(*p + *len, s, n);
  *len += n;
  (*p)[*len] = 0;
}
#define APPEND_LIT(p, l, c, lit) append(p, l, c, lit, sizeof lit - 1)

static struct answer *answer_for(int kind, size_t bytes) {
  for (struct answer *a = answers; a; a = a->next)
    if (a->kind == kind && a->bytes == bytes) return a;
  struct answer *a = calloc(1, sizeof *a);
  size_t cap = 0, n = 0;
  a->kind = kind;
  a->bytes = bytes;
  if (kind == KIND_BLOB) {
    char head[96];
    unsigned char *b = payload_blob(bytes);
    char *b64 = payload_base64(b, bytes, &n);
    int hl = snprintf(head, sizeof head, ",\"result\":{\"contents\":[{\"uri\":\"blob://%zu\",\"blob\":\"", bytes);
    append(&a->tail, &a->len, &cap, head, (size_t)hl);
    append(&a->tail, &a->len, &cap, b64, n);
    free(b);
    free(b64);
    APPEND_LIT(&a->tail, &a->len, &cap, "\"}]}}\n");
  } else {
    char *text = kind == KIND_TEXT ? payload_text(bytes) : payload_object_json(bytes, &n);
    size_t tl = kind == KIND_TEXT ? bytes : n;
    char *esc = payload_escape(text, tl, &n);
    APPEND_LIT(&a->tail, &a->len, &cap, ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"");
    append(&a->tail, &a->len, &cap, esc, n);
    APPEND_LIT(&a->tail, &a->len, &cap, "\"}]");
    if (kind == KIND_STRUCTURED) {
      APPEND_LIT(&a->tail, &a->len, &cap, ",\"structuredContent\":");
      append(&a->tail, &a->len, &cap, text, tl);
    }
    APPEND_LIT(&a->tail, &a->len, &cap, "}}\n");
    free(text);
    free(esc);
  }
  a->next = answers;
  answers = a;
  return a;
}

static size_t number_after(const char *line, size_t l, const char *key) {
  const char *k = memmem(line, l, key, strlen(key));
  return k ? strtoull(k + strlen(key), NULL, 10) : 0;
}

static int writev_all(struct iovec *v, int n) {
  while (n > 0) {
    ssize_t w = writev(1, v, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    while (n > 0 && (size_t)w >= v->iov_len) w -= (ssize_t)v->iov_len, v++, n--;
    if (n > 0) v->iov_base = (char *)v->iov_base + w, v->iov_len -= (size_t)w;
  }
  return 0;
}

/* Answers a payload request, if the line is one: 1 answered, 0 not one,
 * -1 write failed. */
static int payload_answer(const char *line, size_t l, const char *id, size_t il) {
  struct iovec v[5];
  size_t full = l;
  if (l > 256) l = 256; /* the name comes before the arguments: no need to look further */
  int n = 0;
  v[n++] = (struct iovec){(void *)init_head, sizeof init_head - 1};
  v[n++] = (struct iovec){(void *)id, il};
  if (memmem(line, l, "\"name\":\"echo\"", 13)) {
    static const char key[] = "\"text\":\"", head[] = ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"";
    const char *t = memmem(line, l, key, sizeof key - 1);
    if (!t) return 0;
    const char *s = t + sizeof key - 1, *e = s, *end = line + full;
    for (;;) { /* the first quote with an even number of backslashes before it */
      e = memchr(e, '"', (size_t)(end - e));
      if (!e) return 0;
      const char *b = e;
      while (b > s && b[-1] == '\\') b--;
      if ((e - b) % 2 == 0) break;
      e++;
    }
    v[n++] = (struct iovec){(void *)head, sizeof head - 1};
    v[n++] = (struct iovec){(void *)s, (size_t)(e - s)};
    v[n++] = (struct iovec){"\"}]}}\n", 6};
  } else {
    struct answer *a;
    if (memmem(line, l, "\"name\":\"text\"", 13)) a = answer_for(KIND_TEXT, number_after(line, l, "\"bytes\":"));
    else if (memmem(line, l, "\"name\":\"structured\"", 19)) a = answer_for(KIND_STRUCTURED, number_after(line, l, "\"bytes\":"));
    else if (memmem(line, l, "\"uri\":\"blob://", 14)) a = answer_for(KIND_BLOB, number_after(line, l, "blob://"));
    else return 0;
    v[n++] = (struct iovec){a->tail, a->len};
  }
  return writev_all(v, n) ? -1 : 1;
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
    size_t from = len; /* where to look for a newline: the bytes before had none */
    len += (size_t)n;
    size_t start = 0;
    char *nl;
    while ((nl = memchr(in + from, '\n', len - from))) {
      const char *line = in + start, *id;
      size_t l = (size_t)(nl - line);
      size_t il = find_id(line, l, &id);
      int answered = 0;
      if (il && !memmem(line, l < 256 ? l : 256, "\"name\":\"add\"", 12)) {
        /* answers leave in order: what is queued goes first */
        if (olen && write_all(out, olen)) return 0;
        olen = 0;
        answered = payload_answer(line, l, id, il);
        if (answered < 0) return 0;
      }
      if (il && !answered) {
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
      start = from = (size_t)(nl - in) + 1;
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

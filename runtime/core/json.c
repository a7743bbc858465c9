/* json.c - strict JSON parser, tree helpers and writers. See json.h. */
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- Arena ----------------------------------------------------------- */

/* A block of the doc's arena. Owned by the doc; freed with it. */
typedef struct arena_block {
  struct arena_block *next;
  size_t used, cap;
  max_align_t data[];
} arena_block;

struct json_doc {
  arena_block *blocks;
  json_value root;
};

enum { ARENA_BLOCK_BYTES = 4096 };

/* One standard block kept from the last freed doc: most messages fit in
 * one, and a 4 KiB malloc is slow (too big for glibc's per-thread cache). */
static _Thread_local arena_block *spare_block;

static void *arena_alloc(json_doc *doc, size_t n) {
  n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  arena_block *b = doc->blocks;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_BLOCK_BYTES / 2 ? n : ARENA_BLOCK_BYTES;
    arena_block *nb;
    if (cap == ARENA_BLOCK_BYTES && spare_block) {
      nb = spare_block;
      spare_block = NULL;
    } else if (!(nb = malloc(sizeof *nb + cap))) {
      return NULL;
    }
    nb->used = 0;
    nb->cap = cap;
    if (b && cap != ARENA_BLOCK_BYTES) {
      /* A big allocation gets its own block behind the current one, so the
       * current block's free space stays in use. */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      doc->blocks = nb;
    }
    b = nb;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  return p;
}

void json_doc_free(json_doc *doc) {
  if (!doc) return;
  arena_block *b = doc->blocks;
  while (b) {
    arena_block *next = b->next;
    if (b->cap == ARENA_BLOCK_BYTES && !spare_block) spare_block = b;
    else free(b);
    b = next;
  }
  free(doc);
}

const json_value *json_doc_root(const json_doc *doc) { return &doc->root; }

/* ---- UTF-8 ----------------------------------------------------------- */

size_t utf8_sequence_length(const unsigned char *s, size_t avail) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0; /* continuation byte or overlong 2-byte lead */
  if (c < 0xE0) {
    if (avail < 2 || (s[1] & 0xC0) != 0x80) return 0;
    return 2;
  }
  if (c < 0xF0) {
    if (avail < 3) return 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;      /* overlong */
    else if (c == 0xED) hi = 0x9F; /* UTF-16 surrogates */
    if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80) return 0;
    return 3;
  }
  if (c < 0xF5) {
    if (avail < 4) return 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xF0) lo = 0x90;      /* overlong */
    else if (c == 0xF4) hi = 0x8F; /* beyond U+10FFFF */
    if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
    return 4;
  }
  return 0;
}

bool utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    if (*p < 0x80) {
      p++;
      continue;
    }
    size_t n = utf8_sequence_length(p, (size_t)(end - p));
    if (!n) return false;
    p += n;
  }
  return true;
}

size_t utf8_count(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
  return n;
}

size_t utf8_decode(const unsigned char *s, uint32_t *cp) {
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  if (s[0] < 0xE0) {
    *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    return 2;
  }
  if (s[0] < 0xF0) {
    *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return 3;
  }
  *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
        ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
  return 4;
}

void utf8_encode(buf *b, uint32_t cp) {
  char out[4];
  size_t n;
  if (cp < 0x80) {
    out[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  buf_append(b, out, n);
}

/* ---- Parser ---------------------------------------------------------- */

/* Parser state for one json_parse call. Lives on the caller's stack. The
 * scratch stacks hold the items of the arrays and objects still open; each
 * closed container copies its slice into the arena and pops it. */
/* The scratch stacks of the parser, kept between parses (a parse does not
 * call out, so one set per thread suffices). */
static _Thread_local struct {
  json_value *items;
  size_t items_cap;
  json_member *members;
  size_t members_cap;
  buf text;
} scratch;

typedef struct parser {
  const unsigned char *start, *p, *end;
  json_doc *doc;
  json_error *err;
  int depth, max_depth;
  json_value *items;
  size_t items_len, items_cap;
  json_member *members;
  size_t members_len, members_cap;
  buf text; /* a string being unescaped */
} parser;

static bool fail(parser *ps, const unsigned char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(parser *ps, const unsigned char *at, const char *fmt, ...) {
  if (ps->err && ps->err->message[0] == '\0') {
    size_t off = (size_t)(at - ps->start);
    ps->err->offset = off;
    va_list ap;
    va_start(ap, fmt);
    char what[96];
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(ps->err->message, sizeof ps->err->message, "%s at byte %zu", what, off);
  }
  return false;
}

static void skip_ws(parser *ps) {
  const unsigned char *p = ps->p;
  while (p < ps->end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  ps->p = p;
}

static bool describe_unexpected(parser *ps, const char *wanted) {
  if (ps->p >= ps->end) return fail(ps, ps->p, "unexpected end of input, expected %s", wanted);
  unsigned char c = *ps->p;
  if (c >= 0x20 && c < 0x7F) return fail(ps, ps->p, "unexpected '%c', expected %s", c, wanted);
  return fail(ps, ps->p, "unexpected byte 0x%02X, expected %s", c, wanted);
}

static bool parse_value(parser *ps, json_value *out);

static int hex4(const unsigned char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = p[i], d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Parse a string literal at ps->p (which is at '"'); the decoded bytes are
 * copied into the arena. */
static bool parse_string(parser *ps, const char **out, uint32_t *out_len) {
  const unsigned char *p = ps->p + 1, *end = ps->end;
  const unsigned char *run = p; /* start of the bytes not yet copied */
  buf_clear(&ps->text);
  bool escaped = false;
  for (;;) {
    if (p >= end) return fail(ps, p, "unterminated string");
    unsigned char c = *p;
    if (c == '"') break;
    if (c < 0x20) return fail(ps, p, "raw control character 0x%02X in a string", c);
    if (c < 0x80 && c != '\\') {
      p++;
      continue;
    }
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(p, (size_t)(end - p));
      if (!n) return fail(ps, p, "invalid UTF-8");
      p += n;
      continue;
    }
    /* A backslash escape. */
    escaped = true;
    buf_append(&ps->text, run, (size_t)(p - run));
    if (p + 1 >= end) return fail(ps, p, "unterminated string");
    unsigned char e = p[1];
    char simple = 0;
    switch (e) {
      case '"': simple = '"'; break;
      case '\\': simple = '\\'; break;
      case '/': simple = '/'; break;
      case 'b': simple = '\b'; break;
      case 'f': simple = '\f'; break;
      case 'n': simple = '\n'; break;
      case 'r': simple = '\r'; break;
      case 't': simple = '\t'; break;
      case 'u': break;
      default: return fail(ps, p, "invalid escape");
    }
    if (simple) {
      buf_putc(&ps->text, simple);
      p += 2;
    } else {
      int cp = end - p >= 6 ? hex4(p + 2) : -1;
      if (cp < 0) return fail(ps, p, "invalid \\u escape");
      if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(ps, p, "lone surrogate \\u%04X", cp);
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        int lo = (end - p >= 12 && p[6] == '\\' && p[7] == 'u') ? hex4(p + 8) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, p, "lone surrogate \\u%04X", cp);
        utf8_encode(&ps->text, 0x10000u + (((uint32_t)cp - 0xD800u) << 10) + ((uint32_t)lo - 0xDC00u));
        p += 12;
      } else {
        utf8_encode(&ps->text, (uint32_t)cp);
        p += 6;
      }
    }
    run = p;
  }
  const char *src;
  size_t n;
  if (escaped) {
    buf_append(&ps->text, run, (size_t)(p - run));
    src = ps->text.data;
    n = ps->text.len;
  } else {
    src = (const char *)ps->p + 1;
    n = (size_t)(p - (ps->p + 1));
  }
  if (n > UINT32_MAX - 1) return fail(ps, ps->p, "string too long");
  char *copy = arena_alloc(ps->doc, n + 1);
  if (!copy) return fail(ps, ps->p, "out of memory");
  memcpy(copy, src, n);
  copy[n] = '\0';
  *out = copy;
  *out_len = (uint32_t)n;
  ps->p = p + 1;
  return true;
}

static bool parse_number(parser *ps, json_value *out) {
  const unsigned char *p = ps->p, *end = ps->end, *start = p;
  bool negative = false, is_integer = true;
  if (*p == '-') {
    negative = true;
    p++;
  }
  if (p >= end || *p < '0' || *p > '9') return fail(ps, p, "a number needs a digit after '-'");
  if (*p == '0') {
    p++;
    if (p < end && *p >= '0' && *p <= '9') return fail(ps, p, "leading zero in a number");
  } else {
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && *p == '.') {
    is_integer = false;
    p++;
    if (p >= end || *p < '0' || *p > '9') return fail(ps, p, "a number needs a digit after '.'");
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    is_integer = false;
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') return fail(ps, p, "a number needs a digit in its exponent");
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  size_t n = (size_t)(p - start);
  ps->p = p;
  if (is_integer) {
    /* Accumulate as a negative number so INT64_MIN fits. */
    const unsigned char *d = start + negative;
    int64_t acc = 0;
    bool overflow = false;
    for (; d < p; d++) {
      int digit = *d - '0';
      if (acc < (INT64_MIN + digit) / 10) {
        overflow = true;
        break;
      }
      acc = acc * 10 - digit;
    }
    if (!overflow && !(negative && acc == 0) && (negative || acc != INT64_MIN)) {
      out->type = JSON_INTEGER;
      out->u.integer = negative ? acc : -acc;
      return true;
    }
    /* "-0" and integers beyond int64 fall through to a double. */
  }
  char small[64], *text = small;
  if (n >= sizeof small && !(text = malloc(n + 1))) return fail(ps, start, "out of memory");
  memcpy(text, start, n);
  text[n] = '\0';
  errno = 0;
  double d = strtod(text, NULL);
  bool overflowed = errno == ERANGE && isinf(d);
  if (text != small) free(text);
  if (overflowed) return fail(ps, start, "number too large for a double");
  out->type = JSON_FLOAT;
  out->u.number = d;
  return true;
}

static bool expect_literal(parser *ps, const char *word, size_t n) {
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return describe_unexpected(ps, "a value");
  ps->p += n;
  return true;
}

static bool push_item(parser *ps, const json_value *v) {
  if (ps->items_len == ps->items_cap) {
    size_t cap = ps->items_cap ? ps->items_cap * 2 : 32;
    json_value *n = realloc(ps->items, cap * sizeof *n);
    if (!n) return fail(ps, ps->p, "out of memory");
    ps->items = n;
    ps->items_cap = cap;
  }
  ps->items[ps->items_len++] = *v;
  return true;
}

static json_member *push_member(parser *ps) {
  if (ps->members_len == ps->members_cap) {
    size_t cap = ps->members_cap ? ps->members_cap * 2 : 32;
    json_member *n = realloc(ps->members, cap * sizeof *n);
    if (!n) return NULL;
    ps->members = n;
    ps->members_cap = cap;
  }
  return &ps->members[ps->members_len++];
}

static bool parse_array(parser *ps, json_value *out) {
  size_t base = ps->items_len;
  ps->p++; /* '[' */
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == ']') {
    ps->p++;
  } else {
    for (;;) {
      json_value item;
      if (!parse_value(ps, &item) || !push_item(ps, &item)) return false;
      skip_ws(ps);
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        continue;
      }
      if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        break;
      }
      return describe_unexpected(ps, "',' or ']'");
    }
  }
  size_t n = ps->items_len - base;
  if (n > UINT32_MAX) return fail(ps, ps->p, "array too long");
  out->type = JSON_ARRAY;
  out->len = (uint32_t)n;
  out->u.items = NULL;
  if (n) {
    out->u.items = arena_alloc(ps->doc, n * sizeof(json_value));
    if (!out->u.items) return fail(ps, ps->p, "out of memory");
    memcpy(out->u.items, ps->items + base, n * sizeof(json_value));
  }
  ps->items_len = base;
  return true;
}

static bool parse_object(parser *ps, json_value *out) {
  size_t base = ps->members_len;
  ps->p++; /* '{' */
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == '}') {
    ps->p++;
  } else {
    for (;;) {
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != '"') return describe_unexpected(ps, "a string key");
      const char *key;
      uint32_t key_len;
      if (!parse_string(ps, &key, &key_len)) return false;
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != ':') return describe_unexpected(ps, "':'");
      ps->p++;
      json_value value;
      if (!parse_value(ps, &value)) return false;
      json_member *m = push_member(ps);
      if (!m) return fail(ps, ps->p, "out of memory");
      m->key = key;
      m->key_len = key_len;
      m->value = value;
      skip_ws(ps);
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        continue;
      }
      if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        break;
      }
      return describe_unexpected(ps, "',' or '}'");
    }
  }
  size_t n = ps->members_len - base;
  if (n > UINT32_MAX) return fail(ps, ps->p, "object too long");
  out->type = JSON_OBJECT;
  out->len = (uint32_t)n;
  out->u.members = NULL;
  if (n) {
    out->u.members = arena_alloc(ps->doc, n * sizeof(json_member));
    if (!out->u.members) return fail(ps, ps->p, "out of memory");
    memcpy(out->u.members, ps->members + base, n * sizeof(json_member));
  }
  ps->members_len = base;
  return true;
}

static bool parse_value(parser *ps, json_value *out) {
  skip_ws(ps);
  const unsigned char *start = ps->p;
  out->len = 0;
  out->src_off = (uint32_t)(start - ps->start);
  if (ps->p >= ps->end) return describe_unexpected(ps, "a value");
  bool ok;
  switch (*ps->p) {
    case '{':
    case '[':
      if (++ps->depth > ps->max_depth) return fail(ps, ps->p, "nesting deeper than %d levels", ps->max_depth);
      ok = *ps->p == '{' ? parse_object(ps, out) : parse_array(ps, out);
      ps->depth--;
      break;
    case '"': {
      const char *s;
      uint32_t n;
      ok = parse_string(ps, &s, &n);
      if (ok) {
        out->type = JSON_STRING;
        out->u.string = s;
        out->len = n;
      }
      break;
    }
    case 't':
      ok = expect_literal(ps, "true", 4);
      out->type = JSON_TRUE;
      break;
    case 'f':
      ok = expect_literal(ps, "false", 5);
      out->type = JSON_FALSE;
      break;
    case 'n':
      ok = expect_literal(ps, "null", 4);
      out->type = JSON_NULL;
      break;
    default:
      if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) ok = parse_number(ps, out);
      else ok = describe_unexpected(ps, "a value");
  }
  out->src_len = (uint32_t)(ps->p - start);
  return ok;
}

json_doc *json_parse(const char *text, size_t len, int max_depth, json_error *err) {
  if (err) {
    err->offset = 0;
    err->message[0] = '\0';
  }
  parser ps = {0};
  ps.items = scratch.items;
  ps.items_cap = scratch.items_cap;
  ps.members = scratch.members;
  ps.members_cap = scratch.members_cap;
  ps.text = scratch.text;
  ps.start = ps.p = (const unsigned char *)text;
  ps.end = ps.start + len;
  ps.err = err;
  ps.max_depth = max_depth;
  if (len > UINT32_MAX) {
    fail(&ps, ps.p, "input too large");
    return NULL;
  }
  ps.doc = calloc(1, sizeof *ps.doc);
  if (!ps.doc) return NULL;
  bool ok = parse_value(&ps, &ps.doc->root);
  if (ok) {
    skip_ws(&ps);
    if (ps.p != ps.end) ok = fail(&ps, ps.p, "unexpected data after the JSON value");
  }
  /* Keep the scratch space for the next parse, unless one huge document
   * grew it. */
  enum { KEEP = 4096 };
  if (ps.items_cap > KEEP) {
    free(ps.items);
    ps.items = NULL;
    ps.items_cap = 0;
  }
  if (ps.members_cap > KEEP) {
    free(ps.members);
    ps.members = NULL;
    ps.members_cap = 0;
  }
  if (ps.text.cap > KEEP * 16) buf_free(&ps.text);
  scratch.items = ps.items;
  scratch.items_cap = ps.items_cap;
  scratch.members = ps.members;
  scratch.members_cap = ps.members_cap;
  scratch.text = ps.text;
  if (!ok) {
    json_doc_free(ps.doc);
    return NULL;
  }
  return ps.doc;
}

/* ---- Tree helpers ---------------------------------------------------- */

const json_value *json_object_getn(const json_value *obj, const char *key, size_t key_len) {
  if (!obj || obj->type != JSON_OBJECT) return NULL;
  for (uint32_t i = obj->len; i-- > 0;) {
    const json_member *m = &obj->u.members[i];
    if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0) return &m->value;
  }
  return NULL;
}

const json_value *json_object_get(const json_value *obj, const char *key) {
  return json_object_getn(obj, key, strlen(key));
}

/* Is member i the last one with its key (the one a lookup would find)? */
static bool member_is_last(const json_value *obj, uint32_t i) {
  const json_member *m = &obj->u.members[i];
  for (uint32_t j = i + 1; j < obj->len; j++) {
    const json_member *o = &obj->u.members[j];
    if (o->key_len == m->key_len && memcmp(o->key, m->key, m->key_len) == 0) return false;
  }
  return true;
}

bool json_equal(const json_value *a, const json_value *b) {
  if (json_is_number(a) && json_is_number(b)) {
    if (a->type == JSON_INTEGER && b->type == JSON_INTEGER) return a->u.integer == b->u.integer;
    return json_number(a) == json_number(b);
  }
  if (a->type != b->type) return false;
  switch (a->type) {
    case JSON_STRING:
      return a->len == b->len && memcmp(a->u.string, b->u.string, a->len) == 0;
    case JSON_ARRAY:
      if (a->len != b->len) return false;
      for (uint32_t i = 0; i < a->len; i++)
        if (!json_equal(&a->u.items[i], &b->u.items[i])) return false;
      return true;
    case JSON_OBJECT: {
      uint32_t distinct_a = 0, distinct_b = 0;
      for (uint32_t i = 0; i < a->len; i++) {
        if (!member_is_last(a, i)) continue;
        distinct_a++;
        const json_member *m = &a->u.members[i];
        const json_value *other = json_object_getn(b, m->key, m->key_len);
        if (!other || !json_equal(&m->value, other)) return false;
      }
      for (uint32_t i = 0; i < b->len; i++)
        if (member_is_last(b, i)) distinct_b++;
      return distinct_a == distinct_b;
    }
    default:
      return true; /* null, true, false */
  }
}

const char *json_type_name(json_type t) {
  switch (t) {
    case JSON_NULL: return "null";
    case JSON_FALSE:
    case JSON_TRUE: return "boolean";
    case JSON_INTEGER: return "integer";
    case JSON_FLOAT: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
  }
  return "?";
}

/* ---- Writers --------------------------------------------------------- */

size_t json_write_string(buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s, *end = p + len, *run;
  size_t replaced = 0;
  buf_reserve(b, len + 2);
  buf_putc(b, '"');
  run = p;
  while (p < end) {
    unsigned char c = *p;
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      p++;
      continue;
    }
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(p, (size_t)(end - p));
      if (n) {
        p += n;
        continue;
      }
      buf_append(b, run, (size_t)(p - run));
      buf_puts(b, "\xEF\xBF\xBD"); /* U+FFFD for one bad byte */
      replaced++;
      run = ++p;
      continue;
    }
    buf_append(b, run, (size_t)(p - run));
    switch (c) {
      case '"': buf_puts(b, "\\\""); break;
      case '\\': buf_puts(b, "\\\\"); break;
      case '\n': buf_puts(b, "\\n"); break;
      case '\r': buf_puts(b, "\\r"); break;
      case '\t': buf_puts(b, "\\t"); break;
      case '\b': buf_puts(b, "\\b"); break;
      case '\f': buf_puts(b, "\\f"); break;
      default: {
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        buf_append(b, esc, 6);
      }
    }
    run = ++p;
  }
  buf_append(b, run, (size_t)(p - run));
  buf_putc(b, '"');
  return replaced;
}

void json_write_integer(buf *b, int64_t i) {
  char tmp[24];
  char *q = tmp + sizeof tmp;
  uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
  do {
    *--q = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (i < 0) *--q = '-';
  buf_append(b, q, (size_t)(tmp + sizeof tmp - q));
}

bool json_write_double(buf *b, double d) {
  if (!isfinite(d)) return false;
  char tmp[40];
  int n = 0;
  /* The shortest of %.15g, %.16g and %.17g that reads back exactly. */
  for (int precision = 15; precision <= 17; precision++) {
    n = snprintf(tmp, sizeof tmp, "%.*g", precision, d);
    if (precision == 17 || strtod(tmp, NULL) == d) break;
  }
  bool has_mark = false;
  for (int i = 0; i < n; i++)
    if (tmp[i] == '.' || tmp[i] == 'e') has_mark = true;
  buf_append(b, tmp, (size_t)n);
  if (!has_mark) buf_puts(b, ".0"); /* keep it a float when read back */
  return true;
}

bool json_write_number(buf *b, double d) {
  if (d == floor(d) && fabs(d) < 9007199254740992.0) {
    json_write_integer(b, (int64_t)d);
    return true;
  }
  return json_write_double(b, d);
}

void json_write_value(buf *b, const json_value *v) {
  switch (v->type) {
    case JSON_NULL: buf_puts(b, "null"); break;
    case JSON_FALSE: buf_puts(b, "false"); break;
    case JSON_TRUE: buf_puts(b, "true"); break;
    case JSON_INTEGER: json_write_integer(b, v->u.integer); break;
    case JSON_FLOAT:
      if (!json_write_double(b, v->u.number)) buf_puts(b, "null");
      break;
    case JSON_STRING: json_write_string(b, v->u.string, v->len); break;
    case JSON_ARRAY:
      buf_putc(b, '[');
      for (uint32_t i = 0; i < v->len; i++) {
        if (i) buf_putc(b, ',');
        json_write_value(b, &v->u.items[i]);
      }
      buf_putc(b, ']');
      break;
    case JSON_OBJECT:
      buf_putc(b, '{');
      for (uint32_t i = 0; i < v->len; i++) {
        if (i) buf_putc(b, ',');
        json_write_string(b, v->u.members[i].key, v->u.members[i].key_len);
        buf_putc(b, ':');
        json_write_value(b, &v->u.members[i].value);
      }
      buf_putc(b, '}');
      break;
  }
}

/* A scalar as the text it was parsed from (same spelling of numbers and
 * escapes), or re-serialised when there is no source. */
static void write_scalar(buf *b, const json_value *v, const char *source) {
  if (source) buf_append(b, source + v->src_off, v->src_len);
  else json_write_value(b, v);
}

static void write_indent(buf *b, int depth) {
  buf_putc(b, '\n');
  for (int i = 0; i < depth * JSON_PRETTY_INDENT; i++) buf_putc(b, ' ');
}

void json_write_pretty(buf *b, const json_value *v, const char *source, int depth) {
  bool object = v->type == JSON_OBJECT;
  if (!object && v->type != JSON_ARRAY) {
    write_scalar(b, v, source);
    return;
  }
  buf_putc(b, object ? '{' : '[');
  for (uint32_t i = 0; i < v->len; i++) {
    if (i) buf_putc(b, ',');
    write_indent(b, depth + 1);
    if (object) {
      json_write_string(b, v->u.members[i].key, v->u.members[i].key_len);
      buf_puts(b, ": ");
    }
    json_write_pretty(b, object ? &v->u.members[i].value : &v->u.items[i], source, depth + 1);
  }
  if (v->len) write_indent(b, depth);
  buf_putc(b, object ? '}' : ']');
}

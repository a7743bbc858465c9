/* json.c - strict JSON parser, tree helpers and writers. See json.h. */
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* JSON_SCAN_WORDS: the portable word path even where SSE2 is there (to
 * fuzz it on x86-64). */
#if defined(__SSE2__) && !defined(JSON_SCAN_WORDS)
#define JSON_SCAN_SSE2 1
#include <emmintrin.h>
#endif

/* ---- Scanning a vector or a word at a time ------------------------------- */

/* Long strings are most of a big message's bytes: the writer and the
 * parser look at SCAN_BYTES of them at once and stop only at the bytes
 * that need work. scan_mask(p) has a bit for each of the SCAN_BYTES bytes
 * at p that is '"', '\\', a control character or above 0x7F (which must be
 * checked as UTF-8); scan_first gives the index of the first one. SSE2 is
 * part of every x86-64; elsewhere a 64-bit word does the same with
 * bit tricks (little-endian), or a plain loop. */
#if JSON_SCAN_SSE2
enum { SCAN_BYTES = 16 };
static inline uint64_t scan_mask(const unsigned char *p) {
  __m128i x = _mm_loadu_si128((const __m128i *)p);
  /* A signed compare: bytes 0x80..0xFF are negative, so "below 0x20"
   * takes them too. */
  __m128i m = _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                           _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
  return (uint64_t)_mm_movemask_epi8(m);
}
static inline size_t scan_first(uint64_t mask) { return (size_t)__builtin_ctzll(mask); }
/* Copy the SCAN_BYTES at p to dst (both may be unaligned). */
static inline void scan_copy(char *dst, const unsigned char *p) {
  _mm_storeu_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)p));
}
static inline bool scan_all_ascii(const unsigned char *p) {
  return _mm_movemask_epi8(_mm_loadu_si128((const __m128i *)p)) == 0;
}
/* How many of the SCAN_BYTES at p start a character (are not 10xxxxxx). */
static inline size_t scan_count_starts(const unsigned char *p) {
  __m128i x = _mm_loadu_si128((const __m128i *)p);
  return (size_t)__builtin_popcount((unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(x, _mm_set1_epi8((char)0xBF))));
}
#else
enum { SCAN_BYTES = 8 };
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
static inline uint64_t load_word(const unsigned char *p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The high bit of each flagged byte. Bytes after the first flagged one may
 * be flagged wrongly (a borrow runs on), which is why only the first is
 * ever used: its index is exact. */
static inline uint64_t scan_mask(const unsigned char *p) {
  uint64_t w = load_word(p);
  uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
  uint64_t zero_q = (q - ONES) & ~q, zero_b = (b - ONES) & ~b, below = (w - ONES * 0x20) & ~w;
  return (zero_q | zero_b | below | w) & HIGHS;
}
static inline size_t scan_first(uint64_t mask) { return (size_t)__builtin_ctzll(mask) >> 3; }
#else
static inline uint64_t scan_mask(const unsigned char *p) {
  uint64_t m = 0;
  for (int i = 0; i < 8; i++)
    if (p[i] < 0x20 || p[i] >= 0x80 || p[i] == '"' || p[i] == '\\') m |= 1ull << i;
  return m;
}
static inline size_t scan_first(uint64_t mask) { return (size_t)__builtin_ctzll(mask); }
#endif
static inline void scan_copy(char *dst, const unsigned char *p) { memcpy(dst, p, 8); }
static inline bool scan_all_ascii(const unsigned char *p) { return (load_word(p) & HIGHS) == 0; }
static inline size_t scan_count_starts(const unsigned char *p) {
  uint64_t w = load_word(p);
  /* bit 0 of each byte: not bit 7, or bit 6 */
  return (size_t)__builtin_popcountll(((~w >> 7) | (w >> 6)) & ONES);
}
#endif

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
    if ((size_t)(end - p) >= SCAN_BYTES && scan_all_ascii(p)) {
      p += SCAN_BYTES;
      continue;
    }
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
  const unsigned char *p = (const unsigned char *)s;
  size_t n = 0, i = 0;
  for (; i + SCAN_BYTES <= len; i += SCAN_BYTES) n += scan_count_starts(p + i);
  for (; i < len; i++)
    if ((p[i] & 0xC0) != 0x80) n++;
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

/* The UTF-8 encoding of cp at out (4 bytes of room); returns its length. */
static size_t utf8_put(char out[4], uint32_t cp) {
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
  return n;
}

void utf8_encode(buf *b, uint32_t cp) {
  char out[4];
  buf_append(b, out, utf8_put(out, cp));
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
  /* json_parse_in_place: long strings are decoded where they are. */
  bool in_place;
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

/* From p, skip what a string carries as it is (printable ASCII and valid
 * UTF-8) and return the first byte that needs a look: a quote, a
 * backslash, a control character, invalid UTF-8, or end. */
static const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end) {
  for (;;) {
    if ((size_t)(end - p) >= SCAN_BYTES) {
      uint64_t m = scan_mask(p);
      if (!m) {
        p += SCAN_BYTES;
        continue;
      }
      p += scan_first(m);
    } else if (p >= end) {
      return end;
    }
    unsigned char c = *p;
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(p, (size_t)(end - p));
      if (!n) return p;
      p += n;
    } else if (c < 0x20 || c == '"' || c == '\\') {
      return p;
    } else {
      p++;
    }
  }
}

/* Why skip_plain stopped at p, when it was not a quote or a backslash. */
static bool fail_in_string(parser *ps, const unsigned char *p) {
  if (p >= ps->end) return fail(ps, p, "unterminated string");
  if (*p < 0x20) return fail(ps, p, "raw control character 0x%02X in a string", *p);
  return fail(ps, p, "invalid UTF-8");
}

/* Decode the escape at p (a backslash) into out (up to 4 bytes): returns
 * how many bytes it wrote, and sets *used to the escape's length; 0 after
 * failing. */
static size_t decode_escape(parser *ps, const unsigned char *p, char out[4], size_t *used) {
  const unsigned char *end = ps->end;
  if (p + 1 >= end) return fail(ps, p, "unterminated string"), 0;
  char simple = 0;
  switch (p[1]) {
    case '"': simple = '"'; break;
    case '\\': simple = '\\'; break;
    case '/': simple = '/'; break;
    case 'b': simple = '\b'; break;
    case 'f': simple = '\f'; break;
    case 'n': simple = '\n'; break;
    case 'r': simple = '\r'; break;
    case 't': simple = '\t'; break;
    case 'u': break;
    default: return fail(ps, p, "invalid escape"), 0;
  }
  if (simple) {
    out[0] = simple;
    *used = 2;
    return 1;
  }
  int cp = end - p >= 6 ? hex4(p + 2) : -1;
  if (cp < 0) return fail(ps, p, "invalid \\u escape"), 0;
  if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(ps, p, "lone surrogate \\u%04X", cp), 0;
  uint32_t code = (uint32_t)cp;
  *used = 6;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    int lo = (end - p >= 12 && p[6] == '\\' && p[7] == 'u') ? hex4(p + 8) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, p, "lone surrogate \\u%04X", cp), 0;
    code = 0x10000u + (((uint32_t)cp - 0xD800u) << 10) + ((uint32_t)lo - 0xDC00u);
    *used = 12;
  }
  return utf8_put(out, code);
}

/* Where an escaped string's decoded bytes go: ps->text, until it is long
 * enough to be decoded in place (then at w, behind the bytes still to
 * read: decoding only ever shrinks). */
typedef struct unescaper {
  parser *ps;
  unsigned char *start; /* the string's first byte in the text */
  unsigned char *w;     /* in place: where the next decoded byte goes; NULL before */
} unescaper;

static void unescape_put(unescaper *u, const void *bytes, size_t n) {
  parser *ps = u->ps;
  if (!u->w && ps->in_place && ps->text.len + n >= JSON_IN_PLACE_BYTES) {
    memcpy(u->start, ps->text.data, ps->text.len);
    u->w = u->start + ps->text.len;
  }
  if (u->w) {
    if (u->w != (const unsigned char *)bytes) memmove(u->w, bytes, n);
    u->w += n;
  } else {
    buf_append(&ps->text, bytes, n);
  }
}

/* Parse a string literal at ps->p (which is at '"'). The decoded bytes are
 * copied into the arena, or, for a long string in json_parse_in_place,
 * left in the text (NUL-terminated there). */
static bool parse_string(parser *ps, const char **out, uint32_t *out_len) {
  const unsigned char *start = ps->p + 1, *end = ps->end;
  const unsigned char *p = skip_plain(start, end);
  const char *src;
  size_t n;
  bool in_place = false;
  if (p < end && *p == '"') {
    src = (const char *)start;
    n = (size_t)(p - start);
    in_place = ps->in_place && n >= JSON_IN_PLACE_BYTES;
    if (in_place) *(unsigned char *)p = '\0'; /* the closing quote */
  } else {
    unescaper u = {ps, (unsigned char *)start, NULL};
    const unsigned char *run = start; /* bytes not yet put */
    buf_clear(&ps->text);
    while (p < end && *p == '\\') {
      unescape_put(&u, run, (size_t)(p - run));
      char decoded[4];
      size_t used, k = decode_escape(ps, p, decoded, &used);
      if (!k) return false;
      unescape_put(&u, decoded, k);
      run = p + used;
      p = skip_plain(run, end);
    }
    if (p >= end || *p != '"') return fail_in_string(ps, p);
    unescape_put(&u, run, (size_t)(p - run));
    if (u.w) {
      in_place = true;
      *u.w = '\0';
      src = (const char *)u.start;
      n = (size_t)(u.w - u.start);
    } else {
      src = ps->text.data;
      n = ps->text.len;
    }
  }
  if (n > UINT32_MAX - 1) return fail(ps, ps->p, "string too long");
  if (in_place) {
    *out = src;
  } else {
    char *copy = arena_alloc(ps->doc, n + 1);
    if (!copy) return fail(ps, ps->p, "out of memory");
    memcpy(copy, src, n);
    copy[n] = '\0';
    *out = copy;
  }
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

static json_doc *parse(const char *text, size_t len, int max_depth, json_error *err, bool in_place) {
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
  ps.in_place = in_place;
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

json_doc *json_parse(const char *text, size_t len, int max_depth, json_error *err) {
  return parse(text, len, max_depth, err, false);
}

json_doc *json_parse_in_place(char *text, size_t len, int max_depth, json_error *err) {
  return parse(text, len, max_depth, err, true);
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

/* The escape of '"', '\\' or a control character c at o; returns its length. */
static inline size_t write_escape(char *o, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  char e;
  switch (c) {
    case '"': e = '"'; break;
    case '\\': e = '\\'; break;
    case '\n': e = 'n'; break;
    case '\r': e = 'r'; break;
    case '\t': e = 't'; break;
    case '\b': e = 'b'; break;
    case '\f': e = 'f'; break;
    default:
      memcpy(o, "\\u00", 4);
      o[4] = hex[c >> 4];
      o[5] = hex[c & 15];
      return 6;
  }
  o[0] = '\\';
  o[1] = e;
  return 2;
}

/* Every step of the loop below writes at most a vector (the speculative
 * copy) or the bytes before the special one plus its longest form (6). */
#if JSON_ESCAPE_ROOM < 16 + 6
#error "JSON_ESCAPE_ROOM must leave room for a vector and an escape"
#endif

size_t json_escape_chunk(const char *s, size_t len, size_t *pos, char *dst, size_t cap, size_t *replaced) {
  const unsigned char *p = (const unsigned char *)s + *pos, *end = (const unsigned char *)s + len;
  char *o = dst;
  while (p < end && (size_t)(o - dst) + JSON_ESCAPE_ROOM <= cap) {
    if ((size_t)(end - p) >= SCAN_BYTES) {
      uint64_t m = scan_mask(p);
      /* Copy the whole vector before looking: the bytes after the special
       * one are written again by the next steps. */
      scan_copy(o, p);
      if (!m) {
        p += SCAN_BYTES;
        o += SCAN_BYTES;
        continue;
      }
      size_t i = scan_first(m);
      p += i;
      o += i;
    }
    unsigned char c = *p;
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(p, (size_t)(end - p));
      if (n) {
        for (size_t k = 0; k < n; k++) o[k] = (char)p[k];
        o += n;
        p += n;
      } else {
        memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD for one bad byte */
        o += 3;
        p++;
        if (replaced) (*replaced)++;
      }
    } else if (c < 0x20 || c == '"' || c == '\\') {
      o += write_escape(o, c);
      p++;
    } else {
      *o++ = (char)c;
      p++;
    }
  }
  *pos = (size_t)(p - (const unsigned char *)s);
  return (size_t)(o - dst);
}

size_t json_write_string(buf *b, const char *s, size_t len) {
  if (len < SCAN_BYTES) {
    /* A short string (an object key, an id) is most often plain: one scan
     * of a copy padded with spaces (which need no escape) tells, and it is
     * copied whole. */
    unsigned char padded[SCAN_BYTES];
    memset(padded, ' ', sizeof padded);
    memcpy(padded, s, len);
    if (!scan_mask(padded)) {
      if (b->cap - b->len <= len + 2) buf_reserve(b, len + 2);
      char *o = b->data + b->len;
      o[0] = '"';
      memcpy(o + 1, s, len);
      o[len + 1] = '"';
      o[len + 2] = '\0';
      b->len += len + 2;
      return 0;
    }
  }
  size_t replaced = 0, pos = 0;
  buf_reserve(b, len + 2 + JSON_ESCAPE_ROOM);
  b->data[b->len++] = '"';
  while (pos < len) {
    size_t room = b->cap - b->len - 1; /* the NUL after the bytes keeps its place */
    if (room < 2 * JSON_ESCAPE_ROOM) {
      buf_reserve(b, len - pos + 2 * JSON_ESCAPE_ROOM);
      continue;
    }
    b->len += json_escape_chunk(s, len, &pos, b->data + b->len, room, &replaced);
  }
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

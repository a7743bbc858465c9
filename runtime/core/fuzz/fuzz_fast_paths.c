/* fuzz_fast_paths.c - libFuzzer target: the fast paths for big payloads
 * against straightforward references, on the same random bytes. Each
 * reference is the plain byte-at-a-time code the fast path replaced; any
 * difference in what they return is a crash.
 *
 *   json_write_string, json_escape_chunk (any room)  vs  ref_write_string
 *   utf8_valid, utf8_count                           vs  ref_utf8_valid, ref_utf8_count
 *   a string literal through json_parse and
 *     json_parse_in_place                            vs  ref_parse_string (decoded bytes,
 *                                                        or the error's offset)
 *   a whole document through both parsers            equal trees, same verdict
 *   base64_encode, base64_decode                     vs  ref_base64_encode, ref_base64_decode
 *
 * The first byte picks how many times the rest is repeated, so strings
 * cross the vector width, JSON_IN_PLACE_BYTES and the escaper's room. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/json.h"
#include "core/luamcp_limits.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

/* Equal byte strings (either may be NULL when empty). */
static bool same(const void *a, size_t an, const void *b, size_t bn) {
  return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

/* ---- References ------------------------------------------------------ */

static size_t ref_write_string(buf *b, const unsigned char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t replaced = 0;
  for (size_t i = 0; i < len;) {
    unsigned char c = s[i];
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(s + i, len - i);
      if (n) {
        buf_append(b, s + i, n);
        i += n;
      } else {
        buf_puts(b, "\xEF\xBF\xBD");
        replaced++;
        i++;
      }
      continue;
    }
    switch (c) {
      case '"': buf_puts(b, "\\\""); break;
      case '\\': buf_puts(b, "\\\\"); break;
      case '\n': buf_puts(b, "\\n"); break;
      case '\r': buf_puts(b, "\\r"); break;
      case '\t': buf_puts(b, "\\t"); break;
      case '\b': buf_puts(b, "\\b"); break;
      case '\f': buf_puts(b, "\\f"); break;
      default:
        if (c < 0x20) {
          char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
          buf_append(b, esc, 6);
        } else {
          buf_putc(b, (char)c);
        }
    }
    i++;
  }
  return replaced;
}

static bool ref_utf8_valid(const unsigned char *s, size_t len) {
  for (size_t i = 0; i < len;) {
    size_t n = utf8_sequence_length(s + i, len - i);
    if (!n) return false;
    i += n;
  }
  return true;
}

static size_t ref_utf8_count(const unsigned char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) n++;
  return n;
}

static int ref_hex4(const unsigned char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = p[i];
    if (c >= '0' && c <= '9') v = v * 16 + c - '0';
    else if (c >= 'a' && c <= 'f') v = v * 16 + c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = v * 16 + c - 'A' + 10;
    else return -1;
  }
  return v;
}

/* The string literal at s[0] == '"': its decoded bytes into out and the
 * offset after it, or -1 with the failing offset in *at. */
static long ref_parse_string(const unsigned char *s, size_t len, buf *out, size_t *at) {
  size_t i = 1;
  for (;;) {
    if (i >= len) return *at = i, -1;
    unsigned char c = s[i];
    if (c == '"') return (long)(i + 1);
    if (c < 0x20) return *at = i, -1;
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(s + i, len - i);
      if (!n) return *at = i, -1;
      buf_append(out, s + i, n);
      i += n;
      continue;
    }
    if (c != '\\') {
      buf_putc(out, (char)c);
      i++;
      continue;
    }
    if (i + 1 >= len) return *at = i, -1;
    const char *simple = strchr("\"\\/bfnrt", s[i + 1]);
    if (s[i + 1] && simple) {
      static const char decoded[] = "\"\\/\b\f\n\r\t";
      buf_putc(out, decoded[simple - "\"\\/bfnrt"]);
      i += 2;
      continue;
    }
    if (s[i + 1] != 'u') return *at = i, -1;
    int cp = len - i >= 6 ? ref_hex4(s + i + 2) : -1;
    if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return *at = i, -1;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      int lo = (len - i >= 12 && s[i + 6] == '\\' && s[i + 7] == 'u') ? ref_hex4(s + i + 8) : -1;
      if (lo < 0xDC00 || lo > 0xDFFF) return *at = i, -1;
      utf8_encode(out, 0x10000u + (((uint32_t)cp - 0xD800u) << 10) + ((uint32_t)lo - 0xDC00u));
      i += 12;
    } else {
      utf8_encode(out, (uint32_t)cp);
      i += 6;
    }
  }
}

static void ref_base64_encode(const unsigned char *s, size_t n, buf *out) {
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    unsigned x = s[i], y = i + 1 < n ? s[i + 1] : 0, z = i + 2 < n ? s[i + 2] : 0;
    buf_putc(out, a[x >> 2]);
    buf_putc(out, a[((x & 3) << 4) | (y >> 4)]);
    buf_putc(out, i + 1 < n ? a[((y & 15) << 2) | (z >> 6)] : '=');
    buf_putc(out, i + 2 < n ? a[z & 63] : '=');
  }
}

static bool ref_base64_decode(const unsigned char *s, size_t n, buf *out, size_t *bad) {
  unsigned acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n && s[i] != '='; i++) {
    int c = s[i], v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else return *bad = i, false;
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      buf_putc(out, (char)((acc >> bits) & 0xFF));
    }
  }
  return true;
}

/* ---- The comparisons --------------------------------------------------- */

static void check_writer(const unsigned char *s, size_t n, unsigned room_seed) {
  buf fast = BUF_INIT, ref = BUF_INIT;
  size_t fast_replaced = json_write_string(&fast, (const char *)s, n);
  buf_putc(&ref, '"');
  size_t ref_replaced = ref_write_string(&ref, s, n);
  buf_putc(&ref, '"');
  CHECK(fast_replaced == ref_replaced);
  CHECK(same(fast.data, fast.len, ref.data, ref.len));
  /* The escaper a piece at a time, into rooms of varying size. */
  char *room = malloc(JSON_ESCAPE_ROOM + 64);
  buf pieces = BUF_INIT;
  size_t pos = 0, replaced = 0;
  buf_putc(&pieces, '"');
  while (pos < n) {
    size_t cap = JSON_ESCAPE_ROOM + (room_seed = room_seed * 1103515245u + 12345u) % 64;
    size_t before = pos;
    size_t w = json_escape_chunk((const char *)s, n, &pos, room, cap, &replaced);
    CHECK(w <= cap && pos > before && pos <= n);
    buf_append(&pieces, room, w);
  }
  buf_putc(&pieces, '"');
  CHECK(replaced == ref_replaced);
  CHECK(same(pieces.data, pieces.len, ref.data, ref.len));
  free(room);
  buf_free(&pieces);
  buf_free(&fast);
  buf_free(&ref);
}

/* The bytes as the inside of a string literal, through both parsers. */
static void check_string_parse(const unsigned char *s, size_t n) {
  char *text = malloc(n + 2);
  text[0] = '"';
  memcpy(text + 1, s, n);
  text[n + 1] = '"';
  size_t len = n + 2;
  buf want = BUF_INIT;
  size_t at = 0;
  long end = ref_parse_string((const unsigned char *)text, len, &want, &at);
  /* Only a literal that ends the text is a document. */
  bool doc_ok = end == (long)len;
  json_error err;
  json_doc *doc = json_parse(text, len, 1, &err);
  CHECK((doc != NULL) == doc_ok);
  if (doc) {
    const json_value *v = json_doc_root(doc);
    CHECK(v->type == JSON_STRING && same(v->u.string, v->len, want.data, want.len));
    CHECK(v->u.string[v->len] == '\0');
    json_doc_free(doc);
  } else if (end < 0) {
    CHECK(err.offset == at);
  }
  char *copy = malloc(len);
  memcpy(copy, text, len);
  doc = json_parse_in_place(copy, len, 1, &err);
  CHECK((doc != NULL) == doc_ok);
  if (doc) {
    const json_value *v = json_doc_root(doc);
    CHECK(v->type == JSON_STRING && same(v->u.string, v->len, want.data, want.len));
    CHECK(v->u.string[v->len] == '\0');
    CHECK(json_string_in_place(v, copy) == (want.len >= JSON_IN_PLACE_BYTES));
    json_doc_free(doc);
  } else if (end < 0) {
    CHECK(err.offset == at);
  }
  free(copy);
  buf_free(&want);
  free(text);
}

/* The bytes as a whole document: both parsers agree on it. */
static void check_document(const unsigned char *s, size_t n) {
  json_error e1, e2;
  json_doc *a = json_parse((const char *)s, n, MAX_JSON_DEPTH, &e1);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, s, n);
  json_doc *b = json_parse_in_place(copy, n, MAX_JSON_DEPTH, &e2);
  CHECK((a != NULL) == (b != NULL));
  if (a) CHECK(json_equal(json_doc_root(a), json_doc_root(b)));
  else CHECK(e1.offset == e2.offset && strcmp(e1.message, e2.message) == 0);
  json_doc_free(a);
  json_doc_free(b);
  free(copy);
}

/* Decode t with both and compare; returns the fast decoder's verdict. */
static bool check_decode(const unsigned char *t, size_t tn, buf *decoded) {
  buf want = BUF_INIT;
  size_t bad_ref = 0, bad = 0, out_len = 0;
  bool ok_ref = ref_base64_decode(t, tn, &want, &bad_ref);
  unsigned char *out = malloc(base64_decoded_max(tn));
  bool ok = base64_decode((const char *)t, tn, out, &out_len, &bad);
  CHECK(ok == ok_ref);
  if (ok) CHECK(same(out, out_len, want.data, want.len));
  else CHECK(bad == bad_ref);
  if (ok) buf_append(decoded, out, out_len);
  free(out);
  buf_free(&want);
  return ok;
}

static void check_base64(const unsigned char *s, size_t n) {
  buf ref = BUF_INIT;
  ref_base64_encode(s, n, &ref);
  size_t len = base64_encoded_len(n);
  char *fast = malloc(len + 1);
  base64_encode(s, n, fast);
  CHECK(same(fast, len, ref.data, ref.len));
  free(fast);
  /* The encoding decodes back; the bytes themselves as base64 text (mostly
   * invalid) decode the same with both. */
  buf back = BUF_INIT;
  CHECK(check_decode((const unsigned char *)ref.data, ref.len, &back));
  CHECK(same(back.data, back.len, s, n));
  buf_clear(&back);
  check_decode(s, n, &back);
  buf_free(&back);
  buf_free(&ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  /* The first byte: the rest repeated 1..16 times (up to 64 KiB). */
  unsigned times = 1 + (data[0] & 15);
  const unsigned char *rest = data + 1;
  size_t rest_len = size - 1;
  if (rest_len * times > 65536) times = 1;
  size_t n = rest_len * times;
  unsigned char *s = malloc(n ? n : 1);
  for (unsigned k = 0; k < times; k++) memcpy(s + k * rest_len, rest, rest_len);

  check_writer(s, n, data[0]);
  CHECK(utf8_valid((const char *)s, n) == ref_utf8_valid(s, n));
  CHECK(utf8_count((const char *)s, n) == ref_utf8_count(s, n));
  check_string_parse(s, n);
  check_document(data, size);
  check_base64(s, n);
  free(s);
  return 0;
}

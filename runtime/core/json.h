/*
 * json.h - strict RFC 8259 JSON: a parser into a read-only tree, and writers.
 *
 * This is the boundary every byte from a client crosses. It accepts exactly
 * RFC 8259 in valid UTF-8 and nothing else: no BOM, no NUL bytes, no invalid
 * or overlong UTF-8, no lone surrogates (raw or escaped), no leading zeros,
 * "1.", ".5", NaN or Infinity, no raw control characters in strings, no bytes
 * after the value, no nesting deeper than the caller's limit, and no number
 * too large for a double. Numbers without fraction or exponent that fit an
 * int64 stay integers; all others become doubles (so 1e2 is a double, and
 * integers beyond int64 become the nearest double). Duplicate object keys are
 * kept in order; lookups return the last one, as a Lua table would.
 *
 * The tree needs no Lua, so the protocol core can be tested and fuzzed alone.
 */
#ifndef LUAMCP_JSON_H
#define LUAMCP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

typedef enum json_type {
  JSON_NULL,
  JSON_FALSE,
  JSON_TRUE,
  JSON_INTEGER,
  JSON_FLOAT,
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
typedef struct json_member json_member;

/* A value inside a json_doc. Owned by the doc: valid until json_doc_free. */
struct json_value {
  json_type type;
  uint32_t len;     /* bytes of a string, items of an array, members of an object */
  uint32_t src_off; /* where the value's text starts in the parsed input ... */
  uint32_t src_len; /* ... and how long it is (for byte-exact echo of ids) */
  union {
    int64_t integer;
    double number;
    const char *string;    /* len bytes, NUL-terminated, may contain "\0" */
    json_value *items;     /* len values */
    json_member *members;  /* len members, in document order */
  } u;
};

struct json_member {
  const char *key; /* key_len bytes, NUL-terminated, may contain "\0" */
  uint32_t key_len;
  json_value value;
};

/* A parsed document: the tree and every string in it live in one arena.
 * Owner: the caller of json_parse; json_doc_free releases all of it. */
typedef struct json_doc json_doc;

typedef struct json_error {
  size_t offset;     /* byte offset in the input where the problem was found */
  char message[128]; /* a sentence for humans, e.g. for a -32700 error's data */
} json_error;

/* Parse len bytes. Returns NULL and fills err (when not NULL) on failure. */
json_doc *json_parse(const char *text, size_t len, int max_depth, json_error *err);
/* The same, for a text the caller lets the parser change and keeps until
 * the doc is freed (a transport's input buffer): a string of at least
 * JSON_IN_PLACE_BYTES is decoded where it is (NUL-terminated over its
 * closing quote), not copied, so a big payload is not held twice. The
 * text of such a string, and of the values around it, is no longer what
 * was parsed: json_string_in_place says which strings those are. */
#define JSON_IN_PLACE_BYTES 256
json_doc *json_parse_in_place(char *text, size_t len, int max_depth, json_error *err);
/* Was this string decoded in place in text (so its source is gone)? */
static inline bool json_string_in_place(const json_value *v, const char *text) {
  return v->type == JSON_STRING && v->u.string == text + v->src_off + 1;
}
const json_value *json_doc_root(const json_doc *doc);
void json_doc_free(json_doc *doc);

/* Member lookup; NULL when absent or when obj is not an object. */
const json_value *json_object_get(const json_value *obj, const char *key);
const json_value *json_object_getn(const json_value *obj, const char *key, size_t key_len);

/* Equality in the JSON data model: 1 == 1.0, objects compare as unordered
 * maps (last duplicate wins), arrays element by element. */
bool json_equal(const json_value *a, const json_value *b);

/* Numeric value of an integer or float. */
static inline double json_number(const json_value *v) {
  return v->type == JSON_INTEGER ? (double)v->u.integer : v->u.number;
}
static inline bool json_is_number(const json_value *v) {
  return v->type == JSON_INTEGER || v->type == JSON_FLOAT;
}

const char *json_type_name(json_type t);

/* ---- UTF-8 ---------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is invalid
 * (overlong, surrogate, beyond U+10FFFF, truncated). */
size_t utf8_sequence_length(const unsigned char *s, size_t avail);
bool utf8_valid(const char *s, size_t len);
/* Number of code points in valid UTF-8. */
size_t utf8_count(const char *s, size_t len);
/* Decode the code point at s (valid UTF-8 assumed) and return its length. */
size_t utf8_decode(const unsigned char *s, uint32_t *cp);
/* Append the UTF-8 encoding of cp. */
void utf8_encode(buf *b, uint32_t cp);

/* ---- Writers --------------------------------------------------------- */

/* A JSON string literal. Invalid UTF-8 becomes U+FFFD, so what is written
 * is always valid; control characters are escaped, so no raw newline is
 * ever written. Returns the number of replaced bytes (0 when s was valid). */
size_t json_write_string(buf *b, const char *s, size_t len);
/* The same escaping a piece at a time, into memory that is not a buf (a
 * transport's write buffer): continues s at *pos, writes at most cap bytes
 * at dst (cap >= JSON_ESCAPE_ROOM), advances *pos past what it wrote, adds
 * the replaced bytes to *replaced (may be NULL), and returns the bytes
 * written. No quotes: those are the caller's. It stops while fewer than
 * JSON_ESCAPE_ROOM bytes of dst are left, so call it again with more room
 * until *pos == len. */
#define JSON_ESCAPE_ROOM 32
size_t json_escape_chunk(const char *s, size_t len, size_t *pos, char *dst, size_t cap, size_t *replaced);
void json_write_integer(buf *b, int64_t i);
/* The shortest text that reads back as the same double, always with a '.'
 * or an exponent so it reads back as a float. Returns false (and writes
 * nothing) for NaN and infinities, which JSON cannot express. */
bool json_write_double(buf *b, double d);
/* A number as an integer when it has no fraction and fits exactly,
 * otherwise as json_write_double. */
bool json_write_number(buf *b, double d);
/* Re-serialise a parsed value compactly. */
void json_write_value(buf *b, const json_value *v);
/* The same value indented for people to read and edit (config files, a
 * trace on a terminal): JSON_PRETTY_INDENT spaces a level, one member or
 * item a line, "key": value, empty objects and arrays as {} and [], no
 * newline after the last bracket. With source (the text v was parsed
 * from), strings and numbers are copied as they were spelled there, so
 * only whitespace changes; NULL re-serialises them. depth is the level v
 * starts at, for a value written inside another. */
#define JSON_PRETTY_INDENT 2
void json_write_pretty(buf *b, const json_value *v, const char *source, int depth);

#endif

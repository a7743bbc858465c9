/*
 * schema.c - see schema.h.
 *
 * Compilation turns the schema document into a graph of snode structs in
 * an arena owned by the schema. A $ref becomes a pointer to its target
 * node, so recursive schemas are cycles in the graph, resolved after the
 * whole document has been walked (targets may come later in the text). A
 * cycle that never steps into the instance (say $defs/a: {"$ref": "#/$defs/b"}
 * and back) is refused, so validation of finite data always ends.
 *
 * Validation walks the instance and the graph together. It allocates
 * nothing: the instance path is a chain of structs on the C stack, turned
 * into a JSON pointer only when an error is recorded. Subschemas whose
 * errors are not reported themselves (anyOf branches, "not", "if",
 * "contains") run in a quiet mode that stops at the first failure.
 */
#include "core/schema.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/luamcp_limits.h"
#include "core/regex.h"

/* Validation recursion allowed before giving up with an error. Instances
 * are at most MAX_JSON_DEPTH deep and the applicator graph has no pure
 * cycles, so only an absurd schema gets near this. */
#define MAX_VALIDATE_DEPTH 1000
/* How deep a const/enum value is re-parsed from its own serialisation;
 * the caller's parser already bounded the original. */
#define VALUE_PARSE_DEPTH 10000
/* Longest found value quoted in a message, in bytes. */
#define SUMMARY_BYTES 40
/* Errors counted per anyOf/oneOf branch when looking for the closest. */
#define CLOSEST_LIMIT 20
/* Nodes followed when coercion or a message collects what applies at one
 * place (through $ref and allOf). */
#define NODESET_MAX 32

/* Type bits. A number's mask also has T_INTEGER, so intersecting "number"
 * with "integer" gives "integer" and an instance's bits test with one AND. */
enum {
  T_NULL = 1,
  T_BOOLEAN = 2,
  T_OBJECT = 4,
  T_ARRAY = 8,
  T_NUMBER = 16,
  T_STRING = 32,
  T_INTEGER = 64,
  T_ALL = 127,
};

/* ---- Memory ---------------------------------------------------------- */

/* Like buf.c: every input is bounded, so running out of memory here means
 * the machine is out; stop rather than thread NULL through the compiler. */
static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) {
    fputs("luamcp: out of memory\n", stderr);
    abort();
  }
  return q;
}

#define GROW(arr, n, cap)                                   \
  do {                                                      \
    if ((n) == (cap)) {                                     \
      (cap) = (cap) ? (cap) * 2 : 8;                        \
      (arr) = xrealloc((arr), (cap) * sizeof *(arr));       \
    }                                                       \
  } while (0)

/* A block of a schema's arena. Owned by the schema; freed with it. */
typedef struct arena_block {
  struct arena_block *next;
  size_t used, cap;
  max_align_t data[];
} arena_block;

enum { ARENA_BLOCK_BYTES = 8192 };

/* ---- Compiled form --------------------------------------------------- */

typedef struct snode snode;

/* A string copied into the schema's arena. */
typedef struct sstr {
  const char *s;
  uint32_t len;
} sstr;

/* The structs below live in the schema's arena, like the nodes they
 * belong to, and go with schema_free. */

/* An entry of properties or dependentSchemas. */
typedef struct named_schema {
  sstr name;
  snode *schema;
} named_schema;

/* An entry of patternProperties; the regex is owned by schema->regexes. */
typedef struct pattern_schema {
  const regex *re;
  const char *source;
  snode *schema;
} pattern_schema;

/* An entry of dependentRequired: when name is present, so must these be. */
typedef struct dep_required {
  sstr name;
  sstr *required;
  uint32_t count;
} dep_required;

/* A numeric bound, kept exact for integers beyond 2^53. */
typedef struct num {
  bool is_int;
  int64_t i;
  double d;
} num;

enum node_kind { SN_TRUE, SN_FALSE, SN_OBJECT };

/* Which optional scalar keywords are present. */
enum {
  H_MINIMUM = 1 << 0,
  H_MAXIMUM = 1 << 1,
  H_EXCL_MIN = 1 << 2,
  H_EXCL_MAX = 1 << 3,
  H_MULTIPLE = 1 << 4,
  H_MIN_LENGTH = 1 << 5,
  H_MAX_LENGTH = 1 << 6,
  H_MIN_ITEMS = 1 << 7,
  H_MAX_ITEMS = 1 << 8,
  H_MIN_PROPS = 1 << 9,
  H_MAX_PROPS = 1 << 10,
  H_MIN_CONTAINS = 1 << 11,
  H_MAX_CONTAINS = 1 << 12,
  H_UNIQUE = 1 << 13,
};

/* One compiled (sub)schema. Allocated in the schema's arena by the
 * compiler and freed with the schema; pointers between nodes may form
 * cycles through ref. */
struct snode {
  uint8_t kind;
  uint8_t types; /* T_* mask of "type", 0 when absent */
  uint8_t accepts; /* T_* the schema can accept at all; see compute_accepts */
  uint32_t has;  /* H_* */
  uint32_t id;   /* index in compiler order, for the cycle check */
  const char *location; /* JSON pointer of this schema in its document */
  snode *ref;
  const json_value *const_value; /* in schema->values */
  const json_value *enum_values; /* an array in schema->values */
  num minimum, maximum, excl_min, excl_max, multiple_of;
  uint64_t min_length, max_length, min_items, max_items, min_props, max_props;
  uint64_t min_contains, max_contains;
  const regex *pattern;
  const char *pattern_source;
  named_schema *properties;
  uint32_t nproperties;
  pattern_schema *pattern_properties;
  uint32_t npattern_properties;
  snode *additional_properties;
  snode *property_names;
  sstr *required;
  int8_t *required_index; /* the required name's index in properties if < 64, else -1 */
  uint32_t nrequired;
  dep_required *dependent_required;
  uint32_t ndependent_required;
  named_schema *dependent_schemas;
  uint32_t ndependent_schemas;
  snode **prefix_items;
  uint32_t nprefix_items;
  snode *items;              /* the items after prefix_items */
  const char *items_keyword; /* "items" or "additionalItems", for messages */
  const char *prefix_keyword; /* "prefixItems" or "items" */
  snode *contains;
  snode **all_of, **any_of, **one_of;
  uint32_t nall_of, nany_of, none_of;
  snode *not_schema, *if_schema, *then_schema, *else_schema;
};

/* See schema.h: allocated by schema_compile, released by schema_free. */
struct schema {
  arena_block *arena;
  snode *root;
  json_doc *values; /* const and enum values, re-parsed from their text */
  regex **regexes;
  size_t nregexes, regexes_cap;
};

static void *arena_alloc(schema *s, size_t n) {
  n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  arena_block *b = s->arena;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_BLOCK_BYTES / 2 ? n : ARENA_BLOCK_BYTES;
    arena_block *nb = xrealloc(NULL, sizeof *nb + cap);
    nb->used = 0;
    nb->cap = cap;
    if (b && cap != ARENA_BLOCK_BYTES) {
      nb->next = b->next; /* a big block goes behind, keeping b's free space */
      b->next = nb;
    } else {
      nb->next = b;
      s->arena = nb;
    }
    b = nb;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

static const char *arena_strndup(schema *s, const char *str, size_t len) {
  char *p = arena_alloc(s, len + 1);
  memcpy(p, str, len);
  p[len] = '\0';
  return p;
}

void schema_free(schema *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nregexes; i++) regex_free(s->regexes[i]);
  free(s->regexes);
  json_doc_free(s->values);
  arena_block *b = s->arena;
  while (b) {
    arena_block *next = b->next;
    free(b);
    b = next;
  }
  free(s);
}

/* ---- Small helpers --------------------------------------------------- */

static bool is_integral(double d) { return isfinite(d) && floor(d) == d; }

static inline unsigned instance_types(const json_value *v) {
  switch (v->type) {
    case JSON_NULL: return T_NULL;
    case JSON_FALSE:
    case JSON_TRUE: return T_BOOLEAN;
    case JSON_INTEGER: return T_NUMBER | T_INTEGER;
    case JSON_FLOAT: return is_integral(v->u.number) ? T_NUMBER | T_INTEGER : T_NUMBER;
    case JSON_STRING: return T_STRING;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_OBJECT: return T_OBJECT;
  }
  return 0;
}

static bool str_eq(const char *a, size_t alen, const char *b) {
  return alen == strlen(b) && memcmp(a, b, alen) == 0;
}

/* Compare an integer with a double exactly (no rounding of the integer). */
static int cmp_int_double(int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  double fl = floor(d);
  int64_t di = (int64_t)fl;
  if (i < di) return -1;
  if (i > di) return 1;
  return fl < d ? -1 : 0;
}

/* Compare a number instance with a bound: <0, 0 or >0. */
static int num_cmp(const json_value *v, const num *b) {
  if (v->type == JSON_INTEGER) {
    if (b->is_int) return v->u.integer < b->i ? -1 : v->u.integer > b->i;
    return cmp_int_double(v->u.integer, b->d);
  }
  if (b->is_int) return -cmp_int_double(b->i, v->u.number);
  return v->u.number < b->d ? -1 : v->u.number > b->d;
}

/* multipleOf. Decimal fractions such as 0.0001 have no exact binary
 * form, so 0.0075 / 0.0001 is 75.00000000000001: accept a quotient within
 * a few units in the last place of an integer. Quotients beyond 2^53 are
 * integers as doubles. */
static bool is_multiple(const json_value *v, const num *m) {
  if (v->type == JSON_INTEGER && m->is_int) return v->u.integer % m->i == 0;
  double x = json_number(v), y = m->is_int ? (double)m->i : m->d;
  double q = x / y;
  if (!isfinite(q)) return fmod(x, y) == 0; /* exact, if slow: 1e308 is a multiple of 0.5 */
  double r = nearbyint(q);
  return fabs(q - r) <= fabs(q) * 4 * DBL_EPSILON;
}

/* The shortest decimal text of d that reads back as d. */
static void format_double(double d, char *out, size_t n) {
  for (int precision = 15; precision <= 17; precision++) {
    snprintf(out, n, "%.*g", precision, d);
    if (strtod(out, NULL) == d) return;
  }
}

static void format_num(const num *b, char *out, size_t n) {
  if (b->is_int) snprintf(out, n, "%lld", (long long)b->i);
  else format_double(b->d, out, n);
}

static void format_value_number(const json_value *v, char *out, size_t n) {
  if (v->type == JSON_INTEGER) snprintf(out, n, "%lld", (long long)v->u.integer);
  else format_double(v->u.number, out, n);
}

/* How many bytes of s (len bytes of UTF-8) fit in max without splitting a
 * code point. */
static size_t utf8_prefix(const char *s, size_t len, size_t max) {
  if (len <= max) return len;
  size_t n = max;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  return n;
}

/* Append the JSON text of v to out, cut to about SUMMARY_BYTES. */
static void brief_json(const json_value *v, char *out, size_t n) {
  buf b = BUF_INIT;
  json_write_value(&b, v);
  size_t keep = utf8_prefix(b.data, b.len, SUMMARY_BYTES);
  snprintf(out, n, "%.*s%s", (int)keep, b.data, keep < b.len ? "..." : "");
  buf_free(&b);
}

static const char *plural(uint64_t n, const char *one, const char *many) { return n == 1 ? one : many; }

/* "string \"abc\"", "number 5", "boolean true", "null", "object",
 * "array of 3 items": how a found value is named in messages. */
static void describe(const json_value *v, char *out, size_t n) {
  char num_text[40];
  switch (v->type) {
    case JSON_NULL: snprintf(out, n, "null"); return;
    case JSON_FALSE: snprintf(out, n, "boolean false"); return;
    case JSON_TRUE: snprintf(out, n, "boolean true"); return;
    case JSON_INTEGER:
    case JSON_FLOAT:
      format_value_number(v, num_text, sizeof num_text);
      snprintf(out, n, "number %s", num_text);
      return;
    case JSON_STRING: {
      char text[SUMMARY_BYTES + 16];
      brief_json(v, text, sizeof text);
      snprintf(out, n, "string %s", text);
      return;
    }
    case JSON_ARRAY:
      if (v->len == 0) snprintf(out, n, "empty array");
      else snprintf(out, n, "array of %u %s", v->len, plural(v->len, "item", "items"));
      return;
    case JSON_OBJECT: snprintf(out, n, "object"); return;
  }
}

/* "string", "string or null", "string, number or null". */
static void type_list(unsigned types, char *out, size_t n) {
  static const struct {
    unsigned bit;
    const char *name;
  } order[] = {{T_STRING, "string"}, {T_NUMBER, "number"}, {T_INTEGER, "integer"}, {T_BOOLEAN, "boolean"},
               {T_OBJECT, "object"}, {T_ARRAY, "array"},   {T_NULL, "null"}};
  const char *names[7];
  int count = 0;
  for (int i = 0; i < 7; i++) {
    if (!(types & order[i].bit)) continue;
    if (order[i].bit == T_INTEGER && (types & T_NUMBER)) continue;
    names[count++] = order[i].name;
  }
  out[0] = '\0';
  size_t used = 0;
  for (int i = 0; i < count && used < n; i++) {
    const char *sep = i == 0 ? "" : i == count - 1 ? " or " : ", ";
    int w = snprintf(out + used, n - used, "%s%s", sep, names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (count == 0) snprintf(out, n, "nothing");
}

/* Make b an empty, NUL-terminated string (buf_reserve alone leaves the
 * first byte unset). */
static void buf_empty(buf *b) {
  buf_reserve(b, 0);
  b->len = 0;
  b->data[0] = '\0';
}

/* Append a JSON pointer segment (escaping ~ and /) to b. */
static void pointer_append(buf *b, const char *seg, size_t len) {
  buf_putc(b, '/');
  for (size_t i = 0; i < len; i++) {
    if (seg[i] == '~') buf_puts(b, "~0");
    else if (seg[i] == '/') buf_puts(b, "~1");
    else buf_putc(b, seg[i]);
  }
}

/* ---- URIs (RFC 3986) ------------------------------------------------- */

/* The parts of a URI reference, pointing into its text. */
typedef struct uri_parts {
  const char *scheme, *auth, *path, *query, *frag;
  size_t scheme_len, auth_len, path_len, query_len, frag_len;
  bool has_scheme, has_auth, has_query, has_frag;
} uri_parts;

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static void uri_parse(const char *s, uri_parts *u) {
  memset(u, 0, sizeof *u);
  const char *p = s;
  if (is_alpha(*p)) {
    const char *q = p + 1;
    while (is_alpha(*q) || (*q >= '0' && *q <= '9') || *q == '+' || *q == '-' || *q == '.') q++;
    if (*q == ':') {
      u->has_scheme = true;
      u->scheme = p;
      u->scheme_len = (size_t)(q - p);
      p = q + 1;
    }
  }
  if (p[0] == '/' && p[1] == '/') {
    p += 2;
    u->has_auth = true;
    u->auth = p;
    while (*p && *p != '/' && *p != '?' && *p != '#') p++;
    u->auth_len = (size_t)(p - u->auth);
  }
  u->path = p;
  while (*p && *p != '?' && *p != '#') p++;
  u->path_len = (size_t)(p - u->path);
  if (*p == '?') {
    u->has_query = true;
    u->query = ++p;
    while (*p && *p != '#') p++;
    u->query_len = (size_t)(p - u->query);
  }
  if (*p == '#') {
    u->has_frag = true;
    u->frag = p + 1;
    u->frag_len = strlen(p + 1);
  }
}

/* Drop the last segment (and its "/") of what remove_dots wrote so far. */
static void pop_segment(buf *out, size_t start) {
  size_t i = out->len;
  while (i > start && out->data[i - 1] != '/') i--;
  if (i > start) i--;
  out->len = i;
  out->data[i] = '\0';
}

/* RFC 3986 section 5.2.4: append path without "." and ".." segments. */
static void remove_dots(const char *path, size_t len, buf *out) {
  char *in = xrealloc(NULL, len + 1);
  memcpy(in, path, len);
  size_t i = 0, start = out->len;
  while (i < len) {
    const char *s = in + i;
    size_t rem = len - i;
    if (rem >= 3 && memcmp(s, "../", 3) == 0) i += 3;
    else if (rem >= 2 && memcmp(s, "./", 2) == 0) i += 2;
    else if (rem >= 3 && memcmp(s, "/./", 3) == 0) i += 2;
    else if (rem == 2 && memcmp(s, "/.", 2) == 0) in[++i] = '/';
    else if (rem >= 4 && memcmp(s, "/../", 4) == 0) {
      i += 3;
      pop_segment(out, start);
    } else if (rem == 3 && memcmp(s, "/..", 3) == 0) {
      in[i += 2] = '/';
      pop_segment(out, start);
    } else if ((rem == 1 && s[0] == '.') || (rem == 2 && memcmp(s, "..", 2) == 0)) {
      i = len;
    } else {
      size_t j = i + (in[i] == '/');
      while (j < len && in[j] != '/') j++;
      buf_append(out, in + i, j - i);
      i = j;
    }
  }
  if (!out->data) buf_empty(out);
  free(in);
}

/* Resolve ref against base (RFC 3986 section 5.2.2). The caller frees. */
static char *uri_resolve(const char *base, const char *ref) {
  uri_parts b, r;
  uri_parse(base, &b);
  uri_parse(ref, &r);
  const uri_parts *scheme = r.has_scheme ? &r : &b, *auth, *query;
  buf path = BUF_INIT, out = BUF_INIT;
  buf_empty(&path);
  if (r.has_scheme || r.has_auth) {
    auth = &r;
    remove_dots(r.path, r.path_len, &path);
    query = &r;
  } else {
    auth = &b;
    if (r.path_len == 0) {
      buf_append(&path, b.path, b.path_len);
      query = r.has_query ? &r : &b;
    } else {
      query = &r;
      if (r.path[0] == '/') {
        remove_dots(r.path, r.path_len, &path);
      } else {
        buf merged = BUF_INIT;
        if (b.has_auth && b.path_len == 0) {
          buf_putc(&merged, '/');
        } else {
          size_t keep = b.path_len;
          while (keep > 0 && b.path[keep - 1] != '/') keep--;
          buf_append(&merged, b.path, keep);
        }
        buf_append(&merged, r.path, r.path_len);
        remove_dots(merged.data, merged.len, &path);
        buf_free(&merged);
      }
    }
  }
  if (scheme->has_scheme) {
    buf_append(&out, scheme->scheme, scheme->scheme_len);
    buf_putc(&out, ':');
  }
  if (auth->has_auth) {
    buf_puts(&out, "//");
    buf_append(&out, auth->auth, auth->auth_len);
  }
  buf_append(&out, path.data, path.len);
  if (query->has_query) {
    buf_putc(&out, '?');
    buf_append(&out, query->query, query->query_len);
  }
  if (r.has_frag && r.frag_len) {
    buf_putc(&out, '#');
    buf_append(&out, r.frag, r.frag_len);
  }
  buf_free(&path);
  return buf_detach(&out, NULL);
}

/* ---- Compiler -------------------------------------------------------- */

/* A schema resource: the document root or a subschema with an $id. */
typedef struct resource {
  char *uri; /* absolute, without fragment; "" for a root without $id */
  const json_value *root;
  char *location;
  schema_dialect dialect;
} resource;

typedef struct anchor {
  char *key; /* resource uri "#" name */
  const json_value *target;
} anchor;

/* A $ref waiting for the whole document to be seen. */
typedef struct pending_ref {
  snode *node;
  char *target;   /* absolute URI with fragment */
  char *location; /* JSON pointer of the $ref keyword, for errors */
} pending_ref;

/* A const or enum value waiting for schema->values to be parsed. */
typedef struct pending_value {
  snode *node;
  uint32_t index;
  bool is_enum;
} pending_value;

typedef struct map_entry {
  const json_value *key;
  snode *node;
} map_entry;

/* State of one schema_compile call, on its stack; everything in it is
 * freed before schema_compile returns. */
typedef struct compiler {
  schema *s;
  schema_error *err;
  bool failed;
  buf path;   /* JSON pointer of the position being compiled */
  buf values; /* "[v0,v1,...]": const and enum values */
  uint32_t nvalues;
  pending_value *pvalues;
  size_t npvalues, pvalues_cap;
  resource *res;
  size_t nres, res_cap;
  anchor *anchors;
  size_t nanchors, anchors_cap;
  pending_ref *refs;
  size_t nrefs, refs_cap;
  snode **nodes; /* every node, by id */
  size_t nnodes, nodes_cap;
  map_entry *map; /* source value -> node, open addressing */
  size_t map_cap, map_count;
} compiler;

static bool cfail(compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool cfail(compiler *c, const char *fmt, ...) {
  if (c->failed) return false;
  c->failed = true;
  if (c->err) {
    snprintf(c->err->pointer, sizeof c->err->pointer, "%s", c->path.data ? c->path.data : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->message, sizeof c->err->message, fmt, ap);
    va_end(ap);
  }
  return false;
}

static size_t path_push(compiler *c, const char *seg) {
  size_t old = c->path.len;
  pointer_append(&c->path, seg, strlen(seg));
  return old;
}

static size_t path_push_index(compiler *c, uint32_t i) {
  size_t old = c->path.len;
  buf_printf(&c->path, "/%u", i);
  return old;
}

static void path_pop(compiler *c, size_t old) {
  c->path.len = old;
  c->path.data[old] = '\0';
}

static size_t map_slot(const compiler *c, const json_value *key) {
  uintptr_t h = (uintptr_t)key;
  h ^= h >> 17;
  h *= (uintptr_t)0x9E3779B97F4A7C15u;
  return (size_t)(h >> 7) & (c->map_cap - 1);
}

static snode *map_get(const compiler *c, const json_value *key) {
  if (!c->map_cap) return NULL;
  for (size_t i = map_slot(c, key);; i = (i + 1) & (c->map_cap - 1)) {
    if (c->map[i].key == key) return c->map[i].node;
    if (!c->map[i].key) return NULL;
  }
}

static void map_put(compiler *c, const json_value *key, snode *node) {
  if ((c->map_count + 1) * 2 > c->map_cap) {
    map_entry *old = c->map;
    size_t old_cap = c->map_cap;
    c->map_cap = old_cap ? old_cap * 2 : 64;
    c->map = xrealloc(NULL, c->map_cap * sizeof *c->map);
    memset(c->map, 0, c->map_cap * sizeof *c->map);
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].key) {
        size_t j = map_slot(c, old[i].key);
        while (c->map[j].key) j = (j + 1) & (c->map_cap - 1);
        c->map[j] = old[i];
      }
    free(old);
  }
  size_t j = map_slot(c, key);
  while (c->map[j].key) j = (j + 1) & (c->map_cap - 1);
  c->map[j].key = key;
  c->map[j].node = node;
  c->map_count++;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xrealloc(NULL, n), s, n);
}

static resource *find_resource(compiler *c, const char *uri, size_t len) {
  for (size_t i = 0; i < c->nres; i++)
    if (strlen(c->res[i].uri) == len && memcmp(c->res[i].uri, uri, len) == 0) return &c->res[i];
  return NULL;
}

static void add_resource(compiler *c, const char *uri, const json_value *root, schema_dialect d) {
  if (find_resource(c, uri, strlen(uri))) return; /* the first one wins */
  GROW(c->res, c->nres, c->res_cap);
  resource *r = &c->res[c->nres++];
  r->uri = xstrdup(uri);
  r->root = root;
  r->location = xstrdup(c->path.data ? c->path.data : "");
  r->dialect = d;
}

static void add_anchor(compiler *c, const char *base, const char *name, size_t name_len, const json_value *target) {
  buf key = BUF_INIT;
  buf_append_str(&key, base);
  buf_putc(&key, '#');
  buf_append(&key, name, name_len);
  for (size_t i = 0; i < c->nanchors; i++)
    if (strcmp(c->anchors[i].key, key.data) == 0) {
      buf_free(&key);
      return;
    }
  GROW(c->anchors, c->nanchors, c->anchors_cap);
  c->anchors[c->nanchors].key = buf_detach(&key, NULL);
  c->anchors[c->nanchors].target = target;
  c->nanchors++;
}

static uint32_t add_value(compiler *c, const json_value *v) {
  if (c->nvalues) buf_putc(&c->values, ',');
  json_write_value(&c->values, v);
  return c->nvalues++;
}

static void add_pending_value(compiler *c, snode *n, const json_value *v, bool is_enum) {
  GROW(c->pvalues, c->npvalues, c->pvalues_cap);
  c->pvalues[c->npvalues].node = n;
  c->pvalues[c->npvalues].index = add_value(c, v);
  c->pvalues[c->npvalues].is_enum = is_enum;
  c->npvalues++;
}

static bool parse_dialect(const json_value *v, schema_dialect *d) {
  if (v->type != JSON_STRING) return false;
  size_t len = v->len;
  const char *s = v->u.string;
  if (len && s[len - 1] == '#') len--;
  if (str_eq(s, len, "https://json-schema.org/draft/2020-12/schema") ||
      str_eq(s, len, "http://json-schema.org/draft/2020-12/schema")) {
    *d = SCHEMA_DRAFT_2020_12;
    return true;
  }
  if (str_eq(s, len, "http://json-schema.org/draft-07/schema") ||
      str_eq(s, len, "https://json-schema.org/draft-07/schema")) {
    *d = SCHEMA_DRAFT_07;
    return true;
  }
  return false;
}

static unsigned type_bit(const char *s, size_t len) {
  if (str_eq(s, len, "null")) return T_NULL;
  if (str_eq(s, len, "boolean")) return T_BOOLEAN;
  if (str_eq(s, len, "object")) return T_OBJECT;
  if (str_eq(s, len, "array")) return T_ARRAY;
  if (str_eq(s, len, "number")) return T_NUMBER | T_INTEGER;
  if (str_eq(s, len, "string")) return T_STRING;
  if (str_eq(s, len, "integer")) return T_INTEGER;
  return 0;
}

static snode *new_node(compiler *c, const json_value *v) {
  snode *n = arena_alloc(c->s, sizeof *n);
  n->location = arena_strndup(c->s, c->path.data ? c->path.data : "", c->path.len);
  n->id = (uint32_t)c->nnodes;
  GROW(c->nodes, c->nnodes, c->nodes_cap);
  c->nodes[c->nnodes++] = n;
  map_put(c, v, n);
  return n;
}

static snode *compile_schema(compiler *c, const json_value *v, const char *base, schema_dialect d);

/* The keyword's value as a non-negative integer (2.0 counts). */
static void kw_count(compiler *c, snode *n, const json_value *obj, const char *kw, uint64_t *out, uint32_t flag) {
  const json_value *v = json_object_get(obj, kw);
  if (!v) return;
  size_t old = path_push(c, kw);
  if (v->type == JSON_INTEGER && v->u.integer >= 0) {
    *out = (uint64_t)v->u.integer;
    n->has |= flag;
  } else if (v->type == JSON_FLOAT && is_integral(v->u.number) && v->u.number >= 0) {
    *out = v->u.number >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v->u.number;
    n->has |= flag;
  } else {
    cfail(c, "%s must be a non-negative integer", kw);
  }
  path_pop(c, old);
}

static void kw_number(compiler *c, snode *n, const json_value *obj, const char *kw, num *out, uint32_t flag) {
  const json_value *v = json_object_get(obj, kw);
  if (!v) return;
  size_t old = path_push(c, kw);
  if (!json_is_number(v)) {
    cfail(c, "%s must be a number", kw);
  } else {
    out->is_int = v->type == JSON_INTEGER;
    out->i = out->is_int ? v->u.integer : 0;
    out->d = json_number(v);
    if (flag == H_MULTIPLE && !(out->d > 0)) cfail(c, "multipleOf must be greater than 0");
    n->has |= flag;
  }
  path_pop(c, old);
}

static snode *kw_schema(compiler *c, const json_value *obj, const char *kw, const char *base, schema_dialect d) {
  const json_value *v = json_object_get(obj, kw);
  if (!v) return NULL;
  size_t old = path_push(c, kw);
  snode *n = compile_schema(c, v, base, d);
  path_pop(c, old);
  return n;
}

/* A non-empty array of schemas. */
static snode **kw_schema_array(compiler *c, const json_value *obj, const char *kw, const char *base,
                               schema_dialect d, uint32_t *count) {
  const json_value *v = json_object_get(obj, kw);
  if (!v) return NULL;
  size_t old = path_push(c, kw);
  snode **out = NULL;
  if (v->type != JSON_ARRAY || v->len == 0) {
    cfail(c, "%s must be a non-empty array of schemas", kw);
  } else {
    out = arena_alloc(c->s, v->len * sizeof *out);
    for (uint32_t i = 0; i < v->len && !c->failed; i++) {
      size_t old_i = path_push_index(c, i);
      out[i] = compile_schema(c, &v->u.items[i], base, d);
      path_pop(c, old_i);
    }
    *count = v->len;
  }
  path_pop(c, old);
  return c->failed ? NULL : out;
}

/* An object whose values are schemas (properties, $defs, ...). */
static named_schema *kw_schema_map(compiler *c, const json_value *obj, const char *kw, const char *base,
                                   schema_dialect d, uint32_t *count) {
  const json_value *v = json_object_get(obj, kw);
  if (!v) return NULL;
  size_t old = path_push(c, kw);
  named_schema *out = NULL;
  if (v->type != JSON_OBJECT) {
    cfail(c, "%s must be an object", kw);
  } else {
    out = arena_alloc(c->s, (v->len ? v->len : 1) * sizeof *out);
    for (uint32_t i = 0; i < v->len && !c->failed; i++) {
      const json_member *m = &v->u.members[i];
      size_t old_m = c->path.len;
      pointer_append(&c->path, m->key, m->key_len);
      out[i].name.s = arena_strndup(c->s, m->key, m->key_len);
      out[i].name.len = m->key_len;
      out[i].schema = compile_schema(c, &m->value, base, d);
      path_pop(c, old_m);
    }
    *count = v->len;
  }
  path_pop(c, old);
  return c->failed ? NULL : out;
}

/* An array of strings (required, dependentRequired values). */
static sstr *string_array(compiler *c, const json_value *v, const char *what, uint32_t *count) {
  if (v->type != JSON_ARRAY) return cfail(c, "%s must be an array of strings", what), NULL;
  sstr *out = arena_alloc(c->s, (v->len ? v->len : 1) * sizeof *out);
  for (uint32_t i = 0; i < v->len; i++) {
    const json_value *it = &v->u.items[i];
    if (it->type != JSON_STRING) {
      size_t old = path_push_index(c, i);
      cfail(c, "%s must be an array of strings", what);
      path_pop(c, old);
      return NULL;
    }
    out[i].s = arena_strndup(c->s, it->u.string, it->len);
    out[i].len = it->len;
  }
  *count = v->len;
  return out;
}

static void kw_type(compiler *c, snode *n, const json_value *obj) {
  const json_value *v = json_object_get(obj, "type");
  if (!v) return;
  size_t old = path_push(c, "type");
  unsigned mask = 0;
  if (v->type == JSON_STRING) {
    mask = type_bit(v->u.string, v->len);
    if (!mask) cfail(c, "unknown type \"%.40s\"", v->u.string);
  } else if (v->type == JSON_ARRAY && v->len > 0) {
    for (uint32_t i = 0; i < v->len && !c->failed; i++) {
      const json_value *t = &v->u.items[i];
      unsigned bit = t->type == JSON_STRING ? type_bit(t->u.string, t->len) : 0;
      if (!bit) {
        size_t old_i = path_push_index(c, i);
        cfail(c, "type entries must be one of null, boolean, object, array, number, string, integer");
        path_pop(c, old_i);
      }
      mask |= bit;
    }
  } else {
    cfail(c, "type must be a type name or a non-empty array of them");
  }
  n->types = (uint8_t)mask;
  path_pop(c, old);
}

static void kw_pattern(compiler *c, const char *source, size_t len, const regex **out) {
  char why[160];
  regex *re = regex_compile(source, len, why, sizeof why);
  if (!re) {
    cfail(c, "invalid regular expression \"%.60s\": %s", source, why);
    return;
  }
  GROW(c->s->regexes, c->s->nregexes, c->s->regexes_cap);
  c->s->regexes[c->s->nregexes++] = re;
  *out = re;
}

static void kw_ref(compiler *c, snode *n, const json_value *obj, const char *base) {
  const json_value *v = json_object_get(obj, "$ref");
  if (!v) return;
  size_t old = path_push(c, "$ref");
  if (v->type != JSON_STRING) {
    cfail(c, "$ref must be a string");
  } else {
    GROW(c->refs, c->nrefs, c->refs_cap);
    pending_ref *r = &c->refs[c->nrefs++];
    r->node = n;
    r->target = uri_resolve(base, v->u.string);
    r->location = xstrdup(c->path.data);
  }
  path_pop(c, old);
}

static bool valid_anchor_name(const char *s, size_t len) {
  if (len == 0 || !(is_alpha(s[0]) || s[0] == '_')) return false;
  for (size_t i = 1; i < len; i++)
    if (!(is_alpha(s[i]) || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.' || s[i] == '_'))
      return false;
  return true;
}

/* $id: a new base URI for this subtree, registered as a resource. In
 * draft-07 an $id of "#name" is a plain-name anchor instead. Returns the
 * new base (caller frees) or NULL when the base stays. */
static char *kw_id(compiler *c, const json_value *obj, const char *base, schema_dialect d) {
  const json_value *v = json_object_get(obj, "$id");
  if (!v) return NULL;
  size_t old = path_push(c, "$id");
  char *resolved = NULL;
  if (v->type != JSON_STRING) {
    cfail(c, "$id must be a string");
    goto done;
  }
  if (d == SCHEMA_DRAFT_07 && v->u.string[0] == '#') {
    if (v->len > 1) add_anchor(c, base, v->u.string + 1, v->len - 1, obj);
    goto done;
  }
  resolved = uri_resolve(base, v->u.string);
  char *hash = strchr(resolved, '#');
  if (hash) {
    if (d == SCHEMA_DRAFT_2020_12) {
      cfail(c, "$id must not contain a fragment (use $anchor)");
      free(resolved);
      resolved = NULL;
      goto done;
    }
    *hash = '\0';
  }
  path_pop(c, old); /* the resource is located at the schema, not at $id */
  add_resource(c, resolved, obj, d);
  if (hash && hash[1]) add_anchor(c, resolved, hash + 1, strlen(hash + 1), obj);
  return resolved;
done:
  path_pop(c, old);
  return resolved;
}

static void kw_anchor(compiler *c, const json_value *obj, const char *kw, const char *base) {
  const json_value *v = json_object_get(obj, kw);
  if (!v) return;
  size_t old = path_push(c, kw);
  if (v->type != JSON_STRING || !valid_anchor_name(v->u.string, v->len))
    cfail(c, "%s must be a name such as \"node\" (a letter or _, then letters, digits, - . _)", kw);
  else
    add_anchor(c, base, v->u.string, v->len, obj);
  path_pop(c, old);
}

/* unevaluatedProperties / unevaluatedItems: true and {} change nothing;
 * anything else needs annotation tracking, which we do not do. */
static void kw_unsupported_unless_trivial(compiler *c, const json_value *obj, const char *kw) {
  const json_value *v = json_object_get(obj, kw);
  if (!v || v->type == JSON_TRUE || (v->type == JSON_OBJECT && v->len == 0)) return;
  size_t old = path_push(c, kw);
  cfail(c, "%s is not supported (use additionalProperties / items instead)", kw);
  path_pop(c, old);
}

static void kw_required(compiler *c, snode *n, const json_value *obj) {
  const json_value *v = json_object_get(obj, "required");
  if (!v) return;
  size_t old = path_push(c, "required");
  n->required = string_array(c, v, "required", &n->nrequired);
  path_pop(c, old);
}

static void add_dep_required(compiler *c, snode *n, const json_member *m, const json_value *parent) {
  if (!n->dependent_required)
    n->dependent_required = arena_alloc(c->s, parent->len * sizeof *n->dependent_required);
  dep_required *dr = &n->dependent_required[n->ndependent_required];
  dr->name.s = arena_strndup(c->s, m->key, m->key_len);
  dr->name.len = m->key_len;
  dr->required = string_array(c, &m->value, "each dependency", &dr->count);
  if (!c->failed) n->ndependent_required++;
}

static void add_dep_schema(compiler *c, snode *n, const json_member *m, const json_value *parent,
                           const char *base, schema_dialect d) {
  if (!n->dependent_schemas)
    n->dependent_schemas = arena_alloc(c->s, parent->len * sizeof *n->dependent_schemas);
  named_schema *ds = &n->dependent_schemas[n->ndependent_schemas];
  ds->name.s = arena_strndup(c->s, m->key, m->key_len);
  ds->name.len = m->key_len;
  ds->schema = compile_schema(c, &m->value, base, d);
  if (!c->failed) n->ndependent_schemas++;
}

/* dependentRequired and dependentSchemas (2020-12), or dependencies
 * (draft-07), whose values are either form. */
static void kw_dependencies(compiler *c, snode *n, const json_value *obj, const char *base, schema_dialect d) {
  static const char *const names[] = {"dependentRequired", "dependentSchemas", "dependencies"};
  for (int k = 0; k < 3 && !c->failed; k++) {
    if ((k < 2) != (d == SCHEMA_DRAFT_2020_12)) continue;
    const json_value *v = json_object_get(obj, names[k]);
    if (!v) continue;
    size_t old = path_push(c, names[k]);
    if (v->type != JSON_OBJECT) cfail(c, "%s must be an object", names[k]);
    for (uint32_t i = 0; i < v->len && !c->failed; i++) {
      const json_member *m = &v->u.members[i];
      size_t old_m = c->path.len;
      pointer_append(&c->path, m->key, m->key_len);
      bool is_array = m->value.type == JSON_ARRAY;
      if (k == 0 || (k == 2 && is_array)) add_dep_required(c, n, m, v);
      else add_dep_schema(c, n, m, v, base, d);
      path_pop(c, old_m);
    }
    path_pop(c, old);
  }
}

static void kw_items(compiler *c, snode *n, const json_value *obj, const char *base, schema_dialect d) {
  const json_value *items = json_object_get(obj, "items");
  if (d == SCHEMA_DRAFT_2020_12) {
    n->prefix_items = kw_schema_array(c, obj, "prefixItems", base, d, &n->nprefix_items);
    n->prefix_keyword = "prefixItems";
    if (items && items->type == JSON_ARRAY) {
      size_t old = path_push(c, "items");
      cfail(c, "items must be a schema in draft 2020-12 (use prefixItems for a tuple)");
      path_pop(c, old);
      return;
    }
    if (!c->failed) n->items = kw_schema(c, obj, "items", base, d);
    n->items_keyword = "items";
    return;
  }
  n->prefix_keyword = "items";
  if (items && items->type == JSON_ARRAY) {
    /* Tuple form: additionalItems covers the rest. An empty array still
     * counts as a tuple, so additionalItems then applies to everything. */
    size_t old = path_push(c, "items");
    n->prefix_items = arena_alloc(c->s, (items->len ? items->len : 1) * sizeof *n->prefix_items);
    for (uint32_t i = 0; i < items->len && !c->failed; i++) {
      size_t old_i = path_push_index(c, i);
      n->prefix_items[i] = compile_schema(c, &items->u.items[i], base, d);
      path_pop(c, old_i);
    }
    n->nprefix_items = items->len;
    path_pop(c, old);
    if (!c->failed) n->items = kw_schema(c, obj, "additionalItems", base, d);
    n->items_keyword = "additionalItems";
  } else {
    n->items = kw_schema(c, obj, "items", base, d);
    n->items_keyword = "items";
  }
}

static void kw_pattern_properties(compiler *c, snode *n, const json_value *obj, const char *base, schema_dialect d) {
  const json_value *v = json_object_get(obj, "patternProperties");
  if (!v) return;
  size_t old = path_push(c, "patternProperties");
  if (v->type != JSON_OBJECT) {
    cfail(c, "patternProperties must be an object");
  } else {
    n->pattern_properties = arena_alloc(c->s, (v->len ? v->len : 1) * sizeof *n->pattern_properties);
    for (uint32_t i = 0; i < v->len && !c->failed; i++) {
      const json_member *m = &v->u.members[i];
      size_t old_m = c->path.len;
      pointer_append(&c->path, m->key, m->key_len);
      pattern_schema *ps = &n->pattern_properties[i];
      ps->source = arena_strndup(c->s, m->key, m->key_len);
      kw_pattern(c, m->key, m->key_len, &ps->re);
      if (!c->failed) ps->schema = compile_schema(c, &m->value, base, d);
      path_pop(c, old_m);
    }
    n->npattern_properties = v->len;
  }
  path_pop(c, old);
}

/* Compile the schema v at c->path. base is the URI that relative $id and
 * $ref values resolve against; d the dialect in force. Returns NULL (with
 * c->failed set) when the schema is invalid. */
static snode *compile_schema(compiler *c, const json_value *v, const char *base, schema_dialect d) {
  snode *n = map_get(c, v);
  if (n) return n;
  if (v->type != JSON_TRUE && v->type != JSON_FALSE && v->type != JSON_OBJECT) {
    cfail(c, "expected a schema (an object or a boolean), got %s", json_type_name(v->type));
    return NULL;
  }
  n = new_node(c, v);
  if (v->type == JSON_TRUE || v->type == JSON_FALSE) {
    n->kind = v->type == JSON_TRUE ? SN_TRUE : SN_FALSE;
    return n;
  }
  n->kind = SN_OBJECT;
  char *own_base = NULL;
  const json_value *kw;
  size_t old;

  if ((kw = json_object_get(v, "$schema"))) {
    old = path_push(c, "$schema");
    if (!parse_dialect(kw, &d))
      cfail(c, "unsupported $schema dialect (supported: https://json-schema.org/draft/2020-12/schema and "
               "http://json-schema.org/draft-07/schema#)");
    path_pop(c, old);
    if (c->failed) goto done;
  }
  if (d == SCHEMA_DRAFT_07 && json_object_get(v, "$ref")) {
    /* Draft-07: "All other properties in a "$ref" object MUST be ignored",
     * $id included. */
    kw_ref(c, n, v, base);
    goto done;
  }
  own_base = kw_id(c, v, base, d);
  if (own_base) base = own_base;
  if (c->failed) goto done;
  if (d == SCHEMA_DRAFT_2020_12) {
    kw_anchor(c, v, "$anchor", base);
    /* Without $dynamicRef, a $dynamicAnchor is an ordinary anchor. */
    if (!c->failed) kw_anchor(c, v, "$dynamicAnchor", base);
    if (!c->failed && json_object_get(v, "$dynamicRef")) {
      old = path_push(c, "$dynamicRef");
      cfail(c, "$dynamicRef is not supported");
      path_pop(c, old);
    }
    if (!c->failed) kw_unsupported_unless_trivial(c, v, "unevaluatedProperties");
    if (!c->failed) kw_unsupported_unless_trivial(c, v, "unevaluatedItems");
  }
  if (c->failed) goto done;
  kw_ref(c, n, v, base);

  /* Definitions are compiled even if nothing refers to them: their $id and
   * $anchor must be registered, and a bad definition is a bad schema. */
  uint32_t ndefs;
  if (!c->failed) kw_schema_map(c, v, d == SCHEMA_DRAFT_07 ? "definitions" : "$defs", base, d, &ndefs);

  if (!c->failed) kw_type(c, n, v);
  if (!c->failed && (kw = json_object_get(v, "const"))) add_pending_value(c, n, kw, false);
  if (!c->failed && (kw = json_object_get(v, "enum"))) {
    if (kw->type != JSON_ARRAY) {
      old = path_push(c, "enum");
      cfail(c, "enum must be an array");
      path_pop(c, old);
    } else {
      add_pending_value(c, n, kw, true);
    }
  }
  if (!c->failed) kw_number(c, n, v, "minimum", &n->minimum, H_MINIMUM);
  if (!c->failed) kw_number(c, n, v, "maximum", &n->maximum, H_MAXIMUM);
  if (!c->failed) kw_number(c, n, v, "exclusiveMinimum", &n->excl_min, H_EXCL_MIN);
  if (!c->failed) kw_number(c, n, v, "exclusiveMaximum", &n->excl_max, H_EXCL_MAX);
  if (!c->failed) kw_number(c, n, v, "multipleOf", &n->multiple_of, H_MULTIPLE);
  if (!c->failed) kw_count(c, n, v, "minLength", &n->min_length, H_MIN_LENGTH);
  if (!c->failed) kw_count(c, n, v, "maxLength", &n->max_length, H_MAX_LENGTH);
  if (!c->failed) kw_count(c, n, v, "minItems", &n->min_items, H_MIN_ITEMS);
  if (!c->failed) kw_count(c, n, v, "maxItems", &n->max_items, H_MAX_ITEMS);
  if (!c->failed) kw_count(c, n, v, "minProperties", &n->min_props, H_MIN_PROPS);
  if (!c->failed) kw_count(c, n, v, "maxProperties", &n->max_props, H_MAX_PROPS);
  if (!c->failed && d == SCHEMA_DRAFT_2020_12) {
    kw_count(c, n, v, "minContains", &n->min_contains, H_MIN_CONTAINS);
    if (!c->failed) kw_count(c, n, v, "maxContains", &n->max_contains, H_MAX_CONTAINS);
  }
  if (!c->failed && (kw = json_object_get(v, "uniqueItems"))) {
    if (kw->type == JSON_TRUE) n->has |= H_UNIQUE;
    else if (kw->type != JSON_FALSE) {
      old = path_push(c, "uniqueItems");
      cfail(c, "uniqueItems must be a boolean");
      path_pop(c, old);
    }
  }
  if (!c->failed && (kw = json_object_get(v, "pattern"))) {
    old = path_push(c, "pattern");
    if (kw->type != JSON_STRING) {
      cfail(c, "pattern must be a string");
    } else {
      n->pattern_source = arena_strndup(c->s, kw->u.string, kw->len);
      kw_pattern(c, kw->u.string, kw->len, &n->pattern);
    }
    path_pop(c, old);
  }
  if (!c->failed) kw_required(c, n, v);
  if (!c->failed) n->properties = kw_schema_map(c, v, "properties", base, d, &n->nproperties);
  if (!c->failed && n->nrequired) {
    /* Let validation answer "required" from the properties it has seen. */
    n->required_index = arena_alloc(c->s, n->nrequired);
    for (uint32_t i = 0; i < n->nrequired; i++) {
      n->required_index[i] = -1;
      for (uint32_t k = 0; k < n->nproperties && k < 64; k++)
        if (n->properties[k].name.len == n->required[i].len &&
            memcmp(n->properties[k].name.s, n->required[i].s, n->required[i].len) == 0) {
          n->required_index[i] = (int8_t)k;
          break;
        }
    }
  }
  if (!c->failed) kw_pattern_properties(c, n, v, base, d);
  if (!c->failed) n->additional_properties = kw_schema(c, v, "additionalProperties", base, d);
  if (!c->failed) n->property_names = kw_schema(c, v, "propertyNames", base, d);
  if (!c->failed) kw_dependencies(c, n, v, base, d);
  if (!c->failed) kw_items(c, n, v, base, d);
  if (!c->failed) n->contains = kw_schema(c, v, "contains", base, d);
  if (!c->failed) n->all_of = kw_schema_array(c, v, "allOf", base, d, &n->nall_of);
  if (!c->failed) n->any_of = kw_schema_array(c, v, "anyOf", base, d, &n->nany_of);
  if (!c->failed) n->one_of = kw_schema_array(c, v, "oneOf", base, d, &n->none_of);
  if (!c->failed) n->not_schema = kw_schema(c, v, "not", base, d);
  if (!c->failed) n->if_schema = kw_schema(c, v, "if", base, d);
  if (!c->failed) n->then_schema = kw_schema(c, v, "then", base, d);
  if (!c->failed) n->else_schema = kw_schema(c, v, "else", base, d);
  /* "then" and "else" only mean something next to "if". */
  if (!n->if_schema) n->then_schema = n->else_schema = NULL;

done:
  free(own_base);
  return c->failed ? NULL : n;
}

/* ---- $ref resolution ------------------------------------------------- */

static int hex_digit(int ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Evaluate the percent-decoded JSON pointer ptr from root. Follows $id
 * on the way, so *base ends as the base URI at the target. */
static const json_value *pointer_eval(const json_value *root, const char *ptr, size_t len, char **base,
                                      schema_dialect d) {
  const json_value *cur = root;
  size_t i = 0;
  buf token = BUF_INIT;
  while (i < len) {
    if (ptr[i] != '/') goto fail;
    i++;
    buf_empty(&token);
    while (i < len && ptr[i] != '/') {
      if (ptr[i] == '~') {
        if (i + 1 >= len || (ptr[i + 1] != '0' && ptr[i + 1] != '1')) goto fail;
        buf_putc(&token, ptr[i + 1] == '0' ? '~' : '/');
        i += 2;
      } else {
        buf_putc(&token, ptr[i++]);
      }
    }
    if (cur->type == JSON_OBJECT) {
      cur = json_object_getn(cur, token.data, token.len);
    } else if (cur->type == JSON_ARRAY) {
      if (token.len == 0 || token.len > 9 || (token.len > 1 && token.data[0] == '0')) goto fail;
      uint32_t idx = 0;
      for (size_t k = 0; k < token.len; k++) {
        if (token.data[k] < '0' || token.data[k] > '9') goto fail;
        idx = idx * 10 + (uint32_t)(token.data[k] - '0');
      }
      cur = idx < cur->len ? &cur->u.items[idx] : NULL;
    } else {
      cur = NULL;
    }
    if (!cur) goto fail;
    const json_value *id = json_object_get(cur, "$id");
    if (id && id->type == JSON_STRING && id->u.string[0] != '#' &&
        !(d == SCHEMA_DRAFT_07 && json_object_get(cur, "$ref"))) {
      char *nb = uri_resolve(*base, id->u.string);
      char *hash = strchr(nb, '#');
      if (hash) *hash = '\0';
      free(*base);
      *base = nb;
    }
  }
  buf_free(&token);
  return cur;
fail:
  buf_free(&token);
  return NULL;
}

static bool ref_error(compiler *c, const pending_ref *r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool ref_error(compiler *c, const pending_ref *r, const char *fmt, ...) {
  c->failed = true;
  if (c->err) {
    snprintf(c->err->pointer, sizeof c->err->pointer, "%s", r->location);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->message, sizeof c->err->message, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* Point every $ref at its target node, compiling targets that are not at
 * a known schema position (say under "definitions" in a 2020-12 schema). */
static bool resolve_refs(compiler *c) {
  for (size_t i = 0; i < c->nrefs && !c->failed; i++) {
    pending_ref r = c->refs[i]; /* a copy: compiling a target may grow c->refs */
    const char *hash = strchr(r.target, '#');
    size_t doc_len = hash ? (size_t)(hash - r.target) : strlen(r.target);
    const char *frag = hash ? hash + 1 : "";
    resource *res = find_resource(c, r.target, doc_len);
    if (!res)
      return ref_error(c, &r, "$ref \"%.120s\" points outside this schema (remote references are not supported)",
                       r.target);
    const json_value *target = NULL;
    char *base = xstrdup(res->uri);
    buf pointer = BUF_INIT;
    buf_empty(&pointer);
    if (frag[0] == '/' || frag[0] == '\0') {
      for (const char *p = frag; *p; p++) {
        if (*p == '%' && hex_digit(p[1]) >= 0 && hex_digit(p[2]) >= 0) {
          buf_putc(&pointer, (char)(hex_digit(p[1]) * 16 + hex_digit(p[2])));
          p += 2;
        } else {
          buf_putc(&pointer, *p);
        }
      }
      target = pointer_eval(res->root, pointer.data, pointer.len, &base, res->dialect);
    } else {
      buf key = BUF_INIT;
      buf_append_str(&key, res->uri);
      buf_putc(&key, '#');
      buf_append_str(&key, frag);
      for (size_t k = 0; k < c->nanchors; k++)
        if (strcmp(c->anchors[k].key, key.data) == 0) target = c->anchors[k].target;
      buf_free(&key);
    }
    if (!target) {
      free(base);
      buf_free(&pointer);
      return ref_error(c, &r, "$ref \"%.120s\" does not resolve to anything in this schema", r.target);
    }
    snode *node = map_get(c, target);
    if (!node) {
      buf_clear(&c->path);
      buf_append_str(&c->path, res->location);
      buf_append(&c->path, pointer.data, pointer.len);
      node = compile_schema(c, target, base, res->dialect);
    }
    free(base);
    buf_free(&pointer);
    if (!node) return false;
    c->refs[i].node->ref = node;
  }
  return !c->failed;
}

/* Applicators that evaluate the same instance location. A cycle through
 * them alone would recurse forever, so it is refused. */
static size_t in_place_children(const snode *n, const snode **out, size_t max) {
  size_t k = 0;
#define ADD(x) do { if ((x) && k < max) out[k++] = (x); } while (0)
  ADD(n->ref);
  for (uint32_t i = 0; i < n->nall_of; i++) ADD(n->all_of[i]);
  for (uint32_t i = 0; i < n->nany_of; i++) ADD(n->any_of[i]);
  for (uint32_t i = 0; i < n->none_of; i++) ADD(n->one_of[i]);
  for (uint32_t i = 0; i < n->ndependent_schemas; i++) ADD(n->dependent_schemas[i].schema);
  ADD(n->not_schema);
  ADD(n->if_schema);
  ADD(n->then_schema);
  ADD(n->else_schema);
#undef ADD
  return k;
}

static size_t in_place_count(const snode *n) {
  return 5 + n->nall_of + n->nany_of + n->none_of + n->ndependent_schemas;
}

/* Iterative depth-first search (schemas can chain thousands of $refs). */
static bool check_cycles(compiler *c) {
  uint8_t *color = xrealloc(NULL, c->nnodes); /* 0 new, 1 on the path, 2 done */
  memset(color, 0, c->nnodes);
  typedef struct frame {
    const snode *n;
    const snode **kids;
    size_t nkids, next;
  } frame;
  frame *stack = NULL;
  size_t depth = 0, cap = 0;
  bool ok = true;
  for (size_t start = 0; start < c->nnodes && ok; start++) {
    if (color[start]) continue;
    GROW(stack, depth, cap);
    const snode *sn = c->nodes[start];
    stack[depth].n = sn;
    stack[depth].kids = xrealloc(NULL, in_place_count(sn) * sizeof(snode *));
    stack[depth].nkids = in_place_children(sn, stack[depth].kids, in_place_count(sn));
    stack[depth].next = 0;
    depth++;
    color[start] = 1;
    while (depth && ok) {
      frame *f = &stack[depth - 1];
      if (f->next == f->nkids) {
        color[f->n->id] = 2;
        free(f->kids);
        depth--;
        continue;
      }
      const snode *kid = f->kids[f->next++];
      if (color[kid->id] == 1) {
        buf_clear(&c->path);
        buf_append_str(&c->path, f->n->location);
        cfail(c, "this schema refers back to itself without descending into the instance (endless recursion)");
        ok = false;
      } else if (color[kid->id] == 0) {
        color[kid->id] = 1;
        GROW(stack, depth, cap);
        stack[depth].n = kid;
        stack[depth].kids = xrealloc(NULL, in_place_count(kid) * sizeof(snode *));
        stack[depth].nkids = in_place_children(kid, stack[depth].kids, in_place_count(kid));
        stack[depth].next = 0;
        depth++;
      }
    }
  }
  while (depth) free(stack[--depth].kids);
  free(stack);
  free(color);
  return ok;
}

/* The types a schema can accept: its "type", intersected with what $ref
 * and allOf accept and with the union over anyOf/oneOf branches. Used to
 * word messages and steer coercion, so it runs once here, memoised in
 * n->accepts (the graph of these edges is acyclic after check_cycles). */
static unsigned compute_accepts(snode *n, uint8_t *done) {
  if (done[n->id]) return n->accepts;
  unsigned t = n->kind == SN_FALSE ? 0 : n->kind == SN_TRUE || !n->types ? T_ALL : n->types;
  if (n->ref) t &= compute_accepts(n->ref, done);
  for (uint32_t i = 0; i < n->nall_of; i++) t &= compute_accepts(n->all_of[i], done);
  if (n->nany_of) {
    unsigned u = 0;
    for (uint32_t i = 0; i < n->nany_of; i++) u |= compute_accepts(n->any_of[i], done);
    t &= u;
  }
  if (n->none_of) {
    unsigned u = 0;
    for (uint32_t i = 0; i < n->none_of; i++) u |= compute_accepts(n->one_of[i], done);
    t &= u;
  }
  n->accepts = (uint8_t)t;
  done[n->id] = 1;
  return t;
}

/* Parse the collected const/enum values into the schema's own document. */
static bool finish_values(compiler *c) {
  buf_putc(&c->values, ']');
  json_error jerr;
  c->s->values = json_parse(c->values.data, c->values.len, VALUE_PARSE_DEPTH, &jerr);
  if (!c->s->values) {
    buf_clear(&c->path);
    return cfail(c, "could not store const/enum values: %s", jerr.message);
  }
  const json_value *all = json_doc_root(c->s->values);
  for (size_t i = 0; i < c->npvalues; i++) {
    const pending_value *pv = &c->pvalues[i];
    if (pv->is_enum) pv->node->enum_values = &all->u.items[pv->index];
    else pv->node->const_value = &all->u.items[pv->index];
  }
  return true;
}

schema *schema_compile(const json_value *root, const schema_options *opts, schema_error *err) {
  compiler c = {0};
  schema_dialect d = opts ? opts->default_dialect : SCHEMA_DRAFT_2020_12;
  if (err) err->pointer[0] = err->message[0] = '\0';
  c.err = err;
  c.s = xrealloc(NULL, sizeof *c.s);
  memset(c.s, 0, sizeof *c.s);
  buf_empty(&c.path);
  buf_putc(&c.values, '[');

  /* The root resource: its pointers resolve against the document. */
  const json_value *declared = json_object_get(root, "$schema");
  if (declared) parse_dialect(declared, &d);
  add_resource(&c, "", root, d);
  c.s->root = compile_schema(&c, root, "", d);
  if (!c.failed) resolve_refs(&c);
  if (!c.failed) check_cycles(&c);
  if (!c.failed) {
    uint8_t *done = xrealloc(NULL, c.nnodes);
    memset(done, 0, c.nnodes);
    for (size_t i = 0; i < c.nnodes; i++) compute_accepts(c.nodes[i], done);
    free(done);
  }
  if (!c.failed) finish_values(&c);

  buf_free(&c.path);
  buf_free(&c.values);
  free(c.pvalues);
  for (size_t i = 0; i < c.nres; i++) {
    free(c.res[i].uri);
    free(c.res[i].location);
  }
  free(c.res);
  for (size_t i = 0; i < c.nanchors; i++) free(c.anchors[i].key);
  free(c.anchors);
  for (size_t i = 0; i < c.nrefs; i++) {
    free(c.refs[i].target);
    free(c.refs[i].location);
  }
  free(c.refs);
  free(c.nodes);
  free(c.map);
  if (c.failed) {
    schema_free(c.s);
    return NULL;
  }
  return c.s;
}

/* ---- Validation ------------------------------------------------------ */

/* One step of the instance path, on the validator's C stack: a member key,
 * or an array index when key is NULL. */
typedef struct ipath {
  const struct ipath *up;
  const char *key;
  uint32_t key_len;
  uint32_t index;
} ipath;

typedef enum vmode {
  V_QUIET,   /* stop at the first failure, record nothing */
  V_COUNT,   /* count failures up to limit (to find the closest branch) */
  V_COLLECT, /* record failures into the report */
} vmode;

/* State of one validation (or of a quiet sub-validation), on the stack. */
typedef struct vctx {
  vmode mode;
  unsigned errors, limit;
  int depth;
  schema_report *report;
  const char *prefix; /* put before messages, e.g. "property name \"x\": " */
  /* Shared by a validation and all its quiet sub-validations: set when a
   * regex ran out of steps. From then on patterns fail without searching,
   * so one bad pattern costs its budget once, not once per string, and the
   * whole validation fails (an unknown answer must not pass through "not"). */
  bool *regex_exhausted;
} vctx;

static void append_path(buf *b, const ipath *p) {
  if (!p) return;
  append_path(b, p->up);
  if (p->key) pointer_append(b, p->key, p->key_len);
  else buf_printf(b, "/%u", p->index);
}

static void render_path(const ipath *p, char *out, size_t n) {
  buf b = BUF_INIT;
  buf_empty(&b);
  append_path(&b, p);
  if (b.len < n) {
    memcpy(out, b.data, b.len + 1);
  } else {
    size_t keep = utf8_prefix(b.data, b.len, n - 4);
    snprintf(out, n, "%.*s...", (int)keep, b.data);
  }
  buf_free(&b);
}

static bool vstop(const vctx *c) {
  switch (c->mode) {
    case V_QUIET: return true;
    case V_COUNT: return c->errors >= c->limit;
    case V_COLLECT: return c->report->truncated;
  }
  return true;
}

static void verr(vctx *c, const snode *n, const char *keyword, const ipath *p, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void verr(vctx *c, const snode *n, const char *keyword, const ipath *p, const char *fmt, ...) {
  c->errors++;
  if (c->mode != V_COLLECT) return;
  schema_report *r = c->report;
  if (r->count >= SCHEMA_MAX_ERRORS) {
    r->truncated = true;
    return;
  }
  schema_report_error *e = &r->errors[r->count++];
  render_path(p, e->path, sizeof e->path);
  snprintf(e->keyword, sizeof e->keyword, "%s%s%s", n->location, keyword[0] ? "/" : "", keyword);
  size_t used = 0;
  if (c->prefix) used = (size_t)snprintf(e->message, sizeof e->message, "%s", c->prefix);
  if (used < sizeof e->message) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message + used, sizeof e->message - used, fmt, ap);
    va_end(ap);
  }
}

static bool v_node(vctx *c, const snode *n, const json_value *v, const ipath *p);

static int search(vctx *c, const regex *re, const char *s, size_t len) {
  if (*c->regex_exhausted) return -1;
  int r = regex_search(re, s, len);
  if (r < 0) *c->regex_exhausted = true;
  return r;
}

/* Validate quietly: only the answer. */
static bool v_quiet(const vctx *c, const snode *n, const json_value *v, const ipath *p) {
  vctx q = {V_QUIET, 0, 0, c->depth, NULL, NULL, c->regex_exhausted};
  return v_node(&q, n, v, p);
}

/* anyOf / oneOf matched no branch: say which types would do, or show the
 * errors of the branch that came closest. */
static void explain_no_branch(vctx *c, const snode *n, const char *keyword, snode *const *branches, uint32_t count,
                              const json_value *v, const ipath *p) {
  unsigned have = instance_types(v), union_types = 0;
  for (uint32_t i = 0; i < count; i++) union_types |= branches[i]->accepts;
  char found[SUMMARY_BYTES + 40];
  describe(v, found, sizeof found);
  if (!(union_types & have)) {
    char want[80];
    type_list(union_types, want, sizeof want);
    verr(c, n, keyword, p, "expected %s (%s), got %s", want, keyword, found);
    return;
  }
  if (c->mode != V_COLLECT) {
    verr(c, n, keyword, p, "matches none of the %s alternatives", keyword);
    return;
  }
  /* The closest branch is the one with the fewest errors among those whose
   * type fits; ties go to the earlier one. */
  uint32_t best = 0;
  unsigned best_errors = UINT32_MAX;
  for (uint32_t i = 0; i < count; i++) {
    if (!(branches[i]->accepts & have)) continue;
    vctx counter = {V_COUNT, 0, CLOSEST_LIMIT, c->depth, NULL, NULL, c->regex_exhausted};
    v_node(&counter, branches[i], v, p);
    if (counter.errors < best_errors) {
      best_errors = counter.errors;
      best = i;
    }
  }
  if (count == 1)
    verr(c, n, keyword, p, "does not match the %s alternative, which fails with:", keyword);
  else
    verr(c, n, keyword, p, "matches none of the %u %s alternatives; the closest, #%u, fails with:", count, keyword,
         best + 1);
  v_node(c, branches[best], v, p);
}

static bool v_object(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  bool ok = true;
  if ((n->has & H_MIN_PROPS) && v->len < n->min_props) {
    ok = false;
    verr(c, n, "minProperties", p, "expected at least %llu %s, got %u", (unsigned long long)n->min_props,
         plural(n->min_props, "property", "properties"), v->len);
    if (vstop(c)) return false;
  }
  if ((n->has & H_MAX_PROPS) && v->len > n->max_props) {
    ok = false;
    verr(c, n, "maxProperties", p, "expected at most %llu %s, got %u", (unsigned long long)n->max_props,
         plural(n->max_props, "property", "properties"), v->len);
    if (vstop(c)) return false;
  }
  for (uint32_t i = 0; i < n->ndependent_required; i++) {
    const dep_required *dr = &n->dependent_required[i];
    if (!json_object_getn(v, dr->name.s, dr->name.len)) continue;
    for (uint32_t k = 0; k < dr->count; k++) {
      if (json_object_getn(v, dr->required[k].s, dr->required[k].len)) continue;
      ok = false;
      verr(c, n, "dependentRequired", p, "missing property \"%s\", required when \"%s\" is present",
           dr->required[k].s, dr->name.s);
      if (vstop(c)) return false;
    }
  }
  bool per_member = n->nproperties || n->npattern_properties || n->additional_properties || n->property_names;
  uint64_t seen = 0; /* properties[k] was present, for k < 64 */
  uint32_t hint = 0;
  for (uint32_t i = 0; per_member && i < v->len; i++) {
    const json_member *m = &v->u.members[i];
    ipath child = {p, m->key, m->key_len, 0};
    bool matched = false;
    /* Members usually come in the schema's order: start after the last
     * match, and compare a first byte before calling memcmp. */
    for (uint32_t t = 0, k = hint; t < n->nproperties; t++, k = k + 1 == n->nproperties ? 0 : k + 1) {
      const named_schema *ps = &n->properties[k];
      if (ps->name.len != m->key_len || (m->key_len && ps->name.s[0] != m->key[0]) ||
          memcmp(ps->name.s, m->key, m->key_len) != 0)
        continue;
      matched = true;
      hint = k + 1 == n->nproperties ? 0 : k + 1;
      if (k < 64) seen |= (uint64_t)1 << k;
      if (ps->schema->kind == SN_FALSE) {
        ok = false;
        verr(c, n, "properties", &child, "property is not allowed here");
        if (vstop(c)) return false;
      } else if (!v_node(c, ps->schema, &m->value, &child)) {
        ok = false;
        if (vstop(c)) return false;
      }
      break;
    }
    for (uint32_t k = 0; k < n->npattern_properties; k++) {
      const pattern_schema *ps = &n->pattern_properties[k];
      int r = search(c, ps->re, m->key, m->key_len);
      if (r < 0) {
        ok = false;
        verr(c, n, "patternProperties", &child, "property name is too expensive to match against pattern %.80s",
             ps->source);
        if (vstop(c)) return false;
        continue;
      }
      if (!r) continue;
      matched = true;
      if (!v_node(c, ps->schema, &m->value, &child)) {
        ok = false;
        if (vstop(c)) return false;
      }
    }
    if (!matched && n->additional_properties) {
      if (n->additional_properties->kind == SN_FALSE) {
        ok = false;
        verr(c, n, "additionalProperties", &child, "unexpected property (additionalProperties is false)");
        if (vstop(c)) return false;
      } else if (!v_node(c, n->additional_properties, &m->value, &child)) {
        ok = false;
        if (vstop(c)) return false;
      }
    }
    if (n->property_names) {
      json_value name = {0};
      name.type = JSON_STRING;
      name.len = m->key_len;
      name.u.string = m->key;
      if (!v_quiet(c, n->property_names, &name, p)) {
        ok = false;
        if (c->mode == V_COLLECT) {
          char prefix[SUMMARY_BYTES + 40], text[SUMMARY_BYTES + 16];
          brief_json(&name, text, sizeof text);
          snprintf(prefix, sizeof prefix, "property name %s: ", text);
          const char *saved = c->prefix;
          c->prefix = prefix;
          unsigned before = c->report->count;
          v_node(c, n->property_names, &name, p);
          c->prefix = saved;
          if (c->report->count == before) verr(c, n, "propertyNames", p, "property name %s is not allowed", text);
        } else {
          verr(c, n, "propertyNames", p, "invalid property name");
        }
        if (vstop(c)) return false;
      }
    }
  }
  for (uint32_t i = 0; i < n->nrequired; i++) {
    int k = n->required_index[i];
    if (k >= 0 ? (seen >> k) & 1 : json_object_getn(v, n->required[i].s, n->required[i].len) != NULL) continue;
    ok = false;
    verr(c, n, "required", p, "missing required property \"%s\"", n->required[i].s);
    if (vstop(c)) return false;
  }
  for (uint32_t i = 0; i < n->ndependent_schemas; i++) {
    const named_schema *ds = &n->dependent_schemas[i];
    if (!json_object_getn(v, ds->name.s, ds->name.len)) continue;
    if (!v_node(c, ds->schema, v, p)) {
      ok = false;
      if (vstop(c)) return false;
    }
  }
  return ok;
}

/* A hash that agrees with json_equal: equal values hash equal (1 and 1.0
 * too; objects ignore member order and earlier duplicate keys). */
static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

static uint64_t value_hash(const json_value *v) {
  switch (v->type) {
    case JSON_NULL: return 1;
    case JSON_FALSE: return 2;
    case JSON_TRUE: return 3;
    case JSON_INTEGER:
    case JSON_FLOAT: {
      double d = json_number(v);
      if (d == 0) d = 0; /* -0.0 equals 0 */
      uint64_t bits;
      memcpy(&bits, &d, sizeof bits);
      return mix(bits ^ 4);
    }
    case JSON_STRING: {
      uint64_t h = 1469598103934665603ULL;
      for (uint32_t i = 0; i < v->len; i++) h = (h ^ (unsigned char)v->u.string[i]) * 1099511628211ULL;
      return mix(h ^ 5);
    }
    case JSON_ARRAY: {
      uint64_t h = 6;
      for (uint32_t i = 0; i < v->len; i++) h = mix(h * 31 + value_hash(&v->u.items[i]));
      return h;
    }
    case JSON_OBJECT: {
      /* Finding the last of each duplicate key is quadratic, so big
       * objects share one bucket and are told apart by json_equal. */
      if (v->len > 64) return 7;
      uint64_t h = 7;
      for (uint32_t i = 0; i < v->len; i++) {
        const json_member *m = &v->u.members[i];
        if (json_object_getn(v, m->key, m->key_len) != &m->value) continue; /* an earlier duplicate */
        json_value key = {0};
        key.type = JSON_STRING;
        key.len = m->key_len;
        key.u.string = m->key;
        h += mix(value_hash(&key) * 31 + value_hash(&m->value));
      }
      return mix(h);
    }
  }
  return 0;
}

typedef struct hashed_item {
  uint64_t hash;
  uint32_t index;
} hashed_item;

static int cmp_hashed(const void *a, const void *b) {
  const hashed_item *x = a, *y = b;
  if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* uniqueItems: the first pair of equal items (by index within a run of
 * equal hashes). Short arrays compare pairwise; long ones sort by hash so
 * a million distinct items cost n log n, not n squared. */
static bool find_duplicate(const json_value *v, uint32_t *first, uint32_t *second) {
  if (v->len <= 16) {
    for (uint32_t i = 1; i < v->len; i++)
      for (uint32_t k = 0; k < i; k++)
        if (json_equal(&v->u.items[k], &v->u.items[i])) {
          *first = k;
          *second = i;
          return true;
        }
    return false;
  }
  hashed_item *h = xrealloc(NULL, v->len * sizeof *h);
  for (uint32_t i = 0; i < v->len; i++) {
    h[i].hash = value_hash(&v->u.items[i]);
    h[i].index = i;
  }
  qsort(h, v->len, sizeof *h, cmp_hashed);
  bool found = false;
  for (uint32_t start = 0; start < v->len && !found;) {
    uint32_t end = start + 1;
    while (end < v->len && h[end].hash == h[start].hash) end++;
    for (uint32_t i = start + 1; i < end && !found; i++)
      for (uint32_t k = start; k < i && !found; k++)
        if (json_equal(&v->u.items[h[k].index], &v->u.items[h[i].index])) {
          *first = h[k].index < h[i].index ? h[k].index : h[i].index;
          *second = h[k].index < h[i].index ? h[i].index : h[k].index;
          found = true;
        }
    start = end;
  }
  free(h);
  return found;
}

static bool v_array(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  bool ok = true;
  if ((n->has & H_MIN_ITEMS) && v->len < n->min_items) {
    ok = false;
    verr(c, n, "minItems", p, "expected at least %llu %s, got %u", (unsigned long long)n->min_items,
         plural(n->min_items, "item", "items"), v->len);
    if (vstop(c)) return false;
  }
  if ((n->has & H_MAX_ITEMS) && v->len > n->max_items) {
    ok = false;
    verr(c, n, "maxItems", p, "expected at most %llu %s, got %u", (unsigned long long)n->max_items,
         plural(n->max_items, "item", "items"), v->len);
    if (vstop(c)) return false;
  }
  if (n->has & H_UNIQUE) {
    uint32_t first = 0, second = 0;
    if (find_duplicate(v, &first, &second)) {
      ok = false;
      verr(c, n, "uniqueItems", p, "expected unique items, but items %u and %u are equal", first, second);
      if (vstop(c)) return false;
    }
  }
  uint32_t prefix = n->nprefix_items < v->len ? n->nprefix_items : v->len;
  for (uint32_t i = 0; i < prefix; i++) {
    ipath child = {p, NULL, 0, i};
    if (!v_node(c, n->prefix_items[i], &v->u.items[i], &child)) {
      ok = false;
      if (vstop(c)) return false;
    }
  }
  if (n->items && v->len > prefix) {
    if (n->items->kind == SN_FALSE) {
      ok = false;
      verr(c, n, n->items_keyword, p, "expected at most %u items (%s is false), got %u", n->nprefix_items,
           n->items_keyword, v->len);
      if (vstop(c)) return false;
    } else {
      for (uint32_t i = prefix; i < v->len; i++) {
        ipath child = {p, NULL, 0, i};
        if (!v_node(c, n->items, &v->u.items[i], &child)) {
          ok = false;
          if (vstop(c)) return false;
        }
      }
    }
  }
  if (n->contains) {
    uint64_t min = (n->has & H_MIN_CONTAINS) ? n->min_contains : 1;
    uint64_t max = (n->has & H_MAX_CONTAINS) ? n->max_contains : UINT64_MAX;
    uint64_t matches = 0;
    for (uint32_t i = 0; i < v->len; i++) {
      ipath child = {p, NULL, 0, i};
      if (v_quiet(c, n->contains, &v->u.items[i], &child)) matches++;
      if (matches >= min && matches > max) break;
    }
    if (matches < min) {
      ok = false;
      verr(c, n, (n->has & H_MIN_CONTAINS) ? "minContains" : "contains", p,
           "expected at least %llu %s matching the \"contains\" schema, found %llu", (unsigned long long)min,
           plural(min, "item", "items"), (unsigned long long)matches);
      if (vstop(c)) return false;
    } else if (matches > max) {
      ok = false;
      verr(c, n, "maxContains", p, "expected at most %llu %s matching the \"contains\" schema, found more",
           (unsigned long long)max, plural(max, "item", "items"));
      if (vstop(c)) return false;
    }
  }
  return ok;
}

static bool v_number(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  bool ok = true;
  char bound[40], found[40];
  static const struct {
    uint32_t flag;
    const char *keyword, *op;
    int bad_sign; /* cmp result that fails: -1 means below, 1 above */
    bool or_equal;
  } checks[] = {
      {H_MINIMUM, "minimum", ">=", -1, false},
      {H_MAXIMUM, "maximum", "<=", 1, false},
      {H_EXCL_MIN, "exclusiveMinimum", ">", -1, true},
      {H_EXCL_MAX, "exclusiveMaximum", "<", 1, true},
  };
  const num *bounds[] = {&n->minimum, &n->maximum, &n->excl_min, &n->excl_max};
  for (int k = 0; k < 4; k++) {
    if (!(n->has & checks[k].flag)) continue;
    int cmp = num_cmp(v, bounds[k]);
    if (cmp != checks[k].bad_sign && !(checks[k].or_equal && cmp == 0)) continue;
    ok = false;
    format_num(bounds[k], bound, sizeof bound);
    format_value_number(v, found, sizeof found);
    verr(c, n, checks[k].keyword, p, "expected a number %s %s, got %s", checks[k].op, bound, found);
    if (vstop(c)) return false;
  }
  if ((n->has & H_MULTIPLE) && !is_multiple(v, &n->multiple_of)) {
    ok = false;
    format_num(&n->multiple_of, bound, sizeof bound);
    format_value_number(v, found, sizeof found);
    verr(c, n, "multipleOf", p, "expected a multiple of %s, got %s", bound, found);
    if (vstop(c)) return false;
  }
  return ok;
}

static bool v_string(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  bool ok = true;
  /* A character is 1 to 4 bytes, so the byte length alone decides most
   * checks; a long string is counted only when it is near a bound. */
  size_t fewest = v->len / 4 + (v->len % 4 != 0);
  bool count = ((n->has & H_MIN_LENGTH) && fewest < n->min_length) || ((n->has & H_MAX_LENGTH) && v->len > n->max_length);
  if (count) {
    size_t chars = utf8_count(v->u.string, v->len);
    if ((n->has & H_MIN_LENGTH) && chars < n->min_length) {
      ok = false;
      verr(c, n, "minLength", p, "expected at least %llu %s, got %zu", (unsigned long long)n->min_length,
           plural(n->min_length, "character", "characters"), chars);
      if (vstop(c)) return false;
    }
    if ((n->has & H_MAX_LENGTH) && chars > n->max_length) {
      ok = false;
      verr(c, n, "maxLength", p, "expected at most %llu %s, got %zu", (unsigned long long)n->max_length,
           plural(n->max_length, "character", "characters"), chars);
      if (vstop(c)) return false;
    }
  }
  if (n->pattern) {
    int r = search(c, n->pattern, v->u.string, v->len);
    if (r != 1) {
      ok = false;
      char found[SUMMARY_BYTES + 16];
      brief_json(v, found, sizeof found);
      if (r < 0)
        verr(c, n, "pattern", p, "value is too expensive to match against pattern %.80s (gave up), got %s",
             n->pattern_source, found);
      else
        verr(c, n, "pattern", p, "does not match pattern %.80s, got %s", n->pattern_source, found);
      if (vstop(c)) return false;
    }
  }
  return ok;
}

static bool v_value_keywords(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  bool ok = true;
  if (n->const_value && !json_equal(n->const_value, v)) {
    char want[SUMMARY_BYTES + 16], found[SUMMARY_BYTES + 16];
    brief_json(n->const_value, want, sizeof want);
    brief_json(v, found, sizeof found);
    ok = false;
    verr(c, n, "const", p, "expected %s, got %s", want, found);
    if (vstop(c)) return false;
  }
  if (n->enum_values) {
    bool any = false;
    for (uint32_t i = 0; i < n->enum_values->len && !any; i++) any = json_equal(&n->enum_values->u.items[i], v);
    if (!any) {
      ok = false;
      if (c->mode == V_COLLECT && n->enum_values->len == 0) {
        verr(c, n, "enum", p, "no value is allowed here (enum is empty)");
      } else if (c->mode == V_COLLECT) {
        char list[200], found[SUMMARY_BYTES + 16], one[SUMMARY_BYTES + 16];
        size_t used = 0;
        list[0] = '\0';
        for (uint32_t i = 0; i < n->enum_values->len; i++) {
          brief_json(&n->enum_values->u.items[i], one, sizeof one);
          if (used + strlen(one) + 8 >= sizeof list) {
            snprintf(list + used, sizeof list - used, ", ...");
            break;
          }
          used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", one);
        }
        brief_json(v, found, sizeof found);
        verr(c, n, "enum", p, "expected one of %s, got %s", list, found);
      } else {
        verr(c, n, "enum", p, "not one of the allowed values");
      }
      if (vstop(c)) return false;
    }
  }
  return ok;
}

static bool v_applicators(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  bool ok = true;
  for (uint32_t i = 0; i < n->nall_of; i++) {
    if (!v_node(c, n->all_of[i], v, p)) {
      ok = false;
      if (vstop(c)) return false;
    }
  }
  if (n->nany_of) {
    bool any = false;
    for (uint32_t i = 0; i < n->nany_of && !any; i++) any = v_quiet(c, n->any_of[i], v, p);
    if (!any) {
      ok = false;
      explain_no_branch(c, n, "anyOf", n->any_of, n->nany_of, v, p);
      if (vstop(c)) return false;
    }
  }
  if (n->none_of) {
    uint32_t matched = 0, first = 0, second = 0;
    for (uint32_t i = 0; i < n->none_of && matched < 2; i++) {
      if (!v_quiet(c, n->one_of[i], v, p)) continue;
      if (matched++ == 0) first = i;
      else second = i;
    }
    if (matched == 0) {
      ok = false;
      explain_no_branch(c, n, "oneOf", n->one_of, n->none_of, v, p);
      if (vstop(c)) return false;
    } else if (matched > 1) {
      ok = false;
      verr(c, n, "oneOf", p, "matches more than one oneOf alternative (#%u and #%u), expected exactly one",
           first + 1, second + 1);
      if (vstop(c)) return false;
    }
  }
  if (n->not_schema && v_quiet(c, n->not_schema, v, p)) {
    ok = false;
    verr(c, n, "not", p, "must not match the schema in \"not\"");
    if (vstop(c)) return false;
  }
  if (n->if_schema && (n->then_schema || n->else_schema)) {
    const snode *branch = v_quiet(c, n->if_schema, v, p) ? n->then_schema : n->else_schema;
    if (branch && !v_node(c, branch, v, p)) {
      ok = false;
      if (vstop(c)) return false;
    }
  }
  return ok;
}

/* Kept out of v_node so its buffers are not in every recursive frame. */
static __attribute__((noinline)) void type_error(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  if (c->mode != V_COLLECT) {
    verr(c, n, "type", p, "wrong type");
    return;
  }
  char want[80], found[SUMMARY_BYTES + 40];
  type_list(n->types, want, sizeof want);
  describe(v, found, sizeof found);
  verr(c, n, "type", p, "expected %s, got %s", want, found);
}

/* Validate v against n at path p, recording errors as c->mode says.
 * Returns whether v is valid. */
static bool v_node(vctx *c, const snode *n, const json_value *v, const ipath *p) {
  if (n->kind == SN_TRUE) return true;
  if (n->kind == SN_FALSE) {
    verr(c, n, "", p, "no value is allowed here (the schema is false)");
    return false;
  }
  if (c->depth >= MAX_VALIDATE_DEPTH) {
    verr(c, n, "", p, "schema recursion deeper than %d levels", MAX_VALIDATE_DEPTH);
    return false;
  }
  c->depth++;
  bool ok = true;
  if (n->types && !(n->types & instance_types(v))) {
    type_error(c, n, v, p);
    /* The other keywords would only repeat the same mistake. */
    ok = false;
    goto done;
  }
  if (n->ref && !v_node(c, n->ref, v, p)) {
    ok = false;
    if (vstop(c)) goto done;
  }
  if ((n->const_value || n->enum_values) && !v_value_keywords(c, n, v, p)) {
    ok = false;
    if (vstop(c)) goto done;
  }
  bool sub = true;
  switch (v->type) {
    case JSON_OBJECT: sub = v_object(c, n, v, p); break;
    case JSON_ARRAY: sub = v_array(c, n, v, p); break;
    case JSON_INTEGER:
    case JSON_FLOAT:
      if (n->has & (H_MINIMUM | H_MAXIMUM | H_EXCL_MIN | H_EXCL_MAX | H_MULTIPLE)) sub = v_number(c, n, v, p);
      break;
    case JSON_STRING: sub = v_string(c, n, v, p); break;
    default: break;
  }
  if (!sub) {
    ok = false;
    if (vstop(c)) goto done;
  }
  if (!v_applicators(c, n, v, p)) ok = false;
done:
  c->depth--;
  return ok;
}

bool schema_validate(const schema *s, const json_value *instance, schema_report *report) {
  bool exhausted = false;
  vctx c = {report ? V_COLLECT : V_QUIET, 0, 0, 0, report, NULL, &exhausted};
  if (report) {
    report->count = 0;
    report->truncated = false;
  }
  bool ok = v_node(&c, s->root, instance, NULL);
  if (exhausted && ok) {
    /* A pattern gave up inside something that turned failure into
     * success ("not", an anyOf branch): the answer is unknown, so no. */
    ok = false;
    verr(&c, s->root, "", NULL, "a pattern was too expensive to evaluate against this value");
  }
  return ok;
}

/* ---- Reports --------------------------------------------------------- */

unsigned schema_report_count(const schema_report *r) { return r->count; }
const char *schema_report_path(const schema_report *r, unsigned i) { return i < r->count ? r->errors[i].path : NULL; }
const char *schema_report_keyword(const schema_report *r, unsigned i) {
  return i < r->count ? r->errors[i].keyword : NULL;
}
const char *schema_report_message(const schema_report *r, unsigned i) {
  return i < r->count ? r->errors[i].message : NULL;
}

void schema_report_format(const schema_report *r, buf *out) {
  for (unsigned i = 0; i < r->count; i++) {
    if (i) buf_putc(out, '\n');
    const char *path = r->errors[i].path;
    buf_append_str(out, path[0] ? path : "/");
    buf_puts(out, ": ");
    buf_append_str(out, r->errors[i].message);
  }
  if (r->truncated) buf_puts(out, "\n(more errors not shown)");
}

void schema_report_write_json(const schema_report *r, buf *out) {
  buf_putc(out, '[');
  for (unsigned i = 0; i < r->count; i++) {
    if (i) buf_putc(out, ',');
    buf_puts(out, "{\"path\":");
    json_write_string(out, r->errors[i].path, strlen(r->errors[i].path));
    buf_puts(out, ",\"message\":");
    json_write_string(out, r->errors[i].message, strlen(r->errors[i].message));
    buf_putc(out, '}');
  }
  buf_putc(out, ']');
}

/* ---- Coercion -------------------------------------------------------- */

/* The schemas that apply at one instance location, gathered through $ref
 * and allOf (and one-branch anyOf/oneOf). Lives on the coercer's stack. */
typedef struct nodeset {
  const snode *n[NODESET_MAX];
  int count;
} nodeset;

static void ns_add(nodeset *s, const snode *n, int depth) {
  if (!n || depth > 16 || s->count == NODESET_MAX) return;
  for (int i = 0; i < s->count; i++)
    if (s->n[i] == n) return;
  s->n[s->count++] = n;
  if (n->kind != SN_OBJECT) return;
  ns_add(s, n->ref, depth + 1);
  for (uint32_t i = 0; i < n->nall_of; i++) ns_add(s, n->all_of[i], depth + 1);
}

/* The types wanted here: the intersection over the set. */
static unsigned ns_types(const nodeset *s) {
  unsigned t = T_ALL;
  for (int i = 0; i < s->count; i++) t &= s->n[i]->accepts;
  return t;
}

/* Once the value's type is known, an anyOf/oneOf with exactly one branch
 * of that type applies too; with several it is ambiguous and left alone. */
static void ns_add_fitting_branches(nodeset *s, unsigned have) {
  for (int i = 0; i < s->count; i++) {
    const snode *n = s->n[i];
    if (n->kind != SN_OBJECT) continue;
    for (int k = 0; k < 2; k++) {
      snode *const *branches = k ? n->one_of : n->any_of;
      uint32_t count = k ? n->none_of : n->nany_of;
      const snode *fit = NULL;
      int fits = 0;
      for (uint32_t b = 0; b < count; b++)
        if (branches[b]->accepts & have) {
          fit = branches[b];
          fits++;
        }
      if (fits == 1) ns_add(s, fit, 0);
    }
  }
}

/* Is s (len bytes) a JSON number text with nothing around it? */
static bool looks_numeric(const char *s, size_t len) {
  return len > 0 && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && s[len - 1] >= '0' && s[len - 1] <= '9';
}

static void coerce_value(const nodeset *ns_in, const json_value *v, buf *out, bool *changed, int depth);

/* Try to turn the string v into the type the schema wants; writes the
 * replacement and returns true when it did. */
static bool coerce_string(const nodeset *ns, unsigned want, const json_value *v, buf *out, bool *changed,
                          int depth) {
  const char *s = v->u.string;
  size_t len = v->len;
  if ((want & T_INTEGER) && looks_numeric(s, len)) {
    json_doc *doc = json_parse(s, len, 1, NULL);
    if (doc) {
      const json_value *num_v = json_doc_root(doc);
      bool done = false;
      if (json_is_number(num_v)) {
        if (want & T_NUMBER) {
          json_write_value(out, num_v);
          done = true;
        } else if (num_v->type == JSON_INTEGER) {
          json_write_integer(out, num_v->u.integer);
          done = true;
        } else if (is_integral(num_v->u.number) && fabs(num_v->u.number) < 9.2e18) {
          json_write_integer(out, (int64_t)num_v->u.number);
          done = true;
        }
      }
      json_doc_free(doc);
      if (done) {
        *changed = true;
        return true;
      }
    }
  }
  if ((want & T_BOOLEAN) && (str_eq(s, len, "true") || str_eq(s, len, "false"))) {
    buf_append(out, s, len);
    *changed = true;
    return true;
  }
  if (want & (T_OBJECT | T_ARRAY)) {
    json_doc *doc = json_parse(s, len, MAX_JSON_DEPTH, NULL);
    if (doc) {
      const json_value *root = json_doc_root(doc);
      bool fits = (root->type == JSON_OBJECT && (want & T_OBJECT)) || (root->type == JSON_ARRAY && (want & T_ARRAY));
      if (fits) {
        coerce_value(ns, root, out, changed, depth + 1);
        *changed = true;
      }
      json_doc_free(doc);
      if (fits) return true;
    }
  }
  return false;
}

static void coerce_value(const nodeset *ns_in, const json_value *v, buf *out, bool *changed, int depth) {
  if (depth > MAX_JSON_DEPTH * 2) {
    json_write_value(out, v);
    return;
  }
  nodeset ns = *ns_in;
  unsigned want = ns_types(&ns);
  if (v->type == JSON_STRING && !(want & T_STRING) && want && coerce_string(&ns, want, v, out, changed, depth))
    return;
  if (v->type != JSON_OBJECT && v->type != JSON_ARRAY) {
    json_write_value(out, v);
    return;
  }
  ns_add_fitting_branches(&ns, instance_types(v));
  if (v->type == JSON_ARRAY) {
    buf_putc(out, '[');
    for (uint32_t i = 0; i < v->len; i++) {
      nodeset child = {{0}, 0};
      for (int k = 0; k < ns.count; k++) {
        const snode *n = ns.n[k];
        if (n->kind != SN_OBJECT) continue;
        ns_add(&child, i < n->nprefix_items ? n->prefix_items[i] : n->items, 0);
      }
      if (i) buf_putc(out, ',');
      coerce_value(&child, &v->u.items[i], out, changed, depth + 1);
    }
    buf_putc(out, ']');
    return;
  }
  buf_putc(out, '{');
  for (uint32_t i = 0; i < v->len; i++) {
    const json_member *m = &v->u.members[i];
    nodeset child = {{0}, 0};
    for (int k = 0; k < ns.count; k++) {
      const snode *n = ns.n[k];
      if (n->kind != SN_OBJECT) continue;
      bool matched = false;
      for (uint32_t j = 0; j < n->nproperties; j++)
        if (n->properties[j].name.len == m->key_len && memcmp(n->properties[j].name.s, m->key, m->key_len) == 0) {
          ns_add(&child, n->properties[j].schema, 0);
          matched = true;
        }
      for (uint32_t j = 0; j < n->npattern_properties; j++)
        if (regex_search(n->pattern_properties[j].re, m->key, m->key_len) == 1) {
          ns_add(&child, n->pattern_properties[j].schema, 0);
          matched = true;
        }
      if (!matched) ns_add(&child, n->additional_properties, 0);
    }
    if (i) buf_putc(out, ',');
    json_write_string(out, m->key, m->key_len);
    buf_putc(out, ':');
    coerce_value(&child, &m->value, out, changed, depth + 1);
  }
  buf_putc(out, '}');
}

bool schema_coerce(const schema *s, const json_value *instance, buf *out) {
  nodeset ns = {{0}, 0};
  ns_add(&ns, s->root, 0);
  bool changed = false;
  coerce_value(&ns, instance, out, &changed, 0);
  return changed;
}

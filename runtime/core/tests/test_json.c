/*
 * test_json.c - the strict JSON parser and writers, without Lua.
 *
 *   test_json [JSONTestSuite/test_parsing]
 *
 * Every JSONTestSuite file goes through json_parse as is, including the ten
 * that contain a raw newline and so cannot travel as one stdio line.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/luamcp_limits.h"
#include "check.h"

/* The implementation-defined (i_) files we accept; see README "Strict JSON". */
static const char *const ACCEPTED_I[] = {
    "i_number_double_huge_neg_exp.json", "i_number_real_underflow.json", "i_number_too_big_neg_int.json",
    "i_number_too_big_pos_int.json",     "i_number_very_big_negative_int.json",
};

static bool accepted_i(const char *name) {
  for (size_t i = 0; i < sizeof ACCEPTED_I / sizeof *ACCEPTED_I; i++)
    if (strcmp(name, ACCEPTED_I[i]) == 0) return true;
  return false;
}

static int suites_skipped;

static void test_suite(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    /* A fresh clone has no ../shared: the suite is skipped, not failed. */
    printf("JSONTestSuite: skipped, not found at %s\n", dir);
    suites_skipped++;
    return;
  }
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    buf text = BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&text, chunk, n);
    fclose(f);
    json_error err;
    json_doc *doc = json_parse(text.data ? text.data : "", text.len, MAX_JSON_DEPTH, &err);
    bool want = e->d_name[0] == 'y' || (e->d_name[0] == 'i' && accepted_i(e->d_name));
    CHECK((doc != NULL) == want, "%s: %s (%s)", e->d_name, doc ? "accepted" : "rejected", doc ? "" : err.message);
    if (doc) {
      /* What we accept, we can write back and read again to the same value. */
      buf out = BUF_INIT;
      json_write_value(&out, json_doc_root(doc));
      json_doc *again = json_parse(out.data, out.len, MAX_JSON_DEPTH, NULL);
      CHECK(again && json_equal(json_doc_root(doc), json_doc_root(again)), "%s: round trip %s", e->d_name, out.data);
      json_doc_free(again);
      buf_free(&out);
    }
    json_doc_free(doc);
    buf_free(&text);
    files++;
  }
  closedir(d);
  CHECK(files >= 300, "only %d JSONTestSuite files found", files);
}

static const char *write_double(double d) {
  static char out[64];
  buf b = BUF_INIT;
  if (!json_write_double(&b, d)) buf_puts(&b, "(refused)");
  snprintf(out, sizeof out, "%s", b.data);
  buf_free(&b);
  return out;
}

static const char *write_string(const char *s, size_t n) {
  static char out[256];
  buf b = BUF_INIT;
  json_write_string(&b, s, n);
  snprintf(out, sizeof out, "%s", b.data);
  buf_free(&b);
  return out;
}

static void test_writers(void) {
  CHECK_STR(write_double(0.1), "0.1");
  CHECK_STR(write_double(0.1 + 0.2), "0.30000000000000004");
  CHECK_STR(write_double(5.0), "5.0");
  CHECK_STR(write_double(-0.0), "-0.0");
  CHECK_STR(write_double(1e300 * 10), "1e+301");
  CHECK_STR(write_double(5e-324), "4.94065645841247e-324");
  CHECK_STR(write_double(NAN), "(refused)");
  CHECK_STR(write_double(INFINITY), "(refused)");
  CHECK_STR(write_string("a\"b\\c\n\x01", 7), "\"a\\\"b\\\\c\\n\\u0001\"");
  CHECK_STR(write_string("caf\xC3\xA9", 5), "\"caf\xC3\xA9\"");
  CHECK_STR(write_string("caf\xE9!", 5), "\"caf\xEF\xBF\xBD!\"");
  CHECK_STR(write_string("\xED\xA0\x80", 3), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  CHECK_STR(write_string("nul\0x", 5), "\"nul\\u0000x\"");
  buf b = BUF_INIT;
  json_write_integer(&b, INT64_MIN);
  CHECK_STR(b.data, "-9223372036854775808");
  buf_free(&b);
}

static void test_numbers(void) {
  const char *text = "[0,-0,9223372036854775807,-9223372036854775808,9223372036854775808,1.5,1E2,1e-400]";
  json_doc *doc = json_parse(text, strlen(text), MAX_JSON_DEPTH, NULL);
  CHECK(doc != NULL, "parse numbers");
  if (!doc) return;
  const json_value *a = json_doc_root(doc);
  CHECK(a->u.items[0].type == JSON_INTEGER && a->u.items[0].u.integer == 0, "0 is an integer");
  CHECK(a->u.items[1].type == JSON_FLOAT && signbit(a->u.items[1].u.number), "-0 is the float -0.0");
  CHECK(a->u.items[2].type == JSON_INTEGER && a->u.items[2].u.integer == INT64_MAX, "int64 max");
  CHECK(a->u.items[3].type == JSON_INTEGER && a->u.items[3].u.integer == INT64_MIN, "int64 min");
  CHECK(a->u.items[4].type == JSON_FLOAT, "beyond int64 is a float");
  CHECK(a->u.items[5].type == JSON_FLOAT && a->u.items[5].u.number == 1.5, "1.5");
  CHECK(a->u.items[6].type == JSON_FLOAT && a->u.items[6].u.number == 100.0, "1E2 is the float 100");
  CHECK(a->u.items[7].type == JSON_FLOAT && a->u.items[7].u.number == 0.0, "underflow is 0");
  CHECK(a->u.items[2].src_len == 19 && memcmp(text + a->u.items[2].src_off, "9223372036854775807", 19) == 0,
        "source span of a value");
  json_doc_free(doc);
}

static void test_strict(void) {
  static const struct {
    const char *text;
    size_t len;
    const char *why;
  } bad[] = {
      {"{\"a\":1}x", 8, "bytes after the value"},
      {"\"a\0b\"", 5, "raw NUL in a string"},
      {"[1]\0", 4, "NUL after the value"},
      {"[01]", 4, "leading zero"},
      {"[1.]", 4, "1."},
      {"[.5]", 4, ".5"},
      {"[NaN]", 5, "NaN"},
      {"[Infinity]", 10, "Infinity"},
      {"[\"\\uD800\"]", 10, "escaped lone surrogate"},
      {"[\"\xED\xA0\x80\"]", 7, "raw surrogate"},
      {"[\"\xC0\xAF\"]", 6, "overlong"},
      {"[\"a\tb\"]", 7, "raw tab"},
      {"\xEF\xBB\xBF{}", 5, "BOM"},
      {"[1e400]", 7, "overflow"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    json_doc *doc = json_parse(bad[i].text, bad[i].len, MAX_JSON_DEPTH, NULL);
    CHECK(doc == NULL, "accepted %s", bad[i].why);
    json_doc_free(doc);
  }
  char deep[600];
  memset(deep, '[', 300);
  memset(deep + 300, ']', 300);
  json_error err;
  CHECK(json_parse(deep, 256, MAX_JSON_DEPTH, &err) == NULL, "unclosed deep");
  json_doc *ok = json_parse(deep + 300 - MAX_JSON_DEPTH, 2 * MAX_JSON_DEPTH, MAX_JSON_DEPTH, &err);
  CHECK(ok != NULL, "depth %d is allowed: %s", MAX_JSON_DEPTH, err.message);
  json_doc_free(ok);
  CHECK(json_parse(deep + 300 - MAX_JSON_DEPTH - 1, 2 * MAX_JSON_DEPTH + 2, MAX_JSON_DEPTH, &err) == NULL,
        "depth %d is refused", MAX_JSON_DEPTH + 1);
  CHECK(strstr(err.message, "nesting deeper than 128") != NULL, "depth message: %s", err.message);

  const char *dup = "{\"a\":1,\"a\":2}";
  json_doc *doc = json_parse(dup, strlen(dup), MAX_JSON_DEPTH, NULL);
  CHECK(doc && json_object_get(json_doc_root(doc), "a")->u.integer == 2, "last duplicate key wins");
  json_doc_free(doc);

  const char *esc = "\"\\u00e9\\ud83d\\ude00\\u0000\"";
  doc = json_parse(esc, strlen(esc), MAX_JSON_DEPTH, NULL);
  CHECK(doc && json_doc_root(doc)->len == 2 + 4 + 1 &&
            memcmp(json_doc_root(doc)->u.string, "\xC3\xA9\xF0\x9F\x98\x80\0", 7) == 0,
        "escapes decode to UTF-8 (NUL kept)");
  json_doc_free(doc);
}

static void test_equal(void) {
  const char *a = "{\"x\":[1,2.0,{\"y\":null}],\"z\":true}", *b = "{\"z\":true,\"x\":[1.0,2,{\"y\":null}]}";
  json_doc *da = json_parse(a, strlen(a), 8, NULL), *db = json_parse(b, strlen(b), 8, NULL);
  CHECK(da && db && json_equal(json_doc_root(da), json_doc_root(db)), "equal ignores key order and 1 vs 1.0");
  json_doc_free(da);
  json_doc_free(db);
}

static void test_pretty(void) {
  const char *text = "{\"b\":[1.50,\"\\u00e9\",{},[]],\"a\":{\"x\":null,\"y\":true},\"e\":[]}";
  json_doc *doc = json_parse(text, strlen(text), MAX_JSON_DEPTH, NULL);
  CHECK(doc != NULL, "parse for pretty");
  buf b = BUF_INIT;
  json_write_pretty(&b, json_doc_root(doc), text, 0);
  CHECK_STR(b.data, "{\n"
                    "  \"b\": [\n"
                    "    1.50,\n"
                    "    \"\\u00e9\",\n"
                    "    {},\n"
                    "    []\n"
                    "  ],\n"
                    "  \"a\": {\n"
                    "    \"x\": null,\n"
                    "    \"y\": true\n"
                    "  },\n"
                    "  \"e\": []\n"
                    "}");
  buf_clear(&b);
  /* Without the source, scalars are written anew; depth indents a value
   * that sits inside another. */
  json_write_pretty(&b, json_object_get(json_doc_root(doc), "a"), NULL, 1);
  CHECK_STR(b.data, "{\n    \"x\": null,\n    \"y\": true\n  }");
  buf_free(&b);
  json_doc_free(doc);
}

int main(int argc, char **argv) {
  test_suite(argc > 1 ? argv[1] : "../shared/JSONTestSuite/test_parsing");
  test_writers();
  test_numbers();
  test_strict();
  test_equal();
  test_pretty();
  if (suites_skipped) {
    printf("%d passed, %d failed, %d skipped\n", check_passed, check_failed, suites_skipped);
    return check_failed ? 1 : 0;
  }
  return check_report();
}

/*
 * test_schema.c - runs the official JSON Schema Test Suite against
 * schema.c, plus unit checks of messages, coercion and recursion.
 *
 *   gcc -std=c11 -O2 -Wall -Wextra -Iruntime -o /tmp/test_schema \
 *       runtime/tests/test_schema.c runtime/schema.c runtime/regex.c \
 *       runtime/json.c runtime/buf.c -lm
 *   /tmp/test_schema /work/shared/json-schema-test-suite/tests [--optional] [--bench]
 *
 * The suite is read at run time from the directory given (its draft2020-12
 * and draft7 subdirectories); only the required files are run unless
 * --optional is given, which also runs optional/ecmascript-regex.json and
 * optional/non-bmp-regex.json for information (not counted). Prints one
 * line per failure and ends with exactly "N passed, N failed".
 */
#define _DEFAULT_SOURCE /* strdup, clock_gettime and <dirent.h> under -std=c11 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "core/schema.h"

static int passed, failed;
static int skipped_suites; /* drafts whose folder is missing */
static int verbose;

/* Parts of the suite that exercise what we deliberately leave out. The
 * group is NULL for a whole file. */
static const struct skip {
  const char *draft, *file, *group, *reason;
} skips[] = {
    {"draft2020-12", "dynamicRef.json", NULL, "$dynamicRef / $dynamicAnchor scoping is not supported"},
    {"draft2020-12", "unevaluatedProperties.json", NULL, "unevaluatedProperties is not supported"},
    {"draft2020-12", "unevaluatedItems.json", NULL, "unevaluatedItems is not supported"},
    {"draft2020-12", "refRemote.json", NULL, "remote $ref (needs the suite's HTTP remotes)"},
    {"draft2020-12", "vocabulary.json", NULL, "custom metaschemas fetched from a remote $schema"},
    {"draft2020-12", "defs.json", NULL, "validates against the remote 2020-12 metaschema"},
    {"draft2020-12", "ref.json", "remote ref, containing refs itself", "$ref to the remote 2020-12 metaschema"},
    {"draft2020-12", "ref.json", "ref creates new scope when adjacent to keywords",
     "uses unevaluatedProperties"},
    {"draft2020-12", "not.json", "collect annotations inside a 'not', even if collection is disabled",
     "uses unevaluatedProperties"},
    {"draft7", "refRemote.json", NULL, "remote $ref (needs the suite's HTTP remotes)"},
    {"draft7", "definitions.json", NULL, "validates against the remote draft-07 metaschema"},
    {"draft7", "ref.json", "remote ref, containing refs itself", "$ref to the remote draft-07 metaschema"},
};

static const struct skip *find_skip(const char *draft, const char *file, const char *group) {
  for (size_t i = 0; i < sizeof skips / sizeof *skips; i++)
    if (strcmp(skips[i].draft, draft) == 0 && strcmp(skips[i].file, file) == 0 &&
        (!skips[i].group || strcmp(skips[i].group, group) == 0))
      return &skips[i];
  return NULL;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  buf b = BUF_INIT;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&b, chunk, n);
  fclose(f);
  return buf_detach(&b, len);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct counts {
  int passed, failed, skipped;
  int skipped_refused;        /* skipped tests whose schema schema_compile refused */
  int skipped_pass, skipped_fail; /* ... and those it compiled anyway */
} counts;

static schema_report report; /* 18 KB: static, not on the stack */

/* Run one test file; returns false when it could not be read. */
static bool run_file(const char *dir, const char *draft, const char *file, schema_dialect dialect, counts *cn,
                     bool count_it) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s/%s", dir, draft, file);
  size_t len;
  char *text = read_file(path, &len);
  if (!text) return false;
  json_error jerr;
  json_doc *doc = json_parse(text, len, 1000, &jerr);
  if (!doc) {
    printf("FAIL %s/%s: cannot parse: %s\n", draft, file, jerr.message);
    free(text);
    cn->failed++;
    return true;
  }
  const json_value *groups = json_doc_root(doc);
  for (uint32_t g = 0; g < groups->len; g++) {
    const json_value *group = &groups->u.items[g];
    const json_value *desc = json_object_get(group, "description");
    const json_value *tests = json_object_get(group, "tests");
    const char *gname = desc ? desc->u.string : "?";
    bool skipped = count_it && find_skip(draft, file, gname);
    schema_options opts = {dialect};
    schema_error serr;
    schema *s = schema_compile(json_object_get(group, "schema"), &opts, &serr);
    if (skipped) {
      /* Not counted, but worth knowing: are these refused at compile time
       * (good) or compiled and answered (right or wrong)? */
      cn->skipped += (int)tests->len;
      for (uint32_t t = 0; t < tests->len; t++) {
        const json_value *test = &tests->u.items[t];
        bool want = json_object_get(test, "valid")->type == JSON_TRUE;
        if (!s) cn->skipped_refused++;
        else if (schema_validate(s, json_object_get(test, "data"), NULL) == want) cn->skipped_pass++;
        else cn->skipped_fail++;
      }
      schema_free(s);
      continue;
    }
    for (uint32_t t = 0; t < tests->len; t++) {
      const json_value *test = &tests->u.items[t];
      const json_value *tdesc = json_object_get(test, "description");
      bool want = json_object_get(test, "valid")->type == JSON_TRUE;
      const json_value *data = json_object_get(test, "data");
      if (!s) {
        printf("FAIL %s/%s: %s / %s: schema did not compile: %s: %s\n", draft, file, gname, tdesc->u.string,
               serr.pointer, serr.message);
        cn->failed++;
        continue;
      }
      bool got = schema_validate(s, data, &report);
      bool quick = schema_validate(s, data, NULL);
      if (got == want && quick == want && (got || report.count > 0)) {
        cn->passed++;
        if (verbose && !got) {
          buf lines = BUF_INIT;
          schema_report_format(&report, &lines);
          printf("  ok %s / %s:\n    %s\n", gname, tdesc->u.string, lines.data);
          buf_free(&lines);
        }
        continue;
      }
      cn->failed++;
      buf lines = BUF_INIT;
      schema_report_format(&report, &lines);
      printf("FAIL %s/%s: %s / %s: expected %s, got %s%s%s%s\n", draft, file, gname, tdesc->u.string,
             want ? "valid" : "invalid", got ? "valid" : "invalid", quick != got ? " (quiet mode disagrees)" : "",
             lines.len ? ": " : "", lines.len ? lines.data : "");
      buf_free(&lines);
    }
    schema_free(s);
  }
  json_doc_free(doc);
  free(text);
  return true;
}

static void run_draft(const char *dir, const char *draft, schema_dialect dialect) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, draft);
  DIR *d = opendir(path);
  if (!d) {
    /* A fresh clone has no ../shared: the suite is skipped, not failed. */
    printf("%s: skipped, the JSON Schema Test Suite is not at %s\n", draft, path);
    skipped_suites++;
    return;
  }
  char *names[256];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 256) {
    size_t len = strlen(e->d_name);
    if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_str);
  counts cn = {0};
  for (size_t i = 0; i < n; i++) {
    run_file(dir, draft, names[i], dialect, &cn, true);
    free(names[i]);
  }
  printf("%s: %d passed, %d failed, %d skipped\n", draft, cn.passed, cn.failed, cn.skipped);
  printf("  of the skipped: %d refused by schema_compile; %d compiled anyway (%d answered right, %d wrong)\n",
         cn.skipped_refused, cn.skipped_pass + cn.skipped_fail, cn.skipped_pass, cn.skipped_fail);
  for (size_t i = 0; i < sizeof skips / sizeof *skips; i++)
    if (strcmp(skips[i].draft, draft) == 0)
      printf("  skipped %s%s%s%s: %s\n", skips[i].file, skips[i].group ? " \"" : "",
             skips[i].group ? skips[i].group : "", skips[i].group ? "\"" : "", skips[i].reason);
  passed += cn.passed;
  failed += cn.failed;
}

/* ---- Unit checks ----------------------------------------------------- */

static void unit_fail(const char *what, const char *detail) {
  printf("FAIL unit: %s: %s\n", what, detail);
  failed++;
}

static json_doc *parse_or_die(const char *text) {
  json_error jerr;
  json_doc *doc = json_parse(text, strlen(text), 1000, &jerr);
  if (!doc) {
    printf("unit test JSON does not parse: %s: %s\n", jerr.message, text);
    exit(2);
  }
  return doc;
}

/* Compile (freeing the schema document at once, as the runtime will). */
static schema *compile_text(const char *text, schema_error *err) {
  json_doc *doc = parse_or_die(text);
  schema *s = schema_compile(json_doc_root(doc), NULL, err);
  json_doc_free(doc);
  return s;
}

/* Validate instance_text; expect the formatted report to equal want ("" for
 * valid). */
static void expect_report(const char *what, const char *schema_text, const char *instance_text, const char *want) {
  schema_error err;
  schema *s = compile_text(schema_text, &err);
  if (!s) {
    unit_fail(what, err.message);
    return;
  }
  json_doc *doc = parse_or_die(instance_text);
  bool ok = schema_validate(s, json_doc_root(doc), &report);
  buf lines = BUF_INIT;
  buf_append(&lines, "", 0);
  schema_report_format(&report, &lines);
  if (ok != (want[0] == '\0') || strcmp(lines.data, want) != 0) {
    char detail[2048];
    snprintf(detail, sizeof detail, "got \"%s\", want \"%s\"", lines.data, want);
    unit_fail(what, detail);
  } else {
    passed++;
  }
  buf_free(&lines);
  json_doc_free(doc);
  schema_free(s);
}

static void expect_compile_error(const char *what, const char *schema_text, const char *pointer) {
  schema_error err;
  schema *s = compile_text(schema_text, &err);
  if (s) {
    unit_fail(what, "compiled, want an error");
    schema_free(s);
  } else if (strcmp(err.pointer, pointer) != 0 || !err.message[0]) {
    char detail[600];
    snprintf(detail, sizeof detail, "error at \"%s\" (%s), want at \"%s\"", err.pointer, err.message, pointer);
    unit_fail(what, detail);
  } else {
    if (verbose) printf("  ok %s: %s: %s\n", what, err.pointer, err.message);
    passed++;
  }
}

static void expect_coerce(const char *what, const char *schema_text, const char *instance_text, const char *want,
                          bool want_changed) {
  schema_error err;
  schema *s = compile_text(schema_text, &err);
  if (!s) {
    unit_fail(what, err.message);
    return;
  }
  json_doc *doc = parse_or_die(instance_text);
  buf out = BUF_INIT;
  bool changed = schema_coerce(s, json_doc_root(doc), &out);
  if (changed != want_changed || strcmp(out.data, want) != 0) {
    char detail[2048];
    snprintf(detail, sizeof detail, "got %s (changed %d), want %s (changed %d)", out.data, changed, want,
             want_changed);
    unit_fail(what, detail);
  } else {
    passed++;
  }
  buf_free(&out);
  json_doc_free(doc);
  schema_free(s);
}

static const char *tree_schema =
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"number\"},"
    "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
    "\"required\":[\"value\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}";

/* A chain of depth nodes; the innermost value is leaf (JSON text). */
static void deep_tree(buf *b, int depth, const char *leaf) {
  for (int i = 0; i < depth; i++) buf_puts(b, "{\"value\":1,\"children\":[");
  buf_printf(b, "{\"value\":%s}", leaf);
  for (int i = 0; i < depth; i++) buf_puts(b, "]}");
}

static void unit_checks(void) {
  expect_report("type mismatch", "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}",
                "{\"a\":\"5\"}", "/a: expected integer, got string \"5\"");
  expect_report("missing required", "{\"type\":\"object\",\"required\":[\"a\",\"b\"]}", "{\"a\":1}",
                "/: missing required property \"b\"");
  expect_report("pattern", "{\"properties\":{\"name\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}}}",
                "{\"name\":\"Bob1\"}", "/name: does not match pattern ^[a-z]+$, got \"Bob1\"");
  expect_report("maxItems", "{\"properties\":{\"tags\":{\"maxItems\":2}}}", "{\"tags\":[1,2,3]}",
                "/tags: expected at most 2 items, got 3");
  expect_report("additionalProperties",
                "{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"x\":2}",
                "/x: unexpected property (additionalProperties is false)");
  expect_report("nested path", "{\"properties\":{\"items\":{\"items\":{\"properties\":{\"name\":{\"type\":"
                "\"string\"}}}}}}",
                "{\"items\":[{},{},{\"name\":7}]}", "/items/2/name: expected string, got number 7");
  expect_report("long string is cut", "{\"type\":\"integer\"}",
                "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
                "/: expected integer, got string \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...");
  expect_report("enum", "{\"enum\":[\"red\",\"green\"]}", "\"blue\"",
                "/: expected one of \"red\", \"green\", got \"blue\"");
  expect_report("anyOf by type", "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "5",
                "/: expected string or null (anyOf), got number 5");
  expect_report("anyOf closest branch",
                "{\"anyOf\":[{\"properties\":{\"kind\":{\"const\":\"a\"},\"n\":{\"type\":\"string\"}},"
                "\"required\":[\"kind\",\"n\"]},{\"properties\":{\"kind\":{\"const\":\"b\"},\"m\":{\"type\":"
                "\"integer\"}},\"required\":[\"kind\"]}]}",
                "{\"kind\":\"b\",\"m\":\"x\"}",
                "/: matches none of the 2 anyOf alternatives; the closest, #2, fails with:\n"
                "/m: expected integer, got string \"x\"");
  expect_report("oneOf twice", "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "3",
                "/: matches more than one oneOf alternative (#1 and #2), expected exactly one");
  expect_report("propertyNames", "{\"propertyNames\":{\"pattern\":\"^[a-z]+$\"}}", "{\"Abc\":1}",
                "/: property name \"Abc\": does not match pattern ^[a-z]+$, got \"Abc\"");
  expect_report("minimum", "{\"minimum\":1.5}", "1", "/: expected a number >= 1.5, got 1");
  expect_report("draft-07 $ref overrides siblings",
                "{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"definitions\":{\"s\":{\"type\":"
                "\"string\"}},\"properties\":{\"a\":{\"$ref\":\"#/definitions/s\",\"maxLength\":1}}}",
                "{\"a\":\"long\"}", "");
  expect_report("catastrophic pattern is an error, not a hang", "{\"pattern\":\"^(a+)+$\"}",
                "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"",
                "/: value is too expensive to match against pattern ^(a+)+$ (gave up), got "
                "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...");

  expect_report("unknown answer inside not is invalid",
                "{\"not\":{\"pattern\":\"^(a+)+$\"}}",
                "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"",
                "/: a pattern was too expensive to evaluate against this value");

  /* uniqueItems on long arrays goes through hashing: check it agrees
   * with json_equal (1 == 1.0, member order, duplicate keys). */
  {
    static const char *const dupes[] = {"1.0", "{\"b\":2,\"a\":[1,{}]}", "{\"a\":0,\"a\":2}", "[1,[\"x\"]]", "-0.0"};
    static const char *const firsts[] = {"1", "{\"a\":[1.0,{}],\"b\":2}", "{\"a\":2}", "[1.0,[\"x\"]]", "0"};
    for (int d = 0; d < 5; d++) {
      buf b = BUF_INIT;
      buf_putc(&b, '[');
      for (int i = 0; i < 40; i++) buf_printf(&b, "\"s%d\",", i);
      buf_printf(&b, "%s,true,false,null,0.5,", firsts[d]);
      for (int i = 0; i < 40; i++) buf_printf(&b, "{\"k\":%d},", i);
      buf_printf(&b, "%s]", dupes[d]);
      char want[120];
      snprintf(want, sizeof want, "/: expected unique items, but items 40 and 85 are equal");
      expect_report("uniqueItems by hash", "{\"uniqueItems\":true}", b.data, want);
      buf_free(&b);
    }
    buf b = BUF_INIT;
    buf_putc(&b, '[');
    for (int i = 0; i < 200000; i++) buf_printf(&b, "%s%d", i ? "," : "", i);
    buf_puts(&b, ",0.5,\"0\",false,[0],{\"0\":0},{\"0\":1}]");
    clock_t t0 = clock();
    expect_report("uniqueItems, 200000 distinct items", "{\"uniqueItems\":true}", b.data, "");
    double ms = (double)(clock() - t0) * 1000.0 / CLOCKS_PER_SEC;
    if (ms > 1000) unit_fail("uniqueItems speed", "200000 items took over a second");
    buf_free(&b);
  }

  /* What generators emit: zod-to-json-schema (draft-07, $ref beside
   * definitions at the root) and "definitions" in a 2020-12 schema. */
  expect_report("zod-style draft-07 root $ref",
                "{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"$ref\":\"#/definitions/Args\","
                "\"definitions\":{\"Args\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},"
                "\"required\":[\"x\"],\"additionalProperties\":false}}}",
                "{\"y\":1}", "/y: unexpected property (additionalProperties is false)\n/: missing required property \"x\"");
  expect_report("2020-12 $ref into definitions",
                "{\"properties\":{\"a\":{\"$ref\":\"#/definitions/pos\"}},\"definitions\":{\"pos\":{\"minimum\":0}}}",
                "{\"a\":-1}", "/a: expected a number >= 0, got -1");
  {
    /* The keyword path of an error behind a $ref is the target's. */
    schema_error err;
    schema *s = compile_text("{\"properties\":{\"a\":{\"$ref\":\"#/$defs/s\"}},\"$defs\":{\"s\":{\"type\":\"string\"}}}",
                             &err);
    json_doc *doc = parse_or_die("{\"a\":1}");
    schema_validate(s, json_doc_root(doc), &report);
    if (schema_report_count(&report) != 1 || strcmp(schema_report_keyword(&report, 0), "/$defs/s/type") != 0 ||
        strcmp(schema_report_path(&report, 0), "/a") != 0)
      unit_fail("keyword path", report.count ? report.errors[0].keyword : "no error");
    else
      passed++;
    json_doc_free(doc);
    schema_free(s);
  }

  /* JSON form of a report. */
  {
    schema_error err;
    schema *s = compile_text("{\"required\":[\"q\"],\"properties\":{\"n\":{\"type\":\"integer\"}}}", &err);
    json_doc *doc = parse_or_die("{\"n\":\"1\"}");
    schema_validate(s, json_doc_root(doc), &report);
    buf out = BUF_INIT;
    schema_report_write_json(&report, &out);
    const char *want = "[{\"path\":\"/n\",\"message\":\"expected integer, got string \\\"1\\\"\"},"
                       "{\"path\":\"\",\"message\":\"missing required property \\\"q\\\"\"}]";
    if (strcmp(out.data, want) != 0) unit_fail("report JSON", out.data);
    else passed++;
    buf_free(&out);
    json_doc_free(doc);
    schema_free(s);
  }

  /* Compile errors point at the bad part. */
  expect_compile_error("negative minLength", "{\"properties\":{\"a\":{\"minLength\":-1}}}",
                       "/properties/a/minLength");
  expect_compile_error("bad regex", "{\"properties\":{\"a\":{\"pattern\":\"(?<=x)y\"}}}", "/properties/a/pattern");
  expect_compile_error("bad patternProperties regex", "{\"patternProperties\":{\"[z-a]\":{}}}",
                       "/patternProperties/[z-a]");
  expect_compile_error("unresolvable $ref", "{\"items\":{\"$ref\":\"#/$defs/nope\"}}", "/items/$ref");
  expect_compile_error("remote $ref", "{\"$ref\":\"https://example.com/schema.json\"}", "/$ref");
  expect_compile_error("unknown dialect", "{\"$schema\":\"http://json-schema.org/draft-04/schema#\"}", "/$schema");
  expect_compile_error("$dynamicRef", "{\"$dynamicRef\":\"#x\"}", "/$dynamicRef");
  expect_compile_error("unevaluatedProperties", "{\"allOf\":[{\"unevaluatedProperties\":false}]}",
                       "/allOf/0/unevaluatedProperties");
  expect_compile_error("wrong type of keyword value", "{\"required\":\"a\"}", "/required");
  expect_compile_error("unknown type name", "{\"type\":[\"string\",\"text\"]}", "/type/1");
  expect_compile_error("$ref cycle", "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
                       "\"$ref\":\"#/$defs/a\"}", "/$defs/b");
  {
    schema_error err;
    schema *s = compile_text("{\"title\":\"t\",\"x-foo\":{\"bar\":1},\"format\":\"email\",\"default\":3,"
                             "\"examples\":[1],\"$comment\":\"c\",\"deprecated\":true,\"readOnly\":true,"
                             "\"contentMediaType\":\"text/plain\",\"unevaluatedProperties\":true}",
                             &err);
    if (!s) unit_fail("annotations are ignored", err.message);
    else passed++;
    schema_free(s);
  }

  /* Coercion, and that validation alone does not coerce. */
  const char *cschema =
      "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},\"f\":{\"type\":\"number\"},"
      "\"b\":{\"type\":\"boolean\"},\"s\":{\"type\":\"string\"},\"o\":{\"$ref\":\"#/$defs/o\"},"
      "\"a\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
      "\"u\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}},"
      "\"$defs\":{\"o\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}}}}}";
  const char *cinstance =
      "{\"n\":\"5\",\"f\":\"-2.5\",\"b\":\"true\",\"s\":\"7\",\"o\":\"{\\\"x\\\":\\\"1e3\\\"}\","
      "\"a\":\"[1,\\\"2\\\"]\",\"u\":\"3\"}";
  expect_coerce("coercion", cschema, cinstance,
                "{\"n\":5,\"f\":-2.5,\"b\":true,\"s\":\"7\",\"o\":{\"x\":1000.0},\"a\":[1,2],\"u\":3}", true);
  expect_report("coercion off", cschema, "{\"n\":\"5\"}", "/n: expected integer, got string \"5\"");
  expect_coerce("no coercion of a fraction to integer", cschema, "{\"n\":\"5.5\",\"b\":\"yes\"}",
                "{\"n\":\"5.5\",\"b\":\"yes\"}", false);
  expect_coerce("integer text with exponent", cschema, "{\"n\":\"1e3\"}", "{\"n\":1000}", true);
  expect_coerce("nothing to do", cschema, "{\"n\":5,\"s\":\"x\"}", "{\"n\":5,\"s\":\"x\"}", false);
  expect_coerce("ambiguous anyOf is left alone",
                "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "\"5\"", "\"5\"", false);

  /* A recursive schema against a deep instance (100 levels; the runtime's
   * JSON parser allows 128). */
  {
    buf b = BUF_INIT;
    deep_tree(&b, 60, "2");
    expect_report("deep recursive instance", tree_schema, b.data, "");
    buf_clear(&b);
    deep_tree(&b, 3, "\"x\"");
    expect_report("deep recursive error path", tree_schema, b.data,
                  "/children/0/children/0/children/0/value: expected number, got string \"x\"");
    buf_free(&b);
  }
}

/* ns per validation of a valid 10-property flat object. */
static void bench(void) {
  const char *schema_text =
      "{\"type\":\"object\",\"properties\":{"
      "\"name\":{\"type\":\"string\",\"minLength\":1},\"age\":{\"type\":\"integer\",\"minimum\":0},"
      "\"email\":{\"type\":\"string\"},\"active\":{\"type\":\"boolean\"},\"score\":{\"type\":\"number\"},"
      "\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\",\"maxLength\":10},"
      "\"count\":{\"type\":\"integer\"},\"ratio\":{\"type\":\"number\",\"maximum\":1},"
      "\"mode\":{\"enum\":[\"fast\",\"slow\"]}},"
      "\"required\":[\"name\",\"age\",\"email\"],\"additionalProperties\":false}";
  const char *instance_text =
      "{\"name\":\"Ada\",\"age\":36,\"email\":\"ada@example.com\",\"active\":true,\"score\":9.5,"
      "\"city\":\"London\",\"zip\":\"N1\",\"count\":3,\"ratio\":0.5,\"mode\":\"fast\"}";
  schema_error err;
  schema *s = compile_text(schema_text, &err);
  json_doc *doc = parse_or_die(instance_text);
  const json_value *v = json_doc_root(doc);
  int iterations = 1000000;
  struct timespec t0, t1;
  int valid = 0;
  for (int pass = 0; pass < 2; pass++) {
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iterations; i++) valid += schema_validate(s, v, pass ? &report : NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / iterations;
    printf("bench: 10-property object, %s: %.0f ns per validation\n", pass ? "with report" : "no report", ns);
  }
  if (valid != 2 * iterations) printf("FAIL bench instance did not validate\n");
  json_doc_free(doc);
  schema_free(s);
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  bool optional = false, want_bench = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--optional") == 0) optional = true;
    else if (strcmp(argv[i], "--bench") == 0) want_bench = true;
    else if (strcmp(argv[i], "-v") == 0) verbose = 1;
    else dir = argv[i];
  }
  if (!dir) {
    fprintf(stderr, "usage: %s SUITE/tests [--optional] [--bench] [-v]\n", argv[0]);
    return 2;
  }
  run_draft(dir, "draft2020-12", SCHEMA_DRAFT_2020_12);
  run_draft(dir, "draft7", SCHEMA_DRAFT_07);
  int before_pass = passed, before_fail = failed;
  unit_checks();
  printf("unit: %d passed, %d failed\n", passed - before_pass, failed - before_fail);
  if (optional) {
    static const char *const files[] = {"optional/ecmascript-regex.json", "optional/non-bmp-regex.json",
                                        "optional/bignum.json", "optional/float-overflow.json"};
    for (int d = 0; d < 2; d++) {
      const char *draft = d ? "draft7" : "draft2020-12";
      counts cn = {0};
      for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        run_file(dir, draft, files[i], d ? SCHEMA_DRAFT_07 : SCHEMA_DRAFT_2020_12, &cn, false);
      printf("%s optional (not counted): %d passed, %d failed\n", draft, cn.passed, cn.failed);
    }
  }
  if (want_bench) bench();
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped_suites);
  return failed ? 1 : 0;
}

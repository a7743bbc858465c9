/* fuzz_schema.c - libFuzzer target: JSON Schema compile, validate and
 * coerce. Input: schema JSON, NUL, instance JSON. Validation with and
 * without a report must agree; coercion must write valid JSON. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "core/json.h"
#include "core/schema.h"
static schema_report report;
/* Input: schema JSON \0 instance JSON */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  if (!nul) return 0;
  size_t slen = (size_t)(nul - data);
  json_doc *sd = json_parse((const char *)data, slen, 64, NULL);
  if (!sd) return 0;
  schema_error err;
  schema *s = schema_compile(json_doc_root(sd), NULL, &err);
  json_doc_free(sd);
  if (!s) return 0;
  json_doc *id = json_parse((const char *)nul + 1, size - slen - 1, 64, NULL);
  if (id) {
    bool a = schema_validate(s, json_doc_root(id), &report);
    bool b = schema_validate(s, json_doc_root(id), NULL);
    if (a != b) __builtin_trap();
    if (!a && report.count == 0) __builtin_trap();
    buf out = BUF_INIT;
    schema_report_format(&report, &out);
    buf_clear(&out);
    schema_coerce(s, json_doc_root(id), &out);
    json_doc *cd = json_parse(out.data, out.len, 1000, NULL);
    if (!cd) __builtin_trap();
    json_doc_free(cd);
    buf_free(&out);
    json_doc_free(id);
  }
  schema_free(s);
  return 0;
}

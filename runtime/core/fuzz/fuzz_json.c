/* fuzz_json.c - libFuzzer target: the strict JSON parser and writer.
 * Whatever parses must write back to text that parses to an equal value;
 * a string written with invalid UTF-8 must still come out valid. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/luamcp_limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_error err;
  json_doc *doc = json_parse((const char *)data, size, MAX_JSON_DEPTH, &err);
  if (doc) {
    buf out = BUF_INIT;
    json_write_value(&out, json_doc_root(doc));
    json_doc *again = json_parse(out.data, out.len, MAX_JSON_DEPTH, NULL);
    if (!again || !json_equal(json_doc_root(doc), json_doc_root(again))) __builtin_trap();
    json_doc_free(again);
    buf_free(&out);
    json_doc_free(doc);
  } else if (err.offset > size) {
    __builtin_trap();
  }
  /* Any bytes as a string: the writer must produce valid JSON. */
  buf s = BUF_INIT;
  json_write_string(&s, (const char *)data, size);
  json_doc *str = json_parse(s.data, s.len, 1, NULL);
  if (!str || json_doc_root(str)->type != JSON_STRING) __builtin_trap();
  json_doc_free(str);
  buf_free(&s);
  return 0;
}

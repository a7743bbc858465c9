/* fuzz_regex.c - libFuzzer target: the ECMA-262 regex engine. Input:
 * pattern, NUL, subject. Must never crash or run past its step budget. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "core/regex.h"
/* Input: pattern \0 subject */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t plen = nul ? (size_t)(nul - data) : size;
  char err[128];
  regex *re = regex_compile((const char *)data, plen, err, sizeof err);
  if (re) {
    const char *s = nul ? (const char *)nul + 1 : "";
    size_t slen = nul ? size - plen - 1 : 0;
    regex_search(re, s, slen);
    regex_free(re);
  }
  return 0;
}

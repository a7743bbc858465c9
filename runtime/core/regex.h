/*
 * regex.h - a small ECMA-262 regular expression engine for JSON Schema.
 *
 * JSON Schema's "pattern" and "patternProperties" use ECMA-262 syntax with
 * the "u" flag (Unicode mode) and an unanchored search. This engine covers
 * that dialect without a library: literals, ".", classes with ranges and
 * negation, \d \D \w \W \s \S \b \B, control and hex escapes, \u{...},
 * \p{...} for the general categories L Lu Ll N Nd P S Z (plus Any, ASCII),
 * anchors, capturing, non-capturing and named groups, lookahead, greedy and
 * lazy quantifiers, and backreferences. Lookbehind, flags and the other
 * Unicode properties are refused at compile time rather than misread.
 *
 * Input is UTF-8 and matched by code point. Matching is backtracking with a
 * step budget, so a pathological pattern such as ^(a+)+$ fails with -1
 * instead of hanging the server.
 *
 * The engine needs neither Lua nor the JSON tree, so it can be fuzzed alone.
 */
#ifndef LUAMCP_REGEX_H
#define LUAMCP_REGEX_H

#include <stddef.h>

/* Steps (VM instructions plus characters scanned by simple loops) that one
 * regex_search may take before it gives up and returns -1: a fixed amount
 * plus some per input byte, so a linear pattern never gives up on a long
 * string while an exponential one stops within milliseconds. */
#define REGEX_STEP_BUDGET 1000000
#define REGEX_STEPS_PER_BYTE 16

/* A compiled pattern. Owner: the caller of regex_compile, who releases it
 * with regex_free. Read-only after compilation, so one regex may be used by
 * many searches (even concurrently). */
typedef struct regex regex;

/* Compile len bytes of UTF-8 pattern text. On failure returns NULL and
 * writes a one-line reason (e.g. "lookbehind is not supported at offset 3")
 * into err (errlen bytes, may be 0). */
regex *regex_compile(const char *pattern, size_t len, char *err, size_t errlen);

/* Unanchored search of len bytes of UTF-8. Returns 1 when the pattern
 * matches somewhere, 0 when it does not, and -1 when the step budget ran
 * out (or memory for the backtracking stack did), so the answer is unknown. */
int regex_search(const regex *re, const char *s, size_t len);

void regex_free(regex *re);

#endif

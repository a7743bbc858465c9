/*
 * test_regex.c - unit checks for the ECMA-262 regex engine (regex.c).
 *
 * Build and run:
 *   gcc -std=c11 -O2 -Wall -Wextra -Iruntime -o /tmp/test_regex \
 *       runtime/tests/test_regex.c runtime/regex.c && /tmp/test_regex
 * Prints one line per failure and a final "N passed, N failed".
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/regex.h"

static int passed, failed;

/* Expect regex_search(pattern, subject) == want (1, 0 or -1). */
static void check(const char *pattern, const char *subject, int want) {
  char err[128];
  regex *re = regex_compile(pattern, strlen(pattern), err, sizeof err);
  if (!re) {
    printf("FAIL /%s/: did not compile: %s\n", pattern, err);
    failed++;
    return;
  }
  int got = regex_search(re, subject, strlen(subject));
  if (got == want) {
    passed++;
  } else {
    printf("FAIL /%s/ on \"%s\": got %d, want %d\n", pattern, subject, got, want);
    failed++;
  }
  regex_free(re);
}

/* Expect the pattern to be refused at compile time. */
static void refuse(const char *pattern) {
  char err[128];
  regex *re = regex_compile(pattern, strlen(pattern), err, sizeof err);
  if (re) {
    printf("FAIL /%s/: compiled, want a compile error\n", pattern);
    failed++;
    regex_free(re);
  } else if (!err[0]) {
    printf("FAIL /%s/: refused without a message\n", pattern);
    failed++;
  } else {
    passed++;
  }
}

int main(void) {
  /* Literals, search semantics, anchors. */
  check("abc", "xxabcxx", 1);
  check("abc", "ab", 0);
  check("^abc$", "abc", 1);
  check("^abc$", "abc\n", 0); /* $ does not match before a final newline */
  check("^a*$", "aaa", 1);
  check("^a*$", "abc", 0);
  check("a+", "xxaayy", 1);
  check("", "", 1);
  check("^$", "", 1);
  check("^$", "x", 0);
  /* Classes and escapes. */
  check("^[a-z]+$", "hello", 1);
  check("^[a-z]+$", "Hello", 0);
  check("^[^a-z]+$", "ABC123", 1);
  check("^[\\d\\-]+$", "12-34", 1);
  check("^[\\w.-]+@[\\w-]+\\.[a-z]{2,}$", "john.doe@example.com", 1);
  check("^[\\w.-]+@[\\w-]+\\.[a-z]{2,}$", "john.doe@example.c", 0);
  check("^\\d{3}-\\d{4}$", "555-1234", 1);
  check("^\\d$", "\xd9\xa0", 0); /* ARABIC-INDIC DIGIT ZERO is not \d */
  check("^\\D$", "\xd9\xa0", 1);
  check("^\\w$", "\xc3\xa9", 0);
  check("^\\W$", "\xc3\xa9", 1);
  check("^\\s$", "\xe2\x80\x80", 1); /* U+2000 EN QUAD */
  check("^\\s$", "\xef\xbb\xbf", 1); /* U+FEFF */
  check("^\\S$", " ", 0);
  check("^\\t$", "\t", 1);
  check("^\\cC$", "\x03", 1);
  check("^\\cc$", "\x03", 1);
  check("^\\x41\\u0042\\u{43}$", "ABC", 1);
  check("^\\uD83D\\uDCA9$", "\xf0\x9f\x92\xa9", 1); /* surrogate pair escape */
  check("^\\u{1F4A9}$", "\xf0\x9f\x92\xa9", 1);
  check("^.$", "\xf0\x9f\x92\xa9", 1); /* "." is one code point */
  check("^..$", "\xf0\x9f\x92\xa9", 0);
  check("^.$", "\n", 0);
  check("^[^]$", "\n", 1);
  check("^[]$", "a", 0);
  check("^[\\b]$", "\b", 1);
  check("a\\b", "a b", 1);
  check("a\\b", "ab", 0);
  check("a\\B", "ab", 1);
  check("^\\p{Letter}+$", "Hello\xcf\x80", 1);
  check("^\\p{L}+$", "123", 0);
  check("^\\P{L}+$", "123", 1);
  check("^\\p{Lu}", "Abc", 1);
  check("^\\p{Lu}", "abc", 0);
  check("^[\\p{Ll}\\d]+$", "abc123", 1);
  check("^\\p{digit}+$", "\xd9\xa0\xd9\xa1", 1);
  check("^\\p{gc=Nd}$", "7", 1);
  check("^[\\-]$", "-", 1);
  check("^\\/\\-\\\"$", "/-\"", 1); /* identity escapes of punctuation */
  check("a{2}", "xaay", 1);
  check("a{2}", "a{2}", 0);
  check("^x{$", "x{", 1);     /* a brace that cannot be a quantifier is literal */
  check("^}]$", "}]", 1);
  /* Alternation and groups. */
  check("^(cat|dog)s?$", "dogs", 1);
  check("^(cat|dog)s?$", "cow", 0);
  check("^(?:ab)+$", "ababab", 1);
  check("^(?:ab)+$", "ababa", 0);
  check("^(a|ab)(c|bcd)(d*)$", "abcd", 1);
  /* Quantifiers. */
  check("^a{2,3}$", "a", 0);
  check("^a{2,3}$", "aa", 1);
  check("^a{2,3}$", "aaaa", 0);
  check("^(?:ab){2,3}$", "ababab", 1);
  check("^(?:ab){2,3}$", "abababab", 0);
  check("^(?:a|b){3,}$", "abab", 1);
  check("^(?:a|b){3,}$", "ab", 0);
  check("^a*?b$", "aaab", 1);
  check("^(?:a|ab)*?c$", "ababac", 1);
  check("^(a*)*$", "aaaa", 1);     /* empty iterations terminate */
  check("^(a*)*b$", "aaaa", 0);
  check("^(?:a?){3}b$", "aab", 1);
  check("^(?:x*){2,5}y$", "xxxy", 1);
  check("^[a-z]{1,63}(?:\\.[a-z]{1,63})*$", "www.example.com", 1);
  /* Lookahead. */
  check("^(?=.*\\d)(?=.*[a-z]).{8,}$", "passw0rdx", 1);
  check("^(?=.*\\d)(?=.*[a-z]).{8,}$", "password", 0);
  check("^(?!foo).*$", "foobar", 0);
  check("^(?!foo).*$", "barfoo", 1);
  check("^(?=(a+))a*b\\1$", "baaabac", 0);
  check("(?=(a+))a*b\\1", "baaabac", 1); /* ECMA-262 example: matches "aba" */
  /* Backreferences. */
  check("^(\\w)\\1$", "aa", 1);
  check("^(\\w)\\1$", "ab", 0);
  check("^(?<q>['\"]).*\\k<q>$", "'hi'", 1);
  check("^(?<q>['\"]).*\\k<q>$", "'hi\"", 0);
  check("^(a)|\\1b$", "b", 1); /* a backreference to an unset group is empty */
  check("^(?:(a)|b)\\1$", "b", 1);
  check("^(?:(a)|b)+\\1$", "ab", 1); /* captures reset per iteration */
  /* Non-ASCII literals. */
  check("^caf\xc3\xa9$", "caf\xc3\xa9", 1);
  check("^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\xa8", 1);

  /* Refused syntax. */
  refuse("(?<=a)b");
  refuse("(?<!a)b");
  refuse("(?i)abc");
  refuse("a**");
  refuse("*a");
  refuse("a{3,2}");
  refuse("(abc");
  refuse("abc)");
  refuse("[abc");
  refuse("\\a");
  refuse("\\z");
  refuse("\\2(a)");
  refuse("\\p{Script=Greek}");
  refuse("\\p{Foo}");
  refuse("[z-a]");
  refuse("[\\d-z]");
  refuse("(?=a)*");
  refuse("\\01");
  refuse("\\k<nope>(?<yes>a)");
  refuse("\\");

  /* Catastrophic backtracking stops at the budget instead of hanging. */
  {
    char subject[64];
    memset(subject, 'a', 40);
    subject[40] = 'b';
    subject[41] = '\0';
    clock_t t0 = clock();
    check("^(a+)+$", subject, -1);
    check("^(a|aa)+$", subject, -1);
    double ms = (double)(clock() - t0) * 1000.0 / CLOCKS_PER_SEC;
    if (ms > 2000) {
      printf("FAIL budget took %.0f ms\n", ms);
      failed++;
    }
  }
  /* A long subject with a simple loop uses no deep stack. */
  {
    static char big[200001];
    memset(big, 'x', 200000);
    check("^x+$", big, 1);
    check("^x*?$", big, 1);
    check("^[a-z]*y", big, 0);
  }

  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

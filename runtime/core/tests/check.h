/*
 * check.h - the few lines of test harness the C unit tests share. Each test
 * program ends by printing "N passed, N failed" and exits non-zero on any
 * failure, like every other suite (spec/run-all.sh sums the lines).
 */
#ifndef LUAMCP_CHECK_H
#define LUAMCP_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (cond) {                                                           \
      check_passed++;                                                     \
    } else {                                                              \
      check_failed++;                                                     \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                         \
      printf(__VA_ARGS__);                                                \
      printf("\n");                                                       \
    }                                                                     \
  } while (0)

#define CHECK_STR(got, want)                                                       \
  do {                                                                             \
    const char *got_ = (got), *want_ = (want);                                     \
    CHECK(got_ && strcmp(got_, want_) == 0, "got  %s\n     want %s", got_ ? got_ : "(null)", want_); \
  } while (0)

static int check_report(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif

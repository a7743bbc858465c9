/*
 * test_trace.c - unit checks for W3C Trace Context (trace.c): traceparent
 * read strictly (the specification's own examples and its invalid cases),
 * tracestate's grammar and bounds, writing, and new ids.
 *
 * Build and run:
 *   make build/tests/test_trace && build/tests/test_trace
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/trace.h"

static const char GOOD[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

static bool parses(const char *s) {
  trace_context c;
  return trace_parse_traceparent(s, strlen(s), &c);
}

static void test_traceparent(void) {
  trace_context c;
  memset(&c, 0xaa, sizeof c);
  CHECK(trace_parse_traceparent(GOOD, strlen(GOOD), &c), "the specification's example parses");
  char hex[TRACE_ID_HEX + 1];
  trace_hex(c.trace_id, TRACE_ID_BYTES, hex);
  CHECK_STR(hex, "4bf92f3577b34da6a3ce929d0e0e4736");
  trace_hex(c.span_id, TRACE_SPAN_ID_BYTES, hex);
  CHECK_STR(hex, "00f067aa0ba902b7");
  CHECK(c.flags == 1, "flags %d", c.flags);
  CHECK(c.tracestate[0] == '\0', "tracestate cleared");
  char out[TRACEPARENT_LEN + 1];
  trace_format_traceparent(&c, out);
  CHECK_STR(out, GOOD);
  CHECK(strlen(out) == TRACEPARENT_LEN, "55 bytes");

  CHECK(parses("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"), "not sampled");
  CHECK(parses("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"), "unknown flags are kept");
  /* A later version: 00's fields first, more after a dash. */
  CHECK(parses("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "version 01");
  CHECK(parses("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"),
        "a future version with more fields");
  CHECK(!parses("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what"), "future: no dash after flags");

  static const char *bad[] = {
      "",
      "00",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* version ff is invalid */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", /* version 00 is exactly 55 */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  /* all-zero trace id */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  /* all-zero span id */
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  /* upper case */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
      "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* wrong separators */
      "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
      "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",  /* fields of the wrong length */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701",
      "00-4bf92f3577b34da6a3ce929d0e0e47 6-00f067aa0ba902b7-01",
      " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bg-01",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(!parses(bad[i]), "refused: \"%s\"", bad[i]);
  CHECK(!trace_parse_traceparent(NULL, 0, &c), "NULL refused");

  /* A NUL inside is refused, and the length is what counts, not a NUL. */
  char with_nul[TRACEPARENT_LEN + 1];
  memcpy(with_nul, GOOD, sizeof with_nul);
  with_nul[20] = '\0';
  CHECK(!trace_parse_traceparent(with_nul, TRACEPARENT_LEN, &c), "a NUL inside is refused");
  char longer[80];
  snprintf(longer, sizeof longer, "%sXYZ", GOOD);
  CHECK(trace_parse_traceparent(longer, TRACEPARENT_LEN, &c), "only len bytes are read");

  /* A refused value leaves out untouched. */
  memset(&c, 0x55, sizeof c);
  trace_parse_traceparent(bad[5], strlen(bad[5]), &c);
  CHECK(c.trace_id[0] == 0x55 && c.flags == 0x55, "out untouched on refusal");
}

static bool ts_valid(const char *s) { return trace_tracestate_valid(s, strlen(s)); }

static void test_tracestate(void) {
  CHECK(ts_valid(""), "empty");
  CHECK(ts_valid("congo=t61rcWkgMzE"), "one member");
  CHECK(ts_valid("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"), "two members");
  CHECK(ts_valid("rojo=00f067aa0ba902b7 ,\t congo=t61rcWkgMzE"), "spaces and tabs around commas");
  CHECK(ts_valid("a=1,,b=2"), "an empty member");
  CHECK(ts_valid("tenant1@vendor=x"), "a multi-tenant key");
  CHECK(ts_valid("0tenant@vendor=x"), "a tenant id may start with a digit");
  CHECK(ts_valid("a_-*/z9=val ue"), "key and value characters");
  CHECK(!ts_valid("Rojo=1"), "upper case key");
  CHECK(!ts_valid("9abc=1"), "simple key starting with a digit");
  CHECK(!ts_valid("rojo"), "no =");
  CHECK(!ts_valid("rojo="), "empty value");
  CHECK(!ts_valid("rojo=a,b"), "second member has no =");
  CHECK(!ts_valid("rojo=a=b"), "= in the value");
  CHECK(ts_valid("rojo=a b"), "a space inside a value");
  CHECK(!ts_valid("ro jo=ab"), "a space inside a key");
  CHECK(!ts_valid("rojo=a\x7f"), "DEL in the value");
  CHECK(!ts_valid("t@9vendor=x"), "system id starting with a digit");
  CHECK(!ts_valid("t@vendorvendorvendor=x"), "system id over 14");
  CHECK(!ts_valid("@vendor=x"), "empty tenant");

  /* 32 members pass, 33 do not. */
  char list[1024] = "";
  for (int i = 0; i < TRACESTATE_MAX_MEMBERS; i++) {
    char m[16];
    snprintf(m, sizeof m, "%sk%d=v", i ? "," : "", i);
    strcat(list, m);
  }
  CHECK(ts_valid(list), "32 members");
  strcat(list, ",k99=v");
  CHECK(!ts_valid(list), "33 members");

  /* Bounded in bytes. */
  char big[TRACESTATE_MAX_BYTES + 2];
  memset(big, 'v', sizeof big);
  memcpy(big, "k=", 2);
  CHECK(!trace_tracestate_valid(big, TRACESTATE_MAX_BYTES + 1), "over the byte limit");

  trace_context c;
  CHECK(trace_set_tracestate(&c, "rojo=1", 6), "kept");
  CHECK_STR(c.tracestate, "rojo=1");
  CHECK(!trace_set_tracestate(&c, "Rojo=1", 6), "dropped");
  CHECK_STR(c.tracestate, "");
  char nul[] = "a=1\0b=2";
  CHECK(!trace_tracestate_valid(nul, sizeof nul - 1), "a NUL inside");
}

static void test_new_ids(void) {
  uint8_t a[TRACE_ID_BYTES], b[TRACE_ID_BYTES], s1[TRACE_SPAN_ID_BYTES], s2[TRACE_SPAN_ID_BYTES];
  CHECK(trace_new_trace_id(a) && trace_new_trace_id(b), "trace ids");
  CHECK(memcmp(a, b, sizeof a) != 0, "two trace ids differ");
  CHECK(trace_new_span_id(s1) && trace_new_span_id(s2), "span ids");
  CHECK(memcmp(s1, s2, sizeof s1) != 0, "two span ids differ");
  /* A new context written and read back. */
  trace_context c = {.flags = TRACE_FLAG_SAMPLED}, back;
  memcpy(c.trace_id, a, sizeof a);
  memcpy(c.span_id, s1, sizeof s1);
  char out[TRACEPARENT_LEN + 1];
  trace_format_traceparent(&c, out);
  CHECK(trace_parse_traceparent(out, strlen(out), &back), "round trip: %s", out);
  CHECK(memcmp(back.trace_id, a, sizeof a) == 0 && memcmp(back.span_id, s1, sizeof s1) == 0 && back.flags == 1,
        "round trip keeps the ids");
}

static void redacts(const char *url, const char *want) {
  buf out = BUF_INIT;
  trace_redact_url(url, &out);
  buf_putc(&out, '\0');
  CHECK(strcmp(out.data, want) == 0, "redact %s: got %s, want %s", url, out.data, want);
  buf_free(&out);
}

static void test_redact_url(void) {
  redacts("https://example.com/a?b=c#d", "https://example.com/a?b=c#d");
  redacts("https://user:pass@example.com/a", "https://REDACTED:REDACTED@example.com/a");
  redacts("http://token@h:8080", "http://REDACTED:REDACTED@h:8080");
  redacts("http://a:b@c@h/p?x=1", "http://REDACTED:REDACTED@h/p?x=1");
  redacts("http://h/p@q", "http://h/p@q");
  redacts("http://h/p?u=http://a:b@c", "http://h/p?u=http://a:b@c");
  redacts("https://h/o?X-Goog-Signature=abc&x=1&sig=s&Signature=&AWSAccessKeyId=k#sig=f",
          "https://h/o?X-Goog-Signature=REDACTED&x=1&sig=REDACTED&Signature=REDACTED&AWSAccessKeyId=REDACTED#sig=f");
  redacts("https://h/o?signature=abc&sig", "https://h/o?signature=abc&sig");
  redacts("", "");
}

int main(void) {
  test_traceparent();
  test_redact_url();
  test_tracestate();
  test_new_ids();
  return check_report();
}

/*
 * test_seams_windows.c - the Windows seams checked on their own, under
 * wine (runtime/os/tests/seams_windows.sh builds and runs it): BCrypt's
 * hashes and public-key signatures against published vectors, the executable's path, a DLL and its
 * symbols, no confinement, the watchdog's interruption of a busy main
 * thread, a child killed through its Job object, and a console event
 * reaching the loop. Prints one line per check and "N passed, N failed".
 *
 *   test_seams_windows.exe              every check but the console event
 *   test_seams_windows.exe wait-signal  ... then waits (15 s at most) for
 *                                       Ctrl+C or Ctrl+Break (under wine:
 *                                       SIGINT to the process)
 *   test_seams_windows.exe sleep        (the child the proc check kills)
 */
#include "os/confine.h"
#include "os/crypto.h"
#include "os/dynlib.h"
#include "os/interrupt.h"
#include "os/proc.h"
#include "os/self.h"
#include "os/signals.h"
#include "os/terminal.h"

#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

static void check(bool ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (ok) passed++;
  else failed++;
}

static bool digest_is(const uint8_t md[OS_SHA256_BYTES], const char *want) {
  char hex[2 * OS_SHA256_BYTES + 1];
  for (int i = 0; i < OS_SHA256_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return strcmp(hex, want) == 0;
}

static void check_crypto(void) {
  uint8_t md[OS_SHA256_BYTES];
  os_sha256("abc", 3, md); /* FIPS 180-2 */
  check(digest_is(md, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256(abc)");
  os_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, md); /* RFC 4231, test case 2 */
  check(digest_is(md, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"), "hmac-sha256 (RFC 4231 #2)");
  uint8_t a[32] = {0}, b[32] = {0};
  check(os_random_bytes(a, sizeof a) && os_random_bytes(b, sizeof b) && memcmp(a, b, sizeof a) != 0,
        "random bytes, different each time");
  check(os_equal_secret("abc", "abc", 3) && !os_equal_secret("abc", "abd", 3), "equal_secret");
}

/* base64url text to bytes (the vectors are written as JWS writes them). */
static size_t unb64url(const char *s, uint8_t *out) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t n = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (; *s; s++) {
    acc = acc << 6 | (uint32_t)(strchr(alphabet, *s) - alphabet);
    if ((bits += 6) >= 8) out[n++] = (uint8_t)(acc >> (bits -= 8));
  }
  return n;
}

/* RFC 7515 A.2 (RS256) and A.3 (ES256); a PS256 signature made with
 * `openssl dgst -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32
 * -sigopt rsa_mgf1_md:sha256` (test_jwt.c checks it with libcrypto too). */
static const char RS256_N[] =
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-"
    "pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2Cap"
    "Hg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4"
    "FRWyuXpoQ";
static const char RS256_INPUT[] =
    "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
static const char RS256_SIG[] =
    "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1"
    "dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jz"
    "DwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe"
    "77Rw";
static const char ES256_X[] = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
static const char ES256_Y[] = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
static const char ES256_INPUT[] =
    "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
static const char ES256_SIG[] = "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
static const char PS256_N[] =
    "p99byMCk5Tq0e5vTrHNzvia-yAurMpt-5C3rhRPU4ToY3YhZD-6lPlOYnviRi--ErOLbe2IaRmk5KHap8FYEYlPCBOR9oX7xqDGW0WgDNy5FZJPef"
    "fTtennrd5TvoPocqclYwjWerMDgwBhIGAfABKpZUIhcCBXfgBDrkKuqAMfr22Obx_D8PI4Qw8rJjoOQHHYCtSqiCNnMLkp3lmLfpFFSXRIgvNWwT"
    "2KSJvQjKvomzbZsMiYwjy5cIMQcDblwzVObOyfgVbMrSncXoJlANVO94vYH1xYVplTJq1byLHy6EBOIxIPelXQnXO1DaDs421svVZ_eIJcmhKQGDs"
    "u1fQ";
static const char PS256_INPUT[] = "eyJhbGciOiJQUzI1NiJ9.eyJzdWIiOiJwcyJ9";
static const char PS256_SIG[] =
    "i6CJg1cvblaz5eHh74DSZZ9NPK-M3mzXm8v-Rtv92ZrRGzcj6G-NpRlw9SCIyNOfW_JB0O9W0TVwlmnqfd9_pqea-thnG9x9EaNKz-2SRI9f7r1je"
    "LukbV9WIkB55lrEi0ugdH4wihidvEZN7WcfALbQxIHATuMaPeC3COk5PDeD5f0Vc5CGEJaqNopYELrjk8eP8c13DF0lFq0bEPGGMhkdowR21yAtO"
    "sV-VXLpQQDcRXFVmQDJY1jSEiYSM8SdnMDc1nHTF-UuhDvtWVc2h7l8eNCVMJ-oWCgAYxEF0yi55nDRUyS_36wnWjirkJol1pqqdHLxY-aHaolaU"
    "LZ1gQ";
static const char ED25519_X[] = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

/* Does the key made of a (and b) verify sig over input as alg? tamper: the
 * signature's byte at that index flipped first (-1: none). */
static bool vector_verifies(const char *kty, const char *crv, const char *a, const char *b, os_sig_alg alg,
                            const char *input, const char *sig, int tamper) {
  uint8_t ab[512], bb[512], sb[512];
  size_t a_len = unb64url(a, ab), b_len = b ? unb64url(b, bb) : 0, s_len = unb64url(sig, sb);
  char why[160];
  os_pubkey *key = os_pubkey_import(kty, crv, ab, a_len, bb, b_len, why, sizeof why);
  if (!key) {
    printf("     import: %s\n", why);
    return false;
  }
  if (tamper >= 0) sb[tamper] ^= 1;
  bool ok = os_pubkey_verify(key, alg, input, strlen(input), sb, s_len);
  os_pubkey_free(key);
  return ok;
}

static void check_pubkeys(void) {
  static const uint8_t e[] = {1, 0, 1};
  check(vector_verifies("RSA", NULL, RS256_N, "AQAB", OS_SIG_RS256, RS256_INPUT, RS256_SIG, -1),
        "RS256 verifies (RFC 7515 A.2)");
  check(!vector_verifies("RSA", NULL, RS256_N, "AQAB", OS_SIG_RS256, RS256_INPUT, RS256_SIG, 40),
        "RS256: a changed signature fails");
  check(!vector_verifies("RSA", NULL, RS256_N, "AQAB", OS_SIG_PS256, RS256_INPUT, RS256_SIG, -1),
        "RS256's signature is not a PS256 one");
  check(vector_verifies("RSA", NULL, PS256_N, "AQAB", OS_SIG_PS256, PS256_INPUT, PS256_SIG, -1),
        "PS256 verifies (PSS, MGF1 SHA-256, salt 32)");
  check(!vector_verifies("RSA", NULL, PS256_N, "AQAB", OS_SIG_PS256, PS256_INPUT, PS256_SIG, 7),
        "PS256: a changed signature fails");
  check(!vector_verifies("RSA", NULL, PS256_N, "AQAB", OS_SIG_RS256, PS256_INPUT, PS256_SIG, -1),
        "PS256's signature is not an RS256 one");
  check(vector_verifies("EC", "P-256", ES256_X, ES256_Y, OS_SIG_ES256, ES256_INPUT, ES256_SIG, -1),
        "ES256 verifies (RFC 7515 A.3, r || s)");
  check(!vector_verifies("EC", "P-256", ES256_X, ES256_Y, OS_SIG_ES256, ES256_INPUT, ES256_SIG, 3),
        "ES256: a changed signature fails");
  check(!vector_verifies("EC", "P-256", ES256_X, ES256_Y, OS_SIG_RS256, ES256_INPUT, ES256_SIG, -1),
        "an EC key does not verify RS256");
  uint8_t n[256], x[32];
  char why[160] = "";
  size_t n_len = unb64url(RS256_N, n);
  check(!os_pubkey_import("RSA", NULL, n, n_len / 2, e, sizeof e, why, sizeof why) && strstr(why, "2048"),
        "a 1024-bit RSA key is refused");
  size_t x_len = unb64url(ED25519_X, x);
  check(!os_pubkey_import("OKP", "Ed25519", x, x_len, NULL, 0, why, sizeof why) &&
            strcmp(why, "EdDSA (Ed25519) keys are not available in the Windows build") == 0,
        "EdDSA keys are refused, and it says why");
  printf("     %s\n", why);
}

static void check_self_dynlib_confine(const char *argv0, char *self, size_t self_size) {
  check(os_self_exe(argv0, self, self_size), "os_self_exe");
  printf("     %s\n", self);
  char tiny[4];
  check(!os_self_exe(argv0, tiny, sizeof tiny), "os_self_exe: no room is an error");
  char why[200];
  const char *names[] = {"no-such-library.dll", "kernel32.dll"};
  os_dynlib *lib = os_dynlib_open(names, 2, why, sizeof why);
  check(lib && os_dynlib_symbol(lib, "GetTickCount") && !os_dynlib_symbol(lib, "NoSuchSymbol"),
        "os_dynlib: the second name loads, its symbols are found");
  if (lib) os_dynlib_close(lib);
  check(!os_dynlib_open(names, 1, why, sizeof why) && why[0], "os_dynlib: a missing library says why");
  printf("     %s\n", why);
  check(!os_confine_begin(true, true, NULL, NULL, why, sizeof why) && strstr(why, "only luamcp's own checks apply"),
        "os_confine: none, and it says so");
}

static volatile LONG interrupted, busy;
static void on_interrupt(void) { interrupted = 1; }
static void watcher(void *arg) {
  (void)arg;
  while (!busy) Sleep(1);
  os_interrupt_main();
}

static void check_interrupt(void) {
  check(os_interrupt_start(on_interrupt, watcher, NULL), "os_interrupt_start");
  busy = 1;
  /* Busy, as a Lua loop would be: only the interruption ends it. The
   * bound (far beyond any machine's delay) makes a broken interruption a
   * failed check, not a hung test run. */
  ULONGLONG give_up = GetTickCount64() + 120000;
  while (!interrupted && GetTickCount64() < give_up) {
  }
  os_interrupt_join();
  check(interrupted, "os_interrupt_main ran fn while the main thread was busy");
}

static bool child_exited;
static int64_t child_status;
static void on_child_exit(uv_process_t *p, int64_t status, int signum) {
  (void)signum;
  child_exited = true;
  child_status = status;
  os_proc_release(p);
  uv_close((uv_handle_t *)p, NULL);
}
static void on_kill_time(uv_timer_t *t) {
  os_proc_kill(t->data, SIGTERM);
  uv_close((uv_handle_t *)t, NULL);
}

static void check_proc(uv_loop_t *loop, char *self) {
  uv_process_t child, missing;
  uv_timer_t timer;
  char *args[] = {self, "sleep", NULL};
  uv_process_options_t o = {.exit_cb = on_child_exit, .file = self, .args = args};
  check(os_proc_spawn(loop, &child, &o) == 0, "os_proc_spawn");
  uv_timer_init(loop, &timer);
  timer.data = &child;
  uv_timer_start(&timer, on_kill_time, 200, 0);
  uv_run(loop, UV_RUN_DEFAULT);
  check(child_exited && child_status == 1, "os_proc_kill ends the child through its job");
  char *missing_args[] = {"no-such-program.exe", NULL};
  uv_process_options_t m = {.exit_cb = on_child_exit, .file = missing_args[0], .args = missing_args};
  check(os_proc_spawn(loop, &missing, &m) == UV_ENOENT, "os_proc_spawn: a missing program is ENOENT");
  uv_close((uv_handle_t *)&missing, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
}

static os_signals *signals;
static int signal_kind;
static uv_timer_t give_up;
static void on_signal(void *data, os_signal_kind kind, const char *name) {
  (void)data;
  printf("     received %s\n", name);
  signal_kind = kind;
  os_signals_stop(signals);
  uv_close((uv_handle_t *)&give_up, NULL);
}
static void on_give_up(uv_timer_t *t) {
  os_signals_stop(signals);
  uv_close((uv_handle_t *)t, NULL);
}

static void check_signals(uv_loop_t *loop) {
  check(os_signals_start(&signals, loop, OS_SIGNAL_STOP | OS_SIGNAL_INTERRUPT, on_signal, NULL) == 0,
        "os_signals_start");
  uv_timer_init(loop, &give_up);
  uv_timer_start(&give_up, on_give_up, 15000, 0);
  printf("     waiting for Ctrl+C\n");
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  check(signal_kind == OS_SIGNAL_INTERRUPT, "a console event reaches the loop as an interrupt");
}

/* NUL is a character device, as a console is, and the C runtime's isatty
 * says yes to it: os_is_terminal must not. */
static void check_terminal(void) {
  int nul = _open("NUL", _O_RDONLY);
  check(nul >= 0 && !os_is_terminal(nul), "os_is_terminal: NUL is no terminal");
  if (nul >= 0) _close(nul);
  check(!os_is_terminal(-1), "os_is_terminal: no descriptor is no terminal");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
    Sleep(30000);
    return 0;
  }
  char self[1024];
  check_crypto();
  check_pubkeys();
  check_self_dynlib_confine(argv[0], self, sizeof self);
  check_interrupt();
  check_terminal();
  uv_loop_t *loop = uv_default_loop();
  check_proc(loop, self);
  if (argc > 1 && strcmp(argv[1], "wait-signal") == 0) check_signals(loop);
  printf("%d passed, %d failed\n", passed, failed);
  fflush(stdout);
  return failed != 0;
}

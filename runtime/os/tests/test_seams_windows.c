/*
 * test_seams_windows.c - the Windows seams checked on their own, under
 * wine (runtime/os/tests/seams_windows.sh builds and runs it): BCrypt's
 * hashes against published vectors, the executable's path, a DLL and its
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

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
    Sleep(30000);
    return 0;
  }
  char self[1024];
  check_crypto();
  check_self_dynlib_confine(argv[0], self, sizeof self);
  check_interrupt();
  uv_loop_t *loop = uv_default_loop();
  check_proc(loop, self);
  if (argc > 1 && strcmp(argv[1], "wait-signal") == 0) check_signals(loop);
  printf("%d passed, %d failed\n", passed, failed);
  fflush(stdout);
  return failed != 0;
}

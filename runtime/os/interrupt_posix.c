/*
 * interrupt_posix.c - os/interrupt.h with a signal: SIGURG (as Go's
 * runtime uses for its preemption: nothing else sends it, and its default
 * action is to be ignored), sent to the main thread with pthread_kill and
 * blocked in the watcher thread, so that only the main thread takes it.
 */
#include "os/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <uv.h>

/* Owner: this file, for the life of the process (one watcher at a time). */
static struct {
  void (*fn)(void);
  pthread_t main_thread;
  uv_thread_t thread;
} I;

static void on_signal(int signum) {
  (void)signum;
  I.fn();
}

bool os_interrupt_start(void (*fn)(void), void (*body)(void *), void *arg) {
  I.fn = fn;
  I.main_thread = pthread_self();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGURG, &sa, NULL) != 0) return false;
  /* The new thread inherits this mask: it never takes the signal itself. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGURG);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  bool ok = uv_thread_create(&I.thread, body, arg) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return ok;
}

void os_interrupt_main(void) { pthread_kill(I.main_thread, SIGURG); }

void os_interrupt_join(void) { uv_thread_join(&I.thread); }

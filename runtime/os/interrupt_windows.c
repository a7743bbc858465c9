/*
 * interrupt_windows.c - os/interrupt.h without signals: the watcher
 * suspends the main thread, runs fn itself, and resumes it. To fn that is
 * what a signal handler is on POSIX: the main thread is stopped wherever
 * it was, and fn only sets a flag it will see (a Lua hook).
 *
 * GetCurrentThread() is a pseudo-handle that means "the calling thread"
 * to whoever uses it: the watcher needs a real handle of the main thread,
 * which DuplicateHandle makes.
 */
#include "os/interrupt.h"

#include <uv.h> /* before windows.h: it brings winsock2.h, which must come first */
#include <windows.h>

/* Owner: this file, for the life of the process (one watcher at a time). */
static struct {
  void (*fn)(void);
  HANDLE main_thread; /* a real handle, closed by os_interrupt_join */
  uv_thread_t thread;
} I;

bool os_interrupt_start(void (*fn)(void), void (*body)(void *), void *arg) {
  I.fn = fn;
  if (!DuplicateHandle(GetCurrentProcess(), GetCurrentThread(), GetCurrentProcess(), &I.main_thread,
                       THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT, FALSE, 0))
    return false;
  if (uv_thread_create(&I.thread, body, arg) != 0) {
    CloseHandle(I.main_thread);
    I.main_thread = NULL;
    return false;
  }
  return true;
}

void os_interrupt_main(void) {
  if (SuspendThread(I.main_thread) == (DWORD)-1) return;
  /* SuspendThread only asks: GetThreadContext returns once the thread has
   * really stopped (the documented way to wait for it). */
  CONTEXT context;
  context.ContextFlags = CONTEXT_CONTROL;
  GetThreadContext(I.main_thread, &context);
  I.fn();
  ResumeThread(I.main_thread);
}

void os_interrupt_join(void) {
  uv_thread_join(&I.thread);
  CloseHandle(I.main_thread);
  I.main_thread = NULL;
}

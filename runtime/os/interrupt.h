/*
 * interrupt.h - a thread of its own that can get a function run on the
 * main thread while that thread is busy in Lua code (the watchdog, when a
 * script loops past its time limit). POSIX (interrupt_posix.c): the thread
 * blocks SIGURG and pthread_kill(SIGURG) runs fn in the main thread's
 * signal handler. Windows (interrupt_windows.c): SuspendThread, fn,
 * ResumeThread. fn must be async-signal-safe (watchdog.c's sets a Lua hook),
 * and may run on either thread, with the main thread stopped wherever it
 * was. The watcher's own locks and waits use libuv's portable
 * uv_mutex/uv_cond.
 */
#ifndef LUAMCP_OS_INTERRUPT_H
#define LUAMCP_OS_INTERRUPT_H

#include <stdbool.h>

/* From the main thread, once: start body(arg) on a new thread; fn is what
 * os_interrupt_main runs against the calling (main) thread. False when the
 * thread or the interruption cannot be set up (nothing was started). */
bool os_interrupt_start(void (*fn)(void), void (*body)(void *), void *arg);

/* From the thread os_interrupt_start made: run fn on the main thread now. */
void os_interrupt_main(void);

/* From the main thread: wait for body to return (it was told to stop).
 * os_interrupt_start may be called again afterwards. */
void os_interrupt_join(void);

#endif

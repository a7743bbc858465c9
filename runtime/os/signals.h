/*
 * signals.h - the OS asking the server to stop or to reload, turned into
 * calls on the loop. POSIX (signals_posix.c): SIGTERM stops, SIGINT
 * interrupts (a stop typed at a terminal), SIGHUP reloads, SIGPIPE is
 * ignored. Windows (signals_windows.c): the console's control events stop
 * with the same drain: Ctrl+C and Ctrl+Break interrupt, the console
 * closing, log-off and shut-down stop; there is no reload signal (luamcp
 * dev reloads on saved files everywhere).
 */
#ifndef LUAMCP_OS_SIGNALS_H
#define LUAMCP_OS_SIGNALS_H

#include <stdbool.h>
#include <uv.h>

/* What the OS asks for; also the bits of os_signals_start's kinds. An
 * interrupt is a stop typed at a terminal, which reaches every process
 * the terminal runs (a worker waits for its supervisor's stop instead). */
typedef enum { OS_SIGNAL_STOP = 1, OS_SIGNAL_INTERRUPT = 2, OS_SIGNAL_RELOAD = 4 } os_signal_kind;

/* Called on the loop's thread. name is what the log says was received:
 * "signal 15" (POSIX logs have always given the number), "SIGHUP",
 * "Ctrl+C". */
typedef void (*os_signal_cb)(void *data, os_signal_kind kind, const char *name);

/* Owner: whoever calls os_signals_start; stopped and freed (through the
 * loop's close callbacks) by os_signals_stop, which must come before the
 * loop is closed. */
typedef struct os_signals os_signals;

/* Watch for the requests whose bits are in kinds (OS_SIGNAL_STOP | ...);
 * a kind the OS has no way to ask for is never reported. 0 with *out set,
 * or a negative libuv error code (and *out NULL) when the OS refused. The
 * watchers keep the loop alive, as a libuv handle does, until
 * os_signals_unref. */
int os_signals_start(os_signals **out, uv_loop_t *loop, unsigned kinds, os_signal_cb cb, void *data);
void os_signals_unref(os_signals *s);
void os_signals_stop(os_signals *s);

/* Called first thing in main(): a write to a closed pipe or socket must be
 * an error return (EPIPE), never the death of the process. */
void os_signals_ignore_broken_pipe(void);

/* A program with no loop to watch on (luamcp call): from now on Ctrl-C
 * calls fn (from a signal handler, or Windows' console thread: it may only
 * set a flag) instead of ending the process. On POSIX a blocking read or
 * poll in progress then fails with EINTR rather than carrying on. */
void os_catch_interrupt(void (*fn)(void));

#endif

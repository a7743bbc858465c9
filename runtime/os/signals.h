/*
 * signals.h - the OS asking the server to stop or to reload, turned into
 * calls on the loop. POSIX (signals_posix.c): SIGTERM and SIGINT stop (a
 * drain), SIGHUP reloads, SIGPIPE is ignored. Windows (signals_windows.c):
 * the console's control events (Ctrl+C, Ctrl+Break, the console closing,
 * log-off, shut-down) stop with the same drain; there is no reload signal
 * (luamcp dev reloads on saved files everywhere).
 */
#ifndef LUAMCP_OS_SIGNALS_H
#define LUAMCP_OS_SIGNALS_H

#include <stdbool.h>
#include <uv.h>

typedef enum { OS_SIGNAL_STOP, OS_SIGNAL_RELOAD } os_signal_kind;

/* Called on the loop's thread; name is what to log ("SIGTERM", "Ctrl+C"). */
typedef void (*os_signal_cb)(void *data, os_signal_kind kind, const char *name);

/* Owner: whoever calls os_signals_start; stopped and freed (through the
 * loop's close callbacks) by os_signals_stop. */
typedef struct os_signals os_signals;

/* Watch for stop requests, and for reload requests when want_reload.
 * NULL when the OS refused (the reason is logged). */
os_signals *os_signals_start(uv_loop_t *loop, bool want_reload, os_signal_cb cb, void *data);
void os_signals_stop(os_signals *s);

/* Called first thing in main(): a write to a closed pipe or socket must be
 * an error return (EPIPE), never the death of the process. */
void os_signals_ignore_broken_pipe(void);

#endif

/*
 * signals_windows.c - os/signals.h from the console's control events.
 *
 * Windows has no SIGTERM: a console program is asked to stop by a control
 * event (Ctrl+C, Ctrl+Break, its console window closing, the user logging
 * off, the system shutting down), delivered to a handler that Windows runs
 * on a thread of its own. The handler only marks the event and wakes the
 * loop (uv_async_send, the one libuv call safe from another thread); the
 * stop itself, with its drain, runs on the loop like a POSIX signal's.
 *
 * libuv's own signal emulation (uv_signal_start with SIGINT, SIGBREAK,
 * SIGHUP) covers Ctrl+C, Ctrl+Break and the console closing, but not
 * log-off and shut-down, and would report a closing console as SIGHUP,
 * which is a reload here: one handler of our own says what each event is.
 *
 * After a close, log-off or shut-down event the process ends as soon as
 * the handler returns, so for those the handler waits for the process to
 * end on its own (the drain, then exit); Windows ends it anyway when its
 * grace is over (about 5 s for a closing console, 20 s at shut-down).
 */
#include "os/signals.h"

#include <windows.h>
#include <stdlib.h>

static const struct {
  DWORD event;
  os_signal_kind kind;
  const char *name;
} EVENTS[] = {
    {CTRL_C_EVENT, OS_SIGNAL_INTERRUPT, "Ctrl+C"},
    {CTRL_BREAK_EVENT, OS_SIGNAL_INTERRUPT, "Ctrl+Break"},
    {CTRL_CLOSE_EVENT, OS_SIGNAL_STOP, "the console closing"},
    {CTRL_LOGOFF_EVENT, OS_SIGNAL_STOP, "log-off"},
    {CTRL_SHUTDOWN_EVENT, OS_SIGNAL_STOP, "shut-down"},
};
enum { EVENT_COUNT = sizeof EVENTS / sizeof *EVENTS };

/* Owner: the caller of os_signals_start; freed in its async handle's close
 * callback, after os_signals_stop took it off the watchers' list. */
struct os_signals {
  uv_async_t wake;      /* sent by the handler thread */
  volatile LONG events; /* bit i: EVENTS[i] arrived since the loop last looked */
  unsigned kinds;
  os_signal_cb cb;
  void *data;
  os_signals *next; /* in watchers, under watchers_lock */
};

/* Every started os_signals: the handler is one per process. */
static SRWLOCK watchers_lock = SRWLOCK_INIT;
static os_signals *watchers;
static bool handler_installed;

static BOOL WINAPI on_console_event(DWORD event) {
  int i = 0;
  while (i < EVENT_COUNT && EVENTS[i].event != event) i++;
  if (i == EVENT_COUNT) return FALSE;
  bool taken = false;
  AcquireSRWLockShared(&watchers_lock);
  for (os_signals *s = watchers; s; s = s->next) {
    if (!(s->kinds & EVENTS[i].kind)) continue;
    InterlockedOr(&s->events, 1L << i);
    uv_async_send(&s->wake);
    taken = true;
  }
  ReleaseSRWLockShared(&watchers_lock);
  if (!taken) return FALSE; /* Windows' default: end the process */
  if (EVENTS[i].kind == OS_SIGNAL_STOP) Sleep(INFINITE);
  return TRUE;
}

static void on_wake(uv_async_t *h) {
  os_signals *s = h->data;
  LONG events = InterlockedExchange(&s->events, 0);
  for (int i = 0; i < EVENT_COUNT; i++)
    if (events & (1L << i)) s->cb(s->data, EVENTS[i].kind, EVENTS[i].name);
}

int os_signals_start(os_signals **out, uv_loop_t *loop, unsigned kinds, os_signal_cb cb, void *data) {
  *out = NULL;
  os_signals *s = calloc(1, sizeof *s);
  if (!s) return UV_ENOMEM;
  s->kinds = kinds;
  s->cb = cb;
  s->data = data;
  int rc = uv_async_init(loop, &s->wake, on_wake);
  if (rc != 0) {
    free(s);
    return rc;
  }
  s->wake.data = s;
  AcquireSRWLockExclusive(&watchers_lock);
  if (!handler_installed && SetConsoleCtrlHandler(on_console_event, TRUE)) handler_installed = true;
  if (handler_installed) {
    s->next = watchers;
    watchers = s;
  } else {
    rc = uv_translate_sys_error((int)GetLastError());
  }
  ReleaseSRWLockExclusive(&watchers_lock);
  if (rc != 0) {
    os_signals_stop(s);
    return rc;
  }
  *out = s;
  return 0;
}

void os_signals_unref(os_signals *s) { uv_unref((uv_handle_t *)&s->wake); }

static void on_closed(uv_handle_t *h) { free(h->data); }

void os_signals_stop(os_signals *s) {
  if (!s) return;
  AcquireSRWLockExclusive(&watchers_lock);
  for (os_signals **p = &watchers; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  ReleaseSRWLockExclusive(&watchers_lock);
  uv_close((uv_handle_t *)&s->wake, on_closed);
}

/* Windows has no SIGPIPE: a write to a closed pipe already fails with an
 * error (ERROR_NO_DATA, EPIPE to libuv). */
void os_signals_ignore_broken_pipe(void) {}

static void (*interrupt_fn)(void);

static BOOL WINAPI on_console_interrupt(DWORD event) {
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT) return FALSE;
  interrupt_fn();
  return TRUE;
}

void os_catch_interrupt(void (*fn)(void)) {
  interrupt_fn = fn;
  SetConsoleCtrlHandler(on_console_interrupt, TRUE);
}

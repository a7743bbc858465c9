/*
 * watchdog.h - stopping Lua code that runs too long, at no cost to code
 * that does not.
 *
 * In Lua 5.4 any count or line hook makes the VM call out on every
 * instruction, which doubles the cost of CPU-bound code. So no hook is set
 * while handlers behave. A watchdog thread watches how long the current
 * resume has run; once it passes its call's deadline, or runs for longer
 * than TASK_POLL_INTERVAL_MS, the watchdog interrupts the main thread
 * (os/interrupt.h: a signal, SIGURG as Go's runtime does, on POSIX; the
 * main thread suspended on Windows) to set a count hook on the Lua thread
 * that is executing (lua_sethook is made to be called from a signal
 * handler, as lua.c does for Ctrl-C). The hook then runs in the main
 * thread at the next instruction, does its checks, and removes itself.
 */
#ifndef LUAMCP_WATCHDOG_H
#define LUAMCP_WATCHDOG_H

#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

/* Start the watchdog for hook (once per process; later calls do nothing).
 * Returns false if the thread or the interruption cannot be set up (then
 * nothing stops runaway code, and the caller says so). */
bool watchdog_start(lua_Hook hook);
void watchdog_stop(void);

/* The main thread is about to run (resume) Lua thread L for a call whose
 * deadline is deadline_ns (uv_hrtime; 0: none). */
void watchdog_enter(lua_State *L, uint64_t deadline_ns);
/* Lua thread L now runs inside the same resume (a coroutine the handler
 * resumed, or back from one). Returns the thread that ran before. */
lua_State *watchdog_switch(lua_State *L);
/* The resume ended; nothing runs. */
void watchdog_leave(void);
/* The hook ran: measure the next interval from now. */
void watchdog_rearm(void);

#endif

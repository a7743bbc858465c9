/* watchdog.c - see watchdog.h. */
#include "app/watchdog.h"

#include <stdatomic.h>
#include <uv.h>

#include "core/luamcp_limits.h"
#include "os/interrupt.h"

/* What the main thread publishes for the watchdog. Owner: this file, for
 * the life of the process. The main thread writes with plain atomic stores
 * on every resume (a few nanoseconds); the watchdog only reads them, and
 * the interruption (os/interrupt.h: a signal handler on the main thread,
 * or the watchdog with the main thread suspended) reads `running`. */
static struct {
  _Atomic(lua_State *) running;    /* the Lua thread executing now, or NULL */
  _Atomic uint64_t since_ns;       /* when it started, or the hook last ran; 0: idle */
  _Atomic uint64_t deadline_ns;    /* of the call it runs; 0: none */
  _Atomic uint64_t last_active_ns; /* when a resume last started */
  _Atomic bool parked;             /* the watchdog sleeps until woken */
  _Atomic bool stopping;
  lua_Hook hook;
  uv_mutex_t mutex; /* with wake: the watchdog's sleeps, parked or timed */
  uv_cond_t wake;
  bool sync_ready;  /* mutex and wake are initialized (once: they outlive a stop) */
  bool started;
} dog;

/* After a signal, how long the watchdog waits before it looks again (the
 * hook resets the clock when it runs); and how long it stays awake after
 * the last resume before it parks, so an idle server has no wake-ups at
 * all and a busy one never pays for waking it. */
enum { AFTER_SIGNAL_MS = 2, PARK_AFTER_MS = 200 };

/* Run on the main thread's behalf while it is stopped (os/interrupt.h). */
static void interrupt_lua(void) {
  lua_State *L = atomic_load(&dog.running);
  if (L) lua_sethook(L, dog.hook, LUA_MASKCOUNT, 1);
}

/* Sleep ns, or less if woken (watchdog_stop). Nobody else signals wake
 * while the watchdog is not parked, so this is a plain sleep; on Windows
 * its resolution is a millisecond. */
static void sleep_ns(uint64_t ns) {
  uv_mutex_lock(&dog.mutex);
  if (!atomic_load(&dog.stopping)) (void)uv_cond_timedwait(&dog.wake, &dog.mutex, ns);
  uv_mutex_unlock(&dog.mutex);
}

/* Sleep until the running resume is due for a look (its start, or the
 * hook's last run, plus the poll interval, or its deadline if sooner); a
 * resume that ended meanwhile makes that look a no-op. So a busy server
 * costs the watchdog one wake-up per poll interval, not per call. */
static void watch(void *arg) {
  (void)arg;
  const uint64_t poll_ns = (uint64_t)TASK_POLL_INTERVAL_MS * 1000000u;
  while (!atomic_load(&dog.stopping)) {
    uint64_t now = uv_hrtime();
    uint64_t since = atomic_load(&dog.since_ns);
    if (since == 0) {
      if (now - atomic_load(&dog.last_active_ns) > (uint64_t)PARK_AFTER_MS * 1000000u) {
        uv_mutex_lock(&dog.mutex);
        atomic_store(&dog.parked, true);
        while (atomic_load(&dog.parked) && !atomic_load(&dog.stopping)) uv_cond_wait(&dog.wake, &dog.mutex);
        uv_mutex_unlock(&dog.mutex);
      } else {
        sleep_ns(poll_ns);
      }
      continue;
    }
    uint64_t due = since + poll_ns;
    uint64_t deadline = atomic_load(&dog.deadline_ns);
    if (deadline && deadline < due) due = deadline;
    if (now >= due) {
      os_interrupt_main();
      sleep_ns((uint64_t)AFTER_SIGNAL_MS * 1000000u);
    } else {
      sleep_ns(due - now);
    }
  }
}

bool watchdog_start(lua_Hook hook) {
  if (dog.started) return true;
  dog.hook = hook;
  if (!dog.sync_ready) {
    if (uv_mutex_init(&dog.mutex) != 0) return false;
    if (uv_cond_init(&dog.wake) != 0) {
      uv_mutex_destroy(&dog.mutex);
      return false;
    }
    dog.sync_ready = true;
  }
  dog.started = os_interrupt_start(interrupt_lua, watch, NULL);
  return dog.started;
}

void watchdog_stop(void) {
  if (!dog.started) return;
  atomic_store(&dog.stopping, true);
  uv_mutex_lock(&dog.mutex);
  atomic_store(&dog.parked, false);
  uv_cond_signal(&dog.wake);
  uv_mutex_unlock(&dog.mutex);
  os_interrupt_join();
  dog.started = false;
  atomic_store(&dog.stopping, false);
}

void watchdog_enter(lua_State *L, uint64_t deadline_ns) {
  uint64_t now = uv_hrtime();
  atomic_store(&dog.deadline_ns, deadline_ns);
  atomic_store(&dog.running, L);
  atomic_store(&dog.since_ns, now);
  atomic_store(&dog.last_active_ns, now);
  if (atomic_load(&dog.parked)) {
    /* Back from idle: wake the watchdog (only on that transition). */
    uv_mutex_lock(&dog.mutex);
    atomic_store(&dog.parked, false);
    uv_cond_signal(&dog.wake);
    uv_mutex_unlock(&dog.mutex);
  }
}

lua_State *watchdog_switch(lua_State *L) { return atomic_exchange(&dog.running, L); }

void watchdog_leave(void) {
  atomic_store(&dog.since_ns, 0);
  atomic_store(&dog.running, NULL);
}

void watchdog_rearm(void) {
  if (atomic_load(&dog.since_ns)) atomic_store(&dog.since_ns, uv_hrtime());
}

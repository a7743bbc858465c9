/*
 * clock.h - the core's two clocks, in one place: a monotonic one for
 * durations and deadlines (never steps back when the wall clock is set),
 * and the wall clock for timestamps a client reads (createdAt, lastUpdatedAt).
 * On Windows clock_gettime comes from os/libc_windows.h.
 */
#ifndef LUAMCP_CLOCK_H
#define LUAMCP_CLOCK_H

#include <stdint.h>

/* Nanoseconds on the monotonic clock (an arbitrary origin). */
uint64_t clock_monotonic_ns(void);
/* Milliseconds since the Unix epoch, on the wall clock. */
int64_t clock_wall_ms(void);

#endif

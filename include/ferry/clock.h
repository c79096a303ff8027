/* The process's one monotonic clock: durations, timeouts, deadlines and rate accounting all read
 * CLOCK_MONOTONIC through these functions, so a wall clock step (NTP, an operator) never makes
 * a timeout fire early or a duration negative, and every layer agrees on the units. Readings
 * are only comparable within one process (the clock's origin is unspecified). Wall time (log
 * stamps, journal and catalog times) is time(NULL) or CLOCK_REALTIME, never these. */
#ifndef FERRY_CLOCK_H
#define FERRY_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now, in seconds (fractional). */
double ferry_clock_s(void);
/* Now, in milliseconds (fractional). */
double ferry_clock_ms(void);
/* Now, in whole milliseconds (truncated): for deadlines kept in integers. */
uint64_t ferry_clock_ms_u64(void);
/* Milliseconds since the Unix epoch (CLOCK_REALTIME): for times kept across processes. */
uint64_t ferry_clock_wall_ms(void);
/* The absolute CLOCK_MONOTONIC time ms milliseconds from now, for pthread_cond_timedwait on a
 * condition variable whose attribute chose CLOCK_MONOTONIC (pthread_condattr_setclock). */
struct timespec ferry_clock_after_ms(uint64_t ms);

#endif

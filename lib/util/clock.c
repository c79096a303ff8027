/* The monotonic clock (include/ferry/clock.h). The conversions are written once here so every
 * caller gets the same rounding: fractional units from the exact nanoseconds, whole
 * milliseconds truncated. */
#include "ferry/clock.h"

static struct timespec mono(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts;
}

double ferry_clock_s(void)
{
    struct timespec ts = mono();
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double ferry_clock_ms(void)
{
    struct timespec ts = mono();
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

uint64_t ferry_clock_ms_u64(void)
{
    struct timespec ts = mono();
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t ferry_clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct timespec ferry_clock_after_ms(uint64_t ms)
{
    struct timespec ts = mono();
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

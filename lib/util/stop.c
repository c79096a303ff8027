/* The process-wide stop request (include/ferry/stop.h). */
#include "ferry/stop.h"

#include <stdatomic.h>
#include <time.h>

static atomic_bool stop_flag;

void ferry_stop_request(void) { atomic_store(&stop_flag, true); }

bool ferry_stop_requested(void) { return atomic_load(&stop_flag); }

bool ferry_stop_sleep_ms(unsigned ms)
{
    /* in slices of at most 100 ms: a stop waits for one slice at most */
    while (ms > 0 && !ferry_stop_requested()) {
        unsigned step = ms < 100 ? ms : 100;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
    return ferry_stop_requested();
}

/* A token bucket for per-user request rates (include/ferry/auth.h; not lib/util/rate.c, which
 * paces bytes by waiting): refuses rather than waits. Pure: time comes in. */
#include "ferry/auth.h"

bool ferry_bucket_take(ferry_bucket *b, uint32_t rate, uint64_t now_ms)
{
    if (!rate)
        return true;
    if (!b->started) {
        b->started = true;
        b->tokens = rate;
        b->last_ms = now_ms;
    }
    if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * rate / 1000.0;
        if (b->tokens > rate)
            b->tokens = rate;
        b->last_ms = now_ms;
    }
    if (b->tokens < 1.0)
        return false;
    b->tokens -= 1.0;
    return true;
}

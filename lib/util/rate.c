/* The shared bandwidth limit (include/ferry/rate.h). */
#include "ferry/rate.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct ferry_rate {
    pthread_mutex_t mu;
    uint64_t bps;
    double due;      /* CLOCK_MONOTONIC seconds at which the bytes accounted so far are paid */
    double start;    /* the first account, 0 before */
    uint64_t bytes;
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

ferry_rate *ferry_rate_new(uint64_t bytes_per_second)
{
    ferry_rate *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->bps = bytes_per_second;
    return r;
}

void ferry_rate_free(ferry_rate *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void ferry_rate_account(ferry_rate *r, uint64_t bytes)
{
    if (!r)
        return;
    double now = mono_s(), wait = 0;
    pthread_mutex_lock(&r->mu);
    if (!r->start)
        r->start = now;
    r->bytes += bytes;
    if (r->bps) {
        /* an idle limiter does not bank credit: the debt starts from now at the earliest */
        if (r->due < now)
            r->due = now;
        r->due += (double)bytes / (double)r->bps;
        wait = r->due - now;
    }
    pthread_mutex_unlock(&r->mu);
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

void ferry_rate_totals(ferry_rate *r, uint64_t *bytes, double *seconds)
{
    pthread_mutex_lock(&r->mu);
    *bytes = r->bytes;
    *seconds = r->start ? mono_s() - r->start : 0;
    pthread_mutex_unlock(&r->mu);
}

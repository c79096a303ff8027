/* The shared bandwidth limits (include/ferry/rate.h): one limiter, and groups of them (a plan
 * step under the run's limit and its shards' limits). */
#include "ferry/rate.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "ferry/clock.h"

#define RATE_GROUP_MAX 4

struct ferry_rate {
    pthread_mutex_t mu;
    uint64_t bps;
    ferry_rate *members[RATE_GROUP_MAX]; /* a group: the limiters it accounts on */
    size_t n_members;
    double due;      /* CLOCK_MONOTONIC seconds at which the bytes accounted so far are paid */
    double start;    /* the first account, 0 before */
    uint64_t bytes;
};

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

ferry_rate *ferry_rate_new_group(ferry_rate *const *members, size_t n)
{
    ferry_rate *r = ferry_rate_new(0);
    if (!r)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (members[i] && r->n_members < RATE_GROUP_MAX)
            r->members[r->n_members++] = members[i];
    return r;
}

double ferry_rate_charge(ferry_rate *r, uint64_t bytes, double now)
{
    if (!r)
        return 0;
    double wait = 0;
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
    /* a group's bytes count on each of its limiters; the caller waits for the slowest */
    for (size_t i = 0; i < r->n_members; i++) {
        double w = ferry_rate_charge(r->members[i], bytes, now);
        if (w > wait)
            wait = w;
    }
    return wait;
}

void ferry_rate_account(ferry_rate *r, uint64_t bytes)
{
    if (!r)
        return;
    double wait = ferry_rate_charge(r, bytes, ferry_clock_s());
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
    *seconds = r->start ? ferry_clock_s() - r->start : 0;
    pthread_mutex_unlock(&r->mu);
}

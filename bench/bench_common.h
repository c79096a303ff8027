/* What the placement benchmarks share (bench_placement, bench_rebalance, bench_schedule): the
 * wall and CPU clocks, and the synthetic inventory: the blog's tenant mix (70% of tenants one
 * split, 20% two, 10% eight), slice sizes uniform in 1 MB .. 10 GB from a fixed xorshift
 * sequence, so every run and every benchmark places the same slices. Header only: each
 * benchmark is one program. */
#ifndef FERRY_BENCH_COMMON_H
#define FERRY_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "ferry/placement.h"

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's CPU time so far (user + system), seconds. */
static inline double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Fills *inv (initialised and finished here; the caller frees it) with want slices. */
static inline int blog_mix_inventory(ferry_pl_inventory *inv, size_t want, ferry_err *err)
{
    int rc = ferry_pl_inventory_init(inv, "bench", err);
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    size_t n = 0;
    for (int t = 0; !rc && n < want; t++) {
        char tenant[32];
        snprintf(tenant, sizeof tenant, "tenant%d", t);
        int r = t % 10, splits = r < 7 ? 1 : r < 9 ? 2 : 8;
        for (int k = 0; !rc && k < splits && n < want; k++, n++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            rc = ferry_pl_inventory_add(inv, tenant, (uint32_t)k, 1000000 + rng % 10000000000ULL, 0,
                                        err);
        }
    }
    return rc ? rc : ferry_pl_inventory_finish(inv, err);
}

#endif

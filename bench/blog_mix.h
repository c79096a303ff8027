/* The synthetic inventory the placement benchmarks share (bench_placement, bench_rebalance,
 * bench_schedule): the blog's tenant mix (70% of tenants one split, 20% two, 10% eight), slice
 * sizes uniform in 1 MB .. 10 GB from a fixed xorshift sequence, so every run and every
 * benchmark places the same slices. Header only: each benchmark is one program. */
#ifndef FERRY_BENCH_BLOG_MIX_H
#define FERRY_BENCH_BLOG_MIX_H

#include <stdint.h>
#include <stdio.h>

#include "ferry/placement.h"

/* Fills *inv (initialised and finished here; the caller frees it) with want slices. */
static inline int blog_mix_inventory(ferry_inventory *inv, size_t want, ferry_err *err)
{
    int rc = ferry_inventory_init(inv, "bench", err);
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    size_t n = 0;
    for (int t = 0; !rc && n < want; t++) {
        char tenant[32];
        snprintf(tenant, sizeof tenant, "tenant%d", t);
        int r = t % 10, splits = r < 7 ? 1 : r < 9 ? 2 : 8;
        for (int k = 0; !rc && k < splits && n < want; k++, n++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            rc = ferry_inventory_add(inv, tenant, (uint32_t)k, 1000000 + rng % 10000000000ULL, 0,
                                     err);
        }
    }
    return rc ? rc : ferry_inventory_finish(inv, err);
}

#endif

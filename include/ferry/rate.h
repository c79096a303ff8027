/* A bandwidth limit shared by threads: callers report the bytes they moved and are made to wait
 * so that the total stays at most a rate over the run (a debt model: each report pushes the
 * moment the next byte may go by bytes / rate; a caller sleeps until the debt it added is due).
 * One limiter serves every move of a rebalance, so --max-bytes-per-second holds for the run,
 * not per move; with a per-shard limit each shard has one more, and each move accounts on a group
 * of the run's and its two shards' limiters. Thread-safe. */
#ifndef FERRY_RATE_H
#define FERRY_RATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ferry_rate ferry_rate;

/* bytes_per_second 0: no limit (ferry_rate_account never waits). *out owned by the caller
 * (ferry_rate_free). NULL on allocation failure. */
ferry_rate *ferry_rate_new(uint64_t bytes_per_second);
void ferry_rate_free(ferry_rate *r);
/* A limiter for one mover that several limits govern (a plan step: the run's limit, its source
 * shard's and its target shard's): its bytes are accounted on each member (at most 4; NULL ones
 * skipped) and the caller waits for the slowest. The group has no rate of its own; members must
 * outlive it. NULL on allocation failure. */
ferry_rate *ferry_rate_new_group(ferry_rate *const *members, size_t n);
/* The accounting without the sleep: records bytes at now (CLOCK_MONOTONIC seconds) and returns
 * how long the caller must wait (seconds, >= 0): the limiter's (and for a group its members')
 * arithmetic, testable with a made-up clock. r may be NULL (0). */
double ferry_rate_charge(ferry_rate *r, uint64_t bytes, double now);
/* Records bytes just moved and sleeps until the run is back under the rate. r may be NULL. */
void ferry_rate_account(ferry_rate *r, uint64_t bytes);
/* Bytes accounted and seconds since the first byte (for reports and tests). */
void ferry_rate_totals(ferry_rate *r, uint64_t *bytes, double *seconds);

#endif

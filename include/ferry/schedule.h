/* Scheduling a rebalance: which planned moves run at the same time when every shard takes part in
 * at most N moves at once (reading from it or writing to it), so a large rebalance runs as wide as
 * the cluster allows without piling onto one shard; and a simulation of a whole run from each
 * move's expected duration. Pure: no I/O, no clock (the caller says when a move has finished).
 *
 * The rule: moves start in plan order, each as soon as both its shards have a free slot (and
 * fewer than max_running moves run, and the slice's earlier steps have finished); a move waiting
 * for a busy shard does not hold back later moves between free shards. Moves of one slice (the
 * same `slice` value) run one after another, in plan order.
 *
 * Ownership: ferry_sched_new copies what it needs; free with ferry_sched_free. */
#ifndef FERRY_SCHEDULE_H
#define FERRY_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

#define FERRY_SCHED_NONE UINT32_MAX

typedef struct ferry_sched_move {
    uint32_t from;  /* shard index (< n_shards): the replica read (and removed by a move) */
    uint32_t to;    /* shard index, or FERRY_SCHED_NONE (a replica dropped: no copy) */
    uint32_t slice; /* moves with equal values run one at a time, in plan order;
                       FERRY_SCHED_NONE: no such constraint */
} ferry_sched_move;

typedef struct ferry_sched ferry_sched;

/* moves[0..n) in plan order over n_shards shards; per_shard >= 1 moves at once per shard;
 * max_running: moves at once in all (0: no limit beyond the shards'). FERRY_EINVAL for a shard
 * index out of range or from == to. */
int ferry_sched_new(const ferry_sched_move *moves, size_t n, size_t n_shards, unsigned per_shard,
                    unsigned max_running, ferry_sched **out, ferry_err *err);
void ferry_sched_free(ferry_sched *s);

/* Marks as running, and writes into out (at most cap), the moves that may start now, in plan
 * order. Returns how many. */
size_t ferry_sched_start(ferry_sched *s, size_t *out, size_t cap);
/* Move i (started) has finished, successfully or not: its slots are free again. */
void ferry_sched_finish(ferry_sched *s, size_t i);
/* Moves running now, and moves not started yet. */
size_t ferry_sched_running(const ferry_sched *s);
size_t ferry_sched_pending(const ferry_sched *s);

/* A whole run simulated: move i takes seconds[i] once started. start[i] (may be NULL) receives its
 * start time; *makespan the time the last one ends; *peak the most moves running at once. */
int ferry_sched_simulate(const ferry_sched_move *moves, size_t n, size_t n_shards,
                         unsigned per_shard, unsigned max_running, const double *seconds,
                         double *start, double *makespan, size_t *peak, ferry_err *err);

#endif

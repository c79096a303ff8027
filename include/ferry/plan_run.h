/* Running a rebalancing plan (ferry_rebalance_plan_compute): its steps (moves, clones, replica
 * drops) several at a time, with a limit per shard and one bandwidth limit for the whole run
 * (and, optionally, one per shard).
 * `ferry rebalance`, `ferry demo` and the coordinator run plans through this one executor.
 *
 * Scheduling: a step may start when fewer than max_parallel steps run and fewer than
 * max_per_shard running steps read from or write to its source or its target; otherwise the
 * next step in plan order that may start does (steps of a plan are independent slices). A
 * shard-bound plan (every step to one new shard) then runs max_per_shard at a time however
 * large max_parallel is. */
#ifndef FERRY_PLAN_RUN_H
#define FERRY_PLAN_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/move.h"

typedef struct ferry_plan_run_opts {
    unsigned max_parallel;         /* steps at a time, 1..64 (0: 1) */
    unsigned max_per_shard;        /* running steps touching one shard (source or target); 0:
                                      no limit beyond max_parallel */
    uint64_t max_bytes_per_second; /* for the whole run, all steps together; 0: unlimited */
    /* > 1: moves between the same two shards (of slices with no other step in the plan) run as
     * batches of up to this many (ferry_move_run_batch: one freeze, one ATTACH, one MOVE
     * PARTITION, one DETACH for all of them); a batch counts as one step for max_parallel and
     * max_per_shard. 0 or 1: every step alone. */
    unsigned batch;
    uint64_t max_bytes_per_second_per_shard; /* per shard: the bytes it sends (as a step's
                                                source) plus the bytes it receives (as a
                                                target), all steps together; 0: unlimited */
    /* Called after each step (from the step's thread, one call at a time), with its result;
     * rc and err say how it ended. May be NULL. */
    void (*on_step)(const ferry_planned_move *step, const ferry_move_result *res, int rc,
                    const ferry_err *err, void *arg);
    void *arg;
    /* Runs one step (NULL: the real move, clone or drop). A test installs its own to check the
     * scheduling without servers; it may call ferry_rate_account(mo->rate, bytes). */
    int (*step_fn)(const ferry_move_opts *mo, const ferry_planned_move *step,
                   ferry_move_result *res, ferry_err *err, void *arg);
    /* Asked before each step starts (one call at a time, from the thread that would run it):
     * false leaves the step out (counted in `deferred`), so a pause, a closing maintenance
     * window or a stopping daemon starts no new step while the running ones finish. NULL:
     * every step starts. */
    bool (*may_start)(const ferry_planned_move *step, void *arg);
} ferry_plan_run_opts;

typedef struct ferry_plan_run_result {
    size_t done, failed;
    size_t deferred;                /* steps may_start left out */
    double seconds;
    uint64_t bytes_copied;          /* hot and cold bytes sent by every step */
    unsigned max_running;           /* the most steps that ran at once */
    unsigned max_running_per_shard; /* the most running steps that touched one shard */
} ferry_plan_run_result;

/* Runs every step of plan with mo (mo->rate is replaced by the run's limiter). FERRY_OK when every
 * step finished; else the first failing step's code and message (the others still ran). */
int ferry_plan_run(const ferry_move_opts *mo, const ferry_rebalance_plan *plan,
                   const ferry_plan_run_opts *opts, ferry_plan_run_result *out, ferry_err *err);

#endif

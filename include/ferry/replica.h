/* Slices with several replicas (rf > 1): removing one replica, and repairing replicas that
 * missed writes by copying parts from a replica that has them (docs/replicas.md).
 *
 * Every statement goes through ferry_guarded_exec (sqlguard.h); parts travel agent to agent
 * (hot: the part's files; cold: its pointer files); object storage is never written or deleted.
 *
 * Thread safety: each call opens its own catalog handle and clients. */
#ifndef FERRY_REPLICA_H
#define FERRY_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/move.h"

/* Removes the replica of tenant/split on `shard` (the rf was lowered): one catalog batch takes
 * the shard out of the slice's route (CAS; refused when it is the slice's only shard), then,
 * after the grace period (writes in flight land), every partition of the slice is detached on
 * that shard and the detached folders removed through its agent (a plain unlink: cold parts'
 * objects are untouched, other replicas' pointer files still reference them). Running it again
 * after a crash finishes the removal (a shard no longer in the route but still holding the
 * slice's partitions is cleaned). res (may be NULL) gets tenant, split, from = shard, state. */
int ferry_replica_drop(const ferry_move_opts *o, const char *tenant, uint32_t split,
                       const char *shard, ferry_move_result *res, ferry_err *err);

/* One partition of one replicated slice as `ferry repair` found (and left) it. */
typedef struct ferry_repair_item {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    char table[FERRY_NAME_MAX];
    char partition_id[FERRY_NAME_MAX];
    char source[FERRY_NAME_MAX]; /* the replica with the most rows (copied from) */
    char target[FERRY_NAME_MAX]; /* the replica compared with it */
    uint64_t source_rows, target_rows_before, target_rows_after;
    /* "in-sync"; "copy-parts" (the target's parts are a subset of the source's: the missing
     * ones were added); "replace" (parts differ after merges, the target's rows are a subset:
     * its partition was replaced by a snapshot of the source's); with dry_run the action that
     * would be taken; "diverged" (each holds rows the other lacks: not repaired); "error" */
    char action[16];
    bool repaired; /* fingerprints equal after the action */
    size_t parts_sent;
    uint64_t hot_copied, cold_copied; /* bytes sent between agents */
    char detail[256];
} ferry_repair_item;

typedef void (*ferry_repair_fn)(const ferry_repair_item *it, void *arg);

typedef struct ferry_repair_summary {
    size_t slices;           /* replicated slices examined */
    size_t partitions;       /* (partition, replica pair) comparisons */
    size_t in_sync, repaired, failed, unreachable;
    size_t busy;             /* slices or partitions skipped: another flow on them (slice_lease.h) */
    uint64_t hot_copied, cold_copied;
} ferry_repair_summary;

/* Compares every slice with more than one replica in its route (only tenant's when tenant is
 * not NULL): for each managed table and each partition any replica holds, the fingerprints
 * (verify.h) on every replica; the replica with the most rows is the source, each other one
 * whose fingerprint differs is repaired from it (unless dry_run) and verified again. Each
 * comparison is reported through fn (may be NULL). Returns FERRY_EIO when a partition could not
 * be repaired or a replica was unreachable (the summary counts them), after doing all it could.
 * A slice with an unfinished move, a slice a tiering run or another repair holds (its slice
 * lease), or a partition with an unfinished tier job on one of its replicas, is skipped and
 * counted busy (also FERRY_EIO: run again). */
int ferry_repair_run(const ferry_move_opts *o, const char *tenant, bool dry_run,
                     ferry_repair_fn fn, void *arg, ferry_repair_summary *sum, ferry_err *err);

#endif

/* The per-slice lease that keeps tiering and repair off the same slice at the same time (found by
 * the chaos soak: a `ferry repair` of a partition ran between a tier job's swap and its VERIFY,
 * both working through the table's staging table, and the job found none of its frozen rows in
 * the partition). A tiering run holds the lease of every slice it tiers while its jobs run; a
 * repair holds it while it repairs the slice; a move's run holds it while it runs (move.c: the
 * ZooKeeper soak's move started in the middle of a tier wave of its slice). The one that finds
 * it held skips the slice, or the move (its next run takes it up). Lease name:
 * "slice.<tenant>.<split>". */
#ifndef FERRY_FLOW_SLICE_LEASE_H
#define FERRY_FLOW_SLICE_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

/* The slice leases one run holds (the run owns them; released by ferry_slice_leases_release). */
typedef struct ferry_slice_leases {
    struct ferry_slice_lease_item *items;
    size_t n, cap;
} ferry_slice_leases;

/* Takes the lease of slice (tenant, split) for owner into held, or finds it already there.
 * FERRY_ECONFLICT when another run (or another thread's catalog handle) holds it: err names the
 * holder. */
int ferry_slice_lease_take(ferry_catalog *cat, ferry_slice_leases *held, const char *tenant,
                           uint32_t split, const char *owner, ferry_err *err);

/* Takes the lease a mover holds while it runs move move_id ("move.<id>", lib/flow/move.c) into
 * held: while it is held here no `ferry move --resume` can run that move (it is refused as "being
 * run by another mover"). FERRY_ECONFLICT when a mover runs it now. */
int ferry_move_lease_take(ferry_catalog *cat, ferry_slice_leases *held, const char *move_id,
                          const char *owner, ferry_err *err);

/* Gives every lease of held up and empties it (held itself is the caller's). */
void ferry_slice_leases_release(ferry_catalog *cat, ferry_slice_leases *held);

#endif

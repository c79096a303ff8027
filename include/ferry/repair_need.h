/* Slices whose writes were acknowledged while some of their replicas missed them: the router's
 * [router] min_insert_replicas (docs/replicas.md, "Writes with a replica down"). The router
 * records each such slice in the catalog before it answers 200, `ferry repair` (and the
 * coordinator's repair) copies from a replica that took every acknowledged write and clears the
 * record once every partition of the slice is equal on every replica, and removing a replica
 * (ferry_replica_drop) is refused while the record is open, so an acknowledged row is never
 * dropped with the only replicas that hold it.
 *
 * Routers read the records with the routing table and keep reads off the replicas in `missed`
 * while another replica is up (docs/routing.md "Replicas that missed writes"): a record created,
 * deleted or whose shard lists change raises the routing version (include/ferry/catalog.h,
 * FERRY_REPAIR_NEED_ID_PREFIX).
 *
 * One job record per slice: id "repair-need.<tenant>.<split>" (a hash for a tenant name too long
 * for the id: ferry_catalog_repair_need_id), kind "repair-need", state "DONE" (it is a note, not a job that runs: the flows
 * that wait for jobs in flight do not wait for it), data {"tenant", "split", "missed", "held",
 * "writes"}; created/updated: the first and the last acknowledged write it records. The shard
 * lists are ferry_shard_set here and the comma-separated text they always were in the data
 * ("node1,node2"), read as the catalog reads a route (ferry_shard_set_parse_stored). */
#ifndef FERRY_REPAIR_NEED_H
#define FERRY_REPAIR_NEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

#define FERRY_REPAIR_NEED_KIND "repair-need"

typedef struct ferry_repair_need {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    ferry_shard_set missed; /* shards that missed at least one acknowledged write */
    ferry_shard_set held;   /* shards that took every acknowledged write since the record
                             * opened (empty when none did: each missed a different one) */
    uint64_t writes;        /* acknowledged writes recorded */
    int64_t first, last;    /* unix seconds */
    int64_t version;        /* the record's catalog version (for ferry_repair_need_clear) */
} ferry_repair_need;

/* Records one acknowledged write of tenant/split that the shards in `missed` did not take and
 * the shards in `held` did: creates the record, or merges into it by CAS (missed: the union;
 * held: the intersection, minus every shard that missed one). FERRY_EINVAL when the union
 * would name more than FERRY_SHARDS_MAX shards (then nothing is recorded). */
int ferry_repair_need_mark(ferry_catalog *cat, const char *tenant, uint32_t split,
                           const ferry_shard_set *missed, const ferry_shard_set *held,
                           ferry_err *err);
/* The record of tenant/split: *found false when there is none. */
int ferry_repair_need_get(ferry_catalog *cat, const char *tenant, uint32_t split,
                          ferry_repair_need *out, bool *found, ferry_err *err);
/* Every open record, in key order. *out malloc'ed (caller frees), *n entries. */
int ferry_repair_need_list(ferry_catalog *cat, ferry_repair_need **out, size_t *n,
                           ferry_err *err);
/* What the routing switch of a move or clone of tenant/split from `from` to `to` makes of the
 * slice's record: `to` holds a copy of `from` taken after the switch's fence, so it takes
 * from's place in `missed` and `held` (a move; a clone adds it beside from). *out is the record
 * to write in the switch's catalog batch, with the version read now (its CAS: a write recorded
 * meanwhile makes the switch retry; the caller frees it, ferry_record_free). *changed false
 * (and *out untouched): no record, or from in neither list. */
int ferry_repair_need_hand_over(ferry_catalog *cat, const char *tenant, uint32_t split,
                                const char *from, const char *to, bool clone,
                                ferry_record *out, bool *changed, ferry_err *err);
/* Removes the record as it was read (CAS on need->version): FERRY_ECONFLICT when a later
 * acknowledged write updated it meanwhile (it stays, for the next repair). Gone already: OK. */
int ferry_repair_need_clear(ferry_catalog *cat, const ferry_repair_need *need, ferry_err *err);

#endif

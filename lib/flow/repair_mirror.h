/* A repair's intent to make a replica's part records its source's (replica.c): written before
 * the repair first changes the target's partition, removed once the records are mirrored. A
 * repair cut in between (killed, an error) leaves the target holding the source's cold parts
 * (or its own gone) while the catalog's part records still say otherwise, and the next repair
 * finds the partition in sync, so nothing else would ever mend them (the sweep's drift, seen in
 * session 11's chaos soak). The next repair of the slice replays an open intent: it clears what
 * the cut run left in the target's staging table and makes the records agree with the target's
 * own pointer files (ferry_part_records_reconcile), then removes the intent.
 *
 * One job record per (table, partition, target): id "repair-mirror.<target>.<table>.<pid>" (a
 * hash when that is too long), kind "repair-mirror", state "DONE" (a note, like repair-need: the
 * flows that wait for jobs in flight do not wait for it), data {"tenant", "split", "table",
 * "partition_id", "target", "source"}. */
#ifndef FERRY_FLOW_REPAIR_MIRROR_H
#define FERRY_FLOW_REPAIR_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

#define FERRY_REPAIR_MIRROR_KIND "repair-mirror"

typedef struct repair_mirror {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    char table[FERRY_NAME_MAX], partition_id[FERRY_NAME_MAX];
    char target[FERRY_NAME_MAX], source[FERRY_NAME_MAX];
    bool done; /* replayed or closed in this run */
} repair_mirror;

typedef struct repair_mirror_set {
    repair_mirror *items; /* malloc'ed; repair_mirror_set_free */
    size_t n;
} repair_mirror_set;

/* Every open intent in the catalog (one scan of the job records). */
int repair_mirror_list(ferry_catalog *cat, repair_mirror_set *out, ferry_err *err);
void repair_mirror_set_free(repair_mirror_set *s);
/* The open intent for (table, pid, target) in s, or NULL. */
repair_mirror *repair_mirror_find(repair_mirror_set *s, const char *table, const char *pid,
                                  const char *target);

/* Records the intent m (durable when this returns OK). One already there: OK, unchanged. */
int repair_mirror_open(ferry_catalog *cat, const repair_mirror *m, ferry_err *err);
/* Removes the intent for (table, pid, target); gone already: OK. */
int repair_mirror_close(ferry_catalog *cat, const char *table, const char *pid,
                        const char *target, ferry_err *err);

#endif

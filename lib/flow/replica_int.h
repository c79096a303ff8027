/* Private: making one partition of one replica equal to another replica's (used by `ferry
 * repair` and by the clone mode of moves, which adds a replica). See replica_sync.c. */
#ifndef FERRY_REPLICA_INT_H
#define FERRY_REPLICA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/verify.h"
#include "flow/move_env.h"

typedef struct rs_result {
    char action[16];     /* in-sync, copy-parts, replace, diverged (see ferry_repair_item) */
    bool repaired;       /* fingerprints equal at the end */
    bool changed;        /* a round's statement added parts to dst or replaced its partition
                          * (a round can end without one, e.g. when the source's parts changed
                          * under it, and dst can still be equal at the end: its own writes
                          * landed), so the action alone does not say dst holds the source's
                          * parts */
    size_t parts_sent;
    size_t parts_sent_live; /* of them, pointer parts sent from the table's folder (no freeze) */
    uint64_t hot_copied, cold_copied;
    uint64_t src_rows, dst_rows_before, dst_rows_after;
    char detail[256];
} rs_result;

#define RS_STAGING_SUFFIX "_ferry_staging" /* the same staging table moves use */

/* Makes partition pid of table t on dst equal to the one on src, in up to `rounds` rounds:
 *  - equal fingerprints: nothing to do;
 *  - dst holds more rows than src: "diverged" (the caller picks the source with the most rows);
 *  - dst's active parts are a sub-multiset of src's (hash_of_all_files, rows): the missing parts
 *    are frozen on src (a partition of cold parts only: sent live, no freeze), sent agent to agent into dst's staging table and added to the real
 *    table with MOVE PARTITION (nothing dst holds is touched): "copy-parts". Before that the
 *    grace period is waited and dst's parts listed again, so a batch in flight to dst is not
 *    copied twice;
 *  - otherwise, if every row of dst is also in src (as a multiset of row hashes), dst's
 *    partition is replaced by a snapshot of src's (staging made equal to the frozen parts, then
 *    REPLACE PARTITION ... FROM staging; on ClickHouse before 26.7, whose REPLACE leaves the
 *    replaced parts to be loaded again by a restart, DETACH PART of each of dst's parts and
 *    ATTACH PARTITION ... FROM staging in one ALTER): "replace"; if not, "diverged" and nothing
 *    changes.
 * After each round the fingerprints are compared again. freeze ([A-Za-z0-9_]) names the
 * snapshot on src; it is removed before returning (a leftover of a crash is removed first).
 * dry_run: only decides the action. Returns an error only for I/O failures; the outcome is in
 * out. */
typedef struct rs_before_change {
    int (*fn)(void *arg, ferry_err *err);
    int (*check)(void *arg, ferry_err *err);
    void *arg;
} rs_before_change;

/* before (may be NULL): fn (may be NULL) is called once, before the first change on dst (its
 * staging table filled, then the partition changed), never with dry_run: a repair journals there
 * its intent to mirror the part records (repair_mirror.h). check (may be NULL) is called in every
 * round once staging holds the parts, right before the target's parts are listed and the
 * partition changed: a repair waits there for the routers' open writes (ferry/fence.h). An error
 * of either stops the sync with the target's table unchanged by that round. */
int rs_sync_partition(mv_conn *src, mv_conn *dst, const ferry_table_def *t, const char *pid,
                      const char *freeze, unsigned grace_ms, int rounds, bool dry_run,
                      const rs_before_change *before, rs_result *out, ferry_err *err);

/* Empties partition pid of t's staging table on dst (its parts detached, then every detached
 * folder of pid there removed): what a sync cut between filling staging and moving the parts
 * on left (pointer files there would be references the catalog does not know). No staging
 * table: nothing to do. */
int rs_staging_clear(mv_conn *dst, const ferry_table_def *t, const char *pid, ferry_err *err);

/* Fingerprints partition pid of table t on c (verify.h). When the read fails and CHECK TABLE
 * finds parts of the partition broken (e.g. an empty marks file: ClickHouse wrote a merged part
 * on a full disk, and every read of the partition fails with "Empty marks file"), those parts
 * are named in the error, and with detach (c is a replica being made equal to another one, which
 * holds the rows) they are detached (kept in detached/ under their names, for a person), a
 * warning is logged and the partition is read again; *n_detached (may be NULL) counts them.
 * Without detach, broken parts give FERRY_EIO with a message naming them. */
int rs_fingerprint(mv_conn *c, const ferry_table_def *t, const char *pid, bool detach,
                   ferry_fingerprint *fp, size_t *n_detached, ferry_err *err);

/* The partition ids (active parts) of tenant/split in db.table on c, added to *ids (a growing
 * array of *n names; the caller frees *ids). */
int rs_slice_pids(mv_conn *c, const ferry_table_def *t, const char *table, const char *tenant,
                  uint32_t split, char (**ids)[FERRY_NAME_MAX], size_t *n, ferry_err *err);

/* Detaches every partition of tenant/split in the real table t on c and removes the detached
 * folders through the agent (cold parts: pointer files only). *n_parts counts partitions. */
int rs_remove_slice(mv_conn *c, const ferry_table_def *t, const char *tenant, uint32_t split,
                    size_t *n_parts, ferry_err *err);

#endif

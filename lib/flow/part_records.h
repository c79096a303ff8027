/* Keeping the catalog's part records true when a flow changes which servers hold a slice's cold
 * parts (docs/catalog.md, "part"): a move hands its source's references to the target, a clone
 * adds the target beside the source, a replica drop removes a server, a repair makes the
 * repaired replica's references its source's. Without this the sweep
 * reports every moved cold part as drift (catalog_only on the old server, server_only on the new
 * one). */
#ifndef FERRY_FLOW_PART_RECORDS_H
#define FERRY_FLOW_PART_RECORDS_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/agent_ops.h"
#include "ferry/catalog.h"
#include "ferry/err.h"

/* For every part record of `table` under one of the partition ids that lists `from` among its
 * servers: add `to` (when not NULL) and, unless keep_from, remove `from`. One catalog batch
 * (version-checked; re-read and retried when another writer changed a record meanwhile).
 * Idempotent: a second call changes nothing, so a resumed flow may call it again. *changed (may
 * be NULL) receives the number of records rewritten. */
int ferry_part_records_reassign(ferry_catalog *cat, const char *table, const char *const *pids,
                                size_t n_pids, const char *from, const char *to, bool keep_from,
                                size_t *changed, ferry_err *err);

/* After a repair made `to`'s copy of partition `pid` equal to `like`'s: every part record of
 * (table, pid) names `to` exactly when it names `like` (adds it, or removes a reference the
 * repair replaced). One catalog batch, retried like the above; idempotent. */
int ferry_part_records_mirror(ferry_catalog *cat, const char *table, const char *pid,
                              const char *like, const char *to, size_t *changed, ferry_err *err);

/* Every part record of (table, pid) names `server` exactly when the server's own pointer files
 * of the partition say it references the part: a live pointer file (an active part's) naming
 * one of the record's objects adds the server, and a listed server none of whose pointer files
 * (active or detached) names any of them is removed; the sweep's server_only and catalog_only
 * drift, for one partition of one server. Used by a repair's replay after a run was cut
 * between copying parts and mirroring the records (replica.c), when the source's records are no
 * longer a guide. The caller keeps other flows off the partition meanwhile (the slice's lease;
 * no tier job open on it). An unreadable pointer file is FERRY_EIO and changes nothing. One
 * catalog batch, retried like the above; idempotent. */
int ferry_part_records_reconcile(ferry_catalog *cat, ferry_agent_client *ag, const char *db,
                                 const char *table, const char *pid, const char *server,
                                 size_t *changed, ferry_err *err);

#endif

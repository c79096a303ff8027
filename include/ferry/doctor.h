/* ferry doctor: checks the safety rules on a live cluster, each finding with what to fix:
 *   delete_refused       the clickhouse credential cannot delete: a canary object is created
 *                        with the uploader role, a delete is tried with the clickhouse (and the
 *                        uploader) credential and must be refused by the store, then the janitor
 *                        deletes it (S3 only; a local store has no credentials)
 *   versioning           bucket versioning is on, where the store implements it
 *   clickhouse_version   every server runs the pinned ClickHouse version and reads the pinned
 *                        pointer format
 *   unmanaged_cold       no table outside the catalog's managed tables uses a storage policy
 *                        with an object-storage disk (its references would be invisible to
 *                        retention's planning and to moves)
 *   shard_grants         the shard's ClickHouse user (the identity ferry router sends every
 *                        client's query with) reads and inserts the managed tables, may kill
 *                        queries and read URLs, and may not drop, truncate, delete, reach the
 *                        object store or files, see secrets, back up or manage users (from its
 *                        SHOW GRANTS FINAL; docs/security.md)
 *   catalog_acl          a ZooKeeper catalog uses a digest ACL (auth_file)
 *   object_access        reports [cluster] clickhouse_object_access; in read-only mode the store
 *                        must refuse a PUT signed with the clickhouse credential (a probe key; an
 *                        object it did create is deleted at once by the janitor) and no server
 *                        may merge parts on an object-storage volume (doctor_access.c)
 *   tier_holds           no unfinished tier job has held its table's merges stopped (its swap
 *                        may have run and is not verified) for more than 10 minutes (warn) or
 *                        an hour (fail) since its freeze (doctor_tier_holds.c)
 * Statuses: pass, fail, warn (not a failure), unsupported (the store cannot tell: not a
 * failure, said plainly), skipped. */
#ifndef FERRY_DOCTOR_H
#define FERRY_DOCTOR_H

#include <jansson.h>

#include "ferry/err.h"

struct ferry_fleet;

/* Runs every check. *report (caller decrefs) is {ok, checks: [{check, status, server?,
 * message, fix?}]}; ok is false when any check failed. Errors only for what stops doctor
 * itself (memory). */
int ferry_doctor_run(struct ferry_fleet *fl, json_t **report, ferry_err *err);
/* The same, leaving out the checks named in skip (comma-separated; NULL: none), e.g. in a lab,
 * whose nodes have no access control for shard_grants to find. */
int ferry_doctor_run_skip(struct ferry_fleet *fl, const char *skip, json_t **report,
                          ferry_err *err);

#endif

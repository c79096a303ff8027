/* Private: loading the parts waiting in a staging table's detached/ into the staging table, the
 * one step where tiering, moves, clones and repair hand ClickHouse parts ferry wrote (pointer
 * parts of cold partitions, real files of hot ones). Two routes, by [cluster]
 * clickhouse_object_access (mv_conn.ro_objects):
 *
 *  read-create (default)  ALTER TABLE staging ATTACH PARTITION ID ... (one statement)
 *  read-only              the blog's strictly read-only route, through a load table beside
 *                         staging (`<staging>_load`, so that the staging table other flows use
 *                         is never detached): DETACH TABLE load, the agent moves the parts'
 *                         folders from staging's detached/ straight into the load table's data
 *                         directories (place-parts, under fresh block numbers), ATTACH TABLE
 *                         load (ClickHouse loads them as a server start would), then MOVE
 *                         PARTITION ... TO TABLE staging; no part ferry wrote is ever given to
 *                         ATTACH PARTITION
 *
 * Afterwards the flows move the partitions into place as before (REPLACE PARTITION, ATTACH
 * PARTITION FROM, MOVE PARTITION TO TABLE). Test-only crash points of the read-only route:
 * FERRY_TEST_CRASH_AFTER=STAGE:detached | STAGE:placed | STAGE:attached | STAGE:moved
 * (docs/object-store.md). */
#ifndef FERRY_STAGING_LOAD_H
#define FERRY_STAGING_LOAD_H

#include <stddef.h>

#include "flow/move_env.h"

/* Loads every detached part of the partitions pids[0..n) of db.staging on c (parts with a
 * reason prefix such as broken_ or ignored_ are left alone, as ATTACH PARTITION leaves them).
 * Idempotent: a part already loaded is no longer in detached/. On an error of the read-only
 * route after DETACH TABLE the load table is attached again before returning. */
int stg_load(mv_conn *c, const char *db, const char *staging, const char *const *pids, size_t n,
             ferry_err *err);

/* Read-only mode: finishes a load a crash cut (the load table attached again, whatever it holds
 * moved into staging). A no-op in read-create mode, and a query or two when there is nothing to
 * finish. Every flow calls it before it looks at a staging table it may have loaded. */
int stg_recover(mv_conn *c, const char *db, const char *staging, ferry_err *err);

#endif

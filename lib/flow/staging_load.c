/* Loading the parts waiting in a staging table's detached/ (staging_load.h): ATTACH PARTITION in
 * read-create mode, the blog's strictly read-only route in read-only mode.
 *
 * The read-only route, step by step (each repeatable after a kill -9):
 *   0. recover: a staging table a crash left detached is attached again (what was placed loads);
 *   1. list the detached parts of the partitions (system.detached_parts, no reason prefix), the
 *      table's data paths (system.tables) and the highest block number of any of its parts, in
 *      any state (system.parts);
 *   2. DETACH TABLE staging                                     crash point STAGE:detached
 *   3. agent place-parts: each folder renamed from detached/ into the data directory of its disk,
 *      under a fresh single-block name above that number (what ATTACH PARTITION would name it):
 *      a part keeps its name on no side, so no empty part an earlier REPLACE or MOVE PARTITION
 *      left to cover a block range can hide it                 crash point STAGE:placed
 *   4. ATTACH TABLE staging: ClickHouse loads the folders as at a server start; SYSTEM STOP
 *      MERGES staging again (the stop does not survive the re-attach, and every flow wants
 *      staging's parts unmerged)                               crash point STAGE:attached
 * A folder is in detached/ or in the data directory, never both (a rename), so a step repeated
 * after a crash places only what is still in detached/. */
#include "flow/staging_load.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/strutil.h"

/* Test-only fault injection, the convention of moves and tiering: FERRY_TEST_CRASH_AFTER=<point>
 * kills this process at that point, as kill -9 would. Never set in production. */
static void crash_point(const char *point)
{
    const char *e = getenv("FERRY_TEST_CRASH_AFTER");
    if (e && !strcmp(e, point)) {
        ferry_log(FERRY_LOG_WARN, "msg=\"test crash point reached, killing myself\" point=%s",
                  point);
        fflush(NULL);
        raise(SIGKILL);
    }
}

static void sql_table(ferry_buf *b, const char *db, const char *table)
{
    ferry_sql_ident(db, b);
    ferry_buf_putc(b, '.');
    ferry_sql_ident(table, b);
}

/* One statement "<verb> TABLE db.table" (DETACH, ATTACH) or "SYSTEM STOP MERGES db.table". */
static int table_stmt(mv_conn *c, const char *verb, const char *db, const char *table,
                      ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, verb);
    ferry_buf_putc(&sql, ' ');
    sql_table(&sql, db, table);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    return rc;
}

/* How many tables named db.table are attached (0 or 1). */
static int table_attached(mv_conn *c, const char *db, const char *table, bool *attached,
                          ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT count() FROM system.tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND name = ");
    ferry_sql_quote(table, &sql);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    *attached = !rc && rows.n_rows == 1 && strcmp(ferry_ch_rows_get(&rows, 0, 0), "0");
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* The lease that serializes the read-only loads of db.staging on c's server: two flows (moves
 * into one target side by side, a tiering run beside them) must not re-attach one table over
 * each other, or one's ATTACH TABLE could load the table while the other is still placing
 * folders (those would load at some later re-attach instead). Waited for up to
 * STG_LOCK_WAIT_MS; none without a catalog (c->cat NULL). */
#define STG_LOCK_WAIT_MS 120000
static int stg_lock(mv_conn *c, const char *db, const char *staging, ferry_lease **lease,
                    ferry_err *err)
{
    *lease = NULL;
    if (!c->cat)
        return FERRY_OK;
    char name[3 * FERRY_NAME_MAX + 16], owner[64];
    snprintf(name, sizeof name, "stage.%s.%s.%s", c->name, db, staging);
    snprintf(owner, sizeof owner, "pid %ld", (long)getpid());
    for (int waited = 0;; waited += 50) {
        ferry_err e = {0};
        int rc = ferry_catalog_lease_acquire(c->cat, name, owner, lease, &e);
        if (rc != FERRY_ECONFLICT) {
            if (rc)
                *err = e;
            return rc;
        }
        if (waited == 0)
            FLOG_INFO("msg=\"waiting for another flow's load of the staging table\" server=%s "
                      "table=%s.%s holder=\"%s\"", c->name, db, staging, e.msg);
        if (waited >= STG_LOCK_WAIT_MS)
            return ferry_err_set(err, FERRY_ETIMEOUT, "%s: another flow has been loading staging "
                                 "table %s.%s for %d s (%s); try again later", c->name, db,
                                 staging, STG_LOCK_WAIT_MS / 1000, e.msg);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void stg_unlock(mv_conn *c, ferry_lease *lease)
{
    if (lease)
        ferry_catalog_lease_release(c->cat, lease);
}

/* stg_recover's work, with the lease held. */
static int recover_locked(mv_conn *c, const char *db, const char *staging, ferry_err *err)
{
    bool attached = false;
    int rc = table_attached(c, db, staging, &attached, err);
    if (rc || attached)
        return rc;
    /* Not attached: either never created (the flow creates it as usual) or left detached by a
     * crash of the route. system.detached_tables tells them apart; a database engine that does
     * not list detached tables (ClickHouse's Overlay, the lab's, refuses to) gets the ATTACH
     * tried, which fails harmlessly when there is no such table. */
    ferry_err e = {0};
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT count() FROM system.detached_tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(staging, &sql);
    bool listed = mv_sql(c, ferry_buf_cstr(&sql), &rows, &e) == FERRY_OK;
    bool detached = listed && rows.n_rows == 1 && strcmp(ferry_ch_rows_get(&rows, 0, 0), "0");
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    if (listed && !detached)
        return FERRY_OK;
    if (table_stmt(c, "ATTACH TABLE", db, staging, &e) == FERRY_OK) {
        FLOG_WARN("msg=\"staging table found detached (an interrupted load); attached again\" "
                  "server=%s table=%s.%s", c->name, db, staging);
        return table_stmt(c, "SYSTEM STOP MERGES", db, staging, err);
    }
    FLOG_DEBUG("msg=\"staging table not attached and not detached\" server=%s table=%s.%s "
               "err=\"%s\"", c->name, db, staging, e.msg);
    return FERRY_OK;
}

int stg_recover(mv_conn *c, const char *db, const char *staging, ferry_err *err)
{
    if (!c->ro_objects)
        return FERRY_OK;
    bool attached = false;
    int rc = table_attached(c, db, staging, &attached, err);
    if (rc || attached)
        return rc; /* the common case: no lease needed */
    ferry_lease *lease = NULL;
    if (!(rc = stg_lock(c, db, staging, &lease, err)))
        rc = recover_locked(c, db, staging, err); /* a load in progress has finished by now */
    stg_unlock(c, lease);
    return rc;
}

/* read-create: one ALTER TABLE staging ATTACH PARTITION ID ... for every partition. */
static int attach_partitions(mv_conn *c, const char *db, const char *staging,
                             const char *const *pids, size_t n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    sql_table(&sql, db, staging);
    for (size_t i = 0; i < n; i++) {
        ferry_buf_puts(&sql, i ? ", ATTACH PARTITION ID " : " ATTACH PARTITION ID ");
        ferry_sql_quote(pids[i], &sql);
    }
    int rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    return rc;
}

/* Step 1: the place-parts request for the detached parts of pids (NULL in *req when there are
 * none): {database, table, data_paths: [...], parts: [{disk, name, to}]}. */
static int plan_place(mv_conn *c, const char *db, const char *staging, const char *const *pids,
                      size_t n, json_t **req, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows det = {0}, blk = {0}, paths = {0};
    json_t *parts = NULL, *dps = NULL;
    *req = NULL;
    ferry_buf_puts(&sql, "SELECT name, disk, partition_id, level FROM system.detached_parts "
                         "WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(staging, &sql);
    ferry_buf_puts(&sql, " AND ifNull(reason, '') = '' AND level IS NOT NULL AND partition_id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(&sql, ',');
        ferry_sql_quote(pids[i], &sql);
    }
    ferry_buf_puts(&sql, ") ORDER BY partition_id, min_block_number, name");
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &det, err);
    if (rc || det.n_rows == 0)
        goto out;
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT max(max_block_number) FROM system.parts WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(staging, &sql);
    if ((rc = mv_sql(c, ferry_buf_cstr(&sql), &blk, err)))
        goto out;
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT arrayJoin(data_paths) FROM system.tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND name = ");
    ferry_sql_quote(staging, &sql);
    if ((rc = mv_sql(c, ferry_buf_cstr(&sql), &paths, err)))
        goto out;
    if (paths.n_rows == 0) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s: staging table %s.%s has no data path",
                           c->name, db, staging);
        goto out;
    }
    uint64_t block = 0;
    if (blk.n_rows == 1)
        ferry_parse_u64(ferry_ch_rows_get(&blk, 0, 0), &block);
    parts = json_array();
    dps = json_array();
    rc = parts && dps ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t r = 0; !rc && r < paths.n_rows; r++)
        if (json_array_append_new(dps, json_string(ferry_ch_rows_get(&paths, r, 0))))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t r = 0; !rc && r < det.n_rows; r++) {
        /* a fresh single block, as ATTACH PARTITION names an attached part, the level kept */
        char to[FERRY_NAME_MAX + 64];
        block++;
        snprintf(to, sizeof to, "%s_%llu_%llu_%s", ferry_ch_rows_get(&det, r, 2),
                 (unsigned long long)block, (unsigned long long)block,
                 ferry_ch_rows_get(&det, r, 3));
        if (json_array_append_new(parts, json_pack("{s:s, s:s, s:s}", "disk",
                                                   ferry_ch_rows_get(&det, r, 1), "name",
                                                   ferry_ch_rows_get(&det, r, 0), "to", to)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if (!rc && !(*req = json_pack("{s:s, s:s, s:O, s:O}", "database", db, "table", staging,
                                  "data_paths", dps, "parts", parts)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(parts);
    json_decref(dps);
    ferry_ch_rows_free(&det);
    ferry_ch_rows_free(&blk);
    ferry_ch_rows_free(&paths);
    ferry_buf_free(&sql);
    return rc;
}

int stg_load(mv_conn *c, const char *db, const char *staging, const char *const *pids, size_t n,
             ferry_err *err)
{
    if (n == 0)
        return FERRY_OK;
    if (!c->ro_objects)
        return attach_partitions(c, db, staging, pids, n, err);
    json_t *req = NULL, *resp = NULL;
    ferry_lease *lease = NULL;
    int rc = stg_lock(c, db, staging, &lease, err);
    if (!rc)
        rc = recover_locked(c, db, staging, err);
    if (!rc)
        rc = plan_place(c, db, staging, pids, n, &req, err);
    if (rc || !req)
        goto out; /* nothing waits in detached/: loaded already (a repeated step) */
    if ((rc = table_stmt(c, "DETACH TABLE", db, staging, err)))
        goto out;
    crash_point("STAGE:detached");
    rc = mv_agent(c, "place-parts", req, &resp, NULL, err);
    if (!rc)
        crash_point("STAGE:placed");
    /* attached again whatever happened: a failed placement left some folders in detached/ (a
     * rename is all or nothing per part) and the next attempt places them */
    ferry_err e2 = {0};
    int arc = table_stmt(c, "ATTACH TABLE", db, staging, rc ? &e2 : err);
    if (!arc)
        arc = table_stmt(c, "SYSTEM STOP MERGES", db, staging, rc ? &e2 : err);
    if (!rc && arc)
        rc = arc;
    else if (rc && arc)
        FLOG_WARN("msg=\"staging table not attached again after a failed load (the next run "
                  "attaches it)\" server=%s table=%s.%s err=\"%s\"", c->name, db, staging,
                  e2.msg);
    if (!rc) {
        crash_point("STAGE:attached");
        FLOG_INFO("msg=\"staging loaded by re-attaching the table (read-only object access)\" "
                  "server=%s table=%s.%s parts=%zu", c->name, db, staging,
                  json_array_size(json_object_get(req, "parts")));
    }
out:
    stg_unlock(c, lease);
    json_decref(req);
    json_decref(resp);
    return rc;
}

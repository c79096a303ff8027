/* Loading the parts waiting in a staging table's detached/ (staging_load.h): ATTACH PARTITION in
 * read-create mode, the blog's strictly read-only route in read-only mode.
 *
 * The read-only route goes through a second table beside staging, the *load table*
 * `<staging>_load` (same definition; only this file uses it), so that the staging table the
 * flows read and write is never detached: another flow working on it at the same moment (a
 * second move into the same server) must not find it gone. Under the catalog lease
 * stage.<server>.<db>.<staging>, step by step (each repeatable after a kill -9):
 *   0. finish an interrupted load: a load table left detached is attached again, and whatever
 *      it holds is moved into staging (step 5);
 *   1. list the detached parts of the partitions in staging (system.detached_parts, no reason
 *      prefix), the load table's data paths and the highest block number of any of its parts
 *      in any state;
 *   2. DETACH TABLE load                                         crash point STAGE:detached
 *   3. agent place-parts: each folder renamed from staging's detached/ into the load table's
 *      data directory on the same disk, under a fresh single-block name above that number (as
 *      ATTACH PARTITION would name it: no empty part left to cover a block range by an earlier
 *      MOVE PARTITION can hide it)                               crash point STAGE:placed
 *   4. ATTACH TABLE load (ClickHouse loads the folders as at a server start), SYSTEM STOP MERGES
 *      load (the stop does not survive a re-attach)               crash point STAGE:attached
 *   5. ALTER TABLE load MOVE PARTITION ID ... TO TABLE staging: atomic per partition, so a
 *      repeated step moves only what is still there               crash point STAGE:moved
 * A folder is in detached/, in the load table or in staging, never in two (renames and
 * MOVE PARTITION), so nothing is loaded twice. */
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
#include "ferry/testknob.h"

#define STG_LOAD_SUFFIX "_load"
#define STG_LOCK_WAIT_MS 120000

/* Test-only fault injection (include/ferry/testknob.h), the convention of moves and tiering:
 * FERRY_TEST_CRASH_AFTER=<point> kills this process at that point, as kill -9 would. */
static void crash_point(const char *point) { ferry_fault_point("FERRY_TEST_CRASH_AFTER", point); }

/* One statement "<verb> db.table" (DETACH TABLE, ATTACH TABLE, SYSTEM STOP MERGES). */
static int table_stmt(mv_conn *c, const char *verb, const char *db, const char *table,
                      ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, verb);
    ferry_buf_putc(&sql, ' ');
    ferry_sql_db_table(db, table, &sql);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    return rc;
}

/* The first column of a query's rows, from a query ending in "<column> = " + quoted db/table. */
static int query_table(mv_conn *c, const char *head, const char *db, const char *table,
                       const char *tail, ferry_ch_rows *rows, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, head);
    ferry_buf_puts(&sql, " database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND ");
    ferry_buf_puts(&sql, strstr(head, "system.tables") ? "name = " : "table = ");
    ferry_sql_quote(table, &sql);
    if (tail)
        ferry_buf_puts(&sql, tail);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), rows, err);
    ferry_buf_free(&sql);
    return rc;
}

static bool count_positive(const ferry_ch_rows *rows)
{
    return rows->n_rows == 1 && strcmp(ferry_ch_rows_get(rows, 0, 0), "0");
}

static void load_name(const char *staging, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s%s", staging, STG_LOAD_SUFFIX);
}

/* The lease that serializes the read-only loads into db.staging on c's server: the load table
 * is one per staging table, and two flows (moves into one target side by side, a tiering run
 * beside them) must take turns with it. Waited for up to STG_LOCK_WAIT_MS; none without a
 * catalog (c->cat NULL). */
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

/* The load table attached again when a crash left it detached, created AS staging when missing
 * and `create` is set, its merges stopped. *exists (may be NULL): whether it is there now. */
static int ensure_load(mv_conn *c, const char *db, const char *staging, const char *load,
                       bool create, bool *exists, ferry_err *err)
{
    bool ignored;
    if (!exists)
        exists = &ignored;
    *exists = false;
    ferry_ch_rows rows = {0};
    int rc = query_table(c, "SELECT count() FROM system.tables WHERE", db, load, NULL, &rows, err);
    bool attached = !rc && count_positive(&rows);
    ferry_ch_rows_free(&rows);
    if (rc)
        return rc;
    if (!attached) {
        /* Detached by a crash of the route, or never created. system.detached_tables tells them
         * apart; an engine that does not list detached tables (ClickHouse's Overlay, the
         * lab's, refuses to) gets the ATTACH tried, which fails harmlessly when there is no
         * such table. */
        ferry_err e = {0};
        bool listed = query_table(c, "SELECT count() FROM system.detached_tables WHERE", db, load,
                                  NULL, &rows, &e) == FERRY_OK;
        bool detached = listed && count_positive(&rows);
        ferry_ch_rows_free(&rows);
        if ((!listed || detached) && table_stmt(c, "ATTACH TABLE", db, load, &e) == FERRY_OK) {
            FLOG_WARN("msg=\"load table found detached (an interrupted load); attached again\" "
                      "server=%s table=%s.%s", c->name, db, load);
            attached = true;
        }
    }
    if (!attached && create) {
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
        ferry_sql_db_table(db, load, &sql);
        ferry_buf_puts(&sql, " AS ");
        ferry_sql_db_table(db, staging, &sql);
        rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
        ferry_buf_free(&sql);
        attached = rc == FERRY_OK;
    }
    *exists = attached;
    return rc || !attached ? rc : table_stmt(c, "SYSTEM STOP MERGES", db, load, err);
}

/* Step 5 (and step 0): every partition the load table holds moved into staging, one ALTER. */
static int move_into_staging(mv_conn *c, const char *db, const char *staging, const char *load,
                             size_t *moved, ferry_err *err)
{
    ferry_ch_rows rows = {0};
    ferry_buf sql = FERRY_BUF_INIT;
    *moved = 0;
    int rc = query_table(c, "SELECT DISTINCT partition_id FROM system.parts WHERE active AND "
                            "rows > 0 AND", db, load, " ORDER BY partition_id", &rows, err);
    if (rc || rows.n_rows == 0)
        goto out;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(db, load, &sql);
    for (size_t r = 0; r < rows.n_rows; r++) {
        ferry_buf_puts(&sql, r ? ", MOVE PARTITION ID " : " MOVE PARTITION ID ");
        ferry_sql_quote(ferry_ch_rows_get(&rows, r, 0), &sql);
        ferry_buf_puts(&sql, " TO TABLE ");
        ferry_sql_db_table(db, staging, &sql);
    }
    rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
    if (!rc)
        *moved = rows.n_rows;
out:
    ferry_buf_free(&sql);
    ferry_ch_rows_free(&rows);
    return rc;
}

/* Step 0, with the lease held; create: make the load table when missing (a load is about to
 * use it; staging exists). */
static int finish_interrupted(mv_conn *c, const char *db, const char *staging, const char *load,
                              bool create, ferry_err *err)
{
    size_t moved = 0;
    bool exists = false;
    int rc = ensure_load(c, db, staging, load, create, &exists, err);
    if (!rc && exists)
        rc = move_into_staging(c, db, staging, load, &moved, err);
    if (!rc && moved)
        FLOG_WARN("msg=\"an interrupted load finished: its partitions moved into staging\" "
                  "server=%s table=%s.%s partitions=%zu", c->name, db, staging, moved);
    return rc;
}

int stg_recover(mv_conn *c, const char *db, const char *staging, ferry_err *err)
{
    if (!c->ro_objects)
        return FERRY_OK;
    char load[FERRY_NAME_MAX + 48];
    load_name(staging, load, sizeof load);
    /* the common case without the lease: the load table attached and empty (or never made) */
    ferry_ch_rows rows = {0};
    int rc = query_table(c, "SELECT count() FROM system.parts WHERE active AND rows > 0 AND", db,
                         load, NULL, &rows, err);
    bool holds = !rc && count_positive(&rows);
    ferry_ch_rows_free(&rows);
    if (!rc && !holds)
        rc = query_table(c, "SELECT count() FROM system.tables WHERE", db, load, NULL, &rows, err);
    bool attached = holds || (!rc && count_positive(&rows));
    ferry_ch_rows_free(&rows);
    if (rc || (attached && !holds))
        return rc;
    ferry_lease *lease = NULL;
    if (!(rc = stg_lock(c, db, staging, &lease, err)))
        rc = finish_interrupted(c, db, staging, load, false, err);
    stg_unlock(c, lease);
    return rc;
}

/* read-create: one ALTER TABLE staging ATTACH PARTITION ID ... for every partition. */
/* ATTACH PARTITION renames each detached part X to attaching_X while it loads it, and renames
 * them back when the statement fails; a server killed in between keeps attaching_X. When the
 * flow sends X again (a resumed move, clone, repair or tiering wave), the next ATTACH fails with
 * "in rename: Directory not empty" on every try (found by the chaos soak: a move stopped in
 * CLONE for good). Such a leftover is a copy of a part the flow sends again, nothing else
 * refers to it, and removing its folder touches no object in object storage (the agent removes
 * local files only), so the leftovers of the statement's partitions are removed. *removed: how
 * many. */
static int remove_attaching(mv_conn *c, const char *db, const char *staging,
                            const char *const *pids, size_t n, size_t *removed, ferry_err *err)
{
    ferry_buf tail = FERRY_BUF_INIT;
    ferry_ch_rows det = {0};
    *removed = 0;
    ferry_buf_puts(&tail, " AND startsWith(name, 'attaching_') AND partition_id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(&tail, ',');
        ferry_sql_quote(pids[i], &tail);
    }
    ferry_buf_putc(&tail, ')');
    const char **names = NULL;
    int rc = query_table(c, "SELECT DISTINCT name FROM system.detached_parts WHERE", db, staging,
                         ferry_buf_cstr(&tail), &det, err);
    if (!rc && det.n_rows && !(names = calloc(det.n_rows, sizeof *names)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < det.n_rows; i++)
        names[i] = ferry_ch_rows_get(&det, i, 0);
    if (!rc && det.n_rows) {
        rc = ferry_agent_remove_detached_n(c->ag, db, staging, names, det.n_rows, NULL, err);
        if (!rc)
            *removed = det.n_rows;
    }
    free(names);
    ferry_ch_rows_free(&det);
    ferry_buf_free(&tail);
    return rc;
}

static int attach_partitions(mv_conn *c, const char *db, const char *staging,
                             const char *const *pids, size_t n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(db, staging, &sql);
    for (size_t i = 0; i < n; i++) {
        ferry_buf_puts(&sql, i ? ", ATTACH PARTITION ID " : " ATTACH PARTITION ID ");
        ferry_sql_quote(pids[i], &sql);
    }
    int rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
    if (rc && strstr(err->msg, "/attaching_")) {
        ferry_err first = *err, rerr = {0};
        size_t removed = 0;
        if (remove_attaching(c, db, staging, pids, n, &removed, &rerr) == FERRY_OK && removed) {
            FLOG_WARN("msg=\"ATTACH met parts left by an ATTACH cut short (the server stopped in "
                      "it); removed, attaching again\" server=%s table=%s.%s leftovers=%zu",
                      c->name, db, staging, removed);
            ferry_err_clear(err);
            rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
        } else {
            *err = first; /* the ATTACH's own error says most */
        }
    }
    ferry_buf_free(&sql);
    return rc;
}

/* Step 1: what the place-parts request names for staging's detached parts of pids (n 0 when
 * there are none): load's data paths and each part's {disk, name, to}. Strings are borrowed from
 * the rows it keeps (place_plan_free). */
typedef struct place_plan {
    ferry_ch_rows det, paths;
    const char **dps;
    ferry_agent_place *parts;
    char (*to)[FERRY_NAME_MAX + 64];
    size_t n;
} place_plan;

static void place_plan_free(place_plan *pl)
{
    ferry_ch_rows_free(&pl->det);
    ferry_ch_rows_free(&pl->paths);
    free(pl->dps);
    free(pl->parts);
    free(pl->to);
    memset(pl, 0, sizeof *pl);
}

static int plan_place(mv_conn *c, const char *db, const char *staging, const char *load,
                      const char *const *pids, size_t n, place_plan *pl, ferry_err *err)
{
    ferry_buf tail = FERRY_BUF_INIT;
    ferry_ch_rows blk = {0};
    memset(pl, 0, sizeof *pl);
    ferry_buf_puts(&tail, " AND ifNull(reason, '') = '' AND level IS NOT NULL AND partition_id "
                          "IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(&tail, ',');
        ferry_sql_quote(pids[i], &tail);
    }
    ferry_buf_puts(&tail, ") ORDER BY partition_id, min_block_number, name");
    int rc = query_table(c, "SELECT name, disk, partition_id, level FROM system.detached_parts "
                            "WHERE", db, staging, ferry_buf_cstr(&tail), &pl->det, err);
    if (rc || pl->det.n_rows == 0)
        goto out;
    if ((rc = query_table(c, "SELECT max(max_block_number) FROM system.parts WHERE", db, load,
                          NULL, &blk, err)) ||
        (rc = query_table(c, "SELECT arrayJoin(data_paths) FROM system.tables WHERE", db, load,
                          NULL, &pl->paths, err)))
        goto out;
    if (pl->paths.n_rows == 0) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s: load table %s.%s has no data path",
                           c->name, db, load);
        goto out;
    }
    uint64_t block = 0;
    if (blk.n_rows == 1)
        ferry_parse_u64(ferry_ch_rows_get(&blk, 0, 0), &block);
    size_t nd = pl->det.n_rows;
    pl->dps = calloc(pl->paths.n_rows + 1, sizeof *pl->dps);
    pl->parts = calloc(nd + 1, sizeof *pl->parts);
    pl->to = calloc(nd + 1, sizeof *pl->to);
    if (!pl->dps || !pl->parts || !pl->to) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < pl->paths.n_rows; r++)
        pl->dps[r] = ferry_ch_rows_get(&pl->paths, r, 0);
    for (size_t r = 0; r < nd; r++) {
        /* a fresh single block, as ATTACH PARTITION names an attached part, the level kept */
        block++;
        snprintf(pl->to[r], sizeof pl->to[r], "%s_%llu_%llu_%s",
                 ferry_ch_rows_get(&pl->det, r, 2), (unsigned long long)block,
                 (unsigned long long)block, ferry_ch_rows_get(&pl->det, r, 3));
        pl->parts[r] = (ferry_agent_place){.disk = ferry_ch_rows_get(&pl->det, r, 1),
                                           .name = ferry_ch_rows_get(&pl->det, r, 0),
                                           .to = pl->to[r]};
    }
    pl->n = nd;
out:
    if (rc)
        place_plan_free(pl);
    ferry_ch_rows_free(&blk);
    ferry_buf_free(&tail);
    return rc;
}

/* Steps 1 to 5 with the lease held and step 0 done. */
static int load_locked(mv_conn *c, const char *db, const char *staging, const char *load,
                       const char *const *pids, size_t n, ferry_err *err)
{
    place_plan pl;
    int rc = plan_place(c, db, staging, load, pids, n, &pl, err);
    if (rc || !pl.n)
        goto out; /* nothing waits in detached/: loaded already (a repeated step) */
    if ((rc = table_stmt(c, "DETACH TABLE", db, load, err)))
        goto out;
    crash_point("STAGE:detached");
    rc = ferry_agent_place_parts(c->ag, db, load, staging, pl.dps, pl.paths.n_rows, pl.parts,
                                 pl.n, NULL, NULL, err);
    if (!rc)
        crash_point("STAGE:placed");
    /* attached again whatever happened: a failed placement left some folders in detached/ (a
     * rename is all or nothing per part) and the next attempt places them */
    ferry_err e2 = {0};
    int arc = table_stmt(c, "ATTACH TABLE", db, load, rc ? &e2 : err);
    if (!arc)
        arc = table_stmt(c, "SYSTEM STOP MERGES", db, load, rc ? &e2 : err);
    if (!rc && arc)
        rc = arc;
    else if (rc && arc)
        FLOG_WARN("msg=\"load table not attached again after a failed load (the next load "
                  "attaches it)\" server=%s table=%s.%s err=\"%s\"", c->name, db, load, e2.msg);
    if (rc)
        goto out;
    crash_point("STAGE:attached");
    size_t moved = 0;
    if ((rc = move_into_staging(c, db, staging, load, &moved, err)))
        goto out;
    crash_point("STAGE:moved");
    FLOG_INFO("msg=\"staging loaded by re-attaching the load table (read-only object access)\" "
              "server=%s table=%s.%s parts=%zu partitions=%zu", c->name, db, staging, pl.n,
              moved);
out:
    place_plan_free(&pl);
    return rc;
}

int stg_load(mv_conn *c, const char *db, const char *staging, const char *const *pids, size_t n,
             ferry_err *err)
{
    if (n == 0)
        return FERRY_OK;
    if (!c->ro_objects)
        return attach_partitions(c, db, staging, pids, n, err);
    char load[FERRY_NAME_MAX + 48];
    load_name(staging, load, sizeof load);
    ferry_lease *lease = NULL;
    int rc = stg_lock(c, db, staging, &lease, err);
    if (!rc)
        rc = finish_interrupted(c, db, staging, load, true, err);
    if (!rc)
        rc = load_locked(c, db, staging, load, pids, n, err);
    stg_unlock(c, lease);
    return rc;
}

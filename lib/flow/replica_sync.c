/* Making one partition of one replica equal to another replica's: the repair step shared by
 * `ferry repair` and the clone mode of moves (replica_int.h has the contract).
 *
 * Replicas of a slice receive the same inserts independently and merge independently, so their
 * parts differ even when their rows are the same. The comparison is therefore by content
 * (verify.h fingerprints: rows, sum/xor/uniqExact of cityHash64 of every row). What is copied
 * depends on how the parts relate:
 *  - the target's parts are a subset of the source's (no merge on the target since it missed
 *    writes): copy exactly the parts it lacks and add them (MOVE PARTITION from staging). This
 *    never touches rows the target holds and never duplicates one, given that a batch in flight
 *    lands within the settle time (below);
 *  - otherwise, when the target's rows are a sub-multiset of the source's: replace the
 *    target's partition with a snapshot of the source's (REPLACE PARTITION FROM staging, atomic).
 *    Rows written to the target between the snapshot and the replace are lost there, but they
 *    are on the source too, so the next round (fingerprints differ) copies them back.
 * Writes keep arriving at both replicas while this runs (a router writes every replica of the
 * slice; a clone's new replica is routed before its SWITCH syncs it), and a copied part carries no
 * insert deduplication token: a part the target lacks only because its own INSERT is still in
 * flight there, once copied, is stored twice when that INSERT lands (the chaos soak: a clone's
 * first SWITCH round found a 100-row batch's share twice on the new replica). So a round copies
 * (or puts in a replace's snapshot) only parts that were on the source when it was listed, and a
 * part the target lacks is copied only once it is at least the settle time old (the grace when
 * given, else RS_SETTLE_MS) and the target, listed again after that, still lacks it; parts that
 * appeared since the listing wait for the next round. Nor is anything copied (or snapshot for a
 * replace) while the target still runs an INSERT that started before the newest such part was
 * written, plus the settle time (wait_inserts_landed: a stalled target's write may take longer
 * than the settle time to land). A client's retry of a batch that failed on the target, sent
 * after the copy, is not caught by this (docs/reliability.md).
 * Every statement goes through ferry_guarded_exec; parts travel agent to agent with `send`
 * (hot: real files checked against checksums.txt; cold: pointer files, objects checked), from a
 * freeze, or live from the table's folder for a partition of cold parts only (cold_snapshot). */
#include "flow/replica_int.h"
#include "flow/staging_load.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/stop.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"
#include "ferry/verify.h"

#define RS_CHECK_ROWS_MAX 5000000 /* the row-hash containment check reads this many at most */
/* How old a part the target lacks must be before it is copied, when no grace is given (a move
 * with [cluster] routers has none: the router fence covers its switch, not the writes that go on
 * reaching both replicas during a sync): a write a router sends to every replica at once has
 * landed on all of them, or failed, this long after it landed on one (the soak's routers give
 * up on a shard after shard_timeout = 10 s). */
#define RS_SETTLE_MS 10000
/* wait_inserts_landed: how often it looks at the target's running INSERTs, and for how long */
#define RS_INFLIGHT_POLL_MS 200
#define RS_INFLIGHT_MAX_MS 120000

static uint64_t u64_of(const char *s)
{
    uint64_t v = 0;
    return ferry_parse_u64(s, &v) ? v : 0;
}

int rs_slice_pids(mv_conn *c, const ferry_table_def *t, const char *table, const char *tenant,
                  uint32_t split, char (**ids)[FERRY_NAME_MAX], size_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT DISTINCT partition_id, partition FROM system.parts WHERE active "
                         "AND rows > 0 AND database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " ORDER BY partition_id");
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        ferry_partition_key k;
        ferry_err perr = {0};
        if (ferry_partition_parse(t->layout, ferry_ch_rows_get(&rows, r, 1), &k, &perr))
            continue; /* not a managed partition */
        if (k.split != split || strcmp(k.tenant, tenant))
            continue;
        const char *id = ferry_ch_rows_get(&rows, r, 0);
        bool have = false;
        for (size_t i = 0; i < *n && !have; i++)
            have = !strcmp((*ids)[i], id);
        if (have)
            continue;
        void *grown = realloc(*ids, (*n + 1) * sizeof **ids);
        if (!grown) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        *ids = grown;
        snprintf((*ids)[(*n)++], FERRY_NAME_MAX, "%s", id);
    }
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* Matches dst's parts against src's as multisets of (hash, rows). *subset: every dst part has
 * its own match. missing[k] (src.n entries) is set for the src parts nothing matched. */
static void match_parts(const mv_parts *src, const mv_parts *dst, bool *missing, bool *subset)
{
    *subset = true;
    for (size_t k = 0; k < src->n; k++)
        missing[k] = true;
    for (size_t j = 0; j < dst->n; j++) {
        bool found = false;
        for (size_t k = 0; k < src->n && !found; k++)
            if (missing[k] && src->p[k].rows == dst->p[j].rows &&
                !strcmp(src->p[k].hash, dst->p[j].hash)) {
                missing[k] = false;
                found = true;
            }
        if (!found)
            *subset = false;
    }
}

/* (row hash, count) of one partition, sorted by hash. */
static int row_hashes(mv_conn *c, const ferry_table_def *t, const char *pid, uint64_t **h,
                      uint64_t **cnt, size_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    *h = *cnt = NULL;
    *n = 0;
    ferry_buf_puts(&sql, "SELECT h, count() FROM (SELECT cityHash64(*) AS h FROM ");
    ferry_sql_db_table(t->database, t->name, &sql);
    ferry_buf_puts(&sql, " WHERE _partition_id = ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, ") GROUP BY h ORDER BY h");
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    if (!rc) {
        *h = calloc(rows.n_rows + 1, sizeof **h);
        *cnt = calloc(rows.n_rows + 1, sizeof **cnt);
        if (!*h || !*cnt)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        (*h)[r] = u64_of(ferry_ch_rows_get(&rows, r, 0));
        (*cnt)[r] = u64_of(ferry_ch_rows_get(&rows, r, 1));
    }
    if (!rc)
        *n = rows.n_rows;
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* Whether every row of dst's partition is also in src's, counting duplicates. */
static int rows_contained(mv_conn *src, mv_conn *dst, const ferry_table_def *t, const char *pid,
                          bool *contained, ferry_err *err)
{
    uint64_t *sh = NULL, *sc = NULL, *dh = NULL, *dc = NULL;
    size_t sn = 0, dn = 0;
    *contained = false;
    int rc = row_hashes(src, t, pid, &sh, &sc, &sn, err);
    if (!rc)
        rc = row_hashes(dst, t, pid, &dh, &dc, &dn, err);
    if (!rc) {
        size_t i = 0;
        bool ok = true;
        for (size_t j = 0; j < dn && ok; j++) {
            while (i < sn && sh[i] < dh[j])
                i++;
            ok = i < sn && sh[i] == dh[j] && sc[i] >= dc[j];
        }
        *contained = ok;
    }
    free(sh);
    free(sc);
    free(dh);
    free(dc);
    return rc;
}

/* The age in milliseconds of each part of ps (active parts of pid in t on c) by the server's
 * clock, rounded down to whole seconds minus one (system.parts keeps modification_time in
 * seconds): age_ms[k] is never more than the part's real age. A part the query no longer finds
 * (merged meanwhile) gets 0. */
/* " database = 'db' AND table = 't' AND partition_id = 'pid'": system.parts' rows of one
 * partition of t, appended to sql. */
static void where_partition(ferry_buf *sql, const ferry_table_def *t, const char *pid)
{
    ferry_buf_puts(sql, " database = ");
    ferry_sql_quote(t->database, sql);
    ferry_buf_puts(sql, " AND table = ");
    ferry_sql_quote(t->name, sql);
    ferry_buf_puts(sql, " AND partition_id = ");
    ferry_sql_quote(pid, sql);
}

static int part_ages(mv_conn *c, const ferry_table_def *t, const char *pid, const mv_parts *ps,
                     uint64_t *age_ms, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    for (size_t k = 0; k < ps->n; k++)
        age_ms[k] = 0;
    ferry_buf_puts(&sql, "SELECT name, greatest(toInt64(now()) - toInt64(modification_time) - 1, "
                         "0) FROM system.parts WHERE active AND rows > 0 AND");
    where_partition(&sql, t, pid);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    for (size_t r = 0; !rc && r < rows.n_rows; r++)
        for (size_t k = 0; k < ps->n; k++)
            if (!strcmp(ps->p[k].name, ferry_ch_rows_get(&rows, r, 0)))
                age_ms[k] = u64_of(ferry_ch_rows_get(&rows, r, 1)) * 1000;
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* The newest modification time (unix seconds, the source's clock) of the parts ps[k] with
 * pick[k], in t's partition pid on c; 0 when none of them is active any more. */
static int youngest_mtime(mv_conn *c, const ferry_table_def *t, const char *pid, const mv_parts *ps,
                          const bool *pick, uint64_t *mtime, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    size_t n = 0;
    *mtime = 0;
    ferry_buf_puts(&sql, "SELECT toUInt64(max(toUnixTimestamp(modification_time))) FROM "
                         "system.parts WHERE active AND");
    where_partition(&sql, t, pid);
    ferry_buf_puts(&sql, " AND name IN (");
    for (size_t k = 0; k < ps->n; k++)
        if (pick[k]) {
            ferry_buf_puts(&sql, n++ ? ", " : "");
            ferry_sql_quote(ps->p[k].name, &sql);
        }
    ferry_buf_puts(&sql, ")");
    int rc = n ? mv_sql(c, ferry_buf_cstr(&sql), &rows, err) : FERRY_OK;
    if (!rc && rows.n_rows)
        *mtime = u64_of(ferry_ch_rows_get(&rows, 0, 0));
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* The settle time assumes that the two halves of a router's write start within `settle` of each
 * other, and also that the slower one lands within it. The second does not hold on a stalled
 * target (the chaos soak's loop-mounted node4, statements of 12 s: a clone's SWITCH copied a
 * batch's part whose own INSERT was still running there, and when it landed the target held
 * those 11 rows twice). So: waits (bounded by RS_INFLIGHT_MAX_MS) until the target runs no
 * INSERT that started before `mtime` (the newest part it lacks, the source's clock) plus the
 * settle time; a slow write that started in time is waited for however long it takes to land.
 * *waited: it had to wait (the caller lists the target again). Any INSERT counts, whatever its
 * table: a false alarm costs a wait, a miss a duplicated batch. */
static int wait_inserts_landed(mv_conn *dst, const ferry_table_def *t, const char *pid,
                               uint64_t mtime, unsigned settle, bool *waited, ferry_err *err)
{
    *waited = false;
    if (!mtime)
        return FERRY_OK;
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count() FROM system.processes WHERE query_kind = 'Insert' AND "
             "toUnixTimestamp(now()) - elapsed <= %llu",
             (unsigned long long)(mtime + (settle + 999) / 1000));
    for (unsigned spent = 0;; spent += RS_INFLIGHT_POLL_MS) {
        ferry_ch_rows rows = {0};
        int rc = mv_sql(dst, sql, &rows, err);
        uint64_t running = !rc && rows.n_rows ? u64_of(ferry_ch_rows_get(&rows, 0, 0)) : 0;
        ferry_ch_rows_free(&rows);
        if (rc || !running)
            return rc;
        if (spent >= RS_INFLIGHT_MAX_MS)
            return ferry_err_set(err, FERRY_ETIMEOUT,
                                 "replica sync of %s partition %s: %llu INSERT(s) that started "
                                 "before a part %s lacks was written (or within %u ms after) "
                                 "still run on %s after %u s; nothing copied, try again later",
                                 t->name, pid, (unsigned long long)running, dst->name, settle,
                                 dst->name, RS_INFLIGHT_MAX_MS / 1000);
        if (!*waited)
            ferry_log(FERRY_LOG_INFO, "msg=\"replica sync waits for an INSERT still running on "
                      "the target (it started before a part the target lacks was written)\" "
                      "table=%s partition=%s target=%s running=%llu", t->name, pid, dst->name,
                      (unsigned long long)running);
        *waited = true;
        if (ferry_stop_sleep_ms(RS_INFLIGHT_POLL_MS))
            return ferry_err_set(err, FERRY_ETIMEOUT, "replica sync of %s partition %s: "
                                 "stopping (the process was asked to stop)", t->name, pid);
    }
}

static int ensure_staging(mv_conn *dst, const ferry_table_def *t, const char *st, ferry_err *err)
{
    /* read-only mode: a staging table detached by a load (another flow's, or one a crash cut)
     * is waited for or attached again before CREATE could make a second one */
    int rc = stg_recover(dst, t->database, st, err);
    if (rc)
        return rc;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    ferry_sql_db_table(t->database, st, &sql);
    ferry_buf_puts(&sql, " AS ");
    ferry_sql_db_table(t->database, t->name, &sql);
    rc = mv_sql(dst, ferry_buf_cstr(&sql), NULL, err);
    if (!rc) { /* staging parts are named and diffed; a merge there would rename them */
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "SYSTEM STOP MERGES ");
        ferry_sql_db_table(t->database, st, &sql);
        rc = mv_sql(dst, ferry_buf_cstr(&sql), NULL, err);
    }
    ferry_buf_free(&sql);
    return rc;
}

static int detach_part(mv_conn *c, const char *db, const char *table, const char *part,
                       ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(db, table, &sql);
    ferry_buf_puts(&sql, " DETACH PART ");
    ferry_sql_quote(part, &sql);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    if (rc)
        return rc;
    return ferry_agent_remove_detached(c->ag, db, table, part, NULL, NULL, err);
}

/* The parts of (db.table, pid) on c that CHECK TABLE finds broken: their names (comma-separated)
 * and each one's message in why, their number in *n. */
static int broken_parts(mv_conn *c, const char *db, const char *table, const char *pid,
                        ferry_ch_rows *rows, size_t *n, ferry_buf *why, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "CHECK TABLE ");
    ferry_sql_db_table(db, table, &sql);
    ferry_buf_puts(&sql, " PARTITION ID ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated SETTINGS check_query_single_value_result = 0");
    int rc = mv_sql(c, ferry_buf_cstr(&sql), rows, err);
    ferry_buf_free(&sql);
    *n = 0;
    for (size_t i = 0; !rc && i < rows->n_rows && rows->n_cols >= 3; i++) {
        if (strcmp(ferry_ch_rows_get(rows, i, 1), "0"))
            continue; /* passed */
        ferry_buf_printf(why, "%s%s (%.200s)", (*n)++ ? "; " : "", ferry_ch_rows_get(rows, i, 0),
                         ferry_ch_rows_get(rows, i, 2));
    }
    return rc;
}

int rs_fingerprint(mv_conn *c, const ferry_table_def *t, const char *pid, bool detach,
                   ferry_fingerprint *fp, size_t *n_detached, ferry_err *err)
{
    if (n_detached)
        *n_detached = 0;
    int rc = ferry_fingerprint_partition(c->ch, t->database, t->name, pid, fp, err);
    if (!rc || rc == FERRY_ENOMEM)
        return rc;
    ferry_err first = *err, e = {0};
    ferry_ch_rows rows = {0};
    ferry_buf why = FERRY_BUF_INIT;
    size_t n = 0;
    if (broken_parts(c, t->database, t->name, pid, &rows, &n, &why, &e) || n == 0) {
        *err = first; /* not a broken part (or CHECK TABLE failed too): the read's error */
        goto out;
    }
    if (!detach) {
        rc = ferry_err_set(err, FERRY_EIO, "%s: %s.%s partition %s has %zu broken part(s) "
                           "(CHECK TABLE: %.600s): the partition cannot be read there; make "
                           "another replica the source, or detach the parts and repair it",
                           c->name, t->database, t->name, pid, n, ferry_buf_cstr(&why));
        goto out;
    }
    for (size_t i = 0; i < rows.n_rows && rows.n_cols >= 3; i++) {
        if (strcmp(ferry_ch_rows_get(&rows, i, 1), "0"))
            continue;
        const char *part = ferry_ch_rows_get(&rows, i, 0);
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(t->database, t->name, &sql);
        ferry_buf_puts(&sql, " DETACH PART ");
        ferry_sql_quote(part, &sql);
        rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
        ferry_buf_free(&sql);
        if (rc) {
            ferry_err_prefix(err, "detaching broken part %s: ", part);
            goto out;
        }
        if (n_detached)
            (*n_detached)++;
    }
    FLOG_WARN("msg=\"broken parts detached: the partition is made equal to another replica's "
              "(their files stay in detached/ for a person)\" server=%s table=%s.%s "
              "partition=%s parts=%zu check=\"%.600s\"", c->name, t->database, t->name, pid, n,
              ferry_buf_cstr(&why));
    rc = ferry_fingerprint_partition(c->ch, t->database, t->name, pid, fp, err);
out:
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&why);
    return rc;
}

/* Removes every detached part of partition pid of db.table on c. */
static int remove_detached_pid(mv_conn *c, const char *db, const char *table, const char *pid,
                               ferry_err *err)
{
    ferry_agent_part_list pl;
    int rc = ferry_agent_parts(c->ag, db, table, NULL, &pl, err);
    for (size_t i = 0; !rc && i < pl.n_detached; i++) {
        const ferry_agent_detached *d = &pl.detached[i];
        if (d->partition_id && !strcmp(d->partition_id, pid))
            rc = ferry_agent_remove_detached(c->ag, db, table, d->name, NULL, NULL, err);
    }
    ferry_agent_part_list_free(&pl);
    return rc;
}

int rs_remove_slice(mv_conn *c, const ferry_table_def *t, const char *tenant, uint32_t split,
                    size_t *n_parts, ferry_err *err)
{
    char (*ids)[FERRY_NAME_MAX] = NULL;
    size_t n = 0;
    int rc = rs_slice_pids(c, t, t->name, tenant, split, &ids, &n, err);
    /* what may go by REPLACE from the empty twin goes so, in one statement (20-65 ms for 40
     * cold parts, where DETACH PARTITION clones every pointer file first: about 1 s); the rest,
     * left in left (a copy: ids names every partition for the detached folders below), is
     * detached */
    mv_pids left = {0};
    if (!rc && n && !(left.ids = malloc(n * sizeof *left.ids)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && n) {
        memcpy(left.ids, ids, n * sizeof *left.ids);
        left.n = n;
        char kv[FERRY_NAME_MAX + 32];
        snprintf(kv, sizeof kv, "tenant=%s split=%u", tenant, split);
        mv_release_replace_on(c, "replica drop", kv, t, &left);
    }
    for (size_t k = 0; !rc && k < left.n; k++) {
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(t->database, t->name, &sql);
        ferry_buf_puts(&sql, " DETACH PARTITION ID ");
        ferry_sql_quote(left.ids[k], &sql);
        rc = mv_sql(c, ferry_buf_cstr(&sql), NULL, err);
        ferry_buf_free(&sql);
    }
    /* detached folders of the slice, including those an interrupted earlier run left */
    ferry_agent_part_list pl = {0};
    if (!rc)
        rc = ferry_agent_parts(c->ag, t->database, t->name, NULL, &pl, err);
    for (size_t i = 0; !rc && i < pl.n_detached; i++) {
        const char *name = pl.detached[i].name;
        const char *partition = pl.detached[i].partition;
        const char *p = pl.detached[i].partition_id;
        bool ours = false;
        for (size_t k = 0; k < n && p && !ours; k++)
            ours = !strcmp(ids[k], p);
        if (!ours && partition) {
            ferry_partition_key key;
            ferry_err perr = {0};
            ours = !ferry_partition_parse(t->layout, partition, &key, &perr) &&
                   key.split == split && !strcmp(key.tenant, tenant);
        }
        if (ours)
            rc = ferry_agent_remove_detached(c->ag, t->database, t->name, name, NULL, NULL, err);
    }
    ferry_agent_part_list_free(&pl);
    if (n_parts)
        *n_parts += n;
    mv_pids_free(&left);
    free(ids);
    return rc;
}

/* Makes dst's staging partition pid hold exactly the frozen src parts named in want[] (others
 * detached and removed, missing ones sent). Counts what was sent in out. live: the parts are
 * pointer parts sent from the table's folder, not from the freeze (cold_snapshot); one that
 * left the table since it was listed (the agent's 410) stops the fill with *gone set and
 * nothing loaded into staging. */
static int staging_fill(mv_conn *src, mv_conn *dst, const ferry_table_def *t, const char *st,
                        const char *pid, const char *freeze, bool live, const mv_parts *frozen,
                        const bool *want, bool *gone, rs_result *out, ferry_err *err)
{
    *gone = false;
    mv_parts stg = {0};
    bool *need = calloc(frozen->n + 1, sizeof *need);
    int rc = need ? mv_list_parts(dst, t->database, st, pid, true, &stg, err)
                  : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    bool *keep = rc ? NULL : calloc(stg.n + 1, sizeof *keep);
    if (!rc && !keep)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < frozen->n; k++) {
        need[k] = want[k];
        for (size_t j = 0; need[k] && j < stg.n; j++)
            if (!keep[j] && stg.p[j].rows == frozen->p[k].rows &&
                !strcmp(stg.p[j].hash, frozen->p[k].hash))
                keep[j] = true, need[k] = false;
    }
    for (size_t j = 0; !rc && j < stg.n; j++)
        if (!keep[j])
            rc = detach_part(dst, t->database, st, stg.p[j].name, err);
    bool sent = false;
    for (size_t k = 0; !rc && k < frozen->n; k++) {
        if (!need[k])
            continue;
        ferry_agent_sent ans;
        ferry_agent_send_req sr = {.db = t->database, .table = t->name,
                                   .freeze = live ? NULL : freeze, .live = live,
                                   .part = frozen->p[k].name, .target_url = dst->agent_url,
                                   .target_token = dst->token, .target_db = t->database,
                                   .target_table = st};
        if ((rc = ferry_agent_send(src->ag, &sr, &ans, err))) {
            if (live && ferry_agent_client_last_status(src->ag) == 410) {
                ferry_err_clear(err);
                rc = FERRY_OK;
                *gone = true;
            }
            break;
        }
        if (ans.pointer)
            out->cold_copied += ans.bytes_sent;
        else
            out->hot_copied += ans.bytes_sent;
        out->parts_sent++;
        out->parts_sent_live += live;
        sent = true;
        ferry_agent_sent_free(&ans);
    }
    if (!rc && sent && !*gone) /* ATTACH PARTITION, or the read-only route (staging_load.h) */
        rc = stg_load(dst, t->database, st, &pid, 1, err);
    free(need);
    free(keep);
    free(stg.p);
    return rc;
}

/* Freezes partition pid of t on src under `freeze` and lists the frozen parts (with their
 * hashes from system.parts). *none: nothing to freeze (the partition is gone). */
static int freeze_parts(mv_conn *src, const ferry_table_def *t, const char *pid,
                        const char *freeze, mv_parts *frozen, bool *none, ferry_err *err)
{
    ferry_agent_frozen fz;
    mv_parts all = {0};
    *none = false;
    memset(frozen, 0, sizeof *frozen);
    int rc = ferry_agent_freeze(src->ag, t->database, t->name, pid, freeze, &fz, err);
    if (rc == FERRY_ENOTFOUND && ferry_agent_client_last_status(src->ag) == 404) {
        *none = true;
        return FERRY_OK;
    }
    if (!rc)
        rc = mv_list_parts(src, t->database, t->name, pid, true, &all, err);
    size_t nf = fz.n;
    if (!rc) {
        frozen->p = calloc(nf + 1, sizeof *frozen->p);
        if (!frozen->p)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t k = 0; !rc && k < nf; k++) {
        const mv_part *p = mv_parts_find(&all, fz.parts[k].name);
        if (!p)
            continue; /* empty, or merged since the freeze: the sync's comparison catches up */
        frozen->p[frozen->n++] = *p;
    }
    free(all.p);
    ferry_agent_frozen_free(&fz);
    return rc;
}

/* A partition whose active parts are all on the object-storage disk is not frozen: its parts
 * are sent live from the table's folder (an agent of API 3 or later), as a move's copy round
 * sends them (docs/moves.md, "A copy round"), and its snapshot is the listing of its active
 * parts. A freeze adds nothing for pointer parts (their objects are immutable and ClickHouse
 * may not delete them; a cold volume does not merge), costs a clone of every pointer file and
 * the same again to remove it, and leaves the table's own pointer files read-only, which keeps
 * the agent from pinning them when the server later lets the partition go (move_release.c).
 * *live false: the caller freezes (parts is left empty). */
static int cold_snapshot(mv_conn *src, const ferry_table_def *t, const char *pid, mv_parts *parts,
                         bool *live, ferry_err *err)
{
    bool can = false;
    *live = false;
    memset(parts, 0, sizeof *parts);
    int rc = mv_sends_live(src, &can, err);
    if (!rc && can)
        rc = mv_list_parts(src, t->database, t->name, pid, true, parts, err);
    bool all = !rc && parts->n > 0;
    for (size_t k = 0; all && k < parts->n; k++)
        all = parts->p[k].cold;
    if (all)
        *live = true;
    else {
        free(parts->p);
        memset(parts, 0, sizeof *parts);
    }
    return rc;
}

static int remove_freeze(mv_conn *src, const char *freeze, ferry_err *err)
{
    return ferry_agent_remove_freeze(src->ag, freeze, err);
}

/* After a replace statement the server refused: ClickHouse runs an ALTER's commands in order and
 * stops at the first that fails, so the DETACH PARTs before it took their parts (each now in
 * detached/ under its own name) and the ATTACH FROM staging did not run. Those parts of `old` are
 * attached again, by one ALTER; *n how many. Found by the ZooKeeper soak (seed 34202): a merge on
 * the target took a listed part between the listing and the statement (NO_SUCH_DATA_PART), and
 * the replica was left without the rows of the parts detached before it. */
static int undo_detach(mv_conn *dst, const ferry_table_def *t, const mv_parts *old, size_t *n,
                       ferry_err *err)
{
    *n = 0;
    if (!old->n)
        return FERRY_OK;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, " AND name IN (");
    for (size_t k = 0; k < old->n; k++) {
        if (k)
            ferry_buf_puts(&sql, ", ");
        ferry_sql_quote(old->p[k].name, &sql);
    }
    ferry_buf_puts(&sql, ") ORDER BY name");
    int rc = mv_sql(dst, ferry_buf_cstr(&sql), &rows, err);
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(t->database, t->name, &sql);
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        ferry_buf_puts(&sql, r ? ", ATTACH PART " : " ATTACH PART ");
        ferry_sql_quote(ferry_ch_rows_get(&rows, r, 0), &sql);
    }
    if (!rc && rows.n_rows)
        rc = mv_sql(dst, ferry_buf_cstr(&sql), NULL, err);
    if (!rc)
        *n = rows.n_rows;
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* One round of the copy (action already decided: copy-parts or replace). listed: the source's
 * parts when the round looked (each one settled, see the top of the file); a frozen part not
 * among them is new since, its own write may still be on its way to dst, and it is neither
 * copied nor put in the snapshot (the next round looks at it). dst_parts: dst's parts listed
 * after the settle time. */
static int sync_round(mv_conn *src, mv_conn *dst, const ferry_table_def *t, const char *pid,
                      const char *freeze, bool replace, unsigned settle, const mv_parts *listed,
                      const mv_parts *dst_parts, const rs_before_change *before, rs_result *out,
                      ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    snprintf(st, sizeof st, "%s%s", t->name, RS_STAGING_SUFFIX);
    mv_parts frozen = {0};
    bool none = false, *missing = NULL, subset = true, live = false, gone = false;
    /* the round has decided its action from what it listed; nothing is frozen yet (a test stops
     * here and changes the servers: tests/integration/repair_round_unchanged.sh) */
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SYNC:round");
    int rc = remove_freeze(src, freeze, err); /* a leftover of an interrupted run */
    if (!rc)
        rc = ensure_staging(dst, t, st, err);
    if (!rc)
        rc = cold_snapshot(src, t, pid, &frozen, &live, err);
    if (!rc && !live)
        rc = freeze_parts(src, t, pid, freeze, &frozen, &none, err);
    if (!rc && !none) {
        missing = calloc(frozen.n + 1, sizeof *missing);
        if (!missing)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else if (replace)
            for (size_t k = 0; k < frozen.n; k++)
                missing[k] = true;
        else
            match_parts(&frozen, dst_parts, missing, &subset);
    }
    size_t wanted = 0, fresh = 0;
    for (size_t k = 0; !rc && !none && k < frozen.n; k++) {
        if (missing[k] && !mv_parts_find(listed, frozen.p[k].name))
            missing[k] = false, fresh++;
        wanted += missing[k];
    }
    if (fresh)
        ferry_log(FERRY_LOG_INFO, "msg=\"replica sync leaves parts written since it looked to the "
                  "next round (their own writes may still be on the way)\" table=%s partition=%s "
                  "source=%s target=%s parts=%zu", t->name, pid, src->name, dst->name, fresh);
    if (!rc && !none && (!subset || (replace && !wanted))) {
        /* the source merged what the target holds since we looked (or, for a replace, every
         * part listed): next round decides again */
        snprintf(out->detail, sizeof out->detail, "the source's parts changed during the round");
        goto done;
    }
    if (!rc && !none)
        rc = staging_fill(src, dst, t, st, pid, freeze, live, &frozen, missing, &gone, out, err);
    if (!rc && gone) {
        /* a part left the source's table since the listing (merged, moved, detached): staging
         * gives back what it got, and the next round decides again */
        snprintf(out->detail, sizeof out->detail, "the source's parts changed during the round");
        ferry_log(FERRY_LOG_INFO, "msg=\"replica sync: a part left the source's table since the "
                  "round listed it; the next round looks again\" table=%s partition=%s "
                  "source=%s target=%s", t->name, pid, src->name, dst->name);
        ferry_err ce = {0};
        if (rs_staging_clear(dst, t, pid, &ce))
            ferry_log(FERRY_LOG_WARN, "msg=\"replica sync: cannot empty the staging partition; "
                      "the next sync refills it\" table=%s partition=%s target=%s err=\"%s\"",
                      t->name, pid, dst->name, ce.msg);
        goto done;
    }
    if (!rc && !none) /* staging holds the parts; the real table is untouched yet */
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SYNC:staged");
    /* the caller's last word, as late as can be: the listing of the target's parts and the
     * statement follow at once; when it says no, staging gives its parts back (the target's
     * table is untouched by this round) */
    if (!rc && !none && before && before->check && (rc = before->check(before->arg, err))) {
        ferry_err ce = {0};
        if (rs_staging_clear(dst, t, pid, &ce))
            ferry_log(FERRY_LOG_WARN, "msg=\"replica sync: cannot empty the staging partition; "
                      "the next sync refills it\" table=%s partition=%s target=%s err=\"%s\"",
                      t->name, pid, dst->name, ce.msg);
    }
    if (!rc && !none) {
        ferry_buf sql = FERRY_BUF_INIT;
        mv_parts old = {0}; /* the target's parts, detached by name */
        if (replace) {
            /* the snapshot holds every part listed: the target's own copy of one may still be
             * on its way, and would land beside the snapshot's, after the listing below */
            uint64_t mtime = 0;
            bool waited = false;
            rc = youngest_mtime(src, t, pid, &frozen, missing, &mtime, err);
            if (!rc)
                rc = wait_inserts_landed(dst, t, pid, mtime, settle, &waited, err);
            if (!rc)
                rc = mv_list_parts(dst, t->database, t->name, pid, true, &old, err);
            if (!rc) /* a test renames a listed part here: tests/integration/repair_replace_race.sh */
                ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SYNC:listed");
        }
        ferry_buf_puts(&sql, "ALTER TABLE ");
        if (replace) {
            /* DETACH PART of each part listed, then the snapshot attached (tiering's attach
             * form), one ALTER. Not REPLACE PARTITION: it would also drop a part that a write
             * through the router added since the listing (docs/tiering.md, "The swap"), and
             * before 26.7 a restart loads what it replaced again. Not atomic: a read in
             * between sees the partition without those parts. */
            ferry_sql_db_table(t->database, t->name, &sql);
            for (size_t k = 0; k < old.n; k++) {
                ferry_buf_puts(&sql, k ? ", DETACH PART " : " DETACH PART ");
                ferry_sql_quote(old.p[k].name, &sql);
            }
            ferry_buf_puts(&sql, old.n ? ", ATTACH PARTITION ID " : " ATTACH PARTITION ID ");
            ferry_sql_quote(pid, &sql);
            ferry_buf_puts(&sql, " FROM ");
            ferry_sql_db_table(t->database, st, &sql);
        } else {
            ferry_sql_db_table(t->database, st, &sql);
            ferry_buf_puts(&sql, " MOVE PARTITION ID ");
            ferry_sql_quote(pid, &sql);
            ferry_buf_puts(&sql, " TO TABLE ");
            ferry_sql_db_table(t->database, t->name, &sql);
        }
        bool undone = false;
        if (!rc && (rc = mv_sql(dst, ferry_buf_cstr(&sql), NULL, err)) == FERRY_EREMOTE &&
            replace) {
            /* the server answered and the statement is over: what it detached goes back, and
             * staging gives its parts up; a part that changed since the listing (a merge) is the
             * next round's to look at */
            bool changed = strstr(err->msg, "NO_SUCH_DATA_PART") != NULL;
            size_t back = 0;
            ferry_err uerr = {0};
            int urc = undo_detach(dst, t, &old, &back, &uerr);
            if (!urc)
                urc = rs_staging_clear(dst, t, pid, &uerr);
            if (urc) {
                ferry_log(FERRY_LOG_WARN, "msg=\"replica sync: the replace failed and could not be "
                          "undone; the next repair looks again\" table=%s partition=%s target=%s "
                          "err=\"%s\" undo_err=\"%s\"", t->name, pid, dst->name, err->msg,
                          uerr.msg);
            } else {
                undone = true;
                ferry_log(changed ? FERRY_LOG_INFO : FERRY_LOG_WARN,
                          "msg=\"replica sync: the replace was refused; the parts it detached are "
                          "attached again and staging emptied\" table=%s partition=%s target=%s "
                          "attached_again=%zu err=\"%s\"", t->name, pid, dst->name, back,
                          err->msg);
                if (changed) {
                    snprintf(out->detail, sizeof out->detail, "the target's parts changed "
                             "during the round");
                    ferry_err_clear(err);
                    rc = FERRY_OK;
                }
            }
        }
        if (!rc && !undone)
            out->changed = true;
        for (size_t k = 0; !rc && !undone && k < old.n; k++) { /* what DETACH PART left */
            rc = ferry_agent_remove_detached(dst->ag, t->database, t->name, old.p[k].name, NULL,
                                             NULL, err);
        }
        free(old.p);
        if (!rc && !undone && replace) { /* ATTACH FROM copies: staging's own parts go */
            ferry_buf_reset(&sql);
            ferry_buf_puts(&sql, "ALTER TABLE ");
            ferry_sql_db_table(t->database, st, &sql);
            ferry_buf_puts(&sql, " DETACH PARTITION ID ");
            ferry_sql_quote(pid, &sql);
            rc = mv_sql(dst, ferry_buf_cstr(&sql), NULL, err);
        }
        ferry_buf_free(&sql);
    }
done:
    if (!rc)
        rc = remove_detached_pid(dst, t->database, st, pid, err);
    ferry_err ferr = {0};
    int frc = remove_freeze(src, freeze, &ferr);
    if (!rc && frc)
        rc = frc, *err = ferr;
    free(missing);
    free(frozen.p);
    return rc;
}

int rs_staging_clear(mv_conn *dst, const ferry_table_def *t, const char *pid, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    snprintf(st, sizeof st, "%s%s", t->name, RS_STAGING_SUFFIX);
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(t->database, st, &sql);
    ferry_buf_puts(&sql, " DETACH PARTITION ID ");
    ferry_sql_quote(pid, &sql);
    int rc = mv_sql(dst, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    if (rc == FERRY_EREMOTE && strstr(err->msg, "UNKNOWN_TABLE")) {
        ferry_err_clear(err);
        return FERRY_OK;
    }
    if (!rc)
        rc = remove_detached_pid(dst, t->database, st, pid, err);
    return rc;
}

int rs_sync_partition(mv_conn *src, mv_conn *dst, const ferry_table_def *t, const char *pid,
                      const char *freeze, unsigned grace_ms, int rounds, bool dry_run,
                      const rs_before_change *before, rs_result *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->action, sizeof out->action, "in-sync");
    int rc = FERRY_OK;
    bool first = true, announced = false; /* before->fn called */
    unsigned settle = grace_ms ? grace_ms : RS_SETTLE_MS;
    for (int round = 0; !rc && round < rounds; round++) {
        ferry_fingerprint a = {0}, b = {0};
        char why[256];
        /* the target first: a batch landing on both between the two reads then makes the target
         * look behind (the round finds its part on both and copies nothing), not ahead */
        rc = rs_fingerprint(dst, t, pid, !dry_run, &b, NULL, err);
        if (!rc)
            rc = rs_fingerprint(src, t, pid, false, &a, NULL, err);
        if (!rc && b.rows > a.rows) /* the source's half of such a batch may land later */
            rc = rs_fingerprint(src, t, pid, false, &a, NULL, err);
        if (rc)
            break;
        if (first)
            out->src_rows = a.rows, out->dst_rows_before = b.rows;
        out->dst_rows_after = b.rows;
        if (ferry_fingerprint_same(&a, &b, why, sizeof why)) {
            out->repaired = true;
            break;
        }
        snprintf(out->detail, sizeof out->detail, "%s", why);
        if (b.rows > a.rows) {
            snprintf(out->action, sizeof out->action, "diverged");
            snprintf(out->detail, sizeof out->detail, "%.64s holds more rows (%llu) than %.64s (%llu)",
                     dst->name, (unsigned long long)b.rows, src->name,
                     (unsigned long long)a.rows);
            break;
        }
        mv_parts sp = {0}, dp = {0};
        bool *missing = NULL, subset = false;
        rc = mv_list_parts(src, t->database, t->name, pid, true, &sp, err);
        if (!rc)
            rc = mv_list_parts(dst, t->database, t->name, pid, true, &dp, err);
        if (!rc && !(missing = calloc(sp.n + 1, sizeof *missing)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (!rc)
            match_parts(&sp, &dp, missing, &subset);
        /* A part the target lacks may be a batch whose write to the target is still on its way:
         * wait until the youngest such part is `settle` old, then look at the target again. */
        uint64_t *age = NULL, youngest = UINT64_MAX;
        if (!rc && !dry_run && !(age = calloc(sp.n + 1, sizeof *age)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (!rc && !dry_run)
            rc = part_ages(src, t, pid, &sp, age, err);
        for (size_t k = 0; !rc && !dry_run && k < sp.n; k++)
            if (missing[k] && age[k] < youngest)
                youngest = age[k];
        free(age);
        if (!rc && !dry_run && youngest < settle) {
            unsigned wait = (unsigned)(settle - youngest);
            ferry_log(FERRY_LOG_INFO, "msg=\"replica sync waits for writes in flight to the target "
                      "(a part it lacks is younger than the settle time)\" table=%s partition=%s "
                      "source=%s target=%s wait_ms=%u", t->name, pid, src->name, dst->name, wait);
            if (ferry_stop_sleep_ms(wait))
                rc = ferry_err_set(err, FERRY_ETIMEOUT, "replica sync of %s partition %s: "
                                   "stopping (the process was asked to stop)", t->name, pid);
            free(dp.p);
            dp.p = NULL;
            if (!rc)
                rc = mv_list_parts(dst, t->database, t->name, pid, true, &dp, err);
            if (!rc)
                match_parts(&sp, &dp, missing, &subset);
        }
        uint64_t mtime = 0;
        bool waited = false;
        if (!rc && !dry_run)
            rc = youngest_mtime(src, t, pid, &sp, missing, &mtime, err);
        if (!rc && !dry_run)
            rc = wait_inserts_landed(dst, t, pid, mtime, settle, &waited, err);
        if (!rc && waited) {
            free(dp.p);
            dp.p = NULL;
            rc = mv_list_parts(dst, t->database, t->name, pid, true, &dp, err);
            if (!rc)
                match_parts(&sp, &dp, missing, &subset);
        }
        bool replace = !subset;
        if (!rc && replace) {
            bool contained = false;
            if (b.rows > RS_CHECK_ROWS_MAX) {
                snprintf(out->action, sizeof out->action, "diverged");
                snprintf(out->detail, sizeof out->detail,
                         "parts differ and %llu rows are too many to check row by row; resolve "
                         "by hand", (unsigned long long)b.rows);
            } else if (!(rc = rows_contained(src, dst, t, pid, &contained, err)) && !contained) {
                snprintf(out->action, sizeof out->action, "diverged");
                snprintf(out->detail, sizeof out->detail,
                         "%.64s and %.64s each hold rows the other lacks; not repaired (resolve by "
                         "hand: neither replica is complete)", src->name, dst->name);
            }
            if (!rc && !contained) {
                free(sp.p);
                free(dp.p);
                free(missing);
                break;
            }
        }
        if (!rc)
            snprintf(out->action, sizeof out->action, "%s", replace ? "replace" : "copy-parts");
        if (!rc && !dry_run && before && before->fn && !announced) {
            rc = before->fn(before->arg, err);
            announced = true;
        }
        if (!rc && !dry_run)
            rc = sync_round(src, dst, t, pid, freeze, replace, settle, &sp, &dp, before, out,
                            err);
        free(sp.p);
        free(dp.p);
        free(missing);
        first = false;
        if (dry_run)
            break;
    }
    if (!rc && !out->repaired && !dry_run && strcmp(out->action, "diverged")) {
        ferry_fingerprint a = {0}, b = {0};
        char why[256];
        rc = rs_fingerprint(src, t, pid, false, &a, NULL, err);
        if (!rc)
            rc = rs_fingerprint(dst, t, pid, true, &b, NULL, err);
        if (!rc) {
            out->dst_rows_after = b.rows;
            out->repaired = ferry_fingerprint_same(&a, &b, why, sizeof why);
            if (!out->repaired)
                snprintf(out->detail, sizeof out->detail,
                         "still differs after %d round(s) (writes still arriving?): %.180s", rounds,
                         why);
            else
                out->detail[0] = '\0';
        }
    }
    ferry_log(rc ? FERRY_LOG_WARN : FERRY_LOG_INFO,
              "msg=\"replica sync\" table=%s partition=%s source=%s target=%s action=%s "
              "repaired=%d parts_sent=%zu sent_live=%zu rc=%d%s%s%s",
              t->name, pid, src->name, dst->name, out->action, out->repaired, out->parts_sent,
              out->parts_sent_live, rc,
              rc ? " err=\"" : "", rc ? err->msg : "", rc ? "\"" : "");
    return rc;
}

/* The publish step of a move (SWITCH, step PUBLISH): the verified copy of the slice leaves the
 * target's staging table for its real table, partition by partition.
 *
 *   partition in staging      statement on the target                      cost, 40 cold parts
 *   ------------------------  -------------------------------------------  -------------------
 *   has a hot part, or the    ALTER TABLE staging MOVE PARTITION ID p TO   522-554 ms: a clone
 *   fast way is not allowed   TABLE t (atomic; staging's parts are removed  and the removal of
 *                             from disk before it answers)                 every file
 *   cold (every part on the   ALTER TABLE t ATTACH PARTITION ID p FROM     274-332 ms
 *   object-storage disk)      staging (a clone: hard links, each pointer
 *                             file's ref_count raised)
 *                             then ALTER TABLE staging REPLACE PARTITION   19-65 ms (the
 *                             ID p FROM <t>_ferry_empty (staging's parts   cleanup thread
 *                             outdated)                                    removes them later)
 *
 * (docs/benchmarks.md, sessions 28 and 29.) Removing staging's clone later never deletes an
 * object: the clone raised every pointer file's ref_count, so the removal only lowers it again.
 * The fast way needs a server whose REPLACE does not bring replaced parts back at a restart
 * (26.7 and later), objects writable by ClickHouse (in read-only mode staging is loaded by
 * re-attaching a load table, flow/staging_load.h), and the empty twin holding no part.
 *
 * Crashes. Between the ATTACH and the REPLACE, the partition's parts are in both tables (crash
 * point SWITCH:attached); a kill -9 of the target inside MOVE PARTITION can leave the same
 * (staging's parts loaded again at the restart). A resumed publish therefore first drops from
 * staging every part the real table holds already: same partition, hash_of_all_files and rows
 * (publish_dedup). This is exact only while the real table's copy is unmerged, which is why the
 * fast way is for cold partitions alone: a cold volume never merges (prefer_not_to_merge,
 * required, docs/operations.md), while a hot part moved in may be merged before the resume. */
#include "flow/move_run.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/testknob.h"
#include "ferry/tier.h"
#include "flow/move_env.h"

/* Drops from the target's staging every part of x's slice that the real table already holds
 * (same partition, hash_of_all_files and rows): see the file comment. Each part of the table
 * matches one staged part at most; a part written to the target since the switch cannot carry
 * a staged part's hash unless it holds the very same rows in the very same block. */
static int publish_dedup(mvctx *x, const ferry_table_def *t, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    mv_slice stg = {0}, real = {0};
    bool *used = NULL;
    int rc = mv_slice_list(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, true, &stg,
                           err);
    if (!rc && stg.n_parts)
        rc = mv_slice_list(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, true,
                           &real, err);
    if (!rc && stg.n_parts && !(used = calloc(real.n_parts + 1, sizeof *used)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < stg.n_pids; k++) {
        mv_parts sp = mv_slice_parts(&stg, stg.pids[k]), rp = mv_slice_parts(&real, stg.pids[k]);
        for (size_t i = 0; !rc && i < sp.n; i++)
            for (size_t j = 0; j < rp.n; j++) {
                size_t at = (size_t)(rp.p - real.parts) + j;
                if (used[at] || rp.p[j].rows != sp.p[i].rows || strcmp(rp.p[j].hash, sp.p[i].hash))
                    continue;
                used[at] = true;
                FLOG_WARN("msg=\"staged part already in the table (a publish cut between its "
                          "clone and staging's release, or a kill -9 of the target that brought "
                          "it back); dropped from staging, not published again\" move=%s "
                          "shard=%s table=%s.%s part=%s table_part=%s", x->mv.u.move.id,
                          x->dst.name, t->database, st, sp.p[i].name, rp.p[j].name);
                rc = mv_staging_drop_part(x, t, sp.p[i].name, err);
                break;
            }
    }
    free(used);
    mv_slice_free(&stg);
    mv_slice_free(&real);
    return rc;
}

/* Whether every part of partition pid in the listing is on the object-storage disk. */
static bool partition_cold(const mv_slice *sl, const char *pid)
{
    mv_parts ps = mv_slice_parts(sl, pid);
    for (size_t i = 0; i < ps.n; i++)
        if (!ps.p[i].cold)
            return false;
    return ps.n > 0;
}

/* Whether cold partitions of t may be published the fast way on the target (file comment);
 * twin receives the empty twin's name. */
static bool attach_allowed(mvctx *x0, const ferry_table_def *t, char *twin, size_t twinsz)
{
    ferry_err nerr = {0};
    return !x0->dst.ro_objects && mv_replace_crash_safe(&x0->dst) &&
           !ferry_tier_empty_name(t->name, twin, twinsz, &nerr) &&
           mv_twin_ready(&x0->dst, t->database, t->name, twin,
                         "staging is published by MOVE PARTITION");
}

/* Publishes partitions ids of staging table st into t: by ATTACH PARTITION FROM (attach) or
 * MOVE PARTITION. While *first, the first partition goes in a statement of its own (the crash
 * point SWITCH:published-one follows it); the rest in one ALTER TABLE, whose commands run one
 * after another, each atomic. */
static int publish_ids(mvctx *x0, const ferry_table_def *t, const char *st, const mv_pids *ids,
                       bool attach, bool *first, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t k = 0; !rc && k < ids->n;) {
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(t->database, attach ? t->name : st, &sql);
        size_t end = *first ? k + 1 : ids->n;
        for (size_t j = k; j < end; j++) {
            ferry_buf_puts(&sql, j > k ? ", " : " ");
            ferry_buf_puts(&sql, attach ? "ATTACH PARTITION ID " : "MOVE PARTITION ID ");
            ferry_sql_quote(ids->ids[j], &sql);
            ferry_buf_puts(&sql, attach ? " FROM " : " TO TABLE ");
            ferry_sql_db_table(t->database, attach ? st : t->name, &sql);
        }
        rc = mv_sql(&x0->dst, ferry_buf_cstr(&sql), NULL, err);
        ferry_buf_free(&sql);
        k = end;
        if (!rc && *first) {
            *first = false;
            ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:published-one");
        }
    }
    return rc;
}

int mv_publish_slices(mvctx **xs, size_t n, const ferry_table_def *t, const mv_slice *stg,
                      bool *first, ferry_err *err)
{
    mvctx *x0 = xs[0];
    char st[FERRY_NAME_MAX + 32], twin[FERRY_NAME_MAX + 16];
    mv_staging_name(t->name, st, sizeof st);
    mv_pids cold = {0}, rest = {0};
    bool attach = false; /* the cold partitions go by ATTACH FROM (else by MOVE PARTITION) */
    int rc = FERRY_OK;
    for (size_t k = 0; !rc && k < n; k++)
        for (size_t j = 0; !rc && j < stg[k].n_pids; j++)
            rc = mv_pids_add(partition_cold(&stg[k], stg[k].pids[j]) ? &cold : &rest,
                             stg[k].pids[j]);
    if (rc) {
        rc = ferry_err_set(err, rc, "out of memory");
        goto out;
    }
    attach = cold.n && attach_allowed(x0, t, twin, sizeof twin);
    rc = publish_ids(x0, t, st, &rest, false, first, err);
    if (!rc)
        rc = publish_ids(x0, t, st, &cold, attach, first, err);
    if (rc || !attach)
        goto out;
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:attached");
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_err rerr = {0};
    mv_twin_replace_sql(&sql, t->database, st, twin, cold.ids, NULL, cold.n);
    if (mv_sql(&x0->dst, ferry_buf_cstr(&sql), NULL, &rerr)) {
        /* the partitions are in the table: staging's copies are dropped part by part, as a
         * resume would (a failure here too stops the move; its resume drops them) */
        FLOG_WARN("msg=\"move: emptying staging by REPLACE from the empty twin failed; its "
                  "published parts are dropped one by one\" move=%s server=%s table=%s.%s "
                  "err=\"%s\"", x0->mv.u.move.id, x0->dst.name, t->database, st, rerr.msg);
        for (size_t k = 0; !rc && k < n; k++)
            rc = publish_dedup(xs[k], t, err);
    }
    ferry_buf_free(&sql);
out:
    if (!rc)
        FLOG_INFO("msg=\"move: published\" move=%s server=%s table=%s.%s by_attach=%zu "
                  "by_move=%zu", x0->mv.u.move.id, x0->dst.name, t->database, t->name,
                  attach ? cold.n : 0, attach ? rest.n : rest.n + cold.n);
    mv_pids_free(&cold);
    mv_pids_free(&rest);
    return rc;
}

int mv_publish(mvctx *x, bool resumed, ferry_err *err)
{
    int rc = FERRY_OK;
    bool first = true;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char st[FERRY_NAME_MAX + 32];
        mv_staging_name(t->name, st, sizeof st);
        mv_slice stg = {0};
        if (resumed)
            rc = publish_dedup(x, t, err);
        if (!rc)
            rc = mv_slice_list(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, true,
                               &stg, err);
        if (!rc)
            rc = mv_publish_slices(&x, 1, t, &stg, &first, err);
        mv_slice_free(&stg);
    }
    return rc;
}

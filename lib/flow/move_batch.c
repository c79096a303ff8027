/* A batch of moves between the same two shards (ferry_move_run_batch, docs/moves.md "Batches"):
 * the moves keep their own journals and go through the same states with the same checks as
 * ferry_move_run, but each state's server work is done once for all of them: one listing of the
 * parts per side, one FREEZE, one send pool, one ATTACH, one publish (move_publish.c) and one
 * release (REPLACE, then DETACH of the rest) over the partitions of every slice, and one catalog
 * commit per journal write: each state (and each note: an attempt, a freeze name) is written for
 * every member in one batch (mv_journal_n, move_journal.c). The journal of each move says, at
 * every point, what was done for its slice (a freeze the batch made is journaled in every move
 * before it exists), so a batch killed anywhere resumes move by move with ferry_move_run, whose
 * steps give the same result when repeated. A move whose slice needs more than the common path (a
 * source that changed since the copy, a source whose parts changed since they were verified)
 * leaves the batch and finishes alone with the per-move states. */
#include "ferry/move.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/buf.h"
#include "ferry/partition.h"
#include "ferry/clock.h"
#include "ferry/log.h"
#include "ferry/stop.h"
#include "ferry/testknob.h"
#include "flow/move_env.h"
#include "flow/move_run.h"

/* The batch: members[] are the moves still run together (their index into the caller's arrays
 * in at[]); a move that leaves is run alone afterwards (alone[]), one that failed keeps its
 * error in rcs/errs. */
typedef struct batch {
    mvctx *xs;       /* every move of the call */
    mvctx **members; /* the ones still in the batch */
    size_t *at;      /* members[k] is xs[at[k]] */
    size_t n;
    bool *alone;     /* xs[i] finishes alone */
    int *rcs;
    ferry_err *errs;
} batch;

/* Members for which keep[k] is false leave the batch (to be finished alone). */
static void batch_keep(batch *b, const bool *keep)
{
    size_t w = 0;
    for (size_t k = 0; k < b->n; k++) {
        if (keep[k]) {
            b->members[w] = b->members[k];
            b->at[w++] = b->at[k];
        } else {
            b->alone[b->at[k]] = true;
        }
    }
    b->n = w;
}

/* A failure of the batch's common work stops every member with that error (each one's journal
 * holds where it stopped; resuming runs it alone). */
static void batch_fail_all(batch *b, int rc, const ferry_err *err)
{
    for (size_t k = 0; k < b->n; k++) {
        b->rcs[b->at[k]] = rc;
        b->errs[b->at[k]] = *err;
    }
    b->n = 0;
}

/* A failure of one member's own step (its switch fence, its freezes): it stops, the others go
 * on. (A journal write is one commit for every member: its failure is the batch's.) */
static void batch_fail_one(batch *b, size_t k, int rc, const ferry_err *err)
{
    b->rcs[b->at[k]] = rc;
    b->errs[b->at[k]] = *err;
    for (size_t j = k; j + 1 < b->n; j++) {
        b->members[j] = b->members[j + 1];
        b->at[j] = b->at[j + 1];
    }
    b->n--;
}

/* Runs f on every member; a member whose call fails leaves the batch with its error. */
static void each(batch *b, int (*f)(mvctx *, ferry_err *))
{
    for (size_t k = 0; k < b->n;) {
        ferry_err e = {0};
        int rc = f(b->members[k], &e);
        if (rc)
            batch_fail_one(b, k, rc, &e);
        else
            k++;
    }
}

/* The members' time in a state: the batch's time, shared equally. */
static void add_ms(batch *b, enum ferry_move_state s, double t0)
{
    double ms = (ferry_clock_s() - t0) * 1e3;
    for (size_t k = 0; k < b->n; k++)
        b->members[k]->res->state_ms[s] += ms / (double)b->n;
}

static bool stopping(batch *b)
{
    if (!ferry_stop_requested())
        return false;
    ferry_err e = {0};
    ferry_err_set(&e, FERRY_ETIMEOUT, "move batch: stopping (the process was asked to stop)");
    batch_fail_all(b, FERRY_ETIMEOUT, &e);
    return true;
}


static const char **tenants_of(batch *b, uint32_t **splits)
{
    const char **t = calloc(b->n + 1, sizeof *t);
    *splits = calloc(b->n + 1, sizeof **splits);
    if (!t || !*splits) {
        free(t);
        free(*splits);
        *splits = NULL;
        return NULL;
    }
    for (size_t k = 0; k < b->n; k++) {
        t[k] = b->members[k]->mv.u.move.tenant;
        (*splits)[k] = b->members[k]->mv.u.move.split;
    }
    return t;
}

/* CLONE: one copy round for every member's slice. The batch's freeze is one folder on the
 * source, journaled in every member by the round before it exists (one note for all), and
 * only when some partition is frozen (cold ones are sent live). */
static int batch_clone(batch *b, ferry_err *err)
{
    int rc = mv_begin_attempt_n(b->members, b->n, err);
    mvctx *x0 = b->members[0];
    char fz[160], tag[32];
    snprintf(tag, sizeof tag, "bc%u", x0->mv.u.move.step);
    mv_freeze_name(x0, tag, fz, sizeof fz);
    for (size_t i = 0; !rc && i < x0->tables.n; i++) {
        rc = mv_ensure_staging(x0, table_at(x0, i), err);
        if (!rc)
            rc = mv_copy_round_n(b->members, b->n, table_at(x0, i), fz, true, err);
    }
    if (!rc && mv_freeze_journaled(x0, fz))
        rc = mv_remove_freeze_n(b->members, b->n, fz, err);
    if (!rc)
        rc = mv_advance_n(b->members, b->n, FERRY_MOVE_VERIFY, "", err);
    return rc;
}

/* VERIFY: every staged part a copy of a source part, then each member's routing switch. */
static int batch_verify(batch *b, ferry_err *err)
{
    mvctx *x0 = b->members[0];
    bool *stable = calloc(b->n + 1, sizeof *stable);
    int rc = stable ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < x0->tables.n; i++)
        rc = mv_compare_copy_n(b->members, b->n, table_at(x0, i), false, stable, NULL, NULL,
                               NULL, err);
    free(stable);
    if (rc)
        return rc;
    /* each member's switch fence (one that cannot pass leaves the batch), then one switch; a
     * race lost on a route or a repair-need record is read again (mv_switch_route) */
    for (int round = 0;; round++) {
        each(b, mv_switch_prepare);
        rc = b->n ? mv_switch_commit_n(b->members, b->n, err) : FERRY_OK;
        if (rc != FERRY_ECONFLICT || round == MV_SWITCH_ROUNDS - 1)
            return rc;
        ferry_err_clear(err);
    }
}

/* SWITCH: router fence and grace once; the staged copies compared with the quiescent source
 * (members whose source changed since the copy leave the batch: their catch-up rounds run
 * alone); the fingerprints journaled with the publish step of every member, in one catalog
 * batch; the read fence once; then every member's partitions go into the real table by MOVE
 * PARTITION. */
static int batch_switch(batch *b, ferry_err *err)
{
    int rc = mv_begin_attempt_n(b->members, b->n, err);
    mvctx *x0 = b->members[0];
    if (!rc)
        rc = mv_fence_routers(x0, "move batch of", err);
    if (rc)
        return rc;
    unsigned grace = ferry_move_grace(x0->o);
    if (grace && ferry_stop_sleep_ms(grace))
        return ferry_err_set(err, FERRY_ETIMEOUT, "move batch of %s: stopping (the process was "
                             "asked to stop during the grace period)", x0->mv.u.move.id);
    size_t n = b->n;
    bool *stable = calloc(n + 1, sizeof *stable), *keep = calloc(n + 1, sizeof *keep);
    ferry_fingerprint *fp = calloc(n + 1, sizeof *fp), *dg = calloc(n + 1, sizeof *dg);
    int64_t *top = calloc(n + 1, sizeof *top);
    mv_fps *fps = calloc(n + 1, sizeof *fps); /* each member's journal fp */
    if (!stable || !keep || !fp || !dg || !top || !fps)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < n; k++)
        keep[k] = true;
    for (size_t i = 0; !rc && i < x0->tables.n; i++)
        rc = mv_ensure_staging(x0, table_at(x0, i), err);
    for (size_t i = 0; !rc && i < x0->tables.n; i++) {
        const ferry_table_def *t = table_at(x0, i);
        memset(fp, 0, n * sizeof *fp);
        memset(dg, 0, n * sizeof *dg);
        rc = mv_compare_copy_n(b->members, n, t, true, stable, fp, dg, top, err);
        for (size_t k = 0; !rc && k < n; k++) {
            keep[k] = keep[k] && stable[k];
            if (keep[k])
                rc = mv_fps_set(&fps[k], t->name, &fp[k], &dg[k], top[k], err);
        }
    }
    for (size_t k = 0; !rc && k < n; k++) {
        if (keep[k])
            mv_state_set_fps(&b->members[k]->st, &fps[k]);
        else
            ferry_log(FERRY_LOG_INFO, "msg=\"move leaves its batch: the source changed since "
                      "the copy, catch-up rounds run alone\" move=%s",
                      b->members[k]->mv.u.move.id);
    }
    for (size_t k = 0; fps && k < n; k++)
        mv_fps_free(&fps[k]);
    free(fps);
    free(stable);
    free(fp);
    free(top);
    free(dg);
    if (!rc)
        batch_keep(b, keep); /* those not stable finish alone */
    free(keep);
    if (rc || !b->n)
        return rc;
    /* the publish step of every member in one batch with their routes: routers stop reading
     * the unions; the fingerprints are journaled with it (the data records, same batch) */
    if ((rc = mv_publish_step_n(b->members, b->n, err)))
        return rc;
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:caught-up");
    /* the read fence: no router still reads the union under an older version */
    if ((rc = mv_fence_routers(x0 = b->members[0], "before publishing, move batch of", err)))
        return rc;
    uint32_t *splits = NULL;
    const char **tenants = tenants_of(b, &splits);
    if (!tenants)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    bool first = true;
    for (size_t i = 0; !rc && i < x0->tables.n; i++) {
        const ferry_table_def *t = table_at(x0, i);
        char st[FERRY_NAME_MAX + 32];
        mv_staging_name(t->name, st, sizeof st);
        mv_slice *stg = calloc(b->n, sizeof *stg);
        if (!stg) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        rc = mv_slice_list_n(&x0->dst, t, st, tenants, splits, b->n, true, stg, err);
        if (!rc)
            rc = mv_publish_slices(b->members, b->n, t, stg, &first, err);
        for (size_t k = 0; k < b->n; k++)
            mv_slice_free(&stg[k]);
        free(stg);
    }
    free(tenants);
    free(splits);
    if (!rc)
        rc = mv_advance_cleanup_n(b->members, b->n, err);
    return rc;
}

/* CLEANUP: each member's source still holds what was verified (its part digest unchanged: a
 * member whose source parts changed leaves the batch, and its own CLEANUP compares rows); every
 * member's partitions released on the source in one REPLACE from the empty twin where no object
 * can go (move_release.c) and one DETACH of the rest, their detached folders and staging
 * leftovers removed, the part records moved, each member DONE. */
static int batch_cleanup(batch *b, ferry_err *err)
{
    mvctx *x0 = b->members[0];
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && b->n && i < x0->tables.n; i++) {
        x0 = b->members[0];
        const ferry_table_def *t = table_at(x0, i);
        char st[FERRY_NAME_MAX + 32];
        mv_staging_name(t->name, st, sizeof st);
        size_t n = b->n;
        uint32_t *splits = NULL;
        const char **tenants = tenants_of(b, &splits);
        mv_slice *src = calloc(n + 1, sizeof *src), *dst = calloc(n + 1, sizeof *dst);
        bool *keep = calloc(n + 1, sizeof *keep);
        mv_pids all_src = {0}, all = {0};
        if (!tenants || !src || !dst || !keep)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (!rc)
            rc = mv_slice_list_n(&x0->src, t, t->name, tenants, splits, n, true, src, err);
        if (!rc)
            rc = mv_slice_list_n(&x0->dst, t, t->name, tenants, splits, n, true, dst, err);
        for (size_t k = 0; !rc && k < n; k++) {
            ferry_fingerprint dg = {0};
            const mv_fp *want = mv_state_fp(&b->members[k]->st, t->name);
            rc = mv_slice_digest(&src[k], NULL, &dg, NULL, err);
            keep[k] = !rc && (!src[k].n_pids || mv_fp_digest_matches(want, &dg));
            if (!rc && !keep[k])
                ferry_log(FERRY_LOG_INFO, "msg=\"move leaves its batch: its source parts "
                          "changed since they were verified, its rows are checked alone\" "
                          "move=%s", b->members[k]->mv.u.move.id);
        }
        /* the finished moves' rows on the target, from this listing */
        for (size_t k = 0; !rc && k < n; k++)
            if (keep[k]) {
                mvctx *x = b->members[k];
                x->res->partitions += dst[k].n_pids;
                for (size_t j = 0; j < dst[k].n_parts; j++)
                    x->res->rows += dst[k].parts[j].rows;
                x->counted = true;
            }
        if (!rc) {
            /* a member that leaves must not be detached here: shrink before the statement */
            mv_slice *s2 = src, *d2 = dst;
            size_t w = 0;
            for (size_t k = 0; k < n; k++)
                if (keep[k]) {
                    mv_slice tmp = s2[w];
                    s2[w] = s2[k];
                    s2[k] = tmp;
                    tmp = d2[w];
                    d2[w] = d2[k];
                    d2[k] = tmp;
                    w++;
                }
            batch_keep(b, keep);
        }
        for (size_t k = 0; !rc && k < b->n; k++) {
            for (size_t j = 0; !rc && j < src[k].n_pids; j++)
                if (mv_pids_add(&all_src, src[k].pids[j]) || mv_pids_add(&all, src[k].pids[j]))
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            for (size_t j = 0; !rc && j < dst[k].n_pids; j++)
                if (mv_pids_add(&all, dst[k].pids[j]))
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        if (!rc && all_src.n)
            rc = mv_target_broken_mend(b->members[0], t, &all_src, err);
        /* what it leaves in all_src goes by DETACH */
        size_t replaced = !rc && all_src.n ? mv_release_by_replace(b->members[0], t, &all_src)
                                           : 0;
        if (!rc && all_src.n) {
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_buf_puts(&sql, "ALTER TABLE ");
            ferry_sql_db_table(t->database, t->name, &sql);
            for (size_t k = 0; k < all_src.n; k++) {
                ferry_buf_puts(&sql, k ? ", DETACH PARTITION ID " : " DETACH PARTITION ID ");
                ferry_sql_quote(all_src.ids[k], &sql);
            }
            rc = mv_sql(&b->members[0]->src, ferry_buf_cstr(&sql), NULL, err);
            ferry_buf_free(&sql);
        }
        if (!rc && (all_src.n || replaced))
            ferry_fault_point("FERRY_TEST_CRASH_AFTER", "CLEANUP:detached");
        if (!rc && b->n)
            rc = mv_remove_detached_both(&b->members[0]->src, t->name, &b->members[0]->dst, st,
                                         t->database, &all, err);
        /* the part records of every member's partitions in one catalog batch (the members
         * move between the same two shards) */
        if (!rc && b->n)
            rc = mv_records_follow(b->members[0], t, &all, err);
        for (size_t k = 0; src && dst && k < n; k++) {
            mv_slice_free(&src[k]);
            mv_slice_free(&dst[k]);
        }
        mv_pids_free(&all_src);
        mv_pids_free(&all);
        free(src);
        free(dst);
        free(keep);
        free(tenants);
        free(splits);
    }
    if (rc)
        return rc;
    each(b, mv_remove_freezes); /* journaled with DONE */
    return b->n ? mv_advance_n(b->members, b->n, FERRY_MOVE_DONE, "", err) : FERRY_OK;
}

int ferry_move_run_batch(const ferry_move_opts *o, const char *const *ids, size_t n,
                         ferry_move_result *res, int *rcs, ferry_err *errs)
{
    batch b = {0};
    b.xs = calloc(n + 1, sizeof *b.xs);
    b.members = calloc(n + 1, sizeof *b.members);
    b.at = calloc(n + 1, sizeof *b.at);
    b.alone = calloc(n + 1, sizeof *b.alone);
    b.rcs = rcs;
    b.errs = errs;
    bool *opened = calloc(n + 1, sizeof *opened);
    int first_rc = FERRY_OK;
    if (!b.xs || !b.members || !b.at || !b.alone || !opened) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = ferry_err_set(&errs[i], FERRY_ENOMEM, "out of memory");
        first_rc = FERRY_ENOMEM;
        goto out;
    }
    /* the members: moves (not clones) just begun, all between the first one's two shards;
     * anything else (a resumed move) runs alone */
    for (size_t i = 0; i < n; i++) {
        mvctx *x = &b.xs[i];
        memset(&errs[i], 0, sizeof errs[i]);
        rcs[i] = mv_ctx_open(o, ids[i], x, &res[i], &errs[i]);
        opened[i] = true;
        if (rcs[i] || !x->looping)
            continue;
        const ferry_move *m = &x->mv.u.move;
        bool fits = m->state == FERRY_MOVE_PLANNED && !x->st.clone;
        if (fits && b.n) {
            const ferry_move *f = &b.members[0]->mv.u.move;
            fits = ferry_shard_set_equal(&f->from, &m->from) &&
                   ferry_shard_set_equal(&f->to, &m->to);
        }
        if (fits) {
            b.members[b.n] = x;
            b.at[b.n++] = i;
        } else {
            b.alone[i] = true;
        }
    }
    if (b.n == 1) { /* a batch of one is a move: the per-move states */
        b.alone[b.at[0]] = true;
        b.n = 0;
    }
    if (b.n) {
        ferry_log(FERRY_LOG_INFO, "msg=\"move batch started\" first=%s moves=%zu from=%s to=%s",
                  b.members[0]->mv.u.move.id, b.n, mv_from(b.members[0]), mv_to(b.members[0]));
        double t0 = ferry_clock_s();
        ferry_err e = {0};
        int rc = mv_advance_n(b.members, b.n, FERRY_MOVE_CLONE, "", &e);
        add_ms(&b, FERRY_MOVE_PLANNED, t0);
        if (rc)
            batch_fail_all(&b, rc, &e);
        struct {
            enum ferry_move_state s;
            int (*f)(batch *, ferry_err *);
        } steps[] = {{FERRY_MOVE_CLONE, batch_clone},
                     {FERRY_MOVE_VERIFY, batch_verify},
                     {FERRY_MOVE_SWITCH, batch_switch},
                     {FERRY_MOVE_CLEANUP, batch_cleanup}};
        for (size_t s = 0; s < sizeof steps / sizeof steps[0] && b.n && !stopping(&b); s++) {
            memset(&e, 0, sizeof e);
            t0 = ferry_clock_s();
            rc = steps[s].f(&b, &e);
            add_ms(&b, steps[s].s, t0);
            if (rc)
                batch_fail_all(&b, rc, &e);
        }
    }
    /* the moves that left the batch, or never were in one, run alone from their journal */
    for (size_t i = 0; i < n; i++)
        if (b.alone[i] && !rcs[i])
            rcs[i] = mv_ctx_loop(&b.xs[i], &errs[i]);
out:
    for (size_t i = 0; i < n; i++) {
        if (opened && opened[i])
            rcs[i] = mv_ctx_close(&b.xs[i], rcs[i], &errs[i]);
        if (rcs[i] && !first_rc)
            first_rc = rcs[i];
    }
    free(opened);
    free(b.xs);
    free(b.members);
    free(b.at);
    free(b.alone);
    return first_rc;
}

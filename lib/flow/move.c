/* Moving one slice between shards: the journaled state machine (see move.h, docs/moves.md).
 *
 * The journal is the catalog record moves/ID (state, step, detail) plus jobs/move.ID whose data
 * holds the freezes made and maybe not yet removed, the verified fingerprints per table and the
 * mode: typed in move_state.h (x->st, the JSON decoded and encoded in move_state.c only).
 * Every write of either goes through the flow engine (the kind ferry_move_flow checks a
 * transition; a note keeps the state) as one compare-and-set batch of both (mv_journal_n,
 * move_journal.c), so neither is ever a state behind; the run also holds the catalog lease
 * "move.ID".
 *
 *  state    work done in the state                         guarantees when the state is left
 *  -------  ---------------------------------------------  --------------------------------------
 *  PLANNED  nothing (ferry_move_begin checked the request) the request was valid when journaled
 *  CLONE    one copy round: FREEZE every slice partition   the target's staging table
 *           on the source (fresh freeze name per attempt),  <table>_ferry_staging holds a copy of a
 *           send the parts agent to agent into staging's    snapshot of every slice partition
 *           detached/ (hot: real files, checked against     (parts byte-identical, checked while
 *           checksums.txt while written; cold: pointer      written); the real table on the target
 *           files, every object checked), ATTACH them in    is untouched; routing unchanged
 *           staging, remove the freeze
 *  VERIFY   every staged part has the hash_of_all_files    the staged copy is faithful; the
 *           and rows of a source part; partitions the       routing switch is allowed
 *           source did not change since are equal
 *           (equal part hashes: no row read)
 *  -------  the routing switch: one catalog batch moves the journal to SWITCH and the slice's
 *           route to the target (both by CAS). THE COMMIT POINT: from here on the move only
 *           rolls forward; the source keeps every row until CLEANUP
 *  SWITCH   wait the grace period (writes in flight to the   the target's real table holds every
 *           source land), then catch-up rounds: freeze      row of the slice: rows the source got
 *           again, make staging equal to the source         before the switch (verified equal,
 *           (send new and merged parts, detach parts the    partition by partition) plus rows
 *           source merged away), until staging and source   written to the target after it;
 *           have equal part hashes; their digest and top    staging holds nothing of the slice
 *           (or hot rows' fingerprint) journaled; step is
 *           set to PUBLISH (with the route: a new routing
 *           version), the read fence waits for readers of
 *           the union, then each partition goes into
 *           the real table (move_publish.c): a cold
 *           one by ATTACH PARTITION FROM staging, then
 *           staging emptied by REPLACE from the empty
 *           twin; others by MOVE PARTITION ... TO
 *           TABLE. A resume first drops from staging
 *           what the table holds, so no partition is
 *           added twice
 *  CLEANUP  the source holds nothing newer than what was   the source holds nothing of the slice
 *           journaled (else stop: a late write); release    (no active, detached or frozen part);
 *           the slice's partitions on the source (REPLACE   no leftover of the move on the target
 *           from the empty twin where no object can go,
 *           move_release.c; else DETACH), remove
 *           the detached folders through the agent, remove
 *           leftovers in the target's staging detached/,
 *           remove every freeze the move made
 *  DONE     -
 *  FAILED   (from CLONE/VERIFY) the target's staging parts   routing never changed; the target
 *           of the slice were detached and removed, the     holds nothing of the move
 *           source's freezes removed
 *
 * Readers (lib/router/routing.c has the full argument): the switch, the publish step and the
 * entry into CLEANUP are each one batch with the slice's route, so each raises the routing
 * version; routers read the union of source and target under the switch's version, hold reads
 * of the slice under the publish step's, and read the target alone from CLEANUP's. The read
 * fence before the first partition is published waits until no router reads under an older
 * version.
 *
 * Invariants: the source's real table is only read until CLEANUP; the target's real table only
 * receives parts from staging (MOVE PARTITION, or ATTACH PARTITION FROM), after verification;
 * object storage is never written or deleted (cold parts travel as pointer files, removal is a
 * plain unlink by the agent); no statement can DROP, TRUNCATE or DELETE (sqlguard). A step
 * repeated after a crash gives the same result: freezes are found by name, sends of a part
 * already placed answer "existing", ATTACH of a partition without detached parts attaches
 * nothing, the catch-up diff is computed from what is there, and the publish skips an empty
 * staging partition and drops staged parts the table already holds. */
#include "ferry/move.h"
#include "ferry/fence.h"
#include "ferry/repair_need.h"
#include "ferry/stop.h"

#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ferry/agent.h"
#include "ferry/buf.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/rate.h"
#include "ferry/strutil.h"
#include "ferry/tally.h"
#include "ferry/testknob.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/move_run.h"
#include "flow/part_records.h"
#include "flow/replica_int.h"
#include "flow/staging_load.h"

/* ---- small helpers ---------------------------------------------------------------------- */

/* Test-only crash points (include/ferry/testknob.h, docs/moves.md "Crash recovery"): the flow
 * engine kills the mover at FERRY_TEST_CRASH_BEFORE=<state>, before each transition's commit
 * (the kind ferry_move_flow declares it); the points inside a state are direct
 * ferry_fault_point calls with FERRY_TEST_CRASH_AFTER=<state>:<what> (CLONE:sent in
 * move_send.c; SWITCH:switched, SWITCH:caught-up, CLEANUP:detached here and in move_batch.c;
 * SWITCH:published-one and SWITCH:attached in move_publish.c). */

/* ---- what the servers hold -------------------------------------------------------------- */

/* ---- the move context ------------------------------------------------------------------- */

void mv_progress(mvctx *x)
{
    if (!x->o->progress)
        return;
    ferry_move_progress p = {.id = x->mv.u.move.id,
                             .tenant = x->mv.u.move.tenant,
                             .split = x->mv.u.move.split,
                             .from = mv_from(x),
                             .to = mv_to(x),
                             .state = ferry_move_state_name(x->mv.u.move.state),
                             .bytes_done = x->bytes_done,
                             .bytes_total = x->bytes_total,
                             .parts_done = x->parts_done,
                             .parts_total = x->parts_total,
                             .elapsed_s = ferry_clock_s() - x->t0};
    x->o->progress(&p, x->o->progress_arg);
}

int mv_ensure_staging(mvctx *x, const ferry_table_def *t, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    /* read-only mode: a staging table detached by a load (another flow's, or one a crash cut)
     * is waited for or attached again before CREATE could make a second one */
    int rc = stg_recover(&x->dst, t->database, st, err);
    if (rc)
        return rc;
    ferry_buf sql = FERRY_BUF_INIT;
    /* same columns, engine, keys and storage policy: what ATTACH and MOVE PARTITION require */
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    ferry_sql_db_table(t->database, st, &sql);
    ferry_buf_puts(&sql, " AS ");
    ferry_sql_db_table(t->database, t->name, &sql);
    rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    /* The catch-up rounds name staging parts (DETACH PART of a stale copy); a background merge
     * in staging would rename them under our feet (NO_SUCH_DATA_PART). Nothing needs merges in
     * staging: its parts go to the real table by MOVE PARTITION. Stopped on every run, since the
     * setting does not survive a server restart. */
    if (!rc) {
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "SYSTEM STOP MERGES ");
        ferry_sql_db_table(t->database, st, &sql);
        rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    }
    ferry_buf_free(&sql);
    return rc;
}

/* Detaches one part of the target's staging table and removes its folder. */
int mv_staging_drop_part(mvctx *x, const ferry_table_def *t, const char *part, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(t->database, st, &sql);
    ferry_buf_puts(&sql, " DETACH PART ");
    ferry_sql_quote(part, &sql);
    int rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    if (rc)
        return rc;
    return ferry_agent_remove_detached(x->dst.ag, t->database, st, part, NULL, NULL, err);
}

/* ---- the states ---------------------------------------------------------------------------- */

static int do_clone(mvctx *x, ferry_err *err)
{
    int rc = mv_begin_attempt(x, err);
    char fz[160], tag[32];
    snprintf(tag, sizeof tag, "c%u", x->mv.u.move.step);
    mv_freeze_name(x, tag, fz, sizeof fz); /* journaled by the round if it freezes */
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        rc = mv_ensure_staging(x, table_at(x, i), err);
        if (!rc)
            rc = mv_copy_round(x, table_at(x, i), fz, true, err);
    }
    /* the snapshot's parts are staged: removed while VERIFY and SWITCH run (move_unfreeze.c) */
    if (!rc && mv_freeze_journaled(x, fz))
        rc = mv_unfreeze_start(x, fz, err);
    if (!rc)
        rc = mv_advance(x, FERRY_MOVE_VERIFY, "", err);
    return rc;
}

/* VERIFY, then the routing switch in one batch with the journal. */
static int do_verify(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        bool stable;
        rc = mv_compare_copy(x, table_at(x, i), false, &stable, NULL, NULL, NULL, err);
    }
    if (rc)
        return rc;
    return mv_switch_route(x, err);
}

/* Readies the routing switch of a verified move: the switch fence, then the slice's route as
 * the switch writes it into x->switch_route (read now: its version is what the CAS compares). */
int mv_switch_prepare(mvctx *x, ferry_err *err)
{
    int rc;
    /* Every router must reach the target before the route names it (a shard just added reaches
     * routers through the catalog), and no client may still be about to retry a failed write of
     * the slice: its retry must reach the shard that has the first attempt's rows
     * (lib/router/fence.c, lib/router/pending.c). */
    if ((rc = ferry_router_fence_switch(x->o->cfg, mv_to(x), x->mv.u.move.tenant,
                                        x->mv.u.move.split, 0, err)))
        return ferry_err_prefix(err, "move %s: ", x->mv.u.move.id);
    ferry_record *route = &x->switch_route;
    ferry_record_free(route);
    if ((rc = mv_route_get(x, route, err)))
        return rc;
    /* the slice's shards with `from` replaced by `to` (first); a clone keeps `from` and adds
     * `to` (last) */
    ferry_shard_set *rs = &route->u.route.shards, nl = {0};
    if (x->st.clone)
        nl = *rs;
    else
        rc = ferry_shard_set_add(&nl, mv_to(x), err);
    for (size_t i = 0; !rc && !x->st.clone && i < ferry_shard_set_count(rs); i++)
        if (strcmp(ferry_shard_set_at(rs, i), mv_from(x)))
            rc = ferry_shard_set_add(&nl, ferry_shard_set_at(rs, i), err);
    if (!rc && x->st.clone)
        rc = ferry_shard_set_add(&nl, mv_to(x), err);
    if (rc)
        return ferry_err_prefix(err, "move %s: ", x->mv.u.move.id);
    *rs = nl;
    /* A repair-need record of the slice names `from` as a replica that took (or missed) the
     * acknowledged writes: from the switch on, `to` is that replica's copy, so the record names
     * it instead (beside it for a clone), in the switch's batch. Routers then keep reads on the
     * target, and writes recorded later intersect with it, not with a shard out of the route. */
    x->switch_need_set = false;
    ferry_record_free(&x->switch_need); /* a retried switch's earlier record */
    return ferry_repair_need_hand_over(x->cat, x->mv.u.move.tenant, x->mv.u.move.split,
                                       mv_from(x), mv_to(x), x->st.clone,
                                       &x->switch_need, &x->switch_need_set, err);
}

/* The routing switch of xs[0..n) (each readied by mv_switch_prepare): the journal of each to
 * SWITCH and its slice's route to the target in ONE catalog batch, the commit point of every
 * one of them (a batch's members switch together). */
int mv_switch_commit_n(mvctx **xs, size_t n, ferry_err *err)
{
    ferry_record *routes = calloc(n + 1, sizeof *routes);
    ferry_record *needs = calloc(n + 1, sizeof *needs);
    size_t n_needs = 0;
    if (!routes || !needs) {
        free(routes);
        free(needs);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < n; k++) {
        routes[k] = xs[k]->switch_route; /* route and job records own no memory */
        if (xs[k]->switch_need_set)
            needs[n_needs++] = xs[k]->switch_need;
    }
    uint64_t routing_version = 0;
    int rc = mv_journal_extra_n(xs, n, FERRY_MOVE_SWITCH, "routing switched", routes, needs,
                                n_needs, &routing_version, err);
    free(routes);
    free(needs);
    if (rc) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "routing switch lost a race: ");
        return rc;
    }
    for (size_t k = 0; k < n; k++) {
        const ferry_move *m = &xs[k]->mv.u.move;
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"routing switched\" move=%s tenant=%s split=%u to=%s routing_version=%llu",
                  m->id, m->tenant, m->split, mv_to(xs[k]), (unsigned long long)routing_version);
        mv_progress(xs[k]);
    }
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:switched");
    return FERRY_OK;
}

int mv_switch_route(mvctx *x, ferry_err *err)
{
    /* a race lost on the route or on the slice's repair-need record (a router recording an
     * acknowledged write) is read again and retried; one on the move's own records is lost
     * again and returned */
    for (int round = 0;; round++) {
        int rc = mv_switch_prepare(x, err);
        if (!rc)
            rc = mv_switch_commit_n(&x, 1, err);
        if (rc != FERRY_ECONFLICT || round == MV_SWITCH_ROUNDS - 1)
            return rc;
        ferry_err_clear(err);
    }
}

/* Waits until every router in [cluster] routers runs on the catalog's current routing version
 * (or later) and has nothing in flight under an older one (lib/router/fence.c). */
int mv_fence_routers(mvctx *x, const char *what, ferry_err *err)
{
    uint64_t now_version = 0;
    int rc = ferry_catalog_routing_version(x->cat, &now_version, err);
    if (!rc)
        rc = ferry_router_fence(x->o->cfg, now_version, 0, err);
    if (rc)
        ferry_err_prefix(err, "%s %s: ", what, x->mv.u.move.id);
    return rc;
}

/* SWITCH of a clone. The route now lists source and target, so after the grace period every
 * write reaches both; the target's real table holds only those. Each slice partition of the
 * source is then made equal on the target with rs_sync_partition (replica_sync.c): staging
 * already holds CLONE's snapshot, so only parts written or merged since are sent, and they
 * reach the real table either added (the target's parts are a subset of the source's) or by
 * REPLACE PARTITION from staging (the target's rows are a subset). Ends when every partition has
 * equal fingerprints on both; else it stops with the journal in SWITCH (resumable), the target
 * routed but possibly missing rows, which `ferry repair` also fixes. */
static int do_switch_clone(mvctx *x, ferry_err *err)
{
    int rc = mv_begin_attempt(x, err);
    if (rc)
        return rc;
    /* as do_switch: routers must send new writes to both replicas before the sync below */
    if ((rc = mv_fence_routers(x, "clone", err)))
        return rc;
    unsigned grace = ferry_move_grace(x->o);
    if (grace && ferry_stop_sleep_ms(grace))
        return ferry_err_set(err, FERRY_ETIMEOUT, "move %s: stopping (the process was asked to "
                             "stop during the grace period)", x->mv.u.move.id);
    /* a client's retry of a write that failed on the new replica would be stored there a second
     * time once the sync below copied the first attempt's rows (ferry/fence.h) */
    char why[400];
    if (ferry_router_retry_pending(x->o->cfg, x->mv.u.move.tenant, x->mv.u.move.split, 0, why,
                                   sizeof why))
        return ferry_err_set(err, FERRY_ETIMEOUT, "clone %s: %s; the clone stays in SWITCH, "
                             "resume it once the retry came", x->mv.u.move.id, why);
    /* nor a write open since before the sync: its rows may be on the new replica's side only
     * in part, and it may still fail and be retried there after the copies landed */
    if ((rc = ferry_router_wait_open_writes(x->o->cfg, x->mv.u.move.tenant, x->mv.u.move.split,
                                            FERRY_OPEN_WRITES_WAIT_MS, err)))
        return ferry_err_prefix(err, "clone %s stays in SWITCH (resume it): ", x->mv.u.move.id);
    char fz[160], tag[32];
    snprintf(tag, sizeof tag, "k%u", x->mv.u.move.step);
    rc = mv_freeze_new(x, tag, fz, sizeof fz, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char (*ids)[FERRY_NAME_MAX] = NULL;
        size_t n = 0;
        rc = rs_slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &ids,
                           &n, err);
        for (size_t k = 0; !rc && k < n; k++) {
            rs_result rr;
            rc = rs_sync_partition(&x->src, &x->dst, t, ids[k], fz, 0, MV_MAX_ROUNDS, false, NULL,
                                   &rr, err);
            x->res->hot_copied += rr.hot_copied;
            x->res->cold_copied += rr.cold_copied;
            x->bytes_done += rr.hot_copied + rr.cold_copied;
            x->parts_done += rr.parts_sent;
            if (!rc && !rr.repaired)
                rc = ferry_err_set(err, FERRY_EIO,
                                   "clone %s: %s.%s partition %s on the new replica %s differs "
                                   "from %s (%s: %s); resume later or run ferry repair",
                                   x->mv.u.move.id, t->database, t->name, ids[k], x->dst.name,
                                   x->src.name, rr.action, rr.detail);
            mv_progress(x);
        }
        free(ids);
    }
    if (!rc)
        rc = mv_remove_freeze_named(x, fz, err);
    if (!rc)
        rc = mv_advance_cleanup(x, err);
    return rc;
}

/* CLEANUP of a clone: the source keeps everything; what the clone left in the target's
 * staging table and every freeze it made are removed. */
/* Empties the slice's partitions of the target's staging table (DETACH PARTITION, then the
 * detached folders and temporary folders of the agents removed). pids: more partition ids whose
 * staging leftovers go too; the staging partitions are added to it. */
static int staging_clear(mvctx *x, const ferry_table_def *t, mv_pids *pids, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    mv_pids stg = {0};
    int rc = mv_slice_pids(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, &stg, err);
    for (size_t k = 0; !rc && k < stg.n; k++) {
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(t->database, st, &sql);
        ferry_buf_puts(&sql, " DETACH PARTITION ID ");
        ferry_sql_quote(stg.ids[k], &sql);
        rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
        ferry_buf_free(&sql);
        if (!rc)
            rc = mv_pids_add(pids, stg.ids[k]);
    }
    if (!rc)
        rc = mv_remove_detached_of(&x->dst, t->database, st, pids, true, err);
    mv_pids_free(&stg);
    return rc;
}

/* The catalog's part records follow the slice's cold parts: the target now references what the
 * source did (a clone: as well as the source). pids: the slice's partitions on either side. */
int mv_records_follow(mvctx *x, const ferry_table_def *t, const mv_pids *pids, ferry_err *err)
{
    const char **ids = calloc(pids->n + 1, sizeof *ids);
    if (!ids)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; k < pids->n; k++)
        ids[k] = pids->ids[k];
    x->catalog_writes++;
    int rc = ferry_part_records_reassign(x->cat, t->name, ids, pids->n, mv_from(x),
                                         mv_to(x), x->st.clone, NULL, err);
    free(ids);
    if (rc)
        ferry_err_prefix(err, "move %s: updating the catalog's part records: ", x->mv.u.move.id);
    return rc;
}

static int do_cleanup_clone(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        mv_pids all = {0};
        rc = mv_slice_pids(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &all, err);
        if (!rc)
            rc = staging_clear(x, t, &all, err);
        if (!rc)
            rc = mv_records_follow(x, t, &all, err);
        mv_pids_free(&all);
    }
    mv_unfreeze_join(x); /* every freeze is removed here: the background one first */
    if (!rc)
        rc = mv_remove_freezes(x, err);
    if (!rc)
        rc = mv_advance(x, FERRY_MOVE_DONE, "", err);
    return rc;
}

static int do_switch(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    if (x->st.clone)
        return do_switch_clone(x, err);
    bool resumed_publish = x->mv.u.move.step >= MV_STEP_PUBLISH;
    if (x->mv.u.move.step < MV_STEP_PUBLISH) {
        if ((rc = mv_begin_attempt(x, err)))
            return rc;
        /* Writers that follow the routing table: every write router listed in [cluster]
         * routers must have taken the table of the switch (or a later one) and finished every
         * write it grouped with an older table; then the grace period covers other writers. */
        if ((rc = mv_fence_routers(x, "move", err)))
            return rc;
        unsigned grace = ferry_move_grace(x->o);
        if (grace && ferry_stop_sleep_ms(grace))
            return ferry_err_set(err, FERRY_ETIMEOUT, "move %s: stopping (the process was asked "
                                 "to stop during the grace period)", x->mv.u.move.id);
        bool stable = false;
        mv_fps fps = {0}; /* the journal's fp once every table is caught up */
        for (size_t i = 0; !rc && i < x->tables.n; i++)
            rc = mv_ensure_staging(x, table_at(x, i), err);
        for (int round = 0; !rc; round++) {
            /* Compare first: the copy made before the switch is usually equal already (nothing
             * reached the source since), and then no freeze and no send is needed. */
            stable = true;
            mv_fps_free(&fps);
            for (size_t i = 0; !rc && stable && i < x->tables.n; i++) {
                ferry_fingerprint fp = {0}, dg = {0};
                int64_t top = -1;
                bool st = true;
                rc = mv_compare_copy(x, table_at(x, i), true, &st, &fp, &dg, &top, err);
                stable = stable && st;
                if (!rc && st)
                    rc = mv_fps_set(&fps, table_at(x, i)->name, &fp, &dg, top, err);
            }
            if (rc || stable || round == MV_MAX_ROUNDS)
                break;
            char fz[160], tag[32];
            snprintf(tag, sizeof tag, "s%ur%d", x->mv.u.move.step, round);
            mv_freeze_name(x, tag, fz, sizeof fz); /* journaled by the round if it freezes */
            for (size_t i = 0; !rc && i < x->tables.n; i++)
                rc = mv_copy_round(x, table_at(x, i), fz, false, err);
            if (!rc && mv_freeze_journaled(x, fz))
                rc = mv_remove_freeze_named(x, fz, err);
        }
        if (!rc && !stable)
            rc = ferry_err_set(err, FERRY_EIO,
                               "move %s: the source still receives rows of the slice after %d "
                               "catch-up rounds; are writers still using the old route? "
                               "(resume with the same command)",
                               x->mv.u.move.id, MV_MAX_ROUNDS);
        if (!rc)
            mv_state_set_fps(&x->st, &fps);
        mv_fps_free(&fps);
        if (rc)
            return rc;
        /* The publish step raises the routing version: from it on, routers stop reading the
         * union of source and target for this slice (and hold its reads until CLEANUP). The
         * verified fingerprints are journaled with it (the data record, same batch). */
        if ((rc = mv_publish_step_n(&x, 1, err)))
            return rc;
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:caught-up");
    }
    /* The read fence (every run, so a resumed one too): no router may still read the union
     * under a version older than the publish step's when the first partition moves, or it
     * could count that partition twice (source + target real) or miss it (docs/routing.md). */
    if ((rc = mv_fence_routers(x, "before publishing, move", err)))
        return rc;
    /* publish: staging -> real table (move_publish.c); a resumed publish first drops from
     * staging what the table holds already */
    rc = mv_publish(x, resumed_publish, err);
    if (!rc)
        rc = mv_advance_cleanup(x, err);
    return rc;
}

/* *newer (a part of the source's listing sl above top) NULL when every active part of sl above
 * top has its bytes on the target too (the same hash_of_all_files and rows in the slice's
 * partition there): a part only renamed since the switch (a tiering swap gives the moved part
 * new block numbers) holds nothing the target lacks. Else *newer names one that does not. */
static int parts_on_target(mvctx *x, const ferry_table_def *t, const mv_slice *sl, int64_t top,
                           const mv_part **newer, ferry_err *err)
{
    mv_slice dst = {0};
    int rc = mv_slice_list(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, true,
                           &dst, err);
    for (size_t i = 0; !rc && i < sl->n_pids; i++) {
        mv_parts ps = mv_slice_parts(sl, sl->pids[i]), ds = mv_slice_parts(&dst, sl->pids[i]);
        for (size_t k = 0; k < ps.n; k++) {
            const mv_part *p = &ps.p[k];
            bool there = !p->active || mv_part_top(p) <= top;
            for (size_t j = 0; !there && j < ds.n; j++)
                there = ds.p[j].active && !strcmp(ds.p[j].hash, p->hash) && ds.p[j].rows == p->rows;
            if (!there) {
                *newer = p;
                goto out;
            }
        }
    }
    *newer = NULL;
out:
    mv_slice_free(&dst);
    return rc;
}

/* CLEANUP's check before it detaches the source: it must hold what was verified and published,
 * nothing the target lacks. Its parts unchanged (the journaled digest), or else changed by
 * merges alone: with a journaled top, no part above it that the target lacks (a write that
 * reached the old server after the switch and the grace period makes one); without (a table that numbers blocks per
 * partition), the same rows. Only the last reads rows. want: the table's record in the
 * journal's fp (mv_state_fp; NULL: nothing was journaled for it, nothing to check). */
static int source_as_verified(mvctx *x, const ferry_table_def *t, const mv_fp *want,
                              ferry_err *err)
{
    mv_slice sl = {0};
    ferry_fingerprint dg = {0}, fp = {0};
    const mv_part *newer = NULL;
    int rc = mv_slice_list(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, true,
                           &sl, err);
    if (!rc)
        rc = mv_slice_digest(&sl, NULL, &dg, NULL, err);
    if (rc || !want || mv_fp_digest_matches(want, &dg))
        goto out;
    if (want->has_top) {
        if ((newer = mv_slice_above_top(&sl, want->top)))
            rc = parts_on_target(x, t, &sl, want->top, &newer, err);
        if (!rc && newer)
            rc = ferry_err_set(err, FERRY_EIO,
                               "move %s: %s.%s on %s changed after it was verified (part %s was "
                               "written since): a write reached the old server after the switch "
                               "and the grace period; the source is kept, nothing was removed",
                               x->mv.u.move.id, t->database, t->name, x->src.name, newer->name);
        goto out;
    }
    rc = mv_source_fingerprint(x, t, true, &fp, &dg, err);
    if (!rc && !mv_fp_matches(want, &fp))
        rc = ferry_err_set(err, FERRY_EIO,
                           "move %s: %s.%s on %s changed after it was verified (%llu rows now, "
                           "%llu verified): a write reached the old server after the switch and "
                           "the grace period; the source is kept, nothing was removed",
                           x->mv.u.move.id, t->database, t->name, x->src.name,
                           (unsigned long long)fp.rows,
                           (unsigned long long)want->fp.rows);
out:
    mv_slice_free(&sl);
    return rc;
}

static int do_cleanup(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    if (x->st.clone)
        return do_cleanup_clone(x, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char st[FERRY_NAME_MAX + 32];
        mv_staging_name(t->name, st, sizeof st);
        mv_pids src = {0}, all = {0};
        rc = mv_slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &src, err);
        if (!rc)
            rc = mv_slice_pids(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &all,
                            err);
        for (size_t k = 0; !rc && k < src.n; k++)
            rc = mv_pids_add(&all, src.ids[k]);
        if (!rc && src.n)
            rc = mv_target_broken_mend(x, t, &src, err);
        if (!rc && src.n)
            rc = source_as_verified(x, t, mv_state_fp(&x->st, t->name), err);
        /* what it leaves in src goes by DETACH */
        size_t replaced = !rc && src.n ? mv_release_by_replace(x, t, &src) : 0;
        if (!rc && src.n) {
            /* every partition of the slice in one ALTER TABLE */
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_buf_puts(&sql, "ALTER TABLE ");
            ferry_sql_db_table(t->database, t->name, &sql);
            for (size_t k = 0; k < src.n; k++) {
                ferry_buf_puts(&sql, k ? ", DETACH PARTITION ID " : " DETACH PARTITION ID ");
                ferry_sql_quote(src.ids[k], &sql);
            }
            rc = mv_sql(&x->src, ferry_buf_cstr(&sql), NULL, err);
            ferry_buf_free(&sql);
        }
        if (!rc && (src.n || replaced))
            ferry_fault_point("FERRY_TEST_CRASH_AFTER", "CLEANUP:detached");
        if (!rc)
            rc = mv_remove_detached_both(&x->src, t->name, &x->dst, st, t->database, &all, err);
        if (!rc)
            rc = mv_records_follow(x, t, &all, err);
        mv_pids_free(&src);
        mv_pids_free(&all);
    }
    mv_unfreeze_join(x); /* every freeze is removed here: the background one first */
    if (!rc)
        rc = mv_remove_freezes(x, err);
    if (!rc)
        rc = mv_advance(x, FERRY_MOVE_DONE, "", err);
    return rc;
}

/* FAILED: the target side of a move that never switched is removed; the source keeps all. */
static int rollback(mvctx *x, const char *why, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        mv_pids all = {0};
        rc = mv_slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &all, err);
        if (!rc)
            rc = staging_clear(x, t, &all, err);
        mv_pids_free(&all);
    }
    mv_unfreeze_join(x); /* every freeze is removed here: the background one first */
    if (!rc)
        rc = mv_remove_freezes(x, err);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", why);
    if (!rc)
        rc = mv_advance(x, FERRY_MOVE_FAILED, detail, err);
    return rc;
}

/* ---- running a move ------------------------------------------------------------------------ */

/* Opens the run of move id into x (memset here): the catalog, the move's lease, its journal,
 * its shards' connections and tables. x->ran false: the move was over already (DONE or FAILED)
 * or the open failed before it started. Close with mv_ctx_close whatever this returns. */
int mv_ctx_open(const ferry_move_opts *o, const char *id, mvctx *x, ferry_move_result *res,
                ferry_err *err)
{
    memset(x, 0, sizeof *x);
    memset(res, 0, sizeof *res);
    x->o = o;
    x->res = res;
    x->rate = o->rate;
    ferry_record_init(&x->mv, FERRY_REC_MOVE);
    ferry_record_init(&x->job, FERRY_REC_JOB);
    ferry_flow_journal_init(&x->fj, NULL, &ferry_move_flow, o->owner ? o->owner : "");
    x->t0 = ferry_clock_s();
    snprintf(res->id, sizeof res->id, "%s", id);
    if (!x->rate && o->max_bytes_per_second) {
        if (!(x->own_rate = ferry_rate_new(o->max_bytes_per_second)))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        x->rate = x->own_rate;
    }
    ferry_record fsh, tsh;
    ferry_record_init(&fsh, FERRY_REC_SHARD);
    ferry_record_init(&tsh, FERRY_REC_SHARD);
    int rc = ferry_catalog_open(o->catalog_url, &x->cat, err);
    if (rc)
        goto out;
    x->fj.cat = x->cat;
    char lname[96];
    snprintf(lname, sizeof lname, "move.%s", id);
    if ((rc = ferry_catalog_lease_acquire(x->cat, lname, o->owner ? o->owner : "ferry", &x->lease,
                                          err))) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "move %s is being run by another mover: ", id);
        goto out;
    }
    snprintf(x->mv.u.move.id, sizeof x->mv.u.move.id, "%s", id);
    rc = ferry_catalog_get(x->cat, &x->mv, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "unknown move '%s'", id);
    if (rc)
        goto out;
    snprintf(x->job.u.job.id, sizeof x->job.u.job.id, "move.%s", id);
    if ((rc = ferry_catalog_get(x->cat, &x->job, err)))
        goto out;
    /* every move's data has had the freezes since its PLANNED; a record ferry did not write
     * is the catalog's fault, not the user's input (hence not the decoder's FERRY_EINVAL) */
    ferry_err de = {0};
    if (mv_state_decode(ferry_job_data(&x->job.u.job), &x->st, &de) || !x->st.has_freezes) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "move %s: malformed journal data (%s)", id,
                           de.msg[0] ? de.msg : "no \"freezes\"");
        goto out;
    }
    const ferry_move *m = &x->mv.u.move;
    /* the run copies from one shard to one (mv_from, mv_to); ferry writes no other journal */
    if (ferry_shard_set_count(&m->from) != 1 || ferry_shard_set_count(&m->to) != 1) {
        char ftext[FERRY_SHARDS_TEXT_MAX], ttext[FERRY_SHARDS_TEXT_MAX];
        rc = ferry_err_set(err, FERRY_EINVAL, "move %s: the journal names source '%s' and "
                           "target '%s'; a move goes from one shard to one", id,
                           ferry_shard_set_str(&m->from, ftext), ferry_shard_set_str(&m->to, ttext));
        goto out;
    }
    snprintf(res->tenant, sizeof res->tenant, "%s", m->tenant);
    res->split = m->split;
    mv_copy_str(res->from, sizeof res->from, mv_from(x));
    mv_copy_str(res->to, sizeof res->to, mv_to(x));
    res->resumed = m->state != FERRY_MOVE_PLANNED;
    res->state = m->state;
    if (m->state == FERRY_MOVE_DONE || m->state == FERRY_MOVE_FAILED)
        goto out;
    /* The slice's lease, as a tiering run and a repair hold it while they work on the slice:
     * a move must not start beside one of them (the ZooKeeper soak: a tier wave swapped a
     * partition of t5/0 on node1 while a move of t5/0 to node3 froze it, and the part records
     * the move handed over named parts node3 never held). A tiering run skips a slice while a
     * move of it is unfinished, so the lease is only contended at a move's start. */
    if ((rc = ferry_slice_lease_take(x->cat, &x->slice, m->tenant, m->split,
                                     o->owner ? o->owner : "ferry", err))) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "move %s: tenant %s split %u is busy (a tiering run or a repair "
                             "works on it; the move was not run, resume it later): ", id,
                             m->tenant, m->split);
        goto out;
    }
    x->ran = true;
    if ((rc = mv_load_shard(x->cat, mv_from(x), &fsh, err)) ||
        (rc = mv_load_shard(x->cat, mv_to(x), &tsh, err)) ||
        (rc = mv_load_tables(x->cat, &x->tables, err)) ||
        (rc = mv_conn_open(&fsh.u.shard, o->cfg, &x->src, err)) ||
        (rc = mv_conn_open(&tsh.u.shard, o->cfg, &x->dst, err)))
        goto out;
    x->src.cat = x->dst.cat = x->cat; /* the staging loads' lease (staging_load.h) */
    for (size_t i = 0; !rc && i < x->tables.n; i++) { /* read-only mode: a load cut by a crash */
        char st[FERRY_NAME_MAX + 32];
        mv_staging_name(table_at(x, i)->name, st, sizeof st);
        rc = stg_recover(&x->dst, table_at(x, i)->database, st, err);
    }
    if (rc)
        goto out;
    x->looping = true;
    ferry_log(FERRY_LOG_INFO, "msg=\"move %s\" move=%s tenant=%s split=%u from=%s to=%s state=%s",
              res->resumed ? "resumed" : "started", id, m->tenant, m->split, mv_from(x), mv_to(x),
              ferry_move_state_name(m->state));
out:
    ferry_record_free(&fsh);
    ferry_record_free(&tsh);
    return rc;
}

/* Runs the states of an opened move until DONE or an error. */
int mv_ctx_loop(mvctx *x, ferry_err *err)
{
    const ferry_move *m = &x->mv.u.move;
    const char *id = m->id;
    int rc = FERRY_OK;
    while (!rc && m->state != FERRY_MOVE_DONE) {
        if (ferry_stop_requested()) { /* a safe point: the journal holds the state reached */
            rc = ferry_err_set(err, FERRY_ETIMEOUT, "move %s: stopping (the process was asked "
                               "to stop)", id);
            break;
        }
        mv_progress(x);
        enum ferry_move_state was = m->state;
        double s0 = ferry_clock_s();
        switch (m->state) {
        case FERRY_MOVE_PLANNED:
            rc = mv_advance(x, FERRY_MOVE_CLONE, "", err);
            break;
        case FERRY_MOVE_CLONE:
            rc = do_clone(x, err);
            break;
        case FERRY_MOVE_VERIFY:
            rc = do_verify(x, err);
            break;
        case FERRY_MOVE_SWITCH:
            rc = do_switch(x, err);
            break;
        case FERRY_MOVE_CLEANUP:
            rc = do_cleanup(x, err);
            break;
        default:
            rc = ferry_err_set(err, FERRY_EINTERNAL, "move %s in state %s", id,
                               ferry_move_state_name(m->state));
        }
        if ((unsigned)was < FERRY_MOVE_STATES)
            x->res->state_ms[was] += (ferry_clock_s() - s0) * 1e3;
    }
    return rc;
}

/* Ends the run of x that mv_ctx_open opened, rc being how its states ended: a permanent failure
 * before the switch rolls the target side back, another error is kept in the journal, a finished
 * move is reported (rows, log, the cluster's tally); then everything is closed. Returns rc (the
 * error prefixed as the caller prints it). */
int mv_ctx_close(mvctx *x, int rc, ferry_err *err)
{
    const ferry_move *m = &x->mv.u.move;
    const char *id = x->res->id;
    ferry_move_result *res = x->res;
    mv_unfreeze_join(x); /* before the journal's last write and the connections close */
    if (!x->looping)
        goto out;
    if (rc && x->permanent &&
        (m->state == FERRY_MOVE_CLONE || m->state == FERRY_MOVE_VERIFY)) {
        /* cannot heal by retrying, and routing never changed: undo the target side */
        ferry_err rb = {0};
        char why[256];
        mv_copy_str(why, sizeof why, err->msg);
        ferry_log(FERRY_LOG_ERROR, "msg=\"move failed, rolling back the target side\" move=%s "
                                   "error=\"%s\"", id, why);
        int rrc = rollback(x, why, &rb);
        if (rrc)
            ferry_err_prefix(err, "(rollback did not finish either: %s; run the move again to "
                                  "finish it) ", rb.msg);
        else
            ferry_err_prefix(err, "move %s FAILED and was rolled back (the source is unchanged): ",
                             id);
    } else if (rc && m->state != FERRY_MOVE_DONE) {
        ferry_err_prefix(err, "move %s stopped in %s (resume: ferry move --resume %s): ", id,
                         ferry_move_state_name(m->state), id);
        /* The last error stays in the journal for `ferry status`: a note through the engine,
         * so a CAS on the journal as this run last wrote it (a move another mover took over
         * is left alone), and its data record carries the freezes removed since the last write
         * (the freeze invariant, move_journal.c). Bookkeeping: the move's error is rc's. */
        char detail[sizeof m->detail];
        ferry_err e2 = {0};
        snprintf(detail, sizeof detail, "%.*s", (int)sizeof detail - 1, err->msg);
        if (mv_journal_n(&x, 1, m->state, detail, NULL, NULL, &e2))
            ferry_log(FERRY_LOG_WARN, "msg=\"the move's error not kept in its journal\" move=%s "
                                      "error=\"%s\"", id, e2.msg);
    }
    /* jobs/move.ID needs no last save here: every write of the move's state carries it in the
     * same batch (mv_journal_n), so DONE or FAILED is there already */
    res->state = m->state;
    if (m->state == FERRY_MOVE_DONE && !x->counted) {
        /* rows the target holds for the slice, for the log and the caller */
        for (size_t i = 0; i < x->tables.n; i++) {
            const ferry_table_def *t = table_at(x, i);
            mv_slice sl = {0}; /* rows from system.parts: reading every row is the verify's job */
            ferry_err e2 = {0};
            if (mv_slice_list(&x->dst, t, t->name, m->tenant, m->split, true, &sl, &e2))
                continue;
            res->partitions += sl.n_pids;
            for (size_t j = 0; j < sl.n_parts; j++)
                res->rows += sl.parts[j].rows;
            mv_slice_free(&sl);
        }
    }
out:
    res->seconds = ferry_clock_s() - x->t0;
    res->statements = x->src.n_sql + x->dst.n_sql;
    res->agent_requests = mv_agent_requests(&x->src) + mv_agent_requests(&x->dst);
    res->catalog_writes = x->catalog_writes;
    if (x->mv.u.move.state == FERRY_MOVE_DONE && !rc)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"move done\" move=%s tenant=%s split=%u from=%s to=%s partitions=%zu "
                  "rows=%llu hot_bytes=%llu hot_copied=%llu cold_bytes=%llu cold_copied=%llu "
                  "verified_cold=%zu verified_hot=%zu seconds=%.3f",
                  id, res->tenant, res->split, res->from, res->to, res->partitions,
                  (unsigned long long)res->rows, (unsigned long long)res->hot_bytes,
                  (unsigned long long)res->hot_copied, (unsigned long long)res->cold_bytes,
                  (unsigned long long)res->cold_copied, x->cold_verified, x->hot_verified,
                  res->seconds);
    /* the cluster's tally (include/ferry/tally.h) is bookkeeping, never the move's fate */
    if (x->ran) {
        ferry_err terr = {0};
        if (ferry_tally_move_add(x->cat, res, &terr))
            ferry_log(FERRY_LOG_WARN, "msg=\"move not counted in the cluster's tally\" move=%s "
                                      "error=\"%s\"", id, terr.msg);
    }
    mv_state_free(&x->st);
    mv_conn_close(&x->src);
    mv_conn_close(&x->dst);
    ferry_rate_free(x->own_rate);
    ferry_record_list_free(&x->tables);
    ferry_record_free(&x->mv);
    ferry_record_free(&x->job);
    ferry_record_free(&x->switch_route);
    ferry_record_free(&x->switch_need);
    ferry_slice_leases_release(x->cat, &x->slice);
    if (x->lease)
        ferry_catalog_lease_release(x->cat, x->lease);
    ferry_catalog_close(x->cat);
    return rc;
}

int ferry_move_run(const ferry_move_opts *o, const char *id, ferry_move_result *res,
                   ferry_err *err)
{
    ferry_move_result dummy;
    mvctx x;
    int rc = mv_ctx_open(o, id, &x, res ? res : &dummy, err);
    if (!rc && x.looping)
        rc = mv_ctx_loop(&x, err);
    return mv_ctx_close(&x, rc, err);
}

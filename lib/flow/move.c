/* Moving one slice between shards: the journaled state machine (see move.h, docs/moves.md).
 *
 * The journal is the catalog record moves/ID (state, step, detail) plus jobs/move.ID whose data
 * holds {"freezes": [names made and not yet removed], "fp": {table: {rows, sum, xor}}}. Every
 * change of either is a compare-and-set; a change of the state or step goes through the flow
 * engine (the kind ferry_move_flow checks the transition) with jobs/move.ID in the same catalog
 * batch (mv_journal), so neither is ever a state behind; the run also holds the catalog lease
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
 *           source did not change since are equal: hot
 *           ones by fingerprints (verify.h, every row
 *           read), cold ones by their part digest
 *           (cold_digest: no row read)
 *  -------  the routing switch: one catalog batch moves the journal to SWITCH and the slice's
 *           route to the target (both by CAS). THE COMMIT POINT: from here on the move only
 *           rolls forward; the source keeps every row until CLEANUP
 *  SWITCH   wait the grace period (writes in flight to the   the target's real table holds every
 *           source land), then catch-up rounds: freeze      row of the slice: rows the source got
 *           again, make staging equal to the source         before the switch (verified equal,
 *           (send new and merged parts, detach parts the    partition by partition) plus rows
 *           source merged away), until staging and source   written to the target after it;
 *           have equal fingerprints and part hashes; the    staging holds nothing of the slice
 *           verified fingerprints are journaled; step is
 *           set to PUBLISH (with the route: a new routing
 *           version), the read fence waits for readers of
 *           the union, then each partition goes into
 *           the real table with MOVE PARTITION ... TO
 *           TABLE (atomic; empties staging, so a resume
 *           never adds a partition twice)
 *  CLEANUP  the source still matches the journaled           the source holds nothing of the slice
 *           fingerprints (else stop: a late write); DETACH  (no active, detached or frozen part);
 *           the slice's partitions on the source, remove    no leftover of the move on the target
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
 * fence before the first MOVE PARTITION waits until no router reads under an older version.
 *
 * Invariants: the source's real table is only read until CLEANUP; the target's real table only
 * receives parts by MOVE PARTITION from staging, after verification; object storage is never
 * written or deleted (cold parts travel as pointer files, removal is a plain unlink by the agent);
 * no statement can DROP, TRUNCATE or DELETE (sqlguard). A step repeated after a crash gives the
 * same result: freezes are found by name, sends of a part already placed answer "existing",
 * ATTACH of a partition without detached parts attaches nothing, the catch-up diff is computed
 * from what is there, and MOVE PARTITION of an empty staging partition is skipped. */
#include "ferry/move.h"
#include "ferry/fence.h"
#include "ferry/stop.h"

#include <jansson.h>
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Test-only crash points (include/ferry/testknob.h, docs/moves.md "Crash recovery"): the flow
 * engine kills the mover at FERRY_TEST_CRASH_BEFORE=<state>, before each transition's commit
 * (the kind ferry_move_flow declares it); the points inside a state are direct
 * ferry_fault_point calls with FERRY_TEST_CRASH_AFTER=<state>:<what> (CLONE:sent in
 * move_send.c; SWITCH:switched, SWITCH:caught-up, SWITCH:published-one, CLEANUP:detached
 * here and in move_batch.c). */

static void sql_table(ferry_buf *b, const char *db, const char *table)
{
    ferry_sql_ident(db, b);
    ferry_buf_putc(b, '.');
    ferry_sql_ident(table, b);
}

/* ---- what the servers hold -------------------------------------------------------------- */

/* ---- the move context ------------------------------------------------------------------- */

void mv_progress(mvctx *x)
{
    if (!x->o->progress)
        return;
    ferry_move_progress p = {.id = x->mv.u.move.id,
                             .tenant = x->mv.u.move.tenant,
                             .split = x->mv.u.move.split,
                             .from = x->mv.u.move.from,
                             .to = x->mv.u.move.to,
                             .state = ferry_move_state_name(x->mv.u.move.state),
                             .bytes_done = x->bytes_done,
                             .bytes_total = x->bytes_total,
                             .parts_done = x->parts_done,
                             .parts_total = x->parts_total,
                             .elapsed_s = now_s() - x->t0};
    x->o->progress(&p, x->o->progress_arg);
}

/* jobs/move.ID as it is written with the move in `state`: x->data, and the state mirrored
 * (what the sweep's in-flight check and an operator's catalog export read), into *next with
 * x->job's version (what its CAS compares). */
static int mv_job_compose(mvctx *x, enum ferry_move_state state, ferry_record *next,
                          ferry_err *err)
{
    char *s = json_dumps(x->data, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    if (strlen(s) >= sizeof next->u.job.data) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "move %s: journal data too large",
                           x->mv.u.move.id);
        goto out;
    }
    *next = x->job; /* a job record owns no memory */
    memcpy(next->u.job.data, s, strlen(s) + 1);
    snprintf(next->u.job.state, sizeof next->u.job.state, "%s", ferry_move_state_name(state));
    next->u.job.updated = (int64_t)time(NULL);
out:
    free(s);
    return rc;
}

int mv_job_save(mvctx *x, ferry_err *err)
{
    ferry_record next;
    int rc = mv_job_compose(x, x->mv.u.move.state, &next, err);
    if (rc)
        return rc;
    x->catalog_writes++;
    rc = ferry_catalog_update(x->cat, &next, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "move %s: its journal was changed by another mover: ",
                         x->mv.u.move.id);
    if (!rc)
        x->job = next;
    return rc;
}

/* Writes the move record through the flow engine: state `to` with detail (NULL: ""), or with
 * FERRY_FLOW_NOTE its own state again (the step and owner the caller set). Its data record
 * jobs/move.ID (x->data, the state mirrored) goes in the same catalog batch, so no crash leaves
 * it a state behind; so does route (may be NULL), which raises the routing version
 * (*routing_version, may be NULL). One CAS on each record; FERRY_ECONFLICT when any moved on
 * (nothing written). On success x->mv and x->job hold the written records. */
static int mv_journal(mvctx *x, enum ferry_move_state to, const char *detail, unsigned flags,
                      const ferry_record *route, uint64_t *routing_version, ferry_err *err)
{
    ferry_commit_info info = {0};
    ferry_record job;
    int64_t bv[2] = {-1, -1}; /* the versions of the batch's route and data record */
    size_t job_at = route ? 1 : 0;
    ferry_batch *b = ferry_batch_new();
    int rc = b ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && route)
        rc = ferry_batch_update(b, route, err);
    if (!rc)
        rc = mv_job_compose(x, to, &job, err);
    if (!rc)
        rc = ferry_batch_update(b, &job, err);
    ferry_flow_change c = {.rec = &x->mv, .to = (int)to, .detail = detail};
    if (!rc) {
        x->catalog_writes++;
        rc = ferry_flow_write_versions(&x->fj, b, bv, &info, &c, 1, flags, err);
    }
    if (!rc) {
        job.version = bv[job_at];
        x->job = job;
    }
    if (rc == FERRY_ECONFLICT) /* the engine named the move; the catalog the record that moved */
        ferry_err_prefix(err, "move ");
    ferry_batch_free(b);
    if (routing_version)
        *routing_version = info.routing_version;
    return rc;
}

int mv_move_update(mvctx *x, ferry_err *err)
{
    /* a note keeps the detail as it is unless told otherwise: pass the current one */
    char detail[sizeof x->mv.u.move.detail];
    memcpy(detail, x->mv.u.move.detail, sizeof detail);
    return mv_journal(x, x->mv.u.move.state, detail, FERRY_FLOW_NOTE, NULL, NULL, err);
}

int mv_advance(mvctx *x, enum ferry_move_state to, const char *detail, ferry_err *err)
{
    int rc = mv_journal(x, to, detail, 0, NULL, NULL, err);
    if (!rc)
        ferry_log(FERRY_LOG_INFO, "msg=\"move state\" move=%s tenant=%s split=%u state=%s",
                  x->mv.u.move.id, x->mv.u.move.tenant, x->mv.u.move.split,
                  ferry_move_state_name(to));
    mv_progress(x);
    return rc;
}

/* Writes the journal `next` and touches the slice's route (unchanged) in one catalog batch, so
 * the routing version rises with the journal: a router loads the move records with the routes
 * under one version (lib/router/routing.c), so it sees this step exactly from that version on.
 * Used where readers must change what they read: the publish step and CLEANUP. */
int mv_journal_routed(mvctx *x, ferry_record *next, ferry_err *err)
{
    ferry_record route;
    ferry_record_init(&route, FERRY_REC_ROUTE);
    snprintf(route.u.route.tenant, sizeof route.u.route.tenant, "%s", x->mv.u.move.tenant);
    route.u.route.split = x->mv.u.move.split;
    int rc = ferry_catalog_get(x->cat, &route, err);
    if (rc)
        return rc;
    /* the same state is a note (the publish step: its step the caller set), another one a
     * transition the engine checks (and starts at step 0) */
    bool note = next->u.move.state == x->mv.u.move.state;
    ferry_record was = x->mv;
    if (note)
        x->mv.u.move.step = next->u.move.step;
    uint64_t routing_version = 0;
    rc = mv_journal(x, next->u.move.state, next->u.move.detail, note ? FERRY_FLOW_NOTE : 0,
                    &route, &routing_version, err);
    if (rc) {
        x->mv = was; /* nothing written: the run's copy stays the journal's */
        return rc;
    }
    ferry_log(FERRY_LOG_INFO,
              "msg=\"move state\" move=%s tenant=%s split=%u state=%s step=%u routing_version=%llu",
              x->mv.u.move.id, x->mv.u.move.tenant, x->mv.u.move.split,
              ferry_move_state_name(x->mv.u.move.state), x->mv.u.move.step,
              (unsigned long long)routing_version);
    mv_progress(x);
    return FERRY_OK;
}

/* Enters CLEANUP with a new routing version (journal_routed): routers stop holding reads of the
 * slice (publishing) or start reading a clone's new replica. */
int mv_advance_cleanup(mvctx *x, ferry_err *err)
{
    ferry_record next = x->mv;
    next.u.move.state = FERRY_MOVE_CLEANUP;
    next.u.move.step = 0;
    next.u.move.detail[0] = '\0';
    return mv_journal_routed(x, &next, err);
}

/* Starts a new attempt of the current state: counts it in the journal (a CAS that a second
 * mover would lose) and removes the freezes earlier attempts left. */
int mv_remove_freezes(mvctx *x, ferry_err *err);

int mv_begin_attempt(mvctx *x, ferry_err *err)
{
    if (x->mv.u.move.step >= MV_MAX_ATTEMPTS) {
        x->permanent = true;
        return ferry_err_set(err, FERRY_EIO, "move %s: %u attempts of %s failed; giving up",
                             x->mv.u.move.id, x->mv.u.move.step,
                             ferry_move_state_name(x->mv.u.move.state));
    }
    x->mv.u.move.step++;
    snprintf(x->mv.u.move.owner, sizeof x->mv.u.move.owner, "%s", x->o->owner ? x->o->owner : "");
    int rc = mv_move_update(x, err);
    if (!rc)
        rc = mv_remove_freezes(x, err);
    return rc;
}

int mv_freeze_name(mvctx *x, const char *tag, char *out, size_t outsz, ferry_err *err)
{
    /* only [A-Za-z0-9_]: ClickHouse escapes other bytes of a WITH NAME into %XX in the shadow
     * folder's name, which the agent looks up unescaped */
    snprintf(out, outsz, "%s_%s", x->mv.u.move.id, tag);
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    json_t *fr = json_object_get(x->data, "freezes");
    json_array_append_new(fr, json_string(out));
    return mv_job_save(x, err); /* journaled before it exists, so a crash never forgets it */
}

int mv_remove_freeze_named(mvctx *x, const char *name, ferry_err *err)
{
    int rc = ferry_agent_remove_freeze(x->src.ag, name, err);
    if (rc)
        return rc;
    json_t *fr = json_object_get(x->data, "freezes");
    for (size_t i = 0; i < json_array_size(fr); i++)
        if (!strcmp(json_string_value(json_array_get(fr, i)), name)) {
            json_array_remove(fr, i);
            break;
        }
    return mv_job_save(x, err);
}

int mv_remove_freezes(mvctx *x, ferry_err *err)
{
    json_t *fr = json_object_get(x->data, "freezes");
    while (json_array_size(fr) > 0) {
        char name[160];
        snprintf(name, sizeof name, "%s", json_string_value(json_array_get(fr, 0)));
        int rc = mv_remove_freeze_named(x, name, err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
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
    sql_table(&sql, t->database, st);
    ferry_buf_puts(&sql, " AS ");
    sql_table(&sql, t->database, t->name);
    rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    /* The catch-up rounds name staging parts (DETACH PART of a stale copy); a background merge
     * in staging would rename them under our feet (NO_SUCH_DATA_PART). Nothing needs merges in
     * staging: its parts go to the real table by MOVE PARTITION. Stopped on every run, since the
     * setting does not survive a server restart. */
    if (!rc) {
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "SYSTEM STOP MERGES ");
        sql_table(&sql, t->database, st);
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
    sql_table(&sql, t->database, st);
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
    if (!rc)
        rc = mv_freeze_name(x, tag, fz, sizeof fz, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        rc = mv_ensure_staging(x, table_at(x, i), err);
        if (!rc)
            rc = mv_copy_round(x, table_at(x, i), fz, true, err);
    }
    if (!rc)
        rc = mv_remove_freeze_named(x, fz, err);
    if (!rc)
        rc = mv_advance(x, FERRY_MOVE_VERIFY, "", err);
    return rc;
}

/* The journal's record of a table's verified source: the fingerprint CLEANUP checks (rows, sum,
 * xor) and the digest of its parts (a source whose parts are unchanged needs no row read). */
json_t *mv_fp_json(const ferry_fingerprint *fp, const ferry_fingerprint *dg)
{
    char sum[32], xr[32], dsum[32], dxr[32];
    snprintf(sum, sizeof sum, "%llu", (unsigned long long)fp->hash_sum);
    snprintf(xr, sizeof xr, "%llu", (unsigned long long)fp->hash_xor);
    snprintf(dsum, sizeof dsum, "%llu", (unsigned long long)dg->hash_sum);
    snprintf(dxr, sizeof dxr, "%llu", (unsigned long long)dg->hash_xor);
    return json_pack("{s:I, s:s, s:s, s:{s:I, s:I, s:s, s:s}}", "rows", (json_int_t)fp->rows,
                     "sum", sum, "xor", xr, "digest", "rows", (json_int_t)dg->rows, "parts",
                     (json_int_t)dg->parts, "sum", dsum, "xor", dxr);
}

/* Whether fp's rows, sum and xor are those of the journal record j ({"rows":N,"sum":"..",
 * "xor":".."}, as fp_json writes them). */
bool mv_fp_matches(const json_t *j, const ferry_fingerprint *fp)
{
    char sum[32], xr[32];
    snprintf(sum, sizeof sum, "%llu", (unsigned long long)fp->hash_sum);
    snprintf(xr, sizeof xr, "%llu", (unsigned long long)fp->hash_xor);
    return j && (uint64_t)json_integer_value(json_object_get(j, "rows")) == fp->rows &&
           !strcmp(json_string_value(json_object_get(j, "sum")) ?: "", sum) &&
           !strcmp(json_string_value(json_object_get(j, "xor")) ?: "", xr);
}

/* VERIFY, then the routing switch in one batch with the journal. */
static int do_verify(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        bool stable;
        rc = mv_compare_copy(x, table_at(x, i), false, &stable, NULL, NULL, err);
    }
    if (rc)
        return rc;
    return mv_switch_route(x, err);
}

/* The routing switch of a verified move: the switch fence, then the journal to SWITCH and the
 * slice's route to the target in one catalog batch (the commit point). */
int mv_switch_route(mvctx *x, ferry_err *err)
{
    int rc;
    /* Every router must reach the target before the route names it (a shard just added reaches
     * routers through the catalog), and no client may still be about to retry a failed write of
     * the slice: its retry must reach the shard that has the first attempt's rows
     * (lib/router/fence.c, lib/router/pending.c). */
    if ((rc = ferry_router_fence_switch(x->o->cfg, x->mv.u.move.to, x->mv.u.move.tenant,
                                        x->mv.u.move.split, 0, err)))
        return ferry_err_prefix(err, "move %s: ", x->mv.u.move.id);
    ferry_record route;
    ferry_record_init(&route, FERRY_REC_ROUTE);
    snprintf(route.u.route.tenant, sizeof route.u.route.tenant, "%s", x->mv.u.move.tenant);
    route.u.route.split = x->mv.u.move.split;
    if ((rc = ferry_catalog_get(x->cat, &route, err)))
        return rc;
    /* the slice's shards with `from` replaced by `to`; a clone keeps `from` and adds `to` */
    char *save = NULL, copy[FERRY_LIST_MAX];
    ferry_buf nl = FERRY_BUF_INIT;
    snprintf(copy, sizeof copy, "%s", route.u.route.shards);
    if (x->clone)
        ferry_buf_printf(&nl, "%s,", route.u.route.shards);
    ferry_buf_puts(&nl, x->mv.u.move.to);
    for (char *s = strtok_r(copy, ",", &save); s && !x->clone; s = strtok_r(NULL, ",", &save))
        if (strcmp(s, x->mv.u.move.from) && strcmp(s, x->mv.u.move.to))
            ferry_buf_printf(&nl, ",%s", s);
    mv_copy_str(route.u.route.shards, sizeof route.u.route.shards, ferry_buf_cstr(&nl));
    ferry_buf_free(&nl);
    uint64_t routing_version = 0;
    rc = mv_journal(x, FERRY_MOVE_SWITCH, "routing switched", 0, &route, &routing_version, err);
    if (rc) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "routing switch lost a race: ");
        return rc;
    }
    ferry_log(FERRY_LOG_INFO,
              "msg=\"routing switched\" move=%s tenant=%s split=%u to=%s routing_version=%llu",
              x->mv.u.move.id, x->mv.u.move.tenant, x->mv.u.move.split, x->mv.u.move.to,
              (unsigned long long)routing_version);
    mv_progress(x);
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:switched");
    return FERRY_OK;
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
     * time once the sync below copied the first attempt's rows (replica_int.h) */
    char why[400];
    if (rs_retry_expected(x->o->cfg, x->mv.u.move.tenant, x->mv.u.move.split, why, sizeof why))
        return ferry_err_set(err, FERRY_ETIMEOUT, "clone %s: %s; the clone stays in SWITCH, "
                             "resume it once the retry came", x->mv.u.move.id, why);
    char fz[160], tag[32];
    snprintf(tag, sizeof tag, "k%u", x->mv.u.move.step);
    rc = mv_freeze_name(x, tag, fz, sizeof fz, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char (*ids)[FERRY_NAME_MAX] = NULL;
        size_t n = 0;
        rc = rs_slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &ids,
                           &n, err);
        for (size_t k = 0; !rc && k < n; k++) {
            rs_result rr;
            rc = rs_sync_partition(&x->src, &x->dst, t, ids[k], fz, 0, MV_MAX_ROUNDS, false,
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
        sql_table(&sql, t->database, st);
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
    int rc = ferry_part_records_reassign(x->cat, t->name, ids, pids->n, x->mv.u.move.from,
                                         x->mv.u.move.to, x->clone, NULL, err);
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
    if (!rc)
        rc = mv_remove_freezes(x, err);
    if (!rc)
        rc = mv_advance(x, FERRY_MOVE_DONE, "", err);
    return rc;
}

/* A resumed publish step: drops from the target's staging every part of the slice that the real
 * table already holds (same partition, hash_of_all_files and rows). MOVE PARTITION ... TO TABLE
 * is atomic in the server's memory only: it adds the parts to the table, then removes staging's
 * from disk, so a kill -9 of the target between the two leaves both on disk, and the restarted
 * server loads staging's parts again; moving them would add the rows a second time
 * (tests/integration/move_publish_kill.sh, docs/reliability.md). Each part of the table matches
 * one staged part at most; a part written to the target since the switch cannot carry a staged
 * part's hash unless it holds the very same rows in the very same block. */
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
                ferry_log(FERRY_LOG_WARN, "msg=\"staged part already in the table (a kill -9 of "
                          "the target after MOVE PARTITION brought it back); dropped from staging, "
                          "not moved again\" move=%s shard=%s table=%s.%s part=%s table_part=%s",
                          x->mv.u.move.id, x->dst.name, t->database, st, sp.p[i].name,
                          rp.p[j].name);
                rc = mv_staging_drop_part(x, t, sp.p[i].name, err);
                break;
            }
    }
    free(used);
    mv_slice_free(&stg);
    mv_slice_free(&real);
    return rc;
}

static int do_switch(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    if (x->clone)
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
        json_t *fps = json_object();
        for (size_t i = 0; !rc && i < x->tables.n; i++)
            rc = mv_ensure_staging(x, table_at(x, i), err);
        for (int round = 0; !rc; round++) {
            /* Compare first: the copy made before the switch is usually equal already (nothing
             * reached the source since), and then no freeze and no send is needed. */
            stable = true;
            json_object_clear(fps);
            for (size_t i = 0; !rc && stable && i < x->tables.n; i++) {
                ferry_fingerprint fp = {0}, dg = {0};
                bool st = true;
                rc = mv_compare_copy(x, table_at(x, i), true, &st, &fp, &dg, err);
                stable = stable && st;
                if (!rc && st)
                    json_object_set_new(fps, table_at(x, i)->name, mv_fp_json(&fp, &dg));
            }
            if (rc || stable || round == MV_MAX_ROUNDS)
                break;
            char fz[160], tag[32];
            snprintf(tag, sizeof tag, "s%ur%d", x->mv.u.move.step, round);
            rc = mv_freeze_name(x, tag, fz, sizeof fz, err);
            for (size_t i = 0; !rc && i < x->tables.n; i++)
                rc = mv_copy_round(x, table_at(x, i), fz, false, err);
            if (!rc)
                rc = mv_remove_freeze_named(x, fz, err);
        }
        if (!rc && !stable)
            rc = ferry_err_set(err, FERRY_EIO,
                               "move %s: the source still receives rows of the slice after %d "
                               "catch-up rounds; are writers still using the old route? "
                               "(resume with the same command)",
                               x->mv.u.move.id, MV_MAX_ROUNDS);
        if (!rc)
            json_object_set(x->data, "fp", fps);
        json_decref(fps);
        if (rc)
            return rc;
        /* The publish step raises the routing version: from it on, routers stop reading the
         * union of source and target for this slice (and hold its reads until CLEANUP). The
         * verified fingerprints are journaled with it (the data record, same batch). */
        ferry_record next = x->mv;
        next.u.move.step = MV_STEP_PUBLISH;
        if ((rc = mv_journal_routed(x, &next, err)))
            return rc;
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:caught-up");
    }
    /* The read fence (every run, so a resumed one too): no router may still read the union
     * under a version older than the publish step's when the first partition moves, or it
     * could count that partition twice (source + target real) or miss it (docs/routing.md). */
    if ((rc = mv_fence_routers(x, "before publishing, move", err)))
        return rc;
    /* publish: staging -> real table, one atomic MOVE PARTITION per partition; the first one
     * alone, the others in one ALTER TABLE (its commands run one after another, each atomic;
     * a crash between them leaves partitions in staging that a resume moves) */
    bool first = true;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char st[FERRY_NAME_MAX + 32];
        mv_staging_name(t->name, st, sizeof st);
        mv_pids pids = {0};
        if (resumed_publish)
            rc = publish_dedup(x, t, err);
        if (!rc)
            rc = mv_slice_pids(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, &pids, err);
        for (size_t k = 0; !rc && k < pids.n;) {
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_buf_puts(&sql, "ALTER TABLE ");
            sql_table(&sql, t->database, st);
            size_t end = first ? k + 1 : pids.n;
            for (size_t j = k; j < end; j++) {
                ferry_buf_puts(&sql, j > k ? ", MOVE PARTITION ID " : " MOVE PARTITION ID ");
                ferry_sql_quote(pids.ids[j], &sql);
                ferry_buf_puts(&sql, " TO TABLE ");
                sql_table(&sql, t->database, t->name);
            }
            rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
            ferry_buf_free(&sql);
            k = end;
            if (!rc && first) {
                first = false;
                ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWITCH:published-one");
            }
        }
        mv_pids_free(&pids);
    }
    if (!rc)
        rc = mv_advance_cleanup(x, err);
    return rc;
}

/* Before CLEANUP removes the source's copy: no part of the slice may have been detached as
 * broken on the target. ClickHouse rewrites a pointer file in place when it changes its
 * reference count (hard-linking it for MOVE PARTITION, unlinking staging's copy after it), and a
 * kill -9 in the middle leaves it empty; at restart the part, in staging or in the table, goes to
 * detached/ as broken-on-start and its rows are on the target nowhere else (seen with
 * tests/integration/move_publish_kill.sh's kill during the publish statement). The source still
 * has every row: stop here, naming the parts, rather than remove it. */
int mv_target_broken_check(mvctx *x, const ferry_table_def *t, const mv_pids *pids,
                               ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    ferry_buf sql = FERRY_BUF_INIT, names = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT table, name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table IN (");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, ", ");
    ferry_sql_quote(st, &sql);
    ferry_buf_puts(&sql, ") AND startsWith(name, 'broken')");
    int rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), &rows, err);
    size_t n = 0;
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        const char *name = ferry_ch_rows_get(&rows, r, 1);
        for (size_t k = 0; k < pids->n; k++) {
            const char *at = strstr(name, pids->ids[k]);
            size_t len = strlen(pids->ids[k]);
            if (!at || at == name || at[-1] != '_' || at[len] != '_')
                continue;
            ferry_buf_puts(&names, n++ ? ", " : "");
            ferry_buf_puts(&names, ferry_ch_rows_get(&rows, r, 0));
            ferry_buf_puts(&names, "/detached/");
            ferry_buf_puts(&names, name);
            break;
        }
    }
    if (!rc && n)
        rc = ferry_err_set(err, FERRY_EIO,
                           "move %s: %zu part(s) of the slice were detached as broken on the "
                           "target %s (%s): their rows are there nowhere else, while the source "
                           "%s still holds every row of the slice, so CLEANUP does not run. "
                           "Rebuild those partitions on %s from %s's rows, then remove the broken "
                           "folders and resume with the same command",
                           x->mv.u.move.id, n, x->dst.name, ferry_buf_cstr(&names), x->src.name,
                           x->dst.name, x->src.name);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    ferry_buf_free(&names);
    return rc;
}

static int do_cleanup(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    if (x->clone)
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
            rc = mv_target_broken_check(x, t, &src, err);
        if (!rc && src.n) {
            /* the source must hold exactly what was verified and published: its parts unchanged
             * (no row read), or else the same rows (a merge since changes parts, not rows) */
            ferry_fingerprint fp, dg;
            json_t *want = json_object_get(json_object_get(x->data, "fp"), t->name);
            rc = mv_source_fingerprint(x, t, false, &fp, &dg, err);
            if (!rc && !mv_fp_matches(json_object_get(want, "digest"), &dg))
                rc = mv_source_fingerprint(x, t, true, &fp, &dg, err);
            else if (!rc)
                fp.rows = (uint64_t)json_integer_value(json_object_get(want, "rows"));
            if (!rc && want && !mv_fp_matches(json_object_get(want, "digest"), &dg) &&
                !mv_fp_matches(want, &fp))
                rc = ferry_err_set(err, FERRY_EIO,
                                   "move %s: %s.%s on %s changed after it was verified (%llu rows "
                                   "now, %lld verified): a write reached the old server after "
                                   "the switch and the grace period; the source is kept, nothing "
                                   "was removed",
                                   x->mv.u.move.id, t->database, t->name, x->src.name,
                                   (unsigned long long)fp.rows,
                                   (long long)json_integer_value(json_object_get(want, "rows")));
        }
        if (!rc && src.n) {
            /* every partition of the slice in one ALTER TABLE */
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_buf_puts(&sql, "ALTER TABLE ");
            sql_table(&sql, t->database, t->name);
            for (size_t k = 0; k < src.n; k++) {
                ferry_buf_puts(&sql, k ? ", DETACH PARTITION ID " : " DETACH PARTITION ID ");
                ferry_sql_quote(src.ids[k], &sql);
            }
            rc = mv_sql(&x->src, ferry_buf_cstr(&sql), NULL, err);
            ferry_buf_free(&sql);
        }
        if (!rc && src.n)
            ferry_fault_point("FERRY_TEST_CRASH_AFTER", "CLEANUP:detached");
        if (!rc)
            rc = mv_remove_detached_of(&x->src, t->database, t->name, &all, false, err);
        if (!rc)
            rc = mv_remove_detached_of(&x->dst, t->database, st, &all, true, err);
        if (!rc)
            rc = mv_records_follow(x, t, &all, err);
        mv_pids_free(&src);
        mv_pids_free(&all);
    }
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
    x->t0 = now_s();
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
    x->data = json_loads(x->job.u.job.data, 0, NULL);
    if (!json_is_object(x->data) || !json_is_array(json_object_get(x->data, "freezes"))) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "move %s: malformed journal data", id);
        goto out;
    }
    x->clone = !strcmp(json_string_value(json_object_get(x->data, "mode")) ?: "", "clone");
    const ferry_move *m = &x->mv.u.move;
    snprintf(res->tenant, sizeof res->tenant, "%s", m->tenant);
    res->split = m->split;
    mv_copy_str(res->from, sizeof res->from, m->from);
    mv_copy_str(res->to, sizeof res->to, m->to);
    res->resumed = m->state != FERRY_MOVE_PLANNED;
    res->state = m->state;
    if (m->state == FERRY_MOVE_DONE || m->state == FERRY_MOVE_FAILED)
        goto out;
    x->ran = true;
    if ((rc = mv_load_shard(x->cat, m->from, &fsh, err)) ||
        (rc = mv_load_shard(x->cat, m->to, &tsh, err)) ||
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
              res->resumed ? "resumed" : "started", id, m->tenant, m->split, m->from, m->to,
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
        double s0 = now_s();
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
            x->res->state_ms[was] += (now_s() - s0) * 1e3;
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
        /* keep the last error in the journal for `ferry status` */
        ferry_record cur;
        ferry_record_init(&cur, FERRY_REC_MOVE);
        snprintf(cur.u.move.id, sizeof cur.u.move.id, "%s", id);
        ferry_err e2 = {0};
        if (!ferry_catalog_get(x->cat, &cur, &e2)) {
            snprintf(cur.u.move.detail, sizeof cur.u.move.detail, "%.255s", err->msg);
            (void)ferry_catalog_update(x->cat, &cur, &e2);
        }
    }
    /* jobs/move.ID needs no last save here: every write of the move's state carries it in the
     * same batch (mv_journal), so DONE or FAILED is there already */
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
    res->seconds = now_s() - x->t0;
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
    json_decref(x->data);
    mv_conn_close(&x->src);
    mv_conn_close(&x->dst);
    ferry_rate_free(x->own_rate);
    ferry_record_list_free(&x->tables);
    ferry_record_free(&x->mv);
    ferry_record_free(&x->job);
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

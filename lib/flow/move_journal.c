/* A move's journal (move.c has the states it records, docs/moves.md "The state machine"): every
 * catalog write of a move's state, step, detail and data goes through the flow engine
 * (include/ferry/flow_journal.h, the kind ferry_move_flow), as one batch per write that holds
 * the move record moves/ID, its data record jobs/move.ID (x->st, move_state.h: the freezes it
 * made, the verified fingerprints; its state mirrors the move's) and, where readers must see the
 * write, the slice's route. The writes of a batch of moves (move_batch.c) take every member at
 * once: one catalog commit per state instead of one per member. Also the freeze names, which the
 * journal must hold before the freezes exist. */
#include "ferry/move.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/agent.h"
#include "ferry/log.h"
#include "flow/move_env.h"
#include "flow/move_run.h"

/* jobs/move.ID as it is written with the move in `state`: x->st encoded, and the state mirrored
 * (what the sweep's in-flight check and an operator's catalog export read), into *next with
 * x->job's version (what its CAS compares). *next owns its data (ferry_record_free). */
static int job_compose(mvctx *x, enum ferry_move_state state, ferry_record *next, ferry_err *err)
{
    char *s = NULL;
    int rc = mv_state_encode(&x->st, &s, err);
    *next = x->job;
    next->u.job.data_json = NULL; /* x->job keeps its own: the copy gets s */
    if (!rc)
        rc = ferry_job_set_data(&next->u.job, s, err);
    if (rc)
        goto out;
    snprintf(next->u.job.state, sizeof next->u.job.state, "%s", ferry_move_state_name(state));
    next->u.job.updated = (int64_t)time(NULL);
out:
    free(s);
    return rc;
}

int mv_journal_n(mvctx **xs, size_t n, enum ferry_move_state to, const char *detail,
                 const ferry_record *routes, uint64_t *routing_version, ferry_err *err)
{
    return mv_journal_extra_n(xs, n, to, detail, routes, NULL, 0, routing_version, err);
}

int mv_journal_extra_n(mvctx **xs, size_t n, enum ferry_move_state to, const char *detail,
                       const ferry_record *routes, const ferry_record *extra, size_t n_extra,
                       uint64_t *routing_version, ferry_err *err)
{
    ferry_commit_info info = {0};
    size_t per = routes ? 2 : 1; /* batch entries per move: its route, then its data record */
    ferry_batch *b = ferry_batch_new();
    ferry_record *jobs = calloc(n + 1, sizeof *jobs);
    ferry_flow_change *ch = calloc(n + 1, sizeof *ch);
    /* their versions after the commit: the members' entries first, then the extra records */
    int64_t *bv = calloc(per * n + n_extra + 1, sizeof *bv);
    int rc = b && jobs && ch && bv ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* one state for all: a batch's members go through the states together */
    bool note = n > 0 && to == xs[0]->mv.u.move.state;
    for (size_t k = 0; !rc && k < n; k++) {
        mvctx *x = xs[k];
        if (routes)
            rc = ferry_batch_update(b, &routes[k], err);
        if (!rc)
            rc = job_compose(x, to, &jobs[k], err);
        if (!rc)
            rc = ferry_batch_update(b, &jobs[k], err);
        /* compose copies the detail into the record it writes, so x's own may be passed */
        ch[k] = (ferry_flow_change){.rec = &x->mv, .to = (int)to,
                                    .detail = detail ? detail : x->mv.u.move.detail};
    }
    for (size_t k = 0; !rc && k < n_extra; k++)
        rc = ferry_batch_update(b, &extra[k], err);
    if (!rc) {
        xs[0]->catalog_writes++;
        rc = ferry_flow_write_versions(&xs[0]->fj, b, bv, &info, ch, n,
                                       note ? FERRY_FLOW_NOTE : 0, err);
    }
    for (size_t k = 0; !rc && k < n; k++) {
        jobs[k].version = bv[per * k + per - 1];
        ferry_record_free(&xs[k]->job); /* its data: the written record's takes its place */
        xs[k]->job = jobs[k];
        memset(&jobs[k], 0, sizeof jobs[k]); /* moved */
    }
    /* the engine named the job (or "a job of the batch"); the catalog the record that moved */
    if (rc == FERRY_ECONFLICT && n == 1)
        ferry_err_prefix(err, "move ");
    else if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "move batch of %s: ", xs[0]->mv.u.move.id);
    ferry_batch_free(b);
    for (size_t k = 0; jobs && k < n; k++)
        ferry_record_free(&jobs[k]); /* not written (a failure): the copies' data */
    free(jobs);
    free(ch);
    free(bv);
    if (routing_version)
        *routing_version = info.routing_version;
    return rc;
}

int mv_advance_n(mvctx **xs, size_t n, enum ferry_move_state to, const char *detail,
                 ferry_err *err)
{
    int rc = mv_journal_n(xs, n, to, detail, NULL, NULL, err);
    for (size_t k = 0; k < n; k++) {
        const ferry_move *m = &xs[k]->mv.u.move;
        if (!rc)
            ferry_log(FERRY_LOG_INFO, "msg=\"move state\" move=%s tenant=%s split=%u state=%s",
                      m->id, m->tenant, m->split, ferry_move_state_name(to));
        mv_progress(xs[k]);
    }
    return rc;
}

int mv_advance(mvctx *x, enum ferry_move_state to, const char *detail, ferry_err *err)
{
    return mv_advance_n(&x, 1, to, detail, err);
}

/* The route record of x's slice as the catalog holds it (its version is what the CAS of a
 * journal write that touches it compares). */
int mv_route_get(mvctx *x, ferry_record *route, ferry_err *err)
{
    ferry_record_init(route, FERRY_REC_ROUTE);
    snprintf(route->u.route.tenant, sizeof route->u.route.tenant, "%s", x->mv.u.move.tenant);
    route->u.route.split = x->mv.u.move.split;
    return ferry_catalog_get(x->cat, route, err);
}

/* Journals xs[0..n) in `to` and touches each slice's route (unchanged) in the same catalog
 * batch, so the routing version rises with the journal: a router loads the move records with
 * the routes under one version (lib/router/routing.c), so it sees this step exactly from that
 * version on. Used where readers must change what they read: the publish step (a note in
 * SWITCH, `step` its step) and CLEANUP (a transition). */
static int journal_routed_n(mvctx **xs, size_t n, enum ferry_move_state to, unsigned step,
                            ferry_err *err)
{
    ferry_record *routes = calloc(n + 1, sizeof *routes);
    unsigned *was = calloc(n + 1, sizeof *was);
    int rc = routes && was ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < n; k++)
        rc = mv_route_get(xs[k], &routes[k], err);
    bool note = n > 0 && to == xs[0]->mv.u.move.state;
    for (size_t k = 0; !rc && k < n; k++) {
        was[k] = xs[k]->mv.u.move.step;
        if (note)
            xs[k]->mv.u.move.step = step; /* a transition starts its state at step 0 */
    }
    uint64_t routing_version = 0;
    if (!rc && (rc = mv_journal_n(xs, n, to, note ? NULL : "", routes, &routing_version, err)))
        for (size_t k = 0; k < n; k++) /* nothing written: the run's copy stays the journal's */
            xs[k]->mv.u.move.step = was[k];
    for (size_t k = 0; !rc && k < n; k++) {
        const ferry_move *m = &xs[k]->mv.u.move;
        ferry_log(FERRY_LOG_INFO, "msg=\"move state\" move=%s tenant=%s split=%u state=%s "
                  "step=%u routing_version=%llu", m->id, m->tenant, m->split,
                  ferry_move_state_name(m->state), m->step, (unsigned long long)routing_version);
        mv_progress(xs[k]);
    }
    for (size_t k = 0; routes && k < n; k++)
        ferry_record_free(&routes[k]);
    free(routes);
    free(was);
    return rc;
}

/* The publish step: from it on routers stop reading the union of source and target for the
 * slice (and hold its reads until CLEANUP); the verified fingerprints (x->st fp) are
 * journaled with it. */
int mv_publish_step_n(mvctx **xs, size_t n, ferry_err *err)
{
    return journal_routed_n(xs, n, FERRY_MOVE_SWITCH, MV_STEP_PUBLISH, err);
}

/* Enters CLEANUP with a new routing version: routers stop holding reads of the slice
 * (publishing) or start reading a clone's new replica. */
int mv_advance_cleanup_n(mvctx **xs, size_t n, ferry_err *err)
{
    return journal_routed_n(xs, n, FERRY_MOVE_CLEANUP, 0, err);
}

int mv_advance_cleanup(mvctx *x, ferry_err *err) { return mv_advance_cleanup_n(&x, 1, err); }

int mv_begin_attempt_n(mvctx **xs, size_t n, ferry_err *err)
{
    for (size_t k = 0; k < n; k++) {
        mvctx *x = xs[k];
        if (x->mv.u.move.step >= MV_MAX_ATTEMPTS) {
            x->permanent = true;
            return ferry_err_set(err, FERRY_EIO, "move %s: %u attempts of %s failed; giving up",
                                 x->mv.u.move.id, x->mv.u.move.step,
                                 ferry_move_state_name(x->mv.u.move.state));
        }
    }
    for (size_t k = 0; k < n; k++)
        xs[k]->mv.u.move.step++;
    /* one note for all: a CAS that a second mover would lose */
    int rc = n ? mv_journal_n(xs, n, xs[0]->mv.u.move.state, NULL, NULL, NULL, err) : FERRY_OK;
    for (size_t k = 0; rc && k < n; k++) /* nothing written: the run's copy stays the journal's */
        xs[k]->mv.u.move.step--;
    for (size_t k = 0; !rc && k < n; k++)
        rc = mv_remove_freezes(xs[k], err);
    return rc;
}

int mv_begin_attempt(mvctx *x, ferry_err *err) { return mv_begin_attempt_n(&x, 1, err); }

/* ---- freezes -----------------------------------------------------------------------------
 *
 * INVARIANT: every freeze a move made that may still exist on the source is named in its
 * journal (jobs/move.ID "freezes"), so a crash anywhere leaves nothing a resume, CLEANUP or
 * rollback does not remove. Hence:
 *   - a name is committed (a note through the engine, mv_freeze_journal_n) before the FREEZE
 *     that makes it: a crash between the two leaves a name without a freeze, never the reverse;
 *   - a name leaves x->st only after remove-freeze succeeded on the source, and reaches the
 *     catalog with the move's next write (its next state, step or note; at worst the error
 *     note of mv_ctx_close), not with a write of its own: a journal that still names a freeze
 *     already gone costs one remove-freeze that finds nothing (the agent answers it as done),
 *     which every attempt, CLEANUP and rollback make anyway (mv_remove_freezes).
 * The journal's names are thus always a superset of the freezes on the source. */

void mv_freeze_forget(mvctx *x, const char *name)
{
    mv_state_freeze_remove(&x->st, name);
}

void mv_freeze_name(mvctx *x, const char *tag, char *out, size_t outsz)
{
    /* only [A-Za-z0-9_]: ClickHouse escapes other bytes of a WITH NAME into %XX in the shadow
     * folder's name, which the agent looks up unescaped */
    snprintf(out, outsz, "%s_%s", x->mv.u.move.id, tag);
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
}

int mv_freeze_journal_n(mvctx **xs, size_t n, const char *name, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t k = 0; !rc && k < n; k++)
        rc = mv_state_freeze_add(&xs[k]->st, name, err);
    if (!rc && n)
        rc = mv_journal_n(xs, n, xs[0]->mv.u.move.state, NULL, NULL, NULL, err);
    for (size_t k = 0; rc && k < n; k++) /* not journaled: the freeze is not made either */
        mv_freeze_forget(xs[k], name);
    return rc;
}

bool mv_freeze_journaled(const mvctx *x, const char *name)
{
    for (size_t i = 0; i < x->st.n_freezes; i++)
        if (!strcmp(x->st.freezes[i], name))
            return true;
    return false;
}

int mv_freeze_new(mvctx *x, const char *tag, char *out, size_t outsz, ferry_err *err)
{
    mv_freeze_name(x, tag, out, outsz);
    return mv_freeze_journal_n(&x, 1, out, err);
}

int mv_remove_freeze_n(mvctx **xs, size_t n, const char *name, ferry_err *err)
{
    /* one folder on the source, however many moves name it (a batch's freeze) */
    int rc = n ? ferry_agent_remove_freeze(xs[0]->src.ag, name, err) : FERRY_OK;
    for (size_t k = 0; !rc && k < n; k++)
        mv_freeze_forget(xs[k], name); /* journaled with the next write (the invariant above) */
    return rc;
}

int mv_remove_freeze_named(mvctx *x, const char *name, ferry_err *err)
{
    return mv_remove_freeze_n(&x, 1, name, err);
}

int mv_remove_freezes(mvctx *x, ferry_err *err)
{
    for (size_t i = 0; i < x->st.n_freezes;) {
        char name[160]; /* a copy: the removal frees the list's */
        snprintf(name, sizeof name, "%s", x->st.freezes[i]);
        if (mv_unfreeze_busy(x, name)) { /* the background removal's (move_unfreeze.c) */
            i++;
            continue;
        }
        int rc = mv_remove_freeze_named(x, name, err); /* drops it from the list */
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

/* The autopilot's rebalance pass (include/ferry/autopilot.h): the plan of `ferry rebalance`
 * run through ferry_plan_run under the autopilot's limits. Its may_start hook is asked before
 * every move and answers no once the cluster is paused, the maintenance window has closed or
 * the coordinator is stopping, so no move starts then while the moves in flight finish (a move
 * is never abandoned half-way: it only rolls forward after its switch, and rolling back before
 * it is the move's own business; on SIGTERM a move in flight stops at its next journaled state
 * instead, include/ferry/stop.h, and the next pass resumes it). The reason the plan is not empty is put in words for the log
 * and ferry status; after a complete run the NEW shards it filled become ACTIVE. */
#include "autopilot_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/cluster_status.h"
#include "ferry/log.h"
#include "ferry/pause.h"
#include "ferry/plan_run.h"
#include "ferry/strutil.h"

typedef struct rb_pass {
    ferry_autopilot *ap;
    ferry_catalog *cat;   /* the pause is read through it (may_start calls are serialised) */
    char deferred_why[256];
    size_t started, to_new;
} rb_pass;

/* "" when a move may start now, else why not. */
static void hold_reason(ferry_autopilot *ap, ferry_catalog *cat, char *why, size_t whysz)
{
    why[0] = '\0';
    if (atomic_load(&ap->sh->stopping)) {
        snprintf(why, whysz, "the coordinator is stopping");
        return;
    }
    if (ferry_ap_window_holds(&ap->ac, FERRY_AP_REBALANCE, time(NULL), why, whysz))
        return;
    ferry_pause p;
    ferry_err err = {0};
    if (ferry_pause_get(cat, &p, &err)) {
        /* cannot tell: do not start a move we might have been told not to */
        snprintf(why, whysz, "the pause could not be read: %.200s", err.msg);
        return;
    }
    if (p.paused)
        snprintf(why, whysz, "paused by %.60s%s%.150s", p.by[0] ? p.by : "?",
                 p.reason[0] ? ": " : "", p.reason);
}

static bool may_start(const ferry_planned_move *step, void *arg)
{
    rb_pass *x = arg;
    hold_reason(x->ap, x->cat, x->deferred_why, sizeof x->deferred_why);
    if (x->deferred_why[0])
        return false;
    x->started++;
    /* the line a test (and an operator) can check pauses and windows against */
    FLOG_INFO("msg=\"autopilot move starts\" kind=%s tenant=%s split=%u from=%s to=%s "
              "unix=%lld",
              ferry_rebalance_step_name(step->kind), step->tenant, step->split, step->from,
              step->to, (long long)time(NULL));
    return true;
}

static void on_step(const ferry_planned_move *m, const ferry_move_result *res, int rc,
                    const ferry_err *err, void *arg)
{
    (void)arg;
    if (rc)
        FLOG_WARN("msg=\"autopilot move failed\" tenant=%s split=%u from=%s to=%s err=\"%s\"",
                  m->tenant, m->split, m->from, m->to, err->msg);
    else
        FLOG_INFO("msg=\"autopilot move done\" move=%s tenant=%s split=%u from=%s to=%s "
                  "rows=%llu seconds=%.1f",
                  res->id, m->tenant, m->split, m->from, m->to, (unsigned long long)res->rows,
                  res->seconds);
}

static void add_reason(char *buf, size_t sz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_reason(char *buf, size_t sz, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 3 >= sz)
        return;
    if (used) {
        memcpy(buf + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, sz - used, fmt, ap);
    va_end(ap);
}

static bool plan_touches(const ferry_rebalance_plan *p, const char *shard, bool as_target)
{
    for (size_t i = 0; i < p->n_moves; i++)
        if (!strcmp(as_target ? p->moves[i].to : p->moves[i].from, shard))
            return true;
    return false;
}

/* Why the plan is not empty, in words: shards added, draining or re-weighted, fill above the
 * target, a spread above skew; otherwise tenants or replication changed the placement. */
static void plan_reason(ferry_autopilot *ap, ferry_catalog *cat, const ferry_rebalance_plan *p,
                        char *buf, size_t sz)
{
    ferry_cluster_status st;
    ferry_err err = {0};
    buf[0] = '\0';
    if (ferry_cluster_status_read(cat, 0, &st, &err)) {
        snprintf(buf, sz, "the placement differs from the routing table");
        return;
    }
    double lo = 2, hi = -1;
    for (size_t i = 0; i < st.n_shards; i++) {
        const ferry_shard_status *s = &st.shards[i];
        if (s->shard.state == FERRY_SHARD_DRAINING && s->slices)
            add_reason(buf, sz, "shard %s draining (%zu slices)", s->shard.name, s->slices);
        if (!ferry_shard_placeable(s->shard.state))
            continue;
        if ((s->shard.state == FERRY_SHARD_NEW || !s->slices) &&
            plan_touches(p, s->shard.name, true))
            add_reason(buf, sz, "shard %s added", s->shard.name);
        if (s->shard.state != FERRY_SHARD_NEW && s->shard.placed_weight > 0 &&
            (plan_touches(p, s->shard.name, true) || plan_touches(p, s->shard.name, false)))
            add_reason(buf, sz, "shard %s re-weighted %g -> %g", s->shard.name,
                       s->shard.placed_weight, s->shard.weight);
        if (s->fill < 0)
            continue;
        if (s->fill > st.settings.fill)
            add_reason(buf, sz, "shard %s fill %.0f%% above the target %.0f%%", s->shard.name,
                       s->fill * 100, st.settings.fill * 100);
        lo = s->fill < lo ? s->fill : lo;
        hi = s->fill > hi ? s->fill : hi;
    }
    if (hi >= 0 && hi - lo > ap->ac.skew)
        add_reason(buf, sz, "fill spread %.2f above skew %.2f", hi - lo, ap->ac.skew);
    if (!buf[0])
        snprintf(buf, sz, "the placement differs from the routing table (weights, tenants or "
                 "replication changed)");
    ferry_cluster_status_free(&st);
}

/* After a run that finished every step: the NEW shards the plan, computed again, no longer
 * wants to fill become ACTIVE (a split raise may place slices on them again). */
static int settle_after(rb_pass *x, ferry_ap_run *run, ferry_err *err)
{
    ferry_rebalance_plan again = {0};
    size_t settled = 0;
    int rc = ferry_rebalance_plan_compute(x->cat, &again, err);
    if (!rc)
        rc = ferry_shards_settle(x->cat, &again, &settled, err);
    ferry_rebalance_plan_free(&again);
    if (!rc && settled) {
        size_t used = strlen(run->summary);
        snprintf(run->summary + used, sizeof run->summary - used,
                 "; %zu new shard(s) now active", settled);
    }
    return rc;
}

int ferry_autopilot_rebalance(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    rb_pass x = {.ap = ap};
    ferry_rebalance_plan plan = {0};
    ferry_move_opts mo;
    char (*ids)[64] = NULL;
    size_t n_unfinished = 0, resumed = 0, resume_failed = 0;
    ap_move_opts(ap, &mo);
    /* unfinished moves are resumed one at a time: each is alone on its shards, so the tighter
     * of the two limits is its own (ferry_plan_run replaces it with the shared limiters) */
    uint64_t bw = ap->ac.bandwidth, bws = ap->ac.bandwidth_per_shard;
    mo.max_bytes_per_second = bw && (!bws || bw < bws) ? bw : bws;
    snprintf(run->result, sizeof run->result, "ok");
    int rc = ferry_catalog_open(ap->catalog_url, &x.cat, err);
    if (rc)
        goto out;
    hold_reason(ap, x.cat, x.deferred_why, sizeof x.deferred_why);
    if (x.deferred_why[0]) {
        snprintf(run->result, sizeof run->result, "%s",
                 ferry_starts_with(x.deferred_why, "outside") ? "outside window" : "held");
        snprintf(run->reason, sizeof run->reason, "%s", x.deferred_why);
        goto out;
    }
    /* the slices' sizes and new tenants, as `ferry rebalance` does first */
    if ((rc = ferry_inventory_sync(x.cat, &mo, NULL, err)))
        goto out;
    /* moves an earlier pass (or a crashed mover) left: finished first, under the same holds */
    if ((rc = ferry_move_unfinished(x.cat, &ids, &n_unfinished, err)))
        goto out;
    for (size_t i = 0; i < n_unfinished; i++) {
        hold_reason(ap, x.cat, x.deferred_why, sizeof x.deferred_why);
        if (x.deferred_why[0])
            break;
        ferry_err merr = {0};
        ferry_move_result res;
        int mrc = ferry_move_run(&mo, ids[i], &res, &merr);
        if (mrc) {
            /* another mover may be running it (its lease): left to it */
            resume_failed++;
            FLOG_WARN("msg=\"autopilot could not finish a move\" move=%s err=\"%s\"", ids[i],
                      merr.msg);
        } else {
            resumed++;
        }
    }
    if (resumed && (rc = ferry_inventory_sync(x.cat, &mo, NULL, err)))
        goto out;
    if ((rc = ferry_rebalance_plan_compute_skew(x.cat, ap->ac.skew, &plan, err)))
        goto out;
    if (!plan.n_moves) {
        size_t settled = 0;
        if ((rc = ferry_shards_settle(x.cat, &plan, &settled, err)))
            goto out;
        if (settled)
            FLOG_INFO("msg=\"autopilot: new shard(s) active, nothing to move onto them\" "
                      "shards=%zu", settled);
        snprintf(run->result, sizeof run->result, resumed || resume_failed ? "ok" : "idle");
        snprintf(run->reason, sizeof run->reason, "%s", n_unfinished ?
                 "unfinished moves" : "balanced: the placement equals the routing table");
        snprintf(run->summary, sizeof run->summary, "%zu unfinished move(s) finished, %zu not",
                 resumed, resume_failed);
        goto out;
    }
    plan_reason(ap, x.cat, &plan, run->reason, sizeof run->reason);
    FLOG_INFO("msg=\"autopilot rebalance starts\" moves=%zu bytes=%llu reason=\"%s\"",
              plan.n_moves, (unsigned long long)plan.moved_bytes, run->reason);
    x.deferred_why[0] = '\0';
    ferry_plan_run_opts o = {.max_parallel = ap->ac.max_moves,
                             .max_per_shard = ap->ac.max_moves_per_shard,
                             .max_bytes_per_second = ap->ac.bandwidth,
                             .max_bytes_per_second_per_shard = ap->ac.bandwidth_per_shard,
                             .batch = ap->ac.move_batch,
                             .on_step = on_step,
                             .may_start = may_start,
                             .arg = &x};
    ferry_plan_run_result r;
    rc = ferry_plan_run(&mo, &plan, &o, &r, err);
    char b[32];
    snprintf(run->summary, sizeof run->summary,
             "%zu of %zu steps done, %zu failed, %zu deferred%s%s; %s copied in %.1fs; %zu "
             "unfinished move(s) finished first",
             r.done, plan.n_moves, r.failed, r.deferred, r.deferred ? " - " : "",
             r.deferred ? x.deferred_why : "", ferry_fmt_bytes(r.bytes_copied, b, sizeof b),
             r.seconds, resumed);
    if (r.deferred && !r.failed)
        snprintf(run->result, sizeof run->result, "partial");
    if (!rc && !r.deferred && !r.failed)
        rc = settle_after(&x, run, err);
out:
    if (rc)
        snprintf(run->result, sizeof run->result, "failed");
    free(ids);
    ferry_rebalance_plan_free(&plan);
    ferry_catalog_close(x.cat);
    return rc;
}

/* The plan executor (include/ferry/plan_run.h): worker threads take the plan's steps from the
 * scheduler (include/ferry/schedule.h: plan order, each step when the run's and its shards'
 * limits allow, a slice's steps one after another), and share one bandwidth limiter; with a
 * per-shard limit each shard has its own as well, and each step accounts on its group (the run's
 * limiter, its source's and its target's). */
#include "ferry/plan_run.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/clock.h"
#include "ferry/rate.h"
#include "ferry/replica.h"
#include "ferry/schedule.h"

#define PLAN_MAX_THREADS 64
#define PLAN_MAX_BATCH 64 /* moves in one batch at most */

typedef struct plan_exec {
    const ferry_move_opts *mo; /* with the shared rate */
    const ferry_rebalance_plan *plan;
    const ferry_plan_run_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ferry_sched *sched;     /* which step may start */
    ferry_sched_move *sm;   /* the steps' shards, numbered */
    /* what the scheduler schedules: units, each one step or a batch of moves between the same
     * two shards (opts batch > 1); unit u is steps unit_steps[unit_first[u] ..
     * unit_first[u + 1]) and has the shards usm[u] */
    size_t n_units;
    size_t *unit_first, *unit_steps;
    ferry_sched_move *usm;
    unsigned *running;      /* per shard, for the result's maxima */
    ferry_rate **shard_rate; /* per shard: max_bytes_per_second_per_shard (NULL: no such limit) */
    ferry_plan_run_result *res;
    int first_rc;
    ferry_err first_err;
} plan_exec;

/* Counts unit u in (delta 1) or out (-1) of its shards, with x->mu held. */
static void count(plan_exec *x, size_t u, int delta)
{
    uint32_t sh[2] = {x->usm[u].from, x->usm[u].to};
    for (int k = 0; k < 2; k++) {
        if (sh[k] == FERRY_SCHED_NONE)
            continue;
        x->running[sh[k]] = (unsigned)((int)x->running[sh[k]] + delta);
        if (x->running[sh[k]] > x->res->max_running_per_shard)
            x->res->max_running_per_shard = x->running[sh[k]];
    }
    unsigned all = (unsigned)ferry_sched_running(x->sched);
    if (all > x->res->max_running)
        x->res->max_running = all;
}

/* The real step: a drop, or a move or clone begun and run. */
static int real_step(const ferry_move_opts *mo, const ferry_planned_move *m,
                     ferry_move_result *res, ferry_err *err, void *arg)
{
    (void)arg;
    char id[64];
    bool resumed;
    if (m->kind == FERRY_PLAN_DROP)
        return ferry_replica_drop(mo, m->tenant, m->split, m->from, res, err);
    int rc = ferry_move_begin_from(mo, m->tenant, m->split, m->from, m->to,
                                   m->kind == FERRY_PLAN_CLONE, id, &resumed, err);
    if (!rc)
        rc = ferry_move_run(mo, id, res, err);
    return rc;
}

/* The bandwidth limits step i's bytes count on: the run's, and its source's and target's with
 * a per-shard limit (*group, freed by the caller, is then that group). FERRY_ENOMEM. */
static int step_rate(plan_exec *x, size_t i, ferry_move_opts *smo, ferry_rate **group)
{
    *smo = *x->mo;
    *group = NULL;
    if (!x->shard_rate)
        return FERRY_OK;
    ferry_rate *members[3] = {x->mo->rate, NULL, NULL};
    if (x->sm[i].from != FERRY_SCHED_NONE)
        members[1] = x->shard_rate[x->sm[i].from];
    if (x->sm[i].to != FERRY_SCHED_NONE)
        members[2] = x->shard_rate[x->sm[i].to];
    if (!(*group = ferry_rate_new_group(members, 3)))
        return FERRY_ENOMEM;
    smo->rate = *group;
    return FERRY_OK;
}

/* Counts step m's end (rc, err, res) in the result and tells on_step. */
static void step_done(plan_exec *x, const ferry_planned_move *m, ferry_move_result *res, int rc,
                      const ferry_err *err)
{
    if (rc && !res->tenant[0]) {
        snprintf(res->tenant, sizeof res->tenant, "%s", m->tenant);
        res->split = m->split;
        snprintf(res->from, sizeof res->from, "%s", m->from);
        snprintf(res->to, sizeof res->to, "%s", m->to);
    }
    pthread_mutex_lock(&x->mu);
    if (rc) {
        x->res->failed++;
        if (!x->first_rc) {
            x->first_rc = rc;
            x->first_err = *err;
        }
    } else {
        x->res->done++;
    }
    x->res->bytes_copied += res->hot_copied + res->cold_copied;
    if (x->o->on_step)
        x->o->on_step(m, res, rc, err, x->o->arg);
    pthread_mutex_unlock(&x->mu);
}

static void run_step(plan_exec *x, size_t i)
{
    const ferry_planned_move *m = &x->plan->moves[i];
    ferry_err err = {0};
    ferry_move_result res;
    memset(&res, 0, sizeof res);
    /* the step's bytes count on the run's limit and on its source's and target's */
    ferry_move_opts smo;
    ferry_rate *group = NULL;
    int rc = step_rate(x, i, &smo, &group);
    if (rc)
        ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
    else
        rc = x->o->step_fn ? x->o->step_fn(&smo, m, &res, &err, x->o->arg)
                           : real_step(&smo, m, &res, &err, NULL);
    ferry_rate_free(group);
    step_done(x, m, &res, rc, &err);
}

/* A batch: steps[0..n), moves between the same two shards, begun one by one and run together
 * (ferry_move_run_batch). */
static void run_batch(plan_exec *x, const size_t *steps, size_t n)
{
    ferry_move_result *res = calloc(n, sizeof *res);
    ferry_err *errs = calloc(n, sizeof *errs);
    int *rcs = calloc(n, sizeof *rcs);
    char (*ids)[64] = calloc(n, sizeof *ids);
    const char **idp = calloc(n, sizeof *idp);
    size_t *of = calloc(n, sizeof *of); /* begun move k is steps[of[k]] */
    ferry_move_opts smo;
    ferry_rate *group = NULL;
    size_t nb = 0;
    if (!res || !errs || !rcs || !ids || !idp || !of || step_rate(x, steps[0], &smo, &group)) {
        ferry_err e = {0};
        ferry_err_set(&e, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            ferry_move_result r;
            memset(&r, 0, sizeof r);
            step_done(x, &x->plan->moves[steps[k]], &r, FERRY_ENOMEM, &e);
        }
        goto out;
    }
    ferry_move_result *begun_res = calloc(n, sizeof *begun_res);
    const char **tenants = calloc(n, sizeof *tenants);
    uint32_t *splits = calloc(n, sizeof *splits);
    bool *resumed = calloc(n, sizeof *resumed);
    if (!begun_res || !tenants || !splits || !resumed) {
        ferry_err e = {0};
        ferry_err_set(&e, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            ferry_move_result r;
            memset(&r, 0, sizeof r);
            step_done(x, &x->plan->moves[steps[k]], &r, FERRY_ENOMEM, &e);
        }
        free(begun_res);
        free(tenants);
        free(splits);
        free(resumed);
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        tenants[k] = x->plan->moves[steps[k]].tenant;
        splits[k] = x->plan->moves[steps[k]].split;
    }
    const ferry_planned_move *m0 = &x->plan->moves[steps[0]];
    (void)ferry_move_begin_batch(&smo, tenants, splits, n, m0->from, m0->to, ids, resumed, rcs,
                                 errs);
    for (size_t k = 0; k < n; k++) {
        if (rcs[k]) {
            ferry_move_result r;
            memset(&r, 0, sizeof r);
            step_done(x, &x->plan->moves[steps[k]], &r, rcs[k], &errs[k]);
            continue;
        }
        idp[nb] = ids[k];
        of[nb++] = k;
    }
    free(tenants);
    free(splits);
    free(resumed);
    int *brc = calloc(nb + 1, sizeof *brc);
    ferry_err *berr = calloc(nb + 1, sizeof *berr);
    if (!brc || !berr) {
        ferry_err e = {0};
        ferry_err_set(&e, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; k < nb; k++) {
            ferry_move_result r;
            memset(&r, 0, sizeof r);
            step_done(x, &x->plan->moves[steps[of[k]]], &r, FERRY_ENOMEM, &e);
        }
        nb = 0;
    }
    if (nb)
        (void)ferry_move_run_batch(&smo, idp, nb, begun_res, brc, berr);
    for (size_t k = 0; k < nb; k++)
        step_done(x, &x->plan->moves[steps[of[k]]], &begun_res[k], brc[k], &berr[k]);
    free(brc);
    free(berr);
    free(begun_res);
    goto out;
out:
    ferry_rate_free(group);
    free(res);
    free(errs);
    free(rcs);
    free(ids);
    free(idp);
    free(of);
}

static void *worker(void *arg)
{
    plan_exec *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        size_t u;
        if (ferry_sched_start(x->sched, &u, 1) == 0) {
            if (ferry_sched_pending(x->sched) == 0)
                break;
            pthread_cond_wait(&x->cond, &x->mu); /* every waiting step's shard is busy */
            continue;
        }
        /* the unit's steps that may start (a pause leaves the others out) */
        size_t go[PLAN_MAX_BATCH], n = 0;
        for (size_t k = x->unit_first[u]; k < x->unit_first[u + 1]; k++) {
            size_t i = x->unit_steps[k];
            if (x->o->may_start && !x->o->may_start(&x->plan->moves[i], x->o->arg))
                x->res->deferred++; /* left for a later run: the plan is computed again then */
            else
                go[n++] = i;
        }
        if (!n) {
            ferry_sched_finish(x->sched, u);
            pthread_cond_broadcast(&x->cond);
            continue;
        }
        count(x, u, 1);
        pthread_mutex_unlock(&x->mu);
        if (n == 1)
            run_step(x, go[0]);
        else
            run_batch(x, go, n);
        pthread_mutex_lock(&x->mu);
        ferry_sched_finish(x->sched, u);
        count(x, u, -1);
        pthread_cond_broadcast(&x->cond);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* The units the scheduler runs: each step alone, or with opts batch > 1, the moves (not clones
 * or drops) of slices that have no other step in the plan grouped by their two shards, up to
 * batch moves a unit, a unit placed where its first step is in plan order. */
static int make_units(plan_exec *x, const ferry_rebalance_plan *plan, size_t n_shards,
                      ferry_err *err)
{
    size_t n = plan->n_moves;
    unsigned batch = x->o->batch > PLAN_MAX_BATCH ? PLAN_MAX_BATCH : x->o->batch;
    if (n_shards > 1024)
        batch = 0; /* the pair table below would be too large */
    size_t *steps_of = NULL, *pair_unit = NULL; /* per slice number: its steps; per pair: the
                                                   unit filling up, + 1 (0: none) */
    if (batch > 1) {
        steps_of = calloc(n + 1, sizeof *steps_of);
        pair_unit = calloc(n_shards * n_shards + 1, sizeof *pair_unit);
        if (!steps_of || !pair_unit) {
            free(steps_of);
            free(pair_unit);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++)
            if (x->sm[i].slice < n)
                steps_of[x->sm[i].slice]++;
    }
    x->unit_first = calloc(n + 2, sizeof *x->unit_first);
    x->unit_steps = calloc(n + 1, sizeof *x->unit_steps);
    x->usm = calloc(n + 1, sizeof *x->usm);
    size_t *unit_of = calloc(n + 1, sizeof *unit_of); /* per step: its unit */
    size_t *size = calloc(n + 1, sizeof *size);       /* per unit: its steps */
    int rc = x->unit_first && x->unit_steps && x->usm && unit_of && size
                 ? FERRY_OK
                 : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    x->n_units = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const ferry_planned_move *m = &plan->moves[i];
        bool batchable = batch > 1 && !x->o->step_fn && m->kind == FERRY_PLAN_MOVE &&
                         x->sm[i].to != FERRY_SCHED_NONE && x->sm[i].from < n_shards &&
                         x->sm[i].to < n_shards && x->sm[i].slice < n &&
                         steps_of[x->sm[i].slice] == 1; /* the slice's only step */
        size_t u = x->n_units, pair = batchable ? x->sm[i].from * n_shards + x->sm[i].to : 0;
        if (batchable && pair_unit[pair] && size[pair_unit[pair] - 1] < batch)
            u = pair_unit[pair] - 1; /* the pair's unit, not full yet */
        if (u == x->n_units) {
            x->usm[u] = x->sm[i];
            size[u] = 0;
            x->n_units++;
            if (batchable)
                pair_unit[pair] = u + 1;
        }
        unit_of[i] = u;
        size[u]++;
    }
    /* steps grouped by unit, in plan order inside each (a counting sort: size[] is each unit's
     * count, then its next free place) */
    size_t at = 0;
    for (size_t u = 0; !rc && u < x->n_units; u++) {
        x->unit_first[u] = at;
        at += size[u];
        size[u] = x->unit_first[u];
    }
    for (size_t i = 0; !rc && i < n; i++)
        x->unit_steps[size[unit_of[i]]++] = i;
    if (!rc)
        x->unit_first[x->n_units] = at;
    free(unit_of);
    free(size);
    free(steps_of);
    free(pair_unit);
    return rc;
}

int ferry_plan_run(const ferry_move_opts *mo, const ferry_rebalance_plan *plan,
                   const ferry_plan_run_opts *opts, ferry_plan_run_result *out, ferry_err *err)
{
    static const ferry_plan_run_opts defaults = {0};
    plan_exec x;
    ferry_move_opts run_mo = *mo;
    double t0;
    int rc = FERRY_OK;
    memset(&x, 0, sizeof x);
    memset(out, 0, sizeof *out);
    x.o = opts ? opts : &defaults;
    x.plan = plan;
    x.res = out;
    t0 = ferry_clock_s();
    unsigned nt = x.o->max_parallel ? x.o->max_parallel : 1;
    if (nt > PLAN_MAX_THREADS)
        nt = PLAN_MAX_THREADS;
    size_t n_shards = 0;
    x.sm = calloc(plan->n_moves + 1, sizeof *x.sm);
    x.running = calloc(2 * plan->n_moves + 1, sizeof *x.running);
    run_mo.rate = ferry_rate_new(x.o->max_bytes_per_second);
    if (!x.sm || !x.running || !run_mo.rate) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    run_mo.max_bytes_per_second = 0; /* the shared rate governs */
    x.mo = &run_mo;
    if ((rc = ferry_rebalance_sched_moves(plan, x.sm, &n_shards, err)))
        goto out;
    if ((rc = make_units(&x, plan, n_shards, err)))
        goto out;
    if (x.o->max_bytes_per_second_per_shard && n_shards) {
        if (!(x.shard_rate = calloc(n_shards, sizeof *x.shard_rate))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t k = 0; k < n_shards; k++)
            if (!(x.shard_rate[k] = ferry_rate_new(x.o->max_bytes_per_second_per_shard))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
    }
    if (
        (plan->n_moves &&
         (rc = ferry_sched_new(x.usm, x.n_units, n_shards ? n_shards : 1,
                               x.o->max_per_shard ? x.o->max_per_shard : nt, nt, &x.sched, err))))
        goto out;
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cond, NULL);
    if (nt > x.n_units)
        nt = (unsigned)x.n_units;
    pthread_t th[PLAN_MAX_THREADS];
    unsigned started = 0;
    for (unsigned i = 1; i < nt; i++)
        if (pthread_create(&th[started], NULL, worker, &x) == 0)
            started++;
    if (plan->n_moves)
        worker(&x); /* the calling thread is one of the workers */
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_cond_destroy(&x.cond);
    pthread_mutex_destroy(&x.mu);
    if (x.first_rc) {
        rc = x.first_rc;
        *err = x.first_err;
    }
out:
    out->seconds = ferry_clock_s() - t0;
    ferry_rate_free(run_mo.rate);
    for (size_t k = 0; x.shard_rate && k < n_shards; k++)
        ferry_rate_free(x.shard_rate[k]);
    free(x.shard_rate);
    ferry_sched_free(x.sched);
    free(x.sm);
    free(x.usm);
    free(x.unit_first);
    free(x.unit_steps);
    free(x.running);
    return rc;
}

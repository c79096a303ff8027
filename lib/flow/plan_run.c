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

#include "ferry/rate.h"
#include "ferry/replica.h"
#include "ferry/schedule.h"

#define PLAN_MAX_THREADS 64

typedef struct plan_exec {
    const ferry_move_opts *mo; /* with the shared rate */
    const ferry_rebalance_plan *plan;
    const ferry_plan_run_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ferry_sched *sched;     /* which step may start */
    ferry_sched_move *sm;   /* the steps' shards, numbered */
    unsigned *running;      /* per shard, for the result's maxima */
    ferry_rate **shard_rate; /* per shard: max_bytes_per_second_per_shard (NULL: no such limit) */
    ferry_plan_run_result *res;
    int first_rc;
    ferry_err first_err;
} plan_exec;

/* Counts step i in (delta 1) or out (-1) of its shards, with x->mu held. */
static void count(plan_exec *x, size_t i, int delta)
{
    uint32_t sh[2] = {x->sm[i].from, x->sm[i].to};
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

static void run_step(plan_exec *x, size_t i)
{
    const ferry_planned_move *m = &x->plan->moves[i];
    ferry_err err = {0};
    ferry_move_result res;
    memset(&res, 0, sizeof res);
    /* the step's bytes count on the run's limit and on its source's and target's */
    ferry_move_opts smo = *x->mo;
    ferry_rate *group = NULL;
    if (x->shard_rate) {
        ferry_rate *members[3] = {x->mo->rate, NULL, NULL};
        if (x->sm[i].from != FERRY_SCHED_NONE)
            members[1] = x->shard_rate[x->sm[i].from];
        if (x->sm[i].to != FERRY_SCHED_NONE)
            members[2] = x->shard_rate[x->sm[i].to];
        group = ferry_rate_new_group(members, 3);
        if (!group) {
            ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
            pthread_mutex_lock(&x->mu);
            x->res->failed++;
            if (!x->first_rc) {
                x->first_rc = FERRY_ENOMEM;
                x->first_err = err;
            }
            pthread_mutex_unlock(&x->mu);
            return;
        }
        smo.rate = group;
    }
    int rc = x->o->step_fn ? x->o->step_fn(&smo, m, &res, &err, x->o->arg)
                           : real_step(&smo, m, &res, &err, NULL);
    ferry_rate_free(group);
    if (rc && !res.tenant[0]) {
        snprintf(res.tenant, sizeof res.tenant, "%s", m->tenant);
        res.split = m->split;
        snprintf(res.from, sizeof res.from, "%s", m->from);
        snprintf(res.to, sizeof res.to, "%s", m->to);
    }
    pthread_mutex_lock(&x->mu);
    if (rc) {
        x->res->failed++;
        if (!x->first_rc) {
            x->first_rc = rc;
            x->first_err = err;
        }
    } else {
        x->res->done++;
    }
    x->res->bytes_copied += res.hot_copied + res.cold_copied;
    if (x->o->on_step)
        x->o->on_step(m, &res, rc, &err, x->o->arg);
    pthread_mutex_unlock(&x->mu);
}

static void *worker(void *arg)
{
    plan_exec *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        size_t i;
        if (ferry_sched_start(x->sched, &i, 1) == 0) {
            if (ferry_sched_pending(x->sched) == 0)
                break;
            pthread_cond_wait(&x->cond, &x->mu); /* every waiting step's shard is busy */
            continue;
        }
        if (x->o->may_start && !x->o->may_start(&x->plan->moves[i], x->o->arg)) {
            x->res->deferred++; /* left for a later run: the plan is computed again then */
            ferry_sched_finish(x->sched, i);
            pthread_cond_broadcast(&x->cond);
            continue;
        }
        count(x, i, 1);
        pthread_mutex_unlock(&x->mu);
        run_step(x, i);
        pthread_mutex_lock(&x->mu);
        ferry_sched_finish(x->sched, i);
        count(x, i, -1);
        pthread_cond_broadcast(&x->cond);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

int ferry_plan_run(const ferry_move_opts *mo, const ferry_rebalance_plan *plan,
                   const ferry_plan_run_opts *opts, ferry_plan_run_result *out, ferry_err *err)
{
    static const ferry_plan_run_opts defaults = {0};
    plan_exec x;
    ferry_move_opts run_mo = *mo;
    struct timespec t0, t1;
    int rc = FERRY_OK;
    memset(&x, 0, sizeof x);
    memset(out, 0, sizeof *out);
    x.o = opts ? opts : &defaults;
    x.plan = plan;
    x.res = out;
    clock_gettime(CLOCK_MONOTONIC, &t0);
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
         (rc = ferry_sched_new(x.sm, plan->n_moves, n_shards ? n_shards : 1,
                               x.o->max_per_shard ? x.o->max_per_shard : nt, nt, &x.sched, err))))
        goto out;
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cond, NULL);
    if (nt > plan->n_moves)
        nt = (unsigned)plan->n_moves;
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
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ferry_rate_free(run_mo.rate);
    for (size_t k = 0; x.shard_rate && k < n_shards; k++)
        ferry_rate_free(x.shard_rate[k]);
    free(x.shard_rate);
    ferry_sched_free(x.sched);
    free(x.sm);
    free(x.running);
    return rc;
}

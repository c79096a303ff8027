/* The plan executor (include/ferry/plan_run.h): worker threads take the plan's steps in order,
 * each only when the run's and its shards' limits allow, and share one bandwidth limiter. */
#include "ferry/plan_run.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/rate.h"
#include "ferry/replica.h"

#define PLAN_MAX_THREADS 64

typedef struct shard_load {
    const char *name; /* borrowed from the plan */
    unsigned running;
} shard_load;

typedef struct plan_exec {
    const ferry_move_opts *mo; /* with the shared rate */
    const ferry_rebalance_plan *plan;
    const ferry_plan_run_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool *started;         /* per step */
    size_t n_started, running;
    shard_load *shards;
    size_t n_shards;
    ferry_plan_run_result *res;
    int first_rc;
    ferry_err first_err;
} plan_exec;

static shard_load *load_of(plan_exec *x, const char *name)
{
    for (size_t i = 0; i < x->n_shards; i++)
        if (!strcmp(x->shards[i].name, name))
            return &x->shards[i];
    return NULL; /* every name of the plan was registered at start */
}

/* A step's shards: its source and, unless it is a drop, its target. */
static size_t step_shards(plan_exec *x, const ferry_planned_move *m, shard_load **out)
{
    size_t n = 0;
    out[n++] = load_of(x, m->from);
    if (m->kind != FERRY_PLAN_DROP && strcmp(m->to, m->from))
        out[n++] = load_of(x, m->to);
    return n;
}

/* The first step in plan order not started whose shards have room, or -1; with x->mu held. */
static long next_step(plan_exec *x)
{
    unsigned cap = x->o->max_per_shard;
    for (size_t i = 0; i < x->plan->n_moves; i++) {
        if (x->started[i])
            continue;
        shard_load *s[2];
        size_t n = step_shards(x, &x->plan->moves[i], s);
        bool room = true;
        for (size_t k = 0; cap && k < n; k++)
            room = room && s[k]->running < cap;
        if (room)
            return (long)i;
    }
    return -1;
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

static void run_step(plan_exec *x, const ferry_planned_move *m)
{
    ferry_err err = {0};
    ferry_move_result res;
    memset(&res, 0, sizeof res);
    int rc = x->o->step_fn ? x->o->step_fn(x->mo, m, &res, &err, x->o->arg)
                           : real_step(x->mo, m, &res, &err, NULL);
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
        long i = -1;
        while (x->n_started < x->plan->n_moves && (i = next_step(x)) < 0)
            pthread_cond_wait(&x->cond, &x->mu); /* every candidate's shard is busy */
        if (i < 0)
            break;
        const ferry_planned_move *m = &x->plan->moves[i];
        shard_load *s[2];
        size_t n = step_shards(x, m, s);
        x->started[i] = true;
        x->n_started++;
        x->running++;
        if (x->running > x->res->max_running)
            x->res->max_running = x->running;
        for (size_t k = 0; k < n; k++)
            if (++s[k]->running > x->res->max_running_per_shard)
                x->res->max_running_per_shard = s[k]->running;
        pthread_mutex_unlock(&x->mu);
        run_step(x, m);
        pthread_mutex_lock(&x->mu);
        x->running--;
        for (size_t k = 0; k < n; k++)
            s[k]->running--;
        pthread_cond_broadcast(&x->cond);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

static int add_shard(plan_exec *x, const char *name)
{
    if (load_of(x, name))
        return FERRY_OK;
    x->shards[x->n_shards++] = (shard_load){name, 0};
    return FERRY_OK;
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
    x.started = calloc(plan->n_moves + 1, sizeof *x.started);
    x.shards = calloc(2 * plan->n_moves + 1, sizeof *x.shards);
    run_mo.rate = ferry_rate_new(x.o->max_bytes_per_second);
    if (!x.started || !x.shards || !run_mo.rate) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    run_mo.max_bytes_per_second = 0; /* the shared rate governs */
    x.mo = &run_mo;
    for (size_t i = 0; i < plan->n_moves; i++) {
        add_shard(&x, plan->moves[i].from);
        add_shard(&x, plan->moves[i].to);
    }
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cond, NULL);
    unsigned nt = x.o->max_parallel ? x.o->max_parallel : 1;
    if (nt > PLAN_MAX_THREADS)
        nt = PLAN_MAX_THREADS;
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
    free(x.started);
    free(x.shards);
    return rc;
}

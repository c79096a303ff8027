/* The plan executor's scheduling (lib/flow/plan_run.c) with a fake step: the run's and each
 * shard's limits hold, every step runs once, failures are counted and the first reported; and
 * the shared bandwidth limit (lib/util/rate.c) holds for the run, across threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ferry/plan_run.h"
#include "ferry/rate.h"

typedef struct fake {
    pthread_mutex_t mu;
    unsigned running, max_running;
    unsigned per_shard[8], max_per_shard;
    unsigned runs[64];
    const char *fail_tenant;
    uint64_t bytes_per_step;
    unsigned allow, asked; /* fake_may_start: the first `allow` steps may start */
} fake;

/* Called with the executor's lock held, one call at a time. */
static bool fake_may_start(const ferry_planned_move *m, void *arg)
{
    (void)m;
    fake *f = arg;
    return f->asked++ < f->allow;
}

static int shard_no(const char *name) { return name[0] ? name[1] - '0' : -1; }

static int fake_step(const ferry_move_opts *mo, const ferry_planned_move *m,
                     ferry_move_result *res, ferry_err *err, void *arg)
{
    fake *f = arg;
    int a = shard_no(m->from), b = shard_no(m->to);
    pthread_mutex_lock(&f->mu);
    f->running++;
    if (f->running > f->max_running)
        f->max_running = f->running;
    f->per_shard[a]++;
    if (b >= 0 && b != a)
        f->per_shard[b]++;
    for (int i = 0; i < 8; i++)
        if (f->per_shard[i] > f->max_per_shard)
            f->max_per_shard = f->per_shard[i];
    f->runs[atoi(m->tenant + 1)]++;
    pthread_mutex_unlock(&f->mu);
    if (f->bytes_per_step)
        ferry_rate_account(mo->rate, f->bytes_per_step);
    else
        usleep(2000);
    pthread_mutex_lock(&f->mu);
    f->running--;
    f->per_shard[a]--;
    if (b >= 0 && b != a)
        f->per_shard[b]--;
    pthread_mutex_unlock(&f->mu);
    res->hot_copied = f->bytes_per_step;
    if (f->fail_tenant && !strcmp(m->tenant, f->fail_tenant))
        return ferry_err_set(err, FERRY_EIO, "step %s failed", m->tenant);
    return FERRY_OK;
}

/* n steps: step i moves tenant "t<i>" from shard "s<i % from_mod>" to "s<to>" */
static ferry_rebalance_plan make_plan(ferry_planned_move *moves, size_t n, int from_mod, int to)
{
    for (size_t i = 0; i < n; i++) {
        memset(&moves[i], 0, sizeof moves[i]);
        moves[i].kind = FERRY_PLAN_MOVE;
        snprintf(moves[i].tenant, sizeof moves[i].tenant, "t%zu", i);
        snprintf(moves[i].from, sizeof moves[i].from, "s%d", (int)(i % (size_t)from_mod));
        snprintf(moves[i].to, sizeof moves[i].to, "s%d", to);
    }
    return (ferry_rebalance_plan){.n_moves = n, .moves = moves};
}

static void test_limits(void **state)
{
    (void)state;
    ferry_planned_move moves[40];
    ferry_rebalance_plan p = make_plan(moves, 40, 3, 7); /* every step writes to s7 */
    fake f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    ferry_move_opts mo = {0};
    ferry_plan_run_opts o = {.max_parallel = 8, .max_per_shard = 3, .step_fn = fake_step,
                             .arg = &f};
    ferry_plan_run_result r;
    ferry_err err = {0};
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    assert_int_equal(r.done, 40);
    assert_int_equal(r.failed, 0);
    assert_true(f.max_per_shard <= 3);          /* s7 never had more than 3 */
    assert_true(r.max_running_per_shard <= 3);
    assert_true(r.max_running >= 2);            /* it did run in parallel */
    for (int i = 0; i < 40; i++)
        assert_int_equal(f.runs[i], 1);
    /* spread over many shards, the run limit binds instead */
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    for (size_t i = 0; i < 40; i++)
        snprintf(moves[i].to, sizeof moves[i].to, "s%d", 3 + (int)(i % 4));
    o.max_parallel = 4;
    o.max_per_shard = 0;
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    assert_true(f.max_running <= 4);
    assert_int_equal(r.done, 40);
}

static void test_failures(void **state)
{
    (void)state;
    ferry_planned_move moves[10];
    ferry_rebalance_plan p = make_plan(moves, 10, 2, 5);
    fake f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.fail_tenant = "t4";
    ferry_move_opts mo = {0};
    ferry_plan_run_opts o = {.max_parallel = 3, .max_per_shard = 2, .step_fn = fake_step,
                             .arg = &f};
    ferry_plan_run_result r;
    ferry_err err = {0};
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_EIO);
    assert_string_equal(err.msg, "step t4 failed");
    assert_int_equal(r.done, 9); /* the others still ran */
    assert_int_equal(r.failed, 1);
}

/* A pause arriving half-way: the steps may_start refuses are counted as deferred, never run,
 * and the run still ends (every step accounted for) with no error. */
static void test_may_start(void **state)
{
    (void)state;
    ferry_planned_move moves[20];
    ferry_rebalance_plan p = make_plan(moves, 20, 4, 6);
    fake f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.allow = 5;
    ferry_move_opts mo = {0};
    ferry_plan_run_opts o = {.max_parallel = 4, .max_per_shard = 2, .step_fn = fake_step,
                             .may_start = fake_may_start, .arg = &f};
    ferry_plan_run_result r;
    ferry_err err = {0};
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    assert_int_equal(r.done, 5);
    assert_int_equal(r.deferred, 15);
    assert_int_equal(r.failed, 0);
    assert_int_equal(f.asked, 20); /* asked once per step */
    unsigned ran = 0;
    for (int i = 0; i < 20; i++) {
        assert_true(f.runs[i] <= 1);
        ran += f.runs[i];
    }
    assert_int_equal(ran, 5);
    /* nothing allowed: nothing runs */
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    assert_int_equal(r.done, 0);
    assert_int_equal(r.deferred, 20);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_bandwidth(void **state)
{
    (void)state;
    /* 12 steps of 100 KB over 4 threads at 2 MB/s: 1.2 MB take >= 0.55 s (the first step's
     * bytes go before they are accounted) and not much more */
    ferry_planned_move moves[12];
    ferry_rebalance_plan p = make_plan(moves, 12, 4, 6);
    fake f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.bytes_per_step = 100000;
    ferry_move_opts mo = {0};
    ferry_plan_run_opts o = {.max_parallel = 4, .max_bytes_per_second = 2000000,
                             .step_fn = fake_step, .arg = &f};
    ferry_plan_run_result r;
    ferry_err err = {0};
    double t0 = mono_s();
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    double took = mono_s() - t0;
    assert_int_equal(r.bytes_copied, 1200000);
    assert_true(took >= 0.55);
    /* no upper bound asserted: a loaded machine only makes it slower, which the limit allows */
    printf("# 1.2 MB at 2 MB/s over 4 threads: %.3f s (%.2f MB/s)\n", took, 1.2 / took);
}

static void test_rate_unlimited(void **state)
{
    (void)state;
    ferry_rate *r = ferry_rate_new(0);
    assert_non_null(r);
    double t0 = mono_s();
    for (int i = 0; i < 1000; i++)
        ferry_rate_account(r, 1 << 20);
    assert_true(mono_s() - t0 < 0.5); /* never waits */
    uint64_t b;
    double s;
    ferry_rate_totals(r, &b, &s);
    assert_int_equal(b, 1000ULL << 20);
    ferry_rate_free(r);
    ferry_rate_account(NULL, 5); /* no limiter: nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_may_start),
        cmocka_unit_test(test_bandwidth),
        cmocka_unit_test(test_rate_unlimited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

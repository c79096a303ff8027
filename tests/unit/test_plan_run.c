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

/* The limiter's arithmetic with a made-up clock (ferry_rate_charge): the debt model, no credit
 * banked while idle, and a group waiting for the slowest of its members. */
static void test_rate_math(void **state)
{
    (void)state;
    ferry_rate *r = ferry_rate_new(100); /* 100 bytes/s */
    assert_non_null(r);
    assert_true(ferry_rate_charge(r, 50, 10.0) == 0.5);  /* 50 bytes: due at 10.5 */
    assert_true(ferry_rate_charge(r, 50, 10.0) == 1.0);  /* queued behind: due at 11.0 */
    assert_true(ferry_rate_charge(r, 100, 10.5) == 1.5); /* due 12.0, asked at 10.5 */
    /* idle for a long time: the next bytes wait their own time only (no credit banked) */
    assert_true(ferry_rate_charge(r, 200, 100.0) == 2.0);
    uint64_t b;
    double s;
    ferry_rate_totals(r, &b, &s);
    assert_int_equal(b, 400);

    /* per-shard limits: a step from A (100 B/s) to B (200 B/s) under a run limit of 1000 B/s
     * waits for A, the slowest; a second step from A to C queues behind the first on A only */
    ferry_rate *run = ferry_rate_new(1000), *a = ferry_rate_new(100), *bb = ferry_rate_new(200),
               *c = ferry_rate_new(200), *d = ferry_rate_new(200), *e = ferry_rate_new(200);
    ferry_rate *m1[3] = {run, a, bb}, *m2[3] = {run, a, c}, *m3[3] = {run, d, e};
    ferry_rate *g1 = ferry_rate_new_group(m1, 3), *g2 = ferry_rate_new_group(m2, 3),
               *g3 = ferry_rate_new_group(m3, 3);
    assert_non_null(g1);
    assert_true(ferry_rate_charge(g1, 100, 0.0) == 1.0); /* A: 1 s; B: 0.5 s; run: 0.1 s */
    assert_true(ferry_rate_charge(g2, 100, 0.0) == 2.0); /* A's debt is shared: 2 s */
    /* a step on other shards (D -> E) is held only by the run limit and its own shards:
     * 100 bytes at 200 B/s = 0.5 s, though A is 2 s behind and the run 0.2 s */
    assert_true(ferry_rate_charge(g3, 100, 0.0) == 0.5);
    /* the run limit binds when it is the slowest: 1000 more bytes at 1000 B/s after 0.3 s of
     * run debt = 1.3 s; D and E would need 5.5 s each, so they bind instead */
    assert_true(ferry_rate_charge(g3, 1000, 0.0) == 5.5);
    ferry_rate_totals(a, &b, &s);
    assert_int_equal(b, 200);  /* A saw both of its steps' bytes, nothing of D -> E's */
    ferry_rate_totals(run, &b, &s);
    assert_int_equal(b, 1300); /* the run saw every byte */
    ferry_rate_totals(g1, &b, &s);
    assert_int_equal(b, 100);
    assert_true(ferry_rate_charge(NULL, 5, 0.0) == 0);
    ferry_rate *gs[] = {g1, g2, g3, run, a, bb, c, d, e, r};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
        ferry_rate_free(gs[i]);
}

/* The executor with max_bytes_per_second_per_shard, in real time: 8 steps of 100 KB, at 1 MB/s
 * per shard. All from one source: the source's limit holds the run to about 0.8 s however many
 * threads. Spread over disjoint shard pairs (s0->s4, s1->s5, s2->s6, s3->s7): each pair has its
 * own limit, so the same bytes take about a quarter of it. */
static void test_bandwidth_per_shard(void **state)
{
    (void)state;
    ferry_planned_move moves[8];
    ferry_rebalance_plan p = make_plan(moves, 8, 1, 6); /* every step s0 -> s6 */
    fake f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.bytes_per_step = 100000;
    ferry_move_opts mo = {0};
    ferry_plan_run_opts o = {.max_parallel = 4, .max_per_shard = 4,
                             .max_bytes_per_second_per_shard = 1000000, .step_fn = fake_step,
                             .arg = &f};
    ferry_plan_run_result r;
    ferry_err err = {0};
    double t0 = mono_s();
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    double shared = mono_s() - t0;
    assert_int_equal(r.bytes_copied, 800000);
    assert_true(shared >= 0.75); /* 0.8 MB through s0 at 1 MB/s (the last step's bytes wait) */
    for (size_t i = 0; i < 8; i++) {
        snprintf(moves[i].from, sizeof moves[i].from, "s%zu", i % 4);
        snprintf(moves[i].to, sizeof moves[i].to, "s%zu", 4 + i % 4);
    }
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.bytes_per_step = 100000;
    t0 = mono_s();
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    double spread = mono_s() - t0;
    assert_true(spread >= 0.19); /* 0.2 MB per pair at 1 MB/s */
    assert_true(spread < shared);
    printf("# per shard 1 MB/s, 0.8 MB: one source %.3f s, four disjoint pairs %.3f s\n", shared,
           spread);
    /* both limits: the run's 0.5 MB/s binds for disjoint pairs (0.8 MB: >= 1.5 s) */
    o.max_bytes_per_second = 500000;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.bytes_per_step = 100000;
    t0 = mono_s();
    assert_int_equal(ferry_plan_run(&mo, &p, &o, &r, &err), FERRY_OK);
    assert_true(mono_s() - t0 >= 1.35);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_may_start),
        cmocka_unit_test(test_bandwidth),
        cmocka_unit_test(test_rate_unlimited),
        cmocka_unit_test(test_rate_math),
        cmocka_unit_test(test_bandwidth_per_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

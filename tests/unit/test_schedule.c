/* Unit tests of the rebalance scheduler (include/ferry/schedule.h): on random plans (2-20 shards,
 * 1-3 moves per shard at once, a global limit or none, drops, slices with several steps, random
 * durations) the simulated run starts every move exactly when a plain reference does (at every
 * event, every waiting move in plan order that may start starts); no shard ever takes part in more
 * moves than its limit; a slice's steps never overlap and keep their order; and small cases whose
 * makespan is known by hand; a catalog plan in the scheduler's terms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/move.h"
#include "ferry/schedule.h"

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

/* The rule, the slow way: after every end, scan all waiting moves in plan order and start each
 * one that may start. Ends are taken one at a time, earliest first (ties: lower move index). */
static double reference(const ferry_sched_move *mv, size_t n, size_t shards, unsigned per,
                        unsigned max_running, const double *secs, double *start)
{
    unsigned *used = calloc(shards, sizeof *used);
    int *state = calloc(n, sizeof *state); /* 0 waiting, 1 running, 2 done */
    double *end = calloc(n, sizeof *end), now = 0;
    size_t running = 0, done = 0;
    while (done < n) {
        for (size_t i = 0; i < n; i++) {
            if (state[i] != 0 || (max_running && running >= max_running))
                continue;
            bool free_from = used[mv[i].from] < per;
            bool free_to = mv[i].to == FERRY_SCHED_NONE || used[mv[i].to] < per;
            bool slice_ok = true;
            for (size_t j = 0; j < i && mv[i].slice != FERRY_SCHED_NONE; j++)
                if (mv[j].slice == mv[i].slice && state[j] != 2)
                    slice_ok = false;
            if (!free_from || !free_to || !slice_ok)
                continue;
            state[i] = 1;
            used[mv[i].from]++;
            if (mv[i].to != FERRY_SCHED_NONE)
                used[mv[i].to]++;
            running++;
            start[i] = now;
            end[i] = now + secs[i];
        }
        size_t first = n;
        for (size_t i = 0; i < n; i++)
            if (state[i] == 1 && (first == n || end[i] < end[first]))
                first = i;
        assert_true(first < n);
        now = end[first];
        state[first] = 2;
        used[mv[first].from]--;
        if (mv[first].to != FERRY_SCHED_NONE)
            used[mv[first].to]--;
        running--;
        done++;
    }
    free(used);
    free(state);
    free(end);
    return now;
}

static void test_matches_reference(void **state)
{
    (void)state;
    ferry_err err = {0};
    for (int round = 0; round < 120; round++) {
        rng_state = 0x5C4ED + (uint64_t)round * 7919;
        size_t shards = 2 + rnd() % 19, n = 1 + rnd() % (round < 100 ? 300 : 800);
        unsigned per = 1 + (unsigned)(rnd() % 3);
        unsigned max_running = rnd() % 3 == 0 ? 1 + (unsigned)(rnd() % 8) : 0;
        ferry_sched_move *mv = calloc(n, sizeof *mv);
        double *secs = calloc(n, sizeof *secs), *s1 = calloc(n, sizeof *s1),
               *s2 = calloc(n, sizeof *s2);
        for (size_t i = 0; i < n; i++) {
            mv[i].from = (uint32_t)(rnd() % shards);
            do
                mv[i].to = rnd() % 10 == 0 ? FERRY_SCHED_NONE : (uint32_t)(rnd() % shards);
            while (mv[i].to == mv[i].from);
            /* about one move in five shares its slice with another */
            mv[i].slice = rnd() % 5 == 0 ? (uint32_t)(rnd() % (n / 4 + 1)) : FERRY_SCHED_NONE;
            /* whole seconds: ties between ends happen, and the order they are taken in counts */
            secs[i] = (double)(1 + rnd() % 20);
        }
        double want = reference(mv, n, shards, per, max_running, secs, s1);
        double got;
        size_t peak;
        must(ferry_sched_simulate(mv, n, shards, per, max_running, secs, s2, &got, &peak, &err),
             &err);
        for (size_t i = 0; i < n; i++)
            if (s1[i] != s2[i])
                fail_msg("round %d: move %zu starts at %g, reference %g", round, i, s2[i], s1[i]);
        assert_true(got == want);
        /* limits: at each start, count what runs */
        size_t peak_seen = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned *use = calloc(shards, sizeof *use);
            size_t all = 0;
            for (size_t j = 0; j < n; j++) {
                if (!(s2[j] <= s2[i] && s2[i] < s2[j] + secs[j]))
                    continue;
                all++;
                use[mv[j].from]++;
                if (mv[j].to != FERRY_SCHED_NONE)
                    use[mv[j].to]++;
                if (j != i && mv[i].slice != FERRY_SCHED_NONE && mv[j].slice == mv[i].slice)
                    fail_msg("round %d: moves %zu and %zu of one slice overlap", round, i, j);
                if (j > i && mv[j].slice != FERRY_SCHED_NONE && mv[j].slice == mv[i].slice)
                    fail_msg("round %d: a slice's later step %zu started first", round, j);
            }
            for (size_t sh = 0; sh < shards; sh++)
                assert_true(use[sh] <= per);
            assert_true(!max_running || all <= max_running);
            peak_seen = all > peak_seen ? all : peak_seen;
            free(use);
        }
        assert_true(peak >= peak_seen); /* ends at one instant are taken one by one */
        free(mv);
        free(secs);
        free(s1);
        free(s2);
    }
}

/* Cases worked out by hand. */
static void test_known_makespans(void **state)
{
    (void)state;
    ferry_err err = {0};
    double makespan;
    size_t peak;
    /* ten moves between the same two shards, one at a time: back to back */
    ferry_sched_move same[10];
    double one[10];
    for (int i = 0; i < 10; i++) {
        same[i] = (ferry_sched_move){0, 1, FERRY_SCHED_NONE};
        one[i] = 1;
    }
    must(ferry_sched_simulate(same, 10, 2, 1, 0, one, NULL, &makespan, &peak, &err), &err);
    assert_true(makespan == 10 && peak == 1);
    must(ferry_sched_simulate(same, 10, 2, 2, 0, one, NULL, &makespan, &peak, &err), &err);
    assert_true(makespan == 5 && peak == 2);
    /* disjoint pairs run side by side; a move waiting for a busy shard does not hold back a later
     * one between free shards */
    ferry_sched_move mix[4] = {{0, 1, FERRY_SCHED_NONE}, {0, 2, FERRY_SCHED_NONE},
                               {3, 4, FERRY_SCHED_NONE}, {5, FERRY_SCHED_NONE, FERRY_SCHED_NONE}};
    double d[4] = {4, 1, 1, 1}, st[4];
    must(ferry_sched_simulate(mix, 4, 6, 1, 0, d, st, &makespan, &peak, &err), &err);
    assert_true(st[0] == 0 && st[1] == 4 && st[2] == 0 && st[3] == 0);
    assert_true(makespan == 5 && peak == 3);
    /* a global limit of one: plan order, one after another */
    must(ferry_sched_simulate(mix, 4, 6, 1, 1, d, st, &makespan, &peak, &err), &err);
    assert_true(st[0] == 0 && st[1] == 4 && st[2] == 5 && st[3] == 6 && makespan == 7);
    /* two steps of one slice on disjoint shards: still one after the other */
    ferry_sched_move steps[2] = {{0, 1, 7}, {2, 3, 7}};
    must(ferry_sched_simulate(steps, 2, 4, 1, 0, d, st, &makespan, &peak, &err), &err);
    assert_true(st[1] == 4 && makespan == 5 && peak == 1);
    /* bad input */
    ferry_sched_move bad = {0, 0, FERRY_SCHED_NONE};
    ferry_sched *s = NULL;
    assert_int_equal(ferry_sched_new(&bad, 1, 2, 1, 0, &s, &err), FERRY_EINVAL);
    bad.to = 5;
    assert_int_equal(ferry_sched_new(&bad, 1, 2, 1, 0, &s, &err), FERRY_EINVAL);
    bad.to = 1;
    assert_int_equal(ferry_sched_new(&bad, 1, 2, 0, 0, &s, &err), FERRY_EINVAL);
}

/* The caller's buffer is smaller than what may start: the rest starts on the next call. */
static void test_small_buffer(void **state)
{
    (void)state;
    ferry_err err = {0};
    ferry_sched_move mv[6];
    for (uint32_t i = 0; i < 6; i++)
        mv[i] = (ferry_sched_move){2 * i, 2 * i + 1, FERRY_SCHED_NONE};
    ferry_sched *s = NULL;
    must(ferry_sched_new(mv, 6, 12, 1, 0, &s, &err), &err);
    size_t got[2];
    assert_int_equal(ferry_sched_start(s, got, 2), 2);
    assert_true(got[0] == 0 && got[1] == 1);
    assert_int_equal(ferry_sched_start(s, got, 2), 2);
    assert_true(got[0] == 2 && got[1] == 3);
    assert_int_equal(ferry_sched_start(s, got, 2), 2);
    assert_int_equal(ferry_sched_start(s, got, 2), 0);
    assert_int_equal(ferry_sched_running(s), 6);
    assert_int_equal(ferry_sched_pending(s), 0);
    ferry_sched_free(s);
}

/* A rebalancing plan's moves: shards numbered by name, a drop has no target, the steps of one
 * slice share a slice number. */
static void test_plan_moves(void **state)
{
    (void)state;
    ferry_planned_move mv[4] = {
        {FERRY_PLAN_MOVE, "acme", 0, "s3", "s1", 10},
        {FERRY_PLAN_CLONE, "beta", 2, "s2", "s3", 5},
        {FERRY_PLAN_DROP, "acme", 1, "s2", "", 0},
        {FERRY_PLAN_MOVE, "beta", 2, "s1", "s9", 5},
    };
    ferry_rebalance_plan p = {.n_moves = 4, .moves = mv};
    ferry_sched_move out[4];
    size_t n_shards = 0;
    ferry_err err = {0};
    must(ferry_rebalance_sched_moves(&p, out, &n_shards, &err), &err);
    assert_int_equal(n_shards, 4); /* s1 s2 s3 s9 */
    assert_int_equal(out[0].from, 2);
    assert_int_equal(out[0].to, 0);
    assert_int_equal(out[1].from, 1);
    assert_int_equal(out[1].to, 2);
    assert_int_equal(out[2].from, 1);
    assert_int_equal(out[2].to, FERRY_SCHED_NONE);
    assert_int_equal(out[3].to, 3);
    assert_int_equal(out[1].slice, out[3].slice);
    assert_true(out[0].slice != out[2].slice && out[0].slice != out[1].slice);
    /* and the two steps of beta/2 run one after the other even on disjoint shards */
    double secs[4] = {1, 1, 1, 1}, st[4], makespan;
    size_t peak;
    must(ferry_sched_simulate(out, 4, n_shards, 4, 0, secs, st, &makespan, &peak, &err), &err);
    assert_true(st[3] >= st[1] + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_known_makespans),
        cmocka_unit_test(test_small_buffer),
        cmocka_unit_test(test_plan_moves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

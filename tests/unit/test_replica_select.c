/* Unit tests of replica selection: every load_balancing policy with fixed seeds and the host
 * names of ClickHouse's documentation, the sort tuple (errors, slowdowns, config priority,
 * policy priority, random), error decay over simulated time, the cap, ignored errors,
 * first_or_random's offset, round_robin's rotation, least_request's sampling, and the
 * distribution of the random tie-break. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/replica_select.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

/* A selector over hosts with the given policy and local host name, other settings default. */
static ferry_replica_selector *make(const char *const *hosts, size_t n, ferry_lb policy,
                                    const char *local)
{
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt);
    opt.query.policy = policy;
    opt.local_hostname = local;
    ferry_replica_selector *sel = NULL;
    ferry_err err = {0, ""};
    must(ferry_rsel_create(hosts, NULL, n, &opt, &sel, &err), &err);
    return sel;
}

static void pick(ferry_replica_selector *sel, uint64_t now, ferry_rsel_rng *rng, size_t *order)
{
    ferry_err err = {0, ""};
    must(ferry_rsel_select(sel, now, rng, order, &err), &err);
}

static void pick_q(ferry_replica_selector *sel, const ferry_rsel_query *q, uint64_t now,
                   ferry_rsel_rng *rng, size_t *order)
{
    ferry_err err = {0, ""};
    must(ferry_rsel_select_query(sel, q, now, rng, order, &err), &err);
}

static void errors(ferry_replica_selector *sel, size_t i, int count)
{
    ferry_err err = {0, ""};
    for (int k = 0; k < count; k++)
        must(ferry_rsel_report_error(sel, i, &err), &err);
}

static uint64_t error_count(const ferry_replica_selector *sel, size_t i)
{
    ferry_rsel_state st;
    ferry_err err = {0, ""};
    must(ferry_rsel_get_state(sel, i, &st, &err), &err);
    return st.error_count;
}

/* order is a permutation of 0..n-1. */
static void assert_permutation(const size_t *order, size_t n)
{
    bool seen[64] = {false};
    for (size_t i = 0; i < n; i++) {
        assert_true(order[i] < n);
        assert_false(seen[order[i]]);
        seen[order[i]] = true;
    }
}

/* Counts, over `trials` seeds, how often each replica comes first. */
static void first_counts(ferry_replica_selector *sel, const ferry_rsel_query *q, int trials,
                         uint64_t seed0, int *counts)
{
    size_t order[64];
    size_t n = ferry_rsel_count(sel);
    memset(counts, 0, n * sizeof *counts);
    for (int t = 0; t < trials; t++) {
        ferry_rsel_rng rng;
        ferry_rsel_rng_seed(&rng, seed0 + (uint64_t)t);
        pick_q(sel, q, 0, &rng, order);
        assert_permutation(order, n);
        counts[order[0]]++;
    }
}

/* ---- names and measures ------------------------------------------------------------------- */

static void test_policy_names(void **state)
{
    (void)state;
    const char *names[] = {"random", "nearest_hostname", "hostname_levenshtein_distance",
                           "hostname_longest_common_prefix", "hostname_longest_common_suffix",
                           "in_order", "first_or_random", "round_robin", "least_request"};
    for (int i = 0; i < FERRY_LB_COUNT; i++) {
        ferry_lb p;
        assert_true(ferry_lb_parse(names[i], &p));
        assert_int_equal(p, i);
        assert_string_equal(ferry_lb_name(p), names[i]);
    }
    ferry_lb p = FERRY_LB_RANDOM;
    assert_true(ferry_lb_parse("least_outstanding_requests", &p));
    assert_int_equal(p, FERRY_LB_LEAST_REQUEST);
    assert_false(ferry_lb_parse("Random", &p));
    assert_false(ferry_lb_parse("nearest", &p));
    assert_false(ferry_lb_parse("", &p));
    assert_false(ferry_lb_parse(NULL, &p));
    assert_string_equal(ferry_lb_name((ferry_lb)99), "?");
}

static void test_hostname_measures(void **state)
{
    (void)state;
    /* The documentation's example: one position differs vs two. */
    assert_int_equal(ferry_hostname_prefix_distance("example01-01-1", "example01-01-2"), 1);
    assert_int_equal(ferry_hostname_prefix_distance("example01-01-1", "example01-02-2"), 2);
    /* Only up to the shorter length; case-sensitive. */
    assert_int_equal(ferry_hostname_prefix_distance("abc", "abcdef"), 0);
    assert_int_equal(ferry_hostname_prefix_distance("Example01-01-1", "EXAMPLE01-01-1"), 6);
    assert_int_equal(ferry_hostname_prefix_distance("sfe301", "sfe10101"), 1);

    /* Levenshtein, case-insensitive as in the newest ClickHouse. */
    assert_int_equal(ferry_hostname_levenshtein_distance("Example01-01-1", "EXAMPLE01-01-1"), 0);
    assert_int_equal(ferry_hostname_levenshtein_distance("kitten", "sitting"), 3);
    assert_int_equal(ferry_hostname_levenshtein_distance("sitting", "kitten"), 3);
    assert_int_equal(ferry_hostname_levenshtein_distance("", "abc"), 3);
    assert_int_equal(ferry_hostname_levenshtein_distance("example01-01-1", "example1-1-1"), 2);
    /* A name longer than the on-stack row. */
    char long_a[600], long_b[600];
    memset(long_a, 'a', 599);
    long_a[599] = 0;
    memcpy(long_b, long_a, 600);
    long_b[0] = 'B';
    long_b[598] = 0; /* one shorter, first differs */
    assert_int_equal(ferry_hostname_levenshtein_distance(long_a, long_b), 2);

    /* Common prefix / suffix (case-sensitive). */
    assert_int_equal(ferry_hostname_common_prefix("sfe301", "sfe10101"), 3);
    assert_int_equal(ferry_hostname_common_prefix("sfe301", "xfe301"), 0);
    assert_int_equal(ferry_hostname_common_prefix("sfe301", "sfe301"), 6);
    assert_int_equal(ferry_hostname_common_prefix("SFE301", "sfe301"), 0);
    assert_int_equal(ferry_hostname_common_suffix("et46gtghn.qc.localdomain", "ab999.qc.localdomain"), 15);
    assert_int_equal(ferry_hostname_common_suffix("et46gtghn.qc.localdomain", "et46gtghn.qd.localdomain"), 12);
    assert_int_equal(ferry_hostname_common_suffix("abc", "abc"), 3);
    assert_int_equal(ferry_hostname_common_suffix("abc", "xbc"), 2);
    assert_int_equal(ferry_hostname_common_suffix("", "xbc"), 0);
}

static void test_rng(void **state)
{
    (void)state;
    ferry_rsel_rng a, b;
    ferry_rsel_rng_seed(&a, 42);
    ferry_rsel_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        assert_true(ferry_rsel_rng_next(&a) == ferry_rsel_rng_next(&b));
    ferry_rsel_rng_seed(&b, 43);
    assert_true(ferry_rsel_rng_next(&a) != ferry_rsel_rng_next(&b));
    ferry_rsel_rng_seed(&a, 0); /* seed 0 must not give the all-zero xoshiro state */
    assert_true(ferry_rsel_rng_next(&a) != 0 || ferry_rsel_rng_next(&a) != 0);
    int hist[3] = {0};
    for (int i = 0; i < 30000; i++) {
        uint64_t x = ferry_rsel_rng_below(&a, 3);
        assert_true(x < 3);
        hist[x]++;
    }
    for (int i = 0; i < 3; i++)
        assert_in_range(hist[i], 9400, 10600);
    assert_int_equal(ferry_rsel_rng_below(&a, 0), 0);
    assert_int_equal(ferry_rsel_rng_below(&a, 1), 0);
}

/* ---- creation errors ---------------------------------------------------------------------- */

static void test_create_errors(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b"};
    const char *bad_hosts[] = {"a", ""};
    ferry_replica_selector *sel = (ferry_replica_selector *)1;
    ferry_err err = {0, ""};
    ferry_rsel_options opt;

    assert_int_equal(ferry_rsel_create(hosts, NULL, 0, NULL, &sel, &err), FERRY_EINVAL);
    assert_null(sel);
    assert_int_equal(ferry_rsel_create(bad_hosts, NULL, 2, NULL, &sel, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "replica 2"));
    assert_null(sel);

    ferry_rsel_options_default(&opt);
    opt.query.policy = FERRY_LB_NEAREST_HOSTNAME;
    assert_int_equal(ferry_rsel_create(hosts, NULL, 2, &opt, &sel, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "nearest_hostname"));
    assert_non_null(strstr(err.msg, "local host name"));

    ferry_rsel_options_default(&opt);
    opt.query.least_request_bias = -1;
    assert_int_equal(ferry_rsel_create(hosts, NULL, 2, &opt, &sel, &err), FERRY_EINVAL);

    /* A selector without a local host name refuses host name policies per query too. */
    must(ferry_rsel_create(hosts, NULL, 2, NULL, &sel, &err), &err);
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_HOSTNAME_LONGEST_COMMON_SUFFIX;
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    size_t order[2];
    assert_int_equal(ferry_rsel_select_query(sel, &q, 0, &rng, order, &err), FERRY_EINVAL);
    assert_int_equal(ferry_rsel_report_error(sel, 2, &err), FERRY_EINVAL);
    assert_int_equal(ferry_rsel_end(sel, 0, &err), FERRY_EINVAL); /* nothing in flight */
    assert_string_equal(ferry_rsel_host(sel, 1), "b");
    assert_null(ferry_rsel_host(sel, 2));
    ferry_rsel_free(sel);
}

/* ---- policies ----------------------------------------------------------------------------- */

static void test_random_uniform(void **state)
{
    (void)state;
    const char *hosts[] = {"r1", "r2", "r3", "r4"};
    ferry_replica_selector *sel = make(hosts, 4, FERRY_LB_RANDOM, NULL);
    int counts[4];
    first_counts(sel, NULL, 40000, 1000, counts);
    for (int i = 0; i < 4; i++) /* expected 10000, sd ~87 */
        assert_in_range(counts[i], 9500, 10500);

    /* Every position is uniform too: count how often replica 0 ends up last. */
    size_t order[4];
    int last0 = 0;
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 7);
    for (int t = 0; t < 40000; t++) {
        pick(sel, 0, &rng, order);
        last0 += order[3] == 0;
    }
    assert_in_range(last0, 9500, 10500);

    /* The same seed gives the same order. */
    size_t a[4], b[4];
    ferry_rsel_rng r1, r2;
    ferry_rsel_rng_seed(&r1, 99);
    ferry_rsel_rng_seed(&r2, 99);
    for (int t = 0; t < 10; t++) {
        pick(sel, 0, &r1, a);
        pick(sel, 0, &r2, b);
        assert_memory_equal(a, b, sizeof a);
    }
    ferry_rsel_free(sel);
}

static void test_nearest_hostname(void **state)
{
    (void)state;
    /* Distances from example01-01-1: 2, 1, 2. */
    const char *hosts[] = {"example01-02-2", "example01-01-2", "example01-03-3"};
    ferry_replica_selector *sel = make(hosts, 3, FERRY_LB_NEAREST_HOSTNAME, "example01-01-1");
    int counts[3];
    first_counts(sel, NULL, 2000, 5, counts);
    assert_int_equal(counts[1], 2000);

    /* Equal distances (0 and 2) tie and the random number splits them evenly. */
    size_t order[3];
    int zero_second = 0;
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 11);
    for (int t = 0; t < 4000; t++) {
        pick(sel, 0, &rng, order);
        assert_int_equal(order[0], 1);
        zero_second += order[1] == 0;
    }
    assert_in_range(zero_second, 1800, 2200);

    /* Errors come before distance: the nearest replica with an error goes last. */
    errors(sel, 1, 1);
    pick(sel, 0, &rng, order);
    assert_int_equal(order[2], 1);
    ferry_rsel_free(sel);
}

static void test_levenshtein(void **state)
{
    (void)state;
    /* From "Example01-01-1", case-insensitively: 1, 0, 2 edits. */
    const char *hosts[] = {"example01-01-2", "EXAMPLE01-01-1", "example1-1-1"};
    ferry_replica_selector *sel = make(hosts, 3, FERRY_LB_HOSTNAME_LEVENSHTEIN_DISTANCE, "Example01-01-1");
    size_t order[3];
    for (uint64_t seed = 0; seed < 50; seed++) {
        ferry_rsel_rng rng;
        ferry_rsel_rng_seed(&rng, seed);
        pick(sel, 0, &rng, order);
        assert_int_equal(order[0], 1);
        assert_int_equal(order[1], 0);
        assert_int_equal(order[2], 2);
    }
    /* The same selector under nearest_hostname, which is case-sensitive: example01-01-2
     * differs from Example01-01-1 in 2 positions, EXAMPLE01-01-1 in 6, example1-1-1 in 5 of
     * the first 12, so replica 0 comes first there. */
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_NEAREST_HOSTNAME;
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 3);
    pick_q(sel, &q, 0, &rng, order);
    assert_int_equal(order[0], 0);
    ferry_rsel_free(sel);
}

static void test_longest_common_prefix(void **state)
{
    (void)state;
    /* From sfe301: sfe10101 shares "sfe" (3); xfe301 shares nothing although nearest_hostname
     * finds it as close (1 differing position each); tyu999 shares nothing. */
    const char *hosts[] = {"xfe301", "sfe10101", "tyu999"};
    ferry_replica_selector *sel = make(hosts, 3, FERRY_LB_HOSTNAME_LONGEST_COMMON_PREFIX, "sfe301");
    int counts[3];
    first_counts(sel, NULL, 1000, 17, counts);
    assert_int_equal(counts[1], 1000);

    /* nearest_hostname ties replicas 0 and 1 (distance 1 each). */
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_NEAREST_HOSTNAME;
    first_counts(sel, &q, 2000, 17, counts);
    assert_int_equal(counts[2], 0);
    assert_in_range(counts[0], 850, 1150);
    assert_in_range(counts[1], 850, 1150);
    ferry_rsel_free(sel);

    /* No common prefix anywhere: behaves exactly like random. */
    const char *others[] = {"a1", "b2", "c3"};
    sel = make(others, 3, FERRY_LB_HOSTNAME_LONGEST_COMMON_PREFIX, "zzz");
    first_counts(sel, NULL, 3000, 23, counts);
    for (int i = 0; i < 3; i++)
        assert_in_range(counts[i], 850, 1150);
    ferry_rsel_free(sel);
}

static void test_longest_common_suffix(void **state)
{
    (void)state;
    /* From et46gtghn.qc.localdomain: ab999.qc.localdomain shares ".qc.localdomain" (15),
     * et46gtghn.qd.localdomain only ".localdomain" (12), although nearest_hostname would pick
     * the latter (one differing position). */
    const char *hosts[] = {"et46gtghn.qd.localdomain", "ab999.qc.localdomain", "zz.example.org"};
    ferry_replica_selector *sel =
        make(hosts, 3, FERRY_LB_HOSTNAME_LONGEST_COMMON_SUFFIX, "et46gtghn.qc.localdomain");
    size_t order[3];
    for (uint64_t seed = 0; seed < 50; seed++) {
        ferry_rsel_rng rng;
        ferry_rsel_rng_seed(&rng, seed);
        pick(sel, 0, &rng, order);
        assert_int_equal(order[0], 1);
        assert_int_equal(order[1], 0);
        assert_int_equal(order[2], 2);
    }
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_NEAREST_HOSTNAME;
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 3);
    pick_q(sel, &q, 0, &rng, order);
    assert_int_equal(order[0], 0);
    ferry_rsel_free(sel);
}

static void test_in_order(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b", "c", "d"};
    ferry_replica_selector *sel = make(hosts, 4, FERRY_LB_IN_ORDER, NULL);
    size_t order[4];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    for (int t = 0; t < 20; t++) {
        pick(sel, 0, &rng, order);
        for (size_t i = 0; i < 4; i++)
            assert_int_equal(order[i], i);
    }
    /* The failed first replica goes last; the others keep their order. */
    errors(sel, 0, 1);
    pick(sel, 0, &rng, order);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 3);
    assert_int_equal(order[3], 0);
    ferry_rsel_free(sel);
}

static void test_first_or_random(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b", "c", "d"};
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt);
    opt.query.policy = FERRY_LB_FIRST_OR_RANDOM;
    opt.query.first_offset = 5; /* 5 % 4 = replica 1 */
    ferry_replica_selector *sel = NULL;
    ferry_err err = {0, ""};
    must(ferry_rsel_create(hosts, NULL, 4, &opt, &sel, &err), &err);

    /* Replica 1 always first, the others random behind it. */
    int counts[4];
    first_counts(sel, NULL, 1000, 50, counts);
    assert_int_equal(counts[1], 1000);
    size_t order[4];
    int second[4] = {0};
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 8);
    for (int t = 0; t < 3000; t++) {
        pick(sel, 0, &rng, order);
        second[order[1]]++;
    }
    assert_int_equal(second[1], 0);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            assert_in_range(second[i], 850, 1150);

    /* Offset 0 (the default) means the first replica. */
    ferry_rsel_query q = opt.query;
    q.first_offset = 0;
    first_counts(sel, &q, 200, 1, counts);
    assert_int_equal(counts[0], 200);

    /* The first one fails: the load spreads evenly over the remaining three and the failed
     * one is tried last. */
    errors(sel, 1, 1);
    memset(counts, 0, sizeof counts);
    for (int t = 0; t < 3000; t++) {
        pick(sel, 0, &rng, order);
        assert_int_equal(order[3], 1);
        counts[order[0]]++;
    }
    assert_int_equal(counts[1], 0);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            assert_in_range(counts[i], 850, 1150);
    ferry_rsel_free(sel);
}

static void test_round_robin(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b", "c"};
    ferry_replica_selector *sel = make(hosts, 3, FERRY_LB_ROUND_ROBIN, NULL);
    /* Counter c, k = c % 3: the replica after k first, k last. */
    const size_t want[6][3] = {{1, 2, 0}, {2, 0, 1}, {0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}};
    size_t order[3];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 4);
    for (int t = 0; t < 6; t++) {
        pick(sel, 0, &rng, order);
        assert_memory_equal(order, want[t], sizeof order);
    }
    /* Other policies' selects do not advance the counter. */
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_RANDOM;
    pick_q(sel, &q, 0, &rng, order);
    pick_q(sel, &q, 0, &rng, order);
    pick(sel, 0, &rng, order);
    assert_memory_equal(order, want[0], sizeof order);

    /* A replica with errors drops out of the rotation to the end: with replica 2 errored the
     * next three selects (k = 1, 2, 0) start at 0, 0, 1. */
    errors(sel, 2, 1);
    const size_t want_err[3][3] = {{0, 1, 2}, {0, 1, 2}, {1, 0, 2}};
    for (int t = 0; t < 3; t++) {
        pick(sel, 0, &rng, order);
        assert_memory_equal(order, want_err[t], sizeof order);
    }
    ferry_rsel_free(sel);

    /* ClickHouse's table for 5 replicas: counter 0 prefers 1,2,3,4 then 0; counter 3 prefers
     * 4 then 0,1,2,3. */
    const char *five[] = {"a", "b", "c", "d", "e"};
    sel = make(five, 5, FERRY_LB_ROUND_ROBIN, NULL);
    size_t o5[5];
    const size_t w0[5] = {1, 2, 3, 4, 0}, w3[5] = {4, 0, 1, 2, 3};
    pick(sel, 0, &rng, o5);
    assert_memory_equal(o5, w0, sizeof o5);
    pick(sel, 0, &rng, o5);
    pick(sel, 0, &rng, o5);
    pick(sel, 0, &rng, o5);
    assert_memory_equal(o5, w3, sizeof o5);
    ferry_rsel_free(sel);
}

static void in_flight(ferry_replica_selector *sel, size_t i, int count)
{
    ferry_err err = {0, ""};
    for (int k = 0; k < count; k++)
        must(ferry_rsel_begin(sel, i, &err), &err);
}

static void test_least_request(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b", "c", "d"};
    ferry_replica_selector *sel = make(hosts, 4, FERRY_LB_LEAST_REQUEST, NULL);
    /* In flight: 0, 1, 2, 3. Two distinct replicas are sampled and the less busy one wins, so
     * replica i wins exactly when it is sampled with a busier one: of the 6 pairs, replica 0
     * wins 3, replica 1 wins 2, replica 2 wins 1, replica 3 (the busiest) never. */
    in_flight(sel, 1, 1);
    in_flight(sel, 2, 2);
    in_flight(sel, 3, 3);
    int counts[4];
    first_counts(sel, NULL, 12000, 300, counts);
    assert_int_equal(counts[3], 0);
    assert_in_range(counts[0], 5700, 6300);
    assert_in_range(counts[1], 3700, 4300);
    assert_in_range(counts[2], 1750, 2250);

    /* The winner gets priority 0, everyone else random order: the busiest is not always last. */
    size_t order[4];
    int busiest_not_last = 0;
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 9);
    for (int t = 0; t < 1000; t++) {
        pick(sel, 0, &rng, order);
        busiest_not_last += order[3] != 3;
    }
    assert_true(busiest_not_last > 500);

    /* choice_count >= n examines every replica: the least busy always wins. */
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_LEAST_REQUEST;
    q.least_request_choice_count = 10;
    first_counts(sel, &q, 500, 1, counts);
    assert_int_equal(counts[0], 500);

    /* bias 0: every score is 1, the first sampled wins: uniform. */
    q.least_request_choice_count = 2;
    q.least_request_bias = 0;
    first_counts(sel, &q, 8000, 1, counts);
    for (int i = 0; i < 4; i++)
        assert_in_range(counts[i], 1800, 2200);

    /* A non-default bias keeps the order of loads. */
    q.least_request_bias = 2.5;
    first_counts(sel, &q, 1200, 1, counts);
    assert_int_equal(counts[3], 0);

    /* Errors still come first: replica 0 (idle) with an error is never first. As in
     * ClickHouse the sample still includes it, and when it wins (half the time) its win is
     * wasted and the other three follow in random order: first is 1 with 1/3 + 1/6, 2 with
     * 1/6 + 1/6, 3 with 0 + 1/6. */
    errors(sel, 0, 1);
    first_counts(sel, NULL, 6000, 1, counts);
    assert_int_equal(counts[0], 0);
    assert_in_range(counts[1], 2750, 3250);
    assert_in_range(counts[2], 1750, 2250);
    assert_in_range(counts[3], 800, 1200);
    ferry_rsel_free(sel);

    /* Two replicas: both are always sampled; requests ending moves the choice. */
    const char *two[] = {"x", "y"};
    sel = make(two, 2, FERRY_LB_LEAST_REQUEST, NULL);
    in_flight(sel, 0, 2);
    in_flight(sel, 1, 1);
    first_counts(sel, NULL, 100, 1, counts);
    assert_int_equal(counts[1], 100);
    ferry_err err = {0, ""};
    must(ferry_rsel_end(sel, 0, &err), &err);
    must(ferry_rsel_end(sel, 0, &err), &err);
    first_counts(sel, NULL, 100, 1, counts);
    assert_int_equal(counts[0], 100);
    /* Equal loads: a fair coin. */
    must(ferry_rsel_end(sel, 1, &err), &err);
    first_counts(sel, NULL, 4000, 1, counts);
    assert_in_range(counts[0], 1800, 2200);
    ferry_rsel_free(sel);

    /* One replica. */
    const char *one[] = {"solo"};
    sel = make(one, 1, FERRY_LB_LEAST_REQUEST, NULL);
    first_counts(sel, NULL, 10, 1, counts);
    assert_int_equal(counts[0], 10);
    ferry_rsel_free(sel);
}

/* ---- the sort tuple ----------------------------------------------------------------------- */

static void test_tie_breaks(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b", "c"};
    const int64_t prio[] = {2, 1, 1};
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt);
    opt.query.policy = FERRY_LB_IN_ORDER;
    ferry_replica_selector *sel = NULL;
    ferry_err err = {0, ""};
    must(ferry_rsel_create(hosts, prio, 3, &opt, &sel, &err), &err);
    size_t order[3];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 5);

    /* config_priority before the policy's priority. */
    pick(sel, 0, &rng, order);
    const size_t w1[3] = {1, 2, 0};
    assert_memory_equal(order, w1, sizeof order);

    /* error_count before config_priority. */
    errors(sel, 1, 1);
    errors(sel, 2, 1);
    pick(sel, 0, &rng, order);
    const size_t w2[3] = {0, 1, 2};
    assert_memory_equal(order, w2, sizeof order);

    /* Slowdowns count only for hedged selects, right after errors. */
    must(ferry_rsel_report_slowdown(sel, 1, &err), &err);
    ferry_rsel_query q = opt.query;
    q.use_slowdown_count = true;
    pick_q(sel, &q, 0, &rng, order);
    const size_t w3[3] = {0, 2, 1};
    assert_memory_equal(order, w3, sizeof order);
    pick(sel, 0, &rng, order);
    assert_memory_equal(order, w2, sizeof order);
    ferry_rsel_free(sel);

    /* random policy with equal config priorities: the random number decides, so each of the
     * lower-priority pair comes first half the time and the config_priority 2 one never. */
    opt.query.policy = FERRY_LB_RANDOM;
    must(ferry_rsel_create(hosts, prio, 3, &opt, &sel, &err), &err);
    int counts[3];
    first_counts(sel, NULL, 2000, 1, counts);
    assert_int_equal(counts[0], 0);
    assert_in_range(counts[1], 900, 1100);
    ferry_rsel_free(sel);
}

static void test_failover_order(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b", "c", "d", "e"};
    ferry_replica_selector *sel = make(hosts, 5, FERRY_LB_RANDOM, NULL);
    errors(sel, 1, 3);
    errors(sel, 3, 1);
    size_t order[5];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 77);
    for (int t = 0; t < 200; t++) {
        pick(sel, 1000, &rng, order);
        assert_permutation(order, 5);
        assert_true(order[0] != 1 && order[0] != 3);
        assert_true(order[1] != 1 && order[1] != 3);
        assert_true(order[2] != 1 && order[2] != 3);
        assert_int_equal(order[3], 3); /* fewer errors first */
        assert_int_equal(order[4], 1);
    }
    ferry_rsel_free(sel);
}

/* ---- errors over time ---------------------------------------------------------------------- */

static void test_decay(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b"};
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt); /* half-life 60 s */
    ferry_replica_selector *sel = NULL;
    ferry_err err = {0, ""};
    must(ferry_rsel_create(hosts, NULL, 2, &opt, &sel, &err), &err);
    size_t order[2];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    const uint64_t t0 = 5000000;

    pick(sel, t0, &rng, order); /* starts the clock */
    errors(sel, 0, 8);
    must(ferry_rsel_report_slowdown(sel, 0, &err), &err);
    must(ferry_rsel_report_slowdown(sel, 0, &err), &err);
    pick(sel, t0 + 59999, &rng, order);
    assert_int_equal(error_count(sel, 0), 8);
    pick(sel, t0 + 60000, &rng, order); /* one half-life */
    assert_int_equal(error_count(sel, 0), 4);
    ferry_rsel_state st;
    must(ferry_rsel_get_state(sel, 0, &st, &err), &err);
    assert_int_equal(st.slowdown_count, 1);
    pick(sel, t0 + 90000, &rng, order); /* half a period since the last decrease */
    assert_int_equal(error_count(sel, 0), 4);
    /* 119999 ms after the last decrease: one period; the 59999 ms remainder is dropped, so
     * the next halving needs another full period from here. */
    pick(sel, t0 + 60000 + 119999, &rng, order);
    assert_int_equal(error_count(sel, 0), 2);
    pick(sel, t0 + 60000 + 119999 + 59999, &rng, order);
    assert_int_equal(error_count(sel, 0), 2);
    pick(sel, t0 + 60000 + 119999 + 60000, &rng, order);
    assert_int_equal(error_count(sel, 0), 1);
    /* A clock that goes backwards changes nothing. */
    pick(sel, t0, &rng, order);
    assert_int_equal(error_count(sel, 0), 1);

    /* Several periods at once: shift by the number of periods. */
    uint64_t t = t0 + 60000 + 119999 + 60000;
    errors(sel, 1, 999); /* capped at 1000 anyway */
    pick(sel, t + 3 * 60000, &rng, order);
    assert_int_equal(error_count(sel, 1), 999 >> 3);
    assert_int_equal(error_count(sel, 0), 0);
    t += 3 * 60000;
    /* 64 periods or more reset to 0 (a shift by >= 64 would be undefined; UBSan watches). */
    errors(sel, 1, 1000);
    pick(sel, t + 64 * 60000ULL, &rng, order);
    assert_int_equal(error_count(sel, 1), 0);
    t += 64 * 60000ULL;
    errors(sel, 1, 1000);
    pick(sel, t + 1000000 * 60000ULL, &rng, order);
    assert_int_equal(error_count(sel, 1), 0);
    ferry_rsel_free(sel);

    /* Half-life 0: every select after the first resets the counts. */
    opt.half_life_ms = 0;
    must(ferry_rsel_create(hosts, NULL, 2, &opt, &sel, &err), &err);
    pick(sel, 100, &rng, order);
    errors(sel, 0, 5);
    assert_int_equal(error_count(sel, 0), 5);
    pick(sel, 100, &rng, order);
    assert_int_equal(error_count(sel, 0), 0);
    ferry_rsel_free(sel);
}

static void test_error_order_recovers(void **state)
{
    (void)state;
    /* in_order: replica 0 fails twice and is last; after two half-lives its count is 0 and it
     * is first again. */
    const char *hosts[] = {"a", "b"};
    ferry_replica_selector *sel = make(hosts, 2, FERRY_LB_IN_ORDER, NULL);
    size_t order[2];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    pick(sel, 0, &rng, order);
    errors(sel, 0, 2);
    pick(sel, 60000, &rng, order); /* 2 -> 1 */
    assert_int_equal(order[0], 1);
    pick(sel, 120000, &rng, order); /* 1 -> 0 */
    assert_int_equal(order[0], 0);
    ferry_rsel_free(sel);
}

static void test_cap(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b"};
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt);
    opt.error_cap = 5;
    ferry_replica_selector *sel = NULL;
    ferry_err err = {0, ""};
    must(ferry_rsel_create(hosts, NULL, 2, &opt, &sel, &err), &err);
    errors(sel, 0, 10);
    assert_int_equal(error_count(sel, 0), 5);
    /* A capped count decays from the cap: after one half-life it is 2. */
    size_t order[2];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    pick(sel, 0, &rng, order);
    pick(sel, 60000, &rng, order);
    assert_int_equal(error_count(sel, 0), 2);
    /* max_tries is clamped to the cap. */
    assert_int_equal(ferry_rsel_max_tries(sel, 3), 3);
    assert_int_equal(ferry_rsel_max_tries(sel, 50), 5);
    ferry_rsel_free(sel);

    /* The default cap is 1000. */
    sel = make(hosts, 2, FERRY_LB_RANDOM, NULL);
    errors(sel, 1, 1500);
    assert_int_equal(error_count(sel, 1), 1000);
    ferry_rsel_free(sel);
}

static void test_ignored_errors(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b"};
    ferry_replica_selector *sel = make(hosts, 2, FERRY_LB_IN_ORDER, NULL);
    errors(sel, 0, 2);
    ferry_rsel_query q;
    ferry_rsel_query_default(&q);
    q.policy = FERRY_LB_IN_ORDER;
    size_t order[2];
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);

    q.max_ignored_errors = 1; /* 2 - 1 = 1 error still counts: b first */
    pick_q(sel, &q, 0, &rng, order);
    assert_int_equal(order[0], 1);
    q.max_ignored_errors = 2; /* both look clean: in_order again */
    pick_q(sel, &q, 0, &rng, order);
    assert_int_equal(order[0], 0);
    q.max_ignored_errors = 100; /* floored at 0, not wrapped */
    pick_q(sel, &q, 0, &rng, order);
    assert_int_equal(order[0], 0);
    /* The allowance is per query: the shared count is untouched. */
    assert_int_equal(error_count(sel, 0), 2);
    pick(sel, 0, &rng, order);
    assert_int_equal(order[0], 1);

    /* Both over the allowance: the difference still orders them. */
    errors(sel, 1, 1);
    q.max_ignored_errors = 1; /* effective 1 vs 0 */
    pick_q(sel, &q, 0, &rng, order);
    assert_int_equal(order[0], 1);
    ferry_rsel_free(sel);
}

static void test_success_and_in_flight_state(void **state)
{
    (void)state;
    const char *hosts[] = {"a", "b"};
    ferry_replica_selector *sel = make(hosts, 2, FERRY_LB_RANDOM, NULL);
    ferry_err err = {0, ""};
    errors(sel, 0, 3);
    must(ferry_rsel_report_success(sel, 0, &err), &err);
    must(ferry_rsel_begin(sel, 0, &err), &err);
    ferry_rsel_state st;
    must(ferry_rsel_get_state(sel, 0, &st, &err), &err);
    assert_int_equal(st.error_count, 3); /* success does not forgive errors */
    assert_int_equal(st.successes, 1);
    assert_int_equal(st.in_flight, 1);
    assert_int_equal(st.config_priority, 1);
    must(ferry_rsel_end(sel, 0, &err), &err);
    must(ferry_rsel_get_state(sel, 0, &st, &err), &err);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(ferry_rsel_get_state(sel, 9, &st, &err), FERRY_EINVAL);
    ferry_rsel_free(sel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_names),
        cmocka_unit_test(test_hostname_measures),
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_random_uniform),
        cmocka_unit_test(test_nearest_hostname),
        cmocka_unit_test(test_levenshtein),
        cmocka_unit_test(test_longest_common_prefix),
        cmocka_unit_test(test_longest_common_suffix),
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_first_or_random),
        cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_least_request),
        cmocka_unit_test(test_tie_breaks),
        cmocka_unit_test(test_failover_order),
        cmocka_unit_test(test_decay),
        cmocka_unit_test(test_error_order_recovers),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_ignored_errors),
        cmocka_unit_test(test_success_and_in_flight_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

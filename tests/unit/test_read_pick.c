/* Unit tests of per-query replica picking (include/ferry/read_pick.h): the order of a slice's
 * candidates per policy, error reports reaching every candidate list that names the server
 * (so later queries avoid it, until the half-life forgives it), least_request's in-flight
 * counts per server, and one query's failover: a failed server's unanswered slices move to their
 * next candidates, answered ones stay, and a slice with nothing left is reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/read_pick.h"

static const char *const names[] = {"node1", "node2", "node3", "node4"};

static ferry_rsets *make(ferry_lb policy)
{
    ferry_rsel_options o;
    ferry_rsel_options_default(&o);
    o.query.policy = policy;
    o.local_hostname = "node1";
    ferry_rsets *rs = NULL;
    ferry_err err = {0};
    int rc = ferry_rsets_new(names, 4, &o, &rs, &err);
    if (rc)
        fail_msg("ferry_rsets_new: %s", err.msg);
    return rs;
}

static void order(ferry_rsets *rs, const uint32_t *cand, size_t n, uint64_t now,
                  ferry_rsel_rng *rng, uint32_t *out)
{
    ferry_err err = {0};
    int rc = ferry_rsets_order(rs, cand, n, now, rng, out, &err);
    if (rc)
        fail_msg("ferry_rsets_order: %s", err.msg);
}

static void test_in_order_prefers_route_order(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_IN_ORDER);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    uint32_t a[] = {2, 0}, b[] = {0, 2}, out[2];
    for (int i = 0; i < 10; i++) {
        order(rs, a, 2, 1000, &rng, out);
        assert_int_equal(out[0], 2);
        assert_int_equal(out[1], 0);
        order(rs, b, 2, 1000, &rng, out);
        assert_int_equal(out[0], 0);
        assert_int_equal(out[1], 2);
    }
    assert_int_equal(ferry_rsets_count(rs), 2); /* one selector per candidate list */
    uint32_t one[] = {3};
    order(rs, one, 1, 1000, &rng, out);
    assert_int_equal(out[0], 3);
    assert_int_equal(ferry_rsets_count(rs), 2); /* a single candidate needs no selector */
    ferry_rsets_free(rs);
}

static void test_random_spreads_load(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_RANDOM);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 42);
    uint32_t c[] = {1, 3}, out[2];
    int first1 = 0;
    for (int i = 0; i < 10000; i++) {
        order(rs, c, 2, 1000, &rng, out);
        assert_true((out[0] == 1 && out[1] == 3) || (out[0] == 3 && out[1] == 1));
        first1 += out[0] == 1;
    }
    assert_in_range(first1, 4700, 5300);
    ferry_rsets_free(rs);
}

static void test_round_robin_alternates(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_ROUND_ROBIN);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 7);
    uint32_t c[] = {0, 1}, out[2], prev = 99;
    for (int i = 0; i < 8; i++) {
        order(rs, c, 2, 1000, &rng, out);
        assert_int_not_equal(out[0], prev);
        prev = out[0];
    }
    ferry_rsets_free(rs);
}

/* An error on node2 (index 1) reaches both lists that name it: every slice then avoids it,
 * whatever the policy, until a half-life has passed. */
static void test_errors_reach_every_list(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_RANDOM);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 3);
    uint32_t a[] = {0, 1}, b[] = {1, 2}, c[] = {2, 3}, out[2];
    order(rs, a, 2, 1000, &rng, out);
    order(rs, b, 2, 1000, &rng, out);
    order(rs, c, 2, 1000, &rng, out);
    ferry_rsets_error(rs, 1);
    for (int i = 0; i < 200; i++) {
        order(rs, a, 2, 2000, &rng, out);
        assert_int_equal(out[0], 0);
        assert_int_equal(out[1], 1);
        order(rs, b, 2, 2000, &rng, out);
        assert_int_equal(out[0], 2);
        assert_int_equal(out[1], 1);
    }
    assert_int_equal(ferry_rsets_errors(rs, 1), 1);
    assert_int_equal(ferry_rsets_errors(rs, 3), 0);
    /* a half-life (60 s) later the error is forgiven: node2 comes first again sometimes */
    int first = 0;
    for (int i = 0; i < 200; i++) {
        order(rs, a, 2, 1000 + 61000 + (uint64_t)i, &rng, out);
        first += out[0] == 1;
        order(rs, b, 2, 1000 + 61000 + (uint64_t)i, &rng, out); /* decayed when used */
    }
    assert_int_equal(ferry_rsets_errors(rs, 1), 0);
    assert_in_range(first, 60, 140);
    ferry_rsets_free(rs);
}

/* least_request: in-flight requests are counted per server across lists. */
static void test_least_request_counts_in_flight_per_server(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_LEAST_REQUEST);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 11);
    uint32_t a[] = {0, 1}, b[] = {1, 2}, out[2];
    order(rs, a, 2, 1000, &rng, out);
    order(rs, b, 2, 1000, &rng, out);
    ferry_rsets_begin(rs, 1); /* node2 busy: both lists must prefer the other server */
    for (int i = 0; i < 100; i++) {
        order(rs, a, 2, 1000, &rng, out);
        assert_int_equal(out[0], 0);
        order(rs, b, 2, 1000, &rng, out);
        assert_int_equal(out[0], 2);
    }
    ferry_rsets_end(rs, 1);
    int node2 = 0;
    for (int i = 0; i < 1000; i++) {
        order(rs, a, 2, 1000, &rng, out);
        node2 += out[0] == 1;
    }
    assert_in_range(node2, 400, 600);
    ferry_rsets_free(rs);
}

static void test_bad_lists_refused(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_RANDOM);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 1);
    uint32_t twice[] = {1, 1}, range[] = {0, 4}, out[2];
    ferry_err err = {0};
    assert_int_equal(ferry_rsets_order(rs, twice, 2, 0, &rng, out, &err), FERRY_EINVAL);
    assert_int_equal(ferry_rsets_order(rs, range, 2, 0, &rng, out, &err), FERRY_EINVAL);
    assert_int_equal(ferry_rsets_order(rs, range, 0, 0, &rng, out, &err), FERRY_EINVAL);
    ferry_rsets_free(rs);
}

/* ---- one query's assignment ----------------------------------------------------------------- */

static ferry_rpick *pick_with(size_t n_servers)
{
    ferry_rpick *p = NULL;
    assert_int_equal(ferry_rpick_new(n_servers, &p), FERRY_OK);
    return p;
}

/* Four slices on {0,1}, {1,0}, {1,2}, {2,3}: grouped 0 | 1,1 | 2. Server 1 fails: its two
 * slices move to 0 and 2; the answers of 0 and 2 stay; nothing is read twice. */
static void test_failover_moves_only_the_failed_servers_slices(void **state)
{
    (void)state;
    ferry_rpick *p = pick_with(4);
    uint32_t o0[] = {0, 1}, o1[] = {1, 0}, o2[] = {1, 2}, o3[] = {2, 3};
    size_t idx;
    assert_int_equal(ferry_rpick_add(p, o0, 2, &idx), 0);
    assert_int_equal(idx, 0);
    assert_int_equal(ferry_rpick_add(p, o1, 2, NULL), 0);
    assert_int_equal(ferry_rpick_add(p, o2, 2, NULL), 0);
    assert_int_equal(ferry_rpick_add(p, o3, 2, &idx), 0);
    assert_int_equal(idx, 3);
    assert_int_equal(ferry_rpick_count(p), 4);
    assert_int_equal(ferry_rpick_server(p, 0), 0);
    assert_int_equal(ferry_rpick_server(p, 1), 1);
    assert_int_equal(ferry_rpick_server(p, 2), 1);
    assert_int_equal(ferry_rpick_server(p, 3), 2);
    /* round 1: 0 and 2 answer, 1 fails */
    ferry_rpick_answered(p, 0);
    ferry_rpick_answered(p, 2);
    assert_true(ferry_rpick_pending(p, 1));
    assert_false(ferry_rpick_pending(p, 0));
    size_t lost = 99;
    assert_int_equal(ferry_rpick_fail(p, 1, &lost), FERRY_OK);
    assert_int_equal(lost, 99);
    assert_true(ferry_rpick_server_failed(p, 1));
    assert_int_equal(ferry_rpick_server(p, 1), 0);
    assert_int_equal(ferry_rpick_server(p, 2), 2);
    assert_false(ferry_rpick_is_answered(p, 1));
    assert_false(ferry_rpick_is_answered(p, 2));
    assert_true(ferry_rpick_is_answered(p, 0));
    assert_true(ferry_rpick_is_answered(p, 3));
    /* the retry round: server 0 gets only slice 1, server 2 only slice 2 */
    assert_true(ferry_rpick_pending(p, 0));
    assert_true(ferry_rpick_pending(p, 2));
    uint32_t tried[4];
    assert_int_equal(ferry_rpick_tried(p, 2, tried, 4), 2);
    assert_int_equal(tried[0], 1);
    assert_int_equal(tried[1], 2);
    ferry_rpick_answered(p, 0);
    ferry_rpick_answered(p, 2);
    for (size_t i = 0; i < 4; i++)
        assert_true(ferry_rpick_is_answered(p, i));
    /* a failure after answering moves nothing */
    assert_int_equal(ferry_rpick_fail(p, 0, NULL), FERRY_OK);
    assert_int_equal(ferry_rpick_server(p, 0), 0);
    ferry_rpick_free(p);
}

/* Two servers fail in the same round: a slice moved to the second one moves on again, and one
 * whose every candidate failed is reported with the candidates tried. */
static void test_failover_skips_failed_and_reports_exhausted(void **state)
{
    (void)state;
    ferry_rpick *p = pick_with(3);
    uint32_t o0[] = {0, 1, 2}, o1[] = {1, 0};
    assert_int_equal(ferry_rpick_add(p, o0, 3, NULL), 0);
    assert_int_equal(ferry_rpick_add(p, o1, 2, NULL), 0);
    assert_int_equal(ferry_rpick_fail(p, 0, NULL), FERRY_OK);
    assert_int_equal(ferry_rpick_server(p, 0), 1);
    size_t lost = 99;
    assert_int_equal(ferry_rpick_fail(p, 1, &lost), FERRY_ENOTFOUND);
    assert_int_equal(lost, 1);
    assert_int_equal(ferry_rpick_server(p, 0), 2);
    assert_int_equal(ferry_rpick_server(p, 1), FERRY_RPICK_NONE);
    uint32_t tried[4];
    assert_int_equal(ferry_rpick_tried(p, 1, tried, 4), 2);
    assert_int_equal(tried[0], 1);
    assert_int_equal(tried[1], 0);
    /* a slice added after a failure starts at its first live candidate */
    uint32_t o2[] = {1, 0, 2};
    size_t idx;
    assert_int_equal(ferry_rpick_add(p, o2, 3, &idx), 0);
    assert_int_equal(ferry_rpick_server(p, idx), 2);
    assert_int_equal(ferry_rpick_add(p, o2, 0, NULL), FERRY_EINVAL);
    uint32_t bad[] = {3};
    assert_int_equal(ferry_rpick_add(p, bad, 1, NULL), FERRY_EINVAL);
    ferry_rpick_free(p);
}

/* The orders come from the selectors: after an error on server 1 a new query's picks avoid it
 * from the start, and its failover order is the selectors' order. */
static void test_orders_feed_the_pick(void **state)
{
    (void)state;
    ferry_rsets *rs = make(FERRY_LB_IN_ORDER);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 5);
    uint32_t c[] = {1, 0, 2}, out[3];
    order(rs, c, 3, 1000, &rng, out);
    assert_int_equal(out[0], 1);
    ferry_rsets_error(rs, 1);
    order(rs, c, 3, 1000, &rng, out);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 1);
    ferry_rpick *p = pick_with(3);
    assert_int_equal(ferry_rpick_add(p, out, 3, NULL), 0);
    assert_int_equal(ferry_rpick_server(p, 0), 0);
    assert_int_equal(ferry_rpick_fail(p, 0, NULL), 0);
    assert_int_equal(ferry_rpick_server(p, 0), 2);
    ferry_rpick_free(p);
    ferry_rsets_free(rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_prefers_route_order),
        cmocka_unit_test(test_random_spreads_load),
        cmocka_unit_test(test_round_robin_alternates),
        cmocka_unit_test(test_errors_reach_every_list),
        cmocka_unit_test(test_least_request_counts_in_flight_per_server),
        cmocka_unit_test(test_bad_lists_refused),
        cmocka_unit_test(test_failover_moves_only_the_failed_servers_slices),
        cmocka_unit_test(test_failover_skips_failed_and_reports_exhausted),
        cmocka_unit_test(test_orders_feed_the_pick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

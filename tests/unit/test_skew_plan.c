/* The rebalance plan with a skew (ferry_rebalance_plan_compute_skew on a SQLite catalog in a
 * temporary directory; no server is contacted): four shards of 100,000 bytes, one holding 30 of
 * 40 equal slices (fill 0.6 against 0.07 for the others). A skew above the spread plans nothing;
 * a skew of 0.2 places by a fill target of the mean fill (0.2) plus 0.1, so only the full shard
 * gives slices, until it is under 0.3, to the shards below the mean, the least filled first;
 * applied, the spread is under the skew, and neither a second plan with the skew nor one without
 * moves anything more. The same with rf 2, through the replica steps (test_skew_evens_replicas). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "plan_fixture.h"
#include "shards_text.h"

#include "ferry/catalog.h"
#include "ferry/move.h"

#define N_SHARDS 4
#define N_TENANTS 40
#define SLICE_BYTES 2000
#define CAPACITY 100000

static char dir[256];
static const char *const names[N_SHARDS] = {"s1", "s2", "s3", "s4"};

/* tenant i's shard: the first 30 on s1, the rest spread over the other three */
static size_t home(size_t i)
{
    return i < 30 ? 0 : 1 + i % 3;
}

static ferry_catalog *setup(void)
{
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/c.db", dir);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_OK);
    ferry_batch *b = ferry_batch_new();
    pf_settings(b, 1);
    for (size_t s = 0; s < N_SHARDS; s++)
        pf_shard(b, names[s], NULL, CAPACITY);
    for (size_t i = 0; i < N_TENANTS; i++) {
        char t[8];
        snprintf(t, sizeof t, "t%02zu", i);
        pf_tenant(b, t, 0, SLICE_BYTES, names[home(i)]);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    return c;
}

/* The routing table's fill per shard (tenants t00.. of nt, shards names[0..ns)), its spread,
 * and (*distinct, may be NULL) whether every route lists distinct shards. */
static double route_fills(ferry_catalog *c, const char *const *sn, size_t ns, size_t nt,
                          double *fill, bool *distinct)
{
    ferry_err err = {0};
    double lo = 1e9, hi = -1;
    bool d = true;
    for (size_t s = 0; s < ns; s++)
        fill[s] = 0;
    for (size_t i = 0; i < nt; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "t%02zu", i);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        for (uint32_t k = 0; k < r.u.route.shards.n; k++) {
            fill[pf_index(sn, ns, r.u.route.shards.name[k])] += (double)SLICE_BYTES / CAPACITY;
            for (uint32_t j = 0; j < k; j++)
                d = d && strcmp(r.u.route.shards.name[j], r.u.route.shards.name[k]);
        }
    }
    for (size_t s = 0; s < ns; s++) {
        lo = fill[s] < lo ? fill[s] : lo;
        hi = fill[s] > hi ? fill[s] : hi;
    }
    if (distinct)
        *distinct = d;
    return hi - lo;
}

static double fills(ferry_catalog *c, double *fill)
{
    return route_fills(c, names, N_SHARDS, N_TENANTS, fill, NULL);
}

static void apply(ferry_catalog *c, const ferry_rebalance_plan *p)
{
    ferry_err err = {0};
    for (size_t i = 0; i < p->n_moves; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", p->moves[i].tenant);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        shards_printf(&r.u.route.shards, "%s", p->moves[i].to);
        assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    }
}

/* Neither a plan with the skew nor one without moves anything (the moved slices stay). */
static void assert_stable(ferry_catalog *c)
{
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute_skew(c, 0.2, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
}

static void test_skew_evens_the_fullest_shard(void **state)
{
    (void)state;
    ferry_catalog *c = setup();
    ferry_rebalance_plan p;
    ferry_err err = {0};
    double fill[N_SHARDS];
    double before = fills(c, fill);
    assert_true(before > 0.5);

    /* without a skew, or with one above the spread: nothing (every shard is under 0.85) */
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    assert_false(p.evened);
    assert_true(p.fill == 0.85);
    ferry_rebalance_plan_free(&p);
    assert_int_equal(ferry_rebalance_plan_compute_skew(c, 0.6, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    assert_false(p.evened);
    assert_true(p.spread > 0.5 && p.spread < 0.6);
    ferry_rebalance_plan_free(&p);

    /* skew 0.2: placed by 0.2 + 0.1; s1 (0.6) gives 15 slices, the others stay under 0.3 */
    assert_int_equal(ferry_rebalance_plan_compute_skew(c, 0.2, &p, &err), FERRY_OK);
    assert_true(p.evened);
    assert_true(p.fill > 0.2999 && p.fill < 0.3001);
    assert_int_equal(p.n_moves, 15);
    for (size_t i = 0; i < p.n_moves; i++) {
        assert_int_equal(p.moves[i].kind, FERRY_PLAN_MOVE);
        assert_string_equal(p.moves[i].from, "s1");
    }
    apply(c, &p);
    ferry_rebalance_plan_free(&p);
    double after = fills(c, fill);
    for (size_t s = 0; s < N_SHARDS; s++)
        assert_true(fill[s] <= 0.3 + 1e-9);
    /* the slices moved filled the three emptiest evenly: the spread is under the skew now */
    assert_true(after <= 0.2);
    assert_true(fill[1] > 0.14 && fill[2] > 0.14 && fill[3] > 0.14);

    /* stable: the moved slices stay, with or without the skew */
    assert_stable(c);
    ferry_catalog_close(c);
}

/* rf 2: five shards; 25 slices have a replica on s1 (fill 0.5), the others hold 0.16-0.18.
 * The mean is 0.24, so the skew 0.2 places by 0.34: s1's replicas move (the replica steps'
 * evening, mv_zones_even) to shards below the mean that do not hold the slice, until s1 is
 * under 0.34; none of them goes above it; every slice keeps two replicas on distinct shards;
 * the spread is under the skew, and the next plan moves nothing. */
#define RF2_SHARDS 5
#define RF2_TENANTS 30
static const char *const rf2_names[RF2_SHARDS] = {"s1", "s2", "s3", "s4", "s5"};

static void rf2_route(size_t i, size_t *a, size_t *b)
{
    if (i < 25) {
        *a = 0, *b = 1 + i % 4;
    } else {
        *a = 1 + i % 4, *b = 1 + (i + 1) % 4;
    }
}

static double rf2_fills(ferry_catalog *c, double *fill, bool *distinct)
{
    return route_fills(c, rf2_names, RF2_SHARDS, RF2_TENANTS, fill, distinct);
}

static void test_skew_evens_replicas(void **state)
{
    (void)state;
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/rf2.db", dir);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_OK);
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    pf_settings(b, 2);
    for (size_t s = 0; s < RF2_SHARDS; s++)
        pf_shard(b, rf2_names[s], NULL, CAPACITY);
    for (size_t i = 0; i < RF2_TENANTS; i++) {
        size_t x, y;
        char t[8], list[16];
        rf2_route(i, &x, &y);
        snprintf(t, sizeof t, "t%02zu", i);
        snprintf(list, sizeof list, "%s,%s", rf2_names[x], rf2_names[y]);
        pf_tenant(b, t, 0, SLICE_BYTES, list);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);

    double fill[RF2_SHARDS];
    bool distinct;
    assert_true(rf2_fills(c, fill, &distinct) > 0.3);
    ferry_rebalance_plan p;
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0); /* no skew: every shard is under 0.85 */
    ferry_rebalance_plan_free(&p);

    assert_int_equal(ferry_rebalance_plan_compute_skew(c, 0.2, &p, &err), FERRY_OK);
    assert_true(p.evened);
    assert_true(p.fill > 0.3399 && p.fill < 0.3401);
    assert_true(p.n_moves >= 8 && p.n_moves <= 9);
    for (size_t i = 0; i < p.n_moves; i++) {
        assert_int_equal(p.moves[i].kind, FERRY_PLAN_MOVE);
        assert_string_equal(p.moves[i].from, "s1");
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", p.moves[i].tenant);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        assert_string_equal(r.u.route.shards.name[0], "s1");
        char other[FERRY_NAME_MAX];
        snprintf(other, sizeof other, "%s", r.u.route.shards.name[1]);
        assert_string_not_equal(p.moves[i].to, other); /* not to the shard holding the other */
        shards_printf(&r.u.route.shards, "%s,%s", p.moves[i].to, other);
        assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    }
    ferry_rebalance_plan_free(&p);
    double after = rf2_fills(c, fill, &distinct), total = 0;
    assert_true(distinct);
    for (size_t s = 0; s < RF2_SHARDS; s++)
        total += fill[s];
    assert_true(total > 1.1999 && total < 1.2001); /* 30 slices, two replicas each */
    for (size_t s = 0; s < RF2_SHARDS; s++)
        assert_true(fill[s] <= 0.34 + 1e-9);
    assert_true(after <= 0.2);

    assert_stable(c);
    ferry_catalog_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skew_evens_the_fullest_shard),
        cmocka_unit_test(test_skew_evens_replicas),
    };
    return pf_run("skew_plan", tests, sizeof tests / sizeof tests[0], dir, sizeof dir);
}

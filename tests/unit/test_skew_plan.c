/* The rebalance plan with a skew (ferry_rebalance_plan_compute_skew on a SQLite catalog in a
 * temporary directory; no server is contacted): four shards of 100,000 bytes, one holding 30 of
 * 40 equal slices (fill 0.6 against 0.07 for the others). A skew above the spread plans nothing;
 * a skew of 0.2 places by a fill target of the mean fill (0.2) plus 0.1, so only the full shard
 * gives slices, until it is under 0.3, to the shards below the mean, the least filled first;
 * applied, the spread is under the skew, and neither a second plan with the skew nor one without
 * moves anything more. */
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
    ferry_record r;
    pf_settings(b, 1);
    for (size_t s = 0; s < N_SHARDS; s++)
        pf_shard(b, names[s], NULL, CAPACITY);
    for (size_t i = 0; i < N_TENANTS; i++) {
        ferry_record_init(&r, FERRY_REC_TENANT);
        snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "t%02zu", i);
        r.u.tenant.splits = 1;
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
        ferry_record_init(&r, FERRY_REC_SLICE);
        snprintf(r.u.slice.tenant, sizeof r.u.slice.tenant, "t%02zu", i);
        r.u.slice.bytes = SLICE_BYTES;
        shards_printf(&r.u.slice.placement, "%s", names[home(i)]);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "t%02zu", i);
        shards_printf(&r.u.route.shards, "%s", names[home(i)]);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    return c;
}

static size_t shard_index(const char *name)
{
    return pf_index(names, N_SHARDS, name);
}

/* The routing table's fill per shard, and its spread. */
static double fills(ferry_catalog *c, double *fill)
{
    ferry_err err = {0};
    double lo = 1e9, hi = -1;
    for (size_t s = 0; s < N_SHARDS; s++)
        fill[s] = 0;
    for (size_t i = 0; i < N_TENANTS; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "t%02zu", i);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        char text[FERRY_SHARDS_TEXT_MAX];
        ferry_shard_set_format(&r.u.route.shards, text, sizeof text);
        fill[shard_index(text)] += (double)SLICE_BYTES / CAPACITY;
    }
    for (size_t s = 0; s < N_SHARDS; s++) {
        lo = fill[s] < lo ? fill[s] : lo;
        hi = fill[s] > hi ? fill[s] : hi;
    }
    return hi - lo;
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
    assert_int_equal(ferry_rebalance_plan_compute_skew(c, 0.2, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skew_evens_the_fullest_shard),
    };
    return pf_run("skew_plan", tests, sizeof tests / sizeof tests[0], dir, sizeof dir);
}

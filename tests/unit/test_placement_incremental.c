/* Unit tests of placement's incremental paths against the full computation, on random inputs
 * with fixed seeds (weights, capacities that bind or not, rf 1..3, zones, tenants of 1..40
 * splits, strict and not):
 *  - ferry_pl_place_more (new slices placed around the existing ones) gives what ferry_pl_place of
 *    everything gives, both over the whole inventory and over one tenant's slices with the
 *    other tenants' bytes as base loads;
 *  - ferry_pl_rebalance (a slice's candidates scored only when one of its replicas needs a home)
 *    gives the layout of the full computation that scores every pair first (pl_rebalance with
 *    score_all), when a shard is added, drained, two are added, a weight changes; and it scores
 *    O(slices x rf) pairs when a shard is added, O(replicas on it x shards) when one drains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/placement.h"
#include "placement/placement_int.h"

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

#define MAX_SHARDS 24

/* A random cluster: shard i is "sh<i>"; skip (>= 0) leaves that shard out. */
typedef struct cspec {
    int n;
    double weight[MAX_SHARDS];
    uint64_t cap[MAX_SHARDS];
    int zone[MAX_SHARDS]; /* -1: none */
} cspec;

static void random_cspec(cspec *c, int n, bool zoned, bool weights, uint64_t cap)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->weight[i] = weights ? 0.5 + (double)(rnd() % 8) * 0.25 : 1.0;
        c->cap[i] = cap ? cap / 2 + rnd() % cap : 0;
        c->zone[i] = zoned ? (rnd() % 8 == 0 ? -1 : (int)(rnd() % 3)) : -1;
    }
}

static void build_cluster(ferry_pl_cluster *cl, const cspec *c, int skip)
{
    ferry_err err = {0, ""};
    must(ferry_pl_cluster_init(cl, "shards", &err), &err);
    for (int i = 0; i < c->n; i++) {
        if (i == skip)
            continue;
        char name[16], zone[16];
        snprintf(name, sizeof name, "sh%02d", i);
        snprintf(zone, sizeof zone, "z%d", c->zone[i]);
        must(ferry_pl_cluster_add_zoned(cl, name, c->weight[i], c->cap[i],
                                        c->zone[i] >= 0 ? zone : NULL, 0, &err),
             &err);
    }
    must(ferry_pl_cluster_finish(cl, &err), &err);
}

/* One slice of a random inventory; is_new marks the slices an incremental run places. */
typedef struct row {
    char tenant[16];
    uint32_t split;
    uint64_t bytes;
    bool is_new;
} row;

/* Random tenants (1..40 splits, some empty slices); then new slices: new top splits (0 bytes)
 * for some tenants, and brand-new tenants (0 bytes). Returns the row count. */
static size_t random_rows(row *rows, size_t cap, int tenants)
{
    size_t n = 0;
    for (int t = 0; t < tenants && n < cap; t++) {
        uint64_t r = rnd() % 20;
        uint32_t splits = r < 10 ? 1 : r < 15 ? 2 : r < 18 ? 4 : r < 19 ? 9 : 40;
        uint32_t more = rnd() % 4 == 0 ? 1 + (uint32_t)(rnd() % 3) : 0;
        bool brand_new = rnd() % 6 == 0;
        for (uint32_t k = 0; k < splits + more && n < cap; k++, n++) {
            snprintf(rows[n].tenant, sizeof rows[n].tenant, "t%03d", t);
            rows[n].split = k;
            rows[n].is_new = brand_new || k >= splits;
            rows[n].bytes = rows[n].is_new || rnd() % 10 == 0 ? 0 : 1000 + rnd() % 1000000;
        }
    }
    return n;
}

static void build_inventory(ferry_pl_inventory *inv, const row *rows, size_t n, const char *only)
{
    ferry_err err = {0, ""};
    must(ferry_pl_inventory_init(inv, "slices", &err), &err);
    for (size_t i = 0; i < n; i++)
        if (!only || !strcmp(rows[i].tenant, only))
            must(ferry_pl_inventory_add(inv, rows[i].tenant, rows[i].split, rows[i].bytes, 0, &err),
                 &err);
    must(ferry_pl_inventory_finish(inv, &err), &err);
}

/* Whether inventory slice i is a new one. */
static bool slice_is_new(const row *rows, size_t n, const ferry_pl_slice *s)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].split == s->split && !strcmp(rows[i].tenant, s->tenant))
            return rows[i].is_new;
    fail_msg("slice %s/%u not in the rows", s->tenant, s->split);
    return false;
}

/* ferry_pl_place_more over the whole inventory and per tenant equals ferry_pl_place of everything.
 */
static void test_place_more_matches_full(void **state)
{
    (void)state;
    ferry_err err = {0, ""};
    static row rows[4000];
    for (int round = 0; round < 48; round++) {
        rng_state = 0x5CA1E + (uint64_t)round * 104729;
        size_t n = random_rows(rows, sizeof rows / sizeof rows[0], 60 + (int)(rnd() % 60));
        ferry_pl_inventory inv;
        build_inventory(&inv, rows, n, NULL);
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += rows[i].bytes;
        ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
        o.hash = round % 2 ? FERRY_HASH_XXH3 : FERRY_HASH_SHA256;
        o.rf = 1 + (unsigned)(round % 3);
        o.strict = false;
        int nshards = 3 + (int)(rnd() % 14);
        /* capacity: none, roomy, or tight enough that shards end up full */
        int capmode = (round / 3) % 3;
        uint64_t cap = capmode == 0 ? 0
                                    : total * o.rf / (uint64_t)nshards * (capmode == 1 ? 3 : 1);
        cspec cs;
        random_cspec(&cs, nshards, round % 4 >= 2, round % 5 != 0, cap);
        ferry_pl_cluster cl;
        build_cluster(&cl, &cs, -1);
        if (o.rf > cl.n)
            o.rf = (unsigned)cl.n;

        ferry_pl_layout full, more;
        must(ferry_pl_place(&inv, &cl, &o, &full, &err), &err);
        uint32_t *fixed = malloc(inv.n * o.rf * sizeof *fixed);
        size_t n_new = 0;
        for (size_t i = 0; i < inv.n; i++) {
            bool nw = slice_is_new(rows, n, &inv.slices[i]);
            n_new += nw;
            for (unsigned j = 0; j < o.rf; j++)
                fixed[i * o.rf + j] = nw ? FERRY_PL_NO_SHARD : full.replicas[i * o.rf + j];
        }
        assert_true(n_new > 0);
        must(ferry_pl_place_more(&inv, &cl, &o, fixed, NULL, &more, &err), &err);
        for (size_t i = 0; i < inv.n * o.rf; i++)
            if (more.replicas[i] != full.replicas[i])
                fail_msg("round %d: slice %s/%u slot %zu: incremental %u, full %u", round,
                         inv.slices[i / o.rf].tenant, inv.slices[i / o.rf].split, i % o.rf,
                         more.replicas[i], full.replicas[i]);
        for (size_t s = 0; s < cl.n; s++)
            assert_int_equal(more.shard_bytes[s], full.shard_bytes[s]);
        /* only the new slices were scored: their candidates, and a full ranking per replica
         * when the candidates run out (full shards, spread, zones) */
        assert_true(more.scored <= n_new * (o.rf + 1) * cl.n);
        assert_true(full.scored >= inv.n * cl.n);

        /* Per tenant: only its slices, the others' bytes as base loads. */
        for (size_t t = 0; t < inv.n_tenants; t++) {
            const ferry_pl_slice *first = &inv.slices[inv.tenant_first[t]];
            ferry_pl_inventory ti;
            build_inventory(&ti, rows, n, first->tenant);
            uint64_t *base = calloc(cl.n, sizeof *base);
            uint32_t *tf = malloc(ti.n * o.rf * sizeof *tf);
            bool any_new = false;
            for (size_t s = 0; s < cl.n; s++)
                base[s] = full.shard_bytes[s];
            for (size_t k = 0; k < ti.n; k++) {
                size_t i = inv.tenant_first[t] + k;
                bool nw = slice_is_new(rows, n, &inv.slices[i]);
                any_new |= nw;
                for (unsigned j = 0; j < o.rf; j++) {
                    uint32_t s = full.replicas[i * o.rf + j];
                    base[s] -= inv.slices[i].bytes;
                    tf[k * o.rf + j] = nw ? FERRY_PL_NO_SHARD : s;
                }
            }
            if (any_new) {
                ferry_pl_layout tl;
                must(ferry_pl_place_more(&ti, &cl, &o, tf, base, &tl, &err), &err);
                for (size_t k = 0; k < ti.n * o.rf; k++)
                    if (tl.replicas[k] != full.replicas[inv.tenant_first[t] * o.rf + k])
                        fail_msg("round %d: tenant %s alone: slot %zu differs", round,
                                 first->tenant, k);
                for (size_t s = 0; s < cl.n; s++)
                    assert_int_equal(tl.shard_bytes[s], full.shard_bytes[s]);
                ferry_pl_layout_free(&tl);
            }
            free(base);
            free(tf);
            ferry_pl_inventory_free(&ti);
        }
        free(fixed);
        ferry_pl_layout_free(&full);
        ferry_pl_layout_free(&more);
        ferry_pl_cluster_free(&cl);
        ferry_pl_inventory_free(&inv);
    }
}

/* Kept replicas are checked: a shard index out of range or two replicas on one shard. */
static void test_place_more_rejects_bad_fixed(void **state)
{
    (void)state;
    ferry_err err = {0, ""};
    row rows[2] = {{"a", 0, 10, false}, {"a", 1, 0, true}};
    ferry_pl_inventory inv;
    build_inventory(&inv, rows, 2, NULL);
    cspec cs;
    rng_state = 7;
    random_cspec(&cs, 4, false, false, 0);
    ferry_pl_cluster cl;
    build_cluster(&cl, &cs, -1);
    ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
    o.rf = 2;
    ferry_pl_layout l;
    uint32_t out_of_range[4] = {0, 9, FERRY_PL_NO_SHARD, FERRY_PL_NO_SHARD};
    assert_int_equal(ferry_pl_place_more(&inv, &cl, &o, out_of_range, NULL, &l, &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "a/split0"));
    uint32_t twice[4] = {1, 1, FERRY_PL_NO_SHARD, FERRY_PL_NO_SHARD};
    assert_int_equal(ferry_pl_place_more(&inv, &cl, &o, twice, NULL, &l, &err), FERRY_EINVAL);
    /* a partly placed slice keeps its replica and its empty slot */
    uint32_t partial[4] = {2, FERRY_PL_NO_SHARD, FERRY_PL_NO_SHARD, FERRY_PL_NO_SHARD};
    must(ferry_pl_place_more(&inv, &cl, &o, partial, NULL, &l, &err), &err);
    assert_int_equal(l.replicas[0], 2);
    assert_int_equal(l.replicas[1], FERRY_PL_NO_SHARD);
    assert_true(l.replicas[2] < 4 && l.replicas[3] < 4 && l.replicas[2] != l.replicas[3]);
    ferry_pl_layout_free(&l);
    ferry_pl_cluster_free(&cl);
    ferry_pl_inventory_free(&inv);
}

static void expect_same_layout(const ferry_pl_layout *a, const ferry_pl_layout *b, const char *what,
                               int round)
{
    assert_int_equal(a->rf, b->rf);
    for (size_t i = 0; i < a->inv->n * a->rf; i++)
        if (a->replicas[i] != b->replicas[i])
            fail_msg("round %d, %s: slice %zu slot %zu: incremental %u, full %u", round, what,
                     i / a->rf, i % a->rf, a->replicas[i], b->replicas[i]);
    for (size_t s = 0; s < a->cluster->n; s++) {
        assert_int_equal(a->shard_bytes[s], b->shard_bytes[s]);
        assert_int_equal(a->shard_replicas[s], b->shard_replicas[s]);
    }
    assert_int_equal(a->overfilled, b->overfilled);
    assert_int_equal(a->spread_relaxed, b->spread_relaxed);
    assert_int_equal(a->zone_relaxed, b->zone_relaxed);
}

/* ferry_pl_rebalance equals the full computation for every kind of change, and scores little;
 * rounds of tenants from min_tenants to min_tenants + 79. With at least 2,048 slices (what
 * takes two threads) it also rebalances on two threads, which must give the same; returns how
 * many changes did. */
static int rebalance_rounds(int rounds, int min_tenants)
{
    ferry_err err = {0, ""};
    static row rows[12000];
    int threaded = 0; /* changes also rebalanced on two threads */
    for (int round = 0; round < rounds; round++) {
        rng_state = 0xADD5 + (uint64_t)round * 7919 + (uint64_t)min_tenants;
        size_t n = random_rows(rows, sizeof rows / sizeof rows[0], min_tenants + (int)(rnd() % 80));
        for (size_t i = 0; i < n; i++)
            rows[i].bytes = rows[i].bytes ? rows[i].bytes : 1000 + rnd() % 1000000;
        ferry_pl_inventory inv;
        build_inventory(&inv, rows, n, NULL);
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += rows[i].bytes;
        ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
        o.hash = round % 2 ? FERRY_HASH_XXH3 : FERRY_HASH_SHA256;
        o.rf = 1 + (unsigned)(round % 3);
        o.strict = false;
        int nshards = 4 + (int)(rnd() % (MAX_SHARDS - 6));
        int capmode = (round / 3) % 3;
        uint64_t cap = capmode == 0 ? 0
                       : total * o.rf / (uint64_t)nshards * (capmode == 1 ? 3 : 1);
        bool zoned = round % 4 >= 2;
        cspec cs;
        random_cspec(&cs, nshards + 2, zoned, round % 5 != 0, cap);
        /* old: shards 0..nshards-1 (the last two of cs are the ones added) */
        cspec old_spec = cs;
        old_spec.n = nshards;
        ferry_pl_cluster oldc;
        build_cluster(&oldc, &old_spec, -1);
        ferry_pl_layout old;
        must(ferry_pl_place(&inv, &oldc, &o, &old, &err), &err);

        for (int change = 0; change < 4; change++) {
            cspec ns = cs;
            int skip = -1;
            const char *what;
            if (change == 0) { /* one shard added */
                ns.n = nshards + 1;
                what = "add one";
            } else if (change == 1) { /* two added */
                what = "add two";
            } else if (change == 2) { /* one drained */
                ns.n = nshards;
                skip = (int)(rnd() % (uint64_t)nshards);
                what = "drain one";
            } else { /* a weight changed, one way or the other */
                ns.n = nshards;
                int k = (int)(rnd() % (uint64_t)nshards);
                ns.weight[k] = rnd() % 2 ? ns.weight[k] * 2 : ns.weight[k] / 2;
                what = "weight";
            }
            ferry_pl_cluster newc;
            build_cluster(&newc, &ns, skip);
            ferry_pl_layout inc, full;
            must(ferry_pl_rebalance(&inv, &oldc, &old, &newc, &o, &inc, &err), &err);
            must(pl_rebalance(&inv, &oldc, &old, &newc, &o, true, &full, &err), &err);
            expect_same_layout(&inc, &full, what, round);
            if (inv.n >= 2048) {
                /* the flip scan on two threads (1,024 slices a thread at least): the same */
                ferry_pl_opts o2 = o;
                o2.threads = 2;
                ferry_pl_layout two;
                must(ferry_pl_rebalance(&inv, &oldc, &old, &newc, &o2, &two, &err), &err);
                expect_same_layout(&two, &full, what, round);
                assert_int_equal(two.scored, inc.scored);
                ferry_pl_layout_free(&two);
                threaded++;
            }
            assert_true(full.scored >= inv.n * newc.n);
            if (change == 0 && capmode == 0) {
                /* per slice, to find those whose preference flipped: its replicas' shards and
                 * the new shard (2 rf), as many again for those; no candidate lists */
                assert_true(inc.scored <= inv.n * 4 * o.rf);
                assert_true(newc.n <= 4 * o.rf || inc.scored < inv.n * newc.n);
            }
            if (change == 2 && capmode == 0) {
                size_t on_drained = 0;
                for (size_t i = 0; i < inv.n * o.rf; i++)
                    on_drained += old.replicas[i] == (uint32_t)skip;
                /* only their slices' candidates (and a full ranking when those run out) */
                assert_true(inc.scored <= on_drained * 2 * newc.n + inv.n * o.rf);
            }
            ferry_pl_layout_free(&inc);
            ferry_pl_layout_free(&full);
            ferry_pl_cluster_free(&newc);
        }
        ferry_pl_layout_free(&old);
        ferry_pl_cluster_free(&oldc);
        ferry_pl_inventory_free(&inv);
    }
    return threaded;
}

static void test_rebalance_matches_full(void **state)
{
    (void)state;
    rebalance_rounds(60, 50);
}

/* The same at about 3,000-4,000 slices: the flip scan on two threads gives the same layouts. */
static void test_rebalance_threads_match(void **state)
{
    (void)state;
    assert_int_equal(rebalance_rounds(6, 700), 6 * 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place_more_matches_full),
        cmocka_unit_test(test_place_more_rejects_bad_fixed),
        cmocka_unit_test(test_rebalance_matches_full),
        cmocka_unit_test(test_rebalance_threads_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

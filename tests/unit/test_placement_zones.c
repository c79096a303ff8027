/* Unit tests of zones in placement: parsing, the zone rule in ferry_pl_place and ferry_pl_rebalance
 * (property tests over random clusters and tenants with fixed seeds: distinct shards, replicas
 * spread over zones as evenly as possible, determinism, capacity respected, minimal movement
 * when a shard is added, zone repair when zones appear), and the pick / repair functions the
 * catalog's rebalance uses for clone, move-off and repair steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/placement.h"

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

/* A random cluster description: shard i is "s<i>" in zone zone[i] (-1: no zone). */
typedef struct spec {
    int n;
    int zone[16];
    double weight[16];
    uint64_t cap[16];
} spec;

static void build(ferry_pl_cluster *c, const spec *sp, int n, bool with_zones, bool reverse)
{
    ferry_err err = {0, ""};
    must(ferry_pl_cluster_init(c, "zones", &err), &err);
    for (int k = 0; k < n; k++) {
        int i = reverse ? n - 1 - k : k;
        char name[16], zone[16];
        snprintf(name, sizeof name, "s%02d", i);
        snprintf(zone, sizeof zone, "z%d", sp->zone[i]);
        must(ferry_pl_cluster_add_zoned(c, name, sp->weight[i], sp->cap[i],
                                        with_zones && sp->zone[i] >= 0 ? zone : NULL, 0, &err),
             &err);
    }
    must(ferry_pl_cluster_finish(c, &err), &err);
}

static void random_spec(spec *sp, int n, int zones)
{
    memset(sp, 0, sizeof *sp);
    sp->n = n;
    for (int i = 0; i < n; i++) {
        sp->zone[i] = rnd() % 10 == 0 ? -1 : (int)(rnd() % (uint64_t)zones);
        sp->weight[i] = 0.5 + (double)(rnd() % 6) * 0.5;
    }
}

static void random_inventory(ferry_pl_inventory *inv, int tenants, bool reverse)
{
    ferry_err err = {0, ""};
    must(ferry_pl_inventory_init(inv, "slices", &err), &err);
    /* the same slices whatever the order: draw them first */
    int splits[64];
    uint64_t bytes[64][4];
    for (int t = 0; t < tenants; t++) {
        splits[t] = 1 + (int)(rnd() % 4);
        for (int k = 0; k < splits[t]; k++)
            bytes[t][k] = 1000 + rnd() % 100000;
    }
    for (int q = 0; q < tenants; q++) {
        int t = reverse ? tenants - 1 - q : q;
        char name[16];
        snprintf(name, sizeof name, "t%d", t);
        for (int k = 0; k < splits[t]; k++)
            must(ferry_pl_inventory_add(inv, name, (uint32_t)k, bytes[t][k], 0, &err), &err);
    }
    must(ferry_pl_inventory_finish(inv, &err), &err);
}

/* Checks slice i of l: distinct shards, and (when even) the zones as evenly spread as the
 * cluster allows: no zone with a free shard holds two fewer replicas than another zone. */
static bool slice_even(const ferry_pl_layout *l, size_t i)
{
    const ferry_pl_cluster *c = l->cluster;
    uint32_t count[16] = {0};
    bool held[16] = {false};
    for (unsigned j = 0; j < l->rf; j++) {
        uint32_t s = l->replicas[i * l->rf + j];
        assert_true(s < c->n);
        assert_false(held[s]); /* distinct shards, always */
        held[s] = true;
        count[c->shards[s].zone_id]++;
    }
    uint32_t maxc = 0, level = UINT32_MAX;
    for (size_t s = 0; s < c->n; s++) {
        uint32_t z = c->shards[s].zone_id;
        if (count[z] > maxc)
            maxc = count[z];
        if (!held[s] && count[z] < level)
            level = count[z];
    }
    return level == UINT32_MAX || maxc <= level + 1;
}

static bool same_layout(const ferry_pl_layout *a, const ferry_pl_layout *b)
{
    if (a->rf != b->rf || a->inv->n != b->inv->n)
        return false;
    for (size_t i = 0; i < a->inv->n; i++) {
        /* compare as sets of names (clusters may be different objects) */
        for (unsigned j = 0; j < a->rf; j++) {
            const char *n = a->cluster->shards[a->replicas[i * a->rf + j]].name;
            bool found = false;
            for (unsigned k = 0; k < b->rf; k++)
                found |= !strcmp(n, b->cluster->shards[b->replicas[i * b->rf + k]].name);
            if (!found)
                return false;
        }
    }
    return true;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_parse_zones(void **state)
{
    (void)state;
    ferry_pl_cluster c;
    ferry_err err = {0, ""};
    must(ferry_pl_cluster_parse("# name weight cap zone\n"
                                "b1\t1\t-\teu-b\n"
                                "a1\t1\t10G\teu-a\n"
                                "a2\t2\t-\teu-a\n"
                                "x\t1\n",
                                "z.tsv", &c, &err),
         &err);
    assert_int_equal(c.n, 4);
    assert_true(c.zoned);
    assert_int_equal(c.n_zones, 3); /* eu-a, eu-b, and x on its own */
    long a1 = ferry_pl_cluster_find(&c, "a1"), a2 = ferry_pl_cluster_find(&c, "a2"),
         b1 = ferry_pl_cluster_find(&c, "b1"), x = ferry_pl_cluster_find(&c, "x");
    assert_string_equal(c.shards[a1].zone, "eu-a");
    assert_int_equal(c.shards[a1].capacity, 10ULL << 30);
    assert_int_equal(c.shards[a2].capacity, 0);
    assert_int_equal(c.shards[a1].zone_id, c.shards[a2].zone_id);
    assert_int_not_equal(c.shards[a1].zone_id, c.shards[b1].zone_id);
    assert_int_not_equal(c.shards[x].zone_id, c.shards[b1].zone_id);
    assert_null(c.shards[x].zone);
    assert_int_equal(c.zone_size[c.shards[a1].zone_id], 2);
    ferry_pl_cluster_free(&c);
    must(ferry_pl_cluster_parse("a\t1\nb\t1\n", "plain.tsv", &c, &err), &err);
    assert_false(c.zoned);
    assert_int_equal(c.n_zones, 2);
    ferry_pl_cluster_free(&c);
    /* a bad zone name says where */
    ferry_pl_cluster_init(&c, "code", &err);
    assert_int_equal(ferry_pl_cluster_add_zoned(&c, "a", 1, 0, "no space", 7, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "code:7: shard a: bad zone name 'no space'"));
    ferry_pl_cluster_free(&c);
}

/* Fresh placements over many random clusters: distinct shards, even zone spread with no
 * capacity limits, deterministic, independent of input order, and the zone-less cluster with
 * the same shards differs only where zones demanded it (every slice is even there too when
 * each shard is its own zone). */
static void test_place_property(void **state)
{
    (void)state;
    ferry_err err = {0, ""};
    size_t slices_checked = 0, zone_differs = 0;
    for (int seed = 1; seed <= 300; seed++) {
        rng_state = 0x9E3779B97F4A7C15ULL * (uint64_t)seed;
        int n = 2 + (int)(rnd() % 11), zones = 1 + (int)(rnd() % 5);
        unsigned rf = 1 + (unsigned)(rnd() % (n < 5 ? (unsigned)n : 5u));
        spec sp;
        random_spec(&sp, n, zones);
        int tenants = 1 + (int)(rnd() % 30);
        uint64_t inv_seed = rnd();
        ferry_pl_cluster c, crev;
        build(&c, &sp, n, true, false);
        build(&crev, &sp, n, true, true);
        ferry_pl_inventory inv, invrev;
        rng_state = inv_seed;
        random_inventory(&inv, tenants, false);
        rng_state = inv_seed;
        random_inventory(&invrev, tenants, true);
        ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
        o.rf = rf;
        o.hash = seed % 2 ? FERRY_HASH_SHA256 : FERRY_HASH_XXH3;
        ferry_pl_layout l, l2, lrev;
        must(ferry_pl_place(&inv, &c, &o, &l, &err), &err);
        must(ferry_pl_place(&inv, &c, &o, &l2, &err), &err);
        must(ferry_pl_place(&invrev, &crev, &o, &lrev, &err), &err);
        assert_int_equal(l.zone_relaxed, 0);
        for (size_t i = 0; i < inv.n; i++) {
            if (!slice_even(&l, i))
                fail_msg("seed %d: slice %s/%u not spread evenly over zones", seed,
                         inv.slices[i].tenant, inv.slices[i].split);
            slices_checked++;
        }
        assert_int_equal(memcmp(l.replicas, l2.replicas, inv.n * rf * sizeof *l.replicas), 0);
        assert_true(same_layout(&l, &lrev));
        /* without zones: placement as before (each shard a zone of its own) */
        ferry_pl_cluster plain;
        build(&plain, &sp, n, false, false);
        ferry_pl_layout lp;
        must(ferry_pl_place(&inv, &plain, &o, &lp, &err), &err);
        for (size_t i = 0; i < inv.n; i++)
            assert_true(slice_even(&lp, i));
        zone_differs += !same_layout(&l, &lp);
        ferry_pl_layout_free(&lp);
        ferry_pl_cluster_free(&plain);
        ferry_pl_layout_free(&l);
        ferry_pl_layout_free(&l2);
        ferry_pl_layout_free(&lrev);
        ferry_pl_inventory_free(&inv);
        ferry_pl_inventory_free(&invrev);
        ferry_pl_cluster_free(&c);
        ferry_pl_cluster_free(&crev);
    }
    printf("zones: %zu slices checked, %zu of 300 layouts changed by zones\n", slices_checked,
           zone_differs);
    assert_true(zone_differs > 0); /* the rule did something */
}

/* With capacities: strict placement never goes over a fill target, every slice keeps distinct
 * shards, and a slice is uneven over zones only when the layout counts it as zone_relaxed. */
static void test_capacity_property(void **state)
{
    (void)state;
    ferry_err err = {0, ""};
    size_t relaxed_total = 0;
    for (int seed = 1; seed <= 200; seed++) {
        rng_state = 0xD1B54A32D192ED03ULL * (uint64_t)seed;
        int n = 3 + (int)(rnd() % 8), zones = 2 + (int)(rnd() % 3);
        unsigned rf = 1 + (unsigned)(rnd() % 3);
        spec sp;
        random_spec(&sp, n, zones);
        ferry_pl_inventory inv;
        random_inventory(&inv, 1 + (int)(rnd() % 30), false);
        uint64_t total = 0;
        for (size_t i = 0; i < inv.n; i++)
            total += inv.slices[i].bytes;
        /* room for rf copies with 40-160% slack, spread unevenly */
        for (int i = 0; i < n; i++)
            sp.cap[i] = (total * rf * (140 + rnd() % 120) / 100) / (uint64_t)n + 100000;
        ferry_pl_cluster c;
        build(&c, &sp, n, true, false);
        ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
        o.rf = rf;
        o.fill = 0.9;
        o.strict = false;
        ferry_pl_layout l;
        must(ferry_pl_place(&inv, &c, &o, &l, &err), &err);
        if (l.overfilled == 0)
            for (size_t s = 0; s < c.n; s++)
                assert_true(l.shard_bytes[s] <=
                            (uint64_t)((long double)c.shards[s].capacity * 0.9));
        size_t uneven = 0;
        for (size_t i = 0; i < inv.n; i++)
            uneven += !slice_even(&l, i);
        if (uneven)
            assert_true(l.zone_relaxed > 0);
        relaxed_total += l.zone_relaxed;
        ferry_pl_layout_free(&l);
        ferry_pl_inventory_free(&inv);
        ferry_pl_cluster_free(&c);
    }
    printf("capacity: %zu replicas placed against the zone rule for lack of room\n", relaxed_total);
}

/* Adding a shard (to an existing zone, a new zone, or with no zone) moves replicas only onto
 * the new shard, keeps every slice even, and moves about the new shard's weight share. */
static void test_add_shard_minimal(void **state)
{
    (void)state;
    ferry_err err = {0, ""};
    size_t moved_total = 0, replicas_total = 0;
    for (int seed = 1; seed <= 300; seed++) {
        rng_state = 0xA0761D6478BD642FULL * (uint64_t)seed;
        int n = 2 + (int)(rnd() % 10), zones = 1 + (int)(rnd() % 4);
        unsigned rf = 1 + (unsigned)(rnd() % (n < 4 ? (unsigned)n : 4u));
        spec sp;
        random_spec(&sp, n + 1, zones);
        int kind = (int)(rnd() % 3);
        sp.zone[n] = kind == 0 ? (int)(rnd() % (uint64_t)zones) : kind == 1 ? zones : -1;
        ferry_pl_inventory inv;
        random_inventory(&inv, 1 + (int)(rnd() % 30), false);
        ferry_pl_cluster before, after;
        build(&before, &sp, n, true, false);
        build(&after, &sp, n + 1, true, false);
        ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
        o.rf = rf;
        ferry_pl_layout l0, l1, same;
        must(ferry_pl_place(&inv, &before, &o, &l0, &err), &err);
        must(ferry_pl_rebalance(&inv, &before, &l0, &before, &o, &same, &err), &err);
        assert_int_equal(memcmp(l0.replicas, same.replicas, inv.n * rf * sizeof *l0.replicas), 0);
        must(ferry_pl_rebalance(&inv, &before, &l0, &after, &o, &l1, &err), &err);
        char added[16];
        snprintf(added, sizeof added, "s%02d", n);
        for (size_t i = 0; i < inv.n; i++) {
            assert_true(slice_even(&l1, i));
            for (unsigned j = 0; j < rf; j++) {
                const char *was = before.shards[l0.replicas[i * rf + j]].name;
                const char *now = after.shards[l1.replicas[i * rf + j]].name;
                if (strcmp(was, now)) {
                    if (strcmp(now, added)) {
                        for (int q = 0; q <= n; q++)
                            printf("s%02d zone %d weight %g\n", q, sp.zone[q], sp.weight[q]);
                        for (unsigned q = 0; q < rf; q++)
                            printf("slot %u: %s -> %s\n", q, before.shards[l0.replicas[i * rf + q]].name, after.shards[l1.replicas[i * rf + q]].name);
                        printf("tenant splits %u\n", inv.tenant_splits[inv.slices[i].tenant_index]);
                    }
                    if (strcmp(now, added))
                        fail_msg("seed %d (kind %d): %s/%u moved %s -> %s, not to the new %s",
                                 seed, kind, inv.slices[i].tenant, inv.slices[i].split, was, now,
                                 added);
                    moved_total++;
                }
                replicas_total++;
            }
        }
        ferry_pl_layout_free(&l0);
        ferry_pl_layout_free(&l1);
        ferry_pl_layout_free(&same);
        ferry_pl_inventory_free(&inv);
        ferry_pl_cluster_free(&before);
        ferry_pl_cluster_free(&after);
    }
    printf("add: moved %zu of %zu replicas, all onto the added shard\n", moved_total,
           replicas_total);
    assert_true(moved_total > 0 && moved_total < replicas_total / 2);
}

/* Zones declared on a cluster placed without them: the rebalance repairs exactly the uneven
 * slices, each with the fewest moves (rf 2 over 2+ zones: one replica), between the cluster's
 * own shards, and leaves even slices alone. */
static void test_zone_repair_rebalance(void **state)
{
    (void)state;
    ferry_err err = {0, ""};
    size_t repaired = 0;
    for (int seed = 1; seed <= 200; seed++) {
        rng_state = 0xE7037ED1A0B428DBULL * (uint64_t)seed;
        int n = 4 + (int)(rnd() % 8), zones = 2 + (int)(rnd() % 3);
        spec sp;
        random_spec(&sp, n, zones);
        for (int i = 0; i < zones; i++)
            sp.zone[i] = i; /* every zone has a shard */
        ferry_pl_inventory inv;
        random_inventory(&inv, 1 + (int)(rnd() % 30), false);
        ferry_pl_cluster plain, zoned;
        build(&plain, &sp, n, false, false);
        build(&zoned, &sp, n, true, false);
        ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
        o.rf = 2;
        ferry_pl_layout l0, l1, check;
        must(ferry_pl_place(&inv, &plain, &o, &l0, &err), &err);
        check = l0;
        check.cluster = &zoned; /* the old replicas, judged by the zones */
        must(ferry_pl_rebalance(&inv, &plain, &l0, &zoned, &o, &l1, &err), &err);
        for (size_t i = 0; i < inv.n; i++) {
            bool was_even = slice_even(&check, i);
            assert_true(slice_even(&l1, i));
            unsigned moved = 0;
            for (unsigned j = 0; j < 2; j++)
                moved += strcmp(plain.shards[l0.replicas[i * 2 + j]].name,
                                zoned.shards[l1.replicas[i * 2 + j]].name) != 0;
            assert_int_equal(moved, was_even ? 0 : 1);
            repaired += !was_even;
        }
        ferry_pl_layout_free(&l0);
        ferry_pl_layout_free(&l1);
        ferry_pl_inventory_free(&inv);
        ferry_pl_cluster_free(&plain);
        ferry_pl_cluster_free(&zoned);
    }
    printf("repair: %zu slices moved one replica to another zone\n", repaired);
    assert_true(repaired > 0);
}

/* The functions the catalog's rebalance uses. a1 a2 in zone a, b1 in b, c1 in c. */
static void test_pick_and_repair(void **state)
{
    (void)state;
    ferry_pl_cluster c;
    ferry_err err = {0, ""};
    must(ferry_pl_cluster_parse("a1\t1\t1000\ta\na2\t1\t1000\ta\nb1\t1\t1000\tb\nc1\t1\t1000\tc\n",
                                "four", &c, &err),
         &err);
    uint32_t a1 = 0, a2 = 1, b1 = 2, c1 = 3;
    ferry_hash h = FERRY_HASH_SHA256;
    for (int k = 0; k < 50; k++) {
        char id[32];
        snprintf(id, sizeof id, "t%d/split0", k);
        uint32_t held[2] = {a1, FERRY_PL_NO_SHARD};
        uint32_t p = ferry_pl_pick_replica(&c, h, id, 10, held, 1, NULL, NULL, 1.0);
        assert_true(p == b1 || p == c1); /* never a2: zone a is used */
        /* the better scoring of b1 and c1 */
        double sb = ferry_score(h, id, "b1", 1), sc = ferry_score(h, id, "c1", 1);
        assert_int_equal(p, sb > sc ? b1 : c1);
        /* only zone a eligible besides: a2 */
        bool elig[4] = {true, true, false, false};
        assert_int_equal(ferry_pl_pick_replica(&c, h, id, 10, held, 1, elig, NULL, 1.0), a2);
        /* b1 and c1 full: a2 has room (room comes before the zone rule) */
        uint64_t load[4] = {0, 0, 995, 1000};
        assert_int_equal(ferry_pl_pick_replica(&c, h, id, 10, held, 1, NULL, load, 1.0), a2);
        /* everything full: still the zone rule's best */
        uint64_t full[4] = {1000, 1000, 1000, 1000};
        p = ferry_pl_pick_replica(&c, h, id, 10, held, 1, NULL, full, 1.0);
        assert_true(p == b1 || p == c1);
        /* nothing free */
        uint32_t all[4] = {a1, a2, b1, c1};
        assert_int_equal(ferry_pl_pick_replica(&c, h, id, 10, all, 4, NULL, NULL, 1.0),
                         FERRY_PL_NO_SHARD);
        /* a drained replica (b1 draining): the other one stays, the new one avoids zone a */
        bool active[4] = {true, true, false, true};
        assert_int_equal(ferry_pl_pick_replica(&c, h, id, 10, held, 1, active, NULL, 1.0), c1);

        /* repair: both in zone a -> move the weaker of a1/a2 to b or c */
        uint32_t crowded[2] = {a1, a2};
        size_t victim = 9;
        uint32_t to = FERRY_PL_NO_SHARD;
        assert_true(ferry_pl_zone_repair(&c, h, id, 10, crowded, 2, NULL, NULL, 1.0, &victim, &to));
        double s1 = ferry_score(h, id, "a1", 1), s2 = ferry_score(h, id, "a2", 1);
        assert_int_equal(victim, s1 < s2 ? 0 : 1);
        assert_true(to == b1 || to == c1);
        /* no room outside zone a: nothing to do */
        assert_false(
            ferry_pl_zone_repair(&c, h, id, 10, crowded, 2, NULL, load, 1.0, &victim, &to));
        uint64_t bc_full[4] = {0, 0, 1000, 1000};
        assert_false(
            ferry_pl_zone_repair(&c, h, id, 10, crowded, 2, NULL, bc_full, 1.0, &victim, &to));
        /* b and c not eligible (draining): nothing to do */
        bool only_a[4] = {true, true, false, false};
        assert_false(
            ferry_pl_zone_repair(&c, h, id, 10, crowded, 2, only_a, NULL, 1.0, &victim, &to));
        /* already apart */
        uint32_t apart[2] = {a1, b1};
        assert_false(ferry_pl_zone_repair(&c, h, id, 10, apart, 2, NULL, NULL, 1.0, &victim, &to));
        /* rf 3 over 3 zones with two in a: one moves to c */
        uint32_t three[3] = {a1, a2, b1};
        assert_true(ferry_pl_zone_repair(&c, h, id, 10, three, 3, NULL, NULL, 1.0, &victim, &to));
        assert_true(victim < 2);
        assert_int_equal(to, c1);
    }
    ferry_pl_cluster_free(&c);
}

/* An added shard's pull on slices with rf > 1 (ferry_pl_attract_replica): without zones, moving
 * replicas one at a time from the weakest ends on the rendezvous top-rf of old and added shards
 * (what a fresh placement gives); a full added shard pulls nothing; a replica already on an
 * added shard stays; with zones, a move never puts two replicas in one zone while another
 * zone has a free shard. */
static void test_attract(void **state)
{
    (void)state;
    ferry_pl_cluster c;
    ferry_err err = {0, ""};
    must(ferry_pl_cluster_parse("s1\t1\ns2\t1\ns3\t1\ns4\t1\nn5\t1\nn6\t2\n", "six", &c, &err),
         &err);
    ferry_hash h = FERRY_HASH_SHA256;
    const size_t n = 6, old_n = 4;
    bool gainer[6];
    for (size_t s = 0; s < n; s++)
        gainer[s] = c.shards[s].name[0] == 'n'; /* n5, n6: added */
    size_t moved = 0;
    for (int k = 0; k < 400; k++) {
        char id[32];
        snprintf(id, sizeof id, "t%d/split%d", k, k % 3);
        double sc[6];
        for (size_t s = 0; s < n; s++)
            sc[s] = ferry_score(h, id, c.shards[s].name, c.shards[s].weight);
        /* the top 2 of the old shards, then of all of them */
        uint32_t old_sh[4], no = 0;
        for (uint32_t s = 0; s < n; s++)
            if (!gainer[s])
                old_sh[no++] = s;
        assert_int_equal(no, old_n);
        uint32_t held[2] = {old_sh[0], old_sh[1]};
        for (uint32_t q = 2; q < old_n; q++) {
            uint32_t s = old_sh[q];
            if (s == held[0] || s == held[1])
                continue;
            size_t weak = sc[held[0]] < sc[held[1]] ? 0 : 1;
            if (sc[s] > sc[held[weak]])
                held[weak] = s;
        }
        uint32_t want[2] = {0, 1};
        for (uint32_t s = 0; s < n; s++) {
            if (s == want[0] || s == want[1])
                continue;
            size_t weak = sc[want[0]] < sc[want[1]] ? 0 : 1;
            if (sc[s] > sc[want[weak]])
                want[weak] = s;
        }
        size_t victim;
        uint32_t to;
        for (int round = 0; round < 3 && ferry_pl_attract_replica(&c, h, id, 10, held, 2, gainer,
                                                                  NULL, NULL, 1.0, &victim, &to);
             round++) {
            assert_true(gainer[to]);
            assert_false(gainer[held[victim]]);
            assert_true(sc[to] > sc[held[victim]]);
            held[victim] = to;
            moved++;
        }
        if (!((held[0] == want[0] && held[1] == want[1]) ||
              (held[0] == want[1] && held[1] == want[0])))
            fail_msg("%s: ends on %u,%u, top 2 is %u,%u (scores %g %g %g %g %g %g)", id, held[0],
                     held[1], want[0], want[1], sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]);
        /* settled: nothing more to pull */
        assert_false(ferry_pl_attract_replica(&c, h, id, 10, held, 2, gainer, NULL, NULL, 1.0,
                                              &victim, &to));
        /* the added shards full: nothing pulled */
        uint32_t again[2] = {old_sh[0], old_sh[1]};
        ferry_pl_cluster_free(&c);
        must(ferry_pl_cluster_parse("s1\t1\ns2\t1\ns3\t1\ns4\t1\nn5\t1\t1000\nn6\t2\t1000\n", "six",
                                    &c, &err),
             &err);
        uint64_t full[6] = {0};
        for (size_t s = 0; s < n; s++)
            if (c.shards[s].capacity)
                full[s] = 995; /* no room for 10 more bytes */
        assert_false(ferry_pl_attract_replica(&c, h, id, 10, again, 2, gainer, NULL, full, 1.0,
                                              &victim, &to));
        ferry_pl_cluster_free(&c);
        must(ferry_pl_cluster_parse("s1\t1\ns2\t1\ns3\t1\ns4\t1\nn5\t1\nn6\t2\n", "six", &c, &err),
             &err);
        /* a replica on an added shard never moves to the other one */
        uint32_t first_new = gainer[0] ? 0 : (uint32_t)ferry_pl_cluster_find(&c, "n5");
        uint32_t on_new[2] = {first_new, old_sh[0]};
        if (ferry_pl_attract_replica(&c, h, id, 10, on_new, 2, gainer, NULL, NULL, 1.0, &victim,
                                     &to))
            assert_int_equal(victim, 1);
    }
    printf("attract: %zu replicas moved to the added shards\n", moved);
    assert_true(moved > 100); /* n5 and n6 (weight 2) should take about 2 * 400 * 3/7 */
    ferry_pl_cluster_free(&c);

    /* zones: a1 a2 in a, b1 in b; a3 added in zone a */
    must(ferry_pl_cluster_parse("a1\t1\t-\ta\na2\t1\t-\ta\nb1\t1\t-\tb\na3\t4\t-\ta\n", "zoned", &c,
                                &err),
         &err);
    bool added[4];
    for (size_t s = 0; s < 4; s++)
        added[s] = !strcmp(c.shards[s].name, "a3");
    const uint32_t za1 = (uint32_t)ferry_pl_cluster_find(&c, "a1"),
                   zb1 = (uint32_t)ferry_pl_cluster_find(&c, "b1"),
                   za3 = (uint32_t)ferry_pl_cluster_find(&c, "a3");
    size_t pulled = 0;
    for (int k = 0; k < 200; k++) {
        char id[32];
        snprintf(id, sizeof id, "z%d/split0", k);
        uint32_t held[2] = {za1, zb1}; /* one per zone */
        size_t victim;
        uint32_t to;
        if (ferry_pl_attract_replica(&c, h, id, 10, held, 2, added, NULL, NULL, 1.0, &victim,
                                     &to)) {
            assert_int_equal(to, za3);
            assert_int_equal(victim, 0); /* only a1 may give way to a3: b1 leaving would crowd a */
            pulled++;
        }
    }
    printf("attract with zones: %zu of 200 slices pulled to a3, never out of zone b\n", pulled);
    assert_true(pulled > 0);
    ferry_pl_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_zones),
        cmocka_unit_test(test_place_property),
        cmocka_unit_test(test_capacity_property),
        cmocka_unit_test(test_add_shard_minimal),
        cmocka_unit_test(test_zone_repair_rebalance),
        cmocka_unit_test(test_pick_and_repair),
        cmocka_unit_test(test_attract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

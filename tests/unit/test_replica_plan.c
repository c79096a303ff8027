/* The replica-count part of the rebalancing plan (ferry_rebalance_plan_compute on a SQLite
 * catalog in a temporary directory; no server is contacted): clone steps when a tenant's rf is
 * above its slices' replica counts, to the best-scoring shard, preferring an unused zone; drop
 * steps when below, lowest score first, never the last replica; the tenant override beats the
 * cluster's rf; the rf is capped at the active shards; a replica on a draining shard gets a
 * move step to the shard the zone rule picks; replicas sharing a zone get a zone-repair move. */
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

#include <openssl/sha.h>

#include "ferry/catalog.h"
#include "ferry/move.h"

static char dir[256];
static int counter;

typedef struct shard_def {
    const char *name, *zone;
} shard_def;

/* A fresh catalog with cluster rf, the shards, one tenant "acme" (its rf override, 0 = none)
 * with one slice routed to `route`. */
static ferry_catalog *setup(uint32_t cluster_rf, const shard_def *sh, size_t n, uint32_t tenant_rf,
                            const char *route)
{
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/c%d.db", dir, ++counter);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_OK);
    ferry_batch *b = ferry_batch_new();
    pf_settings(b, cluster_rf);
    for (size_t i = 0; i < n; i++)
        pf_shard(b, sh[i].name, sh[i].zone, 0);
    pf_tenant(b, "acme", tenant_rf, 1000, route);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    return c;
}

/* The rendezvous hash of acme/split0 on a shard (docs/placement.md: the first 8 bytes of
 * SHA-256("<slice id>:<shard>") big-endian); with equal weights the score grows with it. */
static uint64_t hash_on(const char *shard)
{
    char key[128];
    unsigned char md[SHA256_DIGEST_LENGTH];
    int n = snprintf(key, sizeof key, "acme/split0:%s", shard);
    SHA256((const unsigned char *)key, (size_t)n, md);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h = h << 8 | md[i];
    return h;
}

/* The shard names ordered by score for acme/split0, best first. */
static void ranked(const shard_def *sh, size_t n, const char **out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = sh[i].name;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (hash_on(out[j]) > hash_on(out[i])) {
                const char *t = out[i];
                out[i] = out[j];
                out[j] = t;
            }
}

static const shard_def four[] = {{"s1", NULL}, {"s2", NULL}, {"s3", NULL}, {"s4", NULL}};

static void test_clone_best_score(void **state)
{
    (void)state;
    const char *rank[4];
    ranked(four, 4, rank);
    /* route on the worst shard; the tenant wants 3: two clones, to the two best others */
    ferry_catalog *c = setup(1, four, 4, 3, rank[3]);
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(p.moves[i].kind, FERRY_PLAN_CLONE);
        assert_string_equal(p.moves[i].from, rank[3]);
        assert_string_equal(p.moves[i].to, rank[i]);
        assert_int_equal(p.moves[i].bytes, 1000);
    }
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

static void test_clone_prefers_unused_zone(void **state)
{
    (void)state;
    const char *rank[4];
    ranked(four, 4, rank);
    /* zones: the route's shard and the best other one share zone a; the rest are zone b */
    const char *src = rank[3];
    shard_def z[4];
    for (size_t i = 0; i < 4; i++) {
        z[i].name = four[i].name;
        z[i].zone = !strcmp(four[i].name, src) || !strcmp(four[i].name, rank[0]) ? "a" : "b";
    }
    ferry_catalog *c = setup(1, z, 4, 2, src);
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1);
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_CLONE);
    assert_string_equal(p.moves[0].to, rank[1]); /* the best shard in zone b, not rank[0] */
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    /* rf 3 with two zones: the third replica goes back to zone a (distinct shards always) */
    c = setup(1, z, 4, 3, src);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 2);
    assert_string_equal(p.moves[0].to, rank[1]);
    assert_string_equal(p.moves[1].to, rank[0]);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

static void test_drop_lowest_never_last(void **state)
{
    (void)state;
    const char *rank[4];
    ranked(four, 4, rank);
    char route[256];
    snprintf(route, sizeof route, "%s,%s,%s", rank[0], rank[2], rank[1]);
    /* the cluster's rf 1 (no override): two drops, worst first; the best stays */
    ferry_catalog *c = setup(1, four, 4, 0, route);
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 2);
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_DROP);
    assert_string_equal(p.moves[0].from, rank[2]);
    assert_string_equal(p.moves[1].from, rank[1]);
    assert_string_equal(p.moves[0].to, "");
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    /* the tenant's override beats the cluster's rf: rf 3 for the tenant, nothing to do */
    c = setup(1, four, 4, 3, route);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

static void test_rf_capped_at_active_shards(void **state)
{
    (void)state;
    shard_def two[] = {{"s1", NULL}, {"s2", NULL}};
    ferry_catalog *c = setup(1, two, 2, 5, "s1");
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1); /* only one other shard exists */
    assert_string_equal(p.moves[0].to, "s2");
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

static void set_state(ferry_catalog *c, const char *shard, enum ferry_shard_state st)
{
    ferry_record r;
    ferry_err err = {0};
    ferry_record_init(&r, FERRY_REC_SHARD);
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "%s", shard);
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    r.u.shard.state = st;
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    ferry_record_free(&r);
}

static const shard_def zoned4[] = {{"s1", "a"}, {"s2", "a"}, {"s3", "b"}, {"s4", "b"}};

/* A replica on a draining shard moves (a MOVE step naming it as the source) to the shard the
 * zone rule picks; the other replica stays. */
static void test_drained_replica_moves(void **state)
{
    (void)state;
    ferry_catalog *c = setup(1, zoned4, 4, 2, "s1,s3");
    set_state(c, "s3", FERRY_SHARD_DRAINING);
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1);
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_MOVE);
    assert_string_equal(p.moves[0].from, "s3");
    assert_string_equal(p.moves[0].to, "s4"); /* zone b: s2 would share zone a with s1 */
    assert_int_equal(p.moves[0].bytes, 1000);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    /* zone b wholly draining: zone a's other shard is the only place left */
    c = setup(1, zoned4, 4, 2, "s1,s3");
    set_state(c, "s3", FERRY_SHARD_DRAINING);
    set_state(c, "s4", FERRY_SHARD_DRAINING);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1);
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_MOVE);
    assert_string_equal(p.moves[0].from, "s3");
    assert_string_equal(p.moves[0].to, "s2");
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    /* the first replica of the route on a draining shard, no zones: the best-scoring free one */
    const char *rank[4];
    ranked(four, 4, rank);
    char route[64];
    snprintf(route, sizeof route, "%s,%s", rank[1], rank[3]);
    c = setup(2, four, 4, 0, route);
    set_state(c, rank[1], FERRY_SHARD_DRAINING);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1);
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_MOVE);
    assert_string_equal(p.moves[0].from, rank[1]);
    assert_string_equal(p.moves[0].to, rank[0]);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    /* too many replicas and one draining: dropped, not moved */
    c = setup(1, zoned4, 4, 2, "s1,s3,s4");
    set_state(c, "s3", FERRY_SHARD_DRAINING);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1); /* s1 and s4 remain: zones a and b */
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_DROP);
    assert_string_equal(p.moves[0].from, "s3");
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

/* Replicas sharing a zone while the other zone has room: one MOVE of the weaker of them to
 * the better-scoring shard of the other zone. Apart already: nothing. */
static void test_zone_repair(void **state)
{
    (void)state;
    ferry_catalog *c = setup(1, zoned4, 4, 2, "s1,s2");
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 1);
    assert_int_equal(p.moves[0].kind, FERRY_PLAN_MOVE);
    assert_string_equal(p.moves[0].from, hash_on("s1") < hash_on("s2") ? "s1" : "s2");
    assert_string_equal(p.moves[0].to, hash_on("s3") > hash_on("s4") ? "s3" : "s4");
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    c = setup(1, zoned4, 4, 2, "s2,s4");
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
    /* the other zone draining: no room there, nothing to repair */
    c = setup(1, zoned4, 4, 2, "s1,s2");
    set_state(c, "s3", FERRY_SHARD_DRAINING);
    set_state(c, "s4", FERRY_SHARD_DRAINING);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);
    ferry_catalog_close(c);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(ferry_rebalance_step_name(FERRY_PLAN_MOVE), "move");
    assert_string_equal(ferry_rebalance_step_name(FERRY_PLAN_CLONE), "clone");
    assert_string_equal(ferry_rebalance_step_name(FERRY_PLAN_DROP), "drop");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_best_score),
        cmocka_unit_test(test_clone_prefers_unused_zone),
        cmocka_unit_test(test_drop_lowest_never_last),
        cmocka_unit_test(test_rf_capped_at_active_shards),
        cmocka_unit_test(test_drained_replica_moves),
        cmocka_unit_test(test_zone_repair),
        cmocka_unit_test(test_names),
    };
    return pf_run("replica_plan", tests, sizeof tests / sizeof tests[0], dir, sizeof dir);
}

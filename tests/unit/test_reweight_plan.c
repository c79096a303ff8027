/* Re-weighting a shard that is already in service (ferry_rebalance_plan_compute on a SQLite
 * catalog in a temporary directory; no server is contacted): the shard record keeps the weight
 * the routing table was balanced for (placed_weight, ferry_shard_reweight), the plan takes it as
 * the old weight, so a heavier shard attracts exactly the slices that now rank it first and a
 * lighter one gives up exactly those that no longer do, each to its new best shard; the same for
 * slices with two replicas; once the moves are applied the plan is empty and ferry_shards_settle
 * clears placed_weight. */
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

#include "catalog/catalog_int.h"
#include "ferry/catalog.h"
#include "ferry/move.h"
#include "ferry/placement.h"

#define N_SHARDS 4
#define N_TENANTS 300

static char dir[256];
static int counter;
static const char *const names[N_SHARDS] = {"s1", "s2", "s3", "s4"};

static double score(const char *tenant, const char *shard, double weight)
{
    char id[FERRY_SLICE_ID_MAX];
    snprintf(id, sizeof id, "%s/split0", tenant);
    return ferry_score(FERRY_HASH_SHA256, id, shard, weight);
}

/* The shard indexes ordered by score for tenant's split 0 under weights w, best first. */
static void ranked(const char *tenant, const double *w, size_t *out)
{
    double sc[N_SHARDS];
    for (size_t s = 0; s < N_SHARDS; s++) {
        out[s] = s;
        sc[s] = score(tenant, names[s], w[s]);
    }
    for (size_t i = 0; i < N_SHARDS; i++)
        for (size_t j = i + 1; j < N_SHARDS; j++)
            if (sc[out[j]] > sc[out[i]]) {
                size_t t = out[i];
                out[i] = out[j];
                out[j] = t;
            }
}

static void tenant_name(size_t i, char *buf, size_t n)
{
    snprintf(buf, n, "t%03zu", i);
}

/* How many slices the re-weight of shard si to w[si] should move (every other weight 1, and the
 * routing table on each slice's rf best shards at weight 1): for a heavier shard the slices whose
 * rf best shards now include it and did not, for a lighter one those whose did and now do not. */
static size_t expected_moves(const double *w, size_t si, unsigned rf, bool down)
{
    const double ones[N_SHARDS] = {1, 1, 1, 1};
    size_t n = 0;
    for (size_t i = 0; i < N_TENANTS; i++) {
        char t[16];
        size_t before[N_SHARDS], after[N_SHARDS];
        bool held = false, wanted = false;
        tenant_name(i, t, sizeof t);
        ranked(t, ones, before);
        ranked(t, w, after);
        for (unsigned k = 0; k < rf; k++) {
            held |= before[k] == si;
            wanted |= after[k] == si;
        }
        n += down ? held && !wanted : !held && wanted;
    }
    return n;
}

/* A fresh catalog (cluster rf `rf`) with the four shards at weight 1 and N_TENANTS tenants of one
 * split each, every slice routed to its rf best shards. */
static ferry_catalog *setup(unsigned rf)
{
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/c%d.db", dir, ++counter);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_OK);
    ferry_batch *b = ferry_batch_new();
    pf_settings(b, rf);
    for (size_t s = 0; s < N_SHARDS; s++)
        pf_shard(b, names[s], NULL, 0);
    const double ones[N_SHARDS] = {1, 1, 1, 1};
    for (size_t i = 0; i < N_TENANTS; i++) {
        char t[16];
        size_t rank[N_SHARDS];
        tenant_name(i, t, sizeof t);
        ranked(t, ones, rank);
        char list[64];
        snprintf(list, sizeof list, rf == 1 ? "%s" : "%s,%s", names[rank[0]], names[rank[1]]);
        pf_tenant(b, t, 0, 1000, list);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    return c;
}

/* `ferry shard add NAME --weight W` on a shard in service, as the command does it. */
static void reweight(ferry_catalog *c, const char *shard, double w)
{
    ferry_err err = {0};
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SHARD);
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "%s", shard);
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    ferry_shard_reweight(&r.u.shard, w);
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
}

static double placed_weight(ferry_catalog *c, const char *shard)
{
    ferry_err err = {0};
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SHARD);
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "%s", shard);
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    return r.u.shard.placed_weight;
}

static size_t shard_index(const char *name)
{
    return pf_index(names, N_SHARDS, name);
}

/* Applies the plan's moves to the routing table, as the moves' switches do. */
static void apply(ferry_catalog *c, const ferry_rebalance_plan *p)
{
    ferry_err err = {0};
    for (size_t i = 0; i < p->n_moves; i++) {
        const ferry_planned_move *m = &p->moves[i];
        assert_int_equal(m->kind, FERRY_PLAN_MOVE);
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", m->tenant);
        r.u.route.split = m->split;
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        char text[FERRY_SHARDS_TEXT_MAX], out[FERRY_SHARDS_TEXT_MAX] = "";
        assert_true(ferry_shard_set_format(&r.u.route.shards, text, sizeof text) < sizeof text);
        char *save = NULL;
        bool swapped = false;
        for (char *tok = strtok_r(text, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            const char *name = !strcmp(tok, m->from) ? (swapped = true, m->to) : tok;
            size_t used = strlen(out);
            snprintf(out + used, sizeof out - used, "%s%s", used ? "," : "", name);
        }
        assert_true(swapped);
        shards_printf(&r.u.route.shards, "%s", out);
        assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    }
}

/* After the moves: the plan is empty and the settle clears placed_weight. */
static void settle_checked(ferry_catalog *c, const char *shard)
{
    ferry_rebalance_plan p;
    ferry_err err = {0};
    assert_true(placed_weight(c, shard) > 0);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    size_t settled = 99;
    assert_int_equal(ferry_shards_settle(c, &p, &settled, &err), FERRY_OK);
    assert_int_equal(settled, 0); /* counts NEW shards made active only */
    assert_true(placed_weight(c, shard) == 0);
    ferry_rebalance_plan_free(&p);
}

static void test_heavier_shard_attracts(void **state)
{
    (void)state;
    ferry_catalog *c = setup(1);
    ferry_rebalance_plan p;
    ferry_err err = {0};
    /* balanced: nothing to do */
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    assert_int_equal(p.n_moves, 0);
    ferry_rebalance_plan_free(&p);

    reweight(c, "s1", 3);
    assert_true(placed_weight(c, "s1") == 1);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    const double w[N_SHARDS] = {3, 1, 1, 1}, ones[N_SHARDS] = {1, 1, 1, 1};
    size_t expected = expected_moves(w, 0, 1, false);
    assert_true(expected > N_TENANTS / 10); /* the case is not empty */
    assert_int_equal(p.n_moves, expected);
    for (size_t i = 0; i < p.n_moves; i++) {
        size_t before[N_SHARDS], after[N_SHARDS];
        ranked(p.moves[i].tenant, ones, before);
        ranked(p.moves[i].tenant, w, after);
        assert_string_equal(p.moves[i].to, "s1");
        assert_int_equal(after[0], 0);
        assert_int_equal(shard_index(p.moves[i].from), before[0]);
    }
    apply(c, &p);
    ferry_rebalance_plan_free(&p);
    settle_checked(c, "s1");
    ferry_catalog_close(c);
}

static void test_lighter_shard_sheds(void **state)
{
    (void)state;
    ferry_catalog *c = setup(1);
    ferry_rebalance_plan p;
    ferry_err err = {0};
    reweight(c, "s2", 0.25);
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
    const double w[N_SHARDS] = {1, 0.25, 1, 1};
    size_t expected = expected_moves(w, 1, 1, true);
    assert_true(expected > N_TENANTS / 10);
    assert_int_equal(p.n_moves, expected);
    for (size_t i = 0; i < p.n_moves; i++) {
        size_t after[N_SHARDS];
        ranked(p.moves[i].tenant, w, after);
        assert_string_equal(p.moves[i].from, "s2");
        assert_string_equal(p.moves[i].to, names[after[0]]); /* its new best shard */
    }
    apply(c, &p);
    ferry_rebalance_plan_free(&p);
    settle_checked(c, "s2");
    ferry_catalog_close(c);
}

/* Two replicas per slice: a heavier shard takes the weakest replica of each slice that now ranks
 * it above that replica; a lighter one gives up its replica of each slice that now ranks another
 * shard above it. */
static void test_two_replicas(void **state)
{
    (void)state;
    for (int down = 0; down < 2; down++) {
        ferry_catalog *c = setup(2);
        ferry_rebalance_plan p;
        ferry_err err = {0};
        const char *shard = down ? "s3" : "s1";
        size_t si = shard_index(shard);
        double w[N_SHARDS] = {1, 1, 1, 1};
        w[si] = down ? 0.2 : 4;
        reweight(c, shard, w[si]);
        assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_OK);
        size_t expected = expected_moves(w, si, 2, down);
        assert_true(expected > N_TENANTS / 20);
        assert_int_equal(p.n_moves, expected);
        for (size_t i = 0; i < p.n_moves; i++) {
            size_t after[N_SHARDS];
            ranked(p.moves[i].tenant, w, after);
            assert_int_equal(p.moves[i].kind, FERRY_PLAN_MOVE);
            if (down) {
                assert_string_equal(p.moves[i].from, shard);
                /* to the shard that now ranks among the slice's best two */
                size_t to = shard_index(p.moves[i].to);
                assert_true(to == after[0] || to == after[1]);
            } else {
                assert_string_equal(p.moves[i].to, shard);
                size_t from = shard_index(p.moves[i].from);
                assert_true(from != after[0] && from != after[1]);
            }
        }
        apply(c, &p);
        ferry_rebalance_plan_free(&p);
        settle_checked(c, shard);
        ferry_catalog_close(c);
    }
}

/* The bookkeeping of ferry_shard_reweight, and placed_weight in the shard's document. */
static void test_reweight_record(void **state)
{
    (void)state;
    ferry_shard s;
    memset(&s, 0, sizeof s);
    s.weight = 1;
    ferry_shard_reweight(&s, 3);
    assert_true(s.weight == 3 && s.placed_weight == 1);
    ferry_shard_reweight(&s, 5); /* not rebalanced yet: still balanced for 1 */
    assert_true(s.weight == 5 && s.placed_weight == 1);
    ferry_shard_reweight(&s, 1); /* back to what it was balanced for */
    assert_true(s.weight == 1 && s.placed_weight == 0);
    ferry_shard_reweight(&s, 1);
    assert_true(s.placed_weight == 0);
    s.state = FERRY_SHARD_NEW; /* filled as added, whatever its weight */
    ferry_shard_reweight(&s, 2);
    assert_true(s.weight == 2 && s.placed_weight == 0);

    ferry_record r;
    ferry_err err = {0};
    ferry_record_init(&r, FERRY_REC_SHARD);
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "s1");
    r.u.shard.weight = 2;
    json_t *o = cat_record_to_json(&r);
    assert_non_null(o);
    assert_null(json_object_get(o, "placed_weight")); /* written only while set */
    json_decref(o);
    r.u.shard.placed_weight = 0.5;
    o = cat_record_to_json(&r);
    assert_non_null(o);
    ferry_record back;
    assert_int_equal(cat_record_from_json(FERRY_REC_SHARD, o, &back, &err), FERRY_OK);
    assert_true(back.u.shard.placed_weight == 0.5 && back.u.shard.weight == 2);
    json_object_set_new(o, "placed_weight", json_real(-1));
    assert_int_equal(cat_record_from_json(FERRY_REC_SHARD, o, &back, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "placed_weight"));
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heavier_shard_attracts),
        cmocka_unit_test(test_lighter_shard_sheds),
        cmocka_unit_test(test_two_replicas),
        cmocka_unit_test(test_reweight_record),
    };
    return pf_run("reweight_plan", tests, sizeof tests / sizeof tests[0], dir, sizeof dir);
}

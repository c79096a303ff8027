/* One domain model: the catalog's records (catalog.h) and placement's own model (placement.h,
 * prefix ferry_pl_) in one file, and one name rule for both (names.h). A shard name of 100
 * characters goes from the config through the catalog, new tenants' placement and the rebalance
 * plan unchanged, and placement computes from the catalog's shard records the same homes the
 * catalog's split placement recorded; a name over FERRY_NAME_MAX - 1 bytes is refused by the
 * config, placement and the catalog with the same rule in the message. SQLite in a temporary
 * directory; no server is contacted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ferry/catalog.h"
#include "ferry/config.h"
#include "ferry/move.h"
#include "ferry/names.h"
#include "ferry/placement.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

#define SPLITS 16

static char dir[256];

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

/* len copies of c: a valid name when len < FERRY_NAME_MAX. */
static void repeat(char *out, size_t len, char c)
{
    memset(out, c, len);
    out[len] = '\0';
}

/* The config of a cluster with the shards "s1" and long_name. */
static void read_config(const char *long_name, ferry_config *cfg, ferry_cluster_config *cc,
                        int *rc, ferry_err *err)
{
    char text[1024];
    snprintf(text, sizeof text,
             "[cluster]\nname = t\ncatalog = sqlite:%s/unused.db\nhash = xxh3\nfill = 0.9\n"
             "[shard \"s1\"]\nreplicas = http://127.0.0.1:1\n"
             "[shard \"%s\"]\nreplicas = http://127.0.0.1:2\n",
             dir, long_name);
    must(ferry_config_parse(text, "t.conf", cfg, err), err);
    *rc = ferry_cluster_config_read(cfg, cc, err);
}

static ferry_catalog *catalog_of(const ferry_cluster_config *cc)
{
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/c.db", dir);
    ferry_catalog *cat = NULL;
    ferry_err err = {0};
    must(ferry_catalog_open(url, &cat, &err), &err);
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SETTINGS);
    r.u.settings = cc->settings;
    must(ferry_batch_create(b, &r, &err), &err);
    for (size_t i = 0; i < cc->n_shards; i++) {
        ferry_record_init(&r, FERRY_REC_SHARD);
        r.u.shard = cc->shards[i];
        must(ferry_batch_create(b, &r, &err), &err);
    }
    must(ferry_catalog_commit(cat, b, NULL, &err), &err);
    ferry_batch_free(b);
    return cat;
}

static void test_long_shard_name_end_to_end(void **state)
{
    (void)state;
    char long_name[101], added[101];
    repeat(long_name, 100, 'n');
    repeat(added, 100, 'm');
    ferry_err err = {0};
    ferry_config cfg;
    ferry_cluster_config cc;
    int rc;
    read_config(long_name, &cfg, &cc, &rc, &err);
    must(rc, &err);
    assert_int_equal(cc.n_shards, 2);
    bool found = false;
    for (size_t i = 0; i < cc.n_shards; i++)
        found |= !strcmp(cc.shards[i].name, long_name);
    assert_true(found);

    /* new tenant: the catalog's split placement records its routes */
    ferry_catalog *cat = catalog_of(&cc);
    ferry_split_change ch;
    must(ferry_split_set(cat, "acme", SPLITS, true, false, &ch, &err), &err);
    char routes[SPLITS][FERRY_LIST_MAX];
    size_t on_long = 0;
    for (uint32_t k = 0; k < SPLITS; k++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "acme");
        r.u.route.split = k;
        must(ferry_catalog_get(cat, &r, &err), &err);
        ferry_shard_set_format(&r.u.route.shards, routes[k], sizeof routes[k]);
        assert_true(!strcmp(routes[k], "s1") || !strcmp(routes[k], long_name));
        on_long += ferry_list_has(routes[k], long_name);
    }
    assert_true(on_long > 0 && on_long < SPLITS);

    /* placement's own model, built from the catalog's shard records in the same file: the same
     * homes (new slices of 0 bytes placed incrementally equal a placement of everything) */
    ferry_pl_cluster pc;
    ferry_pl_inventory inv;
    ferry_pl_layout lay;
    must(ferry_pl_cluster_init(&pc, "catalog", &err), &err);
    must(ferry_pl_inventory_init(&inv, "catalog", &err), &err);
    for (size_t i = 0; i < cc.n_shards; i++) {
        const ferry_shard *sh = &cc.shards[i];
        must(ferry_pl_cluster_add(&pc, sh->name, sh->weight, sh->capacity, 0, &err), &err);
    }
    for (uint32_t k = 0; k < SPLITS; k++)
        must(ferry_pl_inventory_add(&inv, "acme", k, 0, 0, &err), &err);
    must(ferry_pl_cluster_finish(&pc, &err), &err);
    must(ferry_pl_inventory_finish(&inv, &err), &err);
    ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
    assert_true(ferry_hash_parse(cc.settings.hash, &o.hash));
    o.fill = cc.settings.fill;
    o.strict = false;
    must(ferry_pl_place(&inv, &pc, &o, &lay, &err), &err);
    for (size_t i = 0; i < inv.n; i++)
        assert_string_equal(pc.shards[lay.replicas[i]].name, routes[inv.slices[i].split]);
    ferry_pl_layout_free(&lay);
    ferry_pl_inventory_free(&inv);
    ferry_pl_cluster_free(&pc);

    /* a shard of 100 characters added: the rebalance plan moves slices to it by its full name */
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SHARD);
    r.u.shard = cc.shards[0];
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "%s", added);
    r.u.shard.state = FERRY_SHARD_NEW;
    must(ferry_catalog_create(cat, &r, &err), &err);
    ferry_rebalance_plan plan = {0};
    must(ferry_rebalance_plan_compute(cat, &plan, &err), &err);
    assert_true(plan.n_moves > 0);
    for (size_t i = 0; i < plan.n_moves; i++) {
        assert_string_equal(plan.moves[i].to, added);
        assert_true(!strcmp(plan.moves[i].from, "s1") || !strcmp(plan.moves[i].from, long_name));
    }
    ferry_rebalance_plan_free(&plan);
    ferry_catalog_close(cat);
    ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);
}

/* 128 characters: one rule, one message, wherever the name comes in. */
static void test_name_over_limit_refused(void **state)
{
    (void)state;
    char name[FERRY_NAME_MAX + 1];
    repeat(name, FERRY_NAME_MAX, 'n');
    ferry_err err = {0};
    ferry_config cfg;
    ferry_cluster_config cc;
    int rc;
    read_config(name, &cfg, &cc, &rc, &err);
    assert_int_equal(rc, FERRY_EINVAL);
    assert_non_null(strstr(err.msg, FERRY_NAME_RULE));
    ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);

    ferry_pl_cluster pc;
    must(ferry_pl_cluster_init(&pc, "shards.tsv", &err), &err);
    assert_int_equal(ferry_pl_cluster_add(&pc, name, 1, 0, 3, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, FERRY_NAME_RULE));
    assert_non_null(strstr(err.msg, "shards.tsv:3: "));
    name[FERRY_NAME_MAX - 1] = '\0'; /* 127: the longest name, taken by both */
    must(ferry_pl_cluster_add(&pc, name, 1, 0, 4, &err), &err);
    ferry_pl_cluster_free(&pc);
    read_config(name, &cfg, &cc, &rc, &err);
    must(rc, &err);
    ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);

    /* the catalog's keys: the same rule (here: a shard record named "..") */
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/refuse.db", dir);
    ferry_catalog *cat = NULL;
    must(ferry_catalog_open(url, &cat, &err), &err);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SHARD);
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "..");
    assert_int_equal(ferry_catalog_create(cat, &r, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, FERRY_NAME_RULE));
    ferry_catalog_close(cat);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ferry-domain.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_shard_name_end_to_end),
        cmocka_unit_test(test_name_over_limit_refused),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return failed;
}

/* For unit tests of the rebalance plan on a SQLite catalog (test_replica_plan.c,
 * test_reweight_plan.c, test_skew_plan.c): the cluster's settings and a shard record added to a
 * batch as those tests write them, a tenant of one split placed and routed on a list, and a
 * test group run in a scratch directory of its own that
 * is removed afterwards. Include after <cmocka.h>. */
#ifndef FERRY_TEST_PLAN_FIXTURE_H
#define FERRY_TEST_PLAN_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/catalog.h"
#include "shards_text.h"

/* Settings "t": sha256 placement, the cluster's rf, fill target 0.85, pointer format 5. */
static inline void pf_settings(ferry_batch *b, uint32_t rf)
{
    ferry_record r;
    ferry_err err = {0};
    ferry_record_init(&r, FERRY_REC_SETTINGS);
    snprintf(r.u.settings.name, sizeof r.u.settings.name, "t");
    snprintf(r.u.settings.hash, sizeof r.u.settings.hash, "sha256");
    r.u.settings.rf = rf;
    r.u.settings.fill = 0.85;
    r.u.settings.pointer_format = 5;
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
}

/* An active shard of weight 1 (zone NULL: none; capacity 0: none) that nothing connects to. */
static inline void pf_shard(ferry_batch *b, const char *name, const char *zone, uint64_t capacity)
{
    ferry_record r;
    ferry_err err = {0};
    ferry_record_init(&r, FERRY_REC_SHARD);
    snprintf(r.u.shard.name, sizeof r.u.shard.name, "%s", name);
    snprintf(r.u.shard.zone, sizeof r.u.shard.zone, "%s", zone ? zone : "");
    r.u.shard.weight = 1;
    r.u.shard.capacity = capacity;
    snprintf(r.u.shard.replicas, sizeof r.u.shard.replicas, "http://127.0.0.1:1");
    snprintf(r.u.shard.agent, sizeof r.u.shard.agent, "http://127.0.0.1:1");
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
}

/* Tenant `name` of one split and `rf` (0: the cluster's), its slice of `bytes` placed on, and
 * routed to, the shards of `list` (comma-separated). */
static inline void pf_tenant(ferry_batch *b, const char *name, uint32_t rf, uint64_t bytes,
                             const char *list)
{
    ferry_record r;
    ferry_err err = {0};
    ferry_record_init(&r, FERRY_REC_TENANT);
    snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "%s", name);
    r.u.tenant.splits = 1;
    r.u.tenant.rf = rf;
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    ferry_record_init(&r, FERRY_REC_SLICE);
    snprintf(r.u.slice.tenant, sizeof r.u.slice.tenant, "%s", name);
    r.u.slice.bytes = bytes;
    shards_printf(&r.u.slice.placement, "%s", list);
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", name);
    shards_printf(&r.u.route.shards, "%s", list);
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
}

/* The index of name in names[0..n); fails the test when it is none of them. */
static inline size_t pf_index(const char *const *names, size_t n, const char *name)
{
    for (size_t s = 0; s < n; s++)
        if (!strcmp(names[s], name))
            return s;
    fail_msg("unknown shard %s", name);
    return 0;
}

/* Runs the group with dir (dirsz bytes) set to a fresh /tmp/ferry_<tag>_XXXXXX, then removes
 * it; the group's result, or 1 when the directory cannot be made. */
static inline int pf_run(const char *tag, const struct CMUnitTest *tests, size_t n, char *dir,
                         size_t dirsz)
{
    snprintf(dir, dirsz, "/tmp/ferry_%s_XXXXXX", tag);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc = _cmocka_run_group_tests(tag, tests, n, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

#endif

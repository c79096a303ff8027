/* The router's incremental reload (lib/router/routing.c, docs/routing.md "Loading the table"):
 * a router started over a SQLite catalog (no server is contacted) takes each routing change by
 * reading only the tenants the routing change log names, and the snapshot it publishes is the
 * one a full read of the catalog gives at that version: new tenants, split raises, a route
 * naming a shard the router does not know, a tenant removed with its routes, a move through
 * SWITCH and PUBLISH and its journal record removed, users, repair needs (the replicas reads
 * keep off). A shard added changes the slots the routes resolve to: that reload reads
 * everything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shards_text.h"

#include "../../lib/router/router_int.h"
#include "ferry/catalog.h"
#include "ferry/init.h"
#include "ferry/repair_need.h"
#include "ferry/router.h"
#include "ferry/split.h"

static char dir[256], conf[512], url[512];

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

static void write_config(void)
{
    snprintf(conf, sizeof conf, "%s/ferry.conf", dir);
    snprintf(url, sizeof url, "sqlite:%s/c.db", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "[cluster]\nname = inc\ncatalog = %s\nrf = 1\n", url);
    for (int s = 1; s <= 3; s++)
        fprintf(f, "[shard \"node%d\"]\nreplicas = http://127.0.0.1:1\nagent = http://127.0.0.1:1\n",
                s);
    fprintf(f, "[table \"events\"]\ndatabase = default\nlayout = shared\ntenant_column = "
               "tenant\nsplit_column = split\nday_column = day\n");
    fprintf(f, "[router]\nlisten = 127.0.0.1:0\npassthrough = http://127.0.0.1:1\n");
    fclose(f);
}

/* Waits until the router's snapshot has the catalog's routing version, then checks that it
 * came the expected way and equals a full read. */
static void check(ferry_router *r, ferry_catalog *cat, bool incremental, const char *what)
{
    ferry_err err = {0};
    uint64_t want = 0;
    must(ferry_catalog_routing_version(cat, &want, &err), &err);
    rt_snapshot *s = NULL;
    for (int i = 0; i < 2000; i++) {
        s = rt_snapshot_get(r);
        if (s->version >= want)
            break;
        rt_snapshot_put(s);
        s = NULL;
        usleep(5000);
    }
    if (!s)
        fail_msg("%s: the router never reached routing version %llu", what,
                 (unsigned long long)want);
    if (s->incremental != incremental)
        fail_msg("%s: the snapshot of version %llu was built %s", what,
                 (unsigned long long)s->version, s->incremental ? "incrementally" : "in full");
    rt_snapshot *full = NULL;
    must(rt_load(r, cat, true, &full, &err), &err);
    assert_false(full->incremental);
    char why[256] = "";
    if (!rt_snapshot_same(s, full, why, sizeof why))
        fail_msg("%s: the incremental snapshot differs from a full read: %s", what, why);
    rt_snapshot_put(full);
    rt_snapshot_put(s);
}

static void set_route(ferry_batch *b, const char *tenant, uint32_t split, const char *shards)
{
    ferry_err err = {0};
    ferry_record rr;
    ferry_record_init(&rr, FERRY_REC_ROUTE);
    snprintf(rr.u.route.tenant, sizeof rr.u.route.tenant, "%s", tenant);
    rr.u.route.split = split;
    shards_printf(&rr.u.route.shards, "%s", shards);
    must(ferry_batch_update(b, &rr, &err), &err);
}

static void commit(ferry_catalog *cat, ferry_batch *b)
{
    ferry_err err = {0};
    must(ferry_catalog_commit(cat, b, NULL, &err), &err);
    ferry_batch_free(b);
}

static void test_incremental_equals_full(void **state)
{
    (void)state;
    ferry_err err = {0};
    ferry_init_result ir;
    must(ferry_init_cluster(conf, &ir, &err), &err);
    ferry_catalog *cat = NULL;
    must(ferry_catalog_open(url, &cat, &err), &err);
    char name[32];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "t%02d", i);
        ferry_split_change ch;
        must(ferry_split_set(cat, name, 1 + (uint32_t)i % 3, true, false, &ch, &err), &err);
    }
    ferry_router *r = NULL;
    ferry_router_options o = {.config_path = conf, .listen = "127.0.0.1:0"};
    must(ferry_router_start(&o, &r, &err), &err);
    check(r, cat, false, "the first load");
    assert_int_equal(r->snap->n_tenants, 20);

    /* a new tenant, then a split raise */
    ferry_split_change ch;
    must(ferry_split_set(cat, "new1", 2, true, false, &ch, &err), &err);
    check(r, cat, true, "a tenant added");
    must(ferry_split_set(cat, "t03", 3, false, false, &ch, &err), &err);
    check(r, cat, true, "a split raise");

    /* a route naming a shard the router does not know */
    ferry_batch *b = ferry_batch_new();
    set_route(b, "t05", 0, "node2,node9");
    commit(cat, b);
    check(r, cat, true, "a route with an unknown shard");
    rt_snapshot *s = rt_snapshot_get(r);
    const rt_tenant *t = rt_find_tenant(s, "t05", 3);
    assert_non_null(t);
    assert_string_equal(t->routes[0].missing, "node9");
    assert_int_equal(t->routes[0].n_shards, 1);
    rt_snapshot_put(s);

    /* a tenant removed with its routes */
    ferry_record_list routes = {0};
    const char *prefix[] = {"t07"};
    must(ferry_catalog_list(cat, FERRY_REC_ROUTE, prefix, 1, &routes, &err), &err);
    b = ferry_batch_new();
    for (size_t i = 0; i < routes.n; i++)
        must(ferry_batch_delete(b, &routes.items[i], &err), &err);
    ferry_record_list_free(&routes);
    ferry_record tr;
    ferry_record_init(&tr, FERRY_REC_TENANT);
    snprintf(tr.u.tenant.name, sizeof tr.u.tenant.name, "t07");
    must(ferry_batch_delete(b, &tr, &err), &err);
    commit(cat, b);
    check(r, cat, true, "a tenant removed");
    s = rt_snapshot_get(r);
    assert_null(rt_find_tenant(s, "t07", 3));
    assert_int_equal(s->n_tenants, 20);
    rt_snapshot_put(s);

    /* a move of t01/0 node? -> node3: SWITCH with its route, then PUBLISH, then its record
     * gone (each with the route touched, as the mover does) */
    ferry_record rr;
    ferry_record_init(&rr, FERRY_REC_ROUTE);
    snprintf(rr.u.route.tenant, sizeof rr.u.route.tenant, "t01");
    rr.u.route.split = 0;
    must(ferry_catalog_get(cat, &rr, &err), &err);
    char from[FERRY_LIST_MAX];
    ferry_shard_set_format(&rr.u.route.shards, from, sizeof from);
    const char *to = strcmp(from, "node3") ? "node3" : "node1";
    ferry_record mv;
    ferry_record_init(&mv, FERRY_REC_MOVE);
    snprintf(mv.u.move.id, sizeof mv.u.move.id, "mv-inc-1");
    snprintf(mv.u.move.tenant, sizeof mv.u.move.tenant, "t01");
    mv.u.move.split = 0;
    shards_printf(&mv.u.move.from, "%s", from);
    shards_printf(&mv.u.move.to, "%s", to);
    mv.u.move.state = FERRY_MOVE_SWITCH;
    b = ferry_batch_new();
    must(ferry_batch_create(b, &mv, &err), &err);
    set_route(b, "t01", 0, to);
    commit(cat, b);
    check(r, cat, true, "a move in SWITCH");
    s = rt_snapshot_get(r);
    const rt_move *m = rt_find_move(s, "t01", 0);
    assert_non_null(m);
    assert_false(m->publishing);
    rt_readers rs;
    rt_read_set(s, rt_find_tenant(s, "t01", 3), 0, &rs);
    assert_int_equal(rs.mode, RT_READ_UNION);
    rt_snapshot_put(s);
    must(ferry_catalog_get(cat, &mv, &err), &err);
    mv.u.move.step = FERRY_MOVE_STEP_PUBLISH;
    b = ferry_batch_new();
    must(ferry_batch_update(b, &mv, &err), &err);
    set_route(b, "t01", 0, to);
    commit(cat, b);
    check(r, cat, true, "a move publishing");
    s = rt_snapshot_get(r);
    rt_read_set(s, rt_find_tenant(s, "t01", 3), 0, &rs);
    assert_int_equal(rs.mode, RT_READ_HOLD);
    rt_snapshot_put(s);
    must(ferry_catalog_get(cat, &mv, &err), &err);
    b = ferry_batch_new();
    must(ferry_batch_delete(b, &mv, &err), &err);
    set_route(b, "t01", 0, to);
    commit(cat, b);
    check(r, cat, true, "a move record removed");
    s = rt_snapshot_get(r);
    assert_null(rt_find_move(s, "t01", 0));
    assert_int_equal(s->n_moves, 0);
    rt_snapshot_put(s);

    /* a user */
    ferry_record u;
    ferry_record_init(&u, FERRY_REC_USER);
    snprintf(u.u.user.name, sizeof u.u.user.name, "alice");
    snprintf(u.u.user.salt, sizeof u.u.user.salt, "00112233445566778899aabbccddeeff");
    snprintf(u.u.user.hash, sizeof u.u.user.hash, "%064d", 0);
    snprintf(u.u.user.tenants, sizeof u.u.user.tenants, "t01,t02");
    must(ferry_catalog_create(cat, &u, &err), &err);
    check(r, cat, true, "a user added");
    uint64_t incremental = r->loads_incremental, full = r->loads_full;
    assert_true(incremental >= 8);

    /* a shard added: the slots the names resolve to change, so the next load reads everything */
    ferry_record sh;
    ferry_record_init(&sh, FERRY_REC_SHARD);
    snprintf(sh.u.shard.name, sizeof sh.u.shard.name, "node9");
    sh.u.shard.weight = 1;
    snprintf(sh.u.shard.replicas, sizeof sh.u.shard.replicas, "http://127.0.0.1:1");
    snprintf(sh.u.shard.agent, sizeof sh.u.shard.agent, "http://127.0.0.1:1");
    must(ferry_catalog_create(cat, &sh, &err), &err);
    check(r, cat, false, "a shard added");
    assert_true(r->loads_full > full);
    s = rt_snapshot_get(r);
    t = rt_find_tenant(s, "t05", 3);
    assert_string_equal(t->routes[0].missing, "");
    assert_int_equal(t->routes[0].n_shards, 2);
    rt_snapshot_put(s);
    /* and the next change is incremental again */
    must(ferry_split_set(cat, "new2", 1, true, false, &ch, &err), &err);
    check(r, cat, true, "a tenant added after the shard");

    /* repair needs (include/ferry/repair_need.h): a write node2 missed keeps reads of t02/0 on
     * node1; another write it missed (lists unchanged) leaves the routing version alone; one
     * node1 missed too makes both stale; repair clearing the record makes both readable again */
    b = ferry_batch_new();
    set_route(b, "t02", 0, "node1,node2");
    commit(cat, b);
    check(r, cat, true, "an rf 2 route");
    ferry_shard_set nm = shard_set_of("node2"), nh = shard_set_of("node1");
    must(ferry_repair_need_mark(cat, "t02", 0, &nm, &nh, &err), &err);
    check(r, cat, true, "a repair need");
    s = rt_snapshot_get(r);
    t = rt_find_tenant(s, "t02", 3);
    rt_read_set(s, t, 0, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.n_fresh, 1);
    assert_string_equal(r->shards[rs.shards[0]]->name, "node1");
    assert_string_equal(r->shards[rs.shards[1]]->name, "node2");
    rt_snapshot_put(s);
    uint64_t v1 = 0, v2 = 0;
    must(ferry_catalog_routing_version(cat, &v1, &err), &err);
    must(ferry_repair_need_mark(cat, "t02", 0, &nm, &nh, &err), &err);
    must(ferry_catalog_routing_version(cat, &v2, &err), &err);
    assert_int_equal(v1, v2);
    must(ferry_repair_need_mark(cat, "t02", 0, &nh, &nm, &err), &err);
    check(r, cat, true, "a repair need naming both replicas");
    s = rt_snapshot_get(r);
    rt_read_set(s, rt_find_tenant(s, "t02", 3), 0, &rs);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.n_fresh, 0);
    rt_snapshot_put(s);
    ferry_repair_need need;
    bool found = false;
    must(ferry_repair_need_get(cat, "t02", 0, &need, &found, &err), &err);
    assert_true(found);
    must(ferry_repair_need_clear(cat, &need, &err), &err);
    check(r, cat, true, "a repair need cleared");
    s = rt_snapshot_get(r);
    rt_read_set(s, rt_find_tenant(s, "t02", 3), 0, &rs);
    assert_int_equal(rs.n_fresh, 2);
    assert_int_equal(rs.n, 2);
    rt_snapshot_put(s);
    /* a tenant whose name is too long for the record's id: the id holds a hash, the change log
     * cannot name the tenant, so that reload reads everything */
    char longname[121];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    must(ferry_split_set(cat, longname, 1, true, false, &ch, &err), &err);
    b = ferry_batch_new();
    set_route(b, longname, 0, "node3,node1");
    commit(cat, b);
    check(r, cat, true, "an rf 2 route of a long name");
    nm = shard_set_of("node3");
    must(ferry_repair_need_mark(cat, longname, 0, &nm, &nh, &err), &err);
    check(r, cat, false, "a repair need of a long name");
    s = rt_snapshot_get(r);
    rt_read_set(s, rt_find_tenant(s, longname, strlen(longname)), 0, &rs);
    assert_int_equal(rs.n_fresh, 1);
    assert_string_equal(r->shards[rs.shards[0]]->name, "node1");
    rt_snapshot_put(s);
    ferry_router_stop(r);
    ferry_catalog_close(cat);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ferry-test.rtinc.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    write_config();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental_equals_full),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}

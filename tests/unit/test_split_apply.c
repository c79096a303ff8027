/* Registering tenants and raising split counts in a SQLite catalog (a temporary directory; no
 * server is contacted): ferry_split_add registers thousands of tenants in groups of atomic
 * batches, each tenant placed as ferry_split_place places it alone; a group meeting an existing
 * tenant registers the names before it and stops there; ferry_split_set places new splits next
 * to the tenant's own routes and around the shards' loads (a full shard is avoided), counting
 * every other tenant's slices on the shards of their routes; left-over records are replaced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shards_text.h"

#include "ferry/catalog.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

static char dir[256];
static int counter;

typedef struct shard_def {
    const char *name;
    double weight;
    uint64_t capacity;
} shard_def;

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

static ferry_catalog *setup(uint32_t rf, const shard_def *sh, size_t n)
{
    char url[512];
    snprintf(url, sizeof url, "sqlite:%s/c%d.db", dir, ++counter);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    must(ferry_catalog_open(url, &c, &err), &err);
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SETTINGS);
    snprintf(r.u.settings.name, sizeof r.u.settings.name, "t");
    snprintf(r.u.settings.hash, sizeof r.u.settings.hash, "xxh3");
    r.u.settings.rf = rf;
    r.u.settings.fill = 0.5;
    r.u.settings.pointer_format = 5;
    must(ferry_batch_create(b, &r, &err), &err);
    for (size_t i = 0; i < n; i++) {
        ferry_record_init(&r, FERRY_REC_SHARD);
        snprintf(r.u.shard.name, sizeof r.u.shard.name, "%s", sh[i].name);
        r.u.shard.weight = sh[i].weight;
        r.u.shard.capacity = sh[i].capacity;
        snprintf(r.u.shard.replicas, sizeof r.u.shard.replicas, "http://127.0.0.1:1");
        must(ferry_batch_create(b, &r, &err), &err);
    }
    must(ferry_catalog_commit(c, b, NULL, &err), &err);
    ferry_batch_free(b);
    return c;
}

/* Records a tenant with slices of the given sizes routed to the given shards. */
static void put_tenant(ferry_catalog *c, const char *tenant, size_t n, const uint64_t *bytes,
                       const char *const *routes)
{
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_TENANT);
    snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "%s", tenant);
    r.u.tenant.splits = (uint32_t)n;
    must(ferry_batch_create(b, &r, &err), &err);
    for (size_t k = 0; k < n; k++) {
        ferry_record_init(&r, FERRY_REC_SLICE);
        snprintf(r.u.slice.tenant, sizeof r.u.slice.tenant, "%s", tenant);
        r.u.slice.split = (uint32_t)k;
        r.u.slice.bytes = bytes[k];
        must(ferry_batch_create(b, &r, &err), &err);
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", tenant);
        r.u.route.split = (uint32_t)k;
        shards_printf(&r.u.route.shards, "%s", routes[k]);
        must(ferry_batch_create(b, &r, &err), &err);
    }
    must(ferry_catalog_commit(c, b, NULL, &err), &err);
    ferry_batch_free(b);
}

static void route_of(ferry_catalog *c, const char *tenant, uint32_t split, char *out, size_t size)
{
    ferry_err err = {0};
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", tenant);
    r.u.route.split = split;
    must(ferry_catalog_get(c, &r, &err), &err);
    ferry_shard_set_format(&r.u.route.shards, out, size);
}

/* ferry_split_place with each slice's shards as text in out[i * size] (the names of sin[] it
 * gives, comma-separated, as the catalog stores a route). */
static int place_text(const ferry_shard *const *sin, size_t ns, const uint64_t *base,
                      const ferry_split_slice_in *lin, size_t n, const char *hash, unsigned rf,
                      double fill, char *out, size_t size, ferry_err *err)
{
    uint32_t *slots = calloc(n * rf, sizeof *slots);
    assert_non_null(slots);
    int rc = ferry_split_place(sin, ns, base, lin, n, hash, rf, fill, slots, err);
    for (size_t i = 0; !rc && i < n; i++) {
        char *dst = out + i * size;
        size_t len = 0;
        dst[0] = '\0';
        for (unsigned j = 0; j < rf; j++)
            if (slots[i * rf + j] != FERRY_SPLIT_NO_SHARD) {
                assert_true(slots[i * rf + j] < ns);
                len += (size_t)snprintf(dst + len, size - len, "%s%s", len ? "," : "",
                                        sin[slots[i * rf + j]]->name);
                assert_true(len < size);
            }
    }
    free(slots);
    return rc;
}

/* Shard records as the catalog holds them (rec[]), and the pointers ferry_split_place takes. */
static void shards_of(const shard_def *sh, size_t n, ferry_shard *rec, const ferry_shard **out)
{
    for (size_t i = 0; i < n; i++) {
        memset(&rec[i], 0, sizeof rec[i]);
        snprintf(rec[i].name, sizeof rec[i].name, "%s", sh[i].name);
        rec[i].weight = sh[i].weight;
        rec[i].capacity = sh[i].capacity;
        out[i] = &rec[i];
    }
}

typedef struct added_log {
    size_t n;
    uint64_t last_version;
    char last[128];
} added_log;

static void on_added(const ferry_split_change *ch, void *arg)
{
    added_log *l = arg;
    l->n++;
    l->last_version = ch->routing_version;
    snprintf(l->last, sizeof l->last, "%s", ch->tenant);
    assert_int_equal(ch->from, 0);
}

static const shard_def five[] = {{"a", 1, 0}, {"b", 2, 0}, {"c", 1, 0}, {"d", 1.5, 0}, {"e", 1, 0}};

/* 2,500 tenants of 2 splits, rf 2: three batches; each tenant where it would go alone. */
static void test_add_many(void **state)
{
    (void)state;
    ferry_catalog *c = setup(2, five, 5);
    enum { N = 2500 };
    char(*names)[16] = calloc(N, sizeof *names);
    const char **argv = calloc(N, sizeof *argv);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "t%04d", i);
        argv[i] = names[i];
    }
    ferry_err err = {0};
    added_log log = {0};
    uint64_t v0 = 0;
    must(ferry_catalog_routing_version(c, &v0, &err), &err);
    must(ferry_split_add(c, argv, N, 2, false, on_added, &log, &err), &err);
    assert_int_equal(log.n, N);
    assert_string_equal(log.last, "t2499");
    assert_int_equal(log.last_version, v0 + 3); /* groups of 1000: three commits */
    ferry_shard srec[5];
    const ferry_shard *sin[5];
    shards_of(five, 5, srec, sin);
    for (int i = 0; i < N; i += 7) {
        ferry_split_slice_in lin[2] = {{names[i], 0, 0, NULL}, {names[i], 1, 0, NULL}};
        char want[2][FERRY_LIST_MAX], got[FERRY_LIST_MAX];
        must(place_text(sin, 5, NULL, lin, 2, "xxh3", 2, 0.5, &want[0][0], FERRY_LIST_MAX,
                               &err),
             &err);
        for (uint32_t k = 0; k < 2; k++) {
            route_of(c, names[i], k, got, sizeof got);
            assert_string_equal(got, want[k]);
        }
        /* 2 splits x rf 2 on 5 shards: four distinct shards */
        char all[2 * FERRY_LIST_MAX + 2];
        snprintf(all, sizeof all, "%s,%s", want[0], want[1]);
        for (size_t s = 0; s < 5; s++) {
            int n = 0;
            for (char *p = all; (p = strstr(p, five[s].name)); p++)
                n++;
            assert_true(n <= 1);
        }
    }
    free(names);
    free(argv);
    ferry_catalog_close(c);
}

/* A name that exists: the ones before it are registered, the error names it, none after. */
static void test_add_stops_at_existing(void **state)
{
    (void)state;
    ferry_catalog *c = setup(1, five, 5);
    uint64_t bytes[1] = {10};
    const char *routes[1] = {"a"};
    put_tenant(c, "bb", 1, bytes, routes);
    const char *argv[] = {"aa", "bb", "cc"};
    ferry_err err = {0};
    added_log log = {0};
    assert_int_equal(ferry_split_add(c, argv, 3, 1, false, on_added, &log, &err),
                     FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "tenant bb already exists"));
    assert_int_equal(log.n, 1);
    assert_string_equal(log.last, "aa");
    ferry_record t;
    ferry_record_init(&t, FERRY_REC_TENANT);
    snprintf(t.u.tenant.name, sizeof t.u.tenant.name, "aa");
    must(ferry_catalog_get(c, &t, &err), &err);
    snprintf(t.u.tenant.name, sizeof t.u.tenant.name, "cc");
    assert_int_equal(ferry_catalog_get(c, &t, &err), FERRY_ENOTFOUND);
    /* a bad name is refused the same way */
    const char *bad[] = {"dd", "no/slash"};
    assert_int_equal(ferry_split_add(c, bad, 2, 1, false, NULL, NULL, &err), FERRY_EINVAL);
    snprintf(t.u.tenant.name, sizeof t.u.tenant.name, "dd");
    must(ferry_catalog_get(c, &t, &err), &err);
    ferry_catalog_close(c);
}

/* Capacities: the loads come from every other tenant's slices on their routes' shards; a raise
 * keeps the tenant's splits apart and avoids the shard above its fill target. */
static void test_raise_next_to_own_and_loads(void **state)
{
    (void)state;
    /* c weighs most: blind to loads, the new splits would want it */
    const shard_def sh[] = {{"a", 1, 1000}, {"b", 1, 1000}, {"c", 50, 1000}, {"d", 1, 1000},
                            {"e", 1, 1000}, {"f", 1, 1000}};
    ferry_catalog *c = setup(1, sh, 6);
    /* other tenants: shard c above its fill target (600 > 0.5 x 1000), b at 300 */
    uint64_t big[2] = {400, 200}, small[1] = {300};
    const char *r_big[2] = {"c", "c"}, *r_small[1] = {"b"};
    put_tenant(c, "other1", 2, big, r_big);
    put_tenant(c, "other2", 1, small, r_small);
    /* acme: two splits on a and d */
    uint64_t own[2] = {50, 70};
    const char *r_own[2] = {"a", "d"};
    put_tenant(c, "acme", 2, own, r_own);
    ferry_err err = {0};
    ferry_split_change ch;
    must(ferry_split_set(c, "acme", 5, false, false, &ch, &err), &err);
    assert_int_equal(ch.from, 2);
    assert_int_equal(ch.to, 5);
    /* what the placement gives with the loads counted by hand (acme's own are in slices[]) */
    ferry_shard srec[6];
    const ferry_shard *sin[6];
    shards_of(sh, 6, srec, sin);
    uint64_t base[6] = {0, 300, 600, 0, 0, 0};
    ferry_shard_set on_a, on_d;
    shards_printf(&on_a, "a");
    shards_printf(&on_d, "d");
    ferry_split_slice_in lin[5] = {{"acme", 0, 50, &on_a}, {"acme", 1, 70, &on_d},
                                   {"acme", 2, 0, NULL}, {"acme", 3, 0, NULL},
                                   {"acme", 4, 0, NULL}};
    char want[5][FERRY_LIST_MAX];
    must(place_text(sin, 6, base, lin, 5, "xxh3", 1, 0.5, &want[0][0], FERRY_LIST_MAX,
                           &err),
         &err);
    assert_string_equal(want[0], "a");
    assert_string_equal(want[1], "d");
    char used[8] = "ad";
    size_t n_used = 2;
    for (uint32_t k = 2; k < 5; k++) {
        char got[FERRY_LIST_MAX];
        route_of(c, "acme", k, got, sizeof got);
        assert_string_equal(got, want[k]);
        assert_int_equal(strlen(got), 1);
        assert_null(strchr(used, got[0])); /* apart from the tenant's other splits */
        assert_true(got[0] != 'c');        /* full */
        used[n_used++] = got[0];
    }
    /* the loads are what kept c out */
    char blind[5][FERRY_LIST_MAX];
    must(place_text(sin, 6, NULL, lin, 5, "xxh3", 1, 0.5, &blind[0][0], FERRY_LIST_MAX,
                           &err),
         &err);
    assert_string_equal(blind[2], "c");
    ferry_catalog_close(c);
}

/* Once an inventory sync stored the shards' loads, registration reads those (one document), not
 * every slice and route: here the records say nothing is on c, the stored loads say c is full. */
static void test_stored_loads(void **state)
{
    (void)state;
    const shard_def sh[] = {{"a", 1, 1000}, {"b", 1, 1000}, {"c", 50, 1000}, {"d", 1, 1000}};
    ferry_catalog *c = setup(1, sh, 4);
    ferry_err err = {0};
    ferry_shard_load loads[] = {{"a", 100}, {"b", 100}, {"c", 900}, {"d", 0}, {"gone", 5}};
    must(ferry_catalog_loads_put(c, loads, 5, &err), &err);
    ferry_shard_load *got = NULL;
    size_t n = 0;
    int64_t when = 0;
    must(ferry_catalog_loads_get(c, &got, &n, &when, &err), &err);
    assert_int_equal(n, 5);
    assert_true(when > 0);
    free(got);
    const char *argv[] = {"newbie"};
    must(ferry_split_add(c, argv, 1, 3, false, NULL, NULL, &err), &err);
    ferry_shard srec[4];
    const ferry_shard *sin[4];
    shards_of(sh, 4, srec, sin);
    ferry_split_slice_in lin[3] = {{"newbie", 0, 0, NULL}, {"newbie", 1, 0, NULL},
                                   {"newbie", 2, 0, NULL}};
    char blind[3][FERRY_LIST_MAX];
    must(place_text(sin, 4, NULL, lin, 3, "xxh3", 1, 0.5, &blind[0][0], FERRY_LIST_MAX,
                           &err),
         &err);
    bool blind_c = false;
    for (uint32_t k = 0; k < 3; k++) {
        char r[FERRY_LIST_MAX];
        route_of(c, "newbie", k, r, sizeof r);
        assert_string_not_equal(r, "c"); /* over 0.5 x 1000 by the stored loads */
        blind_c |= !strcmp(blind[k], "c");
    }
    assert_true(blind_c); /* without the loads one split would have gone to c */
    ferry_catalog_close(c);
}

/* Slice and route records left by a tenant removed by hand are replaced, not kept. */
static void test_leftovers_replaced(void **state)
{
    (void)state;
    ferry_catalog *c = setup(1, five, 5);
    ferry_err err = {0};
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "ghost");
    shards_printf(&r.u.route.shards, "zz");
    must(ferry_catalog_create(c, &r, &err), &err);
    const char *argv[] = {"ghost"};
    added_log log = {0};
    must(ferry_split_add(c, argv, 1, 1, false, on_added, &log, &err), &err);
    assert_int_equal(log.n, 1);
    char got[FERRY_LIST_MAX];
    route_of(c, "ghost", 0, got, sizeof got);
    assert_string_not_equal(got, "zz");
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "ghost");
    must(ferry_catalog_get(c, &r, &err), &err);
    assert_int_equal(r.version, 1);
    ferry_catalog_close(c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ferry_split_apply_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_many),
        cmocka_unit_test(test_add_stops_at_existing),
        cmocka_unit_test(test_raise_next_to_own_and_loads),
        cmocka_unit_test(test_stored_loads),
        cmocka_unit_test(test_leftovers_replaced),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

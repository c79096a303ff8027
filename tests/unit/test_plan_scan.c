/* The catalog's compact scans (ferry/catalog_scan.h) against the records they stand for, on a
 * realistic catalog: 320 tenants of 1, 12 and 55 splits whose names sort differently as text and
 * as keys (t1 t10 t2, a a-b a.b, 123 45), rf overrides, routes of one and of two shards, routes on
 * a draining shard and a new shard to fill, a slice nobody routes, a route without a slice
 * record, partitions hot and cold, and (SQLite) documents not in the canonical form, which take
 * the decoder's path. Checked: every scanned row against ferry_catalog_list; the plan's view and
 * the plan itself (ferry_rebalance_plan_compute) against the ones computed from decoded records
 * (the way before the scans); ferry_cluster_status_read against the same sums done here from
 * ferry_catalog_list. $FERRY_TEST_CATALOG="zk://host:port" runs it on ZooKeeper
 * (tests/integration/plan_scan_zk.sh). */
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
#include <sqlite3.h>

#include "catalog/catalog_int.h"
#include "ferry/catalog.h"
#include "ferry/catalog_scan.h"
#include "ferry/cluster_status.h"
#include "ferry/move.h"
#include "ferry/strutil.h"
#include "flow/move_int.h"
#include "temp_catalog.h"

static temp_catalogs tc; /* tc.zk_base: "zk://host:port", or NULL for SQLite */

#define N_SHARDS 12
#define N_TENANTS 320

static void tenant_name(unsigned i, char *buf, size_t size)
{
    static const char *const odd[] = {"a", "a-b", "a.b", "A", "123", "45", "a_b", "t"};
    if (i < sizeof odd / sizeof *odd)
        snprintf(buf, size, "%s", odd[i]);
    else
        snprintf(buf, size, "t%u", i);
}

static uint32_t splits_of(unsigned i) { return i % 10 < 5 ? 1 : i % 10 < 9 ? 12 : 55; }

static void add(ferry_batch *b, ferry_record *r)
{
    ferry_err err = {0};
    assert_int_equal(ferry_batch_create(b, r, &err), FERRY_OK);
}

/* A route of tenant/split on shards (a comma-separated list) into *r, for the tests' batches. */
static void route_rec(ferry_record *r, const char *tenant, uint32_t split, const char *shards)
{
    ferry_record_init(r, FERRY_REC_ROUTE);
    snprintf(r->u.route.tenant, sizeof r->u.route.tenant, "%s", tenant);
    r->u.route.split = split;
    shards_printf(&r->u.route.shards, "%s", shards);
}

static void commit(ferry_catalog *c, ferry_batch *b)
{
    ferry_err err = {0};
    if (ferry_catalog_commit(c, b, NULL, &err))
        fail_msg("commit: %s", err.msg);
    ferry_batch_free(b);
}

/* Rewrites a stored document in another key order (SQLite only): what an older or foreign writer
 * could leave, read through the record decoder. */
static void rewrite_doc(ferry_catalog *c, const char *parent, const char *name, const char *doc)
{
    sqlite3 *db = cat_sqlite_handle(c);
    assert_non_null(db);
    char sql[1024];
    snprintf(sql, sizeof sql, "UPDATE records SET doc = '%s' WHERE parent = '%s' AND name = '%s'",
             doc, parent, name);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
}

/* A new catalog, and a batch (*b) that creates its settings: hash sha256, rf 1, hot_days 7. */
static ferry_catalog *new_catalog(ferry_batch **b)
{
    char url[512];
    temp_catalogs_url(&tc, "plan-scan", "timeout_ms=5000", url, sizeof url);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    if (ferry_catalog_open(url, &c, &err))
        fail_msg("open %s: %s", url, err.msg);
    *b = ferry_batch_new();
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_SETTINGS);
    snprintf(r.u.settings.name, sizeof r.u.settings.name, "t");
    snprintf(r.u.settings.hash, sizeof r.u.settings.hash, "sha256");
    r.u.settings.rf = 1;
    r.u.settings.fill = 0.85;
    r.u.settings.pointer_format = 5;
    r.u.settings.hot_days = 7;
    add(*b, &r);
    return c;
}

/* The catalog described at the top. */
static ferry_catalog *realistic(void)
{
    ferry_batch *b;
    ferry_catalog *c = new_catalog(&b);
    ferry_record r;
    for (int s = 0; s < N_SHARDS; s++) {
        ferry_record_init(&r, FERRY_REC_SHARD);
        snprintf(r.u.shard.name, sizeof r.u.shard.name, "s%02d", s);
        if (s % 4 != 3)
            snprintf(r.u.shard.zone, sizeof r.u.shard.zone, "z%d", s % 3);
        r.u.shard.weight = s % 5 == 0 ? 2 : 1;
        r.u.shard.capacity = s % 2 ? 0 : (uint64_t)400 << 30;
        r.u.shard.state = s == 10 ? FERRY_SHARD_NEW : s == 11 ? FERRY_SHARD_DRAINING
                                                              : FERRY_SHARD_ACTIVE;
        snprintf(r.u.shard.replicas, sizeof r.u.shard.replicas, "http://127.0.0.1:1");
        snprintf(r.u.shard.agent, sizeof r.u.shard.agent, "http://127.0.0.1:1");
        add(b, &r);
    }
    commit(c, b);
    uint32_t day0 = 20260101;
    for (unsigned i = 0; i < N_TENANTS; i++) {
        b = ferry_batch_new();
        char name[64];
        tenant_name(i, name, sizeof name);
        uint32_t splits = splits_of(i);
        ferry_record_init(&r, FERRY_REC_TENANT);
        snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "%s", name);
        r.u.tenant.splits = splits;
        r.u.tenant.rf = i % 17 == 3 ? 2 : 0;
        add(b, &r);
        for (uint32_t k = 0; k < splits; k++) {
            unsigned h = (i * 7919u + k * 104729u) % 11; /* s00..s09, and s11 (draining) */
            char shard[16], second[16];
            snprintf(shard, sizeof shard, "s%02u", h == 10 ? 11 : h);
            snprintf(second, sizeof second, "s%02u", (h + 3) % 10);
            bool two = i % 17 == 3 || i % 23 == 5;
            bool no_route = i == 9 && k == 0;
            ferry_record_init(&r, FERRY_REC_SLICE);
            snprintf(r.u.slice.tenant, sizeof r.u.slice.tenant, "%s", name);
            r.u.slice.split = k;
            r.u.slice.bytes = (uint64_t)(((uint64_t)50 << 30) / (1 + i) / splits) + 1000 * k;
            r.u.slice.rows = r.u.slice.bytes / 40;
            shards_printf(&r.u.slice.placement, "%s", shard);
            add(b, &r);
            if (!no_route) {
                ferry_record_init(&r, FERRY_REC_ROUTE);
                snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", name);
                r.u.route.split = k;
                shards_printf(&r.u.route.shards, two ? "%s,%s" : "%s", shard,
                         second);
                add(b, &r);
            }
            if (k < 2 && i % 5 == 1) {
                for (int d = 0; d < 3; d++) {
                    ferry_record_init(&r, FERRY_REC_PARTITION);
                    ferry_partition *p = &r.u.partition;
                    snprintf(p->server, sizeof p->server, "%s", shard);
                    snprintf(p->table, sizeof p->table, "events");
                    snprintf(p->tenant, sizeof p->tenant, "%s", name);
                    p->split = k;
                    p->day = d == 2 ? 0 : day0 + (uint32_t)d + i % 20;
                    snprintf(p->partition_id, sizeof p->partition_id, "p%u-%u-%d", i, k, d);
                    p->tier = d == 1 ? FERRY_TIER_COLD : FERRY_TIER_HOT;
                    p->bytes = 1000u * (unsigned)d + i;
                    p->rows = i;
                    add(b, &r);
                }
            }
        }
        commit(c, b);
    }
    /* a route without a slice record, and a route whose tenant has no record */
    b = ferry_batch_new();
    route_rec(&r, "t20", 40, "s04");
    add(b, &r);
    route_rec(&r, "ghost", 0, "s02");
    add(b, &r);
    commit(c, b);
    if (!tc.zk_base) {
        rewrite_doc(c, "slices/t19", "10",
                    "{\"tenant\":\"t19\",\"split\":10,\"placement\":\"s03\",\"rows\":7,"
                    "\"bytes\":123456789}");
        rewrite_doc(c, "routes/t19", "11", "{\"split\":11,\"tenant\":\"t19\",\"shards\":\"s05\"}");
        rewrite_doc(c, "tenants", "t29", "{\"splits\":55,\"name\":\"t29\"}");
        rewrite_doc(c, "slices/a-b", "0",
                    "{\"bytes\":5, \"placement\":\"s01\",\"rows\":1,\"split\":0,\"tenant\":\"a-b\"}");
        rewrite_doc(c, "partitions/s00/events", "p11-0-0",
                    "{\"tier\":\"cold\",\"bytes\":1,\"day\":20260101,\"partition_id\":\"p11-0-0\","
                    "\"rows\":1,\"server\":\"s00\",\"split\":0,\"table\":\"events\","
                    "\"tenant\":\"t11\"}");
    }
    return c;
}

/* ---- rows against records ---- */

typedef struct got_slice {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    bool slice, route;
    uint64_t bytes, rows;
    char placement[FERRY_LIST_MAX], shards[FERRY_LIST_MAX];
    int64_t version, route_version;
} got_slice;

typedef struct got {
    got_slice *v;
    size_t n, cap;
} got;

static int take_slice(const ferry_slice_row *row, void *arg, ferry_err *err)
{
    (void)err;
    got *g = arg;
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 1024;
        g->v = realloc(g->v, g->cap * sizeof *g->v);
        assert_non_null(g->v);
    }
    got_slice *s = &g->v[g->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->tenant, sizeof s->tenant, "%s", row->tenant);
    s->split = row->split;
    s->slice = row->placement != NULL;
    s->route = row->shards != NULL;
    s->bytes = row->bytes;
    s->rows = row->rows;
    snprintf(s->placement, sizeof s->placement, "%s", row->placement ? row->placement : "");
    snprintf(s->shards, sizeof s->shards, "%s", row->shards ? row->shards : "");
    s->version = row->version;
    s->route_version = row->route_version;
    return FERRY_OK;
}

static int got_cmp(const void *a, const void *b)
{
    const got_slice *x = a, *y = b;
    int d = strcmp(x->tenant, y->tenant);
    return d ? d : (x->split > y->split) - (x->split < y->split);
}

/* Every scanned slice row against the records listed. */
static void check_slice_rows(ferry_catalog *c)
{
    ferry_err err = {0};
    got g = {0};
    if (ferry_catalog_scan_slices(c, take_slice, &g, &err))
        fail_msg("scan: %s", err.msg);
    /* tenants in bytewise order, each tenant's rows together */
    for (size_t i = 1; i < g.n; i++)
        assert_true(strcmp(g.v[i - 1].tenant, g.v[i].tenant) <= 0);
    qsort(g.v, g.n, sizeof *g.v, got_cmp);
    ferry_record_list slices = {0}, routes = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, NULL, 0, &slices, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &routes, &err), FERRY_OK);
    size_t n_slice = 0, n_route = 0, both = 0;
    for (size_t i = 0; i < g.n; i++) {
        n_slice += g.v[i].slice;
        n_route += g.v[i].route;
        both += g.v[i].slice && g.v[i].route;
    }
    assert_int_equal(n_slice, slices.n);
    assert_int_equal(n_route, routes.n);
    assert_int_equal(g.n, slices.n + routes.n - both);
    assert_true(slices.n > 3000 && n_slice != both && n_route != both);
    for (size_t i = 0; i < slices.n; i++) {
        const ferry_slice *s = &slices.items[i].u.slice;
        got_slice key = {.split = s->split};
        snprintf(key.tenant, sizeof key.tenant, "%s", s->tenant);
        got_slice *x = bsearch(&key, g.v, g.n, sizeof *g.v, got_cmp);
        assert_non_null(x);
        assert_true(x->slice);
        assert_int_equal(x->bytes, s->bytes);
        assert_int_equal(x->rows, s->rows);
        char text[FERRY_SHARDS_TEXT_MAX];
        assert_string_equal(x->placement, ferry_shard_set_str(&s->placement, text));
        assert_int_equal(x->version, slices.items[i].version);
    }
    for (size_t i = 0; i < routes.n; i++) {
        const ferry_route *r = &routes.items[i].u.route;
        got_slice key = {.split = r->split};
        snprintf(key.tenant, sizeof key.tenant, "%s", r->tenant);
        got_slice *x = bsearch(&key, g.v, g.n, sizeof *g.v, got_cmp);
        assert_non_null(x);
        assert_true(x->route);
        char text[FERRY_SHARDS_TEXT_MAX];
        assert_string_equal(x->shards, ferry_shard_set_str(&r->shards, text));
        assert_int_equal(x->route_version, routes.items[i].version);
    }
    if (!tc.zk_base) { /* the rewritten documents were read through the decoder, the same */
        got_slice key = {.tenant = "t19", .split = 10};
        got_slice *x = bsearch(&key, g.v, g.n, sizeof *g.v, got_cmp);
        assert_non_null(x);
        assert_int_equal(x->bytes, 123456789);
        assert_string_equal(x->placement, "s03");
    }
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    free(g.v);
}

static void test_slice_rows(void **state)
{
    (void)state;
    ferry_catalog *c = realistic();
    check_slice_rows(c);
    ferry_catalog_close(c);
}

/* SQLite: while another connection holds a write transaction, the scan cannot hold writers back
 * to start its two connections on one state: it reads both folders on one connection in the
 * calling thread, and says the same. */
static void test_slice_rows_beside_a_writer(void **state)
{
    (void)state;
    if (tc.zk_base)
        skip();
    ferry_catalog *c = realistic();
    sqlite3 *w = NULL;
    assert_int_equal(sqlite3_open_v2(sqlite3_db_filename(cat_sqlite_handle(c), "main"), &w,
                                     SQLITE_OPEN_READWRITE, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(w, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(w, "UPDATE meta SET value = value WHERE key = "
                                     "'routing_version'", NULL, NULL, NULL),
                     SQLITE_OK);
    check_slice_rows(c);
    assert_int_equal(sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(w);
    ferry_catalog_close(c);
}

/* ---- SQLite: the slice packs (lib/catalog/slice_pack.c) ---- */

static long long sql_count(ferry_catalog *c, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(cat_sqlite_handle(c), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static void sql_run(ferry_catalog *c, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(cat_sqlite_handle(c), sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

/* The marked tenants' packs built, as ferry's next commit would. */
static void refresh_packs(ferry_catalog *c)
{
    ferry_err err = {0};
    sql_run(c, "BEGIN IMMEDIATE");
    if (cat_slice_pack_refresh(c, &err))
        fail_msg("refresh: %s", err.msg);
    sql_run(c, "COMMIT");
}

static int count_row(const ferry_slice_row *row, void *arg, ferry_err *err)
{
    (void)row;
    (void)err;
    ++*(size_t *)arg;
    return FERRY_OK;
}

/* Whether a scan now reads the packs (and how many rows they give). */
static bool packs_used(ferry_catalog *c, size_t *rows)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(sqlite3_db_filename(cat_sqlite_handle(c), "main"), &db,
                                     SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ferry_err err = {0};
    bool used = false;
    *rows = 0;
    if (cat_slice_pack_scan(db, count_row, rows, &used, &err))
        fail_msg("pack scan: %s", err.msg);
    sqlite3_close(db);
    return used;
}

/* Every row in scan order. */
static void scan_rows(ferry_catalog *c, got *g)
{
    ferry_err err = {0};
    memset(g, 0, sizeof *g);
    if (ferry_catalog_scan_slices(c, take_slice, g, &err))
        fail_msg("scan: %s", err.msg);
}

/* The rows from the records' join (every tenant marked first) and from the packs (built again):
 * the same rows in the same order, and right against the records. */
static void packs_match_records(ferry_catalog *c)
{
    size_t n;
    sql_run(c, "INSERT OR IGNORE INTO slice_pack_dirty(tenant) SELECT tenant FROM slice_pack");
    assert_false(packs_used(c, &n));
    got joined, packed;
    scan_rows(c, &joined);
    refresh_packs(c);
    assert_int_equal(sql_count(c, "SELECT count(*) FROM slice_pack_dirty"), 0);
    assert_true(packs_used(c, &n));
    assert_int_equal(n, joined.n);
    scan_rows(c, &packed);
    assert_int_equal(packed.n, joined.n);
    for (size_t i = 0; i < joined.n; i++)
        if (memcmp(&joined.v[i], &packed.v[i], sizeof *joined.v))
            fail_msg("row %zu: %s/%u from the records, %s/%u from the packs", i,
                     joined.v[i].tenant, joined.v[i].split, packed.v[i].tenant,
                     packed.v[i].split);
    check_slice_rows(c);
    free(joined.v);
    free(packed.v);
}

static got_slice *row_of(got *g, const char *tenant, uint32_t split)
{
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->v[i].tenant, tenant) && g->v[i].split == split)
            return &g->v[i];
    return NULL;
}

/* SQLite: the scans read the packs when no tenant is marked, with the same rows in the same
 * order as the records' join (documents not in the canonical form, routes without a slice
 * record, a route whose tenant has no record, splits whose text order is not their number's);
 * a write behind ferry's back (the sqlite3 shell) marks its tenant, and the scans read records
 * until ferry's next commit builds the pack again; a damaged pack is an error naming it; a
 * catalog laid out before the packs gets them when it is opened. */
static void test_slice_rows_from_packs(void **state)
{
    (void)state;
    if (tc.zk_base)
        skip();
    ferry_catalog *c = realistic();
    size_t n;
    /* the documents rewritten behind ferry's back left their tenants marked */
    assert_true(sql_count(c, "SELECT count(*) FROM slice_pack_dirty WHERE tenant IN ('t19', "
                             "'a-b')") == 2);
    assert_false(packs_used(c, &n));
    check_slice_rows(c);
    packs_match_records(c);

    rewrite_doc(c, "routes/t20", "40", "{\"shards\":\"s07\",\"split\":40,\"tenant\":\"t20\"}");
    assert_false(packs_used(c, &n));
    got g;
    scan_rows(c, &g);
    got_slice *x = row_of(&g, "t20", 40);
    assert_non_null(x);
    assert_string_equal(x->shards, "s07");
    free(g.v);
    /* ferry's next commit (of anything) builds the marked pack again */
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    route_rec(&r, "ghost", 1, "s03,s04");
    add(b, &r);
    commit(c, b);
    assert_true(packs_used(c, &n));
    scan_rows(c, &g);
    assert_string_equal(row_of(&g, "t20", 40)->shards, "s07");
    assert_string_equal(row_of(&g, "ghost", 1)->shards, "s03,s04");
    free(g.v);
    packs_match_records(c);

    /* a tenant whose records are all deleted has no pack */
    b = ferry_batch_new();
    ferry_err err = {0};
    for (uint32_t k = 0; k < 2; k++) {
        route_rec(&r, "ghost", k, "s02");
        r.version = FERRY_VERSION_ANY;
        assert_int_equal(ferry_batch_delete(b, &r, &err), FERRY_OK);
    }
    commit(c, b);
    assert_int_equal(sql_count(c, "SELECT count(*) FROM slice_pack WHERE tenant = 'ghost'"), 0);
    packs_match_records(c);

    /* damaged: an error that names the pack, and what rebuilds it */
    sql_run(c, "UPDATE slice_pack SET pack = '1\tx' WHERE tenant = 't30'");
    memset(&g, 0, sizeof g);
    assert_int_equal(ferry_catalog_scan_slices(c, take_slice, &g, &err), FERRY_EIO);
    assert_non_null(strstr(err.msg, "slice pack of tenant t30 is damaged at line 1"));
    free(g.v);
    packs_match_records(c);

    /* laid out before the packs: built when the catalog is opened */
    char url[1100];
    snprintf(url, sizeof url, "sqlite:%s", sqlite3_db_filename(cat_sqlite_handle(c), "main"));
    sql_run(c, "DROP TRIGGER slice_pack_insert; DROP TRIGGER slice_pack_update;"
               " DROP TRIGGER slice_pack_delete; DROP TABLE slice_pack;"
               " DROP TABLE slice_pack_dirty; DELETE FROM meta WHERE key = 'slice_pack'");
    got before;
    scan_rows(c, &before);
    ferry_catalog_close(c);
    if (ferry_catalog_open(url, &c, &err))
        fail_msg("open %s: %s", url, err.msg);
    assert_int_equal(sql_count(c, "SELECT count(*) FROM slice_pack_dirty"), 0);
    assert_true(packs_used(c, &n));
    assert_int_equal(n, before.n);
    scan_rows(c, &g);
    assert_int_equal(g.n, before.n);
    assert_memory_equal(g.v, before.v, g.n * sizeof *g.v);
    free(g.v);
    free(before.v);
    packs_match_records(c);
    ferry_catalog_close(c);
}

typedef struct stopper {
    size_t n, at;
} stopper;

static int stop_at(const ferry_slice_row *row, void *arg, ferry_err *err)
{
    (void)row;
    stopper *x = arg;
    if (++x->n == x->at)
        return ferry_err_set(err, FERRY_ECONFLICT, "stopped at row %zu", x->n);
    return FERRY_OK;
}

/* A callback that stops the scan part-way (on SQLite while both folders' threads are still
 * reading: several chunks in) gets its own error back, nothing more is called, and the catalog
 * is left as it was: writable (nothing holds writers back), scanned again in full. */
static void test_slice_scan_stopped(void **state)
{
    (void)state;
    ferry_catalog *c = realistic();
    ferry_err err = {0};
    stopper x = {.at = 1500};
    assert_int_equal(ferry_catalog_scan_slices(c, stop_at, &x, &err), FERRY_ECONFLICT);
    assert_string_equal(err.msg, "stopped at row 1500");
    assert_int_equal(x.n, 1500);
    x = (stopper){.at = 1};
    assert_int_equal(ferry_catalog_scan_slices(c, stop_at, &x, &err), FERRY_ECONFLICT);
    assert_int_equal(x.n, 1);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_TENANT);
    snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "after-stop");
    r.u.tenant.splits = 1;
    assert_int_equal(ferry_catalog_create(c, &r, &err), FERRY_OK);
    check_slice_rows(c);
    ferry_catalog_close(c);
}

typedef struct got_tenants {
    ferry_record_list *want;
    size_t n;
} got_tenants;

static int take_tenant(const ferry_tenant_row *row, void *arg, ferry_err *err)
{
    (void)err;
    got_tenants *g = arg;
    assert_true(g->n < g->want->n);
    const ferry_record *w = &g->want->items[g->n++];
    assert_string_equal(row->name, w->u.tenant.name);
    assert_int_equal(row->splits, w->u.tenant.splits);
    assert_int_equal(row->rf, w->u.tenant.rf);
    assert_int_equal(row->version, w->version);
    return FERRY_OK;
}

static int rec_tenant_cmp(const void *a, const void *b)
{
    return strcmp(((const ferry_record *)a)->u.tenant.name,
                  ((const ferry_record *)b)->u.tenant.name);
}

typedef struct got_parts {
    ferry_record_list *want;
    size_t n;
} got_parts;

static int take_partition(const ferry_partition_row *row, void *arg, ferry_err *err)
{
    (void)err;
    got_parts *g = arg;
    const ferry_record *w = NULL;
    for (size_t i = 0; i < g->want->n && !w; i++) {
        const ferry_partition *p = &g->want->items[i].u.partition;
        if (!strcmp(p->server, row->server) && !strcmp(p->table, row->table) &&
            !strcmp(p->partition_id, row->partition_id))
            w = &g->want->items[i];
    }
    assert_non_null(w);
    const ferry_partition *p = &w->u.partition;
    assert_string_equal(row->tenant, p->tenant);
    assert_int_equal(row->day, p->day);
    assert_int_equal(row->split, p->split);
    assert_int_equal(row->tier, p->tier);
    assert_int_equal(row->bytes, p->bytes);
    assert_int_equal(row->rows, p->rows);
    assert_int_equal(row->version, w->version);
    g->n++;
    return FERRY_OK;
}

static void test_tenant_and_partition_rows(void **state)
{
    (void)state;
    ferry_catalog *c = realistic();
    ferry_err err = {0};
    ferry_record_list tenants = {0}, parts = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_TENANT, NULL, 0, &tenants, &err), FERRY_OK);
    /* the scan's order is bytewise (the list's compares numbers as numbers: "123" after "45") */
    qsort(tenants.items, tenants.n, sizeof *tenants.items, rec_tenant_cmp);
    got_tenants gt = {&tenants, 0};
    assert_int_equal(ferry_catalog_scan_tenants(c, take_tenant, &gt, &err), FERRY_OK);
    assert_int_equal(gt.n, N_TENANTS);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_PARTITION, NULL, 0, &parts, &err), FERRY_OK);
    got_parts gp = {&parts, 0};
    assert_int_equal(ferry_catalog_scan_partitions(c, take_partition, &gp, &err), FERRY_OK);
    assert_int_equal(gp.n, parts.n);
    assert_true(parts.n > 100);
    ferry_record_list_free(&tenants);
    ferry_record_list_free(&parts);
    ferry_catalog_close(c);
}

/* ---- the plan's view and the plan ---- */

static void same_view(const mv_view *a, const mv_view *b)
{
    assert_int_equal(a->n_tenants, b->n_tenants);
    for (size_t i = 0; i < a->n_tenants; i++) {
        assert_string_equal(a->tenants[i].name, b->tenants[i].name);
        assert_int_equal(a->tenants[i].splits, b->tenants[i].splits);
        assert_int_equal(a->tenants[i].rf, b->tenants[i].rf);
        assert_int_equal(a->tenants[i].version, b->tenants[i].version);
    }
    assert_int_equal(a->n_slices, b->n_slices);
    for (size_t i = 0; i < a->n_slices; i++) {
        const mv_view_slice *x = &a->slices[i], *y = &b->slices[i];
        assert_string_equal(x->tenant, y->tenant);
        assert_int_equal(x->split, y->split);
        assert_int_equal(x->bytes, y->bytes);
        assert_int_equal(x->rows, y->rows);
        assert_int_equal(x->version, y->version);
        assert_int_equal(x->route_version, y->route_version);
        assert_int_equal(x->has_slice, y->has_slice);
        assert_int_equal(x->has_route, y->has_route);
        assert_int_equal(x->n_placement, y->n_placement);
        assert_int_equal(x->n_route, y->n_route);
        for (size_t k = 0; k < x->n_placement; k++)
            assert_string_equal(a->shards.names[mv_view_placement(a, x)[k]],
                                b->shards.names[mv_view_placement(b, y)[k]]);
        for (size_t k = 0; k < x->n_route; k++)
            assert_string_equal(a->shards.names[mv_view_route(a, x)[k]],
                                b->shards.names[mv_view_route(b, y)[k]]);
    }
}

static void same_plan(const ferry_rebalance_plan *a, const ferry_rebalance_plan *b)
{
    assert_int_equal(a->n_moves, b->n_moves);
    assert_int_equal(a->moved_bytes, b->moved_bytes);
    assert_int_equal(a->total_bytes, b->total_bytes);
    assert_int_equal(a->slices, b->slices);
    for (size_t i = 0; i < a->n_moves; i++) {
        const ferry_planned_move *x = &a->moves[i], *y = &b->moves[i];
        assert_int_equal(x->kind, y->kind);
        assert_string_equal(x->tenant, y->tenant);
        assert_int_equal(x->split, y->split);
        assert_string_equal(x->from, y->from);
        assert_string_equal(x->to, y->to);
        assert_int_equal(x->bytes, y->bytes);
    }
}

static void test_plan_same_as_records(void **state)
{
    (void)state;
    ferry_catalog *c = realistic();
    ferry_err err = {0};
    mv_view v, w;
    ferry_record_list shards = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SHARD, NULL, 0, &shards, &err), FERRY_OK);
    const char **names = calloc(shards.n + 1, sizeof *names);
    for (size_t i = 0; i < shards.n; i++)
        names[i] = shards.items[i].u.shard.name;
    if (mv_view_read(c, names, shards.n, &v, &err))
        fail_msg("view: %s", err.msg);
    if (mv_view_read_records(c, names, shards.n, &w, &err))
        fail_msg("view from records: %s", err.msg);
    free(names);
    ferry_record_list_free(&shards);
    same_view(&v, &w);
    mv_view_free(&v);
    mv_view_free(&w);
    ferry_rebalance_plan p, q;
    if (ferry_rebalance_plan_compute(c, &p, &err))
        fail_msg("plan: %s", err.msg);
    if (mv_plan_compute_records(c, &q, &err))
        fail_msg("plan from records: %s", err.msg);
    same_plan(&p, &q);
    /* the plan has work of every kind: the new shard filled, the draining one emptied, replicas
     * added for the rf 2 tenants and dropped for the two-shard routes of rf 1 ones */
    size_t kinds[3] = {0}, to_new = 0, from_draining = 0;
    for (size_t i = 0; i < p.n_moves; i++) {
        kinds[p.moves[i].kind]++;
        to_new += !strcmp(p.moves[i].to, "s10");
        from_draining += !strcmp(p.moves[i].from, "s11");
    }
    assert_true(kinds[FERRY_PLAN_MOVE] > 10);
    assert_true(kinds[FERRY_PLAN_DROP] > 0);
    assert_true(to_new > 0 && from_draining > 0);
    ferry_rebalance_plan_free(&p);
    ferry_rebalance_plan_free(&q);
    ferry_catalog_close(c);
}

/* ---- the view's shard indexes, with names that have no shard record ---- */

/* The shard table alone: thousands of distinct lists (the index pool grows), names without a
 * record past the first chunk of the table, and its limit of MV_SHARDS_TABLE_MAX names. */
static void test_shard_table(void **state)
{
    (void)state;
    const char *const known[] = {"b", "a", "c"};
    ferry_err err = {0};
    mv_shards t;
    assert_int_equal(mv_shards_init(&t, known, 3, &err), FERRY_OK);
    assert_int_equal(mv_shards_find(&t, "a"), 1);
    assert_int_equal(mv_shards_find(&t, "b"), 0);
    assert_int_equal(mv_shards_find(&t, "c"), 2);
    uint32_t at, first_at = 0;
    uint8_t n;
    for (unsigned i = 0; i < 3000; i++) {
        char text[64], x[16];
        snprintf(x, sizeof x, "x%u", i);
        snprintf(text, sizeof text, "%s,%s", known[i % 3], x);
        assert_int_equal(mv_shards_put(&t, text, &at, &n, &err), FERRY_OK);
        first_at = i ? first_at : at;
        assert_int_equal(n, 2);
        assert_int_equal(t.idx[at], i % 3);
        assert_int_equal(t.idx[at + 1], 3 + i);
        assert_false(mv_shard_known(&t, t.idx[at + 1]));
        assert_string_equal(t.names[t.idx[at + 1]], x);
    }
    assert_int_equal(t.n_idx, 6000);
    assert_int_equal(mv_shards_put(&t, "b,x0", &at, &n, &err), FERRY_OK);
    assert_int_equal(at, first_at); /* a text met before: its list, not another */
    assert_int_equal(mv_shards_put(&t, "a,a", &at, &n, &err), FERRY_EINVAL);
    ferry_err_clear(&err);
    /* the table's limit: names past MV_SHARDS_TABLE_MAX are refused, not wrapped */
    int rc = FERRY_OK;
    for (unsigned i = 0; !rc; i++) {
        char text[32];
        snprintf(text, sizeof text, "y%u", i);
        rc = mv_shards_put(&t, text, &at, &n, &err);
        assert_true(rc || t.n <= MV_SHARDS_TABLE_MAX);
    }
    assert_int_equal(rc, FERRY_EUNSUPPORTED);
    assert_int_equal(t.n, MV_SHARDS_TABLE_MAX);
    mv_shards_seal(&t);
    assert_int_equal(mv_shards_find(&t, "x2999"), 3002);
    mv_shards_free(&t);
}

/* Tenant u of 6 splits on shards s0 s1 s2: u/0 "s0", u/1 "s1,s0", u/2 "s0" (the text of u/0),
 * u/3 on "s2,gone" with placement "gone" (no shard record), u/4 a slice nobody routes, u/5 a
 * route to "old" (no shard record) without a slice record. */
static ferry_catalog *with_unknown_shards(void)
{
    ferry_batch *b;
    ferry_catalog *c = new_catalog(&b);
    ferry_record r;
    for (int k = 0; k < 3; k++) {
        ferry_record_init(&r, FERRY_REC_SHARD);
        snprintf(r.u.shard.name, sizeof r.u.shard.name, "s%d", k);
        r.u.shard.weight = 1;
        snprintf(r.u.shard.replicas, sizeof r.u.shard.replicas, "http://127.0.0.1:1");
        add(b, &r);
    }
    ferry_record_init(&r, FERRY_REC_TENANT);
    snprintf(r.u.tenant.name, sizeof r.u.tenant.name, "u");
    r.u.tenant.splits = 6;
    add(b, &r);
    static const char *const placement[] = {"s0", "s1", "s0", "gone", "s1", NULL};
    static const char *const route[] = {"s0", "s1,s0", "s0", "s2,gone", NULL, "old"};
    for (uint32_t k = 0; k < 6; k++) {
        if (placement[k]) {
            ferry_record_init(&r, FERRY_REC_SLICE);
            snprintf(r.u.slice.tenant, sizeof r.u.slice.tenant, "u");
            r.u.slice.split = k;
            r.u.slice.bytes = 1000 * (k + 1);
            shards_printf(&r.u.slice.placement, "%s", placement[k]);
            add(b, &r);
        }
        if (route[k]) {
            ferry_record_init(&r, FERRY_REC_ROUTE);
            snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "u");
            r.u.route.split = k;
            shards_printf(&r.u.route.shards, "%s", route[k]);
            add(b, &r);
        }
    }
    commit(c, b);
    return c;
}

static void test_view_shard_indexes(void **state)
{
    (void)state;
    ferry_catalog *c = with_unknown_shards();
    ferry_err err = {0};
    const char *const names[] = {"s0", "s1", "s2"};
    mv_view v, w;
    if (mv_view_read(c, names, 3, &v, &err))
        fail_msg("view: %s", err.msg);
    /* the table: the shards given, in their order, then the names without a record as met */
    assert_int_equal(v.shards.n_known, 3);
    assert_int_equal(v.shards.n, 5);
    for (size_t k = 0; k < 3; k++) {
        assert_string_equal(v.shards.names[k], names[k]);
        assert_true(mv_shard_known(&v.shards, (mv_shard)k));
    }
    assert_string_equal(v.shards.names[3], "gone");
    assert_string_equal(v.shards.names[4], "old");
    assert_false(mv_shard_known(&v.shards, 3));
    assert_false(mv_shard_known(&v.shards, 4));
    assert_int_equal(mv_shards_find(&v.shards, "s2"), 2);
    assert_int_equal(mv_shards_find(&v.shards, "old"), 4);
    assert_int_equal(mv_shards_find(&v.shards, "s3"), -1);
    assert_null(v.shards.texts); /* sealed: the texts are not kept */
    assert_int_equal(v.n_slices, 6);
    static const int want_route[6][3] = {{0, -1}, {1, 0, -1}, {0, -1}, {2, 3, -1}, {-1}, {4, -1}};
    static const int want_placement[6][2] = {{0, -1}, {1, -1}, {0, -1}, {3, -1}, {1, -1}, {-1}};
    for (size_t i = 0; i < 6; i++) {
        const mv_view_slice *x = &v.slices[i];
        assert_string_equal(x->tenant, "u");
        assert_int_equal(x->split, i);
        assert_int_equal(x->has_slice, i != 5);
        assert_int_equal(x->has_route, i != 4);
        assert_int_equal(x->version >= 0, i != 5);
        assert_int_equal(x->route_version >= 0, i != 4);
        size_t n = 0;
        for (; want_route[i][n] >= 0; n++)
            assert_int_equal(mv_view_route(&v, x)[n], want_route[i][n]);
        assert_int_equal(x->n_route, n);
        for (n = 0; want_placement[i][n] >= 0; n++)
            assert_int_equal(mv_view_placement(&v, x)[n], want_placement[i][n]);
        assert_int_equal(x->n_placement, n);
    }
    /* one text, one list: u/0's and u/2's route and the placements "s0" share their indexes */
    assert_int_equal(v.slices[0].route, v.slices[2].route);
    assert_int_equal(v.slices[0].route, v.slices[0].placement);
    if (mv_view_read_records(c, names, 3, &w, &err))
        fail_msg("view from records: %s", err.msg);
    same_view(&v, &w);
    assert_int_equal(w.shards.n, 5);
    mv_view_free(&v);
    mv_view_free(&w);
    /* the plan cannot act on a replica it has no shard record of: refused, the name said */
    ferry_rebalance_plan p;
    assert_int_equal(ferry_rebalance_plan_compute(c, &p, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "tenant u split 3 is routed to shard gone"));
    ferry_err_clear(&err);
    /* the status counts them apart, none lost: gone holds u/3, old a route without a slice */
    ferry_cluster_status st;
    if (ferry_cluster_status_read(c, 5, &st, &err))
        fail_msg("status: %s", err.msg);
    assert_int_equal(st.n_shards, 3);
    assert_int_equal(st.shards[0].slices, 3);
    assert_int_equal(st.shards[0].bytes, 1000 + 2000 + 3000);
    assert_int_equal(st.shards[1].slices, 1);
    assert_int_equal(st.shards[2].slices, 1);
    assert_int_equal(st.shards[2].bytes, 4000);
    assert_int_equal(st.n_unknown, 2);
    assert_string_equal(st.unknown[0].shard.name, "gone");
    assert_int_equal(st.unknown[0].slices, 1);
    assert_int_equal(st.unknown[0].bytes, 4000);
    assert_string_equal(st.unknown[1].shard.name, "old");
    assert_int_equal(st.unknown[1].slices, 1);
    assert_int_equal(st.unknown[1].bytes, 0);
    ferry_cluster_status_free(&st);
    size_t n = 0;
    assert_int_equal(ferry_shard_routes_count(c, "s0", &n, &err), FERRY_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ferry_shard_routes_count(c, "s2", &n, &err), FERRY_OK);
    assert_int_equal(n, 1);
    if (!tc.zk_base) {
        /* stored text as another writer may leave it: blanks and empty items do not count (the
         * decoder's reading); a name twice breaks the rule and fails the read, the slice named */
        rewrite_doc(c, "routes/u", "2", "{\"shards\":\" s1 , ,s0\",\"split\":2,\"tenant\":\"u\"}");
        if (mv_view_read(c, names, 3, &v, &err))
            fail_msg("view: %s", err.msg);
        assert_int_equal(v.slices[2].n_route, 2);
        assert_int_equal(mv_view_route(&v, &v.slices[2])[0], 1);
        assert_int_equal(mv_view_route(&v, &v.slices[2])[1], 0);
        mv_view_free(&v);
        rewrite_doc(c, "routes/u", "2", "{\"shards\":\"s1,s1\",\"split\":2,\"tenant\":\"u\"}");
        assert_int_equal(mv_view_read(c, names, 3, &v, &err), FERRY_EINVAL);
        assert_non_null(strstr(err.msg, "tenant u split 2: route: "));
        assert_int_equal(v.n_slices, 0); /* freed after the failure */
        ferry_err_clear(&err);
    }
    ferry_catalog_close(c);
}

/* ---- the status against the sums from records ---- */

static void test_status_same_as_records(void **state)
{
    (void)state;
    ferry_catalog *c = realistic();
    ferry_err err = {0};
    ferry_cluster_status st;
    if (ferry_cluster_status_read(c, 5, &st, &err))
        fail_msg("status: %s", err.msg);
    ferry_record_list shards = {0}, tenants = {0}, slices = {0}, routes = {0}, parts = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SHARD, NULL, 0, &shards, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_TENANT, NULL, 0, &tenants, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, NULL, 0, &slices, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &routes, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_PARTITION, NULL, 0, &parts, &err),
                     FERRY_OK);
    assert_int_equal(st.tenants, tenants.n);
    assert_int_equal(st.slices, slices.n);
    assert_int_equal(st.n_shards, shards.n);
    uint64_t *tbytes = calloc(tenants.n, sizeof *tbytes);
    for (size_t s = 0; s < shards.n; s++) {
        const char *name = shards.items[s].u.shard.name;
        uint64_t bytes = 0;
        size_t n = 0;
        for (size_t i = 0; i < routes.n; i++) {
            const ferry_route *r = &routes.items[i].u.route;
            if (!ferry_shard_set_has(&r->shards, name))
                continue;
            n++;
            for (size_t k = 0; k < slices.n; k++)
                if (!strcmp(slices.items[k].u.slice.tenant, r->tenant) &&
                    slices.items[k].u.slice.split == r->split)
                    bytes += slices.items[k].u.slice.bytes;
        }
        assert_string_equal(st.shards[s].shard.name, name);
        assert_int_equal(st.shards[s].bytes, bytes);
        assert_int_equal(st.shards[s].slices, n);
    }
    /* the largest tenants: bytes of their routed slices, largest first, ties by name */
    for (size_t t = 0; t < tenants.n; t++)
        for (size_t k = 0; k < slices.n; k++) {
            const ferry_slice *s = &slices.items[k].u.slice;
            if (strcmp(s->tenant, tenants.items[t].u.tenant.name))
                continue;
            for (size_t i = 0; i < routes.n; i++)
                if (!strcmp(routes.items[i].u.route.tenant, s->tenant) &&
                    routes.items[i].u.route.split == s->split)
                    tbytes[t] += s->bytes;
        }
    assert_int_equal(st.n_top, 5);
    for (size_t i = 0; i < st.n_top; i++) {
        size_t best = SIZE_MAX;
        for (size_t t = 0; t < tenants.n; t++) {
            bool taken = false;
            for (size_t j = 0; j < i; j++)
                taken |= !strcmp(st.top[j].name, tenants.items[t].u.tenant.name);
            if (taken)
                continue;
            if (best == SIZE_MAX || tbytes[t] > tbytes[best] ||
                (tbytes[t] == tbytes[best] &&
                 strcmp(tenants.items[t].u.tenant.name, tenants.items[best].u.tenant.name) < 0))
                best = t;
        }
        assert_string_equal(st.top[i].name, tenants.items[best].u.tenant.name);
        assert_int_equal(st.top[i].bytes, tbytes[best]);
        assert_int_equal(st.top[i].splits, tenants.items[best].u.tenant.splits);
        /* its shards: distinct, in the order of its routes */
        char want[FERRY_LIST_MAX] = "";
        for (size_t r = 0; r < routes.n; r++) {
            const ferry_route *rt = &routes.items[r].u.route;
            if (strcmp(rt->tenant, st.top[i].name))
                continue;
            for (size_t k = 0; k < ferry_shard_set_count(&rt->shards); k++) {
                const char *n = ferry_shard_set_at(&rt->shards, k);
                if (!ferry_list_has(want, n)) {
                    size_t l = strlen(want);
                    snprintf(want + l, sizeof want - l, "%s%s", l ? "," : "", n);
                }
            }
        }
        assert_string_equal(st.top[i].shards, want);
    }
    size_t hot = 0, cold = 0, backlog = 0;
    time_t now = time(NULL) - 7 * 86400;
    struct tm tm;
    gmtime_r(&now, &tm);
    uint32_t oldest = (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
    for (size_t i = 0; i < parts.n; i++) {
        const ferry_partition *p = &parts.items[i].u.partition;
        if (p->tier == FERRY_TIER_COLD) {
            cold++;
        } else {
            hot++;
            backlog += p->day && p->day < oldest;
        }
    }
    assert_int_equal(st.partitions_hot, hot);
    assert_int_equal(st.partitions_cold, cold);
    assert_int_equal(st.tier_backlog, backlog);
    assert_true(hot > 0 && cold > 0 && backlog > 0);
    free(tbytes);
    ferry_cluster_status_free(&st);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&tenants);
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    ferry_record_list_free(&parts);
    ferry_catalog_close(c);
}

int main(void)
{
    if (!temp_catalogs_init(&tc, "plan-scan", "compact scans"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_rows),
        cmocka_unit_test(test_slice_rows_beside_a_writer),
        cmocka_unit_test(test_slice_scan_stopped),
        cmocka_unit_test(test_slice_rows_from_packs),
        cmocka_unit_test(test_tenant_and_partition_rows),
        cmocka_unit_test(test_plan_same_as_records),
        cmocka_unit_test(test_shard_table),
        cmocka_unit_test(test_view_shard_indexes),
        cmocka_unit_test(test_status_same_as_records),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!temp_catalogs_done(&tc))
        rc = rc ? rc : 1;
    return rc;
}

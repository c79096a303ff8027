/* The ZooKeeper backend's slice packs (lib/catalog/zk_pack.c, docs/catalog.md "Slice packs on
 * ZooKeeper"), on a real ZooKeeper ($FERRY_TEST_CATALOG="zk://host:port",
 * tests/integration/catalog_zk_packs.sh; without it every test skips):
 *   - after every kind of write (creates, updates, deletes down to an empty tenant, a batch of
 *     checks only, a batch larger than one multi, tenant records alone, a writer changing the
 *     other document of the bucket between a commit's read and its multi) the slice rows the
 *     packs give are the join of the records and their tenant rows the tenant records, field for
 *     field and in key order, and the scans use them;
 *   - a chunked batch rolled back (its tenant records written back at new versions) leaves
 *     packs that say those versions; one whose writer was killed before its commit point is
 *     rolled back by recovery to the records and packs it found (the undo records are the texts
 *     its commit read);
 *   - a pack marked unusable makes the scans read the documents (the same rows); a damaged pack
 *     is an error naming the tenant and what builds it again; convert_layout=1 builds it again;
 *   - a catalog of layout 2 (documents without packs) is refused saying what to run, and gets its
 *     packs and layout 3 with convert_layout=1. */
#define THREADED 1 /* the ZooKeeper client's synchronous calls, to damage a catalog */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shards_text.h"

#include "catalog/zk_int.h"
#include "ferry/catalog.h"
#include "ferry/catalog_scan.h"
#include "temp_catalog.h"

static temp_catalogs tc;

static void fresh_url(char *out, size_t size)
{
    temp_catalogs_url(&tc, "packs", "timeout_ms=4000&wait_ms=5000", out, size);
}

static ferry_catalog *open_ok(const char *url)
{
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    if (ferry_catalog_open(url, &c, &err))
        fail_msg("open %s: %s", url, err.msg);
    return c;
}

/* url with "&convert_layout=1" (or another parameter) added */
static void url_with(const char *url, const char *param, char *out, size_t size)
{
    snprintf(out, size, "%s&%s", url, param);
}

static void slice(ferry_record *r, const char *tenant, uint32_t split, uint64_t bytes,
                  const char *placement)
{
    ferry_record_init(r, FERRY_REC_SLICE);
    snprintf(r->u.slice.tenant, sizeof r->u.slice.tenant, "%s", tenant);
    r->u.slice.split = split;
    r->u.slice.bytes = bytes;
    r->u.slice.rows = bytes / 10;
    shards_printf(&r->u.slice.placement, "%s", placement);
}

static void route(ferry_record *r, const char *tenant, uint32_t split, const char *shards)
{
    ferry_record_init(r, FERRY_REC_ROUTE);
    snprintf(r->u.route.tenant, sizeof r->u.route.tenant, "%s", tenant);
    r->u.route.split = split;
    shards_printf(&r->u.route.shards, "%s", shards);
}

static void tenant_rec(ferry_record *r, const char *name, uint32_t splits, uint32_t rf)
{
    ferry_record_init(r, FERRY_REC_TENANT);
    snprintf(r->u.tenant.name, sizeof r->u.tenant.name, "%s", name);
    r->u.tenant.splits = splits;
    r->u.tenant.rf = rf;
}

static void commit(ferry_catalog *c, ferry_batch *b)
{
    ferry_err err = {0};
    if (ferry_catalog_commit(c, b, NULL, &err))
        fail_msg("commit: %s", err.msg);
    ferry_batch_free(b);
}

/* Tenants whose names sort differently as text and as keys, splits in two buckets, a slice
 * without a route and a route without a slice. */
static void seed(ferry_catalog *c)
{
    static const char *const tenants[] = {"t1", "t10", "t2", "a", "a-b", "acme"};
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    for (size_t t = 0; t < sizeof tenants / sizeof *tenants; t++) {
        uint32_t splits[] = {0, 1, 2, 9, 10, 1500};
        size_t ns = !strcmp(tenants[t], "acme") ? 6 : 2;
        for (size_t k = 0; k < ns; k++) {
            slice(&r, tenants[t], splits[k], 1000 * (t + 1) + k, k % 2 ? "s1" : "s2");
            assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
            if (t == 1 && k == 1)
                continue; /* a slice nobody routes */
            route(&r, tenants[t], splits[k], k % 3 ? "s1,s2" : "s2");
            assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
        }
    }
    route(&r, "ghost", 7, "s3"); /* a route without a slice record, of a tenant without one */
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    for (size_t t = 0; t < sizeof tenants / sizeof *tenants; t++) {
        tenant_rec(&r, tenants[t], !strcmp(tenants[t], "acme") ? 1501 : 11, t == 2 ? 2 : 0);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    tenant_rec(&r, "lonely", 4, 0); /* a tenant without slices */
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    commit(c, b);
}

/* A new catalog (its URL into url) holding seed's records. */
static ferry_catalog *seeded(char *url, size_t size)
{
    fresh_url(url, size);
    ferry_catalog *c = open_ok(url);
    seed(c);
    return c;
}

/* ---- rows ---- */

typedef struct row {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    bool slice, route;
    uint64_t bytes, rows;
    char placement[FERRY_SHARDS_TEXT_MAX], shards[FERRY_SHARDS_TEXT_MAX];
    int64_t version, route_version;
} row;

typedef struct rows {
    row *v;
    size_t n, cap;
} rows;

/* A tenant row (name, splits, rf, version). */
typedef struct trow {
    char name[FERRY_NAME_MAX];
    uint32_t splits, rf;
    int64_t version;
} trow;

/* What a scan gave: its tenant rows, then its slice rows. */
typedef struct scanned {
    rows s;
    trow *t;
    size_t n_t;
    bool slice_seen; /* a slice row came: no tenant row may come after it */
} scanned;

static int take_tenant(const ferry_tenant_row *r, void *arg, ferry_err *err)
{
    (void)err;
    scanned *x = arg;
    assert_false(x->slice_seen);
    x->t = realloc(x->t, (x->n_t + 1) * sizeof *x->t);
    assert_non_null(x->t);
    trow *t = &x->t[x->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", r->name);
    t->splits = r->splits;
    t->rf = r->rf;
    t->version = r->version;
    return FERRY_OK;
}

static row *push(rows *g)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 64;
        g->v = realloc(g->v, g->cap * sizeof *g->v);
        assert_non_null(g->v);
    }
    row *x = &g->v[g->n++];
    memset(x, 0, sizeof *x);
    x->version = x->route_version = -1;
    return x;
}

static int take(const ferry_slice_row *r, void *arg, ferry_err *err)
{
    (void)err;
    scanned *sc = arg;
    sc->slice_seen = true;
    row *x = push(&sc->s);
    snprintf(x->tenant, sizeof x->tenant, "%s", r->tenant);
    x->split = r->split;
    x->slice = r->placement != NULL;
    x->route = r->shards != NULL;
    x->bytes = r->bytes;
    x->rows = r->rows;
    snprintf(x->placement, sizeof x->placement, "%s", r->placement ? r->placement : "");
    snprintf(x->shards, sizeof x->shards, "%s", r->shards ? r->shards : "");
    x->version = r->version;
    x->route_version = r->route_version;
    return FERRY_OK;
}

static int row_cmp(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int d = strcmp(x->tenant, y->tenant);
    return d ? d : (x->split > y->split) - (x->split < y->split);
}

/* The join of the records as ferry_catalog_list gives them, in key order. */
static void joined(ferry_catalog *c, rows *out)
{
    ferry_err err = {0};
    ferry_record_list sl = {0}, rl = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, NULL, 0, &sl, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &rl, &err), FERRY_OK);
    for (size_t i = 0; i < sl.n; i++) {
        const ferry_slice *s = &sl.items[i].u.slice;
        row *x = push(out);
        snprintf(x->tenant, sizeof x->tenant, "%s", s->tenant);
        x->split = s->split;
        x->slice = true;
        x->bytes = s->bytes;
        x->rows = s->rows;
        ferry_shard_set_str(&s->placement, x->placement);
        x->version = sl.items[i].version;
    }
    qsort(out->v, out->n, sizeof *out->v, row_cmp);
    size_t n_slices = out->n;
    for (size_t i = 0; i < rl.n; i++) {
        const ferry_route *r = &rl.items[i].u.route;
        row key = {.split = r->split};
        snprintf(key.tenant, sizeof key.tenant, "%s", r->tenant);
        row *x = bsearch(&key, out->v, n_slices, sizeof *out->v, row_cmp);
        if (!x) {
            x = push(out);
            *x = key;
            x->version = -1;
        }
        x->route = true;
        ferry_shard_set_str(&r->shards, x->shards);
        x->route_version = rl.items[i].version;
    }
    qsort(out->v, out->n, sizeof *out->v, row_cmp);
    ferry_record_list_free(&sl);
    ferry_record_list_free(&rl);
}

static void same_rows(const rows *want, const rows *got, const char *what)
{
    if (want->n != got->n)
        fail_msg("%s: %zu rows, the records join to %zu", what, got->n, want->n);
    for (size_t i = 0; i < want->n; i++)
        if (memcmp(&want->v[i], &got->v[i], sizeof want->v[i]))
            fail_msg("%s: row %zu is %s/%u (v%lld, route v%lld), the records' %s/%u (v%lld, "
                     "route v%lld)",
                     what, i, got->v[i].tenant, got->v[i].split, (long long)got->v[i].version,
                     (long long)got->v[i].route_version, want->v[i].tenant, want->v[i].split,
                     (long long)want->v[i].version, (long long)want->v[i].route_version);
}

static void scanned_free(scanned *x)
{
    free(x->s.v);
    free(x->t);
    memset(x, 0, sizeof *x);
}

/* The tenant records as ferry_catalog_list gives them (name order) against the rows. */
static void same_tenants(ferry_catalog *c, const scanned *got, const char *what)
{
    ferry_err err = {0};
    ferry_record_list tl = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_TENANT, NULL, 0, &tl, &err), FERRY_OK);
    if (tl.n != got->n_t)
        fail_msg("%s: %zu tenant rows, %zu tenant records", what, got->n_t, tl.n);
    for (size_t i = 0; i < tl.n; i++) {
        const ferry_tenant *t = &tl.items[i].u.tenant;
        const trow *g = &got->t[i];
        if (strcmp(t->name, g->name) || t->splits != g->splits || t->rf != g->rf ||
            tl.items[i].version != g->version)
            fail_msg("%s: tenant row %zu is %s (%u splits, rf %u, v%lld), the record %s (%u "
                     "splits, rf %u, v%lld)", what, i, g->name, g->splits, g->rf,
                     (long long)g->version, t->name, t->splits, t->rf,
                     (long long)tl.items[i].version);
    }
    ferry_record_list_free(&tl);
}

/* The packs' rows equal the records (slices: their join; tenants: the records), the scans read
 * them (used), and ferry_catalog_scan_slices and ferry_catalog_scan_tenants_slices give the
 * same rows. */
static void packs_match(ferry_catalog *c, bool want_used)
{
    rows want = {0};
    scanned packed = {0}, sl = {0}, both = {0};
    joined(c, &want);
    ferry_err err = {0};
    bool used = !want_used;
    assert_non_null(c->ops->scan_rows);
    if (c->ops->scan_rows(c, take_tenant, take, &packed, &used, &err))
        fail_msg("pack scan: %s", err.msg);
    assert_int_equal(used, want_used);
    if (used) {
        same_rows(&want, &packed.s, "the packs");
        same_tenants(c, &packed, "the packs");
    }
    if (ferry_catalog_scan_slices(c, take, &sl, &err))
        fail_msg("scan: %s", err.msg);
    same_rows(&want, &sl.s, "ferry_catalog_scan_slices");
    if (ferry_catalog_scan_tenants_slices(c, take_tenant, take, &both, &err))
        fail_msg("scan: %s", err.msg);
    same_rows(&want, &both.s, "ferry_catalog_scan_tenants_slices");
    same_tenants(c, &both, "ferry_catalog_scan_tenants_slices");
    free(want.v);
    scanned_free(&packed);
    scanned_free(&sl);
    scanned_free(&both);
}

/* ---- raw ZooKeeper ---- */

static void raw_set(ferry_catalog *c, const char *rel, const char *data)
{
    char abs[PATH_MAX_LEN];
    zk_abspath(c->be, rel, abs, sizeof abs);
    int zrc = zoo_set(c->be->zh, abs, data, (int)strlen(data), -1);
    if (zrc != ZOK)
        fail_msg("set %s: %s", abs, zerror(zrc));
}

static int raw_count(ferry_catalog *c, const char *rel)
{
    char abs[PATH_MAX_LEN];
    zk_abspath(c->be, rel, abs, sizeof abs);
    struct Stat st;
    int zrc = zoo_exists(c->be->zh, abs, 0, &st);
    if (zrc != ZOK)
        fail_msg("exists %s: %s", abs, zerror(zrc));
    return st.numChildren;
}

/* ---- tests ---- */

typedef struct interfere {
    ferry_catalog *other;
    int fired, rc;
} interfere;

/* Between a commit's read of acme's documents and its multi: another handle changes a route of
 * acme (the other document of the bucket the commit writes). */
static void between(void *arg)
{
    interfere *in = arg;
    if (in->fired++)
        return;
    ferry_err e = {0};
    ferry_record r;
    route(&r, "acme", 2, "s3");
    in->rc = ferry_catalog_get(in->other, &r, &e);
    if (!in->rc) {
        shards_printf(&r.u.route.shards, "s3");
        in->rc = ferry_catalog_update(in->other, &r, &e);
    }
}

static void test_packs_follow_writes(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    char url[512];
    ferry_catalog *c = seeded(url, sizeof url);
    ferry_err err = {0};
    assert_int_equal(raw_count(c, "slice_packs"), 9); /* 6 tenants, acme~1, ghost, lonely */
    packs_match(c, true);

    /* an update, a deletion, a tenant emptied */
    ferry_record r;
    slice(&r, "acme", 1500, 0, "s1");
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    r.u.slice.bytes = 424242;
    shards_printf(&r.u.slice.placement, "s3");
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    route(&r, "t1", 1, "s1");
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_delete(c, &r, &err), FERRY_OK);
    ferry_batch *b = ferry_batch_new();
    for (uint32_t k = 0; k < 2; k++) {
        slice(&r, "t2", k, 0, "s1");
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        assert_int_equal(ferry_batch_delete(b, &r, &err), FERRY_OK);
        route(&r, "t2", k, "s1");
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        assert_int_equal(ferry_batch_delete(b, &r, &err), FERRY_OK);
    }
    commit(c, b);
    packs_match(c, true);

    /* checks only: nothing written, the packs as they were */
    b = ferry_batch_new();
    slice(&r, "a", 0, 0, "s1");
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    assert_int_equal(ferry_batch_check(b, &r, &err), FERRY_OK);
    commit(c, b);
    packs_match(c, true);

    /* another writer changes the route document of acme's bucket between this commit's read
     * and its multi: the pack's conditioned write fails, the commit reads again, and the pack
     * holds both changes */
    interfere in = {.other = open_ok(url)};
    zt_test_between_arg = &in;
    zt_test_between = between;
    slice(&r, "acme", 1, 0, "s1");
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    r.u.slice.bytes = 31337;
    int rc = ferry_catalog_update(c, &r, &err);
    zt_test_between = NULL;
    assert_int_equal(rc, FERRY_OK);
    assert_int_equal(in.rc, FERRY_OK);
    /* once for the first attempt, once inside the other handle's own commit (the hook is the
     * process's), once for the attempt that read again after the race */
    assert_int_equal(in.fired, 3);
    ferry_catalog_close(in.other);
    packs_match(c, true);
    scanned got = {0};
    bool used = false;
    assert_int_equal(c->ops->scan_rows(c, NULL, take, &got, &used, &err), FERRY_OK);
    bool saw_slice = false, saw_route = false;
    for (size_t i = 0; i < got.s.n; i++) {
        if (!strcmp(got.s.v[i].tenant, "acme") && got.s.v[i].split == 1)
            saw_slice = got.s.v[i].bytes == 31337;
        if (!strcmp(got.s.v[i].tenant, "acme") && got.s.v[i].split == 2)
            saw_route = !strcmp(got.s.v[i].shards, "s3");
    }
    scanned_free(&got);
    assert_true(saw_slice && saw_route);

    /* tenant records alone: a raise, a removal, a new tenant, a check (the pack of bucket 0
     * keeps the record's line) */
    tenant_rec(&r, "a-b", 0, 0);
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    r.u.tenant.splits = 40;
    r.u.tenant.rf = 3;
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    tenant_rec(&r, "t2", 0, 0);
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_delete(c, &r, &err), FERRY_OK);
    b = ferry_batch_new();
    tenant_rec(&r, "newcomer", 2, 0);
    assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    tenant_rec(&r, "lonely", 0, 0);
    assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
    assert_int_equal(ferry_batch_check(b, &r, &err), FERRY_OK);
    commit(c, b);
    packs_match(c, true);

    /* a batch larger than one multi (chunks, a journal): 300 tenants at once */
    ferry_catalog_set_chunk_ops(c, 50);
    b = ferry_batch_new();
    for (int t = 0; t < 300; t++) {
        char name[32];
        snprintf(name, sizeof name, "bulk%03d", t);
        slice(&r, name, 0, (uint64_t)t, "s2");
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
        route(&r, name, 0, "s2");
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_true(info.chunks > 1);
    packs_match(c, true);
    ferry_catalog_close(c);
}

/* A batch larger than one multi that fails after some chunks were applied is rolled back: the
 * tenant records it had changed are written back, at new znode versions (their record versions),
 * and their packs are built again to say so. */
static void test_packs_after_rollback(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    static const char *const tenants[] = {"a", "a-b", "acme", "lonely", "t1", "t10", "t2"};
    char url[512];
    ferry_catalog *c = seeded(url, sizeof url);
    ferry_err err = {0};
    ferry_catalog_set_chunk_ops(c, 3);
    ferry_batch *b = ferry_batch_new();
    for (size_t i = 0; i < sizeof tenants / sizeof *tenants; i++) {
        ferry_record r;
        tenant_rec(&r, tenants[i], 0, 0);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        r.u.tenant.splits += 100;
        if (i + 1 == sizeof tenants / sizeof *tenants)
            r.version += 7; /* stale: the batch fails at its last chunk of records */
        assert_int_equal(ferry_batch_update(b, &r, &err), FERRY_OK);
    }
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_ECONFLICT);
    ferry_batch_free(b);
    ferry_record_list tl = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_TENANT, NULL, 0, &tl, &err), FERRY_OK);
    bool advanced = false; /* the rollback did write records back */
    for (size_t i = 0; i < tl.n; i++) { /* contents restored: seed's split counts */
        const ferry_tenant *t = &tl.items[i].u.tenant;
        assert_int_equal(t->splits, !strcmp(t->name, "acme") ? 1501 : !strcmp(t->name, "lonely") ? 4 : 11);
        advanced |= tl.items[i].version > 0;
    }
    ferry_record_list_free(&tl);
    assert_true(advanced);
    packs_match(c, true);
    size_t n = 99;
    assert_int_equal(ferry_catalog_recover(c, &n, &err), FERRY_OK);
    assert_int_equal(n, 0); /* no journal left behind */
    ferry_catalog_close(c);
}

/* A writer killed before the commit point of a chunked batch that sets every slice's size: its
 * earlier chunks had rewritten documents and packs, each journaled with the text the commit read
 * before it (cat_op.prior, not read again). Recovery puts those texts back: the records are as
 * before, field for field and version for version, and so are the packs (no tenant record in
 * the batch, so no pack is built again after the rollback: they are the journaled texts). */
static void stop_before_commit_point(size_t done, size_t total, void *arg)
{
    int fd = *(int *)arg;
    if (done + 1 == total) {
        char p = 'p';
        if (write(fd, &p, 1) != 1)
            _exit(6);
        for (;;)
            pause();
    }
}

static void test_packs_after_crash(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    char url[512];
    ferry_catalog *c = seeded(url, sizeof url);
    ferry_err err = {0};
    rows before = {0};
    joined(c, &before);
    int up[2];
    assert_int_equal(pipe(up), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        ferry_catalog *cc = NULL;
        ferry_err e = {0};
        if (ferry_catalog_open(url, &cc, &e))
            _exit(3);
        ferry_catalog_set_chunk_ops(cc, 10); /* 4 operations a chunk: documents, then packs */
        ferry_catalog_set_progress(cc, stop_before_commit_point, &up[1]);
        ferry_record_list sl = {0};
        if (ferry_catalog_list(cc, FERRY_REC_SLICE, NULL, 0, &sl, &e))
            _exit(4);
        ferry_batch *b = ferry_batch_new();
        for (size_t i = 0; i < sl.n; i++) {
            sl.items[i].u.slice.bytes += 77;
            if (ferry_batch_update(b, &sl.items[i], &e))
                _exit(4);
        }
        ferry_catalog_commit(cc, b, NULL, &e);
        _exit(5); /* the batch must not get past its last chunk */
    }
    close(up[1]);
    char got = 0;
    if (read(up[0], &got, 1) != 1 || got != 'p') {
        int st = 0;
        waitpid(pid, &st, 0);
        fail_msg("the writer ended before its batch's last chunk (exit status %d)",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    close(up[0]);
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    /* its session expires after timeout_ms; recovery then rolls the batch back */
    size_t total = 0;
    for (int i = 0; i < 300 && !total; i++) {
        size_t n = 0;
        if (ferry_catalog_recover(c, &n, &err))
            fail_msg("recover: %s", err.msg);
        total += n;
        if (!total)
            usleep(100 * 1000);
    }
    assert_int_equal(total, 1);
    rows after = {0};
    joined(c, &after);
    same_rows(&before, &after, "the records after the rollback");
    packs_match(c, true);
    free(before.v);
    free(after.v);
    ferry_catalog_close(c);
}

/* Unusable, damaged and rebuilt packs. */
static void test_packs_unusable_damaged_rebuilt(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    char url[512], conv[600];
    ferry_catalog *c = seeded(url, sizeof url);
    /* a bucket the packs cannot carry: the scans join the documents, the same rows */
    raw_set(c, "slice_packs/t10", "!");
    packs_match(c, false);
    /* a damaged pack: an error naming the tenant and what builds the packs again */
    raw_set(c, "slice_packs/acme~1", "1500\tnot a number\n");
    scanned got = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_scan_slices(c, take, &got, &err), FERRY_OK); /* t10: joined */
    scanned_free(&got);
    raw_set(c, "slice_packs/t10", ""); /* now the packs are read, acme~1 among them */
    assert_int_equal(ferry_catalog_scan_slices(c, take, &got, &err), FERRY_EIO);
    scanned_free(&got);
    assert_non_null(strstr(err.msg, "slice pack of tenant acme"));
    assert_non_null(strstr(err.msg, "convert_layout=1"));
    /* a damaged tenant line likewise (t10's pack lost its slices above; rebuilt below) */
    raw_set(c, "slice_packs/acme~1", "");
    raw_set(c, "slice_packs/t1", "=\t2\tx\t0\n");
    assert_int_equal(ferry_catalog_scan_tenants_slices(c, take_tenant, take, &got, &err),
                     FERRY_EIO);
    scanned_free(&got);
    assert_non_null(strstr(err.msg, "slice pack of tenant t1"));
    ferry_catalog_close(c);
    /* built again from the documents by an open with convert_layout=1 */
    url_with(url, "convert_layout=1", conv, sizeof conv);
    c = open_ok(conv);
    packs_match(c, true);
    ferry_catalog_close(c);
}

/* A catalog of layout 2 (tenant documents, no packs) is refused, then converted when asked. */
static void test_layout_2_gets_packs(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    char url[512], conv[600];
    ferry_catalog *c = seeded(url, sizeof url);
    /* as an older ferry left it: marker 2, no packs */
    char abs[PATH_MAX_LEN];
    zk_abspath(c->be, "slice_packs", abs, sizeof abs);
    struct String_vector kids = {0, NULL};
    assert_int_equal(zoo_get_children(c->be->zh, abs, 0, &kids), ZOK);
    for (int i = 0; i < kids.count; i++) {
        char p[2 * PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s/%s", abs, kids.data[i]);
        assert_int_equal(zoo_delete(c->be->zh, p, -1), ZOK);
    }
    deallocate_String_vector(&kids);
    raw_set(c, "layout", "2");
    ferry_catalog_close(c);
    ferry_err err = {0};
    c = NULL;
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_EUNSUPPORTED);
    assert_null(c);
    assert_non_null(strstr(err.msg, "layout 2"));
    assert_non_null(strstr(err.msg, "convert_layout=1"));
    url_with(url, "convert_layout=1", conv, sizeof conv);
    c = open_ok(conv);
    packs_match(c, true);
    char buf[16];
    int len = sizeof buf - 1;
    struct Stat st;
    zk_abspath(c->be, "layout", abs, sizeof abs);
    assert_int_equal(zoo_get(c->be->zh, abs, 0, buf, &len, &st), ZOK);
    buf[len] = '\0';
    assert_string_equal(buf, ZT_LAYOUT);
    assert_int_equal(raw_count(c, "slice_packs"), 9);
    ferry_catalog_close(c);
    c = open_ok(url); /* marked: opens without the parameter */
    packs_match(c, true);
    ferry_catalog_close(c);
}

int main(void)
{
    if (!temp_catalogs_init(&tc, "zk-packs", "ZooKeeper slice packs"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packs_follow_writes),
        cmocka_unit_test(test_packs_after_rollback),
        cmocka_unit_test(test_packs_after_crash),
        cmocka_unit_test(test_packs_unusable_damaged_rebuilt),
        cmocka_unit_test(test_layout_2_gets_packs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!temp_catalogs_done(&tc))
        rc = rc ? rc : 1;
    return rc;
}

/* Slice and route records as entries of tenant documents (the ZooKeeper backend, docs/catalog.md
 * "Tenant documents"), and the record semantics every backend keeps for them:
 *   - the document format alone (encode, decode, edits, malformed input refused);
 *   - each record keeps its own version: a write to another record of the same tenant between a
 *     caller's read and its commit is no conflict (ZooKeeper: the document changed, the backend
 *     reads it again and retries), a write to the same record is FERRY_ECONFLICT;
 *   - two processes writing their own records of one tenant never conflict; two writing the same
 *     record: exactly one wins;
 *   - ZooKeeper only: the layout marker, the guard an older ferry trips on, the refusal of a
 *     catalog in the older layout (one znode per slice), the document size limit.
 * Runs against $FERRY_TEST_CATALOG (tests/integration/catalog_tenant_docs.sh: SQLite and ZooKeeper). */
#define THREADED 1 /* the ZooKeeper client's synchronous calls, to lay out an older catalog */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shards_text.h"

#include "catalog/zk_int.h"
#include "ferry/catalog.h"
#include "temp_catalog.h"

static temp_catalogs tc;

static void fresh_url(char *out, size_t size)
{
    temp_catalogs_url(&tc, "entries", "timeout_ms=4000&wait_ms=5000", out, size);
}

static ferry_catalog *open_ok(const char *url)
{
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    if (ferry_catalog_open(url, &c, &err))
        fail_msg("open %s: %s", url, err.msg);
    return c;
}

static void slice(ferry_record *r, const char *tenant, uint32_t split, uint64_t bytes)
{
    ferry_record_init(r, FERRY_REC_SLICE);
    snprintf(r->u.slice.tenant, sizeof r->u.slice.tenant, "%s", tenant);
    r->u.slice.split = split;
    r->u.slice.bytes = bytes;
    r->u.slice.rows = 1;
    shards_printf(&r->u.slice.placement, "node1");
}

static void route(ferry_record *r, const char *tenant, uint32_t split, const char *shards)
{
    ferry_record_init(r, FERRY_REC_ROUTE);
    snprintf(r->u.route.tenant, sizeof r->u.route.tenant, "%s", tenant);
    r->u.route.split = split;
    shards_printf(&r->u.route.shards, "%s", shards);
}

/* ---- the document format ---- */

static void test_doc_codec(void **state)
{
    (void)state;
    zdoc d = {0};
    const char *a = "{\"split\":7}", *b = "line one\nline two 3 4 5\n", *z = "";
    assert_int_equal(zdoc_put(&d, 7, a, strlen(a), 3), FERRY_OK);
    assert_int_equal(zdoc_put(&d, 2, b, strlen(b), 0), FERRY_OK);
    assert_int_equal(zdoc_put(&d, 4096, z, 0, 123456789012LL), FERRY_OK);
    assert_int_equal(zdoc_put(&d, 7, a, strlen(a), 4), FERRY_OK); /* replaces */
    assert_int_equal(d.n, 3);
    size_t len = 0;
    char *text = zdoc_encode(&d, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_string_equal(text, "ferry-tenant-doc 1\n"
                              "2 0 24\nline one\nline two 3 4 5\n\n"
                              "7 4 11\n{\"split\":7}\n"
                              "4096 123456789012 0\n\n");
    zdoc back;
    /* taken apart in place for a scan (zdoc_spans): the same entries, each document
     * NUL-terminated where its newline was, the split's digits as the name */
    char *copy = strdup(text);
    cat_flat spans = {0};
    assert_non_null(copy);
    assert_int_equal(zdoc_spans(copy, len, "acme", 4, &spans), 0);
    assert_int_equal(spans.n, 3);
    assert_memory_equal(spans.v[0].name, "2", spans.v[0].name_len);
    assert_string_equal(spans.v[0].doc, b);
    assert_int_equal(spans.v[0].doc_len, strlen(b));
    assert_int_equal(spans.v[1].version, 4);
    assert_string_equal(spans.v[1].doc, a);
    assert_int_equal(spans.v[2].name_len, 4);
    assert_memory_equal(spans.v[2].name, "4096", 4);
    assert_int_equal(spans.v[2].version, 123456789012LL);
    assert_string_equal(spans.v[2].doc, "");
    assert_int_equal(spans.v[2].mid_len, 4);
    assert_memory_equal(spans.v[2].mid, "acme", 4);
    cat_flat_free(&spans);
    free(copy);
    assert_int_equal(zdoc_decode(text, len, &back), 0);
    assert_int_equal(back.n, 3);
    assert_int_equal(back.v[0].split, 2);
    assert_int_equal(back.v[0].doc_len, strlen(b));
    assert_memory_equal(back.v[0].doc, b, strlen(b));
    assert_int_equal(back.v[1].version, 4);
    assert_int_equal(back.v[2].split, 4096);
    assert_int_equal(back.v[2].version, 123456789012LL);
    assert_int_equal(back.v[2].doc_len, 0);
    assert_non_null(zdoc_find(&back, 7));
    assert_null(zdoc_find(&back, 3));
    zdoc_remove(&back, 7);
    zdoc_remove(&back, 99); /* absent: nothing */
    assert_int_equal(back.n, 2);
    assert_null(zdoc_find(&back, 7));
    assert_int_equal(back.v[1].split, 4096);
    zdoc_free(&back);
    free(text);
    zdoc_free(&d);

    /* an empty document: the header alone */
    text = zdoc_encode(&d, &len);
    assert_string_equal(text, "ferry-tenant-doc 1\n");
    assert_int_equal(zdoc_decode(text, len, &back), 0);
    assert_int_equal(back.n, 0);
    zdoc_free(&back);
    free(text);

    static const char *const bad[] = {
        "",                                          /* no header */
        "ferry-tenant-doc 2\n",                      /* another format */
        "{\"split\":1}",                             /* a record, not a document */
        "ferry-tenant-doc 1\n1 0 2\nab",             /* no newline after the document */
        "ferry-tenant-doc 1\n1 0 9\nab\n",           /* longer than what is there */
        "ferry-tenant-doc 1\n1 0 2\nabX",            /* a byte other than the newline */
        "ferry-tenant-doc 1\n2 0 1\na\n1 0 1\nb\n",  /* not increasing */
        "ferry-tenant-doc 1\n1 0 1\na\n1 0 1\nb\n",  /* twice the same split */
        "ferry-tenant-doc 1\n01 0 1\na\n",           /* a leading zero */
        "ferry-tenant-doc 1\n1 -1 1\na\n",           /* a negative version */
        "ferry-tenant-doc 1\n4294967296 0 1\na\n",   /* beyond a split number */
        "ferry-tenant-doc 1\n1 1234567890123456789 1\na\n", /* too many digits */
        "ferry-tenant-doc 1\n1 0\na\n",              /* a field missing */
        "ferry-tenant-doc 1\n1 0 1\na\ntrailing",    /* garbage after the last entry */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (zdoc_decode(bad[i], strlen(bad[i]), &back) == 0)
            fail_msg("decoded the malformed document %zu: %s", i, bad[i]);
        char *t = strdup(bad[i]);
        assert_non_null(t);
        if (zdoc_spans(t, strlen(t), "acme", 4, &spans) == 0)
            fail_msg("took apart the malformed document %zu: %s", i, bad[i]);
        cat_flat_free(&spans);
        free(t);
    }
}

/* ---- records of one tenant, written side by side ---- */

typedef struct interfere {
    ferry_catalog *other; /* a second handle (its own session) */
    ferry_record rec;     /* what it writes: an update at its read version */
    int fired;
    int rc;
} interfere;

static void between(void *arg)
{
    interfere *in = arg;
    if (in->fired++)
        return; /* once: the retry must then go through */
    ferry_err e = {0};
    in->rc = ferry_catalog_update(in->other, &in->rec, &e);
}

/* A caller reads slice 0 of acme; before its update commits, another handle updates slice
 * `victim` of acme (ZooKeeper: between the backend's read of the document and its multi; SQLite:
 * just before the commit). */
static int race(const char *url, uint32_t victim, int *fired, ferry_err *err)
{
    ferry_catalog *c = open_ok(url);
    interfere in = {.other = open_ok(url)};
    ferry_record mine;
    slice(&mine, "acme", 0, 0);
    assert_int_equal(ferry_catalog_get(c, &mine, err), FERRY_OK);
    slice(&in.rec, "acme", victim, 0);
    assert_int_equal(ferry_catalog_get(in.other, &in.rec, err), FERRY_OK);
    in.rec.u.slice.bytes = 777;
    mine.u.slice.bytes = 555;
    if (tc.zk_base) {
        zt_test_between_arg = &in;
        zt_test_between = between;
    } else {
        between(&in);
    }
    int rc = ferry_catalog_update(c, &mine, err);
    zt_test_between = NULL;
    assert_int_equal(in.rc, FERRY_OK);
    *fired = in.fired;
    ferry_catalog_close(in.other);
    ferry_catalog_close(c);
    return rc;
}

static void seed(const char *url, int splits)
{
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    for (int i = 0; i < splits; i++) {
        ferry_record s, r;
        slice(&s, "acme", (uint32_t)i, 100 + (uint64_t)i);
        route(&r, "acme", (uint32_t)i, "node1");
        assert_int_equal(ferry_batch_create(b, &s, &err), FERRY_OK);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    ferry_catalog_close(c);
}

static void test_other_entry_is_no_conflict(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url);
    seed(url, 3);
    ferry_err err = {0};
    int fired = 0;
    int rc = race(url, 1, &fired, &err);
    assert_int_equal(rc, FERRY_OK);
    if (tc.zk_base)
        assert_true(fired >= 2); /* the first multi failed on the document and was retried */
    ferry_catalog *c = open_ok(url);
    ferry_record s0, s1, s2;
    slice(&s0, "acme", 0, 0);
    slice(&s1, "acme", 1, 0);
    slice(&s2, "acme", 2, 0);
    assert_int_equal(ferry_catalog_get(c, &s0, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_get(c, &s1, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_get(c, &s2, &err), FERRY_OK);
    assert_int_equal(s0.u.slice.bytes, 555);
    assert_int_equal(s0.version, 1);
    assert_int_equal(s1.u.slice.bytes, 777); /* the other writer's change is kept */
    assert_int_equal(s1.version, 1);
    assert_int_equal(s2.u.slice.bytes, 102); /* untouched, at its own version */
    assert_int_equal(s2.version, 0);
    /* a stale version of a record whose neighbours changed is still a conflict */
    ferry_record stale;
    slice(&stale, "acme", 2, 5);
    stale.version = 0;
    assert_int_equal(ferry_catalog_update(c, &stale, &err), FERRY_OK);
    assert_int_equal(stale.version, 1);
    stale.version = 0;
    assert_int_equal(ferry_catalog_update(c, &stale, &err), FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "slices/acme/2"));
    /* the listing shows each record at its own version */
    ferry_record_list l = {0};
    const char *prefix[] = {"acme"};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, prefix, 1, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.items[0].version, 1);
    assert_int_equal(l.items[1].version, 1);
    assert_int_equal(l.items[2].version, 1);
    ferry_record_list_free(&l);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 3);
    for (size_t i = 0; i < l.n; i++)
        assert_int_equal(l.items[i].version, 0); /* the routes' document was not written */
    ferry_record_list_free(&l);
    ferry_catalog_close(c);
}

static void test_same_entry_conflicts(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url);
    seed(url, 2);
    ferry_err err = {0};
    int fired = 0;
    assert_int_equal(race(url, 0, &fired, &err), FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "slices/acme/0"));
    assert_true(fired >= 1);
    ferry_catalog *c = open_ok(url);
    ferry_record s0;
    slice(&s0, "acme", 0, 0);
    assert_int_equal(ferry_catalog_get(c, &s0, &err), FERRY_OK);
    assert_int_equal(s0.u.slice.bytes, 777); /* the winner's, nothing of the loser's */
    assert_int_equal(s0.version, 1);
    ferry_catalog_close(c);
}

/* A batch of creates, deletes and checks on entries of one document, with the other writer
 * creating a neighbour between the read and the multi. */
static void test_batch_on_one_document(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url);
    seed(url, 2);
    ferry_catalog *c = open_ok(url);
    interfere in = {.other = open_ok(url)};
    ferry_err err = {0};
    ferry_record r0, r1, gone, made, s9;
    route(&r0, "acme", 0, "node1");
    route(&r1, "acme", 1, "node1");
    assert_int_equal(ferry_catalog_get(c, &r0, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_get(c, &r1, &err), FERRY_OK);
    gone = r1;
    route(&made, "acme", 5, "node2");
    ferry_batch *b = ferry_batch_new();
    assert_int_equal(ferry_batch_check(b, &r0, &err), FERRY_OK);
    assert_int_equal(ferry_batch_delete(b, &gone, &err), FERRY_OK);
    assert_int_equal(ferry_batch_create(b, &made, &err), FERRY_OK);
    made.u.route.split = 6;
    assert_int_equal(ferry_batch_create(b, &made, &err), FERRY_OK);
    /* the other writer creates route 9 of the same tenant, then changes it between the
     * backend's read of the document and its multi (SQLite: before the commit) */
    route(&s9, "acme", 9, "node3");
    assert_int_equal(ferry_catalog_create(in.other, &s9, &err), FERRY_OK);
    route(&in.rec, "acme", 9, "node4");
    in.rec.version = 0;
    if (tc.zk_base) {
        zt_test_between_arg = &in;
        zt_test_between = between;
    } else {
        between(&in);
    }
    int64_t nv[4] = {0};
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit_versions(c, b, nv, &info, &err), FERRY_OK);
    zt_test_between = NULL;
    assert_int_equal(in.rc, FERRY_OK);
    assert_int_equal(info.ops, 4);
    assert_int_equal(nv[0], -1);
    assert_int_equal(nv[1], -1);
    assert_int_equal(nv[2], 0);
    assert_int_equal(nv[3], 0);
    ferry_batch_free(b);
    ferry_record_list l = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 4); /* 0, 5, 6, 9 */
    assert_int_equal(l.items[0].u.route.split, 0);
    assert_int_equal(l.items[1].u.route.split, 5);
    assert_int_equal(l.items[2].u.route.split, 6);
    assert_int_equal(l.items[3].u.route.split, 9);
    assert_int_equal(ferry_shard_set_count(&l.items[3].u.route.shards), 1);
    assert_string_equal(ferry_shard_set_at(&l.items[3].u.route.shards, 0), "node4");
    assert_int_equal(l.items[3].version, 1);
    ferry_record_list_free(&l);
    /* deleting every entry leaves no record; creating one again starts at version 0 */
    l = (ferry_record_list){0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &l, &err), FERRY_OK);
    b = ferry_batch_new();
    for (size_t i = 0; i < l.n; i++)
        assert_int_equal(ferry_batch_delete(b, &l.items[i], &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    ferry_record_list_free(&l);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 0);
    ferry_record_list_free(&l);
    assert_int_equal(ferry_catalog_get(c, &r0, &err), FERRY_ENOTFOUND);
    assert_int_equal(ferry_catalog_update(c, &r0, &err), FERRY_ENOTFOUND);
    route(&r0, "acme", 0, "node7");
    assert_int_equal(ferry_catalog_create(c, &r0, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_get(c, &r0, &err), FERRY_OK);
    assert_int_equal(r0.version, 0);
    assert_int_equal(ferry_catalog_create(c, &r0, &err), FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "routes/acme/0 already exists"));
    ferry_catalog_close(in.other);
    ferry_catalog_close(c);
}

/* Two processes, each updating its own slice of one tenant 100 times by compare-and-set: every
 * update goes through. Then both update the same slice from the same version: one wins. */
static void test_processes_side_by_side(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url);
    seed(url, 2);
    enum { ROUNDS = 100 };
    pid_t kids[2];
    int start[2];
    assert_int_equal(pipe(start), 0);
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            ferry_catalog *c = NULL;
            ferry_err e = {0};
            if (ferry_catalog_open(url, &c, &e))
                _exit(3);
            ferry_record s;
            slice(&s, "acme", (uint32_t)k, 0);
            if (ferry_catalog_get(c, &s, &e))
                _exit(4);
            char ch;
            if (read(start[0], &ch, 1) != 1) /* both start together */
                _exit(5);
            for (int i = 0; i < ROUNDS; i++) {
                s.u.slice.bytes = (uint64_t)i;
                int rc = ferry_catalog_update(c, &s, &e); /* at the version it wrote last */
                if (rc) {
                    fprintf(stderr, "process %d, update %d: %s\n", k, i, e.msg);
                    _exit(rc == FERRY_ECONFLICT ? 1 : 2);
                }
            }
            ferry_catalog_close(c);
            _exit(0);
        }
    }
    assert_int_equal(write(start[1], "gg", 2), 2);
    close(start[0]);
    close(start[1]);
    for (int k = 0; k < 2; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    for (uint32_t k = 0; k < 2; k++) {
        ferry_record s;
        slice(&s, "acme", k, 0);
        assert_int_equal(ferry_catalog_get(c, &s, &err), FERRY_OK);
        assert_int_equal(s.version, ROUNDS);
        assert_int_equal(s.u.slice.bytes, ROUNDS - 1);
    }
    ferry_catalog_close(c);

    int go[2];
    assert_int_equal(pipe(go), 0);
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            ferry_catalog *cc = NULL;
            ferry_err e = {0};
            if (ferry_catalog_open(url, &cc, &e))
                _exit(3);
            ferry_record s;
            slice(&s, "acme", 0, 0);
            s.version = ROUNDS; /* both hold the same version */
            s.u.slice.bytes = 1000 + (uint64_t)k;
            char ch;
            if (read(go[0], &ch, 1) != 1)
                _exit(5);
            int rc = ferry_catalog_update(cc, &s, &e);
            ferry_catalog_close(cc);
            _exit(rc == FERRY_OK ? 0 : rc == FERRY_ECONFLICT ? 1 : 2);
        }
    }
    assert_int_equal(write(go[1], "gg", 2), 2);
    int wins = 0, losses = 0;
    for (int k = 0; k < 2; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st));
        wins += WEXITSTATUS(st) == 0;
        losses += WEXITSTATUS(st) == 1;
    }
    close(go[0]);
    close(go[1]);
    assert_int_equal(wins, 1);
    assert_int_equal(losses, 1);
}

/* ---- ZooKeeper only: the layout ---- */

static zhandle_t *zk_raw(void)
{
    const char *hp = tc.zk_base + strlen("zk://");
    zhandle_t *zh = zookeeper_init(hp, NULL, 4000, NULL, NULL, 0);
    assert_non_null(zh);
    for (int i = 0; i < 200 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
        usleep(20000);
    assert_int_equal(zoo_state(zh), ZOO_CONNECTED_STATE);
    return zh;
}

static void mk(zhandle_t *zh, const char *path, const char *data)
{
    int rc = zoo_create(zh, path, data, data ? (int)strlen(data) : -1, &ZOO_OPEN_ACL_UNSAFE, 0,
                        NULL, 0);
    if (rc != ZOK && rc != ZNODEEXISTS)
        fail_msg("create %s: %s", path, zerror(rc));
}

static void test_layout(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    zoo_set_debug_level((ZooLogLevel)0);
    zhandle_t *zh = zk_raw();
    char url[512], root[128], p[256];
    ferry_err err = {0};
    ferry_catalog *c = NULL;

    /* a new catalog: marked, and an older ferry's scan of slices/ meets the guard */
    fresh_url(url, sizeof url);
    seed(url, 2);
    snprintf(root, sizeof root, "%s", strrchr(strchr(url + 5, '/'), '/'));
    *strchr(root, '?') = '\0';
    char buf[256];
    int len = sizeof buf - 1;
    struct Stat st;
    snprintf(p, sizeof p, "%s/layout", root);
    assert_int_equal(zoo_get(zh, p, 0, buf, &len, &st), ZOK);
    buf[len] = '\0';
    assert_string_equal(buf, ZT_LAYOUT);
    snprintf(p, sizeof p, "%s/routes/layout-2-tenant-documents/0", root);
    len = sizeof buf - 1;
    assert_int_equal(zoo_get(zh, p, 0, buf, &len, &st), ZOK);
    snprintf(p, sizeof p, "%s/slice_docs/acme", root);
    len = sizeof buf - 1;
    assert_int_equal(zoo_get(zh, p, 0, buf, &len, &st), ZOK);
    assert_int_equal(strncmp(buf, "ferry-tenant-doc 1\n0 0 ", 23), 0);
    snprintf(p, sizeof p, "%s/slices/acme", root);
    assert_int_equal(zoo_exists(zh, p, 0, &st), ZNONODE); /* no znode per slice */
    /* an older ferry writes a slice the old way into it: refused from then on */
    mk(zh, p, NULL);
    snprintf(p, sizeof p, "%s/slices/acme/7", root);
    mk(zh, p, "{\"split\":7}");
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "older layout"));
    assert_non_null(strstr(err.msg, "after this one marked it"));

    /* an older catalog (no marker, a znode per slice and route): refused, saying what to run */
    snprintf(root, sizeof root, "/entries-old-%d", (int)getpid());
    mk(zh, root, NULL);
    static const char *const old[] = {"slices", "slices/acme", "routes", "routes/acme"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", root, old[i]);
        mk(zh, p, NULL);
    }
    snprintf(p, sizeof p, "%s/slices/acme/0", root);
    mk(zh, p, "{\"bytes\":1,\"placement\":\"node1\",\"rows\":1,\"split\":0,\"tenant\":\"acme\"}");
    snprintf(url, sizeof url, "%s%s?timeout_ms=4000", tc.zk_base, root);
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "ferry catalog export"));
    assert_non_null(strstr(err.msg, "ferry catalog import"));
    snprintf(p, sizeof p, "%s/layout", root);
    assert_int_equal(zoo_exists(zh, p, 0, &st), ZNONODE); /* nothing marked by the refusal */

    /* converted when asked: every record moved into its tenant's documents, versions kept */
    snprintf(p, sizeof p, "%s/slices/acme/0", root);
    const char *d0 = "{\"bytes\":7,\"placement\":\"node1\",\"rows\":1,\"split\":0,\"tenant\":\"acme\"}";
    assert_int_equal(zoo_set(zh, p, d0, (int)strlen(d0), -1), ZOK); /* now at version 1 */
    static const char *const more[][2] = {
        {"slices/acme/1", "{\"bytes\":1,\"placement\":\"node1\",\"rows\":1,\"split\":1,\"tenant\":\"acme\"}"},
        {"slices/acme/1500", "{\"bytes\":1,\"placement\":\"node1\",\"rows\":1,\"split\":1500,\"tenant\":\"acme\"}"},
        {"routes/acme/0", "{\"shards\":\"node1\",\"split\":0,\"tenant\":\"acme\"}"},
        {"slices/zeta", NULL},
        {"slices/zeta/0", "{\"bytes\":2,\"placement\":\"node2\",\"rows\":1,\"split\":0,\"tenant\":\"zeta\"}"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, more[i][0]);
        mk(zh, p, more[i][1]);
    }
    snprintf(url, sizeof url, "%s%s?timeout_ms=4000&convert_layout=1", tc.zk_base, root);
    c = open_ok(url);
    ferry_record_list l = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, NULL, 0, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 4);
    assert_string_equal(l.items[0].u.slice.tenant, "acme");
    assert_int_equal(l.items[0].u.slice.bytes, 7);
    assert_int_equal(l.items[0].version, 1); /* the znode's version, kept */
    assert_int_equal(l.items[1].version, 0);
    assert_int_equal(l.items[2].u.slice.split, 1500);
    assert_string_equal(l.items[3].u.slice.tenant, "zeta");
    ferry_record_list_free(&l);
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, NULL, 0, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 1);
    ferry_record_list_free(&l);
    ferry_record s0;
    slice(&s0, "acme", 0, 8);
    s0.version = 1;
    assert_int_equal(ferry_catalog_update(c, &s0, &err), FERRY_OK); /* CAS at the kept version */
    ferry_catalog_close(c);
    snprintf(p, sizeof p, "%s/slices/acme", root);
    assert_int_equal(zoo_exists(zh, p, 0, &st), ZNONODE); /* the older znodes are gone */
    snprintf(url, sizeof url, "%s%s?timeout_ms=4000", tc.zk_base, root);
    c = open_ok(url); /* marked: opens without the parameter */
    ferry_catalog_close(c);

    /* a run interrupted after writing a document, or an older ferry writing after the
     * conversion: old records beside the tenant's document are refused, then merged into it */
    snprintf(p, sizeof p, "%s/slices/acme", root);
    mk(zh, p, NULL);
    snprintf(p, sizeof p, "%s/slices/acme/2", root);
    mk(zh, p, "{\"bytes\":9,\"placement\":\"node1\",\"rows\":1,\"split\":2,\"tenant\":\"acme\"}");
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_EUNSUPPORTED);
    snprintf(url, sizeof url, "%s%s?timeout_ms=4000&convert_layout=1", tc.zk_base, root);
    c = open_ok(url);
    const char *acme[] = {"acme"};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, acme, 1, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 4); /* 0, 1, 2, 1500 */
    assert_int_equal(l.items[0].u.slice.bytes, 8);
    assert_int_equal(l.items[0].version, 2); /* the update above, kept */
    assert_int_equal(l.items[2].u.slice.split, 2);
    assert_int_equal(l.items[2].u.slice.bytes, 9);
    ferry_record_list_free(&l);
    ferry_catalog_close(c);

    /* a layout this ferry does not know */
    snprintf(root, sizeof root, "/entries-new-%d", (int)getpid());
    mk(zh, root, NULL);
    snprintf(p, sizeof p, "%s/layout", root);
    mk(zh, p, "9");
    snprintf(url, sizeof url, "%s%s?timeout_ms=4000", tc.zk_base, root);
    assert_int_equal(ferry_catalog_open(url, &c, &err), FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "newer"));
    zookeeper_close(zh);
}

/* A document over ZT_DOC_MAX is refused with the limit named; splits beyond the buckets too. */
static void test_document_limit(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip();
        return;
    }
    char url[512];
    fresh_url(url, sizeof url);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    ferry_record s;
    for (uint32_t i = 0; i < 1000; i++) { /* ~1 KB each: over 384 KiB in bucket 0 */
        slice(&s, "big", i, 1);
        ferry_shard_set_clear(&s.u.slice.placement);
        for (int k = 0; k < FERRY_SHARDS_MAX; k++) { /* 16 names of 56 bytes: 911 bytes */
            char name[FERRY_NAME_MAX];
            snprintf(name, sizeof name, "n%02d%053d", k, 0);
            assert_int_equal(ferry_shard_set_add(&s.u.slice.placement, name, &err), FERRY_OK);
        }
        assert_int_equal(ferry_batch_create(b, &s, &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "jute.maxbuffer"));
    ferry_batch_free(b);
    ferry_record_list l = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, NULL, 0, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 0);
    ferry_record_list_free(&l);
    /* splits in several buckets are one tenant's records all the same */
    b = ferry_batch_new();
    static const uint32_t splits[] = {0, 1023, 1024, 2048, 4095};
    for (size_t i = 0; i < 5; i++) {
        slice(&s, "wide", splits[i], i);
        assert_int_equal(ferry_batch_create(b, &s, &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    const char *prefix[] = {"wide"};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, prefix, 1, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(l.items[i].u.slice.split, splits[i]);
    ferry_record_list_free(&l);
    slice(&s, "wide", 4096, 1);
    assert_int_equal(ferry_catalog_create(c, &s, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "4096 splits"));
    ferry_catalog_close(c);
}

int main(void)
{
    if (!temp_catalogs_init(&tc, "entries", "tenant documents"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_codec),
        cmocka_unit_test(test_other_entry_is_no_conflict),
        cmocka_unit_test(test_same_entry_conflicts),
        cmocka_unit_test(test_batch_on_one_document),
        cmocka_unit_test(test_processes_side_by_side),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_document_limit),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    temp_catalogs_done(&tc);
    return failed;
}

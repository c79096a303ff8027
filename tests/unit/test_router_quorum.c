/* [router] min_insert_replicas (lib/router/quorum.c, rt_quorum_accept) and the records it writes
 * (lib/flow/repair_need.c), on a real SQLite catalog in a temporary folder: when an insert some
 * shards failed is acknowledged (every slice it wrote reached enough of its replicas, rows of a
 * slice not split between two routing tables) and when not; what each record says after several
 * writes (missed: the union, held: the shards that took every one); and the compare-and-set that
 * keeps a record a newer write updated after a repair read it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "shards_text.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/repair_need.h"
#include "router/router_int.h"

typedef struct fixture {
    char dir[64];
    ferry_router r;
    rt_shard shards[4];
    rt_shard *slots[4];
    rt_out_shard outs[4];
    rt_out out;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ferry-unit-quorum.XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    snprintf(f->r.catalog_url, sizeof f->r.catalog_url, "sqlite:%s/catalog.db", f->dir);
    pthread_mutex_init(&f->r.quorum_mu, NULL);
    for (int i = 0; i < 4; i++) {
        snprintf(f->shards[i].name, sizeof f->shards[i].name, "s%d", i);
        f->slots[i] = &f->shards[i];
    }
    f->r.shards = f->slots;
    f->r.n_shards = 4;
    f->out.shards = f->outs;
    f->out.n = 4;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ferry_catalog_close(f->r.quorum_cat);
    pthread_mutex_destroy(&f->r.quorum_mu);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir); /* this test's own folder only */
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void fail_only(fixture *f, int shard)
{
    memset(f->outs, 0, sizeof f->outs);
    if (shard >= 0)
        f->outs[shard].failed = true;
}

static ferry_repair_need need_of(fixture *f, const char *tenant, uint32_t split, bool *found)
{
    ferry_catalog *cat = NULL;
    ferry_err err = {0};
    ferry_repair_need n;
    assert_int_equal(ferry_catalog_open(f->r.catalog_url, &cat, &err), FERRY_OK);
    assert_int_equal(ferry_repair_need_get(cat, tenant, split, &n, found, &err), FERRY_OK);
    ferry_catalog_close(cat);
    return n;
}

static void test_accept_and_record(void **state)
{
    fixture *f = *state;
    rt_touched t = {0};
    char missed[FERRY_LIST_MAX];
    uint32_t s01[] = {0, 1}, s2[] = {2}, s23[] = {2, 3};
    assert_int_equal(rt_touched_add(&t, "acme", 0, s01, 2), FERRY_OK);
    assert_int_equal(rt_touched_add(&t, "acme", 0, s01, 2), FERRY_OK); /* a second row */
    assert_int_equal(rt_touched_add(&t, "beta", 3, s23, 2), FERRY_OK);
    fail_only(f, 1);
    /* off (0): the failure is answered as one */
    assert_false(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed));
    f->r.min_insert_replicas = 2;
    assert_false(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed)); /* 1 of 2 */
    bool found;
    need_of(f, "acme", 0, &found);
    assert_false(found); /* refused: nothing recorded */
    f->r.min_insert_replicas = 1;
    assert_true(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed));
    assert_string_equal(missed, "s1");
    ferry_repair_need n = need_of(f, "acme", 0, &found);
    assert_true(found);
    assert_string_equal(shards_text(&n.missed), "s1");
    assert_string_equal(shards_text(&n.held), "s0");
    assert_int_equal(n.writes, 1);
    need_of(f, "beta", 3, &found);
    assert_false(found); /* beta's shards all took it */
    /* a second write missed by s0 instead: both missed one, no shard took every one */
    fail_only(f, 0);
    assert_true(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed));
    n = need_of(f, "acme", 0, &found);
    assert_string_equal(shards_text(&n.missed), "s1,s0");
    assert_string_equal(shards_text(&n.held), "");
    assert_int_equal(n.writes, 2);
    rt_touched_free(&t);

    /* a slice with its only replica failed is never acknowledged */
    assert_int_equal(rt_touched_add(&t, "solo", 0, s2, 1), FERRY_OK);
    fail_only(f, 2);
    assert_false(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed));
    rt_touched_free(&t);

    /* rows of a slice sent with two routing tables ({0,1}, then {0,2}): not one replica set */
    uint32_t s02[] = {0, 2};
    assert_int_equal(rt_touched_add(&t, "gamma", 1, s01, 2), FERRY_OK);
    assert_int_equal(rt_touched_add(&t, "gamma", 1, s02, 2), FERRY_OK);
    assert_true(t.items[0].mixed);
    fail_only(f, 2);
    assert_false(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed));
    fail_only(f, -1);
    assert_false(rt_quorum_accept(&f->r, &t, &f->out, missed, sizeof missed)); /* no failure */
    rt_touched_free(&t);
}

static void test_clear_cas(void **state)
{
    fixture *f = *state;
    ferry_catalog *cat = NULL;
    ferry_err err = {0};
    ferry_repair_need n, again;
    bool found;
    assert_int_equal(ferry_catalog_open(f->r.catalog_url, &cat, &err), FERRY_OK);
    ferry_shard_set nm = shard_set_of("s3"), nh = shard_set_of("s1,s2");
    assert_int_equal(ferry_repair_need_mark(cat, "delta", 2, &nm, &nh, &err), FERRY_OK);
    assert_int_equal(ferry_repair_need_get(cat, "delta", 2, &n, &found, &err), FERRY_OK);
    assert_true(found);
    assert_string_equal(shards_text(&n.held), "s1,s2");
    /* a newer acknowledged write after a repair read the record: its clear is refused */
    nm = shard_set_of("s2");
    nh = shard_set_of("s1,s3");
    assert_int_equal(ferry_repair_need_mark(cat, "delta", 2, &nm, &nh, &err), FERRY_OK);
    assert_int_equal(ferry_repair_need_clear(cat, &n, &err), FERRY_ECONFLICT);
    assert_int_equal(ferry_repair_need_get(cat, "delta", 2, &again, &found, &err), FERRY_OK);
    assert_true(found);
    assert_string_equal(shards_text(&again.missed), "s3,s2");
    assert_string_equal(shards_text(&again.held), "s1");
    assert_int_equal(ferry_repair_need_clear(cat, &again, &err), FERRY_OK);
    assert_int_equal(ferry_repair_need_get(cat, "delta", 2, &again, &found, &err), FERRY_OK);
    assert_false(found);
    assert_int_equal(ferry_repair_need_clear(cat, &again, &err), FERRY_OK); /* gone: fine */
    /* a tenant name too long for the id: a hashed id, the name kept in the record */
    char longname[FERRY_NAME_MAX];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    nm = shard_set_of("s0");
    nh = shard_set_of("s1");
    assert_int_equal(ferry_repair_need_mark(cat, longname, 7, &nm, &nh, &err), FERRY_OK);
    ferry_repair_need *all = NULL;
    size_t nall = 0;
    assert_int_equal(ferry_repair_need_list(cat, &all, &nall, &err), FERRY_OK);
    bool seen = false;
    for (size_t i = 0; i < nall; i++)
        seen |= !strcmp(all[i].tenant, longname) && all[i].split == 7;
    assert_true(seen);
    free(all);
    ferry_catalog_close(cat);
}

/* The routing switch's hand-over (ferry_repair_need_hand_over): the target takes the source's
 * place in each list (a clone: beside it), never twice; a union past FERRY_SHARDS_MAX shards is
 * refused rather than cut. */
static void test_hand_over(void **state)
{
    fixture *f = *state;
    ferry_catalog *cat = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_open(f->r.catalog_url, &cat, &err), FERRY_OK);
    ferry_shard_set nm = shard_set_of("s1"), nh = shard_set_of("s0,s2");
    assert_int_equal(ferry_repair_need_mark(cat, "delta", 5, &nm, &nh, &err), FERRY_OK);
    ferry_record rec;
    bool changed = true, found = false;
    /* a shard in neither list: nothing to write */
    assert_int_equal(ferry_repair_need_hand_over(cat, "delta", 5, "s9", "s3", false, &rec,
                                                 &changed, &err), FERRY_OK);
    assert_false(changed);
    /* a move of s0 to s3: held s3,s2 */
    assert_int_equal(ferry_repair_need_hand_over(cat, "delta", 5, "s0", "s3", false, &rec,
                                                 &changed, &err), FERRY_OK);
    assert_true(changed);
    assert_int_equal(ferry_catalog_update(cat, &rec, &err), FERRY_OK);
    ferry_record_free(&rec); /* its data */
    ferry_repair_need n;
    assert_int_equal(ferry_repair_need_get(cat, "delta", 5, &n, &found, &err), FERRY_OK);
    assert_string_equal(shards_text(&n.missed), "s1");
    assert_string_equal(shards_text(&n.held), "s3,s2");
    /* a clone of s1 to s4: missed s1,s4, held as it was */
    assert_int_equal(ferry_repair_need_hand_over(cat, "delta", 5, "s1", "s4", true, &rec,
                                                 &changed, &err), FERRY_OK);
    assert_true(changed);
    assert_int_equal(ferry_catalog_update(cat, &rec, &err), FERRY_OK);
    ferry_record_free(&rec); /* its data */
    assert_int_equal(ferry_repair_need_get(cat, "delta", 5, &n, &found, &err), FERRY_OK);
    assert_string_equal(shards_text(&n.missed), "s1,s4");
    assert_string_equal(shards_text(&n.held), "s3,s2");
    /* a move to a shard the list names already: the source goes, the target stays once */
    assert_int_equal(ferry_repair_need_hand_over(cat, "delta", 5, "s1", "s4", false, &rec,
                                                 &changed, &err), FERRY_OK);
    assert_true(changed);
    assert_int_equal(ferry_catalog_update(cat, &rec, &err), FERRY_OK);
    ferry_record_free(&rec); /* its data */
    assert_int_equal(ferry_repair_need_get(cat, "delta", 5, &n, &found, &err), FERRY_OK);
    assert_string_equal(shards_text(&n.missed), "s4");
    /* the union: 16 names fit, a 17th is refused and the record stays as it was */
    nh = shard_set_of("");
    shards_printf(&nm, "m0,m1,m2,m3,m4,m5,m6,m7,m8,m9,m10,m11,m12,m13,m14");
    assert_int_equal(ferry_repair_need_mark(cat, "delta", 5, &nm, &nh, &err), FERRY_OK);
    nm = shard_set_of("m15");
    assert_int_equal(ferry_repair_need_mark(cat, "delta", 5, &nm, &nh, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "the repair-need record of delta/5"));
    assert_int_equal(ferry_repair_need_get(cat, "delta", 5, &n, &found, &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_count(&n.missed), FERRY_SHARDS_MAX);
    ferry_catalog_close(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accept_and_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clear_cas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hand_over, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the sweep's set computation and retention's pure pieces (dates, cut-off,
 * selection, the deletion verdict). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/retention.h"
#include "ferry/sweep.h"

static void test_days(void **state)
{
    (void)state;
    assert_true(ferry_ymd_valid(20240229));
    assert_false(ferry_ymd_valid(20230229));
    assert_false(ferry_ymd_valid(20261301));
    assert_false(ferry_ymd_valid(20261100));
    assert_int_equal(ferry_ymd_add(20261101, -1), 20261031);
    assert_int_equal(ferry_ymd_add(20241231, 1), 20250101);
    assert_int_equal(ferry_ymd_add(20240301, -1), 20240229);
    assert_int_equal(ferry_ymd_of_time(0), 19700101);
    assert_int_equal(ferry_ymd_of_time(1795910399), 20261128); /* 2026-11-28 23:59:59 UTC */
    assert_int_equal(ferry_ymd_of_time(1795910400), 20261129);
}

static void test_cutoff(void **state)
{
    (void)state;
    ferry_err err = {0};
    uint32_t c = 0;
    time_t now = 1795867200; /* 2026-11-28 12:00 UTC */
    assert_int_equal(ferry_retention_cutoff(now, 90 * 86400ULL, 3, &c, &err), FERRY_OK);
    assert_int_equal(c, ferry_ymd_add(20261128, -89)); /* 90 newest days kept, today included */
    assert_int_equal(ferry_retention_cutoff(now, 1 * 86400ULL, 0, &c, &err), FERRY_OK);
    assert_int_equal(c, 20261128);
    assert_int_equal(ferry_retention_cutoff(now, 2 * 86400ULL, 3, &c, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "hot window"));
    assert_int_equal(ferry_retention_cutoff(now, 36 * 3600ULL, 0, &c, &err), FERRY_EINVAL);
    assert_int_equal(ferry_retention_cutoff(now, 0, 0, &c, &err), FERRY_EINVAL);

    ferry_partition_key k = {.tenant = "acme", .day = 20261001};
    ferry_retention_select sel = {.cutoff = 20261002};
    assert_true(ferry_retention_selects(&sel, &k));
    sel.cutoff = 20261001;
    assert_false(ferry_retention_selects(&sel, &k));
    sel.tenant = "beta";
    sel.cutoff = 20261101;
    assert_false(ferry_retention_selects(&sel, &k));
    sel.tenant = "acme";
    assert_true(ferry_retention_selects(&sel, &k));
    sel.all = true;
    sel.cutoff = 0;
    assert_true(ferry_retention_selects(&sel, &k));
    ferry_partition_key unknown = {.tenant = "", .day = 20200101};
    assert_false(ferry_retention_selects(&sel, &unknown)); /* per_tenant: no tenant to match */
    ferry_retention_select plain = {.cutoff = 20261101};
    assert_true(ferry_retention_selects(&plain, &unknown));
}

static void add(ferry_sweep_refs *r, const char *srv, const char *path, const char *key,
                uint64_t size)
{
    ferry_err err = {0};
    assert_int_equal(ferry_sweep_refs_add(r, srv, "cold", path, key, size, &err), FERRY_OK);
}

static void part(ferry_record *rec, const char *name, const char *servers, const char *key)
{
    ferry_err err = {0};
    ferry_record_init(rec, FERRY_REC_PART);
    strcpy(rec->u.part.table, "e");
    strcpy(rec->u.part.partition_id, "p");
    strcpy(rec->u.part.origin, "ferry_tier_1");
    strcpy(rec->u.part.name, name);
    strcpy(rec->u.part.servers, servers);
    assert_int_equal(ferry_part_add_object(&rec->u.part, key, 1, "", &err), FERRY_OK);
}

static void test_compute(void **state)
{
    (void)state;
    ferry_sweep_refs refs = {0};
    add(&refs, "n1", "store/a/p_1_1_0/data.bin", "t/shared", 10);
    add(&refs, "n2", "store/b/p_2_2_0/data.bin", "t/shared", 10);
    add(&refs, "n2", "store/b/detached/x_1_1_0/a.bin", "t/missing", 4);
    add(&refs, "n2", "store/b/detached/x_1_1_0/b.bin", "t/size", 9);
    add(&refs, "n1", "shadow/f/store/a/p_1_1_0/data.bin", "t/frozen", 3);
    add(&refs, "n1", "store/a/q_1_1_0/x.bin", NULL, 3);          /* outside ferry's store */
    add(&refs, "n1", "store/a/q_1_1_0/y.bin", "elsewhere/k", 3); /* outside the scope */
    add(&refs, "n1", "store/a/r_5_5_0/r.bin", "t/r", 2);
    add(&refs, "n2", "store/b/r_3_3_0/r.bin", "t/r", 2); /* an outdated folder: not drift */
    refs.items[refs.n - 1].outdated = true;
    ferry_object_info objs[] = {
        {.key = (char *)"t/shared", .size = 10, .mtime = 100},
        {.key = (char *)"t/size", .size = 5, .mtime = 100},
        {.key = (char *)"t/frozen", .size = 3, .mtime = 100},
        {.key = (char *)"t/old", .size = 7, .mtime = 100},
        {.key = (char *)"t/young", .size = 8, .mtime = 9000},
        {.key = (char *)"t/cat", .size = 1, .mtime = 100},
        {.key = (char *)"t/r", .size = 2, .mtime = 100},
    };
    ferry_record parts[3];
    part(&parts[0], "p1", "n1", "t/shared");  /* n2 holds it too: server_only drift */
    part(&parts[1], "p2", "n2,n3", "t/cat");  /* nobody holds it: catalog_only x2 */
    part(&parts[2], "r", "n1", "t/r");         /* n2's copy is outdated: no drift */
    const char *servers[] = {"n1", "n2"};
    ferry_sweep_input in = {.refs = &refs, .servers = servers, .n_servers = 2, .objects = objs,
                            .n_objects = 7, .scope_prefix = "t/", .parts = parts, .n_parts = 3,
                            .now = 10000, .min_age_s = 3600};
    ferry_sweep_report r;
    ferry_err err = {0};
    assert_int_equal(ferry_sweep_compute(&in, &r, &err), FERRY_OK);
    assert_int_equal(r.n_orphans, 2);
    assert_string_equal(r.orphans[0].key, "t/old");
    assert_true(r.orphans[0].old_enough);
    assert_string_equal(r.orphans[1].key, "t/young");
    assert_false(r.orphans[1].old_enough);
    assert_int_equal(r.n_dangling, 2);
    assert_string_equal(r.dangling[0].key, "t/missing");
    assert_true(r.dangling[0].missing);
    assert_string_equal(r.dangling[1].key, "t/size");
    assert_false(r.dangling[1].missing);
    assert_int_equal(r.dangling[1].have_size, 5);
    assert_int_equal(r.n_catalog_only_keys, 1);
    assert_string_equal(r.catalog_only_keys[0], "t/cat");
    assert_int_equal(r.n_outside, 2);
    assert_int_equal(r.n_referenced, 4);
    assert_int_equal(r.n_drift, 3);
    assert_int_equal(r.drift[0].kind, FERRY_DRIFT_SERVER_ONLY);
    assert_string_equal(r.drift[0].server, "n2");
    assert_string_equal(r.drift[0].part, "p1");
    assert_int_equal(r.drift[1].kind, FERRY_DRIFT_CATALOG_ONLY);
    assert_string_equal(r.drift[1].server, "n2");
    assert_string_equal(r.drift[1].part, "p2");
    assert_string_equal(r.drift[2].server, "n3");

    /* retention's verdict: live references and catalog parts with servers block */
    ferry_refset live;
    assert_int_equal(ferry_refset_build(&refs, &live, &err), FERRY_OK);
    size_t first = 0;
    assert_int_equal(ferry_refset_range(&live, "t/shared", &first), 2);
    const char *keys[] = {"t/shared", "t/cat", "t/old"};
    ferry_retention_verdict v[3];
    ferry_retention_decide(keys, 3, &live, parts, 2, v);
    assert_false(v[0].deletable);
    assert_non_null(strstr(v[0].blocker, "pointer file n1:cold:store/a/p_1_1_0/data.bin"));
    assert_false(v[1].deletable);
    assert_non_null(strstr(v[1].blocker, "catalog part e/p/p2"));
    assert_true(v[2].deletable);
    parts[1].u.part.servers[0] = '\0'; /* the catalog no longer lists a server */
    ferry_retention_decide(keys, 3, &live, parts, 2, v);
    assert_true(v[1].deletable);
    ferry_refset_free(&live);

    assert_true(ferry_sweep_path_is_live("store/a/p_1_1_0/data.bin"));
    assert_false(ferry_sweep_path_is_live("shadow/f/store/a/p_1_1_0/data.bin"));
    assert_false(ferry_sweep_path_is_live("store/a/detached/p_1_1_0/data.bin"));
    /* the folder of a part ClickHouse set aside as broken, and nothing else */
    const char *bp = "store/a/uuid/detached/broken-on-start_p_1_1_0/data.bin";
    assert_int_equal(ferry_sweep_broken_folder(bp), strlen("store/a/uuid/detached/broken-on-start_p_1_1_0"));
    assert_int_equal(ferry_sweep_broken_folder("detached/broken_p_2_2_0/x"), strlen("detached/broken_p_2_2_0"));
    assert_int_equal(ferry_sweep_broken_folder("store/a/detached/p_1_1_0/data.bin"), 0);
    assert_int_equal(ferry_sweep_broken_folder("store/a/xdetached/broken_p/data.bin"), 0);
    assert_int_equal(ferry_sweep_broken_folder("store/a/detached/broken_p"), 0);
    assert_int_equal(ferry_sweep_broken_folder("store/a/p_1_1_0/data.bin"), 0);
    ferry_sweep_report_free(&r);
    ferry_record_free(&parts[0]);
    ferry_record_free(&parts[1]);
    ferry_record_free(&parts[2]);
    ferry_sweep_refs_free(&refs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_days),
        cmocka_unit_test(test_cutoff),
        cmocka_unit_test(test_compute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

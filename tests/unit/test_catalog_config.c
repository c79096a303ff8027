/* The catalog's pure parts: reading [cluster]/[shard]/[table] from a config (values, defaults,
 * FILE:LINE errors, unknown keys) and the record codec (paths, strict decoding, transitions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "catalog/catalog_int.h"
#include "ferry/config.h"

static const char good[] = "[cluster]\n"
                           "name = lab\n"
                           "catalog = zk://127.0.0.1:2181/ferry\n"
                           "rf = 2\n"
                           "hash = xxh3\n"
                           "[shard \"node1\"]\n"
                           "capacity = 100G\n"
                           "replicas = http://a:8123, http://b:8123\n"
                           "agent = http://a:9123\n"
                           "agent_token_file = /x\n"
                           "[shard \"node2\"]\n"
                           "weight = 2.5\n"
                           "replicas = http://c:8123\n"
                           "[table \"events\"]\n"
                           "layout = per_tenant\n";

static int parse(const char *text, ferry_cluster_config *cc, ferry_err *err)
{
    ferry_config cfg = {0};
    int rc = ferry_config_parse(text, "ferry.conf", &cfg, err);
    if (!rc)
        rc = ferry_cluster_config_read(&cfg, cc, err);
    ferry_config_free(&cfg);
    return rc;
}

static void test_good_config(void **state)
{
    (void)state;
    ferry_cluster_config cc;
    ferry_err err = {0};
    assert_int_equal(parse(good, &cc, &err), FERRY_OK);
    assert_string_equal(cc.catalog, "zk://127.0.0.1:2181/ferry");
    assert_string_equal(cc.settings.name, "lab");
    assert_string_equal(cc.settings.hash, "xxh3");
    assert_int_equal(cc.settings.rf, 2);
    assert_true(cc.settings.fill == 0.85);
    assert_string_equal(cc.settings.clickhouse_version, "26.7");
    assert_int_equal(cc.settings.pointer_format, 5);
    assert_int_equal(cc.n_shards, 2);
    assert_int_equal(cc.shards[0].capacity, 100ull << 30);
    assert_true(cc.shards[0].weight == 1.0);
    assert_true(cc.shards[1].weight == 2.5);
    assert_int_equal(cc.shards[1].state, FERRY_SHARD_ACTIVE);
    assert_int_equal(cc.n_tables, 1);
    assert_int_equal(cc.tables[0].layout, FERRY_LAYOUT_PER_TENANT);
    assert_string_equal(cc.tables[0].tenant_column, "tenant");
    assert_string_equal(cc.tables[0].database, "default");
    ferry_cluster_config_free(&cc);
}

/* [cluster] clickhouse_object_access: read-create when absent, read-only when said so. */
static void test_object_access(void **state)
{
    (void)state;
    ferry_err err = {0};
    bool ro = true;
    assert_int_equal(ferry_object_access_readonly(NULL, &ro, &err), FERRY_OK);
    assert_false(ro);
    const char *modes[3] = {"", "clickhouse_object_access = read-create\n",
                            "clickhouse_object_access = read-only\n"};
    for (int i = 0; i < 3; i++) {
        char text[sizeof good + 64];
        snprintf(text, sizeof text, "[cluster]\nname = lab\ncatalog = sqlite:/x.db\n%s", modes[i]);
        ferry_config cfg = {0};
        assert_int_equal(ferry_config_parse(text, "ferry.conf", &cfg, &err), FERRY_OK);
        assert_int_equal(ferry_object_access_readonly(&cfg, &ro, &err), FERRY_OK);
        assert_int_equal(ro, i == 2);
        ferry_config_free(&cfg);
    }
}

static void expect_error(const char *from, const char *to, const char *msg)
{
    char text[sizeof good + 256];
    const char *at = strstr(good, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    ferry_cluster_config cc;
    ferry_err err = {0};
    assert_int_equal(parse(text, &cc, &err), FERRY_EINVAL);
    if (!strstr(err.msg, msg))
        fail_msg("expected '%s' in '%s'", msg, err.msg);
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_error("rf = 2\n", "rf = 3\n", "ferry.conf:4: [cluster] rf = '3'");
    expect_error("rf = 2\n", "rf = two\n", "ferry.conf:4:");
    expect_error("hash = xxh3\n", "hash = md5\n", "ferry.conf:5: [cluster] hash = 'md5': expected sha256 or xxh3");
    expect_error("hash = xxh3\n", "hash = xxh3\nfill = 0\n", "ferry.conf:6: [cluster] fill = '0'");
    expect_error("hash = xxh3\n", "pointer_format = 6\n", "ferry.conf:5: [cluster] pointer_format = '6'");
    expect_error("hash = xxh3\n", "clickhouse_version = latest\n", "clickhouse_version = 'latest'");
    expect_error("hash = xxh3\n", "clickhouse_object_access = readonly\n",
                 "ferry.conf:5: [cluster] clickhouse_object_access = 'readonly': expected read-create");
    expect_error("hash = xxh3\n", "colour = blue\n", "ferry.conf:5: unknown key 'colour' in [cluster]");
    expect_error("capacity = 100G\n", "capacity = lots\n", "ferry.conf:7: [shard \"node1\"] capacity = 'lots'");
    expect_error("weight = 2.5\n", "weight = -1\n", "ferry.conf:12: [shard \"node2\"] weight = '-1'");
    expect_error("replicas = http://c:8123\n", "replicas = c:8123\n", "ferry.conf:13: [shard \"node2\"] replicas");
    expect_error("replicas = http://c:8123\n", "", "[shard \"node2\"] needs 'replicas");
    expect_error("agent = http://a:9123\n", "agnet = http://a:9123\n", "ferry.conf:9: unknown key 'agnet' in [shard]");
    expect_error("layout = per_tenant\n", "layout = mixed\n", "ferry.conf:15: [table \"events\"] layout = 'mixed'");
    expect_error("layout = per_tenant\n", "day_column = \"day; drop\"\n", "day_column");
    expect_error("name = lab\n", "name = my lab\n", "ferry.conf:2: [cluster] name = 'my lab'");
    expect_error("catalog = zk://127.0.0.1:2181/ferry\n", "catalog = mysql://x\n", "ferry.conf:3: [cluster] catalog");
    expect_error("catalog = zk://127.0.0.1:2181/ferry\n", "", "[cluster] needs 'catalog");
}

static void test_codec(void **state)
{
    (void)state;
    ferry_err err = {0};
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_PART);
    snprintf(r.u.part.table, sizeof r.u.part.table, "events");
    snprintf(r.u.part.partition_id, sizeof r.u.part.partition_id, "4f2a");
    snprintf(r.u.part.origin, sizeof r.u.part.origin, "ferry_tier_00ff_0");
    snprintf(r.u.part.name, sizeof r.u.part.name, "all_1_1_0");
    assert_int_equal(ferry_part_add_object(&r.u.part, "k/1", 5, "sha256:x", &err), FERRY_OK);
    char path[256];
    assert_int_equal(cat_record_path(&r, path, sizeof path, &err), FERRY_OK);
    assert_string_equal(path, "parts/events/4f2a/ferry_tier_00ff_0/all_1_1_0");
    char *doc = cat_record_encode(&r);
    assert_string_equal(doc, "{\"bytes\":0,\"name\":\"all_1_1_0\",\"objects\":[{\"checksum\":\"sha256:x\","
                             "\"key\":\"k/1\",\"size\":5}],\"origin\":\"ferry_tier_00ff_0\","
                             "\"partition_id\":\"4f2a\",\"rows\":0,"
                             "\"servers\":\"\",\"table\":\"events\"}");
    ferry_record back;
    assert_int_equal(cat_record_decode(FERRY_REC_PART, doc, &back, &err), FERRY_OK);
    char *again = cat_record_encode(&back);
    assert_string_equal(doc, again);
    free(doc);
    free(again);
    ferry_record_free(&back);
    ferry_record_free(&r);
    /* strict decoding */
    assert_int_equal(cat_record_decode(FERRY_REC_TENANT, "{\"name\":\"a\"}", &back, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "'splits' is missing"));
    assert_int_equal(cat_record_decode(FERRY_REC_TENANT, "{\"name\":\"a\",\"splits\":1,\"x\":1}", &back, &err), FERRY_EINVAL);
    assert_int_equal(cat_record_decode(FERRY_REC_TENANT, "{\"name\":\"../a\",\"splits\":1}", &back, &err), FERRY_EINVAL);
    assert_int_equal(cat_record_decode(FERRY_REC_SHARD, "{\"name\":\"n\",\"weight\":1,\"capacity\":0,\"replicas\":\"\",\"agent\":\"\",\"zone\":\"\",\"state\":\"melted\"}", &back, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "active, draining, gone"));
    /* a move's transitions are the flow engine's (test_flow_journal.c, ferry_move_flow) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_config),
        cmocka_unit_test(test_object_access),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* What `ferry route-query` plans over (include/ferry/route_input.h): table specs, a config's
 * [table] sections, NAME=LOCAL, the routes TSV, each with its bad inputs and their messages;
 * and the routed query shown as JSON and text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/route_input.h"

static void test_table_specs(void **state)
{
    (void)state;
    ferry_sql_tables ts = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_sql_tables_add_spec(&ts, "events:shared", &err), FERRY_OK);
    assert_int_equal(ferry_sql_tables_add_spec(&ts, "hits:shared:org:", &err), FERRY_OK);
    assert_int_equal(ferry_sql_tables_add_spec(&ts, "logs:per_tenant:logs_{tenant}:part", &err),
                     FERRY_OK);
    assert_int_equal(ts.n, 3);
    assert_string_equal(ts.t[0].name, "events");
    assert_int_equal(ts.t[0].layout, FERRY_LAYOUT_SHARED);
    assert_string_equal(ts.t[0].tenant_column, "tenant");
    assert_string_equal(ts.t[0].split_column, "split");
    assert_string_equal(ts.t[1].tenant_column, "org");
    assert_string_equal(ts.t[1].split_column, "split"); /* an empty field keeps the default */
    assert_int_equal(ts.t[2].layout, FERRY_LAYOUT_PER_TENANT);
    assert_string_equal(ts.t[2].tenant_pattern, "logs_{tenant}");
    assert_string_equal(ts.t[2].split_column, "part");
    assert_null(ts.t[2].tenant_column);

    assert_int_equal(ferry_sql_tables_set_local(&ts, "events=events_local", &err), FERRY_OK);
    assert_string_equal(ts.local[0], "events_local");
    assert_null(ts.local[1]);
    ferry_sql_tables_free(&ts);
}

static void expect_spec_error(const char *spec, const char *needle)
{
    ferry_sql_tables ts = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_sql_tables_add_spec(&ts, spec, &err), FERRY_EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("spec '%s': message '%s' lacks '%s'", spec, err.msg, needle);
    assert_int_equal(ts.n, 0);
    ferry_sql_tables_free(&ts);
}

static void test_table_spec_errors(void **state)
{
    (void)state;
    expect_spec_error("events", "--tables 'events': expected NAME:shared[:TENANT[:SPLIT]]");
    expect_spec_error(":shared", "expected NAME:shared");
    expect_spec_error("a:shared:t:s:x", "expected NAME:shared");
    expect_spec_error("events:sharded", "--tables 'events:sharded': ");
    expect_spec_error("logs:per_tenant", "needs a name pattern with {tenant}, e.g. "
                                         "logs:per_tenant:logs_{tenant}");
    expect_spec_error("logs:per_tenant:logs", "needs a name pattern with {tenant}");

    ferry_sql_tables ts = {0};
    ferry_err err = {0};
    char spec[32];
    for (int k = 0; k < FERRY_SQL_MAX_TABLES; k++) {
        snprintf(spec, sizeof spec, "t%d:shared", k);
        assert_int_equal(ferry_sql_tables_add_spec(&ts, spec, &err), FERRY_OK);
    }
    assert_int_equal(ferry_sql_tables_add_spec(&ts, "one_more:shared", &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "at most 64 tables"));
    assert_int_equal(ferry_sql_tables_set_local(&ts, "nosuch=x", &err), FERRY_EINVAL);
    assert_string_equal(err.msg, "--local 'nosuch=x': nosuch is not a managed table");
    assert_int_equal(ferry_sql_tables_set_local(&ts, "t1", &err), FERRY_EINVAL);
    assert_string_equal(err.msg, "--local 't1': expected NAME=LOCAL");
    assert_int_equal(ferry_sql_tables_set_local(&ts, "t1=", &err), FERRY_EINVAL);
    assert_int_equal(ferry_sql_tables_set_local(&ts, "t=x", &err), FERRY_EINVAL); /* no prefix */
    ferry_sql_tables_free(&ts);
}

static void test_tables_from_config(void **state)
{
    (void)state;
    ferry_config cfg = {0};
    ferry_sql_tables ts = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_config_parse("[table \"events\"]\n"
                                        "  database = analytics\n"
                                        "[table \"logs\"]\n"
                                        "  layout = per_tenant\n"
                                        "  split_column = part\n"
                                        "[table \"audit\"]\n"
                                        "  layout = per_tenant\n"
                                        "  tenant_table = audit_{tenant}_v2\n",
                                        "x.conf", &cfg, &err),
                     FERRY_OK);
    assert_int_equal(ferry_sql_tables_from_config(&ts, &cfg, &err), FERRY_OK);
    assert_int_equal(ts.n, 3);
    assert_string_equal(ts.t[0].name, "events");
    assert_string_equal(ts.t[0].database, "analytics");
    assert_string_equal(ts.t[0].tenant_column, "tenant");
    assert_string_equal(ts.t[1].tenant_pattern, "logs_{tenant}"); /* the default pattern */
    assert_string_equal(ts.t[1].split_column, "part");
    assert_string_equal(ts.t[2].tenant_pattern, "audit_{tenant}_v2");
    ferry_sql_tables_free(&ts);
    ferry_config_free(&cfg);

    assert_int_equal(ferry_config_parse("[table \"events\"]\n  layout = sharded\n", "y.conf",
                                        &cfg, &err),
                     FERRY_OK);
    assert_int_equal(ferry_sql_tables_from_config(&ts, &cfg, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "y.conf:2: "));
    ferry_sql_tables_free(&ts);
    ferry_config_free(&cfg);

    assert_int_equal(ferry_config_parse("[table \"logs\"]\n  layout = per_tenant\n"
                                        "  tenant_table = logs_all\n",
                                        "z.conf", &cfg, &err),
                     FERRY_OK);
    assert_int_equal(ferry_sql_tables_from_config(&ts, &cfg, &err), FERRY_EINVAL);
    assert_string_equal(err.msg, "z.conf: table.logs.tenant_table must contain {tenant}");
    ferry_sql_tables_free(&ts);
    ferry_config_free(&cfg);
}

static void test_routes(void **state)
{
    (void)state;
    const char *tsv = "# tenant split shards\n"
                      "acme\t0\tn1\r\n"
                      "\n"
                      "  # indented comment\n"
                      "acme\t1\tn1,n2\n"
                      "beta\t4294967295\tn3"; /* no newline at the end */
    ferry_sql_routes r;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_routes_parse(tsv, strlen(tsv), "r.tsv", &r, &err), FERRY_OK);
    assert_int_equal(r.n, 3);
    assert_string_equal(r.v[0].tenant, "acme");
    assert_int_equal(r.v[0].split, 0);
    assert_int_equal(r.v[0].n_shards, 1);
    assert_string_equal(r.v[0].shards[0], "n1"); /* the \r went with the line end */
    assert_int_equal(r.v[1].n_shards, 2);
    assert_string_equal(r.v[1].shards[0], "n1");
    assert_string_equal(r.v[1].shards[1], "n2");
    assert_int_equal(r.v[2].split, 4294967295u);
    assert_string_equal(r.v[2].shards[0], "n3");
    ferry_sql_routes_free(&r);
}

static void expect_routes_error(const char *tsv, size_t len, const char *msg)
{
    ferry_sql_routes r;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_routes_parse(tsv, len, "r.tsv", &r, &err), FERRY_EINVAL);
    assert_string_equal(err.msg, msg);
    assert_null(r.v);
    assert_int_equal(r.n, 0);
}

static void test_routes_errors(void **state)
{
    (void)state;
    static const char expected[] = "expected tenant<TAB>split<TAB>shard[,shard...] (split a "
                                   "number below 2^32)";
    char msg[256];
    snprintf(msg, sizeof msg, "r.tsv:1: %s", expected);
    expect_routes_error("acme 0 n1\n", 10, msg);
    expect_routes_error("acme\t0\n", 7, msg);
    expect_routes_error("acme\t0\tn1\textra\n", 15, msg);
    expect_routes_error("\tn\tn1\n", 6, msg);
    expect_routes_error("acme\tx\tn1\n", 10, msg);
    expect_routes_error("acme\t-1\tn1\n", 11, msg);
    expect_routes_error("acme\t4294967296\tn1\n", 19, msg);
    expect_routes_error("acme\t0\t\n", 8, msg);
    snprintf(msg, sizeof msg, "r.tsv:2: %s", expected);
    expect_routes_error("#\nacme\t0 \tn1\n", 13, msg);
    expect_routes_error("acme\t0\tn1,,n2\n", 14, "r.tsv:1: empty shard name");
    expect_routes_error("acme\t0\tn1,\n", 11, "r.tsv:1: empty shard name");
    expect_routes_error("acme\t0\tn1\nbeta\t0\tn1\nacme\t0\tn2\n", 30,
                        "r.tsv:3: slice acme/0 listed twice");
    expect_routes_error("", 0, "r.tsv: no routes");
    expect_routes_error("# only a comment\n\n", 18, "r.tsv: no routes");
    expect_routes_error("acme\t0\tn1\n\0", 11, "r.tsv: contains a NUL byte");
}

static const ferry_sql_table two[] = {
    {"events", NULL, FERRY_LAYOUT_SHARED, "tenant", "split", NULL, false},
    {"logs", NULL, FERRY_LAYOUT_PER_TENANT, NULL, "split", "logs_{tenant}", false},
};

/* The plan shown both ways names the same servers and queries. */
static void test_show(void **state)
{
    (void)state;
    const char *tsv = "acme\t0\tn1\nacme\t1\tn2\n";
    const char *sql = "SELECT count() FROM events WHERE tenant = 'acme' FORMAT JSON";
    ferry_sql_routes r;
    ferry_routed rt = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_sql_routes_parse(tsv, strlen(tsv), "r.tsv", &r, &err), FERRY_OK);
    assert_int_equal(ferry_route_query(sql, strlen(sql), two, 2, NULL, r.v, r.n, &rt, &err),
                     FERRY_OK);
    json_t *o = ferry_routed_json(&rt, two, true);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "statement")), "select");
    assert_string_equal(json_string_value(json_object_get(o, "format")), "JSON");
    json_t *refs = json_object_get(o, "refs");
    assert_int_equal(json_array_size(refs), 1);
    json_t *ref0 = json_array_get(refs, 0);
    assert_string_equal(json_string_value(json_object_get(ref0, "table")), "events");
    assert_string_equal(json_string_value(json_array_get(json_object_get(ref0, "tenants"), 0)),
                        "acme");
    json_t *q = json_object_get(o, "queries");
    assert_int_equal(json_array_size(q), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(q, 0), "server")), "n1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(q, 1), "server")), "n2");
    assert_non_null(json_object_get(o, "initiator"));

    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_routed_text(&rt, two, true, &b), FERRY_OK);
    const char *t = ferry_buf_cstr(&b);
    assert_non_null(strstr(t, "statement: select\n"));
    assert_non_null(strstr(t, "ref 0: events (table events, level 0): tenants acme\n"));
    assert_non_null(strstr(t, "format: JSON (applied by the router)\n"));
    assert_non_null(strstr(t, "\nserver n1:\n  "));
    assert_non_null(strstr(t, "\nserver n2:\n  "));
    assert_non_null(strstr(t, "\ninitiator:\n  "));

    /* analysed only: no plan in either */
    json_t *a = ferry_routed_json(&rt, two, false);
    assert_null(json_object_get(a, "queries"));
    assert_null(json_object_get(a, "kind"));
    ferry_buf_reset(&b);
    assert_int_equal(ferry_routed_text(&rt, two, false, &b), FERRY_OK);
    assert_null(strstr(ferry_buf_cstr(&b), "plan:"));
    json_decref(a);
    json_decref(o);
    ferry_buf_free(&b);
    ferry_routed_free(&rt);
    ferry_sql_routes_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_specs),   cmocka_unit_test(test_table_spec_errors),
        cmocka_unit_test(test_tables_from_config), cmocka_unit_test(test_routes),
        cmocka_unit_test(test_routes_errors), cmocka_unit_test(test_show),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

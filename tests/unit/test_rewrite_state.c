/* A rewrite job's typed journal state (lib/flow/rewrite_state.h): the JSON it writes must be
 * byte for byte what ferry wrote when the state was a jansson object (records persist in catalogs
 * across versions, and a run resumes the jobs an earlier binary journaled), so each step of a
 * job's life is built twice: as the old code built it (plan_job's json_pack, then
 * json_object_set_new with the same keys in plan_source and the swap, dumped compact with sorted
 * keys) and through the typed fields, and both must give the literal text below; the literals
 * also decode and encode back unchanged. Keys this version does not know are written back; a
 * known key of the wrong type is refused with a message naming it; "{}" and a zeroed state are
 * the empty data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "flow/rewrite_state.h"

/* an --update expression with quotes, a backslash and UTF-8, as a user may give it */
#define UPD_EXPR "concat(note, ' \\\\ \"fixé\"')"
#define UPD_EXPR_JSON "concat(note, ' \\\\\\\\ \\\"fixé\\\"')"

/* PLANNED, --delete-where: what plan_job wrote */
static const char PLANNED_DELETE[] =
    "{\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\",\"expr\":\"user_id = 42\","
    "\"mode\":\"delete\",\"pid\":\"42-20261101-3\",\"rows_before\":1000,\"rows_matched\":10,"
    "\"server\":\"node1\",\"split\":3,\"table\":\"events_acme\",\"tenant\":\"acme\"}";
/* PLANNED, --update: col and where too */
static const char PLANNED_UPDATE[] =
    "{\"catalog_table\":\"events\",\"col\":\"note\",\"day\":20261101,\"db\":\"default\","
    "\"expr\":\"" UPD_EXPR_JSON "\",\"mode\":\"update\",\"pid\":\"42-20261101-3\","
    "\"rows_before\":1000,\"rows_matched\":10,\"server\":\"node1\",\"split\":3,\"table\":"
    "\"events_acme\",\"tenant\":\"acme\",\"where\":\"user_id = 42\"}";
/* BUILD: plan_source counted again, journaled the source parts and the old records */
static const char BUILD[] =
    "{\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\",\"expr\":\"user_id = 42\","
    "\"mode\":\"delete\",\"old\":[\"node1/42-20261101-3_1_1_0\",\"node2/42-20261101-3_2_2_0\"],"
    "\"pid\":\"42-20261101-3\",\"rows_after\":989,\"rows_before\":1000,\"rows_matched\":11,"
    "\"server\":\"node1\",\"split\":3,\"src\":\"0123456789abcdef\",\"src_n\":2,\"table\":"
    "\"events_acme\",\"tenant\":\"acme\"}";
/* SWAP journaled, the REPLACE form (and so through TIER, RECORD, DONE) */
static const char SWAPPED_REPLACE[] =
    "{\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\",\"expr\":\"user_id = 42\","
    "\"mode\":\"delete\",\"old\":[\"node1/42-20261101-3_1_1_0\",\"node2/42-20261101-3_2_2_0\"],"
    "\"pid\":\"42-20261101-3\",\"rows_after\":989,\"rows_before\":1000,\"rows_matched\":11,"
    "\"server\":\"node1\",\"split\":3,\"src\":\"0123456789abcdef\",\"src_n\":2,\"swap\":"
    "\"replace\",\"swapped\":true,\"table\":\"events_acme\",\"tenant\":\"acme\"}";
/* SWAP journaled, the attach form of an update erasing... nothing: every row kept, no old
 * record listed the server (an empty list is written) */
static const char SWAPPED_ATTACH[] =
    "{\"catalog_table\":\"events\",\"col\":\"note\",\"day\":20261101,\"db\":\"default\","
    "\"expr\":\"" UPD_EXPR_JSON "\",\"mode\":\"update\",\"old\":[],\"pid\":\"42-20261101-3\","
    "\"rows_after\":1000,\"rows_before\":1000,\"rows_matched\":10,\"server\":\"node1\","
    "\"split\":3,\"src\":\"fedcba9876543210\",\"src_n\":2,\"src_parts\":"
    "[\"42-20261101-3_1_1_0\",\"42-20261101-3_2_2_0\"],\"swap\":\"attach\",\"swapped\":true,"
    "\"table\":\"events_acme\",\"tenant\":\"acme\",\"where\":\"user_id = 42\"}";

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    assert_non_null(s);
    return s;
}

static void assert_encodes(const rw_state *st, const char *want)
{
    char *got = NULL;
    ferry_err err = {0};
    assert_int_equal(rw_state_encode(st, &got, &err), FERRY_OK);
    assert_string_equal(got, want);
    free(got);
}

/* decodes text and encodes it back unchanged */
static void assert_round_trip(const char *text)
{
    rw_state st;
    ferry_err err = {0};
    assert_int_equal(rw_state_decode(text, &st, &err), FERRY_OK);
    assert_encodes(&st, text);
    rw_state_free(&st);
}

/* the old code's data of a new job (plan_job's json_pack, then col and where for --update) */
static json_t *old_planned(const char *update_col, const char *expr, const char *where,
                           uint64_t rows, uint64_t matched)
{
    bool upd = update_col != NULL;
    json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:I}",
                          "server", "node1", "db", "default", "table", "events_acme",
                          "catalog_table", "events", "pid", "42-20261101-3", "tenant", "acme",
                          "day", (json_int_t)20261101, "split", (json_int_t)3,
                          "mode", upd ? "update" : "delete", "expr", expr,
                          "rows_before", (json_int_t)rows, "rows_matched", (json_int_t)matched);
    assert_non_null(d);
    if (upd) {
        json_object_set_new(d, "col", json_string(update_col));
        json_object_set_new(d, "where", json_string(where));
    }
    return d;
}

/* the old plan_source: counted again, the source digest and the old records */
static void old_source(json_t *d, uint64_t total, uint64_t matched, const char *src,
                       const char *const *old, size_t n_old)
{
    bool del = !strcmp(json_string_value(json_object_get(d, "mode")), "delete");
    json_object_set_new(d, "rows_before", json_integer((json_int_t)total));
    json_object_set_new(d, "rows_matched", json_integer((json_int_t)matched));
    json_object_set_new(d, "rows_after", json_integer((json_int_t)(del ? total - matched
                                                                     : total)));
    json_object_set_new(d, "src", json_string(src));
    json_object_set_new(d, "src_n", json_integer(2));
    json_t *a = json_array();
    for (size_t i = 0; i < n_old; i++)
        json_array_append_new(a, json_string(old[i]));
    json_object_set_new(d, "old", a);
}

/* the typed plan_job */
static void planned(rw_state *st, const char *update_col, const char *expr, const char *where,
                    uint64_t rows, uint64_t matched)
{
    ferry_err err = {0};
    assert_int_equal(rw_state_plan(st, "node1", "default", "events_acme", "events",
                                   "42-20261101-3", "acme", 20261101, 3, &err),
                     FERRY_OK);
    assert_int_equal(rw_state_set_change(st, update_col, expr, where, &err), FERRY_OK);
    st->rows_before = rows;
    st->rows_matched = matched;
    st->has_rows_before = st->has_rows_matched = true;
}

/* the typed plan_source */
static void source(rw_state *st, uint64_t total, uint64_t matched, const char *src,
                   const char *const *old, size_t n_old)
{
    ferry_err err = {0};
    st->rows_before = total;
    st->rows_matched = matched;
    st->rows_after = rw_state_is_update(st) ? total : total - matched;
    st->has_rows_before = st->has_rows_matched = st->has_rows_after = true;
    snprintf(st->src, sizeof st->src, "%s", src);
    st->src_n = 2;
    st->has_src_n = true;
    rw_names_free(&st->old);
    st->has_old = true;
    for (size_t i = 0; i < n_old; i++)
        assert_int_equal(rw_names_add(&st->old, old[i], &err), FERRY_OK);
}

static void assert_same(json_t *old_data, const rw_state *st, const char *want)
{
    char *old = dump(old_data);
    assert_string_equal(old, want);
    free(old);
    assert_encodes(st, want);
}

static void test_delete_life_as_before(void **state)
{
    (void)state;
    static const char *const old[] = {"node1/42-20261101-3_1_1_0", "node2/42-20261101-3_2_2_0"};
    rw_state st;

    /* PLANNED */
    planned(&st, NULL, "user_id = 42", "ignored without --update", 1000, 10);
    assert_same(old_planned(NULL, "user_id = 42", NULL, 1000, 10), &st, PLANNED_DELETE);
    assert_null(st.where);

    /* BUILD */
    json_t *d = old_planned(NULL, "user_id = 42", NULL, 1000, 10);
    old_source(d, 1000, 11, "0123456789abcdef", old, 2);
    source(&st, 1000, 11, "0123456789abcdef", old, 2);
    assert_same(d, &st, BUILD);

    /* SWAP (REPLACE): written at the swap, kept through TIER, RECORD and DONE */
    d = old_planned(NULL, "user_id = 42", NULL, 1000, 10);
    old_source(d, 1000, 11, "0123456789abcdef", old, 2);
    json_object_set_new(d, "swapped", json_true());
    json_object_set_new(d, "swap", json_string("replace"));
    st.swapped = st.has_swapped = true;
    snprintf(st.swap, sizeof st.swap, "replace");
    assert_same(d, &st, SWAPPED_REPLACE);
    assert_true(rw_names_has(&st.old, "node2/42-20261101-3_2_2_0"));
    assert_false(rw_names_has(&st.old, "node3/42-20261101-3_2_2_0"));
    rw_state_free(&st);
}

static void test_update_life_as_before(void **state)
{
    (void)state;
    ferry_err err = {0};
    rw_state st;

    /* PLANNED */
    planned(&st, "note", UPD_EXPR, "user_id = 42", 1000, 10);
    assert_same(old_planned("note", UPD_EXPR, "user_id = 42", 1000, 10), &st, PLANNED_UPDATE);

    /* BUILD with no old record, then the attach form of the swap */
    json_t *d = old_planned("note", UPD_EXPR, "user_id = 42", 1000, 10);
    old_source(d, 1000, 10, "fedcba9876543210", NULL, 0);
    json_object_set_new(d, "swapped", json_true());
    json_object_set_new(d, "swap", json_string("attach"));
    json_t *names = json_pack("[s, s]", "42-20261101-3_1_1_0", "42-20261101-3_2_2_0");
    json_object_set(d, "src_parts", names);
    json_decref(names);
    source(&st, 1000, 10, "fedcba9876543210", NULL, 0);
    st.swapped = st.has_swapped = true;
    snprintf(st.swap, sizeof st.swap, "attach");
    assert_int_equal(rw_names_add(&st.src_parts, "42-20261101-3_1_1_0", &err), FERRY_OK);
    assert_int_equal(rw_names_add(&st.src_parts, "42-20261101-3_2_2_0", &err), FERRY_OK);
    st.has_src_parts = true;
    assert_same(d, &st, SWAPPED_ATTACH);
    rw_state_free(&st);

    /* --update without --where (not the command line's, the library's option): where absent */
    planned(&st, "note", "1", NULL, 5, 5);
    assert_same(old_planned("note", "1", NULL, 5, 5), &st,
                "{\"catalog_table\":\"events\",\"col\":\"note\",\"day\":20261101,\"db\":"
                "\"default\",\"expr\":\"1\",\"mode\":\"update\",\"pid\":\"42-20261101-3\","
                "\"rows_before\":5,\"rows_matched\":5,\"server\":\"node1\",\"split\":3,"
                "\"table\":\"events_acme\",\"tenant\":\"acme\"}");
    rw_state_free(&st);
}

static void test_round_trips(void **state)
{
    (void)state;
    assert_round_trip(PLANNED_DELETE);
    assert_round_trip(PLANNED_UPDATE);
    assert_round_trip(BUILD);
    assert_round_trip(SWAPPED_REPLACE);
    assert_round_trip(SWAPPED_ATTACH);
    /* what ferry never writes but reads back as it was: an empty expression, swapped false */
    assert_round_trip("{\"expr\":\"\",\"swapped\":false,\"where\":\"\"}");

    rw_state st;
    ferry_err err = {0};
    assert_int_equal(rw_state_decode(SWAPPED_ATTACH, &st, &err), FERRY_OK);
    assert_string_equal(st.server, "node1");
    assert_string_equal(st.catalog_table, "events");
    assert_int_equal(st.day, 20261101);
    assert_int_equal(st.split, 3);
    assert_true(rw_state_is_update(&st));
    assert_string_equal(st.expr, UPD_EXPR);
    assert_string_equal(st.col, "note");
    assert_string_equal(st.where, "user_id = 42");
    assert_true(st.rows_before == 1000 && st.rows_matched == 10 && st.rows_after == 1000);
    assert_string_equal(st.src, "fedcba9876543210");
    assert_true(st.src_n == 2);
    assert_true(st.has_old);
    assert_int_equal(st.old.n, 0);
    assert_true(st.swapped);
    assert_string_equal(st.swap, "attach");
    assert_int_equal(st.src_parts.n, 2);
    assert_string_equal(st.src_parts.v[1], "42-20261101-3_2_2_0");
    assert_null(st.unknown);
    rw_state_free(&st);

    assert_int_equal(rw_state_decode(PLANNED_DELETE, &st, &err), FERRY_OK);
    assert_false(rw_state_is_update(&st));
    assert_null(st.where);
    assert_false(st.has_rows_after || st.has_src_n || st.has_old || st.swapped ||
                 st.has_swapped || st.has_src_parts);
    rw_state_free(&st);

    /* an expression far over the command line's 1024 bytes (a record keeps what it was given) */
    char *longer = malloc(5000), *text = malloc(5100);
    assert_non_null(longer);
    assert_non_null(text);
    memset(longer, 'x', 4999);
    longer[4999] = '\0';
    snprintf(text, 5100, "{\"expr\":\"%s\",\"mode\":\"delete\"}", longer);
    assert_round_trip(text);
    free(longer);
    free(text);
}

static void test_empty(void **state)
{
    (void)state;
    rw_state st;
    ferry_err err = {0};
    memset(&st, 0, sizeof st);
    assert_encodes(&st, "{}");
    assert_int_equal(rw_state_decode("{}", &st, &err), FERRY_OK);
    assert_string_equal(st.server, "");
    assert_null(st.expr);
    assert_false(st.has_day || st.has_rows_before || st.has_old || st.has_src_parts);
    assert_encodes(&st, "{}");
    rw_state_free(&st);
    assert_encodes(&st, "{}"); /* freed: empty again */
    /* a record without data reads as "{}" */
    assert_int_equal(rw_state_decode("", &st, &err), FERRY_OK);
    assert_encodes(&st, "{}");
    rw_state_free(&st);
}

static void test_unknown_keys_kept(void **state)
{
    (void)state;
    static const char LATER[] =
        "{\"expr\":\"x = 1\",\"future\":{\"a\":[1,\"x\"],\"b\":null},\"mode\":\"delete\","
        "\"pid\":\"p\",\"zeta\":1.5}";
    assert_round_trip(LATER);
    rw_state st;
    ferry_err err = {0};
    assert_int_equal(rw_state_decode(LATER, &st, &err), FERRY_OK);
    assert_non_null(json_object_get(st.unknown, "future"));
    /* they survive a change of the known fields */
    st.swapped = st.has_swapped = true;
    snprintf(st.swap, sizeof st.swap, "replace");
    assert_encodes(&st, "{\"expr\":\"x = 1\",\"future\":{\"a\":[1,\"x\"],\"b\":null},\"mode\":"
                        "\"delete\",\"pid\":\"p\",\"swap\":\"replace\",\"swapped\":true,"
                        "\"zeta\":1.5}");
    rw_state_free(&st);
    /* a mode of a later version is kept as it is */
    assert_round_trip("{\"mode\":\"merge\"}");
}

static void assert_refused(const char *text, const char *key)
{
    rw_state st;
    ferry_err err = {0};
    assert_int_equal(rw_state_decode(text, &st, &err), FERRY_EINVAL);
    if (!strstr(err.msg, key))
        fail_msg("decoding %s: \"%s\" does not name %s", text, err.msg, key);
    assert_null(st.expr); /* nothing owned after a failure */
    assert_null(st.old.v);
    assert_null(st.unknown);
    rw_state_free(&st);
}

static void test_wrong_types(void **state)
{
    (void)state;
    assert_refused("{\"day\":\"20261101\"}", "\"day\"");
    assert_refused("{\"split\":-1}", "\"split\"");
    assert_refused("{\"day\":4294967296}", "\"day\"");
    assert_refused("{\"rows_before\":\"1000\"}", "\"rows_before\"");
    assert_refused("{\"rows_matched\":-3}", "\"rows_matched\"");
    assert_refused("{\"rows_after\":1.0}", "\"rows_after\"");
    assert_refused("{\"src_n\":null}", "\"src_n\"");
    assert_refused("{\"server\":3}", "\"server\"");
    assert_refused("{\"mode\":\"a mode far longer than sixteen bytes\"}", "\"mode\"");
    assert_refused("{\"expr\":\"x = 1\",\"future\":1,\"where\":[]}", "\"where\"");
    assert_refused("{\"expr\":42}", "\"expr\"");
    assert_refused("{\"swapped\":1}", "\"swapped\"");
    assert_refused("{\"swapped\":\"true\"}", "\"swapped\"");
    assert_refused("{\"old\":\"a/b\"}", "\"old\"");
    assert_refused("{\"old\":[\"a/b\",2]}", "\"old\" item 1");
    assert_refused("{\"src_parts\":{}}", "\"src_parts\"");
    assert_refused("{\"expr\":\"x\",\"src_parts\":[null]}", "\"src_parts\" item 0");
    assert_refused("[]", "not a JSON object");
    assert_refused("not json", "not a JSON object");
}

static void test_plan_bounds(void **state)
{
    (void)state;
    rw_state st;
    ferry_err err = {0};
    char longer[FERRY_NAME_MAX + 1];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    /* a value too long for its field is refused, naming the key */
    assert_int_equal(rw_state_plan(&st, "node1", "default", longer, "events", "p", "t", 1, 0,
                                   &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "\"table\""));
    rw_state_free(&st);
    assert_int_equal(rw_state_plan(&st, "node1", "default", "t", "events", "p", "t", 1, 0, &err),
                     FERRY_OK);
    assert_int_equal(rw_state_set_change(&st, longer, "1", "1", &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "\"col\""));
    /* a second change replaces the first (no leak: the sanitizers would tell) */
    assert_int_equal(rw_state_set_change(&st, "note", "1", "x = 1", &err), FERRY_OK);
    assert_int_equal(rw_state_set_change(&st, NULL, "x = 2", "ignored", &err), FERRY_OK);
    assert_string_equal(st.mode, "delete");
    assert_string_equal(st.expr, "x = 2");
    assert_null(st.where);
    rw_state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delete_life_as_before),
        cmocka_unit_test(test_update_life_as_before),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_unknown_keys_kept),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_plan_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

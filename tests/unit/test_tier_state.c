/* A tiering job's typed journal state (lib/flow/tier_state.h): the JSON it writes must be byte
 * for byte what ferry wrote when the state was a jansson object (records persist in catalogs
 * across versions), so each state of a job's life is built twice: as the old code built it
 * (json_pack and json_object_set_new with the same keys, dumped compact with sorted keys) and
 * through the typed fields, and both must give the literal text below; the literals also decode
 * and encode back unchanged. Keys this version does not know (also inside fp) are written back;
 * a known key of the wrong type is refused with a message naming it; "{}" and a zeroed state are
 * the empty data; the identity helper keeps what a requeued job kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "flow/tier_state.h"

/* PLANNED: what prepare_job wrote */
static const char PLANNED[] =
    "{\"attempt\":0,\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\","
    "\"partition\":\"('t\\\\'1',20261101,3)\",\"pid\":\"42-20261101-3\",\"server\":\"node1\","
    "\"split\":3,\"table\":\"events_local\",\"tenant\":\"t'1\"}";
/* after ATTACH: frozen, uploaded with hashes checked, the fingerprint kept */
static const char ATTACHED[] =
    "{\"attempt\":1,\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\","
    "\"fp\":{\"by\":\"parts\",\"distinct\":\"2\",\"rows\":1000,\"sum\":\"18446744073709551615\","
    "\"xor\":\"81985529216486895\"},\"freeze\":\"ferry_tier_0123456789abcdef_1\",\"hashed\":true,"
    "\"hot\":[\"42-20261101-3_1_1_0\",\"42-20261101-3_2_2_0\"],\"partition\":"
    "\"('t\\\\'1',20261101,3)\",\"pid\":\"42-20261101-3\",\"server\":\"node1\",\"split\":3,"
    "\"table\":\"events_local\",\"tenant\":\"t'1\"}";
/* after the swap and CLEANUP's records, by rows (an agent of API 1: hashed false) */
static const char RECORDED[] =
    "{\"attempt\":2,\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\","
    "\"fp\":{\"distinct\":\"7\",\"rows\":7,\"sum\":\"12\",\"xor\":\"0\"},\"freeze\":"
    "\"ferry_tier_0123456789abcdef_2\",\"hashed\":false,\"hot\":[\"42-20261101-3_3_3_0\"],"
    "\"max_block\":3,\"merges_stopped\":true,\"partition\":\"('t\\\\'1',20261101,3)\",\"pid\":"
    "\"42-20261101-3\",\"recorded\":true,\"server\":\"node1\",\"split\":3,\"swap\":\"attach\","
    "\"swapped\":true,\"table\":\"events_local\",\"tenant\":\"t'1\"}";
/* a swap taken back (no room), then rolled back: swapped false is written */
static const char ROLLED_BACK[] =
    "{\"attempt\":1,\"catalog_table\":\"events\",\"day\":20261101,\"db\":\"default\","
    "\"freeze\":\"ferry_tier_0123456789abcdef_1\",\"merges_stopped\":true,\"partition\":"
    "\"('t\\\\'1',20261101,3)\",\"pid\":\"42-20261101-3\",\"rolled_back\":true,\"server\":"
    "\"node1\",\"split\":3,\"swapped\":false,\"table\":\"events_local\",\"tenant\":\"t'1\"}";
/* VERIFY undoing a swap a broken part spoiled (tier_mend.c): "mend" journaled before its
 * statement */
static const char MENDING[] =
    "{\"attempt\":1,\"freeze\":\"ferry_tier_0123456789abcdef_1\",\"hot\":[\"p_1_1_0\"],"
    "\"max_block\":1,\"mend\":true,\"merges_stopped\":true,\"pid\":\"p\",\"server\":"
    "\"node1\",\"swap\":\"attach\",\"swapped\":true}";
/* a record whose hot list is in companion records (tier_hot.c) */
static const char HOT_IN[] =
    "{\"attempt\":1,\"freeze\":\"ferry_tier_0123456789abcdef_1\",\"hot_in\":3,\"pid\":\"p\","
    "\"server\":\"node1\"}";

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    assert_non_null(s);
    return s;
}

static void assert_encodes(const tier_state *st, const char *want)
{
    char *got = NULL;
    ferry_err err = {0};
    assert_int_equal(tier_state_encode(st, &got, &err), FERRY_OK);
    assert_string_equal(got, want);
    free(got);
}

/* decodes text and encodes it back unchanged */
static void assert_round_trip(const char *text)
{
    tier_state st;
    ferry_err err = {0};
    assert_int_equal(tier_state_decode(text, &st, &err), FERRY_OK);
    assert_encodes(&st, text);
    tier_state_free(&st);
}

/* the old code's data of a new job (prepare_job's json_pack) */
static json_t *old_planned(void)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "server", "node1",
                     "db", "default", "table", "events_local", "catalog_table", "events", "pid",
                     "42-20261101-3", "partition", "('t\\'1',20261101,3)", "tenant", "t'1", "day",
                     (json_int_t)20261101, "split", (json_int_t)3, "attempt", (json_int_t)0);
}

/* the old code's fp (tier_steps.c fp_json) */
static json_t *old_fp(const ferry_fingerprint *fp, bool by_parts)
{
    char s[3][24];
    snprintf(s[0], sizeof s[0], "%llu", (unsigned long long)fp->hash_sum);
    snprintf(s[1], sizeof s[1], "%llu", (unsigned long long)fp->hash_xor);
    snprintf(s[2], sizeof s[2], "%llu", (unsigned long long)fp->distinct);
    json_t *o = json_pack("{s:I, s:s, s:s, s:s}", "rows", (json_int_t)fp->rows, "sum", s[0],
                          "xor", s[1], "distinct", s[2]);
    if (by_parts)
        json_object_set_new(o, "by", json_string("parts"));
    return o;
}

static void planned(tier_state *st)
{
    ferry_err err = {0};
    assert_int_equal(tier_state_plan(st, "node1", "default", "events_local", "events",
                                     "42-20261101-3", "('t\\'1',20261101,3)", "t'1", 20261101, 3,
                                     &err),
                     FERRY_OK);
}

static void test_job_life_as_before(void **state)
{
    (void)state;
    ferry_err err = {0};
    tier_state st;
    ferry_fingerprint fp = {.rows = 1000, .hash_sum = UINT64_MAX, .hash_xor = 0x0123456789abcdefull,
                            .distinct = 2, .parts = 2, .bytes = 99};

    /* PLANNED */
    char *old = dump(old_planned());
    assert_string_equal(old, PLANNED);
    free(old);
    planned(&st);
    assert_encodes(&st, PLANNED);

    /* FREEZE, UPLOAD, ATTACH */
    json_t *d = old_planned();
    json_object_set_new(d, "attempt", json_integer(1));
    json_object_set_new(d, "freeze", json_string("ferry_tier_0123456789abcdef_1"));
    json_object_set_new(d, "hot", json_pack("[s, s]", "42-20261101-3_1_1_0", "42-20261101-3_2_2_0"));
    json_object_set_new(d, "hashed", json_true());
    json_object_set_new(d, "fp", old_fp(&fp, true));
    old = dump(d);
    assert_string_equal(old, ATTACHED);
    free(old);
    st.attempt++;
    snprintf(st.freeze, sizeof st.freeze, "ferry_tier_0123456789abcdef_1");
    assert_int_equal(tier_state_hot_add(&st, "42-20261101-3_1_1_0", &err), FERRY_OK);
    assert_int_equal(tier_state_hot_add(&st, "42-20261101-3_2_2_0", &err), FERRY_OK);
    st.hashed = st.has_hashed = true;
    tier_state_set_fp(&st, &fp, true);
    assert_encodes(&st, ATTACHED);
    assert_true(tier_state_hot_has(&st, "42-20261101-3_2_2_0"));
    assert_false(tier_state_hot_has(&st, "42-20261101-3_9_9_0"));

    /* a second attempt by rows, swapped, recorded */
    ferry_fingerprint rows = {.rows = 7, .hash_sum = 12, .hash_xor = 0, .distinct = 7};
    d = old_planned();
    json_object_set_new(d, "attempt", json_integer(2));
    json_object_set_new(d, "freeze", json_string("ferry_tier_0123456789abcdef_2"));
    json_object_set_new(d, "hot", json_pack("[s]", "42-20261101-3_3_3_0"));
    json_object_set_new(d, "hashed", json_false());
    json_object_set_new(d, "fp", old_fp(&rows, false));
    json_object_set_new(d, "merges_stopped", json_true());
    json_object_set_new(d, "swap", json_string("attach"));
    json_object_set_new(d, "max_block", json_integer(3));
    json_object_set_new(d, "swapped", json_true());
    json_object_set_new(d, "recorded", json_true());
    old = dump(d);
    assert_string_equal(old, RECORDED);
    free(old);
    st.attempt++;
    snprintf(st.freeze, sizeof st.freeze, "ferry_tier_0123456789abcdef_2");
    tier_state_hot_clear(&st);
    assert_int_equal(tier_state_hot_add(&st, "42-20261101-3_3_3_0", &err), FERRY_OK);
    st.hashed = false;
    tier_state_set_fp(&st, &rows, false);
    st.merges_stopped = true;
    snprintf(st.swap, sizeof st.swap, "attach");
    st.max_block = 3;
    st.has_max_block = true;
    st.swapped = st.has_swapped = true;
    st.recorded = true;
    assert_encodes(&st, RECORDED);
    /* `recorded` taken back (a batch that failed) leaves the data without it */
    st.recorded = false;
    d = json_loads(RECORDED, 0, NULL);
    json_object_del(d, "recorded");
    old = dump(d);
    assert_encodes(&st, old);
    free(old);
    tier_state_free(&st);

    /* the swap taken back, then the rollback */
    planned(&st);
    st.attempt = 1;
    snprintf(st.freeze, sizeof st.freeze, "ferry_tier_0123456789abcdef_1");
    st.merges_stopped = true;
    snprintf(st.swap, sizeof st.swap, "replace");
    st.max_block = 9;
    st.has_max_block = st.swapped = st.has_swapped = true;
    st.swap[0] = '\0';
    st.has_max_block = false;
    st.swapped = false;
    st.rolled_back = true;
    assert_encodes(&st, ROLLED_BACK);
    tier_state_free(&st);
}

static void test_round_trips(void **state)
{
    (void)state;
    assert_round_trip(PLANNED);
    assert_round_trip(ATTACHED);
    assert_round_trip(RECORDED);
    assert_round_trip(ROLLED_BACK);
    assert_round_trip(HOT_IN);
    assert_round_trip(MENDING);
    assert_round_trip("{\"hot\":[],\"max_block\":-1,\"pid\":\"p\"}");

    tier_state st;
    ferry_err err = {0};
    assert_int_equal(tier_state_decode(MENDING, &st, &err), FERRY_OK);
    assert_true(st.mend && st.swapped);
    tier_state_free(&st);
    assert_int_equal(tier_state_decode(ATTACHED, &st, &err), FERRY_OK);
    assert_false(st.mend);
    assert_string_equal(st.server, "node1");
    assert_string_equal(st.tenant, "t'1");
    assert_int_equal(st.day, 20261101);
    assert_int_equal(st.split, 3);
    assert_int_equal(st.attempt, 1);
    assert_int_equal(st.n_hot, 2);
    assert_string_equal(st.hot[1], "42-20261101-3_2_2_0");
    assert_true(st.has_fp && st.fp_by_parts && st.hashed);
    assert_true(st.fp.hash_sum == UINT64_MAX);
    assert_true(st.fp.hash_xor == 0x0123456789abcdefull);
    assert_false(st.has_max_block || st.swapped || st.has_swapped || st.recorded);
    assert_string_equal(st.swap, "");
    tier_state_free(&st);

    assert_int_equal(tier_state_decode(HOT_IN, &st, &err), FERRY_OK);
    assert_true(st.has_hot_in && !st.has_hot);
    assert_int_equal(st.hot_in, 3);
    tier_state_free(&st);

    /* the freeze's time, for a resumed run's wait for routers' open writes */
    assert_round_trip("{\"freeze\":\"f\",\"frozen_at\":1796400000123,\"pid\":\"p\"}");
    assert_int_equal(tier_state_decode("{\"frozen_at\":1796400000123,\"pid\":\"p\"}", &st, &err),
                     FERRY_OK);
    assert_true(st.has_frozen_at && st.frozen_at == 1796400000123ull);
    tier_state_free(&st);
    assert_int_equal(tier_state_decode(ATTACHED, &st, &err), FERRY_OK);
    assert_false(st.has_frozen_at); /* written by a version that did not record it */
    tier_state_free(&st);
}

static void test_empty(void **state)
{
    (void)state;
    tier_state st;
    ferry_err err = {0};
    memset(&st, 0, sizeof st);
    assert_encodes(&st, "{}");
    assert_int_equal(tier_state_decode("{}", &st, &err), FERRY_OK);
    assert_string_equal(st.server, "");
    assert_false(st.has_day || st.has_attempt || st.has_hot || st.has_fp);
    assert_encodes(&st, "{}");
    tier_state_free(&st);
    assert_encodes(&st, "{}"); /* freed: empty again */
}

static void test_unknown_keys_kept(void **state)
{
    (void)state;
    /* a later version's keys, at the top and inside fp, another "by" included */
    static const char LATER[] =
        "{\"attempt\":1,\"fp\":{\"by\":\"blocks\",\"distinct\":\"1\",\"rows\":1,\"sum\":\"2\","
        "\"weight\":[1,2],\"xor\":\"3\"},\"future\":{\"a\":[1,\"x\"],\"b\":null},\"pid\":\"p\","
        "\"zeta\":1.5}";
    assert_round_trip(LATER);
    tier_state st;
    ferry_err err = {0};
    assert_int_equal(tier_state_decode(LATER, &st, &err), FERRY_OK);
    assert_false(st.fp_by_parts);
    assert_non_null(json_object_get(st.unknown, "future"));
    /* they survive a change of the known fields */
    st.attempt = 2;
    st.recorded = true;
    assert_encodes(&st, "{\"attempt\":2,\"fp\":{\"by\":\"blocks\",\"distinct\":\"1\",\"rows\":1,"
                        "\"sum\":\"2\",\"weight\":[1,2],\"xor\":\"3\"},\"future\":{\"a\":[1,"
                        "\"x\"],\"b\":null},\"pid\":\"p\",\"recorded\":true,\"zeta\":1.5}");
    /* a new fp is written whole, as fp_json wrote it */
    ferry_fingerprint fp = {.rows = 5, .hash_sum = 6, .hash_xor = 7, .distinct = 5};
    tier_state_set_fp(&st, &fp, true);
    assert_encodes(&st, "{\"attempt\":2,\"fp\":{\"by\":\"parts\",\"distinct\":\"5\",\"rows\":5,"
                        "\"sum\":\"6\",\"xor\":\"7\"},\"future\":{\"a\":[1,\"x\"],\"b\":null},"
                        "\"pid\":\"p\",\"recorded\":true,\"zeta\":1.5}");
    tier_state_free(&st);
}

static void assert_refused(const char *text, const char *key)
{
    tier_state st;
    ferry_err err = {0};
    assert_int_equal(tier_state_decode(text, &st, &err), FERRY_EINVAL);
    if (!strstr(err.msg, key))
        fail_msg("decoding %s: \"%s\" does not name %s", text, err.msg, key);
    assert_null(st.hot); /* nothing owned after a failure */
    assert_null(st.unknown);
    tier_state_free(&st);
}

static void test_wrong_types(void **state)
{
    (void)state;
    assert_refused("{\"day\":\"20261101\"}", "\"day\"");
    assert_refused("{\"split\":-1}", "\"split\"");
    assert_refused("{\"attempt\":4294967296}", "\"attempt\"");
    assert_refused("{\"attempt\":1.0}", "\"attempt\"");
    assert_refused("{\"server\":3}", "\"server\"");
    assert_refused("{\"future\":1,\"swapped\":1}", "\"swapped\"");
    assert_refused("{\"merges_stopped\":\"yes\"}", "\"merges_stopped\"");
    assert_refused("{\"max_block\":null}", "\"max_block\"");
    assert_refused("{\"hot\":\"a\"}", "\"hot\"");
    assert_refused("{\"hot\":[\"a\",1]}", "\"hot\" item 1");
    assert_refused("{\"fp\":[]}", "\"fp\"");
    assert_refused("{\"fp\":{\"rows\":\"1\"}}", "fp.rows");
    assert_refused("{\"fp\":{\"sum\":5}}", "fp.sum");
    assert_refused("{\"fp\":{\"xor\":\"-1\"}}", "fp.xor");
    assert_refused("{\"fp\":{\"by\":true}}", "fp.by");
    assert_refused("{\"swap\":\"a swap name far longer than sixteen bytes\"}", "\"swap\"");
    assert_refused("[]", "not a JSON object");
    assert_refused("not json", "not a JSON object");
}

static void test_identity(void **state)
{
    (void)state;
    tier_state st, id;
    ferry_err err = {0};
    assert_int_equal(tier_state_decode(RECORDED, &st, &err), FERRY_OK);
    tier_state_identity(&st, &id);
    tier_state_free(&st);
    /* what requeue_job kept: the keys of a new job, its attempt counted on */
    assert_encodes(&id, "{\"attempt\":2,\"catalog_table\":\"events\",\"day\":20261101,\"db\":"
                        "\"default\",\"partition\":\"('t\\\\'1',20261101,3)\",\"pid\":"
                        "\"42-20261101-3\",\"server\":\"node1\",\"split\":3,\"table\":"
                        "\"events_local\",\"tenant\":\"t'1\"}");
    tier_state_free(&id);
    /* a key the data did not have stays out */
    assert_int_equal(tier_state_decode(HOT_IN, &st, &err), FERRY_OK);
    tier_state_identity(&st, &id);
    tier_state_free(&st);
    assert_encodes(&id, "{\"attempt\":1,\"pid\":\"p\",\"server\":\"node1\"}");
    tier_state_free(&id);
    /* a value too long for its field is refused, naming the key */
    char longer[FERRY_NAME_MAX + 1];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(tier_state_plan(&st, "node1", "default", longer, "events", "p", "(1)", "t", 1,
                                     0, &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "\"table\""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_life_as_before),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_unknown_keys_kept),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

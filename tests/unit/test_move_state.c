/* A move's typed journal state (lib/flow/move_state.h): the JSON it writes must be byte for byte
 * what ferry wrote when the state was a jansson object (records persist in catalogs across
 * versions), so each state of a move's data is built twice: as the old code built it (the
 * literal of move_begin.c, json_array_append_new of a freeze name, mv_fp_json's json_pack,
 * dumped compact with sorted keys) and through the typed fields, and both must give the literal
 * text below; the literals also decode and encode back unchanged. Records of versions before the
 * digest decode; keys this version does not know (also inside fp's entries) are written back; a
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

#include "flow/move_state.h"

/* what move_begin.c wrote for a new move and a new clone: a literal, keys not sorted */
static const char BEGUN[] = "{\"freezes\":[],\"fp\":{}}";
static const char BEGUN_CLONE[] = "{\"freezes\":[],\"fp\":{},\"mode\":\"clone\"}";
/* the same data as every journal write wrote it (json_dumps, keys sorted: "fp" first) */
static const char PLANNED[] = "{\"fp\":{},\"freezes\":[]}";
static const char PLANNED_CLONE[] = "{\"fp\":{},\"freezes\":[],\"mode\":\"clone\"}";
/* CLONE: the snapshot's name journaled before the freeze, then a catch-up round's */
static const char FROZEN[] =
    "{\"fp\":{},\"freezes\":[\"mv_1767225600_0a1b2c3d_c1\",\"mv_1767225600_0a1b2c3d_s2r0\"]}";
/* the publish step: the verified fingerprints of two tables (one numbering blocks per
 * partition: no top), the snapshot still being removed */
static const char PUBLISHED[] =
    "{\"fp\":{\"events\":{\"digest\":{\"parts\":3,\"rows\":1000,\"sum\":\"18446744073709551615\","
    "\"xor\":\"81985529216486895\"},\"rows\":1000,\"sum\":\"9223372036854775808\",\"top\":42,"
    "\"xor\":\"1\"},\"users\":{\"digest\":{\"parts\":0,\"rows\":0,\"sum\":\"0\",\"xor\":\"0\"},"
    "\"rows\":0,\"sum\":\"0\",\"xor\":\"0\"}},\"freezes\":[\"mv_1767225600_0a1b2c3d_c1\"]}";
/* a clone in SWITCH */
static const char CLONE_SWITCH[] =
    "{\"fp\":{},\"freezes\":[\"cl_1767225600_0a1b2c3d_c1\"],\"mode\":\"clone\"}";
/* a record of a version before the digest (fp entries {rows, sum, xor}) */
static const char BEFORE_DIGEST[] =
    "{\"fp\":{\"events\":{\"rows\":7,\"sum\":\"12\",\"xor\":\"3\"}},\"freezes\":[]}";
/* a later version's keys: at the top, in an entry, in a digest, and a mode it added */
static const char LATER[] =
    "{\"fp\":{\"events\":{\"by\":\"rows\",\"digest\":{\"parts\":1,\"rows\":1,\"sum\":\"1\","
    "\"ttl\":[1,2],\"xor\":\"1\"},\"rows\":1,\"sum\":\"1\",\"xor\":\"1\"}},\"freezes\":[\"f\"],"
    "\"later\":{\"a\":null},\"mode\":\"split\",\"z\":\"\"}";

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    assert_non_null(s);
    return s;
}

static void assert_encodes(const mv_state *st, const char *want)
{
    char *got = NULL;
    ferry_err err = {0};
    assert_int_equal(mv_state_encode(st, &got, &err), FERRY_OK);
    assert_string_equal(got, want);
    free(got);
}

/* decodes text and encodes it back unchanged */
static void assert_round_trip(const char *text)
{
    mv_state st;
    ferry_err err = {0};
    assert_int_equal(mv_state_decode(text, &st, &err), FERRY_OK);
    assert_encodes(&st, text);
    mv_state_free(&st);
}

/* the old code's fp entry (move.c mv_fp_json) */
static json_t *old_fp_json(const ferry_fingerprint *fp, const ferry_fingerprint *dg, int64_t top)
{
    char sum[32], xr[32], dsum[32], dxr[32];
    snprintf(sum, sizeof sum, "%llu", (unsigned long long)fp->hash_sum);
    snprintf(xr, sizeof xr, "%llu", (unsigned long long)fp->hash_xor);
    snprintf(dsum, sizeof dsum, "%llu", (unsigned long long)dg->hash_sum);
    snprintf(dxr, sizeof dxr, "%llu", (unsigned long long)dg->hash_xor);
    json_t *j = json_pack("{s:I, s:s, s:s, s:{s:I, s:I, s:s, s:s}}", "rows", (json_int_t)fp->rows,
                          "sum", sum, "xor", xr, "digest", "rows", (json_int_t)dg->rows, "parts",
                          (json_int_t)dg->parts, "sum", dsum, "xor", dxr);
    if (j && top >= 0)
        json_object_set_new(j, "top", json_integer(top));
    return j;
}

static const ferry_fingerprint EV_FP = {.rows = 1000, .hash_sum = 1ull << 63, .hash_xor = 1,
                                        .distinct = 5, .parts = 9, .bytes = 99};
static const ferry_fingerprint EV_DG = {.rows = 1000, .parts = 3, .hash_sum = UINT64_MAX,
                                        .hash_xor = 0x0123456789abcdefull, .distinct = 7};
static const ferry_fingerprint ZERO = {0};

static void test_move_life_as_before(void **state)
{
    (void)state;
    ferry_err err = {0};
    mv_state st;

    /* PLANNED, a move and a clone: move_begin.c's literal, then as the journal wrote it */
    assert_string_equal(mv_state_initial(false), BEGUN);
    assert_string_equal(mv_state_initial(true), BEGUN_CLONE);
    json_t *d = json_loads(BEGUN, 0, NULL);
    char *old = dump(json_deep_copy(d));
    assert_string_equal(old, PLANNED);
    free(old);
    old = dump(json_loads(BEGUN_CLONE, 0, NULL));
    assert_string_equal(old, PLANNED_CLONE);
    free(old);
    mv_state_init(&st, false);
    assert_encodes(&st, PLANNED);
    mv_state init_clone;
    mv_state_init(&init_clone, true);
    assert_encodes(&init_clone, PLANNED_CLONE);
    mv_state begun;
    assert_int_equal(mv_state_decode(BEGUN_CLONE, &begun, &err), FERRY_OK);
    assert_true(begun.clone && begun.has_freezes && begun.has_fp);
    assert_encodes(&begun, PLANNED_CLONE);
    mv_state_free(&begun);

    /* CLONE: two freeze names journaled */
    json_array_append_new(json_object_get(d, "freezes"), json_string("mv_1767225600_0a1b2c3d_c1"));
    json_array_append_new(json_object_get(d, "freezes"),
                          json_string("mv_1767225600_0a1b2c3d_s2r0"));
    old = dump(json_deep_copy(d));
    assert_string_equal(old, FROZEN);
    free(old);
    assert_int_equal(mv_state_freeze_add(&st, "mv_1767225600_0a1b2c3d_c1", &err), FERRY_OK);
    assert_int_equal(mv_state_freeze_add(&st, "mv_1767225600_0a1b2c3d_s2r0", &err), FERRY_OK);
    assert_encodes(&st, FROZEN);

    /* SWITCH's publish step: the catch-up round's freeze removed, the fingerprints set */
    json_array_remove(json_object_get(d, "freezes"), 1);
    json_t *fps = json_object();
    json_object_set_new(fps, "users", old_fp_json(&ZERO, &ZERO, -1));
    json_object_set_new(fps, "events", old_fp_json(&EV_FP, &EV_DG, 42));
    json_object_set(d, "fp", fps);
    json_decref(fps);
    old = dump(d);
    assert_string_equal(old, PUBLISHED);
    free(old);
    assert_true(mv_state_freeze_remove(&st, "mv_1767225600_0a1b2c3d_s2r0"));
    mv_fps f = {0};
    assert_int_equal(mv_fps_set(&f, "users", &ZERO, &ZERO, -1, &err), FERRY_OK);
    assert_int_equal(mv_fps_set(&f, "events", &ZERO, &ZERO, 7, &err), FERRY_OK);
    assert_int_equal(mv_fps_set(&f, "events", &EV_FP, &EV_DG, 42, &err), FERRY_OK); /* replaced */
    assert_int_equal(f.n, 2);
    mv_state_set_fps(&st, &f);
    assert_int_equal(f.n, 0);
    assert_null(f.v);
    assert_encodes(&st, PUBLISHED);
    mv_state_free(&st);

    /* a clone's freeze */
    assert_int_equal(mv_state_freeze_add(&init_clone, "cl_1767225600_0a1b2c3d_c1", &err), FERRY_OK);
    assert_encodes(&init_clone, CLONE_SWITCH);
    mv_state_free(&init_clone);
}

static void test_round_trips(void **state)
{
    (void)state;
    const char *const texts[] = {PLANNED, PLANNED_CLONE, FROZEN, PUBLISHED, CLONE_SWITCH,
                                 BEFORE_DIGEST, LATER};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        assert_round_trip(texts[i]);
}

static void test_lookups(void **state)
{
    (void)state;
    ferry_err err = {0};
    mv_state st;
    assert_int_equal(mv_state_decode(PUBLISHED, &st, &err), FERRY_OK);
    assert_false(st.clone);
    assert_int_equal(st.n_freezes, 1);
    assert_string_equal(st.freezes[0], "mv_1767225600_0a1b2c3d_c1");
    const mv_fp *ev = mv_state_fp(&st, "events"), *us = mv_state_fp(&st, "users");
    assert_non_null(ev);
    assert_non_null(us);
    assert_null(mv_state_fp(&st, "event"));
    assert_true(ev->has_top);
    assert_int_equal(ev->top, 42);
    assert_false(us->has_top);
    assert_true(ev->fp.hash_sum == 1ull << 63 && ev->dg.hash_sum == UINT64_MAX);
    assert_true(ev->dg.parts == 3 && ev->dg.hash_xor == 0x0123456789abcdefull);
    assert_true(mv_fp_matches(ev, &EV_FP));
    assert_true(mv_fp_digest_matches(ev, &EV_DG));
    assert_false(mv_fp_digest_matches(ev, &EV_FP));
    ferry_fingerprint other = EV_FP;
    other.hash_xor++;
    assert_false(mv_fp_matches(ev, &other));
    other = EV_DG;
    other.parts = 4; /* the digest compares rows, sum and xor, as before */
    assert_true(mv_fp_digest_matches(ev, &other));
    assert_false(mv_fp_matches(NULL, &EV_FP));
    assert_false(mv_fp_digest_matches(NULL, &EV_DG));
    mv_state_free(&st);

    /* a record before the digest: the rows still compare, the digest never does */
    assert_int_equal(mv_state_decode(BEFORE_DIGEST, &st, &err), FERRY_OK);
    ev = mv_state_fp(&st, "events");
    assert_non_null(ev);
    assert_false(ev->has_dg);
    assert_false(ev->has_top);
    ferry_fingerprint seven = {.rows = 7, .hash_sum = 12, .hash_xor = 3};
    assert_true(mv_fp_matches(ev, &seven));
    assert_false(mv_fp_digest_matches(ev, &seven));
    mv_state_free(&st);

    assert_int_equal(mv_state_decode(PLANNED_CLONE, &st, &err), FERRY_OK);
    assert_true(st.clone);
    assert_true(st.has_freezes && st.has_fp);
    mv_state_free(&st);
}

static void test_empty(void **state)
{
    (void)state;
    mv_state st = {0};
    ferry_err err = {0};
    assert_encodes(&st, "{}");
    assert_round_trip("{}");
    assert_int_equal(mv_state_decode("{}", &st, &err), FERRY_OK);
    assert_false(st.has_freezes || st.has_fp || st.clone);
    mv_state_free(&st);
    assert_round_trip("{\"freezes\":[]}");
    assert_round_trip("{\"fp\":{}}");
}

static void test_freeze_list(void **state)
{
    (void)state;
    mv_state st = {0};
    ferry_err err = {0};
    assert_int_equal(mv_state_freeze_add(&st, "a", &err), FERRY_OK);
    assert_int_equal(mv_state_freeze_add(&st, "b", &err), FERRY_OK);
    assert_int_equal(mv_state_freeze_add(&st, "c", &err), FERRY_OK);
    assert_int_equal(mv_state_freeze_add(&st, "b", &err), FERRY_OK);
    assert_false(mv_state_freeze_remove(&st, "d"));
    assert_true(mv_state_freeze_remove(&st, "b")); /* the first of two */
    assert_encodes(&st, "{\"freezes\":[\"a\",\"c\",\"b\"]}");
    assert_true(mv_state_freeze_remove(&st, "a"));
    assert_true(mv_state_freeze_remove(&st, "b"));
    assert_true(mv_state_freeze_remove(&st, "c"));
    assert_int_equal(st.n_freezes, 0);
    assert_encodes(&st, "{\"freezes\":[]}"); /* emptied, still written */
    mv_state_free(&st);
}

static void test_unknown_keys_kept(void **state)
{
    (void)state;
    ferry_err err = {0};
    mv_state st;
    assert_int_equal(mv_state_decode(LATER, &st, &err), FERRY_OK);
    assert_false(st.clone); /* another mode is not a clone, and is written back */
    assert_non_null(st.unknown);
    /* a freeze removed: the later keys stay */
    assert_true(mv_state_freeze_remove(&st, "f"));
    assert_encodes(&st, "{\"fp\":{\"events\":{\"by\":\"rows\",\"digest\":{\"parts\":1,\"rows\":1,"
                        "\"sum\":\"1\",\"ttl\":[1,2],\"xor\":\"1\"},\"rows\":1,\"sum\":\"1\","
                        "\"xor\":\"1\"}},\"freezes\":[],\"later\":{\"a\":null},\"mode\":\"split\","
                        "\"z\":\"\"}");
    /* fp set anew: an entry is written whole, the top-level keys stay */
    mv_fps f = {0};
    assert_int_equal(mv_fps_set(&f, "events", &ZERO, &ZERO, 0, &err), FERRY_OK);
    mv_state_set_fps(&st, &f);
    assert_encodes(&st, "{\"fp\":{\"events\":{\"digest\":{\"parts\":0,\"rows\":0,\"sum\":\"0\","
                        "\"xor\":\"0\"},\"rows\":0,\"sum\":\"0\",\"top\":0,\"xor\":\"0\"}},"
                        "\"freezes\":[],\"later\":{\"a\":null},\"mode\":\"split\",\"z\":\"\"}");
    mv_state_free(&st);
}

static void test_wrong_types(void **state)
{
    (void)state;
    static const struct {
        const char *json, *names;
    } bad[] = {
        {"[]", "not a JSON object"},
        {"{\"freezes\":", "not a JSON object"},
        {"{\"freezes\":{}}", "\"freezes\""},
        {"{\"freezes\":[\"a\",1]}", "\"freezes\" item 1"},
        {"{\"fp\":[]}", "\"fp\""},
        {"{\"fp\":{\"t\":1}}", "\"fp.t\""},
        {"{\"fp\":{\"t\":{\"rows\":\"1\",\"sum\":\"1\",\"xor\":\"1\"}}}", "\"fp.t.rows\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":1,\"xor\":\"1\"}}}", "\"fp.t.sum\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"-1\",\"xor\":\"1\"}}}", "\"fp.t.sum\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"1\",\"xor\":\"18446744073709551616\"}}}",
         "\"fp.t.xor\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"1\"}}}", "\"fp.t\" has no \"xor\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"1\",\"xor\":\"1\",\"top\":\"2\"}}}",
         "\"fp.t.top\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"1\",\"xor\":\"1\",\"digest\":[]}}}",
         "\"fp.t.digest\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"1\",\"xor\":\"1\",\"digest\":{\"rows\":1,\"sum\":"
         "\"1\",\"xor\":\"1\"}}}}", "\"fp.t.digest\" has no \"parts\""},
        {"{\"fp\":{\"t\":{\"rows\":1,\"sum\":\"1\",\"xor\":\"1\",\"digest\":{\"rows\":1,\"parts\":"
         "true,\"sum\":\"1\",\"xor\":\"1\"}}}}", "\"fp.t.digest.parts\""},
        {"{\"mode\":1}", "\"mode\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mv_state st;
        ferry_err err = {0};
        assert_int_equal(mv_state_decode(bad[i].json, &st, &err), FERRY_EINVAL);
        if (!strstr(err.msg, bad[i].names))
            fail_msg("%s: '%s' does not name %s", bad[i].json, err.msg, bad[i].names);
        /* emptied: nothing owned, nothing written */
        assert_true(!st.freezes && !st.fps.v && !st.unknown && !st.has_freezes && !st.has_fp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move_life_as_before),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_freeze_list),
        cmocka_unit_test(test_unknown_keys_kept),
        cmocka_unit_test(test_wrong_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

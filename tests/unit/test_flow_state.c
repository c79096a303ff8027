/* The shared codec of the flows' typed journal states (lib/flow/flow_state.h), driven directly
 * with a struct of this test's own that holds every kind: a char array, a heap string, the
 * unsigned 32- and 64-bit and the signed 64-bit integers, a flag written when true and one
 * written by its has_ field, a list of names, and a custom kind ("at": {x, y}, its other keys
 * kept, freed by its hook). Each kind decodes and encodes back byte for byte (compact, keys
 * sorted); a known key of the wrong type, or a string too long for its array, is refused naming
 * the key and what it must be; keys the table does not know round-trip as they were; a text that
 * is not a JSON object is refused; after a failure the struct owns nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "flow/flow_state.h"

typedef struct t_state {
    char name[8];        /* FLOW_STR: at most 7 bytes */
    char *note;          /* FLOW_HEAP */
    uint32_t count;      /* FLOW_U32 */
    bool has_count;
    uint64_t rows;       /* FLOW_U64 */
    bool has_rows;
    int64_t top;         /* FLOW_I64 */
    bool has_top;
    bool done;           /* FLOW_FLAG, written when true */
    bool ok, has_ok;     /* FLOW_FLAG by its has_ field */
    char **tags;         /* FLOW_LIST */
    size_t n_tags;
    bool has_tags;
    int64_t x, y;        /* custom "at": {"x": N, "y": N} */
    json_t *at_unknown;  /* its other keys */
    bool has_at;
    json_t *unknown;
} t_state;

static int decode_at(const flow_state_desc *d, void *state, const flow_key *k, json_t *v,
                     ferry_err *err)
{
    t_state *st = state;
    const char *key;
    json_t *n;
    if (!json_is_object(v))
        return flow_state_wrong_type(d, k->name, "an object {x, y}", err);
    json_object_foreach(v, key, n) {
        bool xy = !strcmp(key, "x") || !strcmp(key, "y");
        if (xy && !json_is_integer(n))
            return flow_state_wrong_type(d, "at.x or at.y", "an integer", err);
        if (xy)
            *(key[0] == 'x' ? &st->x : &st->y) = json_integer_value(n);
        else if (flow_state_keep(&st->at_unknown, key, n, err))
            return FERRY_ENOMEM;
    }
    return FERRY_OK;
}

static int encode_at(const flow_state_desc *d, const void *state, const flow_key *k,
                     json_t **out, ferry_err *err)
{
    const t_state *st = state;
    json_t *o = json_object();
    if (!o || (st->at_unknown && json_object_update(o, st->at_unknown)) ||
        json_object_set_new(o, "x", json_integer(st->x)) ||
        json_object_set_new(o, "y", json_integer(st->y))) {
        json_decref(o);
        return flow_state_unwritable(d, k->name, err);
    }
    *out = o;
    return FERRY_OK;
}

static void free_at(void *st)
{
    json_decref(((t_state *)st)->at_unknown);
}

static const flow_custom AT = {decode_at, encode_at, free_at};

static const flow_key KEYS[] = {
    FLOW_KEY_STR(t_state, "name", name),
    FLOW_KEY_HEAP(t_state, "note", note),
    FLOW_KEY_HAS(t_state, "count", FLOW_U32, count),
    FLOW_KEY_HAS(t_state, "rows", FLOW_U64, rows),
    FLOW_KEY_HAS(t_state, "top", FLOW_I64, top),
    FLOW_KEY_FLAG(t_state, "done", done),
    FLOW_KEY_HAS(t_state, "ok", FLOW_FLAG, ok),
    FLOW_KEY_LIST(t_state, "tags", tags, n_tags, has_tags, "tag"),
    FLOW_KEY_CUSTOM(t_state, "at", &AT, x, offsetof(t_state, has_at)),
};

static const flow_state_desc T = {"test data", KEYS, sizeof KEYS / sizeof KEYS[0],
                                  sizeof(t_state), offsetof(t_state, unknown)};

/* every kind, keys sorted as the encoding writes them */
static const char FULL[] =
    "{\"at\":{\"x\":-1,\"y\":2},\"count\":4294967295,\"done\":true,\"name\":\"1234567\","
    "\"note\":\"a note of any length, \xc3\xa9 included\",\"ok\":false,"
    "\"rows\":9223372036854775807,\"tags\":[\"a\",\"b\"],\"top\":-9223372036854775808}";

static void assert_encodes(const t_state *st, const char *want)
{
    char *got = NULL;
    ferry_err err = {0};
    assert_int_equal(flow_state_encode(&T, st, &got, &err), FERRY_OK);
    assert_string_equal(got, want);
    free(got);
}

static void assert_round_trip(const char *text)
{
    t_state st;
    ferry_err err = {0};
    assert_int_equal(flow_state_decode(&T, text, &st, &err), FERRY_OK);
    assert_encodes(&st, text);
    flow_state_free(&T, &st);
}

static void test_every_kind(void **state)
{
    (void)state;
    t_state st;
    ferry_err err = {0};
    assert_int_equal(flow_state_decode(&T, FULL, &st, &err), FERRY_OK);
    assert_string_equal(st.name, "1234567");
    assert_string_equal(st.note, "a note of any length, \xc3\xa9 included");
    assert_true(st.has_count && st.count == UINT32_MAX);
    assert_true(st.has_rows && st.rows == (uint64_t)INT64_MAX);
    assert_true(st.has_top && st.top == INT64_MIN);
    assert_true(st.done);
    assert_true(st.has_ok && !st.ok);
    assert_true(st.has_tags && st.n_tags == 2);
    assert_string_equal(st.tags[1], "b");
    assert_true(flow_names_has(st.tags, st.n_tags, "a"));
    assert_false(flow_names_has(st.tags, st.n_tags, "c"));
    assert_true(st.has_at && st.x == -1 && st.y == 2);
    assert_null(st.unknown);
    assert_encodes(&st, FULL);
    flow_state_free(&T, &st);
    /* each kind alone */
    assert_round_trip("{\"name\":\"n\"}");
    assert_round_trip("{\"note\":\"\"}"); /* a heap string is written when not NULL */
    assert_round_trip("{\"count\":0}");
    assert_round_trip("{\"rows\":0}");
    assert_round_trip("{\"top\":0}");
    assert_round_trip("{\"done\":true}");
    assert_round_trip("{\"ok\":true}");
    assert_round_trip("{\"tags\":[]}");
    assert_round_trip("{\"at\":{\"x\":0,\"y\":0}}");
}

static void test_what_is_written(void **state)
{
    (void)state;
    t_state st;
    ferry_err err = {0};
    memset(&st, 0, sizeof st);
    assert_encodes(&st, "{}"); /* a zeroed state is the empty data */
    /* values without their has_ field, a false flag without one, "" in an array: absent */
    st.count = 3;
    st.rows = 4;
    st.top = 5;
    st.ok = true;
    st.x = 6;
    assert_encodes(&st, "{}");
    /* a read "" or false of the kinds without a has_ field is read as absent */
    assert_int_equal(flow_state_decode(&T, "{\"done\":false,\"name\":\"\"}", &st, &err),
                     FERRY_OK);
    assert_encodes(&st, "{}");
    flow_state_free(&T, &st);
    /* set by hand */
    assert_int_equal(flow_state_set_strs(&T, &st, (const char *const[]){"name", "x", NULL}, &err),
                     FERRY_OK);
    assert_int_equal(flow_names_add(&st.tags, &st.n_tags, "t", &err), FERRY_OK);
    st.has_tags = st.has_count = st.done = true;
    assert_encodes(&st, "{\"count\":0,\"done\":true,\"name\":\"x\",\"tags\":[\"t\"]}");
    /* a value that cannot be written is refused naming its key */
    char *out = (char *)"unchanged";
    st.name[0] = '\xff';
    assert_int_equal(flow_state_encode(&T, &st, &out, &err), FERRY_EINVAL);
    assert_null(out);
    assert_non_null(strstr(err.msg, "test data: \"name\" cannot be written"));
    flow_state_free(&T, &st);
    assert_null(st.tags);
    assert_encodes(&st, "{}");
}

static void assert_refused(const char *text, const char *names)
{
    t_state st;
    ferry_err err = {0};
    assert_int_equal(flow_state_decode(&T, text, &st, &err), FERRY_EINVAL);
    if (!strstr(err.msg, names))
        fail_msg("decoding %s: \"%s\" does not name %s", text, err.msg, names);
    assert_non_null(strstr(err.msg, "test data"));
    /* freed and zeroed: nothing owned */
    assert_true(!st.note && !st.tags && !st.unknown && !st.at_unknown && !st.has_tags);
    flow_state_free(&T, &st);
}

static void test_wrong_types(void **state)
{
    (void)state;
    assert_refused("{\"name\":3}", "\"name\" must be a string");
    assert_refused("{\"note\":null}", "\"note\" must be a string");
    assert_refused("{\"note\":\"x\",\"future\":1,\"count\":-1}",
                   "\"count\" must be an integer from 0 to 4294967295");
    assert_refused("{\"count\":4294967296}", "\"count\" must be an integer from 0 to 4294967295");
    assert_refused("{\"count\":1.0}", "\"count\"");
    assert_refused("{\"rows\":-1}", "\"rows\" must be an integer from 0");
    assert_refused("{\"rows\":\"1\"}", "\"rows\"");
    assert_refused("{\"top\":\"1\"}", "\"top\" must be an integer");
    assert_refused("{\"done\":1}", "\"done\" must be true or false");
    assert_refused("{\"ok\":\"true\"}", "\"ok\" must be true or false");
    assert_refused("{\"tags\":\"a\"}", "\"tags\" must be an array of tags");
    assert_refused("{\"tags\":[\"a\",1]}", "\"tags\" item 1 must be a string (a tag)");
    assert_refused("{\"at\":[]}", "\"at\" must be an object {x, y}");
    assert_refused("{\"at\":{\"q\":[1],\"x\":\"1\"}}", "\"at.x or at.y\" must be an integer");
}

static void test_too_long(void **state)
{
    (void)state;
    t_state st;
    ferry_err err = {0};
    assert_round_trip("{\"name\":\"1234567\"}");
    assert_refused("{\"tags\":[\"a\"],\"name\":\"12345678\"}",
                   "\"name\" is longer than 7 bytes");
    /* the same rule when set by hand: the array is left as it was */
    memset(&st, 0, sizeof st);
    assert_int_equal(flow_state_set_str(&T, &st, "name", "short", &err), FERRY_OK);
    assert_int_equal(flow_state_set_str(&T, &st, "name", "12345678", &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "test data: \"name\" is longer than 7 bytes"));
    assert_string_equal(st.name, "short");
    assert_int_equal(flow_state_set_strs(&T, &st, (const char *const[]){"name", "ok", "name",
                                                                       "12345678", NULL},
                                         &err),
                     FERRY_EINVAL);
    assert_string_equal(st.name, "ok");
    /* a key that is not a string array of the table is a mistake of the caller */
    assert_int_equal(flow_state_set_str(&T, &st, "note", "x", &err), FERRY_EINTERNAL);
    assert_int_equal(flow_state_set_str(&T, &st, "nothing", "x", &err), FERRY_EINTERNAL);
}

static void test_unknown_keys_kept(void **state)
{
    (void)state;
    /* at the top and inside the custom kind, of any type, written back as they were */
    assert_round_trip("{\"a\":[1,{\"b\":null}],\"at\":{\"w\":\"v\",\"x\":1,\"y\":2},"
                      "\"name\":\"n\",\"zeta\":1.5}");
    assert_round_trip("{\"future\":{}}");
    t_state st;
    ferry_err err = {0};
    assert_int_equal(flow_state_decode(&T, "{\"zeta\":1.5,\"count\":7,\"future\":{\"k\":[]}}", &st,
                                       &err),
                     FERRY_OK);
    assert_non_null(st.unknown);
    assert_int_equal(json_object_size(st.unknown), 2); /* known keys are not kept twice */
    /* a known key changed is written with its new value beside the kept ones, keys sorted */
    st.count = 8;
    st.done = true;
    assert_encodes(&st, "{\"count\":8,\"done\":true,\"future\":{\"k\":[]},\"zeta\":1.5}");
    flow_state_free(&T, &st);
    assert_null(st.unknown);
}

static void test_not_an_object(void **state)
{
    (void)state;
    assert_refused("[]", "test data is not a JSON object");
    assert_refused("1", "test data is not a JSON object");
    assert_refused("\"s\"", "test data is not a JSON object");
    assert_refused("null", "test data is not a JSON object");
    assert_refused("not json", "test data is not a JSON object: ");
    assert_refused("", "test data is not a JSON object: ");
    assert_refused("{\"name\":", "test data is not a JSON object: ");
}

static void test_names(void **state)
{
    (void)state;
    char **v = NULL;
    size_t n = 0;
    ferry_err err = {0};
    assert_false(flow_names_has(v, n, "a"));
    assert_int_equal(flow_names_add(&v, &n, "a", &err), FERRY_OK);
    assert_int_equal(flow_names_add(&v, &n, "b", &err), FERRY_OK);
    assert_int_equal(n, 2);
    assert_true(flow_names_has(v, n, "b"));
    flow_names_free(&v, &n);
    assert_null(v);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_what_is_written),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_unknown_keys_kept),
        cmocka_unit_test(test_not_an_object),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

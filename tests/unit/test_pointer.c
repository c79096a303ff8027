/* Unit tests of the pointer-file module: the exact 26.7 sample from the lab notes, round trips
 * of every version 1..5, key prefixes, escaping, and the refusals of malformed files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/pointer.h"

/* What ClickHouse 26.7 wrote for one data file (lab notes), key = full key in the bucket. */
static const char SAMPLE_V5[] = "5\n"
                                "1\t23286\n"
                                "23286\tparts/events/3-20261101-0_1_1_0/data.bin\n"
                                "0\n"
                                "0\n"
                                "\n";

static void parse_ok(const char *text, const char *prefix, ferry_pointer *p)
{
    ferry_err err = {0};
    int rc = ferry_pointer_parse(text, strlen(text), prefix, p, &err);
    if (rc)
        fail_msg("parse failed: %s\n--- input ---\n%s", err.msg, text);
}

static void parse_fails(const char *text, const char *prefix, const char *want_in_msg)
{
    ferry_pointer p = FERRY_POINTER_INIT;
    ferry_err err = {0};
    int rc = ferry_pointer_parse(text, strlen(text), prefix, &p, &err);
    if (rc != FERRY_EINVAL)
        fail_msg("expected FERRY_EINVAL, got %d for:\n%s", rc, text);
    if (!strstr(err.msg, want_in_msg))
        fail_msg("message '%s' lacks '%s'", err.msg, want_in_msg);
    assert_int_equal(p.n_objects, 0);
    assert_null(p.objects);
}

static void test_sample_v5(void **state)
{
    (void)state;
    ferry_pointer p = FERRY_POINTER_INIT;
    parse_ok(SAMPLE_V5, "ignored-for-v5/", &p);
    assert_int_equal(p.version, 5);
    assert_int_equal(p.n_objects, 1);
    assert_string_equal(p.objects[0].key, "parts/events/3-20261101-0_1_1_0/data.bin");
    assert_int_equal(p.objects[0].size, 23286);
    assert_int_equal(p.ref_count, 0);
    assert_false(p.read_only);
    assert_int_equal(p.inline_len, 0);
    assert_memory_equal(SAMPLE_V5 + p.ref_count_at, "0\n", 2);
    assert_int_equal(p.ref_count_len, 1);

    ferry_buf out = FERRY_BUF_INIT;
    ferry_err err = {0};
    assert_int_equal(ferry_pointer_serialize(&p, 5, "", &out, &err), FERRY_OK);
    assert_int_equal(out.len, strlen(SAMPLE_V5));
    assert_memory_equal(out.data, SAMPLE_V5, out.len);
    ferry_buf_free(&out);
    ferry_pointer_free(&p);
}

static void test_built_in_memory_matches_sample(void **state)
{
    (void)state;
    ferry_pointer p = FERRY_POINTER_INIT;
    ferry_err err = {0};
    assert_int_equal(ferry_pointer_add_object(&p, "parts/events/3-20261101-0_1_1_0/data.bin",
                                              23286, &err), FERRY_OK);
    ferry_buf out = FERRY_BUF_INIT;
    assert_int_equal(ferry_pointer_serialize(&p, 5, "parts/", &out, &err), FERRY_OK);
    assert_string_equal(out.data, SAMPLE_V5);
    ferry_buf_free(&out);
    ferry_pointer_free(&p);
}

/* Each version, written for prefix "data/" with two keys (one needing escapes), must read back
 * to the same full keys, and the expected bytes must be exactly what ClickHouse writes. */
static void test_round_trip_every_version(void **state)
{
    (void)state;
    static const char *expected[6] = {
        NULL,
        "1\n2\t15\n10\tdata/abc/def\n5\tdata/x\\ty\\\\z\\'q\\n\n1\n",
        "2\n2\t15\n10\tabc/def\n5\tx\\ty\\\\z\\'q\\n\n1\n",
        "3\n2\t15\n10\tabc/def\n5\tx\\ty\\\\z\\'q\\n\n1\n1\n",
        "4\n2\t15\n10\tabc/def\n5\tx\\ty\\\\z\\'q\\n\n1\n1\nin\\tline\\0\n",
        "5\n2\t15\n10\tdata/abc/def\n5\tdata/x\\ty\\\\z\\'q\\n\n1\n1\nin\\tline\\0\n",
    };
    for (int v = 1; v <= 5; v++) {
        ferry_pointer p = FERRY_POINTER_INIT;
        ferry_err err = {0};
        assert_int_equal(ferry_pointer_add_object(&p, "data/abc/def", 10, &err), 0);
        assert_int_equal(ferry_pointer_add_object(&p, "data/x\ty\\z'q\n", 5, &err), 0);
        p.ref_count = 1;
        if (v >= 3)
            p.read_only = true;
        if (v >= 4) {
            p.inline_data = malloc(8);
            memcpy(p.inline_data, "in\tline\0", 8);
            p.inline_len = 8;
        }
        ferry_buf out = FERRY_BUF_INIT;
        if (ferry_pointer_serialize(&p, v, "data/", &out, &err))
            fail_msg("v%d: %s", v, err.msg);
        if (strcmp(out.data, expected[v]) != 0)
            fail_msg("v%d: got\n%s\nwant\n%s", v, out.data, expected[v]);

        ferry_pointer back = FERRY_POINTER_INIT;
        parse_ok(out.data, "data/", &back);
        assert_int_equal(back.version, v);
        assert_int_equal(back.n_objects, 2);
        assert_string_equal(back.objects[0].key, "data/abc/def");
        assert_string_equal(back.objects[1].key, "data/x\ty\\z'q\n");
        assert_int_equal(back.objects[1].size, 5);
        assert_int_equal(back.ref_count, 1);
        assert_int_equal(back.read_only, v >= 3);
        assert_int_equal(back.inline_len, v >= 4 ? 8 : 0);
        if (v >= 4)
            assert_memory_equal(back.inline_data, "in\tline\0", 8);

        /* serialize(parse(x)) == x */
        ferry_buf again = FERRY_BUF_INIT;
        assert_int_equal(ferry_pointer_serialize(&back, v, "data/", &again, &err), 0);
        assert_string_equal(again.data, out.data);
        ferry_buf_free(&again);
        ferry_buf_free(&out);
        ferry_pointer_free(&back);
        ferry_pointer_free(&p);
    }
}

static void test_prefix_joining(void **state)
{
    (void)state;
    ferry_pointer p = FERRY_POINTER_INIT;
    /* Prefix without a trailing slash: joined with one, like std::filesystem::path. */
    parse_ok("2\n1\t3\n3\tabc/xyz\n0\n", "bucket-root", &p);
    assert_string_equal(p.objects[0].key, "bucket-root/abc/xyz");
    ferry_pointer_free(&p);
    /* Empty prefix: the relative key is the full key. */
    parse_ok("3\n1\t3\n3\tabc/xyz\n0\n0\n", "", &p);
    assert_string_equal(p.objects[0].key, "abc/xyz");
    ferry_pointer_free(&p);
    /* Local blob storage: v5 keys are absolute paths. */
    parse_ok("5\n1\t3\n3\t/srv/blobs/abc/xyz\n2\n0\n\n", "/srv/blobs/", &p);
    assert_string_equal(p.objects[0].key, "/srv/blobs/abc/xyz");
    assert_int_equal(p.ref_count, 2);
    /* where the count lies in the text, for the agent's rewrite in place */
    assert_int_equal(p.ref_count_at, strlen("5\n1\t3\n3\t/srv/blobs/abc/xyz\n"));
    assert_int_equal(p.ref_count_len, 1);

    /* The same in v2 with the prefix stripped. */
    ferry_buf out = FERRY_BUF_INIT;
    ferry_err err = {0};
    assert_int_equal(ferry_pointer_serialize(&p, 2, "/srv/blobs/", &out, &err), 0);
    assert_string_equal(out.data, "2\n1\t3\n3\tabc/xyz\n2\n");
    ferry_buf_reset(&out);
    assert_int_equal(ferry_pointer_serialize(&p, 2, "/srv/blobs", &out, &err), 0);
    assert_string_equal(out.data, "2\n1\t3\n3\tabc/xyz\n2\n");
    ferry_buf_reset(&out);
    /* A key outside the prefix cannot be written relative. */
    assert_int_equal(ferry_pointer_serialize(&p, 3, "/other/", &out, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "not under the disk's key prefix"));
    assert_int_equal(ferry_pointer_serialize(&p, 1, "/other/", &out, &err), FERRY_EINVAL);
    /* A prefix that only matches part of a path component does not count. */
    assert_int_equal(ferry_pointer_serialize(&p, 2, "/srv/blo", &out, &err), FERRY_EINVAL);
    assert_int_equal(out.len, 0);
    ferry_buf_free(&out);
    ferry_pointer_free(&p);
}

static void test_version_feature_checks(void **state)
{
    (void)state;
    ferry_pointer p = FERRY_POINTER_INIT;
    ferry_err err = {0};
    ferry_buf out = FERRY_BUF_INIT;
    assert_int_equal(ferry_pointer_add_object(&p, "k/a", 1, &err), 0);
    p.read_only = true;
    assert_int_equal(ferry_pointer_serialize(&p, 2, "", &out, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "read-only"));
    p.read_only = false;
    p.inline_data = strdup("x");
    p.inline_len = 1;
    assert_int_equal(ferry_pointer_serialize(&p, 3, "", &out, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "inline data"));
    assert_int_equal(ferry_pointer_serialize(&p, 6, "", &out, &err), FERRY_EINVAL);
    assert_int_equal(ferry_pointer_serialize(&p, 0, "", &out, &err), FERRY_EINVAL);
    assert_int_equal(ferry_pointer_add_object(&p, "", 1, &err), FERRY_EINVAL);
    assert_int_equal(ferry_pointer_add_object(&p, "k/b", (uint64_t)INT64_MAX, &err), FERRY_EINVAL);
    /* Zero objects is a valid file (an empty data file). */
    ferry_pointer_free(&p);
    assert_int_equal(ferry_pointer_serialize(&p, 5, "", &out, &err), 0);
    assert_string_equal(out.data, "5\n0\t0\n0\n0\n\n");
    ferry_pointer back = FERRY_POINTER_INIT;
    parse_ok(out.data, "", &back);
    assert_int_equal(back.n_objects, 0);
    ferry_pointer_free(&back);
    ferry_buf_free(&out);
}

static void test_malformed(void **state)
{
    (void)state;
    parse_fails("", "", "line 1: file ends where the format version was expected");
    parse_fails("6\n1\t1\n1\tk\n0\n0\n\n", "", "line 1: unknown pointer format version 6");
    parse_fails("0\n", "", "unknown pointer format version 0");
    parse_fails(" 5\n", "", "line 1: format version is not a decimal number");
    parse_fails("5", "", "line 1: the format version is not terminated by a newline");
    parse_fails("5\n1 23286\n", "", "line 2: expected '<object count>\\t<total size>'");
    parse_fails("5\n1\t23286\n", "", "line 3: file ends where an object line");
    parse_fails("5\n1\t10\n9\tk\n0\n0\n\n", "", "line 2: total size 10 is not the sum");
    parse_fails("5\n1\t9\n9 k\n0\n0\n\n", "", "line 3: expected '<size>\\t<key>'");
    parse_fails("5\n1\t9\n-9\tk\n0\n0\n\n", "", "line 3: object size is not a decimal number");
    parse_fails("5\n1\t9\n9\t\n0\n0\n\n", "", "line 3: object key is empty");
    parse_fails("5\n1\t9\n9\ta\\qb\n0\n0\n\n", "", "line 3: object key: unknown escape '\\q'");
    parse_fails("5\n1\t9\n9\ta\tb\n0\n0\n\n", "", "line 3: object key: raw tab");
    parse_fails("5\n1\t9\n9\tk\n0\n0\n", "", "line 6: file ends where the inline-data line");
    parse_fails("5\n1\t9\n9\tk\n0\n2\n\n", "", "line 5: read-only flag must be 0 or 1");
    parse_fails("5\n1\t9\n9\tk\nx\n0\n\n", "", "line 4: reference count is not a decimal");
    parse_fails("5\n1\t9\n9\tk\n0\n0\n\nextra", "", "line 7: unexpected data after the end");
    parse_fails("2\n1\t9\n9\tk\n0\n0\n", "", "line 5: unexpected data after the end of a version 2");
    parse_fails("3\n1\t9\n9\tk\n0\n0\n\n", "", "line 6: unexpected data after the end of a version 3");
    parse_fails("1\n1\t9\n9\tother/k\n0\n", "data/", "line 3: version 1 key does not start with");
    parse_fails("5\n99999999999\t9\n", "", "line 2: object count is out of range");
    parse_fails("5\n1\t99999999999999999999\n", "", "line 2: total size is out of range");
    parse_fails("5\n1\t9\n9\tk\\x4\n0\n0\n\n", "", "bad \\x escape");
    parse_fails("5\n1\t9\n9\tk\\\n0\n0\n\n", "", "lone backslash");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_v5),
        cmocka_unit_test(test_built_in_memory_matches_sample),
        cmocka_unit_test(test_round_trip_every_version),
        cmocka_unit_test(test_prefix_joining),
        cmocka_unit_test(test_version_feature_checks),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the node agent's pure pieces: bearer check, object keys and name escaping,
 * part names, the pointer-version rule, and the part stream parser (any chunking, damage,
 * truncation, bad names). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../../lib/agent/agent_int.h"

static void test_bearer(void **state)
{
    (void)state;
    const char *tok = "0123456789abcdef0123";
    assert_true(ferry_agent_bearer_ok("Bearer 0123456789abcdef0123", tok));
    assert_false(ferry_agent_bearer_ok("Bearer 0123456789abcdef012", tok));
    assert_false(ferry_agent_bearer_ok("Bearer 0123456789abcdef01234", tok));
    assert_false(ferry_agent_bearer_ok("bearer 0123456789abcdef0123", tok));
    assert_false(ferry_agent_bearer_ok("Basic 0123456789abcdef0123", tok));
    assert_false(ferry_agent_bearer_ok(NULL, tok));
    assert_false(ferry_agent_bearer_ok("Bearer ", ""));
}

static void test_keys(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_err err = {0};
    assert_int_equal(ferry_agent_object_key("parts/", "default", "events", "3-20261101-0",
                                            "ferry_tier_ab12_1", "3-20261101-0_1_1_0",
                                            "data.bin", &b, &err),
                     FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b), "parts/default/events/3-20261101-0/"
                                             "ferry_tier_ab12_1/3-20261101-0_1_1_0/data.bin");
    ferry_buf_reset(&b);
    assert_int_equal(ferry_agent_object_key("", "my db", "t.é/x", "all", "f1", "all_1_1_0", "a.bin",
                                            &b, &err),
                     FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b), "my%20db/t%2E%C3%A9%2Fx/all/f1/all_1_1_0/a.bin");
    ferry_buf_reset(&b);
    assert_int_equal(ferry_agent_object_key("", "d", "t", "p", "f", "../x", "a", &b, &err),
                     FERRY_EINVAL);
    assert_int_equal(ferry_agent_object_key("", "d", "t", "p", "f", "p_1_1_0", "a/b", &b, &err),
                     FERRY_EINVAL);
    assert_int_equal(ferry_agent_object_key("", "d", "t", "p", "..", "p_1_1_0", "a", &b, &err),
                     FERRY_EINVAL);
    ferry_buf_free(&b);
}

static void test_part_names(void **state)
{
    (void)state;
    char pid[64];
    ferry_err err = {0};
    assert_int_equal(ferry_agent_part_partition_id("3-20261101-0_1_1_0", pid, sizeof pid, &err),
                     FERRY_OK);
    assert_string_equal(pid, "3-20261101-0");
    assert_int_equal(ferry_agent_part_partition_id("all_12_30_2_45", pid, sizeof pid, &err),
                     FERRY_OK);
    assert_string_equal(pid, "all");
    const char *bad[] = {"all_1_1", "_1_1_0", "a_1_1_x", "a_1__0", "a_1_1_0_1_2", "../a_1_1_0",
                         "a b_1_1_0", "", "a_1_1_0/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ferry_agent_part_partition_id(bad[i], pid, sizeof pid, &err),
                         FERRY_EINVAL);
}

static void test_pointer_versions(void **state)
{
    (void)state;
    ferry_err err = {0};
    ferry_ch_version v26 = {"26.7.2.1", 26, 7, 2}, v23 = {"23.8.1.1", 23, 8, 1},
                     v2311 = {"23.11.1.1", 23, 11, 1};
    assert_int_equal(ferry_agent_pointer_version_ok(5, &v26, &err), FERRY_OK);
    assert_int_equal(ferry_agent_pointer_version_ok(5, &v2311, &err), FERRY_OK);
    assert_int_equal(ferry_agent_pointer_version_ok(5, &v23, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "23.11"));
    assert_int_equal(ferry_agent_pointer_version_ok(3, &v23, &err), FERRY_OK);
    assert_int_equal(ferry_agent_pointer_version_ok(6, &v26, &err), FERRY_EINVAL);
    assert_int_equal(ferry_agent_pointer_version_ok(0, &v26, &err), FERRY_EINVAL);
}

/* ---- part stream ---- */

typedef struct sink {
    char names[8][64];
    ferry_buf data[8];
    uint64_t sizes[8];
    int n, ended;
} sink;

static int s_begin(void *ud, const char *name, uint64_t size, ferry_err *err)
{
    (void)err;
    sink *s = ud;
    snprintf(s->names[s->n], 64, "%s", name);
    s->sizes[s->n] = size;
    s->n++;
    return FERRY_OK;
}
static int s_data(void *ud, const char *d, size_t len, ferry_err *err)
{
    (void)err;
    sink *s = ud;
    ferry_buf_append(&s->data[s->n - 1], d, len);
    return FERRY_OK;
}
static int s_end(void *ud, ferry_err *err)
{
    (void)err;
    ((sink *)ud)->ended++;
    return FERRY_OK;
}

static void add_file(ferry_buf *b, const char *name, const char *content, size_t len)
{
    ferry_buf_printf(b, "F %zu %s\n", len, name);
    ferry_buf_append(b, content, len);
    ferry_buf_printf(b, "H %016" PRIx64 "\n", (uint64_t)XXH3_64bits(content, len));
}

static ferry_buf good_stream(void)
{
    ferry_buf b = FERRY_BUF_INIT;
    ferry_buf_puts(&b, AGENT_STREAM_MAGIC);
    add_file(&b, "checksums.txt", "abc\n\0def", 8);
    add_file(&b, "empty.txt", "", 0);
    add_file(&b, "data.bin", "F 3 x\nH 0\n", 10); /* data that looks like headers */
    ferry_buf_puts(&b, "E 3\n");
    return b;
}

/* Feeds data in chunks of chunk bytes to a parser with callbacks cb and user data ud. */
static int feed(const char *data, size_t len, size_t chunk, const agent_stream_cb *cb, void *ud,
                ferry_err *err)
{
    agent_stream st;
    int rc = agent_stream_init(&st, cb, ud, err);
    for (size_t off = 0; rc == FERRY_OK && off < len; off += chunk)
        rc = agent_stream_feed(&st, data + off, len - off < chunk ? len - off : chunk, err);
    if (rc == FERRY_OK)
        rc = agent_stream_finish(&st, err);
    agent_stream_free(&st);
    return rc;
}

static int run(const char *data, size_t len, size_t chunk, sink *s, ferry_err *err)
{
    agent_stream_cb cb = {NULL, s_begin, s_data, s_end};
    memset(s, 0, sizeof *s);
    return feed(data, len, chunk, &cb, s, err);
}

static void sink_free(sink *s)
{
    for (int i = 0; i < 8; i++)
        ferry_buf_free(&s->data[i]);
}

static void test_stream_ok(void **state)
{
    (void)state;
    ferry_buf b = good_stream();
    size_t chunks[] = {1, 2, 7, 4096};
    for (size_t c = 0; c < 4; c++) {
        sink s;
        ferry_err err = {0};
        assert_int_equal(run(b.data, b.len, chunks[c], &s, &err), FERRY_OK);
        assert_int_equal(s.n, 3);
        assert_int_equal(s.ended, 3);
        assert_string_equal(s.names[2], "data.bin");
        assert_int_equal(s.data[0].len, 8);
        assert_memory_equal(s.data[0].data, "abc\n\0def", 8);
        assert_int_equal(s.data[1].len, 0);
        assert_memory_equal(s.data[2].data, "F 3 x\nH 0\n", 10);
        sink_free(&s);
    }
    ferry_buf_free(&b);
}

static void expect_fail(const char *data, size_t len, const char *needle)
{
    sink s;
    ferry_err err = {0};
    assert_int_not_equal(run(data, len, 3, &s, &err), FERRY_OK);
    if (!strstr(err.msg, needle))
        fail_msg("'%s' not in '%s'", needle, err.msg);
    sink_free(&s);
}

static void test_stream_bad(void **state)
{
    (void)state;
    ferry_buf b = good_stream();
    /* one byte of data.bin flipped */
    char *copy = malloc(b.len);
    memcpy(copy, b.data, b.len);
    char *p = memmem(copy, b.len, "F 3 x\nH 0\n", 10);
    assert_non_null(p);
    p[2] ^= 1;
    expect_fail(copy, b.len, "damaged in transit");
    /* truncated anywhere before the end marker */
    for (size_t cut = 0; cut < b.len; cut += 5)
        expect_fail(b.data, cut, cut < 13 ? "" : "ended early");
    /* wrong count, bad magic, trailing data, bad names */
    memcpy(copy, b.data, b.len);
    copy[b.len - 2] = '4';
    expect_fail(copy, b.len, "end marker");
    expect_fail("ferry-part 2\n", 13, "not a ferry part stream");
    ferry_buf t = FERRY_BUF_INIT;
    ferry_buf_append(&t, b.data, b.len);
    ferry_buf_puts(&t, "x");
    expect_fail(t.data, t.len, "after the end marker");
    const char *names[] = {"../x", "a/b", ".hidden", "a b"};
    for (int i = 0; i < 4; i++) {
        ferry_buf u = FERRY_BUF_INIT;
        ferry_buf_puts(&u, AGENT_STREAM_MAGIC);
        add_file(&u, names[i], "x", 1);
        ferry_buf_puts(&u, "E 1\n");
        expect_fail(u.data, u.len, "not a plain file name");
        ferry_buf_free(&u);
    }
    ferry_buf_reset(&t);
    ferry_buf_puts(&t, AGENT_STREAM_MAGIC "F 12345678901234567890123 x\n");
    expect_fail(t.data, t.len, "bad file size");
    ferry_buf_free(&t);
    free(copy);
    ferry_buf_free(&b);
}

/* ---- a batch of parts (API 5) ---- */

typedef struct batch_sink {
    sink files;
    char parts[4][64];
    int n_parts, first_file[4];
} batch_sink;

static int b_part(void *ud, const char *part, ferry_err *err)
{
    (void)err;
    batch_sink *b = ud;
    snprintf(b->parts[b->n_parts], 64, "%s", part);
    b->first_file[b->n_parts++] = b->files.n;
    return FERRY_OK;
}
static int b_begin(void *ud, const char *name, uint64_t size, ferry_err *err)
{
    return s_begin(&((batch_sink *)ud)->files, name, size, err);
}
static int b_data(void *ud, const char *d, size_t len, ferry_err *err)
{
    return s_data(&((batch_sink *)ud)->files, d, len, err);
}
static int b_end(void *ud, ferry_err *err)
{
    return s_end(&((batch_sink *)ud)->files, err);
}

static int run_batch(const char *data, size_t len, size_t chunk, batch_sink *b, ferry_err *err)
{
    agent_stream_cb cb = {b_part, b_begin, b_data, b_end};
    memset(b, 0, sizeof *b);
    return feed(data, len, chunk, &cb, b, err);
}

static void test_stream_batch(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_buf_puts(&b, AGENT_STREAM_MAGIC "P 1-20261101_1_1_0\n");
    add_file(&b, "checksums.txt", "abc", 3);
    add_file(&b, "data.bin", "P 2\n", 4); /* data that looks like a part line */
    ferry_buf_puts(&b, "P 1-20261101_2_2_0\n");
    add_file(&b, "checksums.txt", "def", 3);
    ferry_buf_puts(&b, "E 3\n");
    size_t chunks[] = {1, 3, 4096};
    for (size_t c = 0; c < 3; c++) {
        batch_sink s;
        ferry_err err = {0};
        assert_int_equal(run_batch(b.data, b.len, chunks[c], &s, &err), FERRY_OK);
        assert_int_equal(s.n_parts, 2);
        assert_string_equal(s.parts[0], "1-20261101_1_1_0");
        assert_string_equal(s.parts[1], "1-20261101_2_2_0");
        assert_int_equal(s.first_file[1], 2);
        assert_int_equal(s.files.n, 3);
        assert_memory_equal(s.files.data[1].data, "P 2\n", 4);
        assert_memory_equal(s.files.data[2].data, "def", 3);
        sink_free(&s.files);
    }
    /* a part line in the stream of one part */
    expect_fail(b.data, b.len, "a part line in the stream of one part");
    /* a batch's file before its first part line; a part name that is not a plain name */
    ferry_buf t = FERRY_BUF_INIT;
    ferry_buf_puts(&t, AGENT_STREAM_MAGIC);
    add_file(&t, "checksums.txt", "abc", 3);
    ferry_buf_puts(&t, "E 1\n");
    batch_sink s;
    ferry_err err = {0};
    assert_int_not_equal(run_batch(t.data, t.len, 5, &s, &err), FERRY_OK);
    assert_non_null(strstr(err.msg, "must name its part before its files"));
    sink_free(&s.files);
    ferry_buf_reset(&t);
    ferry_buf_puts(&t, AGENT_STREAM_MAGIC "P ../x\n");
    memset(&err, 0, sizeof err);
    assert_int_not_equal(run_batch(t.data, t.len, 5, &s, &err), FERRY_OK);
    assert_non_null(strstr(err.msg, "is not a plain folder name"));
    sink_free(&s.files);
    ferry_buf_free(&t);
    ferry_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bearer),         cmocka_unit_test(test_keys),
        cmocka_unit_test(test_part_names),     cmocka_unit_test(test_pointer_versions),
        cmocka_unit_test(test_stream_ok),      cmocka_unit_test(test_stream_bad),
        cmocka_unit_test(test_stream_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

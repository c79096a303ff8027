/* Unit tests of the ClickHouse client's pure parts: TSV unescaping and the streaming reader,
 * URL building, exception-code parsing, in-band exception detection (old trailers and the 25.11
 * tagged framing), statement classification, the retry policy, and the system-table parsers on
 * 26.x-shaped results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>

#include "clickhouse/clickhouse_int.h"
#include "ferry/clickhouse.h"

static char *dupmem(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    assert_non_null(p);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void test_tsv_unescape(void **state)
{
    (void)state;
    char s[] = "a\\tb\\nc\\\\d\\0e\\'f\\x41\\rg\\bh\\fi\\qj";
    size_t n;
    bool null;
    assert_int_equal(ferry_tsv_unescape(s, strlen(s), &n, &null, NULL), FERRY_OK);
    assert_false(null);
    const char want[] = "a\tb\nc\\d\0e'fA\rg\bh\fiqj";
    assert_int_equal(n, sizeof want - 1);
    assert_memory_equal(s, want, n);

    char nul[] = "\\N";
    assert_int_equal(ferry_tsv_unescape(nul, 2, &n, &null, NULL), FERRY_OK);
    assert_true(null);
    assert_int_equal(n, 0);
    char notnull[] = "\\\\N"; /* an escaped backslash then N: the string "\N" */
    assert_int_equal(ferry_tsv_unescape(notnull, 3, &n, &null, NULL), FERRY_OK);
    assert_false(null);
    assert_string_equal(notnull, "\\N");

    ferry_err err = {0};
    char lone[] = "abc\\";
    assert_int_equal(ferry_tsv_unescape(lone, 4, &n, &null, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "lone backslash"));
    char badx[] = "\\xZ1";
    assert_int_equal(ferry_tsv_unescape(badx, 4, &n, &null, &err), FERRY_EINVAL);
    char shortx[] = "\\x4";
    assert_int_equal(ferry_tsv_unescape(shortx, 3, &n, &null, &err), FERRY_EINVAL);
}

static void test_tsv_escape_roundtrip(void **state)
{
    (void)state;
    const char raw[] = "tab\there\nnl\\bs\0nul\rcr";
    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_tsv_escape(&b, raw, sizeof raw - 1), FERRY_OK);
    assert_null(memchr(b.data, '\t', b.len));
    assert_null(memchr(b.data, '\n', b.len));
    size_t n;
    bool null;
    assert_int_equal(ferry_tsv_unescape(b.data, b.len, &n, &null, NULL), FERRY_OK);
    assert_int_equal(n, sizeof raw - 1);
    assert_memory_equal(b.data, raw, n);
    ferry_buf_free(&b);
}

typedef struct collected {
    ferry_buf text; /* rows re-joined as "f1|f2|...;" with NULL as "<null>" */
    int rows;
} collected;

static int collect_row(char **fields, const size_t *lens, const bool *nulls, size_t n, void *arg)
{
    collected *c = arg;
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(&c->text, '|');
        if (nulls[i])
            ferry_buf_puts(&c->text, "<null>");
        else
            ferry_buf_append(&c->text, fields[i], lens[i]);
    }
    ferry_buf_putc(&c->text, ';');
    c->rows++;
    return FERRY_OK;
}

static void test_tsv_reader_chunks(void **state)
{
    (void)state;
    const char in[] = "1\ta\\tb\n2\t\\N\n\t\n3\tlast\\\\\n";
    const char *want = "1|a\tb;2|<null>;|;3|last\\;";
    for (size_t chunk = 1; chunk <= sizeof in; chunk++) {
        collected c = {FERRY_BUF_INIT, 0};
        ferry_tsv_reader r;
        ferry_tsv_reader_init(&r, collect_row, &c);
        for (size_t off = 0; off < sizeof in - 1; off += chunk) {
            size_t n = sizeof in - 1 - off < chunk ? sizeof in - 1 - off : chunk;
            assert_int_equal(ferry_tsv_feed(&r, in + off, n, NULL), FERRY_OK);
        }
        assert_int_equal(ferry_tsv_finish(&r, NULL), FERRY_OK);
        assert_int_equal(c.rows, 4);
        assert_string_equal(ferry_buf_cstr(&c.text), want);
        ferry_tsv_reader_free(&r);
        ferry_buf_free(&c.text);
    }
    /* a result cut in the middle of a row */
    collected c = {FERRY_BUF_INIT, 0};
    ferry_tsv_reader r;
    ferry_err err = {0};
    ferry_tsv_reader_init(&r, collect_row, &c);
    assert_int_equal(ferry_tsv_feed(&r, "1\tx\n2\ty", 7, NULL), FERRY_OK);
    assert_int_equal(ferry_tsv_finish(&r, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "middle of row 2"));
    ferry_tsv_reader_free(&r);
    ferry_buf_free(&c.text);
}

static void test_rows_parse(void **state)
{
    (void)state;
    ferry_ch_rows r;
    ferry_err err = {0};
    const char good[] = "a\t1\n\\N\t2\nc\\nd\t3\n";
    assert_int_equal(ferry_ch_rows_parse(dupmem(good, sizeof good - 1), sizeof good - 1, &r, &err),
                     FERRY_OK);
    assert_int_equal(r.n_rows, 3);
    assert_int_equal(r.n_cols, 2);
    assert_string_equal(ferry_ch_rows_get(&r, 0, 0), "a");
    assert_true(r.nulls[2]);
    assert_string_equal(ferry_ch_rows_get(&r, 2, 0), "c\nd");
    assert_string_equal(ferry_ch_rows_get(&r, 2, 1), "3");
    ferry_ch_rows_free(&r);

    const char uneven[] = "a\tb\nc\n";
    assert_int_equal(ferry_ch_rows_parse(dupmem(uneven, 6), 6, &r, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "fewer"));
    const char more[] = "a\nb\tc\n";
    assert_int_equal(ferry_ch_rows_parse(dupmem(more, 6), 6, &r, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "more"));
    const char cut[] = "a\nb";
    assert_int_equal(ferry_ch_rows_parse(dupmem(cut, 3), 3, &r, &err), FERRY_EINVAL);
    assert_int_equal(ferry_ch_rows_parse(dupmem("", 0), 0, &r, &err), FERRY_OK);
    assert_int_equal(r.n_rows, 0);
    ferry_ch_rows_free(&r);
}

static void test_build_url(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_err err = {0};
    ferry_ch_setting p[] = {{"query_id", "a b&c=d"},
                            {"query", "SELECT 'x/y?z#', 1+1 -- é"},
                            {"max_threads", "2"}};
    assert_int_equal(ferry_ch_build_url("http://127.0.0.1:8123", p, 3, &b, &err), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b),
                        "http://127.0.0.1:8123/?query_id=a%20b%26c%3Dd"
                        "&query=SELECT%20%27x%2Fy%3Fz%23%27%2C%201%2B1%20--%20%C3%A9"
                        "&max_threads=2");
    ferry_buf_reset(&b);
    assert_int_equal(ferry_ch_build_url("https://h:1/ch/", NULL, 0, &b, &err), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b), "https://h:1/ch/");
    ferry_buf_reset(&b);
    assert_int_equal(ferry_ch_build_url("http://u:secretpw@h:1", NULL, 0, &b, &err),
                     FERRY_EINVAL);
    assert_null(strstr(err.msg, "secretpw"));
    assert_int_equal(ferry_ch_build_url("http://h:1/?x=1", NULL, 0, &b, &err), FERRY_EINVAL);
    assert_int_equal(ferry_ch_build_url("ftp://h", NULL, 0, &b, &err), FERRY_EINVAL);
    assert_int_equal(ferry_ch_build_url("http://", NULL, 0, &b, &err), FERRY_EINVAL);
    assert_int_equal(ferry_ch_build_url("http://h :1", NULL, 0, &b, &err), FERRY_EINVAL);
    ferry_buf_free(&b);
}

static void test_exception_code(void **state)
{
    (void)state;
    const char *old = "Code: 60, e.displayText() = DB::Exception: Table default.x doesn't exist.";
    const char *neu = "Code: 62. DB::Exception: Syntax error: failed at position 1. (SYNTAX_ERROR)";
    assert_int_equal(ferry_ch_exception_code(old, strlen(old)), 60);
    assert_int_equal(ferry_ch_exception_code(neu, strlen(neu)), 62);
    assert_int_equal(ferry_ch_exception_code("no code here", 12), 0);
    assert_int_equal(ferry_ch_exception_code("Code: ", 6), 0);
}

static void test_trailer_untagged(void **state)
{
    (void)state;
    int code;
    char msg[256];
    /* 18.16 */
    const char *a = "1\t0\n2\t0\nCode: 395, e.displayText() = DB::Exception: Value passed to "
                    "'throwIf' function is non zero, e.what() = DB::Exception\n";
    assert_int_equal(ferry_ch_find_trailer(a, strlen(a), true, NULL, false, &code, msg, sizeof msg),
                     8);
    assert_int_equal(code, 395);
    assert_true(!strncmp(msg, "Code: 395, e.displayText()", 26));
    /* 22.x .. 25.10 */
    const char *b = "x\nCode: 241. DB::Exception: Memory limit (total) exceeded. "
                    "(MEMORY_LIMIT_EXCEEDED) (version 24.8.4.13 (official build))\n";
    assert_int_equal(ferry_ch_find_trailer(b, strlen(b), true, NULL, false, &code, msg, sizeof msg),
                     2);
    assert_int_equal(code, 241);
    /* the "__exception__" line some versions put before the text */
    const char *c = "x\n__exception__\nCode: 159. DB::Exception: Timeout exceeded. (TIMEOUT_EXCEEDED)\n";
    assert_int_equal(ferry_ch_find_trailer(c, strlen(c), true, NULL, false, &code, msg, sizeof msg),
                     2);
    assert_int_equal(code, 159);
    /* JSONEachRow with the exception written in the format */
    const char *d = "{\"n\":1}\n{\"exception\": \"Code: 395. DB::Exception: boom. "
                    "(FUNCTION_THROW_IF_VALUE_IS_NON_ZERO)\"}\n";
    assert_int_equal(ferry_ch_find_trailer(d, strlen(d), true, NULL, false, &code, msg, sizeof msg),
                     8);
    assert_int_equal(code, 395);
    assert_null(strstr(msg, "\"}"));
    /* plain data, including "Code:" inside a row of a text format */
    const char *e = "1\tCode: 5. DB::Exception: looks like one\n2\tok\n";
    assert_int_equal(ferry_ch_find_trailer(e, strlen(e), true, NULL, false, &code, msg, sizeof msg),
                     -1);
    assert_int_equal(code, 0);
    const char *f = "1\tCode: 5. DB::Exception: mid-line in text\n";
    assert_int_equal(ferry_ch_find_trailer(f, strlen(f), true, NULL, false, &code, msg, sizeof msg),
                     -1);
    /* a tail that does not start at the body's beginning: offset 0 is not a line start */
    const char *g = "Code: 1. DB::Exception: x\n";
    assert_int_equal(ferry_ch_find_trailer(g, strlen(g), false, NULL, false, &code, msg, sizeof msg),
                     -1);
    assert_int_equal(ferry_ch_find_trailer(g, strlen(g), true, NULL, false, &code, msg, sizeof msg),
                     0);
    /* binary formats: right after the data, no newline needed */
    const char h[] = "\x01\x02\x00\xff" "Code: 395, e.displayText() = DB::Exception: boom\n";
    assert_int_equal(ferry_ch_find_trailer(h, sizeof h - 1, true, NULL, true, &code, msg, sizeof msg),
                     4);
    assert_int_equal(code, 395);
    assert_int_equal(ferry_ch_find_trailer(h, sizeof h - 1, true, NULL, false, &code, msg, sizeof msg),
                     -1);
    /* no newline at the end: not a complete trailer */
    const char *k = "Code: 1. DB::Exception: x";
    assert_int_equal(ferry_ch_find_trailer(k, strlen(k), true, NULL, false, &code, msg, sizeof msg),
                     -1);
}

static void test_trailer_tagged(void **state)
{
    (void)state;
    int code;
    char msg[256];
    const char *tag = "k3j5a9x0qpz7mw2e";
    /* 25.11+: [\r\n]__exception__\r\nTAG\r\nMESSAGE\r\nLEN TAG\r\n__exception__\r\n */
    const char *a = "1\n2\n\r\n__exception__\r\nk3j5a9x0qpz7mw2e\r\n"
                    "Code: 395. DB::Exception: Value passed to 'throwIf' function is non-zero. "
                    "(FUNCTION_THROW_IF_VALUE_IS_NON_ZERO) (version 25.11.1.1)\r\n"
                    "137 k3j5a9x0qpz7mw2e\r\n__exception__\r\n";
    assert_int_equal(ferry_ch_find_trailer(a, strlen(a), true, tag, false, &code, msg, sizeof msg),
                     4);
    assert_int_equal(code, 395);
    assert_true(!strncmp(msg, "Code: 395. DB::Exception", 24));
    assert_non_null(strstr(msg, "(version 25.11.1.1)"));
    assert_null(strstr(msg, tag));
    assert_null(strstr(msg, "137"));
    /* the message followed by "\n" only, as some builds write it */
    const char *b = "abc\r\n__exception__\r\nk3j5a9x0qpz7mw2e\r\nCode: 60. DB::Exception: gone\n"
                    "31 k3j5a9x0qpz7mw2e\r\n__exception__\r\n";
    assert_int_equal(ferry_ch_find_trailer(b, strlen(b), true, tag, false, &code, msg, sizeof msg),
                     3);
    assert_int_equal(code, 60);
    assert_string_equal(msg, "Code: 60. DB::Exception: gone");
    /* cut off before the closing marker: still an error */
    const char *c = "\r\n__exception__\r\nk3j5a9x0qpz7mw2e\r\nCode: 241. DB::Exception: memo";
    assert_int_equal(ferry_ch_find_trailer(c, strlen(c), true, tag, false, &code, msg, sizeof msg),
                     0);
    assert_int_equal(code, 241);
    /* with a tag, an untagged-looking line is data; so is "__exception__" with another tag */
    const char *d = "Code: 1. DB::Exception: data\n__exception__\r\nzzzzzzzzzzzzzzzz\r\n";
    assert_int_equal(ferry_ch_find_trailer(d, strlen(d), true, tag, false, &code, msg, sizeof msg),
                     -1);
    assert_int_equal(ferry_ch_find_tag_marker(d, strlen(d), tag), -1);
    assert_int_equal(ferry_ch_find_tag_marker(a, strlen(a), tag), 6);
}

static void test_statement_kind(void **state)
{
    (void)state;
    assert_int_equal(ferry_ch_statement_kind("SELECT 1"), FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("  select 1"), FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("(SELECT 1) UNION ALL (SELECT 2)"), FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("-- c\n/* x */ WITH 1 AS a SELECT a"),
                     FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("SHOW TABLES"), FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("describe t"), FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("EXISTS TABLE t"), FERRY_CH_STMT_READ);
    assert_int_equal(ferry_ch_statement_kind("INSERT INTO t FORMAT TSV"), FERRY_CH_STMT_INSERT);
    assert_int_equal(ferry_ch_statement_kind("ALTER TABLE t ATTACH PARTITION 1"),
                     FERRY_CH_STMT_OTHER);
    assert_int_equal(ferry_ch_statement_kind("SELECTX"), FERRY_CH_STMT_OTHER);
    assert_int_equal(ferry_ch_statement_kind("DROP TABLE t"), FERRY_CH_STMT_OTHER);
    assert_int_equal(ferry_ch_statement_kind("/* unterminated"), FERRY_CH_STMT_OTHER);
    assert_int_equal(ferry_ch_statement_kind(""), FERRY_CH_STMT_OTHER);
}

static bool retry(enum ferry_ch_failure f, enum ferry_ch_stmt_kind k, bool token, bool idem)
{
    ferry_ch_retry_case rc = {.failure = f, .kind = k, .has_dedup_token = token,
                              .caller_idempotent = idem, .body_replayable = true,
                              .attempt = 1, .max_attempts = 3};
    return ferry_ch_should_retry(&rc);
}

static void test_retry_policy(void **state)
{
    (void)state;
    enum ferry_ch_stmt_kind R = FERRY_CH_STMT_READ, I = FERRY_CH_STMT_INSERT,
                            O = FERRY_CH_STMT_OTHER;
    /* never connected: safe for everything */
    assert_true(retry(FERRY_CH_FAIL_CONNECT, R, false, false));
    assert_true(retry(FERRY_CH_FAIL_CONNECT, I, false, false));
    assert_true(retry(FERRY_CH_FAIL_CONNECT, O, false, false));
    /* connected, no reply: only what may run twice */
    assert_true(retry(FERRY_CH_FAIL_NO_REPLY, R, false, false));
    assert_false(retry(FERRY_CH_FAIL_NO_REPLY, I, false, false));
    assert_true(retry(FERRY_CH_FAIL_NO_REPLY, I, true, false));
    assert_false(retry(FERRY_CH_FAIL_NO_REPLY, O, false, false));
    assert_false(retry(FERRY_CH_FAIL_NO_REPLY, O, true, false)); /* token means nothing there */
    assert_true(retry(FERRY_CH_FAIL_NO_REPLY, O, false, true));
    /* the response had started, timed out, the server said no, or we stopped: never */
    enum ferry_ch_failure never[] = {FERRY_CH_FAIL_PARTIAL, FERRY_CH_FAIL_TIMEOUT,
                                     FERRY_CH_FAIL_SERVER, FERRY_CH_FAIL_LOCAL};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        assert_false(retry(never[i], R, true, true));
        assert_false(retry(never[i], I, true, true));
    }
    ferry_ch_retry_case rc = {.failure = FERRY_CH_FAIL_CONNECT, .kind = R,
                              .body_replayable = true, .attempt = 3, .max_attempts = 3};
    assert_false(ferry_ch_should_retry(&rc)); /* out of attempts */
    rc.attempt = 1;
    rc.data_delivered = true;
    assert_false(ferry_ch_should_retry(&rc)); /* the caller already has part of a result */
    rc.data_delivered = false;
    rc.body_replayable = false;
    assert_false(ferry_ch_should_retry(&rc)); /* a streamed body that was partly consumed */
    rc.max_attempts = 1;
    rc.body_replayable = true;
    assert_false(ferry_ch_should_retry(&rc));

    assert_int_equal(ferry_ch_backoff_ms(1, 100), 100);
    assert_int_equal(ferry_ch_backoff_ms(2, 100), 200);
    assert_int_equal(ferry_ch_backoff_ms(3, 100), 400);
    assert_int_equal(ferry_ch_backoff_ms(10, 100), 5000);
    assert_int_equal(ferry_ch_backoff_ms(1000, 100), 5000);
    assert_int_equal(ferry_ch_backoff_ms(1, 0), 100);
}

/* Results shaped like ClickHouse 26.x returns them for the helpers' queries. */
static void test_parse_partitions_26x(void **state)
{
    (void)state;
    const char t[] = "202401\t202401\tdefault\t2\t1010\t9114\n"
                     "202401\t202401\ts3_cold\t1\t18446744073709551615\t123456789012\n"
                     "a1b2\t('tenant\\'s', 3)\tdefault\t1\t5\t700\n";
    ferry_ch_partition *p;
    size_t n;
    ferry_err err = {0};
    assert_int_equal(ferry_ch_parse_partitions(dupmem(t, sizeof t - 1), sizeof t - 1, &p, &n, &err),
                     FERRY_OK);
    assert_int_equal(n, 3);
    assert_string_equal(p[1].disk_name, "s3_cold");
    assert_true(p[1].rows == UINT64_MAX);
    assert_true(p[1].bytes_on_disk == 123456789012ULL);
    assert_string_equal(p[2].partition, "('tenant's', 3)");
    assert_int_equal(p[0].parts, 2);
    ferry_ch_partitions_free(p, n);

    const char bad[] = "202401\t202401\tdefault\t2\tlots\t9114\n";
    assert_int_equal(ferry_ch_parse_partitions(dupmem(bad, sizeof bad - 1), sizeof bad - 1, &p, &n,
                                               &err),
                     FERRY_EREMOTE);
    assert_non_null(strstr(err.msg, "'lots' is not a number"));
    const char narrow[] = "202401\t202401\n";
    assert_int_equal(ferry_ch_parse_partitions(dupmem(narrow, sizeof narrow - 1),
                                               sizeof narrow - 1, &p, &n, &err),
                     FERRY_EREMOTE);
}

static void test_parse_parts_26x(void **state)
{
    (void)state;
    const char t[] =
        "202401_1_1_0\t202401\t202401\tdefault\t/var/lib/clickhouse/store/3f2/3f2a1c4e-0b1d-4c1e-9"
        "a5e-1d2c3b4a5f60/202401_1_1_0/\t6f1ed002ab5595859014ebf0951522d9\t1000\t8505\t1\t1\t0\n"
        "202401_2_7_2\t202401\t202401\ts3_cold\t/var/lib/clickhouse/disks/s3_cold/store/3f2/3f2a1c"
        "4e-0b1d-4c1e-9a5e-1d2c3b4a5f60/202401_2_7_2/\tbadc0ffee0ddf00dbadc0ffee0ddf00d\t12\t33\t"
        "2\t7\t2\n";
    ferry_ch_part *p;
    size_t n;
    ferry_err err = {0};
    assert_int_equal(ferry_ch_parse_parts(dupmem(t, sizeof t - 1), sizeof t - 1, &p, &n, &err),
                     FERRY_OK);
    assert_int_equal(n, 2);
    assert_string_equal(p[1].name, "202401_2_7_2");
    assert_string_equal(p[1].disk_name, "s3_cold");
    assert_string_equal(p[0].hash_of_all_files, "6f1ed002ab5595859014ebf0951522d9");
    assert_int_equal(p[1].min_block_number, 2);
    assert_int_equal(p[1].max_block_number, 7);
    assert_int_equal(p[1].level, 2);
    assert_int_equal(p[0].rows, 1000);
    ferry_ch_parts_free(p, n);

    /* a bad field in the second row: the first row's strings are freed (ASan checks), *out
     * stays NULL, the message names the row and column */
    const char level_big[] = "a\tb\tc\td\te\tf\t1\t2\t3\t4\t0\n"
                             "a\tb\tc\td\te\tf\t1\t2\t3\t4\t4294967296\n";
    assert_int_equal(ferry_ch_parse_parts(dupmem(level_big, sizeof level_big - 1),
                                          sizeof level_big - 1, &p, &n, &err),
                     FERRY_EREMOTE);
    assert_null(p);
    assert_non_null(strstr(err.msg, "row 2 column 11: 4294967296 out of range"));
    const char neg_block[] = "a\tb\tc\td\te\tf\t1\t2\t-3\tx4\t0\n";
    assert_int_equal(ferry_ch_parse_parts(dupmem(neg_block, sizeof neg_block - 1),
                                          sizeof neg_block - 1, &p, &n, &err),
                     FERRY_EREMOTE);
    assert_non_null(strstr(err.msg, "row 1 column 10: 'x4' is not a number"));
}

static void test_parse_detached_26x(void **state)
{
    (void)state;
    /* 26.x: partition_id and reason are Nullable; a broken part has a reason */
    const char t[] = "202401_1_1_0\t202401\t\tdefault\t/var/lib/clickhouse/store/x/detached/"
                     "202401_1_1_0/\t8505\n"
                     "broken-on-start_all_1_1_0\t\\N\tbroken-on-start\ts3_cold\t/p/\t0\n"
                     "weird\\tname\t\\N\t\\N\tdefault\t\t12\n";
    ferry_ch_detached_part *p;
    size_t n;
    ferry_err err = {0};
    assert_int_equal(ferry_ch_parse_detached(dupmem(t, sizeof t - 1), sizeof t - 1, &p, &n, &err),
                     FERRY_OK);
    assert_int_equal(n, 3);
    assert_string_equal(p[0].partition_id, "202401");
    assert_string_equal(p[0].reason, "");
    assert_null(p[1].partition_id);
    assert_string_equal(p[1].reason, "broken-on-start");
    assert_string_equal(p[1].disk, "s3_cold");
    assert_string_equal(p[2].name, "weird\tname");
    assert_null(p[2].reason);
    assert_int_equal(p[2].bytes_on_disk, 12);
    ferry_ch_detached_free(p, n);
}

static void test_parse_version(void **state)
{
    (void)state;
    ferry_ch_version v;
    ferry_err err = {0};
    assert_int_equal(ferry_ch_parse_version("26.7.3.1\n", &v, &err), FERRY_OK);
    assert_int_equal(v.major, 26);
    assert_int_equal(v.minor, 7);
    assert_int_equal(v.patch, 3);
    assert_string_equal(v.text, "26.7.3.1");
    assert_int_equal(ferry_ch_parse_version("18.16.1", &v, &err), FERRY_OK);
    assert_int_equal(v.major, 18);
    assert_int_equal(ferry_ch_parse_version("garbage", &v, &err), FERRY_EREMOTE);
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static void test_quote_and_scrub(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_ch_quote(&b, "it's a \\ test"), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b), "'it\\'s a \\\\ test'");
    ferry_buf_free(&b);
    char m[128] = "bad password hunter22 for hunter22!";
    ferry_ch_scrub(m, "hunter22");
    assert_string_equal(m, "bad password *** for ***!");
    char m2[32] = "a b c";
    ferry_ch_scrub(m2, "b"); /* too short to scrub meaningfully */
    assert_string_equal(m2, "a b c");
    char id[37];
    assert_int_equal(ferry_ch_random_uuid(id), FERRY_OK);
    assert_int_equal(strlen(id), 36);
    assert_int_equal(id[14], '4');
    assert_true(strchr("89ab", id[19]) != NULL);
    assert_true(id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-');
    /* ids are unique: 20,000 in a row, none repeated */
    enum { N_IDS = 20000 };
    char (*ids)[37] = calloc(N_IDS, sizeof *ids);
    assert_non_null(ids);
    for (int i = 0; i < N_IDS; i++)
        assert_int_equal(ferry_ch_random_uuid(ids[i]), FERRY_OK);
    qsort(ids, N_IDS, sizeof *ids, cmp_id);
    for (int i = 1; i < N_IDS; i++)
        assert_true(strcmp(ids[i - 1], ids[i]) != 0);
    free(ids);
    /* a forked child does not repeat its parent's next ids */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char child_id[37];
        int ok = ferry_ch_random_uuid(child_id) == FERRY_OK &&
                 write(fds[1], child_id, 37) == 37;
        _exit(ok ? 0 : 1);
    }
    char parent_id[37], child_id[37];
    assert_int_equal(ferry_ch_random_uuid(parent_id), FERRY_OK);
    assert_int_equal(read(fds[0], child_id, 37), 37);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(strcmp(parent_id, child_id) != 0);
    close(fds[0]);
    close(fds[1]);
}

static int collect(const void *data, size_t len, void *arg)
{
    return ferry_buf_append(arg, data, len);
}

/* TabSeparatedWithNames -> JSON lines (`ferry query --json`), fed in pieces split anywhere:
 * the header names the keys in order, \N is null, a non-UTF-8 value is marked, a row with the
 * wrong field count is the server's fault. */
static void test_tsv_json(void **state)
{
    (void)state;
    static const char in[] = "id\tname\tnote\n1\tal\\tice\t\\N\n2\t\xff\tx\n";
    for (size_t cut = 0; cut < sizeof in - 1; cut++) {
        ferry_buf out = FERRY_BUF_INIT;
        ferry_err err = {0};
        ferry_tsv_json j;
        ferry_tsv_json_init(&j, collect, &out, &err);
        assert_int_equal(ferry_tsv_json_feed(in, cut, &j), FERRY_OK);
        assert_int_equal(ferry_tsv_json_feed(in + cut, sizeof in - 1 - cut, &j), FERRY_OK);
        assert_int_equal(ferry_tsv_json_finish(&j), FERRY_OK);
        assert_string_equal(ferry_buf_cstr(&out),
                            "{\"id\":\"1\",\"name\":\"al\\tice\",\"note\":null}\n"
                            "{\"id\":\"2\",\"name\":\"<invalid UTF-8>\",\"note\":\"x\"}\n");
        ferry_tsv_json_free(&j);
        ferry_buf_free(&out);
    }
    ferry_buf out = FERRY_BUF_INIT;
    ferry_err err = {0};
    ferry_tsv_json j;
    ferry_tsv_json_init(&j, collect, &out, &err);
    static const char bad[] = "a\tb\n1\t2\t3\n";
    assert_int_equal(ferry_tsv_json_feed(bad, sizeof bad - 1, &j), FERRY_EREMOTE);
    assert_string_equal(err.msg, "row with 3 fields under 2 column names");
    ferry_tsv_json_free(&j);
    ferry_tsv_json_init(&j, collect, &out, &err);
    assert_int_equal(ferry_tsv_json_feed("a\n1", 3, &j), FERRY_OK);
    assert_int_equal(ferry_tsv_json_finish(&j), FERRY_EINVAL); /* ends inside a row */
    ferry_tsv_json_free(&j);
    ferry_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tsv_unescape),         cmocka_unit_test(test_tsv_escape_roundtrip),
        cmocka_unit_test(test_tsv_reader_chunks),    cmocka_unit_test(test_rows_parse),
        cmocka_unit_test(test_build_url),            cmocka_unit_test(test_exception_code),
        cmocka_unit_test(test_trailer_untagged),     cmocka_unit_test(test_trailer_tagged),
        cmocka_unit_test(test_statement_kind),       cmocka_unit_test(test_retry_policy),
        cmocka_unit_test(test_parse_partitions_26x), cmocka_unit_test(test_parse_parts_26x),
        cmocka_unit_test(test_parse_detached_26x),   cmocka_unit_test(test_parse_version),
        cmocka_unit_test(test_quote_and_scrub),      cmocka_unit_test(test_tsv_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

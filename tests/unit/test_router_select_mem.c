/* The router's charge for the analysis of a SELECT (lib/router/select.c): the estimate made
 * before ferry_sql_analyze runs is at least what the analysis then holds, for statements of
 * every kind of token (IN lists, strings with escapes, comments, quoted names, nesting), and it
 * stays close to it: a long string literal costs one token, not one per byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/router/select_int.h"
#include "ferry/buf.h"

static size_t held_by(const char *sql, size_t len)
{
    ferry_sql_analysis a;
    ferry_err err = {0};
    (void)ferry_sql_analyze(sql, len, NULL, 0, &a, &err);
    size_t n = rd_analysis_bytes(&a);
    ferry_sql_analysis_free(&a);
    return n;
}

static void check(const char *sql, size_t len)
{
    size_t est = rd_analysis_estimate(sql, len), held = held_by(sql, len);
    if (est < held || est > 8 * held + 4096)
        fail_msg("estimate %zu, held %zu for %.80s", est, held, sql);
}

static void test_statements(void **state)
{
    (void)state;
    static const char *const sqls[] = {
        "SELECT 1",
        "SELECT count() FROM events WHERE tenant = 't1' AND id IN (1, 2, 3) FORMAT TSV",
        "SELECT a,b,c FROM t WHERE x IN (1,2,3,4,5,6,7,8,9,10) GROUP BY a ORDER BY b LIMIT 10",
        "SELECT 'it''s', 'a\\'b', \"q\"\"n\", `w x` FROM t -- a comment, with words\n",
        "/* a /* nested */ block */ SELECT 1.5e10 + 0x1F - 2 >= 3 AND a != b OR c <> d",
        "WITH x AS (SELECT * FROM (SELECT * FROM (SELECT 1))) SELECT * FROM x # hash comment\n",
        "SELECT $$heredoc text, with 'quotes'$$, {p:UInt8}, arr[1], tup.1, a::String",
        "SELECT 'ünïcødé', имя FROM t WHERE s LIKE '%x%'",
        "SELECT\t1\n,\r\n2   ,    3",
        "",
    };
    for (size_t i = 0; i < sizeof sqls / sizeof sqls[0]; i++)
        check(sqls[i], strlen(sqls[i]));
}

/* A 4 MB IN list of numbers (two tokens, about 9 bytes, per element) and of strings. */
static void test_long_lists(void **state)
{
    (void)state;
    ferry_buf b = {0};
    ferry_buf_puts(&b, "SELECT count() FROM events WHERE id IN (");
    for (unsigned i = 0; i < 450000; i++)
        ferry_buf_printf(&b, "%s%u", i ? ", " : "", i * 3);
    ferry_buf_puts(&b, ") FORMAT TSV");
    check(b.data, b.len);
    b.len = 0;
    ferry_buf_puts(&b, "SELECT 1 WHERE s IN (");
    for (unsigned i = 0; i < 100000; i++)
        ferry_buf_printf(&b, "%s'k%u, x'", i ? "," : "", i);
    ferry_buf_putc(&b, ')');
    check(b.data, b.len);
    ferry_buf_free(&b);
}

/* A long string literal is one token: its estimate does not grow with its bytes. */
static void test_long_string(void **state)
{
    (void)state;
    size_t n = 1u << 20;
    char *sql = malloc(n + 32);
    assert_non_null(sql);
    int k = snprintf(sql, 32, "SELECT length('");
    for (size_t i = 0; i < n; i++)
        sql[k + i] = i % 7 ? 'x' : ' ';
    memcpy(sql + k + n, "')", 3);
    size_t len = (size_t)k + n + 2;
    check(sql, len);
    assert_true(rd_analysis_estimate(sql, len) < 4096);
    free(sql);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_long_lists),
        cmocka_unit_test(test_long_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

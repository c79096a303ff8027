/* Unit tests of the ClickHouse HTTP helpers the lab node uses: parameter kinds, names, string
 * quoting, error parsing and status mapping, FORMAT detection, INSERT splitting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/chhttp.h"

static void test_param_kinds(void **state)
{
    (void)state;
    assert_int_equal(ferry_ch_param_kind("query"), FERRY_CH_PARAM_PROTOCOL);
    assert_int_equal(ferry_ch_param_kind("database"), FERRY_CH_PARAM_PROTOCOL);
    assert_int_equal(ferry_ch_param_kind("default_format"), FERRY_CH_PARAM_PROTOCOL);
    assert_int_equal(ferry_ch_param_kind("query_id"), FERRY_CH_PARAM_PROTOCOL);
    assert_int_equal(ferry_ch_param_kind("password"), FERRY_CH_PARAM_PROTOCOL);
    assert_int_equal(ferry_ch_param_kind("param_x"), FERRY_CH_PARAM_QUERY);
    assert_int_equal(ferry_ch_param_kind("param_"), FERRY_CH_PARAM_SETTING);
    assert_int_equal(ferry_ch_param_kind("max_threads"), FERRY_CH_PARAM_SETTING);
    assert_int_equal(ferry_ch_param_kind("queryx"), FERRY_CH_PARAM_SETTING);
}

static void test_names(void **state)
{
    (void)state;
    assert_true(ferry_ch_name_ok("max_threads"));
    assert_true(ferry_ch_name_ok("s3.endpoint"));
    assert_true(ferry_ch_name_ok("_x1"));
    assert_false(ferry_ch_name_ok(""));
    assert_false(ferry_ch_name_ok("1x"));
    assert_false(ferry_ch_name_ok("a=b"));
    assert_false(ferry_ch_name_ok("a; DROP TABLE t"));
    assert_false(ferry_ch_name_ok("a'"));
}

static void test_quote(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_ch_quote_string(&b, "it's a \\ test\n\x01"), 0);
    assert_string_equal(ferry_buf_cstr(&b), "'it\\'s a \\\\ test\\n\\x01'");
    ferry_buf_reset(&b);
    assert_int_equal(ferry_ch_quote_string(&b, ""), 0);
    assert_string_equal(ferry_buf_cstr(&b), "''");
    ferry_buf_free(&b);
}

static void test_error_parse(void **state)
{
    (void)state;
    char name[64];
    assert_int_equal(ferry_ch_error_parse("Code: 62. DB::Exception: Syntax error: failed at "
                                          "position 7 (1): 1. Expected one of: (x). "
                                          "(SYNTAX_ERROR)",
                                          name, sizeof name),
                     62);
    assert_string_equal(name, "SYNTAX_ERROR");
    assert_int_equal(ferry_ch_error_parse("Code: 60. DB::Exception: Unknown table 'nope' "
                                          "(UNKNOWN_TABLE) (version 26.7.2.1)",
                                          name, sizeof name),
                     60);
    assert_string_equal(name, "UNKNOWN_TABLE");
    assert_int_equal(ferry_ch_error_parse("something odd", name, sizeof name), 0);
    assert_string_equal(name, "");
    /* A too-small buffer truncates rather than overflows. */
    char small[4];
    ferry_ch_error_parse("Code: 1. x (UNSUPPORTED_METHOD)", small, sizeof small);
    assert_string_equal(small, "UNS");
}

static void test_status(void **state)
{
    (void)state;
    assert_int_equal(ferry_ch_error_http_status("SYNTAX_ERROR"), 400);
    assert_int_equal(ferry_ch_error_http_status("CANNOT_PARSE_TEXT"), 400);
    assert_int_equal(ferry_ch_error_http_status("UNKNOWN_TABLE"), 404);
    assert_int_equal(ferry_ch_error_http_status("UNKNOWN_SETTING"), 404);
    assert_int_equal(ferry_ch_error_http_status("AUTHENTICATION_FAILED"), 403);
    assert_int_equal(ferry_ch_error_http_status("REQUIRED_PASSWORD"), 401);
    assert_int_equal(ferry_ch_error_http_status("TIMEOUT_EXCEEDED"), 408);
    assert_int_equal(ferry_ch_error_http_status("QUERY_IS_TOO_LARGE"), 413);
    assert_int_equal(ferry_ch_error_http_status("NOT_IMPLEMENTED"), 501);
    assert_int_equal(ferry_ch_error_http_status("READONLY"), 500);
    assert_int_equal(ferry_ch_error_http_status(""), 500);
}

static void test_find_format(void **state)
{
    (void)state;
    char f[32];
    const char *q = "SELECT 1 FORMAT JSONEachRow";
    assert_true(ferry_ch_find_format(q, strlen(q), f, sizeof f, NULL));
    assert_string_equal(f, "JSONEachRow");
    q = "SELECT 'FORMAT CSV' AS x";
    assert_false(ferry_ch_find_format(q, strlen(q), f, sizeof f, NULL));
    q = "SELECT * FROM (SELECT 1 FORMAT CSV) -- FORMAT TSV\n";
    assert_false(ferry_ch_find_format(q, strlen(q), f, sizeof f, NULL));
    q = "select 1 format Native settings max_threads = 1";
    assert_true(ferry_ch_find_format(q, strlen(q), f, sizeof f, NULL));
    assert_string_equal(f, "Native");
    q = "SELECT `format` FROM t /* FORMAT X */";
    assert_false(ferry_ch_find_format(q, strlen(q), f, sizeof f, NULL));
}

static void test_split_insert(void **state)
{
    (void)state;
    char f[32];
    char *ins = NULL;
    const char *q = "INSERT INTO db.t (a, b) FORMAT TSV\n";
    assert_true(ferry_ch_split_insert(q, strlen(q), &ins, f, sizeof f));
    assert_string_equal(ins, "INSERT INTO db.t (a, b) ");
    assert_string_equal(f, "TSV");
    free(ins);
    q = "  insert into t format JSONEachRow;";
    assert_true(ferry_ch_split_insert(q, strlen(q), &ins, f, sizeof f));
    assert_string_equal(f, "JSONEachRow");
    free(ins);
    q = "INSERT INTO t FORMAT TSV\n1\t2\n"; /* data inline: not splittable */
    assert_false(ferry_ch_split_insert(q, strlen(q), &ins, f, sizeof f));
    q = "INSERT INTO t VALUES";
    assert_false(ferry_ch_split_insert(q, strlen(q), &ins, f, sizeof f));
    q = "SELECT 1 FORMAT TSV";
    assert_false(ferry_ch_split_insert(q, strlen(q), &ins, f, sizeof f));
}

static void test_keyword(void **state)
{
    (void)state;
    const char *q = " -- c\n /* x */ select 1";
    assert_true(ferry_ch_starts_with_keyword(q, strlen(q), "SELECT"));
    assert_false(ferry_ch_starts_with_keyword(q, strlen(q), "SET"));
    q = "SETTINGS";
    assert_false(ferry_ch_starts_with_keyword(q, strlen(q), "SET"));
    q = "(SELECT 1)";
    assert_false(ferry_ch_starts_with_keyword(q, strlen(q), "SELECT"));
}

static void test_insert_from_infile(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_ch_insert_from_infile(&b, "INSERT INTO db.t (a, b) ", "/d/in'1",
                                                 "RowBinary"), 0);
    assert_string_equal(ferry_buf_cstr(&b),
                        "INSERT INTO db.t (a, b) FROM INFILE '/d/in\\'1' FORMAT RowBinary");
    b.len = 0;
    /* SETTINGS moves after FROM INFILE; one inside a string or a comment stays */
    assert_int_equal(ferry_ch_insert_from_infile(
                         &b, "INSERT INTO `settings` /* SETTINGS */ SETTINGS async_insert = 0 ",
                         "/f", "TSV"), 0);
    assert_string_equal(ferry_buf_cstr(&b), "INSERT INTO `settings` /* SETTINGS */ FROM INFILE "
                                            "'/f' SETTINGS async_insert = 0 FORMAT TSV");
    ferry_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_kinds), cmocka_unit_test(test_names),
        cmocka_unit_test(test_quote),       cmocka_unit_test(test_error_parse),
        cmocka_unit_test(test_status),      cmocka_unit_test(test_find_format),
        cmocka_unit_test(test_split_insert), cmocka_unit_test(test_keyword),
        cmocka_unit_test(test_insert_from_infile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

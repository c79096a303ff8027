/* Unit tests of partition literal parsing and printing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/partition.h"

static void test_shared(void **state)
{
    (void)state;
    ferry_partition_key k;
    ferry_err err = {0};
    assert_int_equal(ferry_partition_parse(FERRY_LAYOUT_SHARED, "('t\\'1', 20261101, 3)", &k,
                                           &err), FERRY_OK);
    assert_string_equal(k.tenant, "t'1");
    assert_int_equal(k.tenant_is_string, 1);
    assert_int_equal(k.day, 20261101);
    assert_int_equal(k.split, 3);
    ferry_buf b = FERRY_BUF_INIT;
    ferry_partition_sql(FERRY_LAYOUT_SHARED, &k, &b);
    assert_string_equal(b.data, "('t\\'1', 20261101, 3)");
    ferry_buf_free(&b);

    assert_int_equal(ferry_partition_parse(FERRY_LAYOUT_SHARED, "(3,20261101,0)", &k, &err), 0);
    assert_string_equal(k.tenant, "3");
    assert_int_equal(k.tenant_is_string, 0);
    ferry_partition_sql(FERRY_LAYOUT_SHARED, &k, &b);
    assert_string_equal(b.data, "(3, 20261101, 0)");
    ferry_buf_free(&b);
}

static void test_per_tenant(void **state)
{
    (void)state;
    ferry_partition_key k;
    ferry_err err = {0};
    assert_int_equal(ferry_partition_parse(FERRY_LAYOUT_PER_TENANT, "(20261110, 2)", &k, &err),
                     0);
    assert_int_equal(k.day, 20261110);
    assert_int_equal(k.split, 2);
    assert_string_equal(k.tenant, "");
}

static void test_bad(void **state)
{
    (void)state;
    const char *bad[] = {"(1,2)", "(1, 20261101, 3, 4)", "('t', 'x', 3)", "('t', 1, -3)",
                         "('t, 1, 3)", "('t', 1, 3) x", "(, 1, 3)", "('t' 1 3)"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ferry_partition_key k;
        ferry_err err = {0};
        assert_int_equal(ferry_partition_parse(FERRY_LAYOUT_SHARED, bad[i], &k, &err),
                         FERRY_EINVAL);
        assert_true(err.msg[0] != '\0');
    }
    enum ferry_layout l;
    ferry_err err = {0};
    assert_int_equal(ferry_layout_parse("sharded", &l, &err), FERRY_EINVAL);
}

static void test_quote(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_sql_ident("we`ird", &b);
    assert_string_equal(b.data, "`we\\`ird`");
    ferry_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared), cmocka_unit_test(test_per_tenant),
        cmocka_unit_test(test_bad), cmocka_unit_test(test_quote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

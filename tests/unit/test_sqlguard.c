/* Unit tests of ferry's SQL safety rule and fingerprint comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/sqlguard.h"
#include "ferry/verify.h"

static void test_refused(void **state)
{
    (void)state;
    const char *bad[] = {
        "ALTER TABLE events DROP PARTITION (3, 20261101, 0)",
        "alter table events drop partition id '3-20261101-0'",
        "ALTER TABLE `events` DROP PART 'all_1_1_0'",
        "ALTER TABLE events DROP DETACHED PARTITION 1 SETTINGS allow_drop_detached = 1",
        "  /* c */ DROP TABLE staging",
        "DROP TABLE IF EXISTS db.t SYNC",
        "drop database x",
        "TRUNCATE TABLE events",
        "truncate events",
        "DELETE FROM events WHERE tenant = 3",
        "ALTER TABLE events DELETE WHERE tenant = 3",
        "-- comment\nALTER TABLE events ON CLUSTER c DROP PARTITION 1",
        /* ClickHouse's comments (the same tokenizer as the router's): nested, '#', '//' */
        "/* a /* b */ SELECT 1 */ DROP TABLE staging",
        "# c\nTRUNCATE events",
        "// c\nDELETE FROM events WHERE 1",
        "ALTER TABLE events /* x */ DROP /* y */ PARTITION 1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ferry_err err = {0};
        assert_int_equal(ferry_sql_guard_check(bad[i], &err), FERRY_EINVAL);
        assert_non_null(strstr(err.msg, "refused"));
    }
}

static void test_allowed(void **state)
{
    (void)state;
    const char *good[] = {
        "ALTER TABLE events DETACH PARTITION (3, 20261101, 0)",
        "ALTER TABLE events REPLACE PARTITION (3, 20261101, 0) FROM staging",
        "ALTER TABLE staging ATTACH PARTITION ID '3-20261101-0'",
        "ALTER TABLE events FREEZE PARTITION ID 'x' WITH NAME 'drop'",
        "SELECT 'DROP TABLE x', `drop` FROM t /* TRUNCATE */",
        "SELECT 1 -- DROP TABLE events",
        "CREATE TABLE staging AS events",
        "INSERT INTO t SELECT * FROM `truncate`",
        "SYSTEM DROP MARK CACHE",
        "",
        /* a nested comment hides the words inside it */
        "/* /* */ DROP TABLE x */ SELECT 1",
        "SELECT $$DROP TABLE x$$",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ferry_err err = {0};
        assert_int_equal(ferry_sql_guard_check(good[i], &err), FERRY_OK);
    }
}

static void test_fingerprint_same(void **state)
{
    (void)state;
    ferry_fingerprint a = {.rows = 10, .hash_sum = 5, .hash_xor = 7, .distinct = 10, .parts = 3};
    ferry_fingerprint b = a;
    char why[128];
    b.parts = 1;
    assert_true(ferry_fingerprint_same(&a, &b, why, sizeof why));
    b.hash_xor = 8;
    assert_false(ferry_fingerprint_same(&a, &b, why, sizeof why));
    assert_non_null(strstr(why, "contents"));
    b = a;
    b.rows = 11;
    assert_false(ferry_fingerprint_same(&a, &b, why, sizeof why));
    assert_non_null(strstr(why, "rows differ"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_refused),
                                       cmocka_unit_test(test_allowed),
                                       cmocka_unit_test(test_fingerprint_same)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of tiering's pure pieces: journal states and transitions, job ids, freeze names,
 * the age rule, staging names, and that the statements the flow sends pass the SQL guard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <time.h>

#include "ferry/sqlguard.h"
#include "ferry/tier.h"

static void test_states(void **state)
{
    (void)state;
    for (int s = 0; s < FERRY_TIER_STATE_COUNT; s++) {
        enum ferry_tier_state back;
        assert_int_equal(ferry_tier_state_parse(ferry_tier_state_name((enum ferry_tier_state)s),
                                                &back, NULL),
                         FERRY_OK);
        assert_int_equal(back, s);
    }
    ferry_err err = {0};
    enum ferry_tier_state x;
    assert_int_equal(ferry_tier_state_parse("SWAPPED", &x, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "SWAPPED"));
    assert_string_equal(ferry_tier_state_name(FERRY_TIER_REPLACE), "REPLACE");
}

static void test_transitions(void **state)
{
    (void)state;
    /* forward one step at a time */
    for (int s = FERRY_TIER_PLANNED; s < FERRY_TIER_DONE; s++)
        assert_true(ferry_tier_transition_ok((enum ferry_tier_state)s,
                                             (enum ferry_tier_state)(s + 1)));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_PLANNED, FERRY_TIER_UPLOAD));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_VERIFY, FERRY_TIER_REPLACE));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_UPLOAD, FERRY_TIER_UPLOAD));
    /* a fresh FREEZE attempt */
    assert_true(ferry_tier_transition_ok(FERRY_TIER_FREEZE, FERRY_TIER_FREEZE));
    /* FAILED from anywhere unfinished; a new run only from DONE or FAILED */
    assert_true(ferry_tier_transition_ok(FERRY_TIER_CLEANUP, FERRY_TIER_FAILED));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_DONE, FERRY_TIER_FAILED));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_FAILED, FERRY_TIER_FAILED));
    assert_true(ferry_tier_transition_ok(FERRY_TIER_DONE, FERRY_TIER_PLANNED));
    assert_true(ferry_tier_transition_ok(FERRY_TIER_FAILED, FERRY_TIER_PLANNED));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_DONE, FERRY_TIER_FREEZE));
    assert_false(ferry_tier_transition_ok(FERRY_TIER_REPLACE, FERRY_TIER_PLANNED));
    assert_false(ferry_tier_transition_ok((enum ferry_tier_state)42, FERRY_TIER_FAILED));
}

static void test_ids(void **state)
{
    (void)state;
    char id[128];
    ferry_err err = {0};
    assert_int_equal(ferry_tier_job_id("node1", "events", "42-20261101-0", id, sizeof id, &err),
                     FERRY_OK);
    assert_string_equal(id, "tier.node1.events.42-20261101-0");
    assert_int_equal(ferry_tier_job_id("node 1", "events", "x", id, sizeof id, &err), FERRY_EINVAL);
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(ferry_tier_job_id("n", longname, "x", id, sizeof id, &err), FERRY_EINVAL);

    char f1[48], f2[48], f3[48];
    ferry_tier_freeze_name("tier.node1.events.42-20261101-0", 1, f1, sizeof f1);
    ferry_tier_freeze_name("tier.node1.events.42-20261101-0", 2, f2, sizeof f2);
    ferry_tier_freeze_name("tier.node2.events.42-20261101-0", 1, f3, sizeof f3);
    assert_string_not_equal(f1, f2);
    assert_string_not_equal(f1, f3);
    assert_int_equal(strncmp(f1, "ferry_tier_", 11), 0);
    assert_int_equal(strspn(f1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"),
                     strlen(f1));
    char again[48];
    ferry_tier_freeze_name("tier.node1.events.42-20261101-0", 1, again, sizeof again);
    assert_string_equal(f1, again);

    char st[128];
    assert_int_equal(ferry_tier_staging_name("events", st, sizeof st, &err), FERRY_OK);
    assert_string_equal(st, "events_ferry_staging");
    assert_int_equal(ferry_tier_staging_name(longname, st, sizeof st, &err), FERRY_EINVAL);
    assert_int_equal(ferry_tier_empty_name("events", st, sizeof st, &err), FERRY_OK);
    assert_string_equal(st, "events_ferry_empty");
    assert_int_equal(ferry_tier_empty_name(longname, st, sizeof st, &err), FERRY_EINVAL);
}

static void test_day_due(void **state)
{
    (void)state;
    /* 2026-11-10 12:00 UTC */
    struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 10, .tm_hour = 12};
    int64_t now = (int64_t)timegm(&tm);
    const uint64_t d3 = 3 * 86400;
    assert_true(ferry_tier_day_due(20261106, now, d3));  /* ended 11-07 00:00, 3.5 days ago */
    assert_false(ferry_tier_day_due(20261107, now, d3)); /* ended 11-08 00:00, 2.5 days ago */
    assert_true(ferry_tier_day_due(20261107, now, 2 * 86400));
    assert_false(ferry_tier_day_due(20261110, now, 0)); /* today is not over */
    assert_true(ferry_tier_day_due(20261109, now, 0));
    /* exactly at the boundary: due */
    assert_true(ferry_tier_day_due(20261107, now - 12 * 3600 + 86400, d3));
    assert_false(ferry_tier_day_due(20261107, now - 12 * 3600 + 86400 - 1, d3));
    /* invalid days */
    assert_false(ferry_tier_day_due(20261131, now, 0));
    assert_false(ferry_tier_day_due(20260230, now, 0));
    assert_false(ferry_tier_day_due(20261300, now, 0));
    assert_false(ferry_tier_day_due(0, now, 0));
    assert_true(ferry_tier_day_due(20240229, now, 0)); /* a leap day */
}

static void test_flow_statements_pass_guard(void **state)
{
    (void)state;
    const char *flow[] = {
        "SYSTEM STOP MERGES `default`.`events`",
        "SYSTEM START MERGES `default`.`events`",
        "CREATE TABLE IF NOT EXISTS `default`.`events_ferry_staging` AS `default`.`events`",
        "ALTER TABLE `default`.`events_ferry_staging` ATTACH PARTITION ID '42-20261101-0'",
        "ALTER TABLE `default`.`events` REPLACE PARTITION ID '42-20261101-0' FROM "
        "`default`.`events_ferry_staging`",
        "ALTER TABLE `default`.`events` ATTACH PARTITION ID '42-20261101-0' FROM "
        "`default`.`events_ferry_staging`, DETACH PART '42-20261101-0_1_1_0', DETACH PART "
        "'42-20261101-0_2_2_0'",
        "ALTER TABLE `default`.`events_ferry_staging` DETACH PARTITION ID '42-20261101-0'",
        "CREATE TABLE IF NOT EXISTS `default`.`events_ferry_empty` AS `default`.`events`",
        "ALTER TABLE `default`.`events_ferry_staging` REPLACE PARTITION ID '42-20261101-0' FROM "
        "`default`.`events_ferry_empty`, REPLACE PARTITION ID '42-20261102-0' FROM "
        "`default`.`events_ferry_empty` SETTINGS allow_replace_partition_from_empty_source = 1",
    };
    for (size_t i = 0; i < sizeof flow / sizeof flow[0]; i++)
        assert_int_equal(ferry_sql_guard_check(flow[i], NULL), FERRY_OK);
    /* and what the flow must never send is refused */
    assert_int_equal(ferry_sql_guard_check("ALTER TABLE `default`.`events_ferry_staging` DROP "
                                           "PARTITION ID '42-20261101-0'", NULL),
                     FERRY_EINVAL);
    assert_int_equal(ferry_sql_guard_check("TRUNCATE TABLE `default`.`events_ferry_staging`", NULL),
                     FERRY_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_day_due),
        cmocka_unit_test(test_flow_statements_pass_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

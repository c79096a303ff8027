/* Unit tests of `ferry rewrite`'s input checks (lib/flow/rewrite_expr.c): which expressions may
 * go into ferry's own INSERT ... SELECT, the --update split and the --days range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/rewrite.h"

static void test_accepted(void **state)
{
    (void)state;
    const char *good[] = {
        "user_id = 42",
        "user_id IN (1, 2, 3) AND page LIKE '/post/%'",
        "page = 'SELECT * FROM x; DROP TABLE y'", /* a string, not a statement */
        "`from` = 1 OR \"select\" = 2",           /* quoted identifiers */
        "lower(country) = 'fr' -- a comment; with a semicolon",
        "toDate(ts) BETWEEN '2026-11-01' AND '2026-11-05' AND NOT isNull(email)",
        "arrayExists(x -> x = 42, ids)",
        "if(a > 0, b, c) = 3",
        "user_id NOT IN (42)",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ferry_err err = {0};
        int rc = ferry_rewrite_expr_check("--delete-where", good[i], &err);
        if (rc)
            fail_msg("refused '%s': %s", good[i], err.msg);
    }
}

static void test_refused(void **state)
{
    (void)state;
    struct { const char *expr, *msg; } bad[] = {
        {"user_id = 1; DROP TABLE events", "one expression only"},
        {"user_id IN (SELECT id FROM users)", "no subquery"},
        {"user_id IN users", "reads another table"},
        {"user_id GLOBAL IN `users`", "reads another table"},
        {"dictGet('d', 'x', user_id) = 1", "reads beyond the table"},
        {"user_id = joinGet('j', 'v', 1)", "reads beyond the table"},
        {"length(file('/etc/passwd')) > 0", "reads beyond the table"},
        {"user_id = {id:UInt64}", "query parameter"},
        {"user_id = 1 SETTINGS max_threads = 1", "no subquery"},
        {"user_id = 1 FORMAT JSON", "no subquery"},
        {"(user_id = 1", "not closed"},
        {"user_id = 1)", "unbalanced"},
        {"", "empty"},
        {"  -- nothing\n", "only blanks"},
        {"page = 'unterminated", "not closed"},
        {"x = $$heredoc$$", "heredoc"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ferry_err err = {0};
        int rc = ferry_rewrite_expr_check("--delete-where", bad[i].expr, &err);
        if (rc != FERRY_EINVAL)
            fail_msg("accepted '%s'", bad[i].expr);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].expr, err.msg, bad[i].msg);
        if (!strstr(err.msg, "--delete-where"))
            fail_msg("'%s': message '%s' does not name the option", bad[i].expr, err.msg);
    }
    char big[700];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ferry_err err = {0};
    assert_int_equal(FERRY_EINVAL, ferry_rewrite_expr_check("--where", big, &err));
    assert_non_null(strstr(err.msg, "at most"));
}

static void test_update_parse(void **state)
{
    (void)state;
    char col[64], expr[512];
    ferry_err err = {0};
    assert_int_equal(FERRY_OK, ferry_rewrite_update_parse("page = '/erased'", col, sizeof col,
                                                          expr, sizeof expr, &err));
    assert_string_equal("page", col);
    assert_string_equal(" '/erased'", expr);
    assert_int_equal(FERRY_OK, ferry_rewrite_update_parse("`email`=concat('x', 'y')", col,
                                                          sizeof col, expr, sizeof expr, &err));
    assert_string_equal("email", col);
    assert_string_equal("concat('x', 'y')", expr);
    const char *bad[] = {"page", "= 1", "page == 1", "page = ", "`a b` = 1",
                         "page = (SELECT 1)", "page = 1; DROP TABLE t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ferry_rewrite_update_parse(bad[i], col, sizeof col, expr, sizeof expr, &err) !=
            FERRY_EINVAL)
            fail_msg("accepted --update '%s'", bad[i]);
}

static void test_days(void **state)
{
    (void)state;
    uint32_t a = 0, b = 0;
    ferry_err err = {0};
    assert_int_equal(FERRY_OK, ferry_rewrite_days_parse("20261101", &a, &b, &err));
    assert_int_equal(20261101, a);
    assert_int_equal(20261101, b);
    assert_int_equal(FERRY_OK, ferry_rewrite_days_parse("20261101..20261105", &a, &b, &err));
    assert_int_equal(20261105, b);
    const char *bad[] = {"2026-11-01", "20261105..20261101", "20261301", "2026110", "x..y",
                         "20261101..", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ferry_rewrite_days_parse(bad[i], &a, &b, &err) != FERRY_EINVAL)
            fail_msg("accepted --days '%s'", bad[i]);
}

static void test_states(void **state)
{
    (void)state;
    for (int s = 0; s < FERRY_REWRITE_STATE_COUNT; s++) {
        enum ferry_rewrite_state back;
        assert_int_equal(FERRY_OK, ferry_rewrite_state_parse(
                                       ferry_rewrite_state_name((enum ferry_rewrite_state)s),
                                       &back, NULL));
        assert_int_equal(s, back);
    }
    enum ferry_rewrite_state x;
    assert_int_equal(FERRY_EINVAL, ferry_rewrite_state_parse("UPLOAD", &x, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),     cmocka_unit_test(test_refused),
        cmocka_unit_test(test_update_parse), cmocka_unit_test(test_days),
        cmocka_unit_test(test_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

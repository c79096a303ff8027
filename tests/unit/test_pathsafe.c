/* Unit tests of path confinement: '..', symlinks, absolute paths, odd names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/pathsafe.h"

static void test_components(void **state)
{
    (void)state;
    assert_true(ferry_safe_component("20261101_1_5_2", false));
    assert_true(ferry_safe_component("checksums.txt", false));
    assert_false(ferry_safe_component("..", true));
    assert_false(ferry_safe_component(".", true));
    assert_false(ferry_safe_component("", true));
    assert_false(ferry_safe_component("a/b", true));
    assert_false(ferry_safe_component(".hidden", false));
    assert_true(ferry_safe_component(".hidden", true));
    assert_false(ferry_safe_component("sp ace", true));
    assert_true(ferry_safe_relpath("store/abc/0123-uuid/"));
    assert_false(ferry_safe_relpath("/store/abc"));
    assert_false(ferry_safe_relpath("store/../etc"));
    assert_false(ferry_safe_relpath("store//abc"));
}

static void test_roots(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/ferry-pathsafe.XXXXXX";
    char *base = mkdtemp(tmpl);
    assert_non_null(base);
    char data[512], outside[512], link[512], p[1024];
    snprintf(data, sizeof data, "%s/data", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    assert_int_equal(mkdir(data, 0700), 0);
    assert_int_equal(mkdir(outside, 0700), 0);
    snprintf(link, sizeof link, "%s/data/escape", base);
    assert_int_equal(symlink(outside, link), 0);

    ferry_roots roots = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_roots_add(&roots, data, &err), FERRY_OK);
    char *canon = NULL;

    snprintf(p, sizeof p, "%s/data/store/new/part", base);
    assert_int_equal(ferry_roots_check(&roots, p, &canon, &err), FERRY_OK);
    free(canon);

    snprintf(p, sizeof p, "%s/data/../outside/x", base);
    assert_int_equal(ferry_roots_check(&roots, p, &canon, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "outside the ClickHouse data directories"));

    snprintf(p, sizeof p, "%s/data/escape/x", base);
    assert_int_equal(ferry_roots_check(&roots, p, &canon, &err), FERRY_EINVAL);

    snprintf(p, sizeof p, "%s/data/missing/../../outside", base);
    assert_int_equal(ferry_roots_check(&roots, p, &canon, &err), FERRY_EINVAL);

    assert_int_equal(ferry_roots_check(&roots, "relative/path", &canon, &err), FERRY_EINVAL);
    assert_int_equal(ferry_roots_check(&roots, "/etc/passwd", &canon, &err), FERRY_EINVAL);

    /* A sibling whose name starts with the root's name is not inside it. */
    snprintf(p, sizeof p, "%s/data2", base);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(ferry_roots_check(&roots, p, &canon, &err), FERRY_EINVAL);

    ferry_roots_free(&roots);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_components),
                                       cmocka_unit_test(test_roots)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

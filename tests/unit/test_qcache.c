/* Unit tests for the read path's small LRU map (lib/router/qcache.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/qcache.h"

static void put(rt_qcache *c, const char *k, const char *v)
{
    rt_qcache_put(c, k, strlen(k), v);
}

/* The value for k, or "" when there is none (freed by the caller). */
static char *get(rt_qcache *c, const char *k)
{
    char *v = NULL;
    if (!rt_qcache_get(c, k, strlen(k), &v)) {
        assert_null(v);
        return strdup("");
    }
    return v;
}

static void assert_value(rt_qcache *c, const char *k, const char *want)
{
    char *v = get(c, k);
    assert_string_equal(v, want);
    free(v);
}

static void test_get_put_replace_drop(void **state)
{
    (void)state;
    rt_qcache *c = rt_qcache_new(4);
    assert_non_null(c);
    assert_value(c, "a", "");
    put(c, "a", "1");
    put(c, "b", "2");
    assert_value(c, "a", "1");
    assert_value(c, "b", "2");
    put(c, "a", "3"); /* same key: replaced, not added twice */
    assert_value(c, "a", "3");
    rt_qcache_drop(c, "a", 1);
    assert_value(c, "a", "");
    assert_value(c, "b", "2");
    /* keys are compared whole, including bytes after a NUL-free prefix */
    put(c, "key\x1f" "1", "x");
    assert_value(c, "key\x1f" "2", "");
    assert_value(c, "key", "");
    unsigned long long hits, lookups;
    rt_qcache_stats(c, &hits, &lookups);
    assert_int_equal(lookups, 8);
    assert_int_equal(hits, 4);
    rt_qcache_free(c);
}

static void test_least_recently_used_goes(void **state)
{
    (void)state;
    rt_qcache *c = rt_qcache_new(3);
    put(c, "a", "1");
    put(c, "b", "2");
    put(c, "c", "3");
    assert_value(c, "a", "1"); /* a is now the most recently used; b the least */
    put(c, "d", "4");
    assert_value(c, "b", "");
    assert_value(c, "a", "1");
    assert_value(c, "c", "3");
    assert_value(c, "d", "4");
    /* many more keys than room: always the last 3 */
    char k[16], v[16];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "k%d", i);
        snprintf(v, sizeof v, "v%d", i);
        put(c, k, v);
    }
    assert_value(c, "k99", "v99");
    assert_value(c, "k98", "v98");
    assert_value(c, "k97", "v97");
    assert_value(c, "k96", "");
    rt_qcache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_put_replace_drop),
        cmocka_unit_test(test_least_recently_used_goes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

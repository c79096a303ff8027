/* The map from borrowed strings to values (include/ferry/strmap.h): an empty map finds nothing,
 * added keys are found with their values and others are not, through several doublings, keys
 * are compared by content (not by address), the empty string is a key like any other, and a
 * freed map is empty and usable again. Links the pure core only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ferry/err.h"
#include "ferry/strmap.h"

static void test_empty(void **state)
{
    (void)state;
    ferry_strmap m = FERRY_STRMAP_INIT;
    uint64_t v = 7;
    assert_false(ferry_strmap_get(&m, "a", &v));
    assert_false(ferry_strmap_get(&m, "", NULL));
    assert_int_equal(v, 7);
    assert_int_equal(ferry_strmap_count(&m), 0);
    ferry_strmap_free(&m);
    assert_int_equal(ferry_strmap_count(&m), 0);
}

#define N 5000

static void test_many(void **state)
{
    (void)state;
    static char keys[N][16];
    ferry_strmap m = FERRY_STRMAP_INIT;
    for (size_t i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "shard-%zu", i);
        assert_false(ferry_strmap_get(&m, keys[i], NULL));
        assert_int_equal(ferry_strmap_add(&m, keys[i], (uint64_t)i * 3 + ((uint64_t)1 << 40)),
                         FERRY_OK);
        assert_int_equal(ferry_strmap_count(&m), i + 1);
        assert_true(2 * m.n <= m.cap); /* at most half full */
    }
    for (size_t i = 0; i < N; i++) {
        char copy[16]; /* found by content, not by the address added */
        memcpy(copy, keys[i], sizeof copy);
        uint64_t v = 0;
        assert_true(ferry_strmap_get(&m, copy, &v));
        assert_int_equal(v, (uint64_t)i * 3 + ((uint64_t)1 << 40));
    }
    assert_false(ferry_strmap_get(&m, "shard-", NULL));
    assert_false(ferry_strmap_get(&m, "shard-5000", NULL));
    assert_false(ferry_strmap_get(&m, "", NULL));
    ferry_strmap_free(&m);
    assert_false(ferry_strmap_get(&m, keys[0], NULL));
    /* usable again after free */
    assert_int_equal(ferry_strmap_add(&m, keys[1], 9), FERRY_OK);
    uint64_t v = 0;
    assert_true(ferry_strmap_get(&m, keys[1], &v));
    assert_int_equal(v, 9);
    assert_false(ferry_strmap_get(&m, keys[0], NULL));
    ferry_strmap_free(&m);
}

static void test_empty_key_and_prefixes(void **state)
{
    (void)state;
    ferry_strmap m = FERRY_STRMAP_INIT;
    assert_int_equal(ferry_strmap_add(&m, "", 1), FERRY_OK);
    assert_int_equal(ferry_strmap_add(&m, "a", 2), FERRY_OK);
    assert_int_equal(ferry_strmap_add(&m, "ab", 3), FERRY_OK);
    assert_int_equal(ferry_strmap_add(&m, "a,b", 4), FERRY_OK);
    uint64_t v = 0;
    assert_true(ferry_strmap_get(&m, "", &v));
    assert_int_equal(v, 1);
    assert_true(ferry_strmap_get(&m, "a", &v));
    assert_int_equal(v, 2);
    assert_true(ferry_strmap_get(&m, "ab", &v));
    assert_int_equal(v, 3);
    assert_true(ferry_strmap_get(&m, "a,b", &v));
    assert_int_equal(v, 4);
    assert_false(ferry_strmap_get(&m, "b", NULL));
    assert_false(ferry_strmap_get(&m, "abc", NULL));
    assert_int_equal(ferry_strmap_count(&m), 4);
    ferry_strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_empty_key_and_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

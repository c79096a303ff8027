/* Lists of shard names as arrays (include/ferry/shard_set.h): the text the catalog stores parses
 * into the array and formats back to the same bytes; each way a text is not a list is refused
 * with a message saying which, and the catalog's lenient reading of its documents; has, add,
 * remove, equal and same. Links the pure core only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ferry/shard_set.h"

static void round_trip(const char *text, size_t n)
{
    ferry_shard_set s;
    ferry_err err = {0};
    char out[FERRY_SHARDS_TEXT_MAX];
    assert_int_equal(ferry_shard_set_parse(&s, text, &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_count(&s), n);
    assert_int_equal(ferry_shard_set_format(&s, out, sizeof out), strlen(text));
    assert_string_equal(out, text);
    assert_string_equal(ferry_shard_set_str(&s, out), text);
}

static void refused(const char *text, const char *why)
{
    ferry_shard_set s;
    ferry_err err = {0};
    assert_int_equal(ferry_shard_set_parse(&s, text, &err), FERRY_EINVAL);
    assert_int_equal(ferry_shard_set_count(&s), 0);
    if (!strstr(err.msg, why))
        fail_msg("'%s': message '%s' does not say '%s'", text, err.msg, why);
}

static void test_parse_format(void **state)
{
    (void)state;
    round_trip("", 0);
    round_trip("node1", 1);
    round_trip("node2,node1", 2);
    round_trip("a,ab,abc", 3);
    /* the most names, each the longest name */
    char text[FERRY_SHARDS_TEXT_MAX], name[FERRY_NAME_MAX];
    size_t len = 0;
    for (int i = 0; i < FERRY_SHARDS_MAX; i++) {
        memset(name, 'a' + i, FERRY_NAME_MAX - 1);
        name[FERRY_NAME_MAX - 1] = '\0';
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i ? "," : "", name);
    }
    assert_int_equal(len, FERRY_SHARDS_TEXT_MAX - 1);
    round_trip(text, FERRY_SHARDS_MAX);

    /* the length given, not a NUL, ends the text */
    ferry_shard_set s;
    ferry_err err = {0};
    assert_int_equal(ferry_shard_set_parse_n(&s, "x,y,zzz", 3, &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_count(&s), 2);
    assert_string_equal(ferry_shard_set_at(&s, 1), "y");
    assert_int_equal(ferry_shard_set_parse(&s, NULL, &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_count(&s), 0);

    /* a short buffer: the length of the whole, as much as fits */
    char small[6];
    assert_int_equal(ferry_shard_set_parse(&s, "node1,node2", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_format(&s, small, sizeof small), 11);
    assert_string_equal(small, "node1");
    assert_int_equal(ferry_shard_set_format(&s, small, 1), 11);
    assert_string_equal(small, "");
}

static void test_refused(void **state)
{
    (void)state;
    refused(",a", "item 1 is empty");
    refused("a,,b", "item 2 is empty");
    refused("a,", "item 2 is empty");
    refused(",", "item 1 is empty");
    refused("a, b", "item 2 is not a valid name");
    refused("a,..", "item 2 is not a valid name");
    refused("a,b,a", "item 3 (a) is listed twice");
    char text[FERRY_SHARDS_TEXT_MAX + 64], name[FERRY_NAME_MAX + 1];
    memset(name, 'n', FERRY_NAME_MAX);
    name[FERRY_NAME_MAX] = '\0';
    snprintf(text, sizeof text, "a,%s", name);
    refused(text, "item 2 is longer than 127 bytes");
    size_t len = 0;
    for (int i = 0; i <= FERRY_SHARDS_MAX; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%ss%d", i ? "," : "", i);
    refused(text, "more than 16 names");
    /* the message quotes the list */
    ferry_shard_set s;
    ferry_err err = {0};
    assert_int_equal(ferry_shard_set_parse(&s, "a,,b", &err), FERRY_EINVAL);
    assert_string_equal(err.msg, "shard list 'a,,b': item 2 is empty");
}

/* The catalog's documents read as the router reads them: blanks around items and empty items
 * do not count; the rest of the rule holds. */
static void test_stored(void **state)
{
    (void)state;
    ferry_shard_set s;
    ferry_err err = {0};
    char out[FERRY_SHARDS_TEXT_MAX];
    const char *text = " n4 , ,n5,";
    assert_int_equal(ferry_shard_set_parse_stored(&s, text, strlen(text), &err), FERRY_OK);
    assert_string_equal(ferry_shard_set_str(&s, out), "n4,n5");
    assert_int_equal(ferry_shard_set_parse_stored(&s, ",,\t", 3, &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_count(&s), 0);
    assert_int_equal(ferry_shard_set_parse_stored(&s, "a, a", 4, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "item 2 (a) is listed twice"));
    assert_int_equal(ferry_shard_set_parse_stored(&s, "a,b c", 5, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "item 2 is not a valid name"));
    /* the strict parse takes none of these */
    assert_int_equal(ferry_shard_set_parse(&s, " n4", &err), FERRY_EINVAL);
}

/* The router's reading of the stored text (ferry_shard_text_next): the same items as
 * ferry_shard_set_parse_stored, in place. */
static void test_stored_text(void **state)
{
    (void)state;
    const char *text = " n4 ,\t,n5,x y";
    const char *want[] = {"n4", "", "n5", "x y"};
    size_t at = 0, n, k = 0;
    const char *item;
    while (ferry_shard_text_next(text, strlen(text), &at, &item, &n)) {
        assert_true(k < 4);
        assert_int_equal(n, strlen(want[k]));
        assert_memory_equal(item, want[k], n);
        k++;
    }
    assert_int_equal(k, 4);
    at = 0;
    assert_false(ferry_shard_text_next("", 0, &at, &item, &n));
    /* len bounds the text: no NUL needed */
    at = 0;
    assert_true(ferry_shard_text_next("n1,n2,n3", 5, &at, &item, &n));
    assert_true(ferry_shard_text_next("n1,n2,n3", 5, &at, &item, &n));
    assert_int_equal(n, 2);
    assert_memory_equal(item, "n2", 2);
    assert_false(ferry_shard_text_next("n1,n2,n3", 5, &at, &item, &n));
}

static void test_has_add_remove(void **state)
{
    (void)state;
    ferry_shard_set s = {0}, t;
    ferry_err err = {0};
    assert_false(ferry_shard_set_has(&s, "a"));
    assert_int_equal(ferry_shard_set_add(&s, "ab", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_add(&s, "abc", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_add(&s, "ab", &err), FERRY_OK); /* there: unchanged */
    assert_int_equal(ferry_shard_set_count(&s), 2);
    assert_false(ferry_shard_set_has(&s, "a")); /* names compare whole */
    assert_true(ferry_shard_set_has(&s, "abc"));
    assert_int_equal(ferry_shard_set_find(&s, "abc"), 1);
    assert_int_equal(ferry_shard_set_find(&s, "ABC"), -1);
    assert_int_equal(ferry_shard_set_add(&s, "a b", &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "not a valid shard name"));
    assert_int_equal(ferry_shard_set_add(&s, "", &err), FERRY_EINVAL);
    assert_int_equal(ferry_shard_set_count(&s), 2);

    assert_int_equal(ferry_shard_set_parse(&t, "a,b,c,d", &err), FERRY_OK);
    assert_true(ferry_shard_set_remove(&t, "b"));
    assert_false(ferry_shard_set_remove(&t, "b"));
    char out[FERRY_SHARDS_TEXT_MAX];
    assert_string_equal(ferry_shard_set_str(&t, out), "a,c,d");
    assert_true(ferry_shard_set_remove(&t, "d"));
    assert_true(ferry_shard_set_remove(&t, "a"));
    assert_string_equal(ferry_shard_set_str(&t, out), "c");
    assert_true(ferry_shard_set_remove(&t, "c"));
    assert_int_equal(ferry_shard_set_count(&t), 0);
    assert_string_equal(ferry_shard_set_str(&t, out), "");

    /* full: the add is refused and the list stays */
    ferry_shard_set_clear(&t);
    for (int i = 0; i < FERRY_SHARDS_MAX; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        assert_int_equal(ferry_shard_set_add(&t, name, &err), FERRY_OK);
    }
    assert_int_equal(ferry_shard_set_add(&t, "s0", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_add(&t, "more", &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "cannot add shard more"));
    assert_int_equal(ferry_shard_set_count(&t), FERRY_SHARDS_MAX);
}

static void test_equal_same(void **state)
{
    (void)state;
    ferry_shard_set a, b, c, d, e;
    ferry_err err = {0};
    assert_int_equal(ferry_shard_set_parse(&a, "x,y", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_parse(&b, "x,y", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_parse(&c, "y,x", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_parse(&d, "x,y,z", &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_parse(&e, "x,z", &err), FERRY_OK);
    assert_true(ferry_shard_set_equal(&a, &b));
    assert_false(ferry_shard_set_equal(&a, &c));
    assert_true(ferry_shard_set_same(&a, &c));
    assert_false(ferry_shard_set_same(&a, &d));
    assert_false(ferry_shard_set_same(&d, &a));
    assert_false(ferry_shard_set_same(&a, &e));
    assert_false(ferry_shard_set_equal(&a, &e));
    /* a copy is a plain assignment */
    ferry_shard_set f = d;
    assert_true(ferry_shard_set_equal(&f, &d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_stored),
        cmocka_unit_test(test_stored_text),
        cmocka_unit_test(test_has_add_remove),
        cmocka_unit_test(test_equal_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

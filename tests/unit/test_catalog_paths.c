/* The catalog's key order (cat_path_cmp: segment by segment, numbers as numbers), which every
 * listing is sorted by: the one-pass comparison gives the sign of the plain segment-by-segment
 * definition on random paths made of the characters keys use, digits-only segments of every
 * length, prefixes and deeper paths, and the cases worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "catalog/catalog_int.h"

/* The definition: segments compared in turn; two all-digit segments of different lengths by
 * length; otherwise bytewise over the shorter, then the shorter first; a path that ends first is
 * smaller. */
static int reference(const char *a, const char *b)
{
    while (*a || *b) {
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        bool na = la > 0 && strspn(a, "0123456789") >= la;
        bool nb = lb > 0 && strspn(b, "0123456789") >= lb;
        int d;
        if (na && nb && la != lb)
            d = la < lb ? -1 : 1;
        else {
            size_t m = la < lb ? la : lb;
            d = memcmp(a, b, m);
            if (!d && la != lb)
                d = la < lb ? -1 : 1;
        }
        if (d)
            return d < 0 ? -1 : 1;
        a += la;
        b += lb;
        if (*a == '/')
            a++;
        if (*b == '/')
            b++;
    }
    return 0;
}

static int sign(int x)
{
    return (x > 0) - (x < 0);
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void random_path(char *out, size_t size)
{
    static const char chars[] = "0123456789ab-._Z";
    size_t n = 0;
    int segs = 1 + (int)(rnd() % 4);
    for (int s = 0; s < segs && n + 12 < size; s++) {
        if (s)
            out[n++] = '/';
        bool digits = rnd() % 2;
        int len = 1 + (int)(rnd() % 4); /* keys have no empty segment */
        for (int k = 0; k < len; k++)
            out[n++] = digits ? (char)('0' + rnd() % 10) : chars[rnd() % (sizeof chars - 1)];
    }
    out[n] = '\0';
}

static void test_matches_definition(void **state)
{
    (void)state;
    char a[64], b[64];
    for (int i = 0; i < 2000000; i++) {
        random_path(a, sizeof a);
        if (rnd() % 3 == 0) { /* b shares a prefix with a */
            memcpy(b, a, sizeof b);
            size_t cut = strlen(a) ? rnd() % (strlen(a) + 1) : 0;
            random_path(b + cut, sizeof b - cut);
        } else {
            random_path(b, sizeof b);
        }
        if (sign(cat_path_cmp(a, b)) != sign(reference(a, b)))
            fail_msg("'%s' vs '%s': %d, definition %d", a, b, cat_path_cmp(a, b),
                     reference(a, b));
    }
}

static void test_by_hand(void **state)
{
    (void)state;
    assert_true(cat_path_cmp("routes/t9/2", "routes/t9/10") < 0);
    assert_true(cat_path_cmp("routes/9/1", "routes/10/1") < 0);
    assert_true(cat_path_cmp("slices/a", "slices/a-b") < 0); /* '-' sorts before '/' as bytes */
    assert_true(cat_path_cmp("slices/a/1", "slices/a-b/0") < 0);
    assert_true(cat_path_cmp("slices/a", "slices/a/0") < 0);
    assert_true(cat_path_cmp("x/b10", "x/b9") < 0); /* not all digits: bytewise */
    assert_int_equal(cat_path_cmp("a/1/b", "a/1/b"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_definition),
        cmocka_unit_test(test_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

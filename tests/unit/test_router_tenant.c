/* The router's tenant lookup (lib/router/routing.c, rt_find_tenant) with values from rows: not
 * NUL-terminated, possibly holding NUL bytes ("acme\0x" from JSON's \u0000), longer or shorter
 * than a stored name. Only the exact bytes match, and nothing past either end is read (each
 * probe sits in a buffer of exactly its length, so the sanitizer build would catch it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_int.h"

static const rt_tenant *probe(const rt_snapshot *s, const char *bytes, size_t len)
{
    char *b = malloc(len ? len : 1);
    memcpy(b, bytes, len);
    const rt_tenant *t = rt_find_tenant(s, b, len);
    free(b);
    return t;
}

static void test_exact_bytes_only(void **state)
{
    (void)state;
    char *names[] = {"a", "acme", "acme2", "acmf", "b"}; /* sorted as the router keeps them */
    rt_tenant ts[5];
    memset(ts, 0, sizeof ts);
    for (int i = 0; i < 5; i++)
        ts[i].name = strdup(names[i]);
    rt_snapshot s = {.n_tenants = 5, .tenants = ts};
    for (int i = 0; i < 5; i++) {
        const rt_tenant *t = probe(&s, names[i], strlen(names[i]));
        assert_non_null(t);
        assert_string_equal(t->name, names[i]);
    }
    assert_null(probe(&s, "acme\0x", 6));
    assert_null(probe(&s, "acme\0", 5));
    assert_null(probe(&s, "\0", 1));
    assert_null(probe(&s, "", 0));
    assert_null(probe(&s, "acm", 3));
    assert_null(probe(&s, "acmex", 5));
    assert_null(probe(&s, "acme22", 6));
    assert_null(probe(&s, "c", 1));
    rt_snapshot empty = {0};
    assert_null(probe(&empty, "acme", 4));
    for (int i = 0; i < 5; i++)
        free(ts[i].name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exact_bytes_only)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

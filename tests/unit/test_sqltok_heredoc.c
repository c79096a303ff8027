/* The tokenizer's heredocs ($tag$ ... $tag$, lib/sql/tokenize.c) found through its index of tags
 * give the answers of ClickHouse's search (from each '$', the next occurrence of its tag), on
 * random texts; and a text of many tags that never close is tokenized in linear time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/sqltok.h"

/* ClickHouse's rule, searched the slow way: the end of the heredoc opened at s[0], or 0. */
static size_t naive_heredoc(const char *s, size_t len)
{
    const char *close = memchr(s + 1, '$', len - 1);
    if (!close)
        return 0;
    size_t tl = (size_t)(close - s) + 1;
    for (size_t at = tl; at + tl <= len; at++)
        if (!memcmp(s + at, s, tl))
            return at + tl;
    return 0;
}

static void test_random_heredocs(void **state)
{
    (void)state;
    const char alphabet[] = "$$$ab ";
    char s[40];
    srand(7);
    for (int round = 0; round < 200000; round++) {
        size_t len = 2 + (size_t)rand() % 30;
        s[0] = '$';
        for (size_t i = 1; i < len; i++)
            s[i] = alphabet[rand() % (int)(sizeof alphabet - 1)];
        ferry_toks t = {0};
        ferry_err err = {0};
        int rc = ferry_sql_tokenize(s, len, &t, NULL, &err);
        assert_int_equal(rc, FERRY_OK);
        size_t want = naive_heredoc(s, len);
        if (want) {
            if (t.v[0].kind != FERRY_TOK_HEREDOC || t.v[0].len != want)
                fail_msg("'%.*s': heredoc of %zu bytes expected, got kind %d len %zu", (int)len,
                         s, want, t.v[0].kind, t.v[0].len);
        } else if (t.v[0].kind == FERRY_TOK_HEREDOC) {
            fail_msg("'%.*s': no heredoc expected", (int)len, s);
        }
        /* and every later heredoc token is what the search finds from its start */
        for (size_t k = 1; k < t.n; k++)
            if (t.v[k].kind == FERRY_TOK_HEREDOC)
                assert_int_equal(t.v[k].len, naive_heredoc(s + t.v[k].start,
                                                           len - t.v[k].start));
        ferry_toks_free(&t);
    }
}

static void test_linear_tags(void **state)
{
    (void)state;
    size_t big = 256u << 10;
    char *s = malloc(big + 32);
    size_t n = 0;
    for (int i = 0; n + 16 < big; i++)
        n += (size_t)sprintf(s + n, "$%d$+", i);
    ferry_toks t = {0};
    ferry_err err = {0};
    clock_t c0 = clock();
    assert_int_equal(ferry_sql_tokenize(s, n, &t, NULL, &err), FERRY_OK);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("256 KiB of distinct unclosed tags: %.3f s CPU (the search from each '$': 16 s)\n",
           secs);
    assert_true(secs < 2.0);
    ferry_toks_free(&t);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_heredocs),
        cmocka_unit_test(test_linear_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

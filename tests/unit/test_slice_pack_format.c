/* Unit tests of a slice pack's text (lib/catalog/slice_pack_format.c): every kind of row back
 * field for field (a slice with its route, a slice alone, a route alone, a row naming another
 * tenant than its path), the rows the format refuses instead of writing, and the damaged texts
 * the reader refuses with the tenant, the line and what rebuilds it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog_int.h"

#define REBUILD "run the rebuild"

/* What the reader handed over: copies of up to 8 rows. */
typedef struct got {
    size_t n;
    char tenant[8][64], placement[8][64], shards[8][64];
    bool has_placement[8], has_shards[8];
    ferry_slice_row row[8];
    int stop_at; /* > 0: fn fails at that row (1-based) */
} got;

static int collect(const ferry_slice_row *r, void *arg, ferry_err *err)
{
    got *g = arg;
    if (g->stop_at && (int)g->n + 1 == g->stop_at)
        return ferry_err_set(err, FERRY_ECONFLICT, "stopped by the caller");
    assert_true(g->n < 8);
    size_t i = g->n++;
    g->row[i] = *r;
    snprintf(g->tenant[i], sizeof g->tenant[i], "%s", r->tenant);
    g->has_placement[i] = r->placement != NULL;
    g->has_shards[i] = r->shards != NULL;
    snprintf(g->placement[i], sizeof g->placement[i], "%s", r->placement ? r->placement : "");
    snprintf(g->shards[i], sizeof g->shards[i], "%s", r->shards ? r->shards : "");
    return FERRY_OK;
}

static void pack(cat_pack_buf *b, const ferry_slice_row *r)
{
    ferry_err err = {0};
    assert_int_equal(cat_pack_row(r, b, &err), FERRY_OK);
}

static void test_every_kind_of_row_comes_back(void **state)
{
    (void)state;
    const ferry_slice_row rows[] = {
        {.tenant = "acme", .split = 0, .placement = "s1,s2", .bytes = 123456789012ULL,
         .rows = 42, .version = 7, .shards = "s1,s2", .route_version = 3},
        {.tenant = "acme", .split = 10, .placement = "s3", .bytes = 0, .rows = 0, .version = 0,
         .shards = NULL, .route_version = -1},
        {.tenant = "acme", .split = 2, .placement = NULL, .version = -1, .shards = "s4",
         .route_version = 0},
        {.tenant = "other", .split = 4294967295u, .placement = "s5", .bytes = INT64_MAX,
         .rows = INT64_MAX, .version = INT64_MAX, .shards = "", .route_version = 1},
    };
    cat_pack_buf b = {.tenant = "acme"};
    for (size_t i = 0; i < 4; i++)
        pack(&b, &rows[i]);
    assert_false(b.refused);
    got g = {0};
    cat_unpack u;
    ferry_err err = {0};
    assert_int_equal(cat_unpack_rows("acme", b.s, b.len, &u, collect, &g, REBUILD, &err),
                     FERRY_OK);
    assert_int_equal(g.n, 4);
    for (size_t i = 0; i < 4; i++) {
        const ferry_slice_row *w = &rows[i], *r = &g.row[i];
        assert_string_equal(g.tenant[i], w->tenant);
        assert_int_equal(r->split, w->split);
        assert_int_equal(r->version, w->version);
        assert_int_equal(r->route_version, w->route_version);
        assert_int_equal(g.has_placement[i], w->version >= 0);
        assert_int_equal(g.has_shards[i], w->route_version >= 0);
        if (w->version >= 0) {
            assert_string_equal(g.placement[i], w->placement);
            assert_int_equal(r->bytes, w->bytes);
            assert_int_equal(r->rows, w->rows);
        } else {
            assert_int_equal(r->bytes, 0);
            assert_int_equal(r->rows, 0);
        }
        if (w->route_version >= 0)
            assert_string_equal(g.shards[i], w->shards);
    }
    /* the path's tenant is not repeated; another one is */
    assert_non_null(strstr(b.s, "\t\n"));
    assert_non_null(strstr(b.s, "\tother\n"));
    free(b.s);
}

static void test_rows_the_format_cannot_carry_are_refused(void **state)
{
    (void)state;
    const ferry_slice_row bad[] = {
        {.tenant = "acme", .split = 1, .placement = "s1\ts2", .version = 0, .shards = "s1",
         .route_version = 0},
        {.tenant = "acme", .split = 1, .placement = "s1", .version = 0, .shards = "s1\n",
         .route_version = 0},
        {.tenant = "ac\x01me", .split = 1, .placement = "s1", .version = 0, .shards = "s1",
         .route_version = 0},
        {.tenant = "", .split = 1, .placement = "s1", .version = 0, .shards = "s1",
         .route_version = 0},
        {.tenant = "acme", .split = 1, .placement = "s1", .bytes = (uint64_t)INT64_MAX + 1,
         .version = 0, .shards = "s1", .route_version = 0},
        {.tenant = "acme", .split = 1, .placement = NULL, .version = -1, .shards = NULL,
         .route_version = -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cat_pack_buf b = {.tenant = "acme"};
        pack(&b, &bad[i]);
        if (!b.refused)
            fail_msg("row %zu was packed: %.*s", i, (int)b.len, b.s ? b.s : "");
        assert_int_equal(b.len, 0);
        free(b.s);
    }
}

static void damaged(const char *text, const char *want)
{
    got g = {0};
    cat_unpack u;
    ferry_err err = {0};
    int rc = cat_unpack_rows("acme", text, strlen(text), &u, collect, &g, REBUILD, &err);
    if (rc != FERRY_EIO)
        fail_msg("expected FERRY_EIO, got %d for \"%s\"", rc, text);
    if (!strstr(err.msg, want) || !strstr(err.msg, "tenant acme") || !strstr(err.msg, REBUILD))
        fail_msg("message '%s' lacks '%s', the tenant or the rebuild", err.msg, want);
}

static void test_damaged_packs_are_refused_with_their_line(void **state)
{
    (void)state;
    const char *good = "1\t0\t5\t6\ts1\t0\ts1\t\n";
    damaged("1\t0\t5\n", "line 1");                                   /* cut short */
    damaged("1\t0\t5\t6\ts1\t0\ts1\t", "line 1");                     /* no newline */
    damaged("1\t-2\t5\t6\ts1\t0\ts1\t\n", "line 1");                  /* only -1 is negative */
    damaged("4294967296\t0\t5\t6\ts1\t0\ts1\t\n", "line 1");          /* split past 32 bits */
    damaged("1\t0\t9223372036854775808\t6\ts1\t0\ts1\t\n", "line 1"); /* bytes past INT64_MAX */
    damaged("1\t-1\t0\t0\t\t-1\t\t\n", "line 1");                     /* neither side */
    damaged("1\t0\t5\t6\ts1\t0\ts1\textra\tfield\n", "line 1");      /* a tab in the tenant */
    damaged("1\t0\t5a6\ts1\t0\ts1\t\n", "line 1");                  /* a letter in a number */
    char two[128];
    snprintf(two, sizeof two, "%s1\tx\t5\t6\ts1\t0\ts1\t\n", good);
    damaged(two, "line 2");
    /* an empty pack is no rows */
    got g = {0};
    cat_unpack u;
    ferry_err err = {0};
    assert_int_equal(cat_unpack_rows("acme", "", 0, &u, collect, &g, REBUILD, &err), FERRY_OK);
    assert_int_equal(g.n, 0);
}

static void test_the_callers_error_stops_the_rows(void **state)
{
    (void)state;
    const char *text = "1\t0\t5\t6\ts1\t0\ts1\t\n2\t0\t5\t6\ts1\t0\ts1\t\n3\t0\t5\t6\ts1\t0\ts1\t\n";
    got g = {.stop_at = 2};
    cat_unpack u;
    ferry_err err = {0};
    assert_int_equal(cat_unpack_rows("acme", text, strlen(text), &u, collect, &g, REBUILD, &err),
                     FERRY_ECONFLICT);
    assert_int_equal(g.n, 1);
    assert_string_equal(err.msg, "stopped by the caller");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_of_row_comes_back),
        cmocka_unit_test(test_rows_the_format_cannot_carry_are_refused),
        cmocka_unit_test(test_damaged_packs_are_refused_with_their_line),
        cmocka_unit_test(test_the_callers_error_stops_the_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

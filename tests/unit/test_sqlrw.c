/* Unit tests for the SQL tokenizer, analysis, per-server rewrite and read plans
 * (include/ferry/sqltok.h, include/ferry/sqlrw.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/sqlrw.h"
#include "ferry/sqltok.h"
#include "sql/sql_int.h"

/* ---- fixtures: two managed tables, one server serving acme 0, acme 2, beta 1 ---- */

static const ferry_sql_table tables[] = {
    {"events", "default", FERRY_LAYOUT_SHARED, "tenant", "split", NULL, false},
    {"logs", NULL, FERRY_LAYOUT_PER_TENANT, NULL, "split", "logs_{tenant}", false},
};
#define N_TABLES 2
static const ferry_sql_slice node_slices[] = {{"acme", 0}, {"beta", 1}, {"acme", 2}};
static const ferry_sql_served node_served[N_TABLES] = {{node_slices, 3}, {node_slices, 3}};
static const char *const node_locals[N_TABLES] = {"events_local", "logs_{tenant}_local"};
static const ferry_sql_target node = {node_served, node_locals, false, NULL, 0, NULL};

/* Rewrites sql for the node target; returns the SQL (caller frees) or NULL when the analysis
 * did not understand it. */
static char *rewrite_for(const char *sql, const ferry_sql_target *target, bool *skip)
{
    ferry_sql_analysis a;
    ferry_err err = {0};
    int rc = ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err);
    assert_int_equal(rc, FERRY_OK);
    char *out = NULL;
    if (a.understood) {
        ferry_sql_rewritten rw;
        assert_int_equal(ferry_sql_rewrite(&a, tables, target, &rw, &err), FERRY_OK);
        out = rw.sql;
        if (skip)
            *skip = rw.skip;
    } else {
        assert_int_equal(ferry_sql_rewrite(&a, tables, target, &(ferry_sql_rewritten){0}, &err),
                         FERRY_EUNSUPPORTED);
    }
    ferry_sql_analysis_free(&a);
    return out;
}

/* ---- tokenizer ---- */

static void assert_covers(const char *sql)
{
    ferry_toks t = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_sql_tokenize(sql, strlen(sql), &t, NULL, &err), FERRY_OK);
    size_t pos = 0;
    for (size_t i = 0; i < t.n; i++) {
        assert_int_equal(t.v[i].start, pos);
        assert_true(t.v[i].len > 0);
        pos += t.v[i].len;
    }
    assert_int_equal(pos, strlen(sql));
    ferry_toks_free(&t);
}

/* The kinds of the significant tokens of sql, one letter each. */
static void sig_kinds(const char *sql, char *out)
{
    static const char letters[] = "wcWQSNHpPbBkKm;.oE";
    ferry_toks t = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_sql_tokenize(sql, strlen(sql), &t, NULL, &err), FERRY_OK);
    size_t n = 0;
    for (size_t i = 0; i < t.n; i++)
        if (ferry_tok_significant(&t.v[i]))
            out[n++] = letters[t.v[i].kind];
    out[n] = 0;
    ferry_toks_free(&t);
}

static void test_tokens_cover_input(void **state)
{
    (void)state;
    assert_covers("");
    assert_covers("SELECT 1");
    assert_covers("SELECT 'a''b', \"c\"\"d\", `e\\`f` -- x\n/* a /* b */ c */ # y\n#!z");
    assert_covers("SELECT 0x1F, 0b101, 1e5, 1e-5, 1_000_000, .5, 1.5e+3, 0x1.8p3, 1abc, t.1.2");
    assert_covers("SELECT $$a$b$$, $t$ x $t$, $, $1, x'0A', b'01', \\G, a->b, a::Int8 || 'x'");
    assert_covers("SELECT \xc3\xa9, \xe2\x80\x8b, ! , ^");
}

static void test_token_kinds(void **state)
{
    (void)state;
    char k[64];
    sig_kinds("SELECT x.1.2 FROM t", k);
    assert_string_equal(k, "WW.N.NWW"); /* tuple access: x . 1 . 2 */
    sig_kinds("SELECT 1.5, .5, 1e5, 0x1F, 1_000, 1abc", k);
    assert_string_equal(k, "WNmNmNmNmNmW");
    sig_kinds("SELECT 'it''s', 'a\\'b', x'0A'", k);
    assert_string_equal(k, "WSmSmS");
    sig_kinds("SELECT $$ FROM t $$, $x$ 'unclosed $x$", k);
    assert_string_equal(k, "WHmH");
    sig_kinds("a # comment\nb #!shebang\nc #d", k);
    assert_string_equal(k, "WWWEW"); /* '#d' is an error token, like ClickHouse's lexer */
    sig_kinds("a -- c\nb // c\n/* x /* y */ z */ c", k);
    assert_string_equal(k, "WWW");
    sig_kinds("a == b != c <> d <= e >= f -> g :: h || i", k);
    assert_string_equal(k, "WoWoWoWoWoWoWoWoW");
    sig_kinds("{p:String} [1]", k);
    assert_string_equal(k, "kWoWKbNB");
}

static void test_token_errors(void **state)
{
    (void)state;
    static const struct {
        const char *sql;
        size_t offset;
        const char *what;
    } cases[] = {
        {"SELECT 'abc", 7, "single quoted string"},
        {"SELECT 'abc\\'", 7, "single quoted string"},
        {"SELECT \"abc", 7, "double quoted identifier"},
        {"SELECT `abc", 7, "back quoted identifier"},
        {"SELECT 1 /* abc", 9, "multiline comment"},
        {"SELECT 1 /* a /* b */ c", 9, "multiline comment"},
        {"SELECT x'0A", 7, "single quoted string"},
        {"SELECT 'a' || 'b", 14, "single quoted string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ferry_toks t = {0};
        ferry_err err = {0};
        size_t off = 0;
        assert_int_equal(ferry_sql_tokenize(cases[i].sql, strlen(cases[i].sql), &t, &off, &err),
                         FERRY_EINVAL);
        assert_int_equal(off, cases[i].offset);
        assert_non_null(strstr(err.msg, cases[i].what));
        ferry_toks_free(&t);
    }
    /* the analysis reports them too, and unbalanced brackets */
    const char *bad[] = {"SELECT (1", "SELECT 1)", "SELECT [1)", "SELECT 'x"};
    for (size_t i = 0; i < 4; i++) {
        ferry_sql_analysis a;
        ferry_err err = {0};
        assert_int_equal(ferry_sql_analyze(bad[i], strlen(bad[i]), tables, N_TABLES, &a, &err),
                         FERRY_EINVAL);
        assert_non_null(strstr(err.msg, "byte"));
        ferry_sql_analysis_free(&a);
    }
}

static void test_token_values(void **state)
{
    (void)state;
    const char *sql = "'it''s\\n\\x41' `we``ird` \"q\\\"x\" plain";
    ferry_toks t = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_sql_tokenize(sql, strlen(sql), &t, NULL, &err), FERRY_OK);
    const char *want[] = {"it's\nA", "we`ird", "q\"x", "plain"};
    size_t w = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (!ferry_tok_significant(&t.v[i]))
            continue;
        char *v = ferry_tok_value(&t, &t.v[i], NULL);
        assert_string_equal(v, want[w++]);
        free(v);
    }
    assert_int_equal(w, 4);
    ferry_toks_free(&t);
}

/* ---- the rewrite corpus: each query and its exact rewrite for the node target (NULL: not
 * understood, nothing is sent) ---- */

static const struct {
    const char *sql, *want;
} corpus[] = {
    {"SELECT count() FROM events WHERE tenant = 'acme'",
     "SELECT count() FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT count() FROM events WHERE 'acme' = tenant",
     "SELECT count() FROM events_local AS events WHERE ('acme' = tenant) AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT count() FROM events WHERE tenant == 'beta'",
     "SELECT count() FROM events_local AS events WHERE (tenant == 'beta') AND (events.tenant = 'beta' AND events.split IN (1))"},
    {"SELECT count() FROM events WHERE tenant IN ('acme', 'beta', 'zeta')",
     "SELECT count() FROM events_local AS events WHERE (tenant IN ('acme', 'beta')) AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT count() FROM events WHERE tenant IN ('zeta')",
     "SELECT count() FROM events_local AS events WHERE (tenant IN ('zeta')) AND 0"},
    {"SELECT count() FROM events WHERE tenant IN ('acme', 'beta') AND tenant = 'beta'",
     "SELECT count() FROM events_local AS events WHERE (tenant IN ('acme', 'beta') AND tenant = 'beta') AND (events.tenant = 'beta' AND events.split IN (1))"},
    {"SELECT count() FROM events WHERE x > 1 AND tenant = 'acme' AND y < 2",
     "SELECT count() FROM events_local AS events WHERE (x > 1 AND tenant = 'acme' AND y < 2) AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT count() FROM events WHERE tenant = 'acme' OR tenant = 'beta'",
     "SELECT count() FROM events_local AS events WHERE (tenant = 'acme' OR tenant = 'beta') AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT count() FROM events WHERE (tenant = 'acme' AND x = 1)",
     "SELECT count() FROM events_local AS events WHERE ((tenant = 'acme' AND x = 1)) AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT count() FROM events WHERE NOT tenant = 'acme'",
     "SELECT count() FROM events_local AS events WHERE (NOT tenant = 'acme') AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT count() FROM events WHERE tenant NOT IN ('acme')",
     "SELECT count() FROM events_local AS events WHERE (tenant NOT IN ('acme')) AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT count() FROM events",
     "SELECT count() FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT count() FROM events GROUP BY user",
     "SELECT count() FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1))) GROUP BY user"},
    {"SELECT * FROM events ORDER BY ts LIMIT 10",
     "SELECT * FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1))) ORDER BY ts LIMIT 10"},
    {"SELECT * FROM events e WHERE e.tenant = 'acme'",
     "SELECT * FROM events_local e WHERE (e.tenant = 'acme') AND (e.tenant = 'acme' AND e.split IN (0, 2))"},
    {"SELECT * FROM events AS e WHERE e.tenant = 'acme' AND events.x = 1",
     "SELECT * FROM events_local AS e WHERE (e.tenant = 'acme' AND events.x = 1) AND (e.tenant = 'acme' AND e.split IN (0, 2))"},
    {"SELECT events.x FROM events WHERE events.tenant = 'acme'",
     "SELECT events.x FROM events_local AS events WHERE (events.tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM default.events WHERE tenant = 'acme'",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM `events` WHERE `tenant` = 'acme'",
     "SELECT x FROM events_local AS events WHERE (`tenant` = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM \"events\" WHERE tenant = 'acme'",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events FINAL WHERE tenant = 'acme'",
     "SELECT x FROM events_local AS events FINAL WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events AS e FINAL SAMPLE 0.1 WHERE tenant = 'acme'",
     "SELECT x FROM events_local AS e FINAL SAMPLE 0.1 WHERE (tenant = 'acme') AND (e.tenant = 'acme' AND e.split IN (0, 2))"},
    {"SELECT x FROM events PREWHERE tenant = 'acme' WHERE x > 1",
     "SELECT x FROM events_local AS events PREWHERE tenant = 'acme' WHERE (x > 1) AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events PREWHERE tenant = 'acme'",
     "SELECT x FROM events_local AS events PREWHERE tenant = 'acme' WHERE (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events ARRAY JOIN arr AS a WHERE tenant = 'acme'",
     "SELECT x FROM events_local AS events ARRAY JOIN arr AS a WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events ARRAY JOIN arr AS a",
     "SELECT x FROM events_local AS events ARRAY JOIN arr AS a WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events GROUP BY x ORDER BY x LIMIT 3",
     "SELECT x FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1))) GROUP BY x ORDER BY x LIMIT 3"},
    {"SELECT x FROM events SETTINGS max_threads = 1",
     "SELECT x FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events FORMAT JSONEachRow",
     "SELECT x FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events WHERE tenant = 'acme' FORMAT JSON SETTINGS max_threads = 1, output_format_json_quote_64bit_integers = 0",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events WHERE tenant = 'acme' SETTINGS max_threads = 1 FORMAT TSV;",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT 'events WHERE tenant = ''zeta''' AS s FROM events WHERE tenant = 'acme'",
     "SELECT 'events WHERE tenant = ''zeta''' AS s FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT 'it\\'s FROM events' AS s FROM events",
     "SELECT 'it\\'s FROM events' AS s FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT /* FROM events */ x -- WHERE tenant = 'zeta'\nFROM events # comment\nWHERE tenant = 'acme'",
     "SELECT /* FROM events */ x -- WHERE tenant = 'zeta'\nFROM events_local AS events # comment\nWHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events /* nested /* comment */ still */ WHERE tenant = 'beta'",
     "SELECT x FROM events_local AS events /* nested /* comment */ still */ WHERE (tenant = 'beta') AND (events.tenant = 'beta' AND events.split IN (1))"},
    {"SELECT $$ FROM events $$ AS h, $tag$ WHERE $tag$ AS g FROM events",
     "SELECT $$ FROM events $$ AS h, $tag$ WHERE $tag$ AS g FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT ((x + 1) * (y - 2)) AS z FROM events WHERE ((tenant = 'acme'))",
     "SELECT ((x + 1) * (y - 2)) AS z FROM events_local AS events WHERE (((tenant = 'acme'))) AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM (SELECT x FROM events WHERE tenant = 'acme') AS sub",
     "SELECT x FROM (SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))) AS sub"},
    {"SELECT x FROM (SELECT x FROM events WHERE tenant = 'acme') WHERE x > 1",
     "SELECT x FROM (SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))) WHERE x > 1"},
    {"SELECT x FROM events WHERE user IN (SELECT user FROM events WHERE tenant = 'beta') AND tenant = 'acme'",
     "SELECT x FROM events_local AS events WHERE (user IN (SELECT user FROM events_local AS events WHERE (tenant = 'beta') AND (events.tenant = 'beta' AND events.split IN (1))) AND tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events WHERE user GLOBAL IN (SELECT user FROM dim) AND tenant = 'acme'",
     "SELECT x FROM events_local AS events WHERE (user GLOBAL IN (SELECT user FROM dim) AND tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT x FROM events WHERE user GLOBAL NOT IN (SELECT user FROM dim)",
     "SELECT x FROM events_local AS events WHERE (user GLOBAL NOT IN (SELECT user FROM dim)) AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT e.x, d.y FROM events AS e GLOBAL JOIN (SELECT k, y FROM dim) AS d ON e.k = d.k WHERE e.tenant = 'acme'",
     "SELECT e.x, d.y FROM events_local AS e GLOBAL JOIN (SELECT k, y FROM dim) AS d ON e.k = d.k WHERE (e.tenant = 'acme') AND (e.tenant = 'acme' AND e.split IN (0, 2))"},
    {"SELECT e.x, d.y FROM events AS e INNER JOIN dim AS d ON e.k = d.k WHERE e.tenant = 'acme'",
     "SELECT e.x, d.y FROM events_local AS e INNER JOIN dim AS d ON e.k = d.k WHERE (e.tenant = 'acme') AND (e.tenant = 'acme' AND e.split IN (0, 2))"},
    {"SELECT e.x, d.y FROM events AS e LEFT JOIN dim AS d USING (k)",
     "SELECT e.x, d.y FROM events_local AS e LEFT JOIN dim AS d USING (k) WHERE ((e.tenant = 'acme' AND e.split IN (0, 2)) OR (e.tenant = 'beta' AND e.split IN (1)))"},
    {"SELECT e.x, d.y FROM dim AS d LEFT JOIN events AS e ON e.k = d.k",
     "SELECT e.x, d.y FROM dim AS d LEFT JOIN (SELECT * FROM events_local WHERE ((tenant = 'acme' AND split IN (0, 2)) OR (tenant = 'beta' AND split IN (1)))) AS e ON e.k = d.k"},
    {"SELECT e.x, d.y FROM dim AS d RIGHT JOIN events AS e ON e.k = d.k WHERE e.tenant = 'acme'",
     "SELECT e.x, d.y FROM dim AS d RIGHT JOIN (SELECT * FROM events_local WHERE (tenant = 'acme' AND split IN (0, 2))) AS e ON e.k = d.k WHERE e.tenant = 'acme'"},
    {"SELECT a.x, b.x FROM events AS a JOIN events AS b ON a.k = b.k WHERE a.tenant = 'acme' AND b.tenant = 'beta'",
     "SELECT a.x, b.x FROM events_local AS a JOIN events_local AS b ON a.k = b.k WHERE (a.tenant = 'acme' AND b.tenant = 'beta') AND (a.tenant = 'acme' AND a.split IN (0, 2)) AND (b.tenant = 'beta' AND b.split IN (1))"},
    {"SELECT x FROM events, dim WHERE events.k = dim.k",
     "SELECT x FROM events_local AS events, dim WHERE (events.k = dim.k) AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events WHERE tenant = 'acme' UNION ALL SELECT x FROM events WHERE tenant = 'beta'",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2)) UNION ALL SELECT x FROM events_local AS events WHERE (tenant = 'beta') AND (events.tenant = 'beta' AND events.split IN (1))"},
    {"(SELECT x FROM events) UNION ALL (SELECT y FROM dim)",
     "(SELECT x FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))) UNION ALL (SELECT y FROM dim)"},
    {"WITH 1 AS one SELECT x + one FROM events WHERE tenant = 'acme'",
     "WITH 1 AS one SELECT x + one FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"WITH sub AS (SELECT x FROM events WHERE tenant = 'acme') SELECT count() FROM sub",
     "WITH sub AS (SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))) SELECT count() FROM sub"},
    {"WITH events AS (SELECT 1 AS x) SELECT x FROM events",
     "WITH events AS (SELECT 1 AS x) SELECT x FROM events"},
    {"SELECT x AS tenant FROM events WHERE tenant = 'acme'",
     "SELECT x AS tenant FROM events_local AS events WHERE (tenant = 'acme') AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT count() FROM events WHERE tenant = 'acme' AND arrayExists(tenant -> tenant = 'x', arr)",
     "SELECT count() FROM events_local AS events WHERE (tenant = 'acme' AND arrayExists(tenant -> tenant = 'x', arr)) AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events WHERE CASE WHEN a THEN 1 ELSE 0 END AND tenant = 'acme'",
     "SELECT x FROM events_local AS events WHERE (CASE WHEN a THEN 1 ELSE 0 END AND tenant = 'acme') AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events WHERE a BETWEEN 1 AND 2 AND tenant = 'acme'",
     "SELECT x FROM events_local AS events WHERE (a BETWEEN 1 AND 2 AND tenant = 'acme') AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events WHERE tenant = 'acme' GROUP BY x WITH TOTALS",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2)) GROUP BY x WITH TOTALS"},
    {"SELECT x FROM events WHERE tenant = 'acme' LIMIT 2 BY x LIMIT 10",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2)) LIMIT 2 BY x LIMIT 10"},
    {"SELECT x FROM events WHERE tenant = 'acme' ORDER BY x WITH FILL",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2)) ORDER BY x WITH FILL"},
    {"SELECT count() FROM logs_acme",
     "SELECT count() FROM logs_acme_local AS logs_acme WHERE logs_acme.split IN (0, 2)"},
    {"SELECT count() FROM logs_zeta",
     "SELECT count() FROM logs_zeta_local AS logs_zeta WHERE 0"},
    {"SELECT l.x FROM logs_beta AS l WHERE l.x > 0",
     "SELECT l.x FROM logs_beta_local AS l WHERE (l.x > 0) AND l.split IN (1)"},
    {"SELECT sum(x) OVER (PARTITION BY user ORDER BY ts) FROM events WHERE tenant = 'acme'",
     "SELECT sum(x) OVER (PARTITION BY user ORDER BY ts) FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT format, limit FROM events", NULL},
    {"SELECT x FROM events WHERE tenant IN (1, 2)",
     "SELECT x FROM events_local AS events WHERE (tenant IN (1, 2)) AND 0"},
    {"SELECT 0x1F, 1e5, 1_000, .5, t.1 FROM events",
     "SELECT 0x1F, 1e5, 1_000, .5, t.1 FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1)))"},
    {"SELECT x FROM events WHERE tenant = 'acme' AND ts > now() - INTERVAL 1 DAY ORDER BY ts DESC LIMIT 5, 10",
     "SELECT x FROM events_local AS events WHERE (tenant = 'acme' AND ts > now() - INTERVAL 1 DAY) AND (events.tenant = 'acme' AND events.split IN (0, 2)) ORDER BY ts DESC LIMIT 5, 10"},
    {"SELECT quantile(0.9)(x), uniq(user), argMax(x, ts) FROM events WHERE tenant = 'acme'",
     "SELECT quantile(0.9)(x), uniq(user), argMax(x, ts) FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 2))"},
    {"SELECT toDate(ts) AS d, sumIf(x, x > 1) AS s FROM events GROUP BY d ORDER BY d",
     "SELECT toDate(ts) AS d, sumIf(x, x > 1) AS s FROM events_local AS events WHERE ((events.tenant = 'acme' AND events.split IN (0, 2)) OR (events.tenant = 'beta' AND events.split IN (1))) GROUP BY d ORDER BY d"},
    {"SELECT x FROM numbers(10) AS n",
     "SELECT x FROM numbers(10) AS n"},
    {"EXPLAIN SELECT x FROM events", NULL},
    {"INSERT INTO events VALUES ('a', 1)", NULL},
    {"SELECT x FROM events INTO OUTFILE 'f'", NULL},
};

static void test_rewrite_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        char *got = rewrite_for(corpus[i].sql, &node, NULL);
        if (!corpus[i].want) {
            if (got)
                fail_msg("case %zu understood but should not be: %s", i, got);
            continue;
        }
        if (!got)
            fail_msg("case %zu not understood: %s", i, corpus[i].sql);
        if (strcmp(got, corpus[i].want))
            fail_msg("case %zu: %s\n got: %s\nwant: %s", i, corpus[i].sql, got, corpus[i].want);
        free(got);
    }
    assert_true(sizeof corpus / sizeof corpus[0] >= 60);
}

static void test_skip_when_nothing_served(void **state)
{
    (void)state;
    bool skip = false;
    char *s = rewrite_for("SELECT count() FROM events WHERE tenant IN ('zeta', 'omega')", &node,
                          &skip);
    assert_true(skip);
    /* the IN list is never emptied: it stays, and the restriction reads nothing */
    assert_string_equal(s, "SELECT count() FROM events_local AS events WHERE (tenant IN ('zeta', "
                           "'omega')) AND 0");
    free(s);
    s = rewrite_for("SELECT count() FROM logs_zeta", &node, &skip);
    assert_true(skip);
    free(s);
    s = rewrite_for("SELECT count() FROM events WHERE tenant = 'beta'", &node, &skip);
    assert_false(skip);
    free(s);
    s = rewrite_for("SELECT 1", &node, &skip);
    assert_false(skip); /* no managed table: nothing to restrict */
    assert_string_equal(s, "SELECT 1");
    free(s);
}

/* ---- analysis ---- */

static char *span_text(const ferry_sql_analysis *a, ferry_span s)
{
    return strndup(a->toks.text + s.start, s.end - s.start);
}

static void test_clauses(void **state)
{
    (void)state;
    const char *sql = "WITH 1 AS one SELECT a, count() FROM events AS e ARRAY JOIN arr "
                      "PREWHERE x > 1 WHERE (a OR b) GROUP BY a HAVING count() > 1 "
                      "ORDER BY a DESC LIMIT 2 BY a LIMIT 10 OFFSET 5 SETTINGS max_threads = 2, "
                      "extremes = 1 FORMAT JSON";
    ferry_sql_analysis a;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_true(a.understood);
    assert_int_equal(a.kind, FERRY_STMT_WITH_SELECT);
    assert_int_equal(a.n_levels, 1);
    static const struct {
        int cl;
        const char *kw, *body;
    } want[] = {
        {FERRY_CL_WITH, "WITH", "1 AS one"},
        {FERRY_CL_SELECT, "SELECT", "a, count()"},
        {FERRY_CL_FROM, "FROM", "events AS e ARRAY JOIN arr"},
        {FERRY_CL_PREWHERE, "PREWHERE", "x > 1"},
        {FERRY_CL_WHERE, "WHERE", "(a OR b)"},
        {FERRY_CL_GROUP_BY, "GROUP BY", "a"},
        {FERRY_CL_HAVING, "HAVING", "count() > 1"},
        {FERRY_CL_ORDER_BY, "ORDER BY", "a DESC"},
        {FERRY_CL_LIMIT_BY, "LIMIT", "2 BY a"},
        {FERRY_CL_LIMIT, "LIMIT", "10 OFFSET 5"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ferry_sql_clause *c = &a.levels[0].cl[want[i].cl];
        assert_true(c->present);
        char *kw = span_text(&a, c->kw), *body = span_text(&a, c->body);
        assert_string_equal(kw, want[i].kw);
        assert_string_equal(body, want[i].body);
        free(kw);
        free(body);
    }
    assert_false(a.levels[0].cl[FERRY_CL_SETTINGS].present); /* the statement's, not the level's */
    assert_string_equal(a.format, "JSON");
    assert_int_equal(a.n_settings, 2);
    assert_string_equal(a.settings[0].name, "max_threads");
    assert_string_equal(a.settings[0].value, "2");
    assert_string_equal(a.settings[1].name, "extremes");
    char *body = span_text(&a, a.body);
    assert_non_null(strstr(body, "OFFSET 5"));
    assert_null(strstr(body, "SETTINGS"));
    free(body);
    assert_true(a.levels[0].has_array_join);
    assert_int_equal(a.n_refs, 1);
    assert_string_equal(a.refs[0].qualifier, "e");
    ferry_sql_analysis_free(&a);
}

static void test_statement_kinds(void **state)
{
    (void)state;
    static const struct {
        const char *sql;
        enum ferry_stmt_kind kind;
        bool understood;
    } cases[] = {
        {"SELECT 1", FERRY_STMT_SELECT, true},
        {"  -- c\n select 1", FERRY_STMT_SELECT, true},
        {"WITH 1 AS x SELECT x", FERRY_STMT_WITH_SELECT, true},
        {"(SELECT 1) UNION ALL (SELECT 2)", FERRY_STMT_SELECT, true},
        {"INSERT INTO events SELECT * FROM events", FERRY_STMT_INSERT, false},
        {"EXPLAIN SYNTAX SELECT 1", FERRY_STMT_EXPLAIN, false},
        {"DESCRIBE events", FERRY_STMT_EXPLAIN, false},
        {"SHOW TABLES", FERRY_STMT_OTHER, false},
        {"", FERRY_STMT_OTHER, false},
        {"SELECT ! 1", FERRY_STMT_SELECT, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ferry_sql_analysis a;
        ferry_err err = {0};
        assert_int_equal(ferry_sql_analyze(cases[i].sql, strlen(cases[i].sql), tables, N_TABLES,
                                           &a, &err),
                         FERRY_OK);
        assert_int_equal(a.kind, cases[i].kind);
        assert_int_equal(a.understood, cases[i].understood);
        if (!a.understood)
            assert_true(a.why[0]);
        ferry_sql_analysis_free(&a);
    }
}

static void test_refs_and_filters(void **state)
{
    (void)state;
    const char *sql =
        "SELECT * FROM events AS e JOIN (SELECT k FROM events WHERE tenant IN ('b', 'a', 'b')) "
        "AS s ON e.k = s.k JOIN other.events AS o ON o.k = e.k WHERE e.tenant = 'a' AND "
        "k IN (SELECT k FROM logs_acme) AND tenant = 'zzz'";
    ferry_sql_analysis a;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_true(a.understood);
    assert_int_equal(a.n_refs, 4);
    /* e: managed, filter e.tenant = 'a' (the unqualified one is ambiguous with joins) */
    assert_int_equal(a.refs[0].table, 0);
    assert_true(a.refs[0].has_filter);
    assert_int_equal(a.refs[0].n_tenants, 1);
    assert_string_equal(a.refs[0].tenants[0], "a");
    /* the subquery's events: IN list, deduplicated and sorted */
    assert_int_equal(a.refs[1].table, 0);
    assert_int_equal(a.refs[1].level, 1);
    assert_int_equal(a.refs[1].n_tenants, 2);
    assert_string_equal(a.refs[1].tenants[0], "a");
    assert_string_equal(a.refs[1].tenants[1], "b");
    /* other.events: another database, not managed */
    assert_int_equal(a.refs[2].table, -1);
    /* logs_acme: per-tenant */
    assert_int_equal(a.refs[3].table, 1);
    assert_string_equal(a.refs[3].tenant, "acme");
    ferry_sql_analysis_free(&a);
}

static void test_global_subqueries(void **state)
{
    (void)state;
    const char *sql = "SELECT x FROM events WHERE u GLOBAL IN (SELECT u FROM dim) AND v GLOBAL "
                      "IN ( SELECT  u /* same */ FROM dim ) AND w IN (SELECT u FROM dim)";
    ferry_sql_analysis a;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_int_equal(a.n_globals, 2); /* the plain IN is not global */
    assert_string_equal(a.globals[0].name, a.globals[1].name); /* same tokens, same name */
    assert_int_equal(strncmp(a.globals[0].name, "_data_", 6), 0);
    assert_int_equal(strlen(a.globals[0].name), 22);
    char *inner = span_text(&a, a.globals[0].inner);
    assert_string_equal(inner, "SELECT u FROM dim");
    free(inner);
    ferry_sql_target t = node;
    t.materialize_globals = true;
    ferry_sql_rewritten rw;
    assert_int_equal(ferry_sql_rewrite(&a, tables, &t, &rw, &err), FERRY_OK);
    char want[512];
    snprintf(want, sizeof want,
             "SELECT x FROM events_local AS events WHERE (u GLOBAL IN %s AND v GLOBAL IN %s AND w "
             "IN (SELECT u FROM dim)) AND ((events.tenant = 'acme' AND events.split IN (0, 2)) OR "
             "(events.tenant = 'beta' AND events.split IN (1)))",
             a.globals[0].name, a.globals[0].name);
    assert_string_equal(rw.sql, want);
    ferry_sql_rewritten_free(&rw);
    ferry_sql_analysis_free(&a);

    /* a GLOBAL JOIN's subquery reading a managed table: replaced whole, its refs untouched */
    sql = "SELECT e.x FROM events AS e GLOBAL ANY LEFT JOIN (SELECT k FROM events WHERE tenant = "
          "'beta') AS r USING (k) WHERE e.tenant = 'acme'";
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_int_equal(a.n_globals, 1);
    assert_true(a.globals[0].join);
    assert_int_equal(ferry_sql_rewrite(&a, tables, &t, &rw, &err), FERRY_OK);
    snprintf(want, sizeof want,
             "SELECT e.x FROM events_local AS e GLOBAL ANY LEFT JOIN %s AS r USING (k) WHERE "
             "(e.tenant = 'acme') AND (e.tenant = 'acme' AND e.split IN (0, 2))",
             a.globals[0].name);
    assert_string_equal(rw.sql, want);
    ferry_sql_rewritten_free(&rw);
    ferry_sql_analysis_free(&a);
}

static void test_join_words_as_columns(void **state)
{
    (void)state;
    /* words that start joins, used as qualified column names in ON, do not end the ON */
    char *s = rewrite_for("SELECT e.x FROM events AS e JOIN dim AS d ON e.left = d.left AND "
                          "d.all = 1 LEFT JOIN t ON t.k = e.k WHERE e.tenant = 'acme'",
                          &node, NULL);
    assert_string_equal(s, "SELECT e.x FROM events_local AS e JOIN dim AS d ON e.left = d.left "
                           "AND d.all = 1 LEFT JOIN t ON t.k = e.k WHERE (e.tenant = 'acme') "
                           "AND (e.tenant = 'acme' AND e.split IN (0, 2))");
    free(s);
}

static void test_initiator_only_settings(void **state)
{
    (void)state;
    assert_true(ferry_sql_setting_initiator_only("format"));
    assert_true(ferry_sql_setting_initiator_only("additional_result_filter"));
    assert_true(ferry_sql_setting_initiator_only("output_format"));
    assert_false(ferry_sql_setting_initiator_only("max_threads"));
    assert_false(ferry_sql_setting_initiator_only("Format"));
    size_t n = 0;
    for (const char *const *s = ferry_sql_initiator_only_settings(); *s; s++)
        n++;
    assert_int_equal(n, 12);
}

/* ---- property: identity mapping, everything on one server: only insertions, and every
 * original significant token survives byte for byte, in order ---- */

static const ferry_sql_slice all_slices[] = {{"acme", 0}, {"acme", 1}, {"acme", 2}, {"beta", 0},
                                             {"beta", 1}, {"zeta", 0}};
static const ferry_sql_served all_served[N_TABLES] = {{all_slices, 6}, {all_slices, 6}};
static const ferry_sql_target identity = {all_served, NULL, false, NULL, 0, NULL};

static void test_identity_only_inserts(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        const char *sql = corpus[i].sql;
        ferry_sql_analysis a;
        ferry_err err = {0};
        assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err),
                         FERRY_OK);
        if (!a.understood) {
            ferry_sql_analysis_free(&a);
            continue;
        }
        sql_edits e = {0};
        bool skip;
        assert_int_equal(sql_server_edits(&a, tables, &identity, &e, &skip, &err), FERRY_OK);
        for (size_t k = 0; k < e.n; k++) {
            bool wrap = false;
            for (size_t r = 0; r < a.n_refs; r++)
                wrap |= a.refs[r].wrap && a.refs[r].expr.start == e.v[k].start;
            if (!wrap && e.v[k].start != e.v[k].end)
                fail_msg("case %zu: identity rewrite replaced bytes %zu..%zu of %s", i,
                         e.v[k].start, e.v[k].end, sql);
        }
        ferry_buf out = FERRY_BUF_INIT;
        assert_int_equal(sql_edits_apply(&e, sql, a.body.start, a.body.end, &out), FERRY_OK);
        /* the output re-tokenizes, and the original's tokens appear in it in order */
        ferry_sql_analysis b;
        assert_int_equal(ferry_sql_analyze(out.data, out.len, tables, N_TABLES, &b, &err),
                         FERRY_OK);
        assert_true(b.understood);
        size_t j = 0;
        for (size_t t = 0; t < a.n_sig && sig_end(&a, t) <= a.body.end; t++) {
            const ferry_tok *ta = sig_tok(&a, t);
            while (j < b.n_sig && !(sig_tok(&b, j)->len == ta->len &&
                                    !memcmp(out.data + sig_tok(&b, j)->start,
                                            sql + ta->start, ta->len)))
                j++;
            if (j == b.n_sig)
                fail_msg("case %zu: token '%.*s' lost in %s", i, (int)ta->len, sql + ta->start,
                         out.data);
            j++;
        }
        checked++;
        ferry_sql_analysis_free(&b);
        ferry_buf_free(&out);
        sql_edits_free(&e);
        ferry_sql_analysis_free(&a);
    }
    assert_true(checked >= 60);
}

/* ---- plans ---- */

static const ferry_sql_slice n1_slices[] = {{"acme", 0}, {"beta", 0}};
static const ferry_sql_slice n2_slices[] = {{"acme", 1}, {"gamma", 0}};
static const ferry_sql_served n1_served[N_TABLES] = {{n1_slices, 2}, {n1_slices, 2}};
static const ferry_sql_served n2_served[N_TABLES] = {{n2_slices, 2}, {n2_slices, 2}};
static const ferry_sql_target two[] = {{n1_served, NULL, false, NULL, 0, NULL}, {n2_served, NULL, false, NULL, 0, NULL}};

static void plan_of(const char *sql, ferry_read_plan *p)
{
    ferry_sql_analysis a;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_true(a.understood);
    if (ferry_sql_plan(&a, tables, two, 2, p, &err))
        fail_msg("plan failed: %s", err.msg);
    ferry_sql_analysis_free(&a);
}

static void test_plan_kinds(void **state)
{
    (void)state;
    static const struct {
        const char *sql;
        enum ferry_plan_kind kind;
        size_t queries;
    } cases[] = {
        {"SELECT count() FROM events WHERE tenant = 'beta'", FERRY_PLAN_SINGLE, 1},
        {"SELECT count() FROM events WHERE tenant = 'nobody'", FERRY_PLAN_SINGLE, 1},
        {"SELECT count() FROM events WHERE tenant = 'acme'", FERRY_PLAN_AGGREGATE, 2},
        {"SELECT u, sum(x) AS s FROM events GROUP BY u ORDER BY s DESC LIMIT 3",
         FERRY_PLAN_AGGREGATE, 2},
        {"SELECT toDate(ts) AS d, count() FROM events GROUP BY d", FERRY_PLAN_AGGREGATE, 2},
        {"SELECT * FROM events ORDER BY ts LIMIT 10", FERRY_PLAN_ROWS, 2},
        {"SELECT x FROM events WHERE tenant = 'acme'", FERRY_PLAN_ROWS, 2},
        {"SELECT groupArraySorted(3)(x) FROM events", FERRY_PLAN_GATHER, 2},
        {"SELECT count(DISTINCT u) FROM events", FERRY_PLAN_GATHER, 2},
        {"SELECT sum(x) OVER () FROM events", FERRY_PLAN_GATHER, 2},
        {"SELECT toDate(ts), count() FROM events GROUP BY toDate(ts)", FERRY_PLAN_GATHER, 2},
        {"SELECT DISTINCT u FROM events", FERRY_PLAN_GATHER, 2},
        {"SELECT u FROM events LIMIT 1 BY u", FERRY_PLAN_GATHER, 2},
        {"SELECT * FROM events ORDER BY 1", FERRY_PLAN_GATHER, 2},
        {"SELECT x FROM events UNION ALL SELECT x FROM events", FERRY_PLAN_GATHER, 4},
        {"SELECT e.x FROM events AS e JOIN dim AS d ON e.k = d.k", FERRY_PLAN_GATHER, 2},
        {"SELECT u, count() FROM events GROUP BY u WITH TOTALS", FERRY_PLAN_GATHER, 2},
        {"SELECT count() FROM logs_acme", FERRY_PLAN_AGGREGATE, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ferry_read_plan p;
        plan_of(cases[i].sql, &p);
        if (p.kind != cases[i].kind || p.n_queries != cases[i].queries)
            fail_msg("case %zu (%s): got %s with %zu queries (%s)", i, cases[i].sql,
                     ferry_plan_kind_name(p.kind), p.n_queries, p.why);
        if (p.kind == FERRY_PLAN_SINGLE)
            assert_null(p.initiator_sql);
        else
            assert_non_null(p.initiator_sql);
        ferry_read_plan_free(&p);
    }
}

static void test_plan_texts(void **state)
{
    (void)state;
    ferry_read_plan p;
    plan_of("SELECT u, sum(x) AS s, count() FROM events WHERE tenant IN ('acme', 'beta') GROUP "
            "BY u HAVING count() > 1 ORDER BY s DESC LIMIT 3 FORMAT JSON SETTINGS max_threads=1",
            &p);
    assert_int_equal(p.kind, FERRY_PLAN_AGGREGATE);
    assert_string_equal(p.queries[0].sql,
                        "SELECT u, sumState(x) AS __ferry_a0, countState() AS __ferry_a1 FROM "
                        "events WHERE (tenant IN ('acme', 'beta')) AND ((events.tenant = 'acme' AND "
                        "events.split IN (0)) OR (events.tenant = 'beta' AND events.split IN (0))) "
                        "GROUP BY u");
    assert_string_equal(p.queries[1].sql,
                        "SELECT u, sumState(x) AS __ferry_a0, countState() AS __ferry_a1 FROM "
                        "events WHERE (tenant IN ('acme')) AND (events.tenant = 'acme' AND "
                        "events.split IN (1)) GROUP BY u");
    assert_string_equal(p.initiator_sql,
                        "SELECT u, sumMerge(__ferry_a0) AS s, countMerge(__ferry_a1) AS `count()` "
                        "FROM {{ferry.partial}} GROUP BY u HAVING countMerge(__ferry_a1) > 1 ORDER "
                        "BY s DESC LIMIT 3");
    assert_string_equal(p.format, "JSON");
    assert_int_equal(p.n_settings, 1);
    ferry_read_plan_free(&p);

    plan_of("SELECT * FROM events ORDER BY ts DESC, u LIMIT 5, 10", &p);
    assert_int_equal(p.kind, FERRY_PLAN_ROWS);
    assert_string_equal(p.queries[0].sql,
                        "SELECT *, ts AS __ferry_o1, u AS __ferry_o2 FROM events WHERE "
                        "((events.tenant = 'acme' AND events.split IN (0)) OR (events.tenant = 'beta' AND events.split IN (0))) ORDER BY ts "
                        "DESC, u LIMIT 15");
    assert_string_equal(p.initiator_sql,
                        "SELECT * EXCEPT (__ferry_o1, __ferry_o2) FROM {{ferry.partial}} ORDER BY "
                        "__ferry_o1 DESC, __ferry_o2 LIMIT 10 OFFSET 5");
    ferry_read_plan_free(&p);

    plan_of("SELECT quantile(0.5)(x) FROM events WHERE tenant = 'acme'", &p);
    assert_int_equal(p.kind, FERRY_PLAN_AGGREGATE);
    assert_non_null(strstr(p.queries[0].sql, "quantileState(0.5)(x) AS __ferry_a0"));
    assert_string_equal(p.initiator_sql, "SELECT quantileMerge(0.5)(__ferry_a0) AS "
                                         "`quantile(0.5)(x)` FROM {{ferry.partial}}");
    ferry_read_plan_free(&p);

    plan_of("SELECT d.name, count() FROM events AS e JOIN dim AS d ON e.k = d.k GROUP BY d.name",
            &p);
    assert_int_equal(p.kind, FERRY_PLAN_GATHER);
    assert_string_equal(p.queries[0].sql, "SELECT * FROM events WHERE ((tenant = 'acme' AND split IN "
                                          "(0)) OR (tenant = 'beta' AND split IN (0)))");
    assert_int_equal(p.queries[0].ref, 0);
    assert_string_equal(p.initiator_sql, "SELECT d.name, count() FROM {{ferry.rows.0}} AS e JOIN "
                                         "dim AS d ON e.k = d.k GROUP BY d.name");
    ferry_read_plan_free(&p);

    /* GLOBAL IN: computed once; the servers get the name */
    plan_of("SELECT count() FROM events WHERE u GLOBAL IN (SELECT u FROM events WHERE tenant = "
            "'gamma')",
            &p);
    assert_int_equal(p.kind, FERRY_PLAN_AGGREGATE);
    assert_int_equal(p.n_globals, 1);
    assert_string_equal(p.global_sql[0], "SELECT u FROM events WHERE tenant = 'gamma'");
    assert_non_null(strstr(p.queries[0].sql, p.globals[0].name));
    assert_null(strstr(p.queries[0].sql, "gamma"));
    ferry_read_plan_free(&p);
}

static void test_route_query_copies(void **state)
{
    (void)state;
    /* acme/1 is being moved: copies on n1 and n2, n1 serves it */
    const char *s1[] = {"n1"}, *s12[] = {"n1", "n2"}, *s2[] = {"n2"};
    const ferry_sql_route routes[] = {{"acme", 0, s1, 1}, {"acme", 1, s12, 2}, {"acme", 2, s2, 1}};
    ferry_routed rt;
    ferry_err err = {0};
    const char *sql = "SELECT count() FROM events WHERE tenant = 'acme'";
    assert_int_equal(ferry_route_query(sql, strlen(sql), tables, N_TABLES, NULL, routes, 3, &rt,
                                       &err),
                     FERRY_OK);
    assert_int_equal(rt.n_servers, 2);
    assert_int_equal(rt.plan.n_queries, 2);
    assert_non_null(
        strstr(rt.plan.queries[0].sql, "events.tenant = 'acme' AND events.split IN (0, 1)"));
    assert_non_null(
        strstr(rt.plan.queries[1].sql, "events.tenant = 'acme' AND events.split IN (2))"));
    ferry_routed_free(&rt);
}

/* ---- tenants a server serves whole: no slice restriction ---- */

static const ferry_sql_slice whole_slices[] = {{"acme", 0}, {"acme", 1}, {"beta", 0}, {"gamma", 1}};
static const ferry_sql_served whole_served[N_TABLES] = {{whole_slices, 4}, {whole_slices, 4}};
/* acme: 2 splits (both here), beta: 1 (here), gamma: 2 (only split 1 here), omega: 3 (none) */
static const ferry_sql_tenant_splits whole_counts[] = {
    {"acme", 2}, {"beta", 1}, {"gamma", 2}, {"omega", 3}};
static const ferry_sql_target whole_node = {whole_served, node_locals, false, whole_counts, 4, NULL};

static void test_whole_tenants_unrestricted(void **state)
{
    (void)state;
    static const struct {
        const char *sql, *want;
    } cases[] = {
        {"SELECT count() FROM events WHERE tenant = 'acme'",
         "SELECT count() FROM events_local AS events WHERE tenant = 'acme'"},
        {"SELECT count() FROM events WHERE tenant IN ('acme', 'beta')",
         "SELECT count() FROM events_local AS events WHERE tenant IN ('acme', 'beta')"},
        /* a tenant not served here at all is pruned from the IN list, which excludes its rows */
        {"SELECT count() FROM events WHERE tenant IN ('acme', 'omega')",
         "SELECT count() FROM events_local AS events WHERE tenant IN ('acme')"},
        /* gamma is served in part: the restriction stays */
        {"SELECT count() FROM events WHERE tenant IN ('acme', 'gamma')",
         "SELECT count() FROM events_local AS events WHERE (tenant IN ('acme', 'gamma')) AND "
         "((events.tenant = 'acme' AND events.split IN (0, 1)) OR (events.tenant = 'gamma' AND events.split IN (1)))"},
        {"SELECT count() FROM events WHERE tenant = 'gamma'",
         "SELECT count() FROM events_local AS events WHERE (tenant = 'gamma') AND "
         "(events.tenant = 'gamma' AND events.split IN (1))"},
        /* no tenant filter: every row on the server could be read, restricted */
        {"SELECT count() FROM events",
         "SELECT count() FROM events_local AS events WHERE ((events.tenant = 'acme' AND "
         "events.split IN (0, 1)) OR (events.tenant = 'beta' AND events.split IN (0)) OR "
         "(events.tenant = 'gamma' AND events.split IN (1)))"},
        /* a tenant whose count is unknown keeps the restriction */
        {"SELECT count() FROM events WHERE tenant = 'acme' OR tenant = 'zeta'",
         "SELECT count() FROM events_local AS events WHERE (tenant = 'acme' OR tenant = 'zeta') "
         "AND ((events.tenant = 'acme' AND events.split IN (0, 1)) OR (events.tenant = 'beta' AND "
         "events.split IN (0)) OR (events.tenant = 'gamma' AND events.split IN (1)))"},
        /* the preserved side of a LEFT JOIN is wrapped, restricted as before */
        {"SELECT count() FROM dim AS d LEFT JOIN events AS e ON d.k = e.k WHERE e.tenant = 'acme'",
         "SELECT count() FROM dim AS d LEFT JOIN (SELECT * FROM events_local WHERE (tenant = "
         "'acme' AND split IN (0, 1))) AS e ON d.k = e.k WHERE e.tenant = 'acme'"},
        /* a per-tenant table holds only its tenant */
        {"SELECT count() FROM logs_acme", "SELECT count() FROM logs_acme_local AS logs_acme"},
        {"SELECT count() FROM logs_gamma",
         "SELECT count() FROM logs_gamma_local AS logs_gamma WHERE logs_gamma.split IN (1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = rewrite_for(cases[i].sql, &whole_node, NULL);
        if (!got || strcmp(got, cases[i].want))
            fail_msg("case %zu: %s\n got:  %s\n want: %s", i, cases[i].sql, got ? got : "(null)",
                     cases[i].want);
        free(got);
    }
    /* a gather plan reads the rows of the reference without its tenant filter: restricted */
    ferry_sql_target both[] = {whole_node, whole_node};
    static const ferry_sql_slice other_slices[] = {{"gamma", 0}};
    static const ferry_sql_served other_served[N_TABLES] = {{other_slices, 1}, {other_slices, 1}};
    both[1].served = other_served;
    const char *sql = "SELECT count(DISTINCT u) FROM events WHERE tenant IN ('acme', 'gamma')";
    ferry_sql_analysis a;
    ferry_read_plan p;
    ferry_err err = {0};
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_int_equal(ferry_sql_plan(&a, tables, both, 2, &p, &err), FERRY_OK);
    assert_int_equal(p.kind, FERRY_PLAN_GATHER);
    assert_string_equal(p.queries[0].sql, "SELECT * FROM events_local WHERE ((tenant = 'acme' AND "
                                          "split IN (0, 1)) OR (tenant = 'gamma' AND split "
                                          "IN (1)))");
    ferry_read_plan_free(&p);
    /* one server serving acme whole: the single plan's query has no restriction */
    sql = "SELECT sum(x) FROM events WHERE tenant = 'acme' FORMAT JSON";
    ferry_sql_analysis_free(&a);
    assert_int_equal(ferry_sql_analyze(sql, strlen(sql), tables, N_TABLES, &a, &err), FERRY_OK);
    assert_int_equal(ferry_sql_plan(&a, tables, both, 2, &p, &err), FERRY_OK);
    assert_int_equal(p.kind, FERRY_PLAN_SINGLE);
    assert_string_equal(p.queries[0].sql,
                        "SELECT sum(x) FROM events_local AS events WHERE tenant = 'acme'");
    ferry_read_plan_free(&p);
    ferry_sql_analysis_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_cover_input),
        cmocka_unit_test(test_token_kinds),
        cmocka_unit_test(test_token_errors),
        cmocka_unit_test(test_token_values),
        cmocka_unit_test(test_rewrite_corpus),
        cmocka_unit_test(test_skip_when_nothing_served),
        cmocka_unit_test(test_clauses),
        cmocka_unit_test(test_statement_kinds),
        cmocka_unit_test(test_refs_and_filters),
        cmocka_unit_test(test_global_subqueries),
        cmocka_unit_test(test_join_words_as_columns),
        cmocka_unit_test(test_initiator_only_settings),
        cmocka_unit_test(test_identity_only_inserts),
        cmocka_unit_test(test_plan_kinds),
        cmocka_unit_test(test_plan_texts),
        cmocka_unit_test(test_route_query_copies),
        cmocka_unit_test(test_whole_tenants_unrestricted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

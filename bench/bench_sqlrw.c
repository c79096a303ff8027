/* SQL routing benchmark: the pure cost the router adds before any server is asked. For a few
 * representative queries, times ferry_route_query (tokenize, analyse, plan with per-server
 * rewrites) over a routing table of 1000 tenants x 4 splits on 3 servers, and the single-server
 * rewrite alone. Prints one JSON object with p50 / p99 in microseconds. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ferry/sqlrw.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

#define RUNS 2000

static long max_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_maxrss;
}

/* A long IN list (4 MiB of one- to seven-digit numbers): what analysing it holds (its tokens and
 * the two index arrays per token, as the router charges it to its memory budget) per byte of
 * text, and how long the analysis takes (best of 5). */
static int long_in_list(const ferry_sql_table *tables, json_t *root)
{
    enum { TEXT = 4 << 20 };
    char *sql = malloc(TEXT + 256);
    if (!sql)
        return 1;
    size_t n = (size_t)snprintf(sql, 256, "SELECT count() FROM events WHERE tenant = 't0042' "
                                "AND user IN (0");
    for (unsigned v = 1; n < TEXT; v = v * 7 % 9999991)
        n += (size_t)snprintf(sql + n, 32, ", %u", v);
    n += (size_t)snprintf(sql + n, 8, ")");
    double best = 1e18;
    size_t held = 0, toks = 0;
    for (int r = 0; r < 5; r++) {
        ferry_sql_analysis a;
        ferry_err err = {0};
        double t0 = now_us();
        int rc = ferry_sql_analyze(sql, n, tables, 1, &a, &err);
        double us = now_us() - t0;
        if (rc) {
            fprintf(stderr, "bench_sqlrw: long IN list: %s\n", err.msg);
            free(sql);
            return 1;
        }
        best = us < best ? us : best;
        toks = a.toks.n;
        held = a.toks.cap * sizeof a.toks.v[0] + 2 * (a.n_sig + 1) * sizeof a.sig[0];
        ferry_sql_analysis_free(&a);
    }
    free(sql);
    json_object_set_new(root, "long_in_list",
                        json_pack("{s:I, s:I, s:i, s:I, s:f, s:f, s:I}", "text_bytes", (json_int_t)n,
                                  "tokens", (json_int_t)toks, "token_bytes",
                                  (int)sizeof(ferry_tok), "analysis_bytes", (json_int_t)held,
                                  "analysis_bytes_per_text_byte", (double)held / (double)n,
                                  "analyse_ms", best / 1e3, "max_rss_kb", (json_int_t)max_rss_kb()));
    return 0;
}

int main(void)
{
    static const ferry_sql_table tables[] = {
        {"events", NULL, FERRY_LAYOUT_SHARED, "tenant", "split", NULL, false}};
    static const char *const servers[] = {"n1", "n2", "n3"};
    enum { TENANTS = 1000, SPLITS = 4 };
    static char names[TENANTS][16];
    static ferry_sql_route routes[TENANTS * SPLITS];
    static const char *shard_of[TENANTS * SPLITS][1];
    for (int t = 0; t < TENANTS; t++) {
        snprintf(names[t], sizeof names[t], "t%04d", t);
        for (int s = 0; s < SPLITS; s++) {
            int k = t * SPLITS + s;
            shard_of[k][0] = servers[(t + s) % 3];
            routes[k] = (ferry_sql_route){names[t], (uint32_t)s, shard_of[k], 1};
        }
    }
    static const struct {
        const char *name, *sql;
    } cases[] = {
        {"one_tenant_count", "SELECT count() FROM events WHERE tenant = 't0042'"},
        {"one_tenant_rows",
         "SELECT ts, user, x FROM events WHERE tenant = 't0042' AND ts > now() - INTERVAL 1 DAY "
         "ORDER BY ts DESC LIMIT 100 FORMAT JSON"},
        {"group_by_3_tenants",
         "SELECT user, sum(x) AS s, uniq(k) FROM events WHERE tenant IN ('t0001', 't0002', "
         "'t0003') GROUP BY user HAVING s > 10 ORDER BY s DESC LIMIT 10"},
        {"join_gather",
         "SELECT d.name, count() FROM events AS e JOIN dim AS d ON e.k = d.k WHERE e.tenant = "
         "'t0007' GROUP BY d.name"},
    };
    json_t *root = json_pack("{s:s, s:i, s:i}", "bench", "sqlrw", "routes", TENANTS * SPLITS,
                             "runs", RUNS);
    json_t *res = json_object();
    static double lat[RUNS];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t bytes = 0;
        for (int r = 0; r < RUNS; r++) {
            ferry_routed rt;
            ferry_err err = {0};
            double t0 = now_us();
            int rc = ferry_route_query(cases[c].sql, strlen(cases[c].sql), tables, 1, NULL,
                                       routes, TENANTS * SPLITS, &rt, &err);
            lat[r] = now_us() - t0;
            if (rc) {
                fprintf(stderr, "bench_sqlrw: %s: %s\n", cases[c].name, err.msg);
                return 1;
            }
            for (size_t q = 0; q < rt.plan.n_queries && r == 0; q++)
                bytes += strlen(rt.plan.queries[q].sql);
            if (r == 0)
                json_object_set_new(res, cases[c].name,
                                    json_pack("{s:s, s:i}", "plan",
                                              ferry_plan_kind_name(rt.plan.kind), "servers",
                                              (int)rt.plan.n_queries));
            ferry_routed_free(&rt);
        }
        qsort(lat, RUNS, sizeof lat[0], cmp_d);
        json_t *o = json_object_get(res, cases[c].name);
        json_object_set_new(o, "route_us_p50", json_real(lat[RUNS / 2]));
        json_object_set_new(o, "route_us_p99", json_real(lat[RUNS * 99 / 100]));
        json_object_set_new(o, "server_sql_bytes", json_integer((json_int_t)bytes));
    }
    json_object_set_new(root, "cases", res);
    if (long_in_list(tables, root))
        return 1;
    char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(4));
    printf("%s\n", s);
    free(s);
    json_decref(root);
    return 0;
}

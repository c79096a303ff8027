/* The demo's model and its checks (lib/flow/demo_int.h): tenant sizes and split counts (pure),
 * what the lab holds per tenant and slice, and the final verification against what was
 * ingested and what the catalog routes. */
#define _DEFAULT_SOURCE
#include "flow/demo_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/config.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

/* ---- the model: tenant sizes and splits (pure) ---------------------------------------------- */

/* Tenant k (1-based) writes about R / k^0.9 rows a day (at least R / 200 and 20): a few large
 * tenants and a long tail of small ones. Its split count grows with its size, 8 for the largest
 * (the split policy's idea: about R / 8 rows a day per slice), at least 1. */
int demo_build_model(demo *d, ferry_err *err)
{
    unsigned n = d->o.tenants;
    d->tenants = calloc(n, sizeof *d->tenants);
    d->slices = calloc((size_t)n * DEMO_MAX_SPLITS, sizeof *d->slices);
    if (!d->tenants || !d->slices)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int width = n >= 1000 ? 4 : 3;
    double r = (double)d->o.rows_per_day, floor_rows = fmax(20, r / 200);
    double per_slice = r / DEMO_MAX_SPLITS;
    for (unsigned k = 1; k <= n; k++) {
        demo_tenant *t = &d->tenants[k - 1];
        snprintf(t->name, sizeof t->name, "t%0*u", width, k);
        double rows = fmax(floor_rows, r / pow((double)k, 0.9));
        t->rows_per_day = (uint64_t)llround(rows);
        uint32_t s = (uint32_t)ceil(rows / per_slice - 1e-9);
        t->splits = s < 1 ? 1 : s > DEMO_MAX_SPLITS ? DEMO_MAX_SPLITS : s;
        t->first_slice = (uint32_t)d->n_slices;
        for (uint32_t i = 0; i < t->splits; i++) {
            d->slices[d->n_slices].tenant = k - 1;
            d->slices[d->n_slices++].split = i;
        }
        t->want_rows = t->rows_per_day * d->o.days;
        d->r->total_rows += t->want_rows;
    }
    /* the days: yesterday back to D days ago (UTC) */
    for (unsigned i = 0; i < d->o.days; i++) {
        time_t day = (time_t)(d->now - (int64_t)(i + 1) * 86400);
        struct tm tm;
        gmtime_r(&day, &tm);
        d->days[i] = (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
    }
    return FERRY_OK;
}

demo_tenant *demo_tenant_named(demo *d, const char *name)
{
    unsigned k;
    if (sscanf(name, "t%u", &k) != 1 || k < 1 || k > d->o.tenants ||
        strcmp(d->tenants[k - 1].name, name))
        return NULL;
    return &d->tenants[k - 1];
}

/* ---- checks ------------------------------------------------------------------------------- */

/* Per tenant and split over every node: rows, sum(v) (wrapping UInt64, as ClickHouse sums) and
 * where the rows are. before: records what was ingested; else fills got_* and holders. */
int demo_measure(demo *d, bool before, ferry_err *err)
{
    for (size_t i = 0; i < d->n_slices; i++)
        d->slices[i].holder[0] = 0;
    uint64_t *rows = calloc(d->o.tenants, sizeof *rows), *sums = calloc(d->o.tenants, sizeof *sums);
    if (!rows || !sums) {
        free(rows);
        free(sums);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    int rc = FERRY_OK;
    for (size_t ni = 0; !rc && ni < d->n_nodes; ni++) {
        ferry_ch_rows r = {0};
        rc = demo_sql_rows(&d->nodes[ni],
                      "SELECT tenant, split, count(), sum(v) FROM default." DEMO_TABLE
                      " GROUP BY tenant, split", &r, err);
        for (size_t i = 0; !rc && i < r.n_rows; i++) {
            demo_tenant *t = demo_tenant_named(d, ferry_ch_rows_get(&r, i, 0));
            uint64_t split = 0, c = 0, s = 0;
            if (!t || !ferry_parse_u64(ferry_ch_rows_get(&r, i, 1), &split) ||
                split >= t->splits || !ferry_parse_u64(ferry_ch_rows_get(&r, i, 2), &c) ||
                !ferry_parse_u64(ferry_ch_rows_get(&r, i, 3), &s)) {
                demo_verify_fail(d, "%s holds rows of an unknown slice %s/%s", d->nodes[ni].name,
                            ferry_ch_rows_get(&r, i, 0), ferry_ch_rows_get(&r, i, 1));
                continue;
            }
            size_t k = (size_t)(t - d->tenants);
            rows[k] += c;
            sums[k] += s;
            demo_slice *sl = &d->slices[t->first_slice + split];
            snprintf(sl->holder, sizeof sl->holder, "%s", sl->holder[0] ? "*" : d->nodes[ni].name);
        }
        ferry_ch_rows_free(&r);
    }
    for (unsigned k = 0; !rc && k < d->o.tenants; k++) {
        demo_tenant *t = &d->tenants[k];
        char *sum = before ? t->want_sum : t->got_sum;
        snprintf(sum, sizeof t->want_sum, "%llu", (unsigned long long)sums[k]);
        if (before && rows[k] != t->want_rows)
            demo_verify_fail(d, "ingest: tenant %s has %llu rows, %llu were generated", t->name,
                        (unsigned long long)rows[k], (unsigned long long)t->want_rows);
        if (!before)
            t->got_rows = rows[k];
    }
    free(rows);
    free(sums);
    return rc;
}

/* Rows are in the split ferry's split function gives for their key: a sample from every node
 * checked against ferry_split_of. */
static int check_splits(demo *d, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t ni = 0; !rc && ni < d->n_nodes; ni++) {
        ferry_ch_rows r = {0};
        rc = demo_sql_rows(&d->nodes[ni],
                      "SELECT tenant, split, toString(user) FROM default." DEMO_TABLE
                      " ORDER BY cityHash64(user) LIMIT 2000", &r, err);
        for (size_t i = 0; !rc && i < r.n_rows; i++) {
            demo_tenant *t = demo_tenant_named(d, ferry_ch_rows_get(&r, i, 0));
            const char *key = ferry_ch_rows_get(&r, i, 2);
            uint64_t split = 0;
            if (!t || !ferry_parse_u64(ferry_ch_rows_get(&r, i, 1), &split))
                continue;
            d->r->split_checked++;
            uint32_t want = ferry_split_of(key, strlen(key), t->splits);
            if (want != split)
                demo_verify_fail(d, "%s: a row of %s with user %s is in split %llu, its key says %u",
                            d->nodes[ni].name, t->name, key, (unsigned long long)split, want);
        }
        ferry_ch_rows_free(&r);
    }
    return rc;
}

/* After the rebalance: every tenant's rows and sum as ingested; every slice only on the shard
 * its route names (read again from the catalog). */
int demo_verify(demo *d, ferry_err *err)
{
    ferry_config cfg = {0};
    ferry_catalog *cat = NULL;
    ferry_record_list routes = {0};
    const char *url = NULL;
    int rc = demo_measure(d, false, err);
    if (!rc)
        rc = ferry_config_load(d->r->conf, &cfg, err);
    if (!rc)
        rc = ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, err);
    if (!rc)
        rc = ferry_catalog_open(url, &cat, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, err);
    for (size_t i = 0; !rc && i < routes.n; i++) {
        const ferry_route *r = &routes.items[i].u.route;
        char text[FERRY_SHARDS_TEXT_MAX];
        demo_tenant *t = demo_tenant_named(d, r->tenant);
        if (t && r->split < t->splits)
            snprintf(d->slices[t->first_slice + r->split].route, FERRY_LIST_MAX, "%s",
                     ferry_shard_set_str(&r->shards, text));
    }
    for (unsigned k = 0; !rc && k < d->o.tenants; k++) {
        demo_tenant *t = &d->tenants[k];
        if (t->got_rows != t->want_rows || strcmp(t->got_sum, t->want_sum))
            demo_verify_fail(d, "tenant %s: %llu rows, sum(v) %s; ingested %llu rows, sum(v) %s",
                        t->name, (unsigned long long)t->got_rows, t->got_sum,
                        (unsigned long long)t->want_rows, t->want_sum);
    }
    for (size_t i = 0; !rc && i < d->n_slices; i++) {
        const demo_slice *s = &d->slices[i];
        if (strcmp(s->holder, s->route))
            demo_verify_fail(d, "slice %s/%u is routed to %s but its rows are on %s",
                        d->tenants[s->tenant].name, s->split, s->route,
                        !s->holder[0] ? "no node" : !strcmp(s->holder, "*") ? "several nodes"
                                                                           : s->holder);
    }
    if (!rc)
        rc = check_splits(d, err);
    ferry_record_list_free(&routes);
    ferry_catalog_close(cat);
    ferry_config_free(&cfg);
    return rc;
}

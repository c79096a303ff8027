/* Routing a query with an explicit routing table: builds each server's served slices from
 * (tenant, split, shards) rows and plans the query. Pure; `ferry route-query` prints the
 * result and the router will call it with the catalog's routes. */
#include "sql_int.h"

#include <stdlib.h>
#include <string.h>

static int cmp_name(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

int ferry_route_query(const char *sql, size_t len, const ferry_sql_table *tables,
                      size_t n_tables, const char *const *local_names, const ferry_sql_route *routes,
                      size_t n_routes, ferry_routed *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    ferry_sql_slice **slices = NULL; /* per server */
    size_t *n_slices = NULL;
    ferry_sql_served *served = NULL;  /* per server x table */
    ferry_sql_target *targets = NULL;
    int rc = ferry_sql_analyze(sql, len, tables, n_tables, &out->analysis, err);
    if (rc)
        return rc;
    /* servers: every shard named */
    size_t cap = 0;
    for (size_t r = 0; r < n_routes; r++)
        cap += routes[r].n_shards;
    out->servers = calloc(cap + 1, sizeof *out->servers);
    if (!out->servers)
        goto oom;
    for (size_t r = 0; r < n_routes; r++)
        for (size_t s = 0; s < routes[r].n_shards; s++) {
            bool seen = false;
            for (size_t k = 0; k < out->n_servers && !seen; k++)
                seen = !strcmp(out->servers[k], routes[r].shards[s]);
            if (!seen && !(out->servers[out->n_servers++] = strdup(routes[r].shards[s])))
                goto oom;
        }
    if (!out->n_servers)
        return ferry_err_set(err, FERRY_EINVAL, "the routing table names no shard");
    qsort(out->servers, out->n_servers, sizeof *out->servers, cmp_name);
    slices = calloc(out->n_servers, sizeof *slices);
    n_slices = calloc(out->n_servers, sizeof *n_slices);
    served = calloc(out->n_servers * (n_tables ? n_tables : 1), sizeof *served);
    targets = calloc(out->n_servers, sizeof *targets);
    if (!slices || !n_slices || !served || !targets)
        goto oom;
    for (size_t s = 0; s < out->n_servers; s++) {
        slices[s] = calloc(n_routes + 1, sizeof **slices);
        if (!slices[s])
            goto oom;
    }
    for (size_t r = 0; r < n_routes; r++) {
        if (!routes[r].n_shards)
            continue;
        char *const *hit = bsearch(&routes[r].shards[0], out->servers, out->n_servers,
                                   sizeof *out->servers, cmp_name);
        size_t s = (size_t)(hit - out->servers);
        slices[s][n_slices[s]++] = (ferry_sql_slice){routes[r].tenant, routes[r].split};
    }
    for (size_t s = 0; s < out->n_servers; s++) {
        for (size_t t = 0; t < n_tables; t++)
            served[s * n_tables + t] = (ferry_sql_served){slices[s], n_slices[s]};
        targets[s] = (ferry_sql_target){&served[s * n_tables], local_names, false, NULL, 0, NULL};
    }
    if (out->analysis.understood)
        rc = ferry_sql_plan(&out->analysis, tables, targets, out->n_servers, &out->plan, err);
    else
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "cannot route this query: %s",
                           out->analysis.why);
    goto out;
oom:
    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory routing the query");
out:
    for (size_t s = 0; slices && s < out->n_servers; s++)
        free(slices[s]);
    free(slices);
    free(n_slices);
    free(served);
    free(targets);
    return rc;
}

void ferry_routed_free(ferry_routed *r)
{
    ferry_sql_analysis_free(&r->analysis);
    for (size_t s = 0; s < r->n_servers; s++)
        free(r->servers[s]);
    free(r->servers);
    ferry_read_plan_free(&r->plan);
    memset(r, 0, sizeof *r);
}

/* The write router's routing table at scale (run by bench_scale's router phase, in a process of
 * its own so that its peak memory is the router's): ferry_router_start over the catalog (the
 * initial load, its time and peak RSS), then five routing changes (a new tenant registered with
 * ferry_split_set) timed until the router's snapshot has their version (read incrementally:
 * only the tenants the routing change log names), a full read of the table with the router
 * running (rt_load), and the parts of the JSON route the router used before (the catalog's
 * routing JSON, the catalog's tenant list, a JSON parse). Prints one JSON line.
 *   usage: bench_router_load CONFIG CATALOG */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/catalog.h"
#include "ferry/router.h"
#include "ferry/split.h"
#include "router/router_int.h"

static const char *conf, *catalog_url;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const ferry_err *err)
{
    fprintf(stderr, "bench_router_load: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int count_row(const ferry_routing_row *row, void *arg, ferry_err *err)
{
    (void)row;
    (void)err;
    (*(size_t *)arg)++;
    return FERRY_OK;
}

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            v = atol(line + strlen(key) + 1);
    if (f)
        fclose(f);
    return v;
}

/* The router measured in a process of its own (this program run as `bench_scale --router CONF
 * CATALOG`), so its peak memory is the router's: start it (the initial load of the routing table),
 * time routing changes until it serves them, then where a reload's time goes: the catalog's
 * part (the routing JSON, the tenant list) and the router's (parsing the JSON). */
int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_router_load CONFIG CATALOG\n");
        return 2;
    }
    conf = argv[1];
    catalog_url = argv[2];
    ferry_err err = {0};
    long rss0 = status_kb("VmRSS:");
    ferry_router *r = NULL;
    ferry_router_options o = {.config_path = conf, .listen = "127.0.0.1:0"};
    double t0 = now_s();
    if (ferry_router_start(&o, &r, &err))
        die("ferry_router_start", &err);
    double load = now_s() - t0;
    long hwm = status_kb("VmHWM:"), rss = status_kb("VmRSS:");
    rt_snapshot *s = rt_snapshot_get(r);
    size_t tenants = s->n_tenants, routes = 0;
    for (size_t i = 0; i < s->n_tenants; i++)
        routes += s->tenants[i].n_routes;
    rt_snapshot_put(s);
    ferry_catalog *cat = NULL;
    if (ferry_catalog_open(catalog_url, &cat, &err))
        die("catalog", &err);
    double seen[5];
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "rt%d-%d", (int)getpid(), i);
        ferry_split_change ch;
        if (ferry_split_set(cat, name, 1, true, false, &ch, &err))
            die("ferry_split_set", &err);
        double tc = now_s();
        for (;;) {
            rt_snapshot *x = rt_snapshot_get(r);
            uint64_t v = x->version;
            rt_snapshot_put(x);
            if (v >= ch.routing_version)
                break;
            if (now_s() - tc > 600)
                die("the router never saw the change", NULL);
            usleep(500);
        }
        seen[i] = now_s() - tc;
    }
    /* a full read of the table as the first load does it, the router running (the changes
     * above were read incrementally: only the tenants the routing change log named) */
    uint64_t n_full = r->loads_full, n_incremental = r->loads_incremental;
    t0 = now_s();
    rt_snapshot *full = NULL;
    if (rt_load(r, cat, true, &full, &err))
        die("rt_load", &err);
    double t_full = now_s() - t0;
    rt_snapshot_put(full);
    /* of which the catalog's part: every tenant and route as rows, to a callback that counts */
    size_t rows = 0;
    t0 = now_s();
    if (ferry_catalog_routing_rows(cat, NULL, count_row, &rows, &err))
        die("routing rows", &err);
    double t_rows = now_s() - t0;
    ferry_router_stop(r);
    /* the parts of the JSON route (what the coordinator serves; routers no longer read it) */
    char *json = NULL;
    ferry_record_list tl = {0};
    t0 = now_s();
    if (ferry_catalog_routing_json(cat, NULL, -1, &json, &err))
        die("routing json", &err);
    double t_json = now_s() - t0;
    t0 = now_s();
    if (ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tl, &err))
        die("tenants", &err);
    double t_tenants = now_s() - t0;
    size_t n_tenants = tl.n;
    ferry_record_list_free(&tl);
    t0 = now_s();
    json_t *parsed = json_loads(json, 0, NULL);
    double t_parse = now_s() - t0;
    json_decref(parsed);
    size_t json_bytes = strlen(json);
    free(json);
    ferry_catalog_close(cat);
    qsort(seen, 5, sizeof *seen, dbl_cmp);
    double sm = seen[2];
    printf("{\"phase\":\"router\",\"tenants\":%zu,\"routes\":%zu,\"initial_load_s\":%.3f,"
           "\"rss_before_mb\":%.1f,\"rss_after_mb\":%.1f,\"peak_rss_mb\":%.1f,"
           "\"change_visible_ms_median\":%.1f,\"change_visible_ms_max\":%.1f,"
           "\"loads_full\":%llu,\"loads_incremental\":%llu,\"full_reload_running_s\":%.3f,"
           "\"catalog_rows_s\":%.3f,\"rows\":%zu,"
           "\"json_parts\":{\"catalog_routing_json_s\":%.3f,\"json_mb\":%.1f,"
           "\"catalog_tenant_list_s\":%.3f,\"tenant_list_mb\":%.1f,\"json_parse_s\":%.3f}}\n",
           tenants, routes, load, rss0 / 1024.0, rss / 1024.0, hwm / 1024.0, sm * 1000,
           seen[4] * 1000, (unsigned long long)n_full, (unsigned long long)n_incremental, t_full,
           t_rows, rows,
           t_json, json_bytes / 1048576.0, t_tenants,
           n_tenants * sizeof(ferry_record) / 1048576.0, t_parse);
    fflush(stdout);
    return 0;
}


/* How long after a repair need is recorded (a router acknowledged a write that a replica missed,
 * include/ferry/repair_need.h) another router stops reading that replica, and how long after the
 * record is cleared (the repair) it reads it again. A write router is started in this process
 * (ferry_router_start: the "other" router, with its own catalog session and routing-version
 * watcher); a second catalog session records a need for one slice of an rf >= 2 catalog with
 * ferry_repair_need_mark (what the acknowledging router does: missed = the route's first shard,
 * held = its second), then the router's snapshot is polled every 0.2 ms until the slice's route
 * marks that shard stale (rt_read_set then reads the other replica first); then
 * ferry_repair_need_clear and the same until the mark is gone. ROUNDS slices, each a different
 * tenant. Prints one JSON line: median and max of each, in ms, and the mark's own time.
 *   usage: bench_need_visible CONFIG CATALOG [ROUNDS]   (the catalog initialised with rf >= 2
 *          and tenants registered: bench/need_visible.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/catalog.h"
#include "ferry/repair_need.h"
#include "ferry/router.h"
#include "router/router_int.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const ferry_err *err)
{
    fprintf(stderr, "bench_need_visible: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The stale mask of tenant's split 0 in the router's current snapshot (0 when unknown). */
static uint32_t stale_of(ferry_router *r, const char *tenant)
{
    rt_snapshot *s = rt_snapshot_get(r);
    const rt_tenant *t = rt_find_tenant(s, tenant, strlen(tenant));
    uint32_t m = t && t->n_routes ? t->routes[0].stale : 0;
    rt_snapshot_put(s);
    return m;
}

/* Polls until the mask of tenant's split 0 is non-zero (want_stale) or zero; seconds waited. */
static double wait_stale(ferry_router *r, const char *tenant, bool want_stale)
{
    double t0 = now_s();
    while ((stale_of(r, tenant) != 0) != want_stale) {
        if (now_s() - t0 > 600)
            die("the router never saw the repair need change", NULL);
        usleep(200);
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: bench_need_visible CONFIG CATALOG [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 9;
    if (rounds < 1 || rounds > 1000)
        rounds = 9;
    ferry_err err = {0};
    ferry_router *r = NULL;
    ferry_router_options o = {.config_path = argv[1], .listen = "127.0.0.1:0"};
    double t0 = now_s();
    if (ferry_router_start(&o, &r, &err))
        die("ferry_router_start", &err);
    double load_s = now_s() - t0;
    ferry_catalog *cat = NULL;
    if (ferry_catalog_open(argv[2], &cat, &err))
        die("catalog", &err);
    /* the slices: split 0 of tenants spread over the table (names from the router's snapshot) */
    rt_snapshot *s = rt_snapshot_get(r);
    size_t tenants = s->n_tenants, cand = tenants < (size_t)rounds * 4 ? tenants : (size_t)rounds * 4;
    char(*names)[FERRY_NAME_MAX] = calloc(cand + 1, sizeof *names);
    for (size_t i = 0; names && i < cand; i++)
        snprintf(names[i], sizeof names[i], "%s", s->tenants[i * tenants / cand].name);
    rt_snapshot_put(s);
    double *mark = calloc((size_t)rounds, sizeof *mark), *seen = calloc((size_t)rounds, sizeof *seen),
           *gone = calloc((size_t)rounds, sizeof *gone);
    if (!mark || !seen || !gone)
        die("out of memory", NULL);
    int n = 0;
    for (size_t i = 0; names && i < cand && n < rounds; i++) {
        ferry_record rec;
        ferry_record_init(&rec, FERRY_REC_ROUTE);
        snprintf(rec.u.route.tenant, sizeof rec.u.route.tenant, "%s", names[i]);
        if (ferry_catalog_get(cat, &rec, &err))
            die("route", &err);
        const ferry_route *rt = &rec.u.route;
        ferry_shard_set missed = {0}, held = {0};
        if (ferry_shard_set_count(&rt->shards) < 2)
            continue; /* one replica: nothing to keep reads off */
        if (ferry_shard_set_add(&missed, ferry_shard_set_at(&rt->shards, 0), &err) ||
            ferry_shard_set_add(&held, ferry_shard_set_at(&rt->shards, 1), &err))
            die("ferry_shard_set_add", &err);
        if (stale_of(r, rt->tenant))
            die("a slice is marked stale before the bench recorded anything", NULL);
        t0 = now_s();
        if (ferry_repair_need_mark(cat, rt->tenant, 0, &missed, &held, &err))
            die("ferry_repair_need_mark", &err);
        mark[n] = now_s() - t0;
        seen[n] = wait_stale(r, rt->tenant, true);
        ferry_repair_need need;
        bool found = false;
        if (ferry_repair_need_get(cat, rt->tenant, 0, &need, &found, &err) || !found)
            die("ferry_repair_need_get", found ? &err : NULL);
        if (ferry_repair_need_clear(cat, &need, &err))
            die("ferry_repair_need_clear", &err);
        gone[n] = wait_stale(r, rt->tenant, false);
        n++;
    }
    if (!n)
        die("no slice with two replicas in the catalog (rf >= 2 needed)", NULL);
    ferry_router_stop(r);
    free(names);
    ferry_catalog_close(cat);
    qsort(mark, (size_t)n, sizeof *mark, dbl_cmp);
    qsort(seen, (size_t)n, sizeof *seen, dbl_cmp);
    qsort(gone, (size_t)n, sizeof *gone, dbl_cmp);
    printf("{\"bench\":\"need_visible\",\"backend\":\"%s\",\"tenants\":%zu,\"rounds\":%d,"
           "\"router_initial_load_s\":%.3f,\"mark_ms_median\":%.1f,"
           "\"visible_ms_median\":%.1f,\"visible_ms_max\":%.1f,"
           "\"cleared_visible_ms_median\":%.1f,\"cleared_visible_ms_max\":%.1f}\n",
           strncmp(argv[2], "zk:", 3) ? "sqlite" : "zk", tenants, n, load_s,
           mark[n / 2] * 1000, seen[n / 2] * 1000, seen[n - 1] * 1000, gone[n / 2] * 1000,
           gone[n - 1] * 1000);
    free(mark);
    free(seen);
    free(gone);
    return 0;
}

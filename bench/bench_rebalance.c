/* Rebalance benchmark: the plan for adding one shard to, and draining one shard of, a cluster of
 * 1,000,000 slices (the blog's tenant mix, as bench_placement) on 100 shards, computed
 * incrementally (ferry_pl_rebalance: only the slices that need a home are ranked, every other slice
 * scores its replicas' shards and the added one) and, side by side in the same run, by the full
 * computation (pl_rebalance with every slice/shard pair scored first, as before). Times
 * rebalance + ferry_pl_plan_build, checks that both layouts are identical, and prints one JSON
 * object.
 *   usage: bench_rebalance [SLICES [SHARDS [RF [HASH]]]]   default 1000000 100 1 xxh3 */
#include "ferry/placement.h"
#include "bench_common.h"
#include "placement/placement_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void die(const ferry_err *err)
{
    fprintf(stderr, "bench_rebalance: %s\n", err->msg);
    exit(1);
}

static void make_cluster(ferry_pl_cluster *c, int nshards, int skip, ferry_err *err)
{
    if (ferry_pl_cluster_init(c, "bench", err))
        die(err);
    for (int s = 0; s < nshards; s++) {
        char name[32];
        if (s == skip)
            continue;
        snprintf(name, sizeof name, "ch-shard-%03d", s);
        if (ferry_pl_cluster_add(c, name, s % 5 == 4 ? 2.0 : 1.0, 0, 0, err))
            die(err);
    }
    if (ferry_pl_cluster_finish(c, err))
        die(err);
}

/* One change timed both ways; prints a JSON member. */
static void run(const char *name, const ferry_pl_inventory *inv, const ferry_pl_cluster *oldc,
                const ferry_pl_layout *old, const ferry_pl_cluster *newc, const ferry_pl_opts *o,
                bool first)
{
    ferry_err err = {0, ""};
    double wall[2], cpu[2];
    size_t moved[2];
    uint64_t scored[2];
    ferry_pl_layout l[2];
    for (int full = 0; full < 2; full++) {
        ferry_pl_plan p;
        double t0 = now(), c0 = cpu_seconds();
        if (pl_rebalance(inv, oldc, old, newc, o, full == 1, &l[full], &err) ||
            ferry_pl_plan_build(old, &l[full], &p, &err))
            die(&err);
        wall[full] = now() - t0;
        cpu[full] = cpu_seconds() - c0;
        moved[full] = p.moved;
        scored[full] = l[full].scored;
        ferry_pl_plan_free(&p);
    }
    bool same = moved[0] == moved[1] &&
                !memcmp(l[0].replicas, l[1].replicas, inv->n * o->rf * sizeof *l[0].replicas);
    printf("%s{\"change\":\"%s\",\"moves\":%zu,\"incremental\":{\"wall_s\":%.3f,\"cpu_s\":%.3f,"
           "\"pairs_scored\":%llu},\"full\":{\"wall_s\":%.3f,\"cpu_s\":%.3f,\"pairs_scored\":%llu},"
           "\"identical\":%s}",
           first ? "" : ",", name, moved[0], wall[0], cpu[0], (unsigned long long)scored[0],
           wall[1], cpu[1], (unsigned long long)scored[1], same ? "true" : "false");
    fflush(stdout);
    ferry_pl_layout_free(&l[0]);
    ferry_pl_layout_free(&l[1]);
}

int main(int argc, char **argv)
{
    size_t want = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    int nshards = argc > 2 ? atoi(argv[2]) : 100;
    unsigned rf = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
    ferry_err err = {0, ""};
    if (argc > 4 && !ferry_hash_parse(argv[4], &o.hash)) {
        fprintf(stderr, "bench_rebalance: unknown hash %s\n", argv[4]);
        return 2;
    }
    if (argc <= 4)
        o.hash = FERRY_HASH_XXH3;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o.rf = rf;
    o.strict = false;
    o.threads = (unsigned)(cores > 0 ? cores : 1);
    ferry_pl_inventory inv;
    if (blog_mix_inventory(&inv, want, &err))
        die(&err);
    ferry_pl_cluster base, plus, minus;
    make_cluster(&base, nshards, -1, &err);
    make_cluster(&plus, nshards + 1, -1, &err);
    make_cluster(&minus, nshards, nshards / 2, &err);
    ferry_pl_layout old;
    double t0 = now();
    if (ferry_pl_place(&inv, &base, &o, &old, &err))
        die(&err);
    printf("{\"bench\":\"rebalance\",\"slices\":%zu,\"tenants\":%zu,\"shards\":%d,\"rf\":%u,"
           "\"hash\":\"%s\",\"threads\":%u,\"place_wall_s\":%.3f,\"runs\":[",
           inv.n, inv.n_tenants, nshards, rf, ferry_hash_name(o.hash), o.threads, now() - t0);
    run("add one shard", &inv, &base, &old, &plus, &o, true);
    run("drain one shard", &inv, &base, &old, &minus, &o, false);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("],\"peak_rss_mb\":%.1f}\n", ru.ru_maxrss / 1024.0);
    ferry_pl_layout_free(&old);
    ferry_pl_cluster_free(&base);
    ferry_pl_cluster_free(&plus);
    ferry_pl_cluster_free(&minus);
    ferry_pl_inventory_free(&inv);
    return 0;
}

/* Placement benchmark: 1,000,000 slices (the blog's tenant mix: 70% one split, 20% two, 10%
 * eight) on 100 shards, with both hashes, on one thread and on all cores. Times the whole of
 * ferry_pl_place (scoring every slice/shard pair, then the capacity/anti-affinity pass) and prints
 * one JSON object: slice-shard scores per second, wall and CPU time (CPU time shows how much
 * of the wall time the process actually ran when the machine is shared), peak memory
 * (ru_maxrss, for the process so far), and a digest of the layout (FNV-1a over the replica
 * shard indexes) so that runs of different versions can be checked for identical output.
 *   usage: bench_placement [SLICES [SHARDS [CASE]]]
 * CASE picks one run (xxh3, sha256, xxh3-distinct, xxh3-rf3, xxh3-zones-rf3) instead of all, e.g.
 * for profiling. xxh3-rf3 places 3 replicas per slice on the first cluster; xxh3-zones-rf3 the
 * same on its shards declared in 4 zones (the zone rule of docs/placement.md in play for every
 * replica). */
#include "ferry/placement.h"
#include "bench_common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void die(const ferry_err *err)
{
    fprintf(stderr, "bench_placement: %s\n", err->msg);
    exit(1);
}

static uint64_t layout_digest(const ferry_pl_layout *l)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < l->inv->n * l->rf; i++)
        h = (h ^ l->replicas[i]) * 1099511628211ULL;
    return h;
}

int main(int argc, char **argv)
{
    size_t want = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    int nshards = argc > 2 ? atoi(argv[2]) : 100;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ferry_err err = {0, ""};
    ferry_pl_inventory inv;
    if (blog_mix_inventory(&inv, want, &err))
        die(&err);

    /* Three clusters: 80 shards of weight 1 and 20 of weight 2 (two weight groups), every
     * weight distinct (no shortcut: a logarithm per pair), and the first in 4 zones. */
    ferry_pl_cluster clusters[3];
    const char *cluster_desc[3] = {"80% weight 1, 20% weight 2", "all weights distinct",
                                   "80% weight 1, 20% weight 2, 4 zones"};
    for (int c = 0; c < 3; c++) {
        if (ferry_pl_cluster_init(&clusters[c], "bench", &err))
            die(&err);
        for (int s = 0; s < nshards; s++) {
            char name[32], zone[16];
            snprintf(name, sizeof name, "ch-shard-%03d", s);
            snprintf(zone, sizeof zone, "az-%d", s % 4);
            double w = c != 1 ? (s % 5 == 4 ? 2.0 : 1.0) : 1.0 + s / 128.0;
            if (ferry_pl_cluster_add_zoned(&clusters[c], name, w, 0, c == 2 ? zone : NULL, 0, &err))
                die(&err);
        }
        if (ferry_pl_cluster_finish(&clusters[c], &err))
            die(&err);
    }

    struct {
        ferry_hash hash;
        int cluster;
        const char *name;
        unsigned rf;
    } cases[] = {{FERRY_HASH_XXH3, 0, "xxh3", 1},
                 {FERRY_HASH_SHA256, 0, "sha256", 1},
                 {FERRY_HASH_XXH3, 1, "xxh3-distinct", 1},
                 {FERRY_HASH_XXH3, 0, "xxh3-rf3", 3},
                 {FERRY_HASH_XXH3, 2, "xxh3-zones-rf3", 3}};
    const char *only = argc > 3 ? argv[3] : NULL;
    printf("{\"bench\":\"placement\",\"slices\":%zu,\"tenants\":%zu,\"shards\":%d,\"cores\":%ld,"
           "\"runs\":[",
           inv.n, inv.n_tenants, nshards, cores);
    bool first = true;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (only && strcmp(only, cases[k].name) != 0)
            continue;
        uint64_t digest1 = 0;
        for (int pass = 0; pass < 2; pass++) {
            unsigned threads = pass == 0 ? 1 : (unsigned)(cores > 0 ? cores : 1);
            ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
            o.hash = cases[k].hash;
            o.threads = threads;
            o.rf = cases[k].rf;
            ferry_pl_layout l;
            double t0 = now(), c0 = cpu_seconds();
            if (ferry_pl_place(&inv, &clusters[cases[k].cluster], &o, &l, &err))
                die(&err);
            double wall = now() - t0, cpu = cpu_seconds() - c0;
            uint64_t d = layout_digest(&l);
            if (pass == 0)
                digest1 = d;
            double pairs = (double)inv.n * nshards;
            printf("%s{\"case\":\"%s\",\"hash\":\"%s\",\"weights\":\"%s\",\"rf\":%u,"
                   "\"threads\":%u,\"pairs\":%.0f,"
                   "\"wall_s\":%.3f,\"cpu_s\":%.3f,\"scores_per_s\":%.0f,\"peak_rss_mb\":%.1f,"
                   "\"zone_relaxed\":%zu,"
                   "\"same_as_one_thread\":%s,\"layout_digest\":\"%016" PRIx64 "\"}",
                   first ? "" : ",", cases[k].name, ferry_hash_name(o.hash),
                   cluster_desc[cases[k].cluster], o.rf, threads, pairs, wall, cpu, pairs / wall,
                   max_rss_kb() / 1024.0, l.zone_relaxed, d == digest1 ? "true" : "false", d);
            fflush(stdout);
            first = false;
            ferry_pl_layout_free(&l);
        }
    }
    printf("]}\n");
    for (int c = 0; c < 3; c++)
        ferry_pl_cluster_free(&clusters[c]);
    ferry_pl_inventory_free(&inv);
    return 0;
}

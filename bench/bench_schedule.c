/* Schedule benchmark: a rebalance of about 25,000 slices on 10, 30 and 100 shards, planned by
 * placement (ferry_pl_rebalance + ferry_pl_plan_build) and run in simulation under per-shard limits
 * (ferry_sched_simulate: at most N moves reading from or writing to one shard at a time), each
 * move taking the time the cost model gives it. Two changes per cluster size S: S/10 shards added
 * (the moves all write to the new shards) and S/10 shards drained (they all read from the drained
 * ones). The inventory is sized so that each change moves about 25,000 slices: 11 x 25,000
 * slices in the blog's tenant mix, sizes uniform in 1 MB .. 10 GB.
 *
 * The cost model of one move (docs/benchmarks.md, "Rebalance schedule", says where the numbers
 * come from): a slice holds DAYS daily partitions, HOT of them hot (their bytes copied), the rest
 * cold (pointer files: a cost per part, not per byte);
 *   seconds = fixed + parts x per_part + hot_bytes / hot_rate,  parts = DAYS,
 *   hot_bytes = bytes x HOT / DAYS.
 *   usage: bench_schedule [FIXED_S PER_PART_S HOT_MB_PER_S [DAYS HOT]]
 * Prints one JSON line per (S, change, N) and the time to compute each schedule. */
#include "ferry/placement.h"
#include "bench_common.h"
#include "ferry/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const ferry_err *err)
{
    fprintf(stderr, "bench_schedule: %s\n", err->msg);
    exit(1);
}

static double fixed_s = 1.0, per_part_s = 0.55, hot_mbps = 100, days = 30, hot_days = 3;

static double move_seconds(uint64_t bytes)
{
    return fixed_s + days * per_part_s + (double)bytes * hot_days / days / (hot_mbps * 1e6);
}

static void cluster(ferry_pl_cluster *c, int n, ferry_err *err)
{
    if (ferry_pl_cluster_init(c, "bench", err))
        die(err);
    for (int s = 0; s < n; s++) {
        char name[32];
        snprintf(name, sizeof name, "ch-%03d", s);
        if (ferry_pl_cluster_add(c, name, 1.0, 0, 0, err))
            die(err);
    }
    if (ferry_pl_cluster_finish(c, err))
        die(err);
}

/* The plan from old to new, simulated with per_shard in {1, 2, 4}. */
static void run(int shards, const char *change, const ferry_pl_inventory *inv,
                const ferry_pl_cluster *oldc, const ferry_pl_cluster *newc, const ferry_pl_opts *o)
{
    ferry_err err = {0, ""};
    ferry_pl_layout old, nl;
    ferry_pl_plan p;
    if (ferry_pl_place(inv, oldc, o, &old, &err))
        die(&err);
    double t0 = now();
    if (ferry_pl_rebalance(inv, oldc, &old, newc, o, &nl, &err) ||
        ferry_pl_plan_build(&old, &nl, &p, &err))
        die(&err);
    double plan_s = now() - t0;
    /* shards of the union by name: the new cluster's, then the ones only the old one has */
    ferry_sched_move *sm = calloc(p.moved + 1, sizeof *sm);
    double *secs = calloc(p.moved + 1, sizeof *secs), total = 0;
    for (size_t i = 0; i < p.moved; i++) {
        long f = ferry_pl_cluster_find(newc, p.moves[i].from);
        if (f < 0)
            f = (long)newc->n + ferry_pl_cluster_find(oldc, p.moves[i].from);
        sm[i].from = (uint32_t)f;
        sm[i].to = (uint32_t)ferry_pl_cluster_find(newc, p.moves[i].to);
        sm[i].slice = p.moves[i].slice;
        secs[i] = move_seconds(p.moves[i].bytes);
        total += secs[i];
    }
    for (unsigned per = 1; per <= 4; per *= 2) {
        double makespan;
        size_t peak;
        t0 = now();
        if (ferry_sched_simulate(sm, p.moved, newc->n + oldc->n, per, 0, secs, NULL, &makespan,
                                 &peak, &err))
            die(&err);
        double sched_s = now() - t0;
        printf("{\"shards\":%d,\"change\":\"%s\",\"slices\":%zu,\"moves\":%zu,"
               "\"moved_gb\":%.1f,\"plan_s\":%.3f,\"per_shard\":%u,\"schedule_s\":%.3f,"
               "\"peak_running\":%zu,\"move_hours_total\":%.1f,\"makespan_hours\":%.2f}\n",
               shards, change, inv->n, p.moved, (double)p.moved_bytes / 1e9, plan_s, per,
               sched_s, peak, total / 3600, makespan / 3600);
        fflush(stdout);
    }
    free(sm);
    free(secs);
    ferry_pl_plan_free(&p);
    ferry_pl_layout_free(&nl);
    ferry_pl_layout_free(&old);
}

int main(int argc, char **argv)
{
    if (argc > 3) {
        fixed_s = atof(argv[1]);
        per_part_s = atof(argv[2]);
        hot_mbps = atof(argv[3]);
    }
    if (argc > 5) {
        days = atof(argv[4]);
        hot_days = atof(argv[5]);
    }
    ferry_err err = {0, ""};
    ferry_pl_inventory inv;
    size_t want = 11 * 25000;
    if (blog_mix_inventory(&inv, want, &err))
        die(&err);
    printf("{\"bench\":\"schedule\",\"model\":{\"fixed_s\":%g,\"per_part_s\":%g,"
           "\"hot_mb_per_s\":%g,\"days\":%g,\"hot_days\":%g}}\n",
           fixed_s, per_part_s, hot_mbps, days, hot_days);
    ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
    o.hash = FERRY_HASH_XXH3;
    o.threads = 2;
    o.strict = false;
    static const int sizes[] = {10, 30, 100};
    for (int k = 0; k < 3; k++) {
        int s = sizes[k], extra = s / 10;
        ferry_pl_cluster small, big;
        cluster(&small, s, &err);
        cluster(&big, s + extra, &err);
        run(s, "add S/10", &inv, &small, &big, &o);
        run(s + extra, "drain S/10", &inv, &big, &small, &o);
        ferry_pl_cluster_free(&small);
        ferry_pl_cluster_free(&big);
    }
    ferry_pl_inventory_free(&inv);
    return 0;
}

/* The catalog-wide reads of the rebalancing plan and of the cluster status on an existing
 * catalog (e.g. the one bench/scale.sh leaves behind: DIR/c.db), each the new way (the catalog's
 * compact scans, ferry/catalog_scan.h) and the old way (every record decoded), the plans compared
 * move by move, and the plan as the autopilot computes it (with a skew of 0.2: one more pass for
 * the shards' fill; the same plan on a catalog without capacities). Prints one JSON line; the
 * best of REPEAT runs of each (default 3).
 * usage: bench_plan_scan CATALOG_URL [REPEAT [new]]   (new: the new ways only, for profiling) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <malloc.h>

#include "ferry/catalog.h"
#include "ferry/catalog_scan.h"
#include "ferry/cluster_status.h"
#include "ferry/move.h"
#include "flow/move_int.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of this process: on a loaded machine a steadier figure than the wall clock. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of the calling thread: with the scan's second thread (the routes, on SQLite), the
 * plan's critical path on a machine with a core free for it. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const ferry_err *err)
{
    fprintf(stderr, "bench_plan_scan: %s: %s\n", what, err->msg);
    exit(1);
}

static int count_slice(const ferry_slice_row *r, void *arg, ferry_err *err)
{
    (void)err;
    size_t *n = arg;
    n[0]++;
    n[1] += r->placement != NULL;
    n[2] += r->shards != NULL;
    return FERRY_OK;
}

/* The names of the catalog's shards (the view's shard table starts with them): *names
 * malloc'ed, borrowing from *shards; the caller frees both. */
static void shard_names(ferry_catalog *cat, ferry_record_list *shards, const char ***names)
{
    ferry_err err = {0};
    if (ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, shards, &err))
        die("shards", &err);
    if (!(*names = calloc(shards->n + 1, sizeof **names)))
        die("out of memory", &err);
    for (size_t i = 0; i < shards->n; i++)
        (*names)[i] = shards->items[i].u.shard.name;
}

static bool same_plan(const ferry_rebalance_plan *a, const ferry_rebalance_plan *b)
{
    if (a->n_moves != b->n_moves || a->moved_bytes != b->moved_bytes ||
        a->total_bytes != b->total_bytes || a->slices != b->slices)
        return false;
    for (size_t i = 0; i < a->n_moves; i++) {
        const ferry_planned_move *x = &a->moves[i], *y = &b->moves[i];
        if (x->kind != y->kind || strcmp(x->tenant, y->tenant) || x->split != y->split ||
            strcmp(x->from, y->from) || strcmp(x->to, y->to) || x->bytes != y->bytes)
            return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_plan_scan CATALOG_URL [REPEAT]\n");
        return 2;
    }
    int repeat = argc > 2 ? atoi(argv[2]) : 3;
    bool only_new = argc > 3 && !strcmp(argv[3], "new");
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    if (ferry_catalog_open(argv[1], &cat, &err))
        die("catalog", &err);
    double scan = 1e9, view = 1e9, view_rec = 0, plan = 1e9, plan_rec = 0, status = 1e9;
    double scan_cpu = 1e9, plan_cpu = 1e9, status_cpu = 1e9, plan_rec_cpu = 0;
    double plan_thread = 1e9, status_thread = 1e9;
    size_t counts[3] = {0}, view_heap = 0; /* the view's heap bytes (glibc's mallinfo2) */
    bool same = true;
    ferry_record_list shards = {0};
    const char **names = NULL;
    shard_names(cat, &shards, &names);
    ferry_rebalance_plan p = {0}, q = {0};
    for (int i = 0; i < repeat; i++) {
        double t0 = now_s(), c0 = cpu_s();
        memset(counts, 0, sizeof counts);
        if (ferry_catalog_scan_slices(cat, count_slice, counts, &err))
            die("scan", &err);
        double t1 = now_s();
        scan_cpu = cpu_s() - c0 < scan_cpu ? cpu_s() - c0 : scan_cpu;
        size_t heap0 = mallinfo2().uordblks + mallinfo2().hblkhd;
        mv_view v;
        if (mv_view_read(cat, names, shards.n, &v, &err))
            die("view", &err);
        double t2 = now_s();
        view_heap = mallinfo2().uordblks + mallinfo2().hblkhd - heap0;
        mv_view_free(&v);
        double c2 = cpu_s(), h2 = thread_cpu_s();
        if (ferry_rebalance_plan_compute(cat, &p, &err))
            die("plan", &err);
        double t3 = now_s(), c3 = cpu_s(), h3 = thread_cpu_s();
        ferry_cluster_status cs;
        if (ferry_cluster_status_read(cat, 10, &cs, &err))
            die("status", &err);
        double t4 = now_s(), c4 = cpu_s(), h4 = thread_cpu_s();
        plan_thread = h3 - h2 < plan_thread ? h3 - h2 : plan_thread;
        status_thread = h4 - h3 < status_thread ? h4 - h3 : status_thread;
        plan_cpu = c3 - c2 < plan_cpu ? c3 - c2 : plan_cpu;
        status_cpu = c4 - c3 < status_cpu ? c4 - c3 : status_cpu;
        ferry_cluster_status_free(&cs);
        scan = t1 - t0 < scan ? t1 - t0 : scan;
        view = t2 - t1 < view ? t2 - t1 : view;
        plan = t3 - t2 < plan ? t3 - t2 : plan;
        status = t4 - t3 < status ? t4 - t3 : status;
        if (i + 1 < repeat)
            ferry_rebalance_plan_free(&p);
    }
    /* the autopilot's plan, with its skew (default 0.2): one more pass over the view for the
     * shards' fill; without capacities (the bench's catalog) nothing is evened and the plan must
     * be the same */
    double plan_skew = 1e9, plan_skew_thread = 1e9;
    bool skew_same = true;
    for (int i = 0; i < repeat; i++) {
        ferry_rebalance_plan k = {0};
        double t0 = now_s(), h0 = thread_cpu_s();
        if (ferry_rebalance_plan_compute_skew(cat, 0.2, &k, &err))
            die("plan (skew)", &err);
        double t1 = now_s(), h1 = thread_cpu_s();
        plan_skew = t1 - t0 < plan_skew ? t1 - t0 : plan_skew;
        plan_skew_thread = h1 - h0 < plan_skew_thread ? h1 - h0 : plan_skew_thread;
        skew_same = skew_same && !k.evened && same_plan(&p, &k);
        ferry_rebalance_plan_free(&k);
    }
    for (int i = 0; i < (only_new ? 0 : 1); i++) {
        double t0 = now_s();
        mv_view v;
        if (mv_view_read_records(cat, names, shards.n, &v, &err))
            die("view (records)", &err);
        double t1 = now_s();
        mv_view_free(&v);
        double c1 = cpu_s();
        if (mv_plan_compute_records(cat, &q, &err))
            die("plan (records)", &err);
        double t2 = now_s();
        plan_rec_cpu = cpu_s() - c1;
        view_rec = t1 - t0;
        plan_rec = t2 - t1;
    }
    same = only_new || same_plan(&p, &q);
    char load[64] = "?";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fgets(load, sizeof load, la)) {
            char *sp = load;
            for (int k = 0; k < 3 && sp; k++)
                sp = strchr(sp + 1, ' ');
            if (sp)
                *sp = '\0';
        }
        fclose(la);
    }
    printf("{\"slice_keys\":%zu,\"slices\":%zu,\"routes\":%zu,\"scan_s\":%.3f,\"view_s\":%.3f,"
           "\"view_records_s\":%.3f,\"plan_s\":%.3f,\"plan_records_s\":%.3f,\"moves\":%zu,"
           "\"plans_identical\":%s,\"status_s\":%.3f,\"plan_cpu_s\":%.3f,"
           "\"plan_records_cpu_s\":%.3f,\"status_cpu_s\":%.3f,\"scan_cpu_s\":%.3f,"
           "\"plan_thread_cpu_s\":%.3f,\"status_thread_cpu_s\":%.3f,\"view_heap_mb\":%.1f,"
           "\"plan_skew_s\":%.3f,\"plan_skew_thread_cpu_s\":%.3f,\"plan_skew_identical\":%s,"
           "\"load_average\":\"%s\"}\n",
           counts[0], counts[1], counts[2], scan, view, view_rec, plan, plan_rec, p.n_moves,
           same ? "true" : "false", status, plan_cpu, plan_rec_cpu, status_cpu, scan_cpu,
           plan_thread, status_thread, (double)view_heap / 1e6, plan_skew, plan_skew_thread,
           skew_same ? "true" : "false", load);
    ferry_rebalance_plan_free(&p);
    ferry_rebalance_plan_free(&q);
    free(names);
    ferry_record_list_free(&shards);
    ferry_catalog_close(cat);
    return same ? 0 : 1;
}

/* The floor of a plan's and a status's reads on a ZooKeeper catalog (docs/benchmarks.md,
 * "ZooKeeper: records without a copy each"): the bare read of every document they need (the
 * tenant records and the tenant documents of slices and routes: listed, then fetched by
 * multiRead, nothing parsed) against the plan (ferry_rebalance_plan_compute) and the cluster
 * status (ferry_cluster_status_read), each with its wall time, this process's CPU and, given
 * ZooKeeper's PID, the server's CPU (user + system from /proc, which a loaded machine does not
 * inflate the way it does wall time), the bare read of each folder on its own (what a
 * document and a byte cost ZooKeeper), and the three folders read side by side, each by a thread
 * with a catalog handle (a ZooKeeper session) of its own: what reading the folders in parallel
 * instead of one after another could save a plan. One JSON line per run.
 * usage: bench_zk_floor ZK_CATALOG_URL [REPEAT [ZK_PID]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog/zk_int.h"
#include "ferry/cluster_status.h"
#include "ferry/move.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ZooKeeper's CPU seconds so far (user + system of pid); 0 when unknown. */
static double zk_cpu_s(long pid)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct mark {
    double wall, cpu, zk;
} mark;

static mark mark_now(long pid)
{
    return (mark){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID), zk_cpu_s(pid)};
}

static void print_phase(const char *name, mark a, mark b, bool last)
{
    printf("\"%s\":{\"wall_s\":%.3f,\"cpu_s\":%.3f,\"zk_cpu_s\":%.2f}%s", name, b.wall - a.wall,
           b.cpu - a.cpu, b.zk - a.zk, last ? "" : ",");
}

/* One folder's bare read on a catalog handle of its own (parallel_read). */
typedef struct folder_read {
    ferry_catalog *cat;
    const char *folder;
    size_t docs;
    double wall;
    int rc;
    ferry_err err;
} folder_read;

static void *folder_read_main(void *arg)
{
    folder_read *fr = arg;
    cat_flat flat = {0};
    double t0 = clock_s(CLOCK_MONOTONIC);
    fr->rc = zk_phys_scan_flat(fr->cat, fr->folder, 1, &flat, &fr->err);
    fr->wall = clock_s(CLOCK_MONOTONIC) - t0;
    fr->docs = flat.n;
    cat_flat_free(&flat);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_zk_floor ZK_CATALOG_URL [REPEAT [ZK_PID]]\n");
        return 2;
    }
    int repeat = argc > 2 ? atoi(argv[2]) : 1;
    long pid = argc > 3 ? atol(argv[3]) : 0;
    ferry_catalog *cat = NULL;
    ferry_err err = {0};
    int rc = 1;
    if (ferry_catalog_open(argv[1], &cat, &err)) {
        fprintf(stderr, "bench_zk_floor: open: %s\n", err.msg);
        goto out;
    }
    if (strcmp(cat->ops->name, "zk")) {
        fprintf(stderr, "bench_zk_floor: %s is not a ZooKeeper catalog\n", argv[1]);
        goto out;
    }
    static const char *const folders[] = {"tenants", "slice_docs", "route_docs"};
    for (int r = 0; r < repeat; r++) {
        size_t docs = 0, bytes = 0, f_docs[3] = {0}, f_bytes[3] = {0};
        mark m0 = mark_now(pid), f_mark[4];
        f_mark[0] = m0;
        for (size_t f = 0; f < 3; f++) {
            cat_flat flat = {0};
            if (zk_phys_scan_flat(cat, folders[f], 1, &flat, &err)) {
                fprintf(stderr, "bench_zk_floor: reading %s: %s\n", folders[f], err.msg);
                cat_flat_free(&flat);
                goto out;
            }
            f_docs[f] = flat.n;
            for (size_t i = 0; i < flat.n; i++)
                f_bytes[f] += flat.v[i].doc_len;
            docs += f_docs[f];
            bytes += f_bytes[f];
            cat_flat_free(&flat);
            f_mark[f + 1] = mark_now(pid);
        }
        mark m1 = mark_now(pid);
        ferry_rebalance_plan p = {0};
        if (ferry_rebalance_plan_compute(cat, &p, &err)) {
            fprintf(stderr, "bench_zk_floor: plan: %s\n", err.msg);
            goto out;
        }
        size_t moves = p.n_moves;
        ferry_rebalance_plan_free(&p);
        mark m2 = mark_now(pid);
        ferry_cluster_status cs;
        if (ferry_cluster_status_read(cat, 10, &cs, &err)) {
            fprintf(stderr, "bench_zk_floor: status: %s\n", err.msg);
            goto out;
        }
        ferry_cluster_status_free(&cs);
        mark m3 = mark_now(pid);
        /* the three folders side by side, a handle (a session) and a thread each */
        folder_read fr[3] = {{0}};
        pthread_t th[3];
        bool started[3] = {false};
        for (size_t f = 0; f < 3; f++) {
            fr[f].folder = folders[f];
            if (ferry_catalog_open(argv[1], &fr[f].cat, &err)) {
                fprintf(stderr, "bench_zk_floor: open: %s\n", err.msg);
                for (size_t k = 0; k < f; k++)
                    ferry_catalog_close(fr[k].cat);
                goto out;
            }
        }
        mark m4 = mark_now(pid);
        for (size_t f = 0; f < 3; f++)
            started[f] = pthread_create(&th[f], NULL, folder_read_main, &fr[f]) == 0;
        for (size_t f = 0; f < 3; f++)
            if (started[f])
                pthread_join(th[f], NULL);
            else
                folder_read_main(&fr[f]);
        mark m5 = mark_now(pid);
        for (size_t f = 0; f < 3; f++)
            ferry_catalog_close(fr[f].cat);
        for (size_t f = 0; f < 3; f++)
            if (fr[f].rc || fr[f].docs != f_docs[f]) {
                fprintf(stderr, "bench_zk_floor: side by side, %s: %s (%zu documents, %zu "
                        "before)\n", folders[f], fr[f].rc ? fr[f].err.msg : "changed",
                        fr[f].docs, f_docs[f]);
                goto out;
            }
        char load[64] = "";
        FILE *lf = fopen("/proc/loadavg", "r");
        if (lf) {
            if (!fgets(load, sizeof load, lf))
                load[0] = '\0';
            fclose(lf);
        }
        load[strcspn(load, "\n")] = '\0';
        printf("{\"run\":%d,\"documents\":%zu,\"bytes\":%zu,\"moves\":%zu,", r, docs, bytes,
               moves);
        print_phase("bare_read", m0, m1, false);
        for (size_t f = 0; f < 3; f++) { /* each folder: what its documents and bytes cost */
            printf("\"%s\":{\"documents\":%zu,\"bytes\":%zu,", folders[f], f_docs[f],
                   f_bytes[f]);
            print_phase("read", f_mark[f], f_mark[f + 1], true);
            printf("},");
        }
        print_phase("plan", m1, m2, false);
        print_phase("status", m2, m3, false);
        print_phase("side_by_side_read", m4, m5, false);
        printf("\"side_by_side_walls_s\":[%.3f,%.3f,%.3f],", fr[0].wall, fr[1].wall, fr[2].wall);
        printf("\"load_average\":\"%s\"}\n", load);
        fflush(stdout);
    }
    rc = 0;
out:
    ferry_catalog_close(cat);
    return rc;
}

/* The floor of a plan's and a status's reads on a ZooKeeper catalog (docs/benchmarks.md,
 * "ZooKeeper: records without a copy each"): the bare read of every document they need (the
 * tenant records and the tenant documents of slices and routes: listed, then fetched by
 * multiRead, nothing parsed) against the plan (ferry_rebalance_plan_compute) and the cluster
 * status (ferry_cluster_status_read), each with its wall time, this process's CPU and, given
 * ZooKeeper's PID, the server's CPU (user + system from /proc, which a loaded machine does not
 * inflate the way it does wall time), the bare read of each folder on its own (what a
 * document and a byte cost ZooKeeper), and the three folders read side by side, each by a thread
 * with a catalog handle (a ZooKeeper session) of its own: what reading the folders in parallel
 * instead of one after another could save a plan. One JSON line per run. With
 * FERRY_BENCH_PACKS=1, one more line: the floor of a compact layout not built (one document per
 * tenant holding its slices and routes as lines of tab-separated fields, as the SQLite
 * catalog's slice packs): such documents are written beside the catalog (bench_packs/TENANT,
 * each line made of a slice's own split, version, bytes, rows and placement), read bare with
 * the tenant records, and removed.
 * usage: bench_zk_floor ZK_CATALOG_URL [REPEAT [ZK_PID]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog/zk_int.h"
#include "ferry/buf.h"
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

/* One folder's bare read on a catalog handle of its own (the side-by-side read). */
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

/* The value of "key": in a record's JSON document (a number or a string's characters), for the
 * pack lines; "" when absent. */
static void json_field(const char *doc, const char *key, char *out, size_t outsz)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(doc, pat);
    size_t n = 0;
    if (p) {
        p += strlen(pat);
        if (*p == '"')
            p++;
        while (p[n] && p[n] != '"' && p[n] != ',' && p[n] != '}')
            n++;
    }
    snprintf(out, outsz, "%.*s", (int)(n < outsz ? n : outsz - 1), p ? p : "");
}

/* Runs m (its data kept by the caller) and empties it; 0 or ZooKeeper's error. */
static int run_multi(cat_backend *be, zmulti *m)
{
    int zrc = m->n ? zoo_multi(be->zh, m->n, m->ops, m->res) : ZOK;
    m->n = 0;
    return zrc;
}

/* The compact layout's floor (see the top): writes a pack per tenant document of slice_docs,
 * reads tenants + bench_packs bare, prints one JSON line, removes the packs. */
static int packs_floor(ferry_catalog *cat, long pid, ferry_err *err)
{
    cat_backend *be = cat->be;
    cat_flat sl = {0}, rd = {0};
    zmulti m = {0};
    char **texts = NULL;
    size_t nt = 0, pack_bytes = 0, slices = 0;
    int rc = zk_phys_scan_flat(cat, "slice_docs", 1, &sl, err);
    if (!rc && (zmulti_init(&m, 500) || !(texts = calloc(500, sizeof *texts))))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc) {
        zm_create(&m, be, "bench_packs", "", 0, 0, -1);
        int zrc = run_multi(be, &m);
        if (zrc != ZOK && zrc != ZNODEEXISTS)
            rc = ferry_err_set(err, FERRY_EIO, "creating bench_packs: %s", zerror(zrc));
    }
    double w0 = clock_s(CLOCK_MONOTONIC);
    for (size_t i = 0; !rc && i < sl.n; i++) {
        const cat_span *sp = &sl.v[i];
        zdoc d = {0};
        if (zdoc_decode(sp->doc, sp->doc_len, &d)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "slice_docs/%.*s is not a tenant document",
                               (int)sp->name_len, sp->name);
            break;
        }
        ferry_buf b = FERRY_BUF_INIT;
        for (size_t k = 0; k < d.n; k++) {
            char doc[4096], bytes[32], rows[32], placement[512];
            snprintf(doc, sizeof doc, "%.*s", (int)d.v[k].doc_len, d.v[k].doc);
            json_field(doc, "bytes", bytes, sizeof bytes);
            json_field(doc, "rows", rows, sizeof rows);
            json_field(doc, "placement", placement, sizeof placement);
            /* SPLIT VERSION BYTES ROWS PLACEMENT ROUTE_VERSION SHARDS TENANT(empty) */
            ferry_buf_printf(&b, "%u\t%lld\t%s\t%s\t%s\t%lld\t%s\t\n", d.v[k].split,
                             (long long)d.v[k].version, bytes, rows, placement,
                             (long long)d.v[k].version, placement);
        }
        slices += d.n;
        zdoc_free(&d);
        char rel[PATH_MAX_LEN];
        snprintf(rel, sizeof rel, "bench_packs/%.*s", (int)sp->name_len, sp->name);
        texts[nt] = b.data ? b.data : strdup("");
        pack_bytes += b.len;
        zm_create(&m, be, rel, texts[nt], (int)b.len, 0, -1);
        nt++;
        if (nt == 500 || i + 1 == sl.n) {
            int zrc = run_multi(be, &m);
            for (size_t k = 0; k < nt; k++)
                free(texts[k]);
            nt = 0;
            if (zrc != ZOK)
                rc = ferry_err_set(err, FERRY_EIO, "writing packs: %s", zerror(zrc));
        }
    }
    double written_s = clock_s(CLOCK_MONOTONIC) - w0;
    cat_flat_free(&sl);
    size_t docs[2] = {0}, bytes[2] = {0};
    mark a = mark_now(pid), b = a;
    static const char *const read_folders[] = {"tenants", "bench_packs"};
    for (int f = 0; !rc && f < 2; f++) {
        rc = zk_phys_scan_flat(cat, read_folders[f], 1, &rd, err);
        docs[f] = rd.n;
        for (size_t i = 0; i < rd.n; i++)
            bytes[f] += rd.v[i].doc_len;
        cat_flat_free(&rd);
    }
    b = mark_now(pid);
    if (!rc) {
        printf("{\"packs\":{\"slices\":%zu,\"documents\":%zu,\"bytes\":%zu,"
               "\"written_s\":%.1f},\"tenants\":{\"documents\":%zu,\"bytes\":%zu},",
               slices, docs[1], bytes[1], written_s, docs[0], bytes[0]);
        print_phase("bare_read_tenants_and_packs", a, b, true);
        printf("}\n");
        fflush(stdout);
    }
    /* remove them again: the catalog is left as it was */
    cat_flat names = {0};
    int drc = zk_phys_scan_flat(cat, "bench_packs", 1, &names, err);
    for (size_t i = 0; !drc && i < names.n; i++) {
        char rel[PATH_MAX_LEN];
        snprintf(rel, sizeof rel, "bench_packs/%.*s", (int)names.v[i].name_len,
                 names.v[i].name);
        zm_delete(&m, be, rel, -1, -1);
        if (m.n == 500 || i + 1 == names.n)
            drc = run_multi(be, &m) == ZOK ? FERRY_OK : FERRY_EIO;
    }
    if (!drc) {
        zm_delete(&m, be, "bench_packs", -1, -1);
        drc = run_multi(be, &m) == ZOK ? FERRY_OK : FERRY_EIO;
    }
    cat_flat_free(&names);
    if (!rc && drc)
        rc = ferry_err_set(err, FERRY_EIO, "removing bench_packs failed");
    free(texts);
    zmulti_free(&m);
    return rc;
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
    if (getenv("FERRY_BENCH_PACKS") && packs_floor(cat, pid, &err)) {
        fprintf(stderr, "bench_zk_floor: packs: %s\n", err.msg);
        goto out;
    }
    rc = 0;
out:
    ferry_catalog_close(cat);
    return rc;
}

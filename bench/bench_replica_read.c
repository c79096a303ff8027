/* Read throughput through one HTTP endpoint (ferry's router, or a server directly): client
 * threads loop for the given time sending the same query on their own keep-alive connection;
 * prints one JSON object with the queries per second, errors and latency percentiles. Which
 * replica serves each query is the router's choice (its [router] load_balancing); the per-shard
 * counts come from the router's GET /ferry/router, read by bench/replicas_read.sh.
 *
 *   bench_replica_read --url URL --query SQL [--seconds S] [--threads T] [--label NAME]
 *
 * bench/replicas_read.sh runs it with rf 1 and rf 2. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/strutil.h"

#define MAX_THREADS 64

typedef struct worker {
    const char *url, *query;
    double deadline;
    double *lat_ms; /* per query, grown */
    size_t n, cap;
    uint64_t errors;
    char first_error[FERRY_ERR_MSG_MAX];
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    worker *w = arg;
    ferry_ch_client *cl = NULL;
    ferry_ch_options o = {.url = w->url, .max_attempts = 1};
    ferry_err err = {0};
    if (ferry_ch_client_new(&o, &cl, &err)) {
        snprintf(w->first_error, sizeof w->first_error, "%s", err.msg);
        w->errors++;
        return NULL;
    }
    ferry_buf out = FERRY_BUF_INIT;
    while (now_s() < w->deadline) {
        double t0 = now_s();
        ferry_buf_reset(&out);
        int rc = ferry_ch_query_buf(cl, w->query, "TabSeparated", &out, NULL, &err);
        double t1 = now_s();
        if (rc) {
            if (!w->errors++)
                snprintf(w->first_error, sizeof w->first_error, "%s", err.msg);
            continue;
        }
        if (w->n == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 1024;
            double *p = realloc(w->lat_ms, cap * sizeof *p);
            if (!p)
                break;
            w->lat_ms = p;
            w->cap = cap;
        }
        w->lat_ms[w->n++] = (t1 - t0) * 1000.0;
    }
    ferry_buf_free(&out);
    ferry_ch_client_free(cl);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *query = NULL, *label = "read";
    uint64_t seconds = 10, threads = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--url"))
            url = argv[i + 1];
        else if (!strcmp(argv[i], "--query"))
            query = argv[i + 1];
        else if (!strcmp(argv[i], "--label"))
            label = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds") && ferry_parse_u64(argv[i + 1], &seconds))
            ;
        else if (!strcmp(argv[i], "--threads") && ferry_parse_u64(argv[i + 1], &threads))
            ;
        else {
            fprintf(stderr, "bench_replica_read: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!url || !query || threads < 1 || threads > MAX_THREADS || seconds < 1) {
        fprintf(stderr, "usage: bench_replica_read --url URL --query SQL [--seconds S] "
                        "[--threads 1..%d] [--label NAME]\n", MAX_THREADS);
        return 2;
    }
    pthread_t th[MAX_THREADS];
    worker w[MAX_THREADS];
    memset(w, 0, sizeof w);
    double t0 = now_s();
    for (unsigned i = 0; i < threads; i++) {
        w[i].url = url;
        w[i].query = query;
        w[i].deadline = t0 + (double)seconds;
        if (pthread_create(&th[i], NULL, run, &w[i]) != 0) {
            fprintf(stderr, "bench_replica_read: cannot start a thread\n");
            return 1;
        }
    }
    for (unsigned i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double secs = now_s() - t0;
    size_t total = 0;
    uint64_t errs = 0;
    const char *first_error = "";
    for (unsigned i = 0; i < threads; i++) {
        total += w[i].n;
        errs += w[i].errors;
        if (w[i].errors && !*first_error)
            first_error = w[i].first_error;
    }
    double *all = calloc(total + 1, sizeof *all);
    size_t k = 0;
    for (unsigned i = 0; all && i < threads; i++) {
        memcpy(all + k, w[i].lat_ms, w[i].n * sizeof *all);
        k += w[i].n;
    }
    double p50 = 0, p99 = 0;
    if (all && total) {
        qsort(all, total, sizeof *all, cmp_double);
        p50 = all[total / 2];
        p99 = all[(size_t)((double)(total - 1) * 0.99)];
    }
    json_t *o = json_pack("{s:s, s:I, s:f, s:I, s:I, s:f, s:f, s:f}", "label", label, "threads",
                          (json_int_t)threads, "seconds", secs, "queries", (json_int_t)total,
                          "errors", (json_int_t)errs, "qps", (double)total / secs, "p50_ms", p50,
                          "p99_ms", p99);
    if (errs)
        json_object_set_new(o, "first_error", json_string(first_error));
    json_dumpf(o, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(o);
    for (unsigned i = 0; i < threads; i++)
        free(w[i].lat_ms);
    free(all);
    return errs && !total ? 1 : 0;
}

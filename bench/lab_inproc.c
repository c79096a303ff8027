/* Lab benchmark, in-process half (built by node/CMakeLists.txt as bench_lab_inproc, without
 * sanitizers): the same small query and bulk read as bench_lab, through the embedded libchdb
 * in this process. Prints one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/chdb.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    char dir[] = "/tmp/ferry-bench-inproc.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    ferry_err err = {0};
    ferry_chdb *lib;
    ferry_chdb_conn *c;
    char arg[128];
    snprintf(arg, sizeof arg, "--path=%s/", dir);
    const char *args[] = {arg};
    if (ferry_chdb_load(NULL, &lib, &err) || ferry_chdb_connect(lib, 1, args, &c, &err)) {
        fprintf(stderr, "bench_lab_inproc: %s\n", err.msg);
        return 1;
    }
    enum { N = 2000 };
    static double lat[N];
    ferry_chdb_result r;
    for (int i = 0; i < 50; i++) {
        ferry_chdb_query(c, "SELECT 1", 8, NULL, NULL, 0, &r, &err);
        ferry_chdb_result_free(&r);
    }
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        double a = now_s();
        if (ferry_chdb_query(c, "SELECT 1", 8, NULL, NULL, 0, &r, &err))
            return 1;
        ferry_chdb_result_free(&r);
        lat[i] = now_s() - a;
    }
    double total = now_s() - t0;
    qsort(lat, N, sizeof lat[0], cmp_double);
    const char *q = "SELECT number, toString(number) FROM numbers(70000000)";
    ferry_chdb_stream *s;
    char *e = NULL;
    size_t bytes = 0;
    t0 = now_s();
    if (ferry_chdb_stream_open(c, q, strlen(q), NULL, NULL, 0, &s, &e, &err))
        return 1;
    const char *data, *error;
    size_t len;
    while (ferry_chdb_stream_next(s, &data, &len, &error) == 1)
        bytes += len;
    ferry_chdb_stream_close(s);
    double bulk = now_s() - t0;
    printf("{\"bench\": \"lab_inproc\", \"small_query\": \"SELECT 1\", \"queries\": %d, "
           "\"latency_us_p50\": %.0f, \"latency_us_p99\": %.0f, \"queries_per_s\": %.0f, "
           "\"bulk_bytes\": %zu, \"bulk_seconds\": %.2f, \"bulk_mb_per_s\": %.0f}\n",
           N, lat[N / 2] * 1e6, lat[N * 99 / 100] * 1e6, N / total, bytes, bulk,
           (double)bytes / 1e6 / bulk);
    fflush(stdout);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    int rc = system(cmd);
    _exit(rc == 0 ? 0 : 1); /* skip the engine's global destructors */
}

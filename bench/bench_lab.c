/* Lab benchmark, HTTP half: starts a one-node lab in a temporary directory and measures small
 * query round trips through the node's ClickHouse HTTP interface (one keep-alive connection)
 * and bulk read throughput of a large streamed result. Prints one JSON object. The in-process
 * half is bench_lab_inproc (node/CMakeLists.txt): it loads libchdb, so it cannot be sanitized.
 * Needs ferry-node one directory up (build-release/ferry-node) or $FERRY_NODE_BIN. */
#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/err.h"
#include "ferry/lab.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static size_t count_cb(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    *(size_t *)ud += sz * n;
    return sz * n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    char dir[] = "/tmp/ferry-bench-lab.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char self[PATH_MAX], nodebin[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0 && !getenv("FERRY_NODE_BIN")) {
        self[n] = '\0';
        *strrchr(self, '/') = '\0';
        snprintf(nodebin, sizeof nodebin, "%s/../ferry-node", self);
        setenv("FERRY_NODE_BIN", nodebin, 1);
    }
    ferry_err err = {0};
    ferry_lab_options o = {.dir = dir, .nodes = 1, .timeout_s = 120};
    if (ferry_lab_up(&o, &err) != 0) {
        fprintf(stderr, "bench_lab: %s\n", err.msg);
        return 1;
    }
    json_t *st = NULL;
    ferry_lab_status(dir, &st, &err);
    const char *base = json_string_value(
        json_object_get(json_array_get(json_object_get(st, "nodes"), 0), "http"));
    char url[256];
    CURL *c = curl_easy_init();
    size_t got = 0;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, count_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    snprintf(url, sizeof url, "%s/?query=SELECT%%201", base);
    curl_easy_setopt(c, CURLOPT_URL, url);
    enum { N = 2000 };
    static double lat[N];
    for (int i = 0; i < 50; i++) /* warm up */
        curl_easy_perform(c);
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        double a = now_s();
        if (curl_easy_perform(c) != CURLE_OK)
            return 1;
        lat[i] = now_s() - a;
    }
    double small_total = now_s() - t0;
    qsort(lat, N, sizeof lat[0], cmp_double);
    /* Bulk: about 1.2 GB of TSV streamed through HTTP. */
    snprintf(url, sizeof url, "%s/", base);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS,
                     "SELECT number, toString(number) FROM numbers(70000000)");
    got = 0;
    t0 = now_s();
    CURLcode rc = curl_easy_perform(c);
    double bulk_s = now_s() - t0;
    curl_easy_cleanup(c);
    printf("{\"bench\": \"lab_http\", \"small_query\": \"SELECT 1\", \"queries\": %d, "
           "\"latency_us_p50\": %.0f, \"latency_us_p99\": %.0f, \"queries_per_s\": %.0f, "
           "\"bulk_bytes\": %zu, \"bulk_seconds\": %.2f, \"bulk_mb_per_s\": %.0f, "
           "\"bulk_ok\": %s}\n",
           N, lat[N / 2] * 1e6, lat[N * 99 / 100] * 1e6, N / small_total, got, bulk_s,
           (double)got / 1e6 / bulk_s, rc == CURLE_OK ? "true" : "false");
    json_decref(st);
    ferry_lab_down(dir, &err);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}

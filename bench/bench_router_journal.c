/* bench_router_journal: what the router's retry journal (lib/router/retry_journal.c) costs a
 * write, side by side in one run: N requests, each touching S slices and then ending (one in
 * every 100 failed, its slices held), through the journal in memory only (what every router with
 * a retry_window does) and with a file in DIR (what [router] retry_journal adds), and the same
 * loop calling nothing as the floor. Prints one JSON object: ns per request, CPU and wall.
 *
 * usage: bench_router_journal DIR [REQUESTS] [SLICES_PER_REQUEST] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router/router_int.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct result {
    double wall_ns, cpu_ns; /* per request */
} result;

static int run(const char *path, unsigned long n, unsigned slices, bool none, result *out)
{
    rt_pending *p = NULL;
    rt_journal *j = NULL;
    ferry_err err = {0};
    if (rt_pending_new(300000, &p))
        return 1;
    if (!none && rt_journal_open(path, p, &j, &err)) {
        fprintf(stderr, "bench_router_journal: %s\n", err.msg);
        rt_pending_free(p);
        return 1;
    }
    char name[32];
    volatile unsigned sink = 0;
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (unsigned long i = 0; i < n; i++) {
        rt_journal_req q = {0};
        for (unsigned s = 0; s < slices; s++) {
            snprintf(name, sizeof name, "tenant%05lu", (i * slices + s) % 10000);
            if (none)
                sink += (unsigned)name[6];
            else if (rt_journal_touch(j, &q, name, s % 4, &err)) {
                fprintf(stderr, "bench_router_journal: %s\n", err.msg);
                return 1;
            }
        }
        if (!none)
            rt_journal_end(j, &q, i % 100 == 99);
    }
    double w1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    out->wall_ns = (w1 - w0) * 1e9 / (double)n;
    out->cpu_ns = (c1 - c0) * 1e9 / (double)n;
    rt_journal_close(j);
    rt_pending_free(p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_router_journal DIR [REQUESTS] [SLICES_PER_REQUEST]\n");
        return 2;
    }
    unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 10) : 200000;
    unsigned slices = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 8;
    char path[4096];
    snprintf(path, sizeof path, "%s/bench-retries", argv[1]);
    result floor_r, mem, file;
    if (run(NULL, n, slices, true, &floor_r) || run(NULL, n, slices, false, &mem) ||
        run(path, n, slices, false, &file))
        return 1;
    printf("{\"bench\":\"router_journal\",\"requests\":%lu,\"slices_per_request\":%u,"
           "\"floor\":{\"wall_ns\":%.0f,\"cpu_ns\":%.0f},"
           "\"memory_only\":{\"wall_ns\":%.0f,\"cpu_ns\":%.0f},"
           "\"file\":{\"wall_ns\":%.0f,\"cpu_ns\":%.0f}}\n",
           n, slices, floor_r.wall_ns, floor_r.cpu_ns, mem.wall_ns, mem.cpu_ns, file.wall_ns,
           file.cpu_ns);
    return 0;
}

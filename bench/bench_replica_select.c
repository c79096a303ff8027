/* Replica selection benchmark: full failover orders (ferry_rsel_select) per second for 3 and
 * 16 replicas under several policies, one thread, with an error reported every 64 selects and
 * simulated time advancing 1 ms per select so the decay path runs too. Prints one JSON object.
 *   usage: bench_replica_select [SELECTS_PER_CASE]   (default 2000000) */
#include "ferry/replica_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const ferry_err *err)
{
    fprintf(stderr, "bench_replica_select: %s\n", err->msg);
    exit(1);
}

/* Selects per second for one (replica count, policy) case; *checksum folds the first choices
 * so the work cannot be optimised away. */
static double run_case(size_t n, ferry_lb policy, long selects, uint64_t *checksum)
{
    char names[16][64];
    const char *hosts[16];
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "ch-%02zu-%zu.dc1.example.net", i / 2 + 1, i % 2 + 1);
        hosts[i] = names[i];
    }
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt);
    opt.query.policy = policy;
    opt.local_hostname = "ch-01-1.dc1.example.net";
    ferry_replica_selector *sel = NULL;
    ferry_err err = {0, ""};
    if (ferry_rsel_create(hosts, NULL, n, &opt, &sel, &err))
        die(&err);
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 12345);
    size_t order[16];
    double t0 = now_s();
    for (long k = 0; k < selects; k++) {
        if (ferry_rsel_select(sel, (uint64_t)k, &rng, order, &err))
            die(&err);
        *checksum = *checksum * 31 + order[0];
        if ((k & 63) == 0)
            ferry_rsel_report_error(sel, order[0], &err);
        if (policy == FERRY_LB_LEAST_REQUEST) { /* keep a few requests in flight */
            ferry_rsel_begin(sel, order[0], &err);
            if (k & 1)
                ferry_rsel_end(sel, order[0], &err);
        }
    }
    double dt = now_s() - t0;
    ferry_rsel_free(sel);
    return (double)selects / dt;
}

int main(int argc, char **argv)
{
    long selects = argc > 1 ? atol(argv[1]) : 2000000;
    if (selects <= 0) {
        fprintf(stderr, "bench_replica_select: SELECTS_PER_CASE must be a positive number\n");
        return 2;
    }
    const ferry_lb policies[] = {FERRY_LB_RANDOM, FERRY_LB_NEAREST_HOSTNAME, FERRY_LB_IN_ORDER,
                                 FERRY_LB_ROUND_ROBIN, FERRY_LB_LEAST_REQUEST};
    const size_t sizes[] = {3, 16};
    uint64_t checksum = 0;
    printf("{\"bench\":\"replica_select\",\"selects_per_case\":%ld", selects);
    for (size_t s = 0; s < 2; s++)
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
            double rate = run_case(sizes[s], policies[p], selects, &checksum);
            printf(",\"%s_%zu_per_s\":%.0f", ferry_lb_name(policies[p]), sizes[s], rate);
        }
    printf(",\"checksum\":%llu}\n", (unsigned long long)checksum);
    return 0;
}

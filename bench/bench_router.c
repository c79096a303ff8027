/* bench_router: rows per second through `ferry router` versus the same batches inserted directly
 * into one ClickHouse server, for small (~1 KB) and large (~10 MB) TabSeparated batches. Needs a
 * running router and server (bench/router.sh sets up a lab). Prints one JSON object.
 *
 * usage: bench_router ROUTER_URL DIRECT_URL TENANTS [SECONDS_PER_CASE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/split.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A TSV batch of about target bytes; returns the row count. with_split: the direct client sets
 * the split column itself (the same function the router uses, 2 splits per tenant), so both
 * paths store the same partitions. */
static size_t batch(ferry_buf *b, size_t target, unsigned tenants, uint64_t *next_id,
                    bool with_split)
{
    size_t rows = 0;
    b->len = 0;
    while (b->len < target) {
        uint64_t id = (*next_id)++;
        char uid[32];
        int ul = snprintf(uid, sizeof uid, "%llu", (unsigned long long)(id * 7919 % 1000003));
        ferry_buf_printf(b, "t%u\t%u\t%s\t%llu\tvalue-%llu-abcdefghij", (unsigned)(id % tenants),
                         20261101 + (unsigned)(id % 3), uid, (unsigned long long)id,
                         (unsigned long long)id);
        if (with_split)
            ferry_buf_printf(b, "\t%u", ferry_split_of(uid, (size_t)ul, 2));
        ferry_buf_putc(b, '\n');
        rows++;
    }
    return rows;
}

/* One batch to url; adds its rows and seconds. */
static int one(ferry_ch_client *c, bool direct, size_t size, unsigned tenants, uint64_t *next_id,
               ferry_buf *b, uint64_t *rows, double *spent)
{
    ferry_err err = {0};
    size_t r = batch(b, size, tenants, next_id, direct);
    char token[64];
    snprintf(token, sizeof token, "bench-%llu", (unsigned long long)*next_id);
    ferry_ch_setting set = {"insert_deduplication_token", token};
    ferry_ch_query q = {.sql = direct ? "INSERT INTO events (tenant, day, uid, id, v, split) "
                                       "FORMAT TabSeparated"
                                     : "INSERT INTO events (tenant, day, uid, id, v) FORMAT "
                                       "TabSeparated",
                        .body = b->data, .body_len = b->len, .settings = &set, .n_settings = 1};
    double t0 = now_s();
    if (ferry_ch_exec(c, &q, NULL, &err)) {
        fprintf(stderr, "%s: %s\n", ferry_ch_client_url(c), err.msg);
        return 1;
    }
    *spent += now_s() - t0;
    *rows += r;
    return 0;
}

/* Alternates direct and routed batches (so background merges weigh on both alike) for secs. */
static int run(const char *router, const char *direct_url, size_t size, unsigned tenants,
               double secs, uint64_t *next_id, double *direct_rps, double *router_rps,
               size_t *batches)
{
    ferry_ch_options od = {.url = direct_url, .max_attempts = 1, .read_timeout_ms = 120000};
    ferry_ch_options orr = {.url = router, .max_attempts = 1, .read_timeout_ms = 120000};
    ferry_ch_client *cd = NULL, *cr = NULL;
    ferry_err err = {0};
    ferry_buf b = {0};
    int rc = 1;
    if (ferry_ch_client_new(&od, &cd, &err) || ferry_ch_client_new(&orr, &cr, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    uint64_t rd = 0, rr = 0;
    double sd = 0, sr = 0;
    size_t n = 0;
    double start = now_s();
    while (now_s() - start < 2 * secs || n < 3) {
        if (one(cd, true, size, tenants, next_id, &b, &rd, &sd) ||
            one(cr, false, size, tenants, next_id, &b, &rr, &sr))
            goto out;
        n++;
    }
    *direct_rps = rd / sd;
    *router_rps = rr / sr;
    *batches = n;
    rc = 0;
out:
    ferry_ch_client_free(cd);
    ferry_ch_client_free(cr);
    ferry_buf_free(&b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_router ROUTER_URL DIRECT_URL TENANTS [SECONDS_PER_CASE]\n");
        return 2;
    }
    unsigned tenants = (unsigned)atoi(argv[3]);
    double secs = argc > 4 ? atof(argv[4]) : 10;
    uint64_t next_id = 1;
    static const struct {
        const char *name;
        size_t bytes;
    } sizes[] = {{"1KB", 1024}, {"10MB", 10u << 20}};
    printf("{\"bench\":\"router\",\"format\":\"TabSeparated\",\"tenants\":%u", tenants);
    for (int i = 0; i < 2; i++) {
        double direct = 0, routed = 0;
        size_t n = 0;
        if (run(argv[1], argv[2], sizes[i].bytes, tenants, secs, &next_id, &direct, &routed, &n))
            return 1;
        printf(",\"%s\":{\"direct_rows_per_s\":%.0f,\"router_rows_per_s\":%.0f,\"ratio\":%.3f,"
               "\"batches_each\":%zu}",
               sizes[i].name, direct, routed, routed / direct, n);
    }
    printf("}\n");
    return 0;
}

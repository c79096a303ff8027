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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A TSV batch of about target bytes; returns the row count. */
static size_t batch(ferry_buf *b, size_t target, unsigned tenants, uint64_t *next_id)
{
    size_t rows = 0;
    b->len = 0;
    while (b->len < target) {
        uint64_t id = (*next_id)++;
        ferry_buf_printf(b, "t%u\t%u\t%llu\t%llu\tvalue-%llu-abcdefghij\n", (unsigned)(id % tenants),
                         20261101 + (unsigned)(id % 3), (unsigned long long)(id * 7919 % 1000003),
                         (unsigned long long)id, (unsigned long long)id);
        rows++;
    }
    return rows;
}

static int run(const char *url, size_t size, unsigned tenants, double secs, uint64_t *next_id,
               double *rows_per_s, size_t *batches)
{
    ferry_ch_options o = {.url = url, .max_attempts = 1, .read_timeout_ms = 120000};
    ferry_ch_client *c = NULL;
    ferry_err err = {0};
    ferry_buf b = {0};
    if (ferry_ch_client_new(&o, &c, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    uint64_t rows = 0;
    size_t n = 0;
    double spent = 0;
    while (spent < secs || n < 3) {
        size_t r = batch(&b, size, tenants, next_id);
        char token[64];
        snprintf(token, sizeof token, "bench-%llu", (unsigned long long)*next_id);
        ferry_ch_setting set = {"insert_deduplication_token", token};
        ferry_ch_query q = {.sql = "INSERT INTO events (tenant, day, uid, id, v) FORMAT TabSeparated",
                            .body = b.data, .body_len = b.len, .settings = &set, .n_settings = 1};
        double t0 = now_s();
        if (ferry_ch_exec(c, &q, NULL, &err)) {
            fprintf(stderr, "%s: %s\n", url, err.msg);
            ferry_ch_client_free(c);
            ferry_buf_free(&b);
            return 1;
        }
        spent += now_s() - t0;
        rows += r;
        n++;
    }
    *rows_per_s = rows / spent;
    *batches = n;
    ferry_ch_client_free(c);
    ferry_buf_free(&b);
    return 0;
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
        size_t nd = 0, nr = 0;
        if (run(argv[2], sizes[i].bytes, tenants, secs, &next_id, &direct, &nd) ||
            run(argv[1], sizes[i].bytes, tenants, secs, &next_id, &routed, &nr))
            return 1;
        printf(",\"%s\":{\"direct_rows_per_s\":%.0f,\"router_rows_per_s\":%.0f,\"ratio\":%.3f,"
               "\"direct_batches\":%zu,\"router_batches\":%zu}",
               sizes[i].name, direct, routed, routed / direct, nd, nr);
    }
    printf("}\n");
    return 0;
}

/* Private to the demo (lib/flow/demo.c, demo_check.c): its model of tenants and slices, the lab
 * nodes it talks to, and the helpers both files use. */
#ifndef FERRY_FLOW_DEMO_INT_H
#define FERRY_FLOW_DEMO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/demo.h"

#define DEMO_TABLE FERRY_DEMO_TABLE
#define DEMO_MAX_SPLITS 8
#define DEMO_GRACE_MS 100 /* nothing writes during the demo's moves (docs/demo.md) */
#define DEMO_BATCH 8       /* moves between the same two shards run in batches of this many */

/* One tenant of the model: rows a day (over all its splits) and its split count. */
typedef struct demo_tenant {
    char name[16];
    uint64_t rows_per_day;
    uint32_t splits;
    uint32_t first_slice; /* index of its split 0 in demo.slices */
    /* what was ingested, and what the lab holds at the end (over every node) */
    uint64_t want_rows, got_rows;
    char want_sum[32], got_sum[32];
} demo_tenant;

typedef struct demo_slice {
    uint32_t tenant, split;
    char route[FERRY_LIST_MAX];  /* the serving shard */
    char holder[FERRY_NAME_MAX]; /* where rows were found at the end ("" none, "*" several) */
} demo_slice;

typedef struct demo_node {
    char name[FERRY_NAME_MAX];
    char url[FERRY_URL_MAX];
    ferry_ch_client *ch;
    long pid;                 /* its ferry-node process (ClickHouse and the agent), 0 unknown */
} demo_node;

typedef struct demo {
    ferry_demo_options o;
    ferry_demo_result *r;
    bool made_dir;
    double t0; /* ferry_clock_s() at the start of the run */
    double cpu_self, cpu_nodes; /* demo_cpu_seconds at the end of the last phase */
    demo_tenant *tenants;
    demo_slice *slices;
    size_t n_slices;
    demo_node nodes[FERRY_DEMO_NODES];
    size_t n_nodes;
    uint32_t days[31]; /* YYYYMMDD, days[0] is yesterday */
    int64_t now;
    int log_fd;        /* the components' log: DIR/ferry.log (-1: stderr) */
} demo;

double demo_elapsed(const demo *d);
void demo_progress(const demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Counts a verification failure; the first one's text is kept. */
void demo_verify_fail(demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int demo_sql_rows(demo_node *n, const char *sql, ferry_ch_rows *rows, ferry_err *err);
demo_tenant *demo_tenant_named(demo *d, const char *name);

/* demo_check.c: the model, and the checks against it */
int demo_build_model(demo *d, ferry_err *err);
/* Per tenant and split over every node: rows, sum(v) and where the rows are. before: records
 * what was ingested; else fills got_* and the holders. */
int demo_measure(demo *d, bool before, ferry_err *err);
/* After the rebalance: every tenant's rows and sum as ingested, every slice only on the shard
 * its route names, a sample of rows in their key's split. */
int demo_verify(demo *d, ferry_err *err);

#endif

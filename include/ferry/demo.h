/* `ferry demo` as a library call: the whole story in a lab on this machine, with the real flows
 * (docs/demo.md). A lab of 3 ferry-node processes, the catalog set up as `ferry init` does,
 * hundreds of tenants of Zipf-skewed sizes with 1..8 splits registered and placed as `ferry
 * tenant add` does, several days of rows generated server-side on the shard that serves each
 * slice (each row in the split its key gives), the older days tiered by the tiering flow (one
 * run per server, side by side), a 4th node added, the rebalancing plan run by the plan
 * executor (several moves at a time), every tenant's rows and sums checked against what was
 * ingested, and the lab stopped (or kept). The command (src/cmd_demo.c) parses options and
 * prints; everything else is here. While it runs, ferry's own log lines go to ferry.log in the
 * lab's directory (the process's log descriptor is set back to stderr at the end). */
#ifndef FERRY_DEMO_H
#define FERRY_DEMO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/lab.h"

#define FERRY_DEMO_TABLE "events"
#define FERRY_DEMO_NODES 4

/* One progress line, with the seconds since the demo started. */
typedef void (*ferry_demo_progress_fn)(double elapsed_s, const char *line, void *arg);

typedef struct ferry_demo_options {
    const char *dir;   /* NULL: a new temporary directory, removed when the demo succeeds */
    bool keep;         /* leave the lab running in dir (needs dir) */
    unsigned tenants;  /* 2..2000 */
    unsigned days;     /* 2..30, ending yesterday */
    unsigned cold_days;/* the oldest cold_days are tiered; < days */
    unsigned parallel; /* moves at a time, 1..16 */
    unsigned batch;    /* moves between the same two shards run as one batch of up to this many
                        * (docs/moves.md "Batches"), 1..64; 0: DEMO's default, 8 */
    uint64_t rows_per_day; /* of the largest tenant; tenant k gets about R / k^0.9 */
    ferry_lab_options lab; /* object store and libchdb; the demo sets dir, nodes, timeout */
    ferry_demo_progress_fn progress; /* may be NULL */
    void *progress_arg;
} ferry_demo_options;

typedef struct ferry_demo_result {
    char dir[4096];           /* the lab's directory (also on failure, once known) */
    char conf[4200];          /* its ferry.conf */
    bool lab_started;
    bool lab_kept;            /* the lab runs on in dir (keep) */
    bool dir_kept;            /* a temporary directory left for inspection after a failure */
    char node_urls[FERRY_DEMO_NODES][FERRY_URL_MAX];
    size_t n_nodes;
    size_t slices;
    uint32_t max_splits;      /* the largest tenant's */
    uint64_t total_rows;
    json_t *phases;           /* owned: {"lab": seconds, ...} */
    json_t *phase_cpu;        /* owned: {"lab": {"ferry": CPU s, "nodes": CPU s}, ...} */
    json_t *tier_step_ms;     /* owned: tiering's milliseconds per step over every run */
    size_t tiered, tier_failed;
    uint64_t tier_uploaded, tier_pointer_bytes;
    size_t moves_planned, moves_done, moves_failed, moved_tenants;
    uint64_t hot_bytes, hot_copied, cold_bytes, cold_copied;
    size_t hot_parts, cold_parts;
    double rebalance_s, move_p50_s, move_p99_s;
    unsigned move_grace_ms;   /* the grace each move waited after its routing switch */
    double move_state_ms[FERRY_MOVE_STATES]; /* summed over the rebalance's moves */
    unsigned long move_statements, move_agent_requests, move_catalog_writes;
    size_t verify_failures, split_checked;
    char first_failure[512];
    double wall_s;
} ferry_demo_result;

/* Checks the options a caller may get wrong (ranges, --keep without a directory, the object
 * store's options, a non-empty directory, a missing libchdb): FERRY_EINVAL with a message
 * naming the option. */
int ferry_demo_check(const ferry_demo_options *o, ferry_err *err);

/* Runs the story. FERRY_OK when every phase ran (verification failures are counted in
 * res->verify_failures, not an error). *res is filled as far as the demo got, also on failure;
 * the caller frees it (ferry_demo_result_free). */
int ferry_demo_run(const ferry_demo_options *o, ferry_demo_result *res, ferry_err *err);

/* The result as one JSON object (the --json output); caller decrefs. */
json_t *ferry_demo_result_json(const ferry_demo_options *o, const ferry_demo_result *res);
void ferry_demo_result_free(ferry_demo_result *res);

#endif

/* Cluster-wide tallies the flows keep in the catalog, so whoever reads the catalog (the
 * coordinator's GET /metrics and status page, `ferry status`) sees what every process did, be
 * it the autopilot or an operator's command:
 *
 *   "tally.moves"   moves ended DONE and FAILED, the bytes copied between agents (cold pointer
 *                   bytes and hot bytes), the seconds spent, and the last few moves that ended
 *   "tally.sweep"   the last sweep's counts and when the last complete sweep ran
 *   "tally.doctor"  the last doctor run: each check's status
 *   "tally.tier"    tiering runs: partitions tiered, jobs failed, bytes uploaded, pointer bytes
 *
 * Each is one job record (kind "tally", state DONE: never "in flight" to the flows that read
 * the journal), updated by compare-and-set, retried on conflict, so two processes never lose
 * each other's counts. Counts are taken at the end of each run: a run killed before it ends
 * loses its own counts, nothing else. Byte counts are what each run sent; a resumed move adds
 * what its resuming run sent. A tally is bookkeeping: the flows log a failure to write one and
 * carry on. */
#ifndef FERRY_TALLY_H
#define FERRY_TALLY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/move.h"
#include "ferry/sweep.h"

#define FERRY_TALLY_KIND "tally"
#define FERRY_TALLY_RECENT_MOVES 6
#define FERRY_TALLY_CHECKS 24

/* One move as it ended (or stopped) in one run. */
typedef struct ferry_tally_move {
    char id[64];
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    char from[FERRY_NAME_MAX], to[FERRY_NAME_MAX];
    char state[16];           /* DONE or FAILED */
    uint64_t hot_copied, cold_copied;
    double seconds;           /* this run's wall time */
    int64_t finished;         /* unix seconds */
} ferry_tally_move;

typedef struct ferry_tally_moves {
    uint64_t done, failed;               /* moves that ended so */
    uint64_t hot_copied, cold_copied;    /* bytes every run of every move sent */
    double seconds;                      /* wall seconds of every run */
    ferry_tally_move recent[FERRY_TALLY_RECENT_MOVES]; /* newest first */
    size_t n_recent;
} ferry_tally_moves;

typedef struct ferry_tally_sweep {
    bool present;                /* a sweep ran since the cluster began keeping tallies */
    int64_t at;                  /* when the last sweep ended */
    int64_t last_complete;       /* when the last complete sweep ended (0: never) */
    bool complete;
    uint64_t orphans, orphan_bytes, dangling, drift, deleted, deleted_bytes, delete_failed;
} ferry_tally_sweep;

typedef struct ferry_tally_check {
    char check[32];
    char status[16];             /* the worst of its findings: fail, unsupported, skipped, pass */
} ferry_tally_check;

typedef struct ferry_tally_doctor {
    bool present;
    int64_t at;
    ferry_tally_check checks[FERRY_TALLY_CHECKS];
    size_t n_checks;
} ferry_tally_doctor;

typedef struct ferry_tally_tier {
    uint64_t runs, partitions_tiered, jobs_failed, bytes_uploaded, pointer_bytes;
    int64_t last_run; /* when the last (not dry) run ended; 0: none */
} ferry_tally_tier;

typedef struct ferry_tallies {
    ferry_tally_moves moves;
    ferry_tally_tier tier;
    ferry_tally_sweep sweep;
    ferry_tally_doctor doctor;
} ferry_tallies;

/* Adds one run of a move: its copied bytes and seconds, and, when the run ended the move
 * (r->state DONE or FAILED), one to done or failed and the move to the recent list. */
int ferry_tally_move_add(ferry_catalog *cat, const ferry_move_result *r, ferry_err *err);

/* Records a sweep that ran to its end at `now` (a report, complete or not). */
int ferry_tally_sweep_put(ferry_catalog *cat, const ferry_sweep_result *r, int64_t now,
                          ferry_err *err);

/* Records a doctor report ({"checks": [{"check", "status", ...}]}) made at `now`. */
int ferry_tally_doctor_put(ferry_catalog *cat, const json_t *report, int64_t now,
                           ferry_err *err);

/* Adds one tiering run (not a dry run) that ended at `now`. */
int ferry_tally_tier_add(ferry_catalog *cat, const ferry_tally_tier *run, int64_t now,
                         ferry_err *err);

/* Reads them all; absent records read as zeros (present false). */
int ferry_tallies_read(ferry_catalog *cat, ferry_tallies *out, ferry_err *err);

#endif

/* Private to the move's run (move.c: the states and the run; move_send.c: sending parts,
 * several at a time, and the fingerprints that compare source and target): the run's context and
 * the helpers both use. */
#ifndef FERRY_FLOW_MOVE_RUN_H
#define FERRY_FLOW_MOVE_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/move.h"
#include "ferry/rate.h"
#include "flow/move_env.h"

#define MV_MAX_ATTEMPTS 20    /* attempts of one state before the move gives up */
#define MV_MAX_ROUNDS 5       /* catch-up rounds of one SWITCH attempt */
#define MV_STEP_PUBLISH FERRY_MOVE_STEP_PUBLISH /* SWITCH step: verified, publishing */

/* One run of one move. */
typedef struct mvctx {
    const ferry_move_opts *o;
    ferry_catalog *cat;
    ferry_record mv;  /* the journal record */
    ferry_record job; /* jobs/move.ID */
    json_t *data;     /* job data */
    mv_conn src, dst;
    ferry_record_list tables;
    ferry_move_result *res;
    double t0;
    uint64_t bytes_done, bytes_total;
    size_t parts_done, parts_total;
    size_t cold_verified, hot_verified; /* partitions verified equal (by part hashes), cold / hot */
    unsigned long catalog_writes; /* commits this run made */
    ferry_rate *rate;               /* the bandwidth limit: o->rate, or own_rate */
    ferry_rate *own_rate;           /* o->max_bytes_per_second for this run alone */
    bool permanent; /* the last failure cannot heal by retrying: roll back */
    bool clone;     /* keep-source mode: adds a replica (journal data "mode": "clone") */
} mvctx;

int mv_copy_round(mvctx *x, const ferry_table_def *t, const char *freeze, bool first,
                      ferry_err *err);
int mv_compare_copy(mvctx *x, const ferry_table_def *t, bool exact, bool *stable,
                        ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err);
int mv_source_fingerprint(mvctx *x, const ferry_table_def *t, bool rows,
                              ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err);
void mv_progress(mvctx *x);
int mv_staging_drop_part(mvctx *x, const ferry_table_def *t, const char *part, ferry_err *err);
size_t mv_frozen_of(json_t *fparts, const char *pid, json_t **out, size_t max);
int mv_freeze_each(mvctx *x, const ferry_table_def *t, const char *freeze,
                       const mv_slice *src, json_t **out, ferry_err *err);

/* The i-th managed table of the run. */
static inline const ferry_table_def *table_at(mvctx *x, size_t i)
{
    return &x->tables.items[i].u.table;
}

#endif

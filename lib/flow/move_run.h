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
#include "ferry/verify.h"
#include "flow/move_env.h"

#define MV_MAX_ATTEMPTS 20    /* attempts of one state before the move gives up */
#define MV_MAX_ROUNDS 5       /* catch-up rounds of one SWITCH attempt */
#define MV_STEP_PUBLISH FERRY_MOVE_STEP_PUBLISH /* SWITCH step: verified, publishing */

/* One run of one move. */
typedef struct mvctx {
    const ferry_move_opts *o;
    ferry_catalog *cat;
    ferry_record mv;  /* the journal record, written through fj */
    ferry_record job; /* jobs/move.ID */
    ferry_flow_journal fj; /* the flow engine over mv (kind ferry_move_flow) */
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
    ferry_lease *lease; /* the catalog lease move.ID while the run holds it */
    bool ran;       /* the move was not over when opened */
    bool looping;   /* opened completely: its states may run */
    bool counted;   /* the finished move's rows and partitions are in res already */
} mvctx;

/* ---- the run (move.c) ---- */

/* Opens the run of move id into x: catalog, lease, journal, connections, tables. Close with
 * mv_ctx_close whatever it returns; x->looping says whether the states may run. */
int mv_ctx_open(const ferry_move_opts *o, const char *id, mvctx *x, ferry_move_result *res,
                ferry_err *err);
/* Runs the states of an opened move (x->looping) until DONE or an error. */
int mv_ctx_loop(mvctx *x, ferry_err *err);
/* Ends the run (rollback of a permanent failure before the switch, the error kept in the
 * journal, the finished move's report and tally) and closes x; returns rc. */
int mv_ctx_close(mvctx *x, int rc, ferry_err *err);
/* The journal (move.c): the move record's writes go through the flow engine (x->fj), each a
 * compare-and-set checked against ferry_move_flow, with jobs/move.ID (x->data, the state
 * mirrored) in the same catalog batch. mv_job_save writes the data alone (a freeze name, in the
 * state the move is in). */
int mv_job_save(mvctx *x, ferry_err *err);
int mv_move_update(mvctx *x, ferry_err *err);
int mv_advance(mvctx *x, enum ferry_move_state to, const char *detail, ferry_err *err);
int mv_journal_routed(mvctx *x, ferry_record *next, ferry_err *err);
int mv_advance_cleanup(mvctx *x, ferry_err *err);
/* A new attempt of the current state (counted in the journal), earlier freezes removed. */
int mv_begin_attempt(mvctx *x, ferry_err *err);
/* The freeze name <id>_<tag> journaled in x's freezes (before it exists) into out. */
int mv_freeze_name(mvctx *x, const char *tag, char *out, size_t outsz, ferry_err *err);
int mv_remove_freeze_named(mvctx *x, const char *name, ferry_err *err);
int mv_remove_freezes(mvctx *x, ferry_err *err);
int mv_ensure_staging(mvctx *x, const ferry_table_def *t, ferry_err *err);
json_t *mv_fp_json(const ferry_fingerprint *fp, const ferry_fingerprint *dg);
bool mv_fp_matches(const json_t *j, const ferry_fingerprint *fp);
int mv_switch_route(mvctx *x, ferry_err *err);
int mv_fence_routers(mvctx *x, const char *what, ferry_err *err);
int mv_records_follow(mvctx *x, const ferry_table_def *t, const mv_pids *pids, ferry_err *err);
int mv_target_broken_check(mvctx *x, const ferry_table_def *t, const mv_pids *pids,
                           ferry_err *err);

int mv_copy_round(mvctx *x, const ferry_table_def *t, const char *freeze, bool first,
                      ferry_err *err);
/* The copy round of n moves between the same two shards at once (a batch, move_batch.c): one
 * listing per side, one freeze, one send pool and one ATTACH for all their slices; the server
 * requests go through xs[0]'s connections, each move's bytes and parts count on its own
 * result. mv_copy_round is this with n = 1. */
int mv_copy_round_n(mvctx **xs, size_t n, const ferry_table_def *t, const char *freeze,
                    bool first, ferry_err *err);
int mv_compare_copy(mvctx *x, const ferry_table_def *t, bool exact, bool *stable,
                        ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err);
/* mv_compare_copy of n moves between the same two shards: one listing per side and one
 * fingerprint query for all; stable, fp and digest are arrays of n (fp and digest may be
 * NULL). */
int mv_compare_copy_n(mvctx **xs, size_t n, const ferry_table_def *t, bool exact, bool *stable,
                      ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err);
/* The digest of a slice's active parts and the ids of its hot partitions (added to hot, may be
 * NULL), from a listing (cold partitions' digest also goes into fp, may be NULL). */
int mv_slice_digest(const mv_slice *sl, ferry_fingerprint *fp, ferry_fingerprint *digest,
                    mv_pids *hot, ferry_err *err);
int mv_source_fingerprint(mvctx *x, const ferry_table_def *t, bool rows,
                              ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err);
void mv_progress(mvctx *x);
int mv_staging_drop_part(mvctx *x, const ferry_table_def *t, const char *part, ferry_err *err);

/* The i-th managed table of the run. */
static inline const ferry_table_def *table_at(mvctx *x, size_t i)
{
    return &x->tables.items[i].u.table;
}

#endif

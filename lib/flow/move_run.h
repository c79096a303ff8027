/* Private to the move's run (move.c: the states and the run; move_send.c: sending parts,
 * several at a time, and the fingerprints that compare source and target): the run's context and
 * the helpers both use. */
#ifndef FERRY_FLOW_MOVE_RUN_H
#define FERRY_FLOW_MOVE_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/move.h"
#include "ferry/rate.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/move_state.h"
#include "flow/slice_lease.h"

#define MV_MAX_ATTEMPTS 20    /* attempts of one state before the move gives up */
#define MV_MAX_ROUNDS 5       /* catch-up rounds of one SWITCH attempt */
#define MV_STEP_PUBLISH FERRY_MOVE_STEP_PUBLISH /* SWITCH step: verified, publishing */

typedef struct mv_unfreeze mv_unfreeze; /* move_unfreeze.c */

/* One run of one move. */
typedef struct mvctx {
    const ferry_move_opts *o;
    ferry_catalog *cat;
    ferry_record mv;  /* the journal record, written through fj */
    ferry_record job; /* jobs/move.ID */
    ferry_flow_journal fj; /* the flow engine over mv (kind ferry_move_flow) */
    ferry_record switch_route; /* the slice's route as the routing switch writes it */
    ferry_record switch_need;  /* the slice's repair-need record as the switch writes it */
    bool switch_need_set;      /* switch_need is to be written (the slice has one naming from) */
    mv_state st;      /* jobs/move.ID's data (move_state.h), written with every journal write */
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
    ferry_lease *lease; /* the catalog lease move.ID while the run holds it */
    ferry_slice_leases slice; /* the slice's lease (slice_lease.h) while the run holds it */
    bool ran;       /* the move was not over when opened */
    bool looping;   /* opened completely: its states may run */
    bool counted;   /* the finished move's rows and partitions are in res already */
    mv_unfreeze *unfreeze; /* a freeze being removed in the background, or NULL */
} mvctx;

/* The move's source and target shard: the journal names one each (mv_ctx_open refuses a
 * record naming another count, so these hold once it has read it). */
static inline const char *mv_from(const mvctx *x)
{
    return ferry_shard_set_at(&x->mv.u.move.from, 0);
}
static inline const char *mv_to(const mvctx *x)
{
    return ferry_shard_set_at(&x->mv.u.move.to, 0);
}

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

/* ---- the journal (move_journal.c) ---- */

/* Writes the move records of xs[0..n) through the flow engine in ONE catalog batch, committed
 * through xs[0]'s journal (a batch's members go through the states together): each to state
 * `to`, or in its own state again (a note: the step the caller set in x->mv is written) when
 * `to` is xs[0]'s state; with detail (NULL: each keeps its own). Each one's data record
 * jobs/move.ID (x->st, its state mirroring the move's) goes in the same batch, so no crash
 * leaves it a state behind; so does routes[k] when routes is not NULL, which raises the routing
 * version (*routing_version, may be NULL). One CAS on each record; FERRY_ECONFLICT when any
 * moved on, and then nothing is written for any. On success each x->mv and x->job hold the
 * written records. The commit counts on xs[0]->catalog_writes, so a batch's counts sum to its
 * commits. */
int mv_journal_n(mvctx **xs, size_t n, enum ferry_move_state to, const char *detail,
                 const ferry_record *routes, uint64_t *routing_version, ferry_err *err);
/* mv_journal_n with n_extra more records updated in the same batch (each by CAS on its
 * version): the routing switch's repair-need records. */
int mv_journal_extra_n(mvctx **xs, size_t n, enum ferry_move_state to, const char *detail,
                       const ferry_record *routes, const ferry_record *extra, size_t n_extra,
                       uint64_t *routing_version, ferry_err *err);
/* Transitions (logged, progress called). */
int mv_advance_n(mvctx **xs, size_t n, enum ferry_move_state to, const char *detail,
                 ferry_err *err);
int mv_advance(mvctx *x, enum ferry_move_state to, const char *detail, ferry_err *err);
/* The route record of x's slice as the catalog holds it. */
int mv_route_get(mvctx *x, ferry_record *route, ferry_err *err);
/* The publish step (SWITCH, step PUBLISH) and the entry into CLEANUP, each in one batch with
 * the slices' routes (a new routing version). */
int mv_publish_step_n(mvctx **xs, size_t n, ferry_err *err);
int mv_advance_cleanup_n(mvctx **xs, size_t n, ferry_err *err);
int mv_advance_cleanup(mvctx *x, ferry_err *err);
/* A new attempt of the current state (counted in the journal, one note for all), each one's
 * earlier freezes removed. */
int mv_begin_attempt_n(mvctx **xs, size_t n, ferry_err *err);
int mv_begin_attempt(mvctx *x, ferry_err *err);
/* Freezes (the invariant: move_journal.c). The freeze name <id>_<tag> of x into out. */
void mv_freeze_name(mvctx *x, const char *tag, char *out, size_t outsz);
/* Journals name in the freezes of each of xs[0..n) (one note) before the freeze is made. */
int mv_freeze_journal_n(mvctx **xs, size_t n, const char *name, ferry_err *err);
/* Whether name is among x's journaled freezes (a freeze of that name may exist). */
bool mv_freeze_journaled(const mvctx *x, const char *name);
/* mv_freeze_name and mv_freeze_journal_n for x alone. */
int mv_freeze_new(mvctx *x, const char *tag, char *out, size_t outsz, ferry_err *err);
/* Removes the freeze from the source (through xs[0]) and its name from each one's x->st;
 * the name leaves the catalog with the next journal write. */
int mv_remove_freeze_n(mvctx **xs, size_t n, const char *name, ferry_err *err);
int mv_remove_freeze_named(mvctx *x, const char *name, ferry_err *err);
int mv_remove_freezes(mvctx *x, ferry_err *err);
/* Drops name from x->st's freezes (journaled with the next write): after its removal. */
void mv_freeze_forget(mvctx *x, const char *name);

/* ---- the CLONE snapshot removed in the background (move_unfreeze.c) ---- */

/* Starts removing freeze `name` on the source in a thread (after joining one still running);
 * without a thread, removes it now (mv_remove_freeze_named). */
int mv_unfreeze_start(mvctx *x, const char *name, ferry_err *err);
/* Waits for the background removal, if any: on success the name leaves x->st (journaled with
 * the next write), else it stays for a later removal (logged). */
void mv_unfreeze_join(mvctx *x);
/* Whether name is being removed in the background (mv_remove_freezes leaves it to the thread). */
bool mv_unfreeze_busy(const mvctx *x, const char *name);
int mv_ensure_staging(mvctx *x, const ferry_table_def *t, ferry_err *err);
/* How many times the routing switch reads the route and the repair-need record again after a
 * lost race before it gives up (the move stays in VERIFY; a resume switches it). */
#define MV_SWITCH_ROUNDS 5

/* The routing switch: mv_switch_prepare (the switch fence, x->switch_route) for each move,
 * then one mv_switch_commit_n for all of them; mv_switch_route both for one move. */
int mv_switch_prepare(mvctx *x, ferry_err *err);
int mv_switch_commit_n(mvctx **xs, size_t n, ferry_err *err);
int mv_switch_route(mvctx *x, ferry_err *err);
int mv_fence_routers(mvctx *x, const char *what, ferry_err *err);
int mv_records_follow(mvctx *x, const ferry_table_def *t, const mv_pids *pids, ferry_err *err);
/* Before CLEANUP removes the source's copy (move_mend.c): parts of the slice (partitions pids)
 * detached as broken on the target are mended from the source, or the move stops there. */
int mv_target_broken_mend(mvctx *x, const ferry_table_def *t, const mv_pids *pids,
                          ferry_err *err);
/* CLEANUP's cheap release of the source (move_release.c): the partitions of src (the slice's
 * on the source, checked as verified; a batch's, through its first member) that may safely go
 * by REPLACE PARTITION from ferry's empty twin table go so, in one ALTER, and leave src; returns
 * how many did. Never an error: whatever is left in src (a partition that may not go so, all of
 * them after a failed REPLACE) the caller detaches as before. */
size_t mv_release_by_replace(mvctx *x, const ferry_table_def *t, mv_pids *src);

/* The publish step's statements (move_publish.c): staging's partitions of x's slice into the
 * real table of each managed table; resumed: a publish that ran before, whose staged parts the
 * table may hold already (they are dropped from staging first). */
int mv_publish(mvctx *x, bool resumed, ferry_err *err);
/* Publishes the partitions of stg[0..n) (the staging listings of xs[k]'s slices, active parts)
 * for table t, through xs[0]'s connection. *first: the first partition still goes alone
 * (cleared once it went). */
int mv_publish_slices(mvctx **xs, size_t n, const ferry_table_def *t, const mv_slice *stg,
                      bool *first, ferry_err *err);

/* The round journals `freeze` (mv_freeze_journal_n) right before it freezes anything, and
 * only then: a round of cold partitions only sends them live and leaves the name unjournaled,
 * so the caller removes the freeze only when mv_freeze_journaled says it may exist. */
int mv_copy_round(mvctx *x, const ferry_table_def *t, const char *freeze, bool first,
                      ferry_err *err);
/* The copy round of n moves between the same two shards at once (a batch, move_batch.c): one
 * listing per side, one freeze, one send pool and one ATTACH for all their slices; the server
 * requests go through xs[0]'s connections, each move's bytes and parts count on its own
 * result. mv_copy_round is this with n = 1. */
int mv_copy_round_n(mvctx **xs, size_t n, const ferry_table_def *t, const char *freeze,
                    bool first, ferry_err *err);
int mv_compare_copy(mvctx *x, const ferry_table_def *t, bool exact, bool *stable,
                    ferry_fingerprint *fp, ferry_fingerprint *digest, int64_t *top,
                    ferry_err *err);
/* mv_compare_copy of n moves between the same two shards: one listing per side and at most one
 * fingerprint query for all; stable, fp, digest and top are arrays of n (fp, digest and top may
 * be NULL). */
int mv_compare_copy_n(mvctx **xs, size_t n, const ferry_table_def *t, bool exact, bool *stable,
                      ferry_fingerprint *fp, ferry_fingerprint *digest, int64_t *top,
                      ferry_err *err);
/* A part's top: the higher of its max_block_number and its data_version. In a table that
 * numbers blocks table-wide (mv_table_wide_blocks) a part holding a row written, attached or
 * mutated after a listing has a higher top than every part of that listing; a merge of listed
 * parts does not (its blocks and its mutation version are theirs). */
int64_t mv_part_top(const mv_part *p);
/* The first active part of the listing sl whose top is above top, or NULL. */
const mv_part *mv_slice_above_top(const mv_slice *sl, int64_t top);
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

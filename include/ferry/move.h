/* Slice moves and rebalancing: moving one slice (one split of one tenant) of every managed table
 * from one shard to another as a journaled state machine, keeping the catalog's inventory of
 * slices in step with what the servers hold, and computing the rebalancing plan from the catalog.
 *
 * A move is the record moves/ID in the catalog (FERRY_REC_MOVE) plus a side record jobs/move.ID
 * (FERRY_REC_JOB, kind "move") holding the freeze names it made and the fingerprints it verified.
 * It goes PLANNED -> CLONE -> VERIFY -> SWITCH -> CLEANUP -> DONE, or to FAILED (with the target
 * side rolled back) from CLONE or VERIFY. The routing switch is the commit point: after it a move
 * only rolls forward. docs/moves.md explains every state, the catch-up of writes that arrive
 * during the move, what is verified, and crash recovery; lib/flow/move.c has the same invariants
 * beside the code.
 *
 * Every statement goes through ferry_guarded_exec (never DROP/TRUNCATE/DELETE); every file
 * operation through the node agents. Object storage is never touched by a move.
 *
 * Thread safety: each ferry_move_run opens its own catalog handle and clients, so moves of
 * different slices may run in parallel threads. */
#ifndef FERRY_MOVE_H
#define FERRY_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/flow_journal.h"

struct ferry_config;

/* The move's states for the flow engine (lib/flow/move_flow.c): its jobs are the move records,
 * a state's number its enum ferry_move_state. */
extern const ferry_flow_kind ferry_move_flow;

/* Progress of one move, reported after every part sent and at every state change. */
typedef struct ferry_move_progress {
    const char *id;
    const char *tenant;
    uint32_t split;
    const char *from, *to;
    const char *state;      /* the state being worked on */
    uint64_t bytes_done;    /* bytes sent so far in this run */
    uint64_t bytes_total;   /* bytes to send in the current round (grows with catch-up rounds) */
    size_t parts_done, parts_total;
    double elapsed_s;
} ferry_move_progress;

typedef void (*ferry_move_progress_fn)(const ferry_move_progress *p, void *arg);

typedef struct ferry_move_opts {
    const char *catalog_url;        /* every run opens its own handle */
    const struct ferry_config *cfg; /* [shard "x"] agent_token_file, user, password_file */
    const char *owner;              /* who runs the move (host:pid), recorded in the journal */
    unsigned grace_ms;              /* with grace_given: wait after the routing switch for
                                       writes already in flight to the source */
    bool grace_given;               /* false: the default grace (ferry_move_grace) */
    uint64_t max_bytes_per_second;  /* 0: unlimited; a run sleeps to stay under it (when rate
                                       is NULL) */
    struct ferry_rate *rate;        /* a limit shared with other moves (ferry_plan_run's), or
                                       NULL */
    ferry_move_progress_fn progress; /* may be NULL */
    void *progress_arg;
} ferry_move_opts;

/* The grace a move waits after its routing switch: o->grace_ms when given, else 0 when the
 * config lists [cluster] routers (the router fence covers every write a router sent, and with
 * routers every writer is assumed to be one: give --grace for others), else 2000 ms. */
unsigned ferry_move_grace(const ferry_move_opts *o);

/* What one run of a move did. Byte counts cover this run only (a resumed move counts what the
 * resumed run copied). "Real" sizes are the parts' bytes_on_disk (for a cold part: the size of
 * its objects); "copied" is what went over the wire between agents. */
typedef struct ferry_move_result {
    char id[64];
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    char from[FERRY_NAME_MAX], to[FERRY_NAME_MAX];
    enum ferry_move_state state; /* DONE, FAILED, or where it stopped */
    bool resumed;                /* the run started from a state after PLANNED */
    size_t partitions;
    size_t hot_parts, cold_parts;
    uint64_t hot_bytes, hot_copied;
    uint64_t cold_bytes, cold_copied;
    uint64_t rows;               /* rows of the slice verified on the target */
    double seconds;
    /* where this run's time went: milliseconds in each state (the state being worked on, by
     * enum ferry_move_state; the routing switch counts in VERIFY), and what it asked of others */
    double state_ms[FERRY_MOVE_STATES];
    unsigned long statements;     /* ClickHouse statements, both servers */
    unsigned long agent_requests; /* node agent requests, both servers */
    unsigned long catalog_writes; /* catalog commits (journal, routes, part records) */
    unsigned long freezes;        /* FREEZE requests to the source's agent (copy rounds) */
    size_t parts_sent_live;       /* pointer parts sent from the table's folder, not a freeze */
} ferry_move_result;

/* Checks a move request against the catalog and the servers and journals it (state PLANNED),
 * or finds the unfinished move of that slice to the same shard (*resumed true). FERRY_EINVAL:
 * unknown tenant, split or shard, a target that is not active, the slice already served by the
 * target, or an unfinished move of the slice elsewhere. FERRY_ECONNECT/EREMOTE: the target's
 * ClickHouse or agent does not answer. FERRY_EIO: the target's disk cannot hold the slice's hot
 * bytes. Nothing is written unless every check passed. id receives the move's id. */
int ferry_move_begin(const ferry_move_opts *o, const char *tenant, uint32_t split, const char *to,
                     char id[64], bool *resumed, ferry_err *err);

/* The same, for a clone: a move in keep-source mode that adds a replica (docs/replicas.md).
 * Journaled like a move (id "cl-..."; jobs/move.ID data has "mode": "clone"); ferry_move_run
 * runs it as CLONE -> VERIFY -> SWITCH -> CLEANUP -> DONE where VERIFY's routing switch *adds*
 * `to` to the slice's route, SWITCH makes the new replica equal to the source partition by
 * partition (ferry_replica_sync), and CLEANUP removes only the move's freezes and staging
 * leftovers: the source is never detached. */
int ferry_move_begin_clone(const ferry_move_opts *o, const char *tenant, uint32_t split,
                           const char *to, char id[64], bool *resumed, ferry_err *err);

/* ferry_move_begin (clone false) or ferry_move_begin_clone (clone true) from the replica on
 * shard `from` (NULL or "": the first shard of the slice's route, as those do), for slices with
 * several replicas: a move replaces `from` by `to` in the route and detaches the slice on `from`
 * only. FERRY_EINVAL when the route does not list `from`. The source is never a replica that
 * missed acknowledged writes (an open repair-need record, repair_need.h): without `from` the
 * first route shard that missed none is taken (ferry_move_begin and _clone too); a `from` that
 * missed some, or a slice whose every replica did, is FERRY_ECONFLICT (run ferry repair). */
int ferry_move_begin_from(const ferry_move_opts *o, const char *tenant, uint32_t split,
                          const char *from, const char *to, bool clone, char id[64],
                          bool *resumed, ferry_err *err);

/* ferry_move_begin_from for n slices (tenants[k], splits[k]) that move from `from` to `to` as a
 * batch (ferry_move_run_batch): the servers are checked once for all of them (one status per
 * agent, one listing of the slices per side; the target must have room for all their hot
 * bytes), each slice is checked against the catalog and journaled as its own move. ids[k],
 * resumed[k], rcs[k] and errs[k] are slice k's (a failing slice has no id). Returns the first
 * failing code, or FERRY_OK. */
int ferry_move_begin_batch(const ferry_move_opts *o, const char *const *tenants,
                           const uint32_t *splits, size_t n, const char *from, const char *to,
                           char (*ids)[64], bool *resumed, int *rcs, ferry_err *errs);

/* Runs (or resumes) move id until DONE or FAILED. Takes the lease "move.<id>" for the run, so
 * two movers never run one move (FERRY_ECONFLICT names the holder). A failure before the switch
 * that cannot heal (verification, target disk full) rolls the target side back and ends in
 * FAILED (returned as an error); a transient failure (a server or agent down) leaves the journal
 * where it was and returns the error: run it again to resume. res may be NULL.
 * Test-only: FERRY_TEST_CRASH_AFTER=<point> kills the process with SIGKILL at that point
 * (docs/moves.md lists the points). */
int ferry_move_run(const ferry_move_opts *o, const char *id, ferry_move_result *res,
                   ferry_err *err);

/* Runs moves ids[0..n), begun with ferry_move_begin* between the same two shards, as one batch
 * (docs/moves.md, "Batches"): each keeps its own journal, lease and states, but each state's
 * work on the servers is done once for all of them (one listing per side, one FREEZE, one
 * ATTACH, one MOVE PARTITION and one DETACH statement over every slice's partitions). A move
 * that cannot take the common path (resumed, a clone, another pair of shards, a source that
 * changed since the copy or since it was verified) finishes alone, as ferry_move_run would.
 * res, rcs and errs are arrays of n: each move's result, code and error, as ferry_move_run gives
 * them (a batch's statements and requests are counted on the move whose connections made them,
 * the first; its time in each state is shared equally). Returns the first failing code, or
 * FERRY_OK. Killed anywhere, every move resumes alone with ferry_move_run. */
int ferry_move_run_batch(const ferry_move_opts *o, const char *const *ids, size_t n,
                         ferry_move_result *res, int *rcs, ferry_err *errs);

/* Ids of unfinished moves (not DONE or FAILED), oldest first. Caller frees *ids (one block). */
int ferry_move_unfinished(ferry_catalog *cat, char (**ids)[64], size_t *n, ferry_err *err);

/* What ferry_inventory_sync found. */
typedef struct ferry_sync_summary {
    size_t tenants_created, slices_created, slices_updated, routes_created;
    size_t slices;
    uint64_t bytes;
} ferry_sync_summary;

/* Reads system.parts of every managed table (layout shared) on every shard that is not gone,
 * and updates the catalog in one batch: tenants and slices it did not know (splits = highest
 * split + 1), slice bytes and rows (from the shard that serves the slice), and a route for each
 * slice without one (the shard that holds its data; FERRY_ECONFLICT when several do). Routes
 * that exist are never changed. s may be NULL. */
int ferry_inventory_sync(ferry_catalog *cat, const ferry_move_opts *o, ferry_sync_summary *s,
                         ferry_err *err);

/* A slice's size as the servers report it. */
typedef struct ferry_slice_size {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    uint64_t bytes, rows;
} ferry_slice_size;

/* Sizes in (tenant, split) key order (mv_slice_key_cmp: tenants bytewise, then split); owned by
 * whoever holds the struct, freed with ferry_slice_sizes_free. */
typedef struct ferry_slice_sizes {
    ferry_slice_size *v;
    size_t n, cap;
} ferry_slice_sizes;
void ferry_slice_sizes_free(ferry_slice_sizes *s);

/* ferry_inventory_sync for a dry run (`ferry rebalance --dry-run`): writes only what a plan
 * cannot be computed without (the tenants, slices and routes the servers hold and the catalog
 * lacks, as ferry_inventory_sync does) and keeps the new sizes of the slices the catalog has out
 * of it: they go into *sizes (emptied first), for ferry_rebalance_plan_compute_sized. The shards'
 * stored loads are not written either. */
int ferry_inventory_sync_dry(ferry_catalog *cat, const ferry_move_opts *o, ferry_sync_summary *s,
                             ferry_slice_sizes *sizes, ferry_err *err);

/* What a planned step does to the slice's replicas. */
enum ferry_plan_kind {
    FERRY_PLAN_MOVE = 0, /* copy from -> to, then remove the source (ferry_move_begin) */
    FERRY_PLAN_CLONE,    /* copy from -> to and keep the source: a new replica (rf raised) */
    FERRY_PLAN_DROP,     /* remove the replica on `from` (rf lowered); `to` is empty */
};
const char *ferry_rebalance_step_name(enum ferry_plan_kind k); /* "move", "clone", "drop" */

/* One move of a rebalancing plan. */
typedef struct ferry_planned_move {
    enum ferry_plan_kind kind;
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    char from[FERRY_NAME_MAX], to[FERRY_NAME_MAX];
    uint64_t bytes;
} ferry_planned_move;

typedef struct ferry_rebalance_plan {
    size_t slices;
    uint64_t total_bytes, moved_bytes;
    size_t n_moves;
    ferry_planned_move *moves; /* owned; free with ferry_rebalance_plan_free */
    double fill;   /* the fill target the plan placed by: the cluster's, or lower (skew) */
    double spread; /* most minus least filled active shard with a capacity, before the plan;
                    * -1: not computed (no skew given) or fewer than two such shards */
    bool evened;   /* the spread was above the skew: fill is the lowered one */
} ferry_rebalance_plan;

/* The plan that takes the routing table to the placement the catalog's shards call for: the old
 * layout is the routing table on the shards that serve routes, the new cluster is the active
 * shards (a draining or gone shard has none left; an added shard gains), computed with
 * ferry_pl_rebalance and ordered with ferry_pl_plan_build, exactly as `ferry plan` does, for the
 * slices whose replication factor is 1 and that have one replica. Then every other slice (rf > 1
 * or several replicas), with placement's zone rule (ferry_pl_pick_replica: distinct shards, zones
 * as evenly as possible, room below the fill target, best rendezvous score) over the shards'
 * loads: DROP steps while it has more replicas than its tenant's rf (a replica on a draining
 * shard first, else the lowest-scoring; never the last); a MOVE of each replica on a draining
 * shard to the shard the rule picks; CLONE steps while it has too few; MOVE steps of zone repair
 * while its replicas crowd a zone and a less crowded zone has room (docs/replicas.md). MOVE
 * steps name their source replica (ferry_move_begin_from). */
int ferry_rebalance_plan_compute(ferry_catalog *cat, ferry_rebalance_plan *out, ferry_err *err);
/* The same, and when skew > 0 and the fill spread of the active shards with a capacity (their
 * bytes over their capacity) is above skew, placed by a fill target lowered to the mean fill of
 * those shards plus skew / 2 (never above the cluster's): the shards above it give slices
 * (placement's eviction: the replicas that rank the shard lowest first) to shards with room
 * below it, best score first. The slices moved stay where they went in later plans (a plan keeps
 * every replica whose shard stays), so a second pass moves nothing more unless the sizes change. */
int ferry_rebalance_plan_compute_skew(ferry_catalog *cat, double skew, ferry_rebalance_plan *out,
                                      ferry_err *err);
/* The same with the catalog's sizes of the slices in sizes replaced by theirs (NULL: none), as
 * if ferry_inventory_sync had written them: the plan of a dry run. */
int ferry_rebalance_plan_compute_sized(ferry_catalog *cat, double skew,
                                       const ferry_slice_sizes *sizes, ferry_rebalance_plan *out,
                                       ferry_err *err);
void ferry_rebalance_plan_free(ferry_rebalance_plan *p);

/* After a rebalance: makes ACTIVE every NEW shard (catalog.h) that no step of `remaining` (the
 * plan computed again once the run ended) goes to: its first rebalance is over, and split raises
 * may place slices on it again. *settled (may be NULL) counts them. Likewise clears the
 * placed_weight of every re-weighted shard that no step goes to or leaves: the routing table is
 * balanced for its weight now (not counted in *settled). */
int ferry_shards_settle(ferry_catalog *cat, const ferry_rebalance_plan *remaining, size_t *settled,
                        ferry_err *err);

/* The plan's moves for the scheduler (include/ferry/schedule.h): out[i] (p->n_moves entries) is
 * move i with its shards numbered (every name a move reads from or writes to, in name order;
 * *n_shards of them), a drop without a target, and the steps of one slice sharing a slice number
 * (so they run one after another, in plan order). */
struct ferry_sched_move;
int ferry_rebalance_sched_moves(const ferry_rebalance_plan *p, struct ferry_sched_move *out,
                                size_t *n_shards, ferry_err *err);

#endif

/* Tiering's private pieces shared by tier.c (the state machine of a wave of jobs, the journal),
 * tier_steps.c (the steps FREEZE to VERIFY), tier_cleanup.c (CLEANUP, the catalog records,
 * rollback), tier_agent.c (agent requests for many parts, several at a time) and tier_run.c
 * (finding partitions, grouping jobs into waves, the run). See include/ferry/tier.h and
 * docs/tiering.md. */
#ifndef FERRY_TIER_INT_H
#define FERRY_TIER_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferry/agent.h"
#include "ferry/agent_ops.h"
#include "ferry/buf.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/objstore.h"
#include "ferry/partition.h"
#include "ferry/tier.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/slice_lease.h"
#include "flow/tier_state.h"

/* The most partitions of one (server, table) tiered as one wave: bounds one ALTER statement
 * (about 100 bytes per partition, far below max_query_size) and one catalog batch. */
#define TIER_WAVE_MAX 256
/* Agent requests in flight at once for uploads and pointer parts (each with its own client),
 * and so the fewest chunks a wave's parts are spread over (TIER_CHUNK_PARTS below). Measured on the 2-core lab
 * machine (docs/benchmarks.md): the 5 parts of the blog's tenant uploaded in 93-137 ms as 2
 * requests, 104-133 ms as 1, 127-189 ms as 5 at once; each request also pays the agent's table
 * lookup once. */
#define TIER_AGENT_THREADS 2
/* The most parts, and about the most bytes, of one upload (or write-pointers) request. An agent
 * answers a request when every part of it is done, so a request's time grows with what it
 * carries: the settle phase of the chaos soak sent a wave of hundreds of parts as 2 requests, and
 * under a slow object store one of them took longer than the client's 600 s (the agent answered
 * later, the job failed). Bounded requests keep each answer minutes below the timeout whatever
 * the wave's size: a big partition takes more requests, TIER_AGENT_THREADS at a time. A part
 * larger than TIER_CHUNK_BYTES goes alone. */
#define TIER_CHUNK_PARTS 16
#define TIER_CHUNK_BYTES (256ull << 20)
/* A fresh job's partition of more hot parts than this, all hot and at most TIER_COMPACT_BYTES,
 * is merged into one part (OPTIMIZE ... FINAL) before it freezes (tier_run.c maybe_compact). */
#define TIER_COMPACT_PARTS 16
/* A partition with late rows (cold parts beside hot ones) of at most this many hot parts tiers
 * in a wave that holds merges from its freeze (tier_run.c): fresh inserts, merged within seconds
 * otherwise. More hot parts tier in a plain wave, so merges can take them down first. */
#define TIER_LATE_HOLD_PARTS TIER_COMPACT_PARTS
/* A due partition with late rows (cold parts beside hot ones, never compacted: the merge would
 * read the cold parts back) in more hot parts than this, at most TIER_COMPACT_BYTES of them,
 * waits for the table's merges: the run skips it and a later one tiers it (tier_run.c
 * scan_table). Late rows pile up so only where merges stopped for a while; tiered as they are,
 * each part would be an upload, an ATTACH through the object store and objects of its own for
 * good (the ZooKeeper soak of session 29: 18 partitions of 740-1,690 such parts, 21 minutes of
 * uploads through its s3rver). A run asked for --no-compact tiers them as they are. */
#define TIER_PILED_PARTS 64
#define TIER_COMPACT_BYTES (1ull << 30)
/* The most parts one statement of the ATTACH step (ATTACH PART in staging) and, as far as whole
 * partitions allow, of the swap names or brings in. ClickHouse answers an ALTER when every
 * command of it is done, and attaching a pointer part reads it through the object store (about
 * 0.45 s a part in the chaos soak through its two proxies, load 25-40): the settle phase's wave
 * of 1,614 parts as one ATTACH got no answer within the client's 600 s, nor did its swap of
 * several hundred DETACH PARTs. 32 parts keep a statement near 15 s there. One partition's swap
 * is never split (its DETACH PARTs and its ATTACH FROM must run as one ALTER: docs/tiering.md),
 * so a partition with more frozen parts than this has a statement of its own. */
#define TIER_STATEMENT_PARTS 32
/* tiering's agent requests: the longest wait for an answer (FERRY_TEST_AGENT_TIMEOUT_MS in tests) */
long tier_agent_timeout_ms(void);

/* A table's storage policy as this run saw it (tier_table_policy's cache: the checks before a
 * wave ask about the same tables several times). */
typedef struct tier_policy {
    char db[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char policy[FERRY_NAME_MAX];
    bool exists, remote;
} tier_policy;

/* One server (a shard's first replica) as the flow talks to it. Its ClickHouse client is only
 * ever used through tier_sql / mv_sql (ferry_guarded_exec) and the read-only fingerprints of
 * verify.h; conn counts the statements and agent requests made. */
typedef struct tier_server {
    ferry_shard shard;
    mv_conn conn;
    bool opened;
    bool checked;      /* the pointer-format check ran */
    int check_rc;      /* its result */
    char check_msg[FERRY_ERR_MSG_MAX];
    /* the request pool's other clients (tier_agent.c: made on first use, kept for the run, so
     * each remembers what it learnt of an agent of API 1, as conn.ag does) */
    ferry_agent_client *pool_clients[TIER_AGENT_THREADS - 1];
    bool version_known;     /* ch_major.ch_minor: the server's ClickHouse (its agent says) */
    int ch_major, ch_minor;
    tier_policy *policies;  /* owned */
    size_t n_policies;
} tier_server;

typedef struct tier_ctx {
    const ferry_tier_options *opt;
    ferry_config cfg;
    ferry_catalog *cat;
    ferry_settings settings;
    ferry_record_list tables;  /* FERRY_REC_TABLE */
    ferry_record_list tenants; /* FERRY_REC_TENANT */
    tier_server *servers;
    size_t n_servers;
    ferry_objstore *store; /* clickhouse role: reading back what an old agent did not report */
    char owner[FERRY_NAME_MAX];
    ferry_flow_journal journal; /* the jobs' records (include/ferry/flow_journal.h) */
    int64_t now;
    uint64_t older_than;
    json_t *report;
    double step_ms[FERRY_TIER_STATE_COUNT];
    double load_ms;        /* the ATTACH in staging and the swap statements themselves */
    double fingerprint_ms; /* verification queries */
    unsigned long catalog_writes, waves;
    bool lost;             /* a compare-and-set on a job record failed: another worker owns it */
    ferry_slice_leases slices; /* the slices whose jobs run now (repair keeps off them) */
    /* The journal's unfinished tier jobs whose swap is not verified (I6: their tables' merges
     * stay stopped): job id -> "server\x1fdb\x1ftable". Read once a run (resume_jobs seeds it
     * from its own list), then kept by each wave's end: the run's leases keep other runs off
     * these servers' jobs. NULL until read. */
    json_t *held;
} tier_ctx;

/* One job while it runs. st is its journal state, typed (flow/tier_state.h lists the keys and
 * what each means): decoded from the job record when the job is loaded, encoded into it at each
 * journal write (tier_hot_text). db, table and pid are st's, copied for the steps. */
typedef struct tier_job {
    ferry_record rec;
    enum ferry_tier_state state;
    tier_state st;
    tier_server *srv;
    char db[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char staging[FERRY_NAME_MAX];
    char pid[FERRY_NAME_MAX];
    json_t *objects;       /* part name -> the upload answer (this process only) */
    json_t *sizes;         /* part name -> bytes, from this process's FREEZE (to balance
                              uploads; NULL when the job was frozen by another process) */
    bool freeze_started_here;
    bool resumed;
    bool merged_away;      /* a frozen part was merged (or mutated) away before the swap: rolled
                              back, and run again in a wave that holds merges (tier_run.c) */
    bool swap_undone;      /* its swap was undone after a part it brought in was detached as
                              broken (tier_mend.c): rolled back, and run again like merged_away */
    bool late_rows;        /* its partition has cold parts beside at most TIER_LATE_HOLD_PARTS
                              hot ones: tiered before, it got rows since, whose fresh parts
                              ClickHouse merges next; its first wave holds merges (tier_run.c) */
    bool out;              /* left its wave: finished, failed, or waits for the next run */
    /* Its slice is being moved to or from its server, and its swap may have run and is not
     * verified: it is resumed anyway (a move that waits for the table's merges, which this
     * job holds stopped (I6), would otherwise wait for ever: docs/tiering.md, "A swap left
     * unverified while its slice moves"), as far as its verification only; CLEANUP, whose
     * part records a move hands over when it ends, waits for the move's end. */
    bool moving;
    /* With moving: its server is not the source of a move that has not switched routing yet
     * (it is the target, which shares the staging table with the move, or the move is past
     * its switch), so its swap may only be found run and finished; one that did not run is
     * taken back (no rollback: that empties staging's partition), anything else waits. */
    bool swap_finish_only;
    bool left_with_move;   /* rolled back on a server its slice has left: no failure (tier_run.c) */
    int rc;                /* this run's failure (0: none) */
    ferry_err err;
    uint64_t bytes_uploaded, files_uploaded, pointer_bytes, pointer_files;
    double check_ms;       /* the agent's time checking its uploads against checksums.txt */
    double step_ms[FERRY_TIER_STATE_COUNT]; /* its share of its wave's step times */
    /* the part list in companion records (tier_hot.c): the hash of the list they hold (0:
     * none), of the list in a batch not yet committed, and how many exist */
    uint64_t hot_written, hot_staged;
    size_t hot_records, hot_staged_records;
} tier_job;

/* How long a router's write to the job's slice must have been open to hold its swap back
 * (ferry_router_retry_pending): since the freeze (st.frozen_at, kept in the job's data so a
 * resumed run knows it), or 1 ms (any open write) for a job frozen by a version that did not
 * record it, or when the clock went back. */
static inline uint64_t tier_job_open_since(const tier_job *j)
{
    uint64_t now = ferry_clock_wall_ms();
    return j->st.has_frozen_at && now > j->st.frozen_at ? now - j->st.frozen_at : 1;
}

/* The jobs of one (server, table) whose steps run together: one statement, one agent request
 * (or a few at once) and one catalog batch per step for all of them. */
typedef struct tier_wave {
    tier_server *srv;
    char db[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char staging[FERRY_NAME_MAX];
    char empty[FERRY_NAME_MAX]; /* the always-empty twin staging is emptied from */
    tier_job **jobs; /* borrowed */
    size_t n;
    bool staging_ready;  /* staging and the empty twin checked (and created) by this wave */
    bool staging_exists; /* seen to exist (ferry never drops it) */
    bool no_replace;     /* the server's REPLACE PARTITION is not crash-safe (tier_replace_unsafe) */
    bool atomic_swap;    /* REPLACE PARTITION allowed (ferry_tier_options.atomic_swap) */
    bool hold_merges;    /* the table's merges stay stopped from FREEZE to the swap: the second
                            try of jobs whose frozen parts a merge took (tier_run.c) */
    bool merges_stopped_here; /* this process sent SYSTEM STOP MERGES on the table and has not
                                 started them again since (tier_wave_run's end does) */
    bool merges_owed;    /* a moving job's swap was verified (or taken back) and its CLEANUP,
                            which starts the merges the swap stopped, waits for the move: the
                            end of the wave starts them unless another job needs them */
} tier_wave;

/* Whether REPLACE PARTITION on the server leaves the parts it replaced on disk, outdated, with
 * no empty part covering them: ClickHouse before 26.7 (26.5 does; 26.7 writes the covering
 * part). A restart (a crash, a kill -9) before old_parts_lifetime (8 min by default) removed
 * them loads them again as active next to the new parts: the partition's rows twice. On such a
 * server tiering swaps with the attach form (DETACH PART of the frozen parts, then ATTACH
 * PARTITION FROM staging: DETACH leaves nothing to load again) and empties staging by DETACH,
 * never by REPLACE. Asks the agent once (tier_server_check); an unknown version counts as
 * unsafe. */
bool tier_replace_unsafe(tier_ctx *ctx, tier_server *srv);

/* ---- tier.c: journal, failures, the wave's state machine ---- */

/* Runs sql on the server through the SQL guard; out may be NULL. */
int tier_sql(tier_server *srv, const char *sql, ferry_buf *out, ferry_err *err);

/* The storage policy of db.table (*exists false when there is no such table) and whether it
 * has a disk on object storage; asked once per run (tier_forget_policy after a CREATE). */
void tier_forget_policy(tier_server *srv, const char *db, const char *table);
int tier_table_policy(tier_server *srv, const char *db, const char *table, bool *exists,
                      char *policy, size_t policysz, bool *has_remote, ferry_err *err);
/* Whether a swap may start on w's server: FERRY_EIO saying what is short (bytes unreserved on
 * a local disk of the table's policy, or inodes under [cluster] min_free_inodes plus the wave's
 * parts) and that nothing was swapped; other codes for a check that could not be made
 * (tier_room.c). */
int tier_check_room(tier_ctx *ctx, tier_wave *w, ferry_err *err);
/* The staging table of db.table, when it exists (or must_exist), has the table's storage policy
 * and a disk on object storage. */
int tier_check_staging(tier_server *srv, const char *db, const char *table, bool must_exist,
                       ferry_err *err);

/* Marks a job failed in this run (the first failure counts); returns rc. */
int tier_job_fail(tier_job *job, int rc, const ferry_err *err);
/* Journals state `to` for the jobs js[0..n) in one catalog batch through the flow engine
 * (ctx->journal, include/ferry/flow_journal.h): each a compare-and-set on its record, a
 * transition ferry_tier_flow does not declare is FERRY_EINTERNAL, the crash points
 * FERRY_TEST_CRASH_BEFORE/_AFTER=<state> around it. FERRY_ECONFLICT (and ctx->lost) when another
 * worker changed one of them. */
int tier_journal(tier_ctx *ctx, tier_job **js, size_t n, enum ferry_tier_state to,
                 ferry_err *err);
/* The same, writing each job's data as it is now and its own failure as detail: a note when
 * every job is in `to` already (a failed job keeps its state: no crash point), else the
 * transition (to FAILED). */
int tier_journal_detail(tier_ctx *ctx, tier_job **js, size_t n, enum ferry_tier_state to,
                        ferry_err *err);
/* Whether job j's swap may have run (journaled as chosen) and is not verified yet: the table's
 * merges must stay stopped until it is (I6 in tier.c), by this run or a later one. */
bool tier_job_swap_unverified(const tier_job *j);
/* Whether a job of the wave other than js[0..n) still needs the table's merges stopped (I6 in
 * tier.c): its swap may have run and is not verified yet, or the wave holds merges and the job
 * is frozen and not swapped. */
bool tier_wave_needs_stop(const tier_wave *w, tier_job *const *js, size_t n);
/* ctx->held from the journal's unfinished tier jobs (ferry_flow_list_unfinished's list). */
int tier_held_seed(tier_ctx *ctx, const ferry_record_list *unfinished, ferry_err *err);
/* Keeps ctx->held true to the journal after a wave: job_id held (unverified: its swap may have
 * run and is not verified) or not. Nothing when ctx->held was not read yet. */
void tier_held_note(tier_ctx *ctx, const char *job_id, const char *server, const char *db,
                    const char *table, bool unverified);
/* Whether an unfinished job of the journal on db.table of srv, other than the jobs of wave w
 * (NULL: none excluded), has an unverified swap (tier_job_swap_unverified): a job an earlier run
 * or wave left for later. Its id goes to job_id. Answers from ctx->held, read from the journal
 * the first time when resume_jobs did not seed it. True also when the journal cannot be read
 * (merges stay as they are; logged). */
bool tier_journal_holds_merges(tier_ctx *ctx, const tier_server *srv, const char *db,
                               const char *table, const tier_wave *w, char *job_id,
                               size_t job_id_size);
/* Whether the wave's table must keep its merges stopped for a job other than js[0..n): the
 * wave's own (tier_wave_needs_stop) or one the journal holds (tier_journal_holds_merges; read
 * only when the wave does not decide it). Logs a hold the journal decides. */
bool tier_merges_needed(tier_ctx *ctx, const tier_wave *w, tier_job *const *js, size_t n);
/* SYSTEM START / STOP MERGES on the wave's table; a stop then waits (bounded) until no merge of
 * the table runs. Keeps w->merges_stopped_here: the end of the wave starts merges this process
 * stopped again unless a job left for later has an unverified swap. */
int tier_table_merges(tier_wave *w, bool start, ferry_err *err);
/* SYSTEM STOP MERGES on the wave's staging table when it exists (never started again). */
int tier_staging_merges_stop(tier_wave *w, ferry_err *err);
/* Runs count_sql (a SELECT count() ...) on the wave's server until it answers 0, backing off up
 * to 200 ms between tries, for at most 60 s; then FERRY_ETIMEOUT with timeout_msg. */
int tier_wait_none(tier_wave *w, const char *count_sql, const char *timeout_msg, ferry_err *err);

/* Runs every job of the wave from its journaled state to DONE or FAILED, the lowest state
 * first, each step for all jobs in it at once. A job that fails before its swap is rolled back
 * (I2); after it, it stays where it is for the next run. Returns FERRY_ECONFLICT when another
 * worker took a job (a journal write lost its compare-and-set: ctx->lost; the wave stops at
 * once), else FERRY_OK (each job's own rc says how it went). */
int tier_wave_run(tier_ctx *ctx, tier_wave *w, ferry_err *err);
/* Checks that the server's ClickHouse reads the pointer format pinned in the catalog (cached per
 * run). */
int tier_server_check(tier_ctx *ctx, tier_server *srv, ferry_err *err);
/* Opens the ClickHouse and agent clients of srv (cached). */
int tier_server_open(tier_ctx *ctx, tier_server *srv, ferry_err *err);
/* Whether the job's server still serves its slice (the slice's route names it; tier_cleanup.c):
 * a job cut after its swap may resume after a move took the slice away (its VERIFY is then the
 * move's, and its part records follow the slice). */
int tier_job_served(tier_ctx *ctx, tier_job *job, bool *served, ferry_err *err);

/* ---- tier_steps.c ---- */
int tier_step_freeze(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
int tier_step_upload(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
int tier_step_pointers(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
int tier_step_attach(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
int tier_step_replace(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
int tier_step_verify(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
/* The digest of parts by their content (rows, sum and xor of a hash of each hash_of_all_files,
 * the number of parts in `distinct`): equal digests are equal data (docs/tiering.md). */
void tier_parts_digest(const mv_part *const *ps, size_t n, ferry_fingerprint *fp);
/* The parts of the jobs' partitions in table (the wave's table or its staging table). */
int tier_list(tier_wave *w, const char *table, tier_job **js, size_t n, bool active_only,
              mv_slice *out, ferry_err *err);

/* ---- tier_mend.c ---- */
/* VERIFY of an attach swap failed (why) or the job's data says a mend began (st.mend; why may
 * then be NULL): when a part the swap brought in was detached as broken (in staging, or in the
 * table above max_block) and every frozen part is active or in detached/ by name, the swap is
 * undone (journaled first) and the job failed with swapped false, for its rollback; otherwise the
 * job is failed with why, plus the broken folders of the partition that are not the swap's.
 * Returns an error only when the server or the catalog failed under it. Not for a moving job. */
int tier_mend_broken(tier_ctx *ctx, tier_wave *w, tier_job *job, const mv_slice *all,
                     const ferry_err *why, ferry_err *err);

/* ---- tier_cleanup.c ---- */
/* Empties the jobs' partitions of the staging table: active parts DETACHed (one statement),
 * then their detached folders removed by the agent (plain file removal). */
int tier_clean_staging(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
int tier_step_cleanup(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
/* Undoes the jobs (none has swapped: I2) and journals them FAILED with their errors. */
int tier_rollback(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);

/* ---- tier_hot.c: the part list beyond a job record ---- */
/* The job record's data text (*text, malloc'ed): with the hot list moved to companion records
 * when it does not fit; those must be in the catalog or staged (tier_hot_stage). */
int tier_hot_text(tier_job *job, char **text, ferry_err *err);
/* Adds to b the companion records of the job's hot list when it needs them and they do not hold
 * it yet; tier_hot_committed(job, ok) after the batch's commit. */
int tier_hot_stage(tier_ctx *ctx, tier_job *job, ferry_batch *b, ferry_err *err);
void tier_hot_committed(tier_job *job, bool ok);
/* A loaded job whose record says "hot_in": reads its hot list back from the companions. */
int tier_hot_load(tier_ctx *ctx, tier_job *job, ferry_err *err);

/* ---- tier_agent.c ---- */
/* Frees the server's pool clients (the typed client's ferry/agent_ops.h requests: conn.ag). */
void tier_agent_close(tier_server *srv);
/* FREEZE of every job without a failure, its partition under its freeze name (one request, or
 * one per job for an agent of API 1, where a partition gone or refused fails only its job);
 * *out: the frozen parts, each with its freeze (caller frees with ferry_agent_frozen_free). */
int tier_agent_freeze(tier_wave *w, tier_job **js, size_t n, ferry_agent_frozen *out,
                      ferry_err *err);
/* Uploads the jobs' frozen hot parts (every part of `hot` whose objects this process does not
 * know yet, or all when force), several requests at once; each part's answer goes to its job's
 * objects. A part that fails fails its job. */
int tier_agent_upload(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, bool force,
                      ferry_err *err);
/* Writes the jobs' pointer parts into the staging table's detached/, several requests at once;
 * a part that fails fails its job. */
int tier_agent_pointers(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);
/* Removes detached/<part> of table for every name (one request, or one per part). */
int tier_agent_remove_detached(tier_wave *w, const char *table, json_t *names, ferry_err *err);
/* Removes the freezes of every attempt of each job (one request, or one per name). */
int tier_agent_remove_freezes(tier_wave *w, tier_job **js, size_t n, ferry_err *err);

#endif

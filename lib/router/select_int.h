/* Private to the router's read path (docs/routing.md, "Reads"), one concern per file:
 *
 *   select_state.c  the read path's state and configuration, the per-snapshot candidate cache,
 *                   the partial results published at GET /ferry/partial/<token>, counters
 *   select_exec.c   a request's options and failures, the replica picked per slice, the
 *                   targets of a plan, running a query on a server with failover
 *   select_merge.c  single-server and merged plans: partial jobs, GLOBAL subqueries
 *                   materialised once, the initiator's query
 *   select_round.c  a merged plan's partial jobs run in rounds, failing over per server
 *   select_pipe.c   pipelined merges (the initiator starts with the partials) and the choice
 *                   between them and run_merged
 *   select.c        the HTTP side: one routed SELECT streamed back, EXPLAIN, deadlines
 */
#ifndef FERRY_ROUTER_SELECT_INT_H
#define FERRY_ROUTER_SELECT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/read_pick.h"
#include "ferry/sqlrw.h"
#include "qcache.h"
#include "router_int.h"

/* Per routing snapshot: every slice's read candidates (rt_read_set), grouped by tenant
 * in the snapshot's tenant order (immutable once built). The per-query choice among them is
 * made by rd_pick_build. */
typedef struct rd_cslice {
    uint32_t split;
    uint32_t n_cand;
    uint32_t n_fresh;     /* cand[0..n_fresh) took every acknowledged write; the rest missed
                           * some (rt_readers.n_fresh) */
    const uint32_t *cand; /* into rd_cache.cand_store */
} rd_cslice;

typedef struct rd_cache {
    atomic_int refs;
    rt_snapshot *snap;        /* a reference; slice tenant names point into it */
    size_t n_servers;         /* == router shards */
    size_t *tenant_first;     /* per snapshot tenant: its first slice in cslices; [n_tenants] */
    rd_cslice *cslices;
    size_t n_cslices;
    uint32_t *cand_store;
    char **unrouted;          /* tenants with a slice no known shard serves */
    size_t n_unrouted;
    char **held;              /* tenants with a slice a move is publishing (rt_read_set) */
    const char **held_move;   /* the move of each */
    size_t n_held;
    ferry_sql_tenant_splits *tenant_splits; /* per snapshot tenant, sorted (names borrowed) */
} rd_cache;

/* One published partial result: the bytes of one or more servers' Native answers. A live one
 * (pipelined merges, live_*) is read while its queries still run: segs[0..n_segs) are complete
 * answers, more are appended until it is done (or failed: its readers get a broken transfer). */
typedef struct rt_partial {
    char token[40];
    ferry_buf *segs;
    size_t n_segs;
    atomic_int refs;
    struct rt_partial *next;
    bool live, done, failed;
    size_t cap;
    pthread_mutex_t mu; /* live only: segs, n_segs, done, failed */
    pthread_cond_t cond;
} rt_partial;

struct rt_reads {
    bool allow_fanout;
    uint64_t global_max_rows, global_max_bytes, max_partial_bytes;
    char rd_advertise[FERRY_URL_MAX]; /* "" until the port is known (then derived) */
    char listen_host[64];
    ferry_sql_table *tables;
    size_t n_tables;
    pthread_mutex_t mu; /* partials, cache, counters */
    rt_partial *partials;
    rd_cache *cache;
    uint64_t single, merged;
    ferry_histogram plan_seconds[2]; /* single, merged: from the plan's start to its answer's end */
    /* replica choice per slice (docs/replicas.md): selectors per candidate list, error counts
     * kept across queries and routing versions */
    pthread_mutex_t sel_mu; /* rsets, rng, the per-shard counters */
    ferry_rsets *rsets;
    ferry_rsel_rng rng;
    uint64_t *shard_queries, *shard_errors; /* per router shard: read queries sent, failed */
    uint64_t failovers;
    /* slices read from a replica that missed acknowledged writes (no up-to-date one answered,
     * [router] fallback_to_stale_replicas), and reads refused for it */
    uint64_t stale_reads, stale_refused;
    /* pipelined merges: the partials' column structures by statement (merge_struct_key) */
    rt_qcache *structs;
    uint64_t pipelined;
};

#define RD_MAX_CAND 64

typedef struct partial_reader {
    rt_partial *p;
    size_t seg, off;
} partial_reader;

/* The client's side of a request: its settings and query parameters, database, format. */
typedef struct rd_opts {
    ferry_ch_setting *all;    /* owned names/values: settings and param_* */
    size_t n_all;
    ferry_ch_setting *server; /* the same without initiator-only settings (borrowed strings) */
    size_t n_server;
    char *database;
    char *default_format;
    char *query_id;
} rd_opts;

/* Why a request failed, as it goes back to the client. */
typedef struct rd_fail {
    int rc;
    bool remote;       /* a server's exception: pass message and status through */
    long http_status;
    int ch_code;
    char name[64];     /* ClickHouse error name for our own errors */
    bool held;         /* the query reads a slice being published: retry with a newer table */
    ferry_err err;
    ferry_ch_status st;
} rd_fail;

typedef struct rd_ctx {
    ferry_router *r;
    rt_reads *rd;
    rd_cache *cache;
    const rd_opts *o;
    rt_partial **pubs; /* published for this request; unpublished when it ends */
    size_t n_pubs;
    char plan_kind[16];
    char shards[512];
    int depth;
    /* the query being run: its analysis, the replica picked per slice (rd_pick_build; failover
     * moves slices on), whether the plan was made with materialized GLOBAL subqueries, and
     * their replacements (_data_ name -> expression) for queries planned again on failover */
    const ferry_sql_analysis *a;
    ferry_rpick *pick;
    ferry_sql_slice *pick_slices; /* per pick slice: tenant (into the snapshot), split */
    uint32_t *pick_fresh;         /* per pick slice: its order's first pick_fresh candidates
                                   * took every acknowledged write, the others missed some (in
                                   * pick_slices' allocation) */
    /* a slice whose every replica it may read missed writes, with [router]
     * fallback_to_stale_replicas = false: every server query of the read is refused with this
     * (rd_shard_exec_cx); "" when none */
    char stale_refusal[384];
    bool planned_mat;
    char **repl; /* pairs: name, expression (owned) */
    size_t n_repl;
    /* a user bound to tenants (auth.c): every managed reference restricted to its tenants'
     * slices, in every plan and GLOBAL subquery; NULL for admins */
    const ferry_sql_scope *scope;
    /* the user's max_execution_time (limits.c): every server query carries the deadline's tag
     * in its query id and text, so it can be cancelled on every shard; NULL: no limit */
    rt_deadline *deadline;
    /* the bytes of this request's buffered results (partials, GLOBAL subqueries, the fast
     * path's answer) charged to the router's memory budget (budget.c); NULL: not charged */
    _Atomic size_t *mem_charged;
} rd_ctx;

/* Per-server targets for the planner, built from the pick. Normal: n_servers targets, each
 * serving the slices currently picked on it. Retry: 2 x n_servers targets: the first half a
 * filler serving every slice on every candidate (so the planner sees the same multi-server
 * query and makes the same plan kind; its queries are not run), then target n_servers + s
 * serving exactly the unanswered slices now on server s. */
typedef struct rd_targets {
    size_t n;
    ferry_sql_slice *store;
    ferry_sql_served *served;
    ferry_sql_target *t;
} rd_targets;

/* A sink collecting into a bounded buffer. With r and charged set (rd_buf_sink_charge), every
 * byte is first charged to the router's memory budget; past it the sink fails with mem_over
 * (the query gets MEMORY_LIMIT_EXCEEDED: rd_fail_budget). */
typedef struct buf_sink {
    ferry_buf *b;
    uint64_t max;
    atomic_uint_fast64_t *shared_total; /* across the partials of one plan, or NULL */
    bool over;
    ferry_router *r;
    _Atomic size_t *charged; /* the request's counter (rd_ctx.mem_charged), or NULL */
    bool mem_over;
} buf_sink;

typedef struct partial_job {
    rd_ctx *cx;
    size_t server;
    int ref;           /* GATHER: the managed reference; else -1 */
    const char *plain; /* the server query as planned (borrowed from a plan) */
    char *sql;         /* with the statement's server SETTINGS */
    ferry_buf out;
    buf_sink sink;
    int rc;
    ferry_ch_status st;
    ferry_err err;
    bool dropped;      /* its server failed in its round: output discarded, slices moved on */
    bool grouped;
    /* pipelined merges (pipe_job_main): the live partial its answer joins, its round */
    struct rt_partial *live;
    struct pipe_round *pipe;
    bool ended;
} partial_job;

/* Statements longer than this are not kept as structure keys (256 of them at most). */
#define MERGE_STRUCT_TEXT_MAX (64u << 10)

/* DESCRIBE of one group's partial query, run beside the first (not pipelined) execution. */
typedef struct describe_job {
    rd_ctx *cx;
    size_t server;
    char *sql;
    ferry_buf out;
    int rc;
} describe_job;

/* The round of partial jobs running now (see pipe_job_main). */
typedef struct pipe_round {
    pthread_mutex_t mu;
    partial_job **jobs;
    size_t from, n;
    bool append_failed;
} pipe_round;

/* The initiator of a pipelined merge, on its own thread. */
typedef struct init_job {
    rd_ctx *cx;
    size_t server;
    const char *sql;
    const ferry_read_plan *p;
    const char *format;
    ferry_ch_write_fn sink;
    void *arg;
    uint64_t delivered; /* bytes that reached sink */
    long read_timeout_ms;
    int rc;
    rd_fail f;
} init_job;

typedef struct rd_stream {
    ferry_router *r;
    char *sql; /* the statement text the analysis points into (the request's buffer) */
    ferry_sql_analysis a;
    rd_opts o;
    ferry_sql_scope scope;    /* a bound user's (the principal's, with this request's database
                               * and query parameters) */
    ferry_sql_param *params;  /* the request's param_* (strings borrowed from o) */
    rd_ctx cx;
    ferry_read_plan plan;
    ferry_buf small; /* the fast path's answer */
    int pipe_rd, pipe_wr;
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    _Atomic size_t mem_charged; /* cx.mem_charged points here; given back when the run ends */
    size_t a_charged; /* the analysis's and the plan's share of the memory budget (select.c) */
    bool inflight; /* a read is registered in flight under cx.cache's version (rd_cache_get) */
    bool started;  /* the first byte of the answer is on its way: status 200 */
    bool finished;
    rd_fail fail;
    int rc;
} rd_stream;

/* The fast path buffers answers up to this size (beyond, the query runs again, streamed). */
#define SMALL_ANSWER_MAX (1u << 20)

/* ---- select.c: the memory the analysis of a statement holds, charged to the budget ---- */
/* An upper estimate of what ferry_sql_analyze allocates for text (its tokens, the token vector's
 * doubling and the two index arrays per token), from a scan that counts one token per run of
 * word bytes or of white space, per quoted string, and per other byte. */
size_t rd_analysis_estimate(const char *text, size_t len);
/* What an analysis holds: its tokens and their index arrays (the rest is small). */
size_t rd_analysis_bytes(const ferry_sql_analysis *a);

/* ---- select_state.c: the read path's state, its per-snapshot cache and the published partials ---- */
rd_cache *rd_cache_get(ferry_router *r, rt_reads *rd);
void rd_cache_put(rd_cache *c);
rt_partial *rd_partial_publish(rt_reads *rd, ferry_buf *segs, size_t n_segs);
void rd_partial_unpublish(rt_reads *rd, rt_partial *p);

/* ---- select_exec.c: requests, failures, replica picks, targets and running on a server ---- */
bool rd_conn_error(int rc);
void rd_ctx_pick_free(rd_ctx *cx);
int rd_fail_from_exec(rd_fail *f, int rc, const ferry_ch_status *st, const ferry_err *err);
int rd_fail_over(rd_ctx *cx, size_t server, const ferry_err *why, rd_fail *f);
int rd_fail_set(rd_fail *f, int rc, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int rd_opts_collect(ferry_http_req *req, rd_opts *o);
void rd_opts_free(rd_opts *o);
int rd_pick_build(rd_ctx *cx, const ferry_sql_analysis *a);
void rd_respond_fail(ferry_http_req *req, const rd_fail *f);
int rd_server_exec(rd_ctx *cx, size_t server, const ferry_ch_query *q, ferry_ch_status *st,
                       ferry_err *err);
int rd_shard_exec_cx(rd_ctx *cx, size_t server, const ferry_ch_query *q,
                         ferry_ch_status *st, ferry_err *err);
int rd_targets_build(rd_ctx *cx, bool mat, bool retry, rd_targets *out);
void rd_targets_free(rd_targets *t);

/* ---- select_merge.c: single and merged plans, GLOBAL subqueries, partial jobs ---- */
void rd_advertise(rd_ctx *cx, char *out, size_t outsz);
int rd_buf_sink_write(const void *data, size_t len, void *arg);
/* Charges what s collects to cx's request (nothing when cx has no counter). */
void rd_buf_sink_charge(buf_sink *s, const rd_ctx *cx);
/* Gives back len bytes of cx's charge (a buffer dropped before the request ends). */
void rd_mem_uncharge(const rd_ctx *cx, size_t len);
/* MEMORY_LIMIT_EXCEEDED for a sink that hit the budget. */
int rd_fail_budget(rd_ctx *cx, rd_fail *f);
int rd_job_add(rd_ctx *cx, const ferry_read_plan *p, partial_job ***jobs, size_t *n,
                   size_t *cap, size_t server, int ref, const char *plain,
                   atomic_uint_fast64_t *total);
int rd_partial_expr(rd_ctx *cx, rt_partial *p, ferry_buf *out);
void *rd_partial_main(void *arg);
int rd_plan_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, ferry_read_plan *plan,
                         rd_fail *f);
int rd_plan_for_pick(rd_ctx *cx, ferry_read_plan *plan, rd_fail *f);
int rd_pub_keep(rd_ctx *cx, rt_partial *p);
bool rd_reads_managed(const ferry_sql_analysis *a);
int rd_replace_all(char **s, const char *needle, const char *rep);
int rd_run_final_ex(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                        const char *format, const ferry_ch_setting *extra, size_t n_extra,
                        ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received,
                        long read_timeout_ms);
int rd_run_merged(rd_ctx *cx, ferry_read_plan *p, const char *format,
                      const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                      void *arg, rd_fail *f);
int rd_run_single(rd_ctx *cx, ferry_read_plan *plan, const char *format,
                      const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                      void *arg, rd_fail *f);

/* ---- select_round.c: a merged plan's partial jobs, run in rounds ---- */
/* The partial jobs of one merged plan: every round's, in order (jobs grow by pointer: a job's
 * sink points into the job), the failover plans their queries point into, and the bytes they
 * buffered together (max_partial_bytes). Lives where it was made (sinks point at total). */
typedef struct rd_rounds {
    partial_job **jobs;
    size_t n, cap;
    size_t from; /* the first job of the round running, or of the next one */
    ferry_read_plan *retries;
    size_t n_retries;
    atomic_uint_fast64_t total;
} rd_rounds;

/* What a way of running adds to each round. job_main runs one job (rd_partial_main or a wrapper
 * of it); optional: before, just before a round's jobs [from, n) start; after, once they all
 * ended, before the round is checked; joined, for the failover jobs [from, n) a round added.
 * A non-zero return of after or joined (with f set) ends the rounds. */
typedef struct rd_round_hooks {
    void *(*job_main)(void *job);
    void (*before)(rd_rounds *r, void *arg);
    int (*after)(rd_rounds *r, void *arg, rd_fail *f);
    int (*joined)(rd_rounds *r, void *arg, rd_fail *f);
    void *arg;
} rd_round_hooks;

void rd_rounds_init(rd_rounds *r);
/* Adds a job of the first round: plain (borrowed) on server, ref as in partial_job. */
int rd_rounds_add(rd_ctx *cx, const ferry_read_plan *p, rd_rounds *r, size_t server, int ref,
                  const char *plain, rd_fail *f);
/* Runs rounds from r->from until one needs no failover: each round's jobs at once; a result
 * over max_partial_bytes or the memory budget, or a server's own error, fails the query; a
 * server that could not be reached has its answers dropped and its unanswered slices planned
 * again (same plan kind) on their next replicas, as the next round. Non-zero with f set. */
int rd_rounds_run(rd_ctx *cx, const ferry_read_plan *p, rd_rounds *r, const rd_round_hooks *h,
                  rd_fail *f);
/* Frees the jobs (and their buffers) and the failover plans; r can be used again. */
void rd_rounds_free(rd_rounds *r);

/* ---- select_pipe.c: pipelined merges and the plan dispatch ---- */
int rd_exec_plan(rd_ctx *cx, ferry_read_plan *plan, const char *format,
                     const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                     void *arg, rd_fail *f);
void rd_live_end(rt_partial *p, bool failed);
int rd_run_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, const char *format,
                        const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                        void *arg, rd_fail *f);

#endif

/* The router daemon's internals shared by its files: configuration, the routing snapshot, shard
 * connections and the forwarding of one shard's rows. */
#ifndef FERRY_ROUTER_INT_H
#define FERRY_ROUTER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "ferry/auth.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/httpd.h"
#include "ferry/metrics.h"
#include "ferry/replica_select.h"
#include "ferry/router.h"
#include "ferry/sqlrw.h"

/* One shard as the router reaches it: its replicas' URLs and credentials (from the shard's
 * catalog record, each credential falling back to the config's [shard] section), a replica
 * selector, and idle ClickHouse clients per replica (a client is one keep-alive connection;
 * clients are not thread-safe, so each forward takes one out of the pool).
 *
 * Slots (rt_shards_sync) follow the catalog: a new shard gets the next slot; a shard whose
 * connection details change gets a new slot and its old one is retired, like a gone one. A slot
 * is never moved or freed before the router stops, so an index taken from any snapshot stays
 * valid for requests still running with it; a retired slot's idle connections are closed and
 * connections given back to it are closed too. */
typedef struct rt_pool_item {
    ferry_ch_client *client;
    struct rt_pool_item *next;
} rt_pool_item;

typedef struct rt_shard {
    char name[FERRY_NAME_MAX];
    ferry_shard rec;     /* the catalog record the slot was built from */
    size_t n_replicas;
    char **urls;
    rt_pool_item **idle; /* per replica */
    char user[128];
    char *password;      /* NULL: none; never logged */
    char conn_error[FERRY_ERR_MSG_MAX + 256]; /* why the slot cannot connect (an unreadable password file), or "" */
    ferry_replica_selector *sel;
    ferry_rsel_rng rng;
    pthread_mutex_t mu;  /* idle lists, selector, rng, retired */
    bool retired;        /* no snapshot built from now on names this slot */
} rt_shard;

#define RT_SHARDS_MAX 1024 /* slots over the router's life (shards added, and re-added changed) */

typedef struct rt_pending rt_pending; /* slices awaiting a client's retry (pending.c) */
typedef struct rt_journal rt_journal; /* those slices kept across restarts (retry_journal.c) */

/* What the router did since it started, for GET /metrics (metrics.c). */
enum rt_kind { RT_KIND_INSERT, RT_KIND_READ, RT_KIND_PASSTHROUGH, RT_KINDS };
/* Requests the router itself refused, by why (the HTTP server's own bounds are counted by it:
 * ferry_httpd_metrics). */
enum rt_refusal {
    RT_REFUSED_AUTH,   /* AUTHENTICATION_FAILED: credentials or the cluster token */
    RT_REFUSED_LIMIT,  /* a user's rate or concurrency limit (limits.c) */
    RT_REFUSED_MEMORY, /* MEMORY_LIMIT_EXCEEDED: the memory budget (budget.c) */
    RT_REFUSALS
};
typedef struct rt_metrics {
    pthread_mutex_t mu;
    uint64_t requests[RT_KINDS][2]; /* [kind][0 ok, 1 error] */
    ferry_histogram seconds[RT_KINDS];
    uint64_t *rows_by_slot;          /* RT_SHARDS_MAX entries: rows written per shard slot */
    uint64_t *bytes_by_slot;         /* RT_SHARDS_MAX entries: their body bytes */
    _Atomic uint64_t refused[RT_REFUSALS];
} rt_metrics;

/* A routing table snapshot: immutable once published, shared by reference. A tenant's routes
 * live in one block (rt_tblock: the routes, their shard indices, the names) that snapshots
 * share by reference, so a reload that changes a few tenants builds only theirs and copies the
 * rest of the table's entries (docs/routing.md "Loading the table"). */
typedef struct rt_tblock rt_tblock;

typedef struct rt_tenant {
    char *name;          /* in block */
    uint32_t splits;
    uint32_t n_routes;   /* routes known: splits 0..n_routes-1 (a missing one has n_shards 0) */
    struct rt_route *routes;
    rt_tblock *block;    /* holds name and routes, one reference per snapshot; NULL: not owned */
} rt_tenant;

typedef struct rt_route {
    uint32_t n_shards;
    uint32_t *shards;    /* indices into router->shards */
    const char *missing; /* a shard name the route has that the router does not know, or "" */
    uint32_t stale;      /* bit k: shards[k] missed acknowledged writes of the slice (its
                          * repair-need record, include/ferry/repair_need.h; k < 32) */
} rt_route;

/* A slice's move in SWITCH (the only state in which what a shard holds differs from what the
 * route says; see rt_read_set), kept beside the routes: moves are read whole on every reload. */
typedef struct rt_move {
    char *tenant;
    uint32_t split;
    bool publishing;      /* its step is PUBLISH: staging -> real on the target */
    long move_from;       /* the source's index into router->shards; -1: unknown to the router */
    long move_to;         /* the target's index; -1: unknown */
    char move_id[64];
} rt_move;

/* A shard name and the live slot it resolved to when a snapshot was built. */
typedef struct rt_shard_ref {
    char *name;
    uint32_t slot;
} rt_shard_ref;

/* A user of the router as one snapshot knows it (auth.c): the catalog record and what the
 * checks need, parsed once per snapshot. */
typedef struct rt_user {
    ferry_user rec;
    ferry_cidr *nets;   /* rec.networks parsed; n_nets 0: any address */
    size_t n_nets;
    bool unusable;      /* the record cannot be enforced (malformed networks): logins refused */
    char **tenants;     /* bound users: sorted */
    size_t n_tenants;
    char **tables;      /* bound users: "db.table" they may read besides managed tables */
    size_t n_tables;
} rt_user;

typedef struct rt_snapshot {
    atomic_int refs;
    uint64_t version;
    size_t n_tenants;
    rt_tenant *tenants; /* sorted by name */
    size_t n_users;
    rt_user *users;     /* sorted by name */
    size_t n_moves;
    rt_move *moves;     /* the moves in SWITCH, sorted by (tenant, split), one per slice */
    size_t n_shard_refs;
    rt_shard_ref *shard_refs; /* the live slots the routes were resolved with, by name */
    bool incremental;   /* built from the previous snapshot and the routing change log */
} rt_snapshot;

typedef struct rt_table {
    ferry_table_def def;
    ferry_rt_schema schema; /* cached DESCRIBE; n == 0 until first needed */
    bool have_schema;
} rt_table;

/* Who sent a request (auth.c), from its authentication to its end. Admins (and every request
 * under [router] auth = none) may run any statement on every tenant; a bound user reads and
 * writes only its tenants' rows. */
typedef struct rt_principal {
    char name[FERRY_AUTH_USER_MAX];
    bool admin;
    bool anonymous;        /* [router] auth = none: nobody was authenticated */
    rt_snapshot *snap;     /* a reference to the snapshot whose record authenticated the user */
    const rt_user *user;   /* in snap; NULL when anonymous */
    ferry_sql_scope scope; /* bound users: tenants and tables borrowed from user; database and
                            * params are set per statement by the read path */
    bool has_slot;         /* holds one of the user's concurrent-request slots (limits.c) */
} rt_principal;

typedef struct rt_limits rt_limits;     /* per-user request slots and rates (limits.c) */
typedef struct rt_deadline rt_deadline; /* a read's execution deadline (limits.c) */

enum rt_auth_mode { RT_AUTH_CATALOG, RT_AUTH_NONE };

typedef struct rt_inflight {
    uint64_t version;
    uint64_t count;
} rt_inflight;

struct ferry_router {
    char config_path[1024];
    char catalog_url[FERRY_URL_MAX];
    char passthrough[FERRY_URL_MAX];
    size_t flush_bytes;         /* rows staged per shard before its stream opens / is fed */
    size_t stream_buffer_bytes; /* the queue between the parser and a shard's sender */
    size_t max_request_bytes;
    size_t max_row_bytes;
    /* budget.c: bodies read whole, the bytes they hold at once, connections and deadlines */
    size_t max_buffered_bytes;
    size_t max_query_size; /* a statement read whole (not an INSERT's data): the query parameter,
                              a newline and the body together, unless the request's own
                              max_query_size says otherwise (capped by max_buffered_bytes) */
    size_t memory_budget;
    _Atomic size_t mem_used;
    ferry_httpd_options http; /* connections and deadlines ([router] keys, budget.c) */
    long shard_timeout_ms;
    unsigned passthrough_timeout_s; /* the passthrough server sending nothing this long fails
                                       the request ([router] passthrough_timeout; 0: never) */
    ferry_lb load_balancing;

    ferry_config cfg;           /* the bootstrap config (credential fallback for old catalogs) */
    _Atomic size_t n_shards;    /* slots in use; a slot is complete before it is counted */
    rt_shard **shards;          /* RT_SHARDS_MAX slots (rt_shards_sync, under reload_mu) */
    size_t n_tables;
    rt_table *tables;

    ferry_catalog *watch_cat; /* the watcher thread's handle */
    ferry_catalog *check_cat; /* version checks before forwards, under check_mu */
    pthread_mutex_t check_mu;
    pthread_mutex_t reload_mu; /* one reload (and shard sync) at a time */

    pthread_mutex_t mu;       /* snapshot, schemas, inflight, stopping */
    pthread_cond_t cond;
    rt_snapshot *snap;
    bool stopping;
    rt_inflight inflight[64]; /* forwards in flight by routing version */
    size_t n_inflight;
    uint64_t requests, rows_routed, reroutes;
    uint64_t loads_full, loads_incremental; /* snapshots published by each way (routing.c) */
    pthread_t watcher;
    bool watcher_started;
    ferry_httpd *httpd;
    long publish_wait_ms; /* how long a read of a slice being published waits ([router]) */
    long route_wait_ms;   /* how long a row whose slice no known shard serves waits ([router]) */
    rt_pending *pending;  /* slices awaiting a client's retry ([router] retry_window) */
    rt_journal *journal;  /* NULL, or [router] retry_journal: pending retries kept across restarts */
    char journal_path[4096];
    unsigned min_insert_replicas; /* 0: every replica of a slice must take its rows */
    /* a read of a slice whose up-to-date replicas all failed (or that has none) goes to a
     * replica that missed writes (true, ClickHouse's fallback_to_stale_replicas_for_distributed_
     * queries default) or is refused with ALL_REPLICAS_ARE_STALE (false); docs/routing.md */
    bool fallback_to_stale;
    pthread_mutex_t quorum_mu;    /* the records of writes a replica missed (quorum.c): */
    ferry_catalog *quorum_cat;    /* opened at the first one, kept (NULL again after an error) */
    rt_metrics metrics;
    struct rt_reads *reads; /* the read path's state (select.c) */
    /* authentication (auth.c) and per-user limits (limits.c) */
    enum rt_auth_mode auth;
    char *cluster_token;        /* [cluster] router_token_file's secret, or NULL; never logged */
    unsigned char partial_key[32]; /* signs partial-result URLs (random per process) */
    pthread_mutex_t auth_mu;    /* throttle */
    ferry_auth_throttle *throttle;
    rt_limits *limits;
    size_t bound_insert_max_bytes; /* a bound user's insert is held whole up to this */
    char passthrough_user[128];
    char *passthrough_password; /* [router] passthrough_password_file's secret, or NULL */
    /* idle libcurl handles of finished passthrough transfers, with their kept-alive
     * connections to the passthrough server (passthrough.c) */
    pthread_mutex_t pt_pool_mu;
    void *pt_pool[32];
    size_t pt_pool_n;
    /* the threads that run passthrough transfers, kept between them (passthrough.c), under
     * pt_work_mu: transfers waiting for one, threads in all and idle */
    pthread_mutex_t pt_work_mu;
    pthread_cond_t pt_work_cond;
    struct rt_pt *pt_work_head, *pt_work_tail;
    size_t pt_work_queued;
    unsigned pt_workers, pt_idle;
    bool pt_work_stop;
};

/* ---- routing (routing.c) ---- */
/* The current snapshot with a reference (release with rt_snapshot_put). */
rt_snapshot *rt_snapshot_get(ferry_router *r);
void rt_snapshot_put(rt_snapshot *s);
/* Loads the routing table and tenants from the catalog, consistently, and publishes it: only
 * the tenants the routing change log names since the current snapshot when it can, else all
 * of them. */
int rt_reload(ferry_router *r, ferry_catalog *cat, ferry_err *err);
/* For tests and benchmarks: loads (without publishing) the table as rt_reload would at the
 * catalog's current version, from nothing (full) or from the current snapshot. The caller owns
 * *out (rt_snapshot_put). */
int rt_load(ferry_router *r, ferry_catalog *cat, bool full, rt_snapshot **out, ferry_err *err);
/* Whether two snapshots route and read alike (tenants, routes, moves, users); when not, why
 * says where they first differ. */
bool rt_snapshot_same(const rt_snapshot *a, const rt_snapshot *b, char *why, size_t size);
/* The move in SWITCH of a slice in s, or NULL. */
const rt_move *rt_find_move(const rt_snapshot *s, const char *tenant, uint32_t split);
/* Reads the routing version from the catalog; when it moved past the snapshot's, reloads.
 * Returns the fresh snapshot with a reference. */
int rt_fresh_snapshot(ferry_router *r, rt_snapshot **out, ferry_err *err);
const rt_tenant *rt_find_tenant(const rt_snapshot *s, const char *name, size_t len);
void *rt_watch_main(void *arg);
void rt_inflight_add(ferry_router *r, uint64_t version);
void rt_inflight_done(ferry_router *r, uint64_t version);
/* The write path's version check: reads the catalog's routing version (reloading when it moved),
 * then takes the current snapshot *and* records a write in flight under its version in one
 * critical section, so a router that reports "routing version >= V, nothing in flight below V"
 * can never afterwards send rows grouped with a table older than V (docs/routing.md). A failed
 * catalog read is logged and the cached table used. Release with rt_route_end. */
rt_snapshot *rt_route_begin(ferry_router *r);
void rt_route_end(ferry_router *r, rt_snapshot *s);
/* Whether the router has published a newer table than s (the watcher reloaded). */
bool rt_route_stale(ferry_router *r, const rt_snapshot *s);
/* The read path's counterpart of rt_route_begin, without the catalog round trip: the current
 * snapshot with a reference *and* a read recorded in flight under its version, in one critical
 * section (the same guarantee for the move's read fence). Release with rt_route_end. */
rt_snapshot *rt_read_begin(ferry_router *r);
/* Waits until the router publishes a snapshot newer than version, at most until deadline_ms
 * (CLOCK_MONOTONIC milliseconds). true when it did. */
bool rt_wait_newer(ferry_router *r, uint64_t version, uint64_t deadline_ms);

/* Which shards can serve reads of one slice under one snapshot (rt_read_set). */
#define RT_READ_SET_MAX 16
enum rt_read_mode {
    RT_READ_NONE,  /* no shard the router knows serves the slice (missing names it, if any) */
    RT_READ_ONE,   /* each of shards[0..n_fresh) holds the whole slice: read exactly one of
                    * them (replica candidates, in route order; the first is the preferred one);
                    * shards[n_fresh..n) missed acknowledged writes (a repair need): read one of
                    * them only when no up-to-date one answers ([router]
                    * fallback_to_stale_replicas) */
    RT_READ_UNION, /* every one of shards[] holds a disjoint part of the slice: read all of them,
                    * each restricted to the slice */
    RT_READ_HOLD   /* the slice is being published by a move: no shard can be read exactly now;
                    * wait for a newer snapshot (shards[] = the target, for messages) */
};
typedef struct rt_readers {
    enum rt_read_mode mode;
    uint32_t n;
    uint32_t n_fresh;                 /* ONE: the first n_fresh took every write; else n */
    uint32_t shards[RT_READ_SET_MAX]; /* indices into router->shards */
    const char *missing;              /* NONE: a shard name the router does not know, or NULL */
    const char *move_id;              /* UNION / HOLD: the move (borrowed from the snapshot) */
} rt_readers;
/* The one place that decides which shards serve reads of slice (t, split) under snapshot s:
 * every read path (select.c) plans with it. Pure; out borrows from s. */
void rt_read_set(const rt_snapshot *s, const rt_tenant *t, uint32_t split, rt_readers *out);

/* ---- shards (forward.c) ---- */
typedef struct rt_send {
    ferry_router *r;
    size_t shard;
    const char *sql;
    const char *format;
    const void *body;
    size_t body_len;
    const ferry_ch_setting *settings; /* the client's settings plus the dedup token */
    size_t n_settings;
    /* a streamed body instead of body/body_len; once *consumed (read under *consumed_mu) the
     * body cannot be sent again, so no other replica is tried */
    ferry_ch_read_fn body_reader;
    void *body_reader_arg;
    const bool *consumed;
    pthread_mutex_t *consumed_mu;
    /* results */
    int rc;
    ferry_ch_status st;
    ferry_err err;
} rt_send;

/* Sends one INSERT to a shard, trying its replicas in the selector's order on connection
 * failures. Fills s->rc, s->st, s->err. */
void rt_send_one(rt_send *s);
/* Sends several at once (a thread per send beyond the first) and waits for all. */
void rt_send_all(rt_send *sends, size_t n);
int rt_shards_init(ferry_router *r, ferry_err *err);
void rt_shards_free(ferry_router *r);
/* Brings the slots in line with the catalog's shard records (every state; gone ones are retired)
 * under reload_mu. A slot that cannot be opened is logged and left without connections (its
 * conn_error says why), so one bad shard never stops the routing table. FERRY_ENOMEM or a full
 * slot table (RT_SHARDS_MAX) only. */
int rt_shards_sync(ferry_router *r, const ferry_record_list *shards, ferry_err *err);
/* The live (not retired) slot of the shard named name, or -1. */
long rt_shard_index(ferry_router *r, const char *name);
/* Runs a query on the first reachable replica of shard 0..n (DESCRIBE TABLE). */
int rt_query_any(ferry_router *r, const char *sql, ferry_buf *out, ferry_err *err);

/* ---- slices awaiting a client's retry (pending.c) ---- */
#define RT_TOUCHED_SHARDS 16
typedef struct rt_touched_slice {
    char *tenant;
    uint32_t split;
    uint64_t hash;
    uint32_t shards[RT_TOUCHED_SHARDS]; /* the shard slots its rows were sent to */
    uint32_t n_shards;
    bool mixed; /* its rows went to different shard sets (a newer routing table mid-request) */
} rt_touched_slice;
/* The slices one request sent rows of: a set (no lock: one request's thread). */
typedef struct rt_touched {
    rt_touched_slice *items;
    size_t n;
    uint32_t *index; /* open addressing over items, cap entries */
    size_t cap;
} rt_touched;
/* Adds the slice, and the shard slots one of its rows was sent to. FERRY_ENOMEM only. */
int rt_touched_add(rt_touched *t, const char *tenant, uint32_t split, const uint32_t *shards,
                   uint32_t n_shards);
void rt_touched_free(rt_touched *t);

#define RT_PENDING_MAX 65536 /* slices remembered at once */
int rt_pending_new(uint64_t window_ms, rt_pending **out); /* window 0: remembers nothing */
void rt_pending_free(rt_pending *p);
/* Remembers every slice of t for the window (a later failure starts it again). */
void rt_pending_mark(rt_pending *p, const rt_touched *t);
/* Holds the slice for left_ms (at most the window) unless it is held longer already: what a
 * restarted router's journal replays (retry_journal.c). FERRY_ENOMEM when the table is full. */
int rt_pending_hold(rt_pending *p, const char *tenant, uint32_t split, uint64_t left_ms);
/* Calls fn for every slice held (and how long it still is), under the table's lock: fn must not
 * call back into p. Stops at fn's first non-zero return, which it returns. */
typedef int (*rt_pending_fn)(void *ctx, const char *tenant, uint32_t split, uint64_t left_ms);
int rt_pending_each(rt_pending *p, rt_pending_fn fn, void *ctx);
uint64_t rt_pending_window_ms(const rt_pending *p);
/* How long a retry of the slice is still expected, 0 when none. */
uint64_t rt_pending_left_ms(rt_pending *p, const char *tenant, uint32_t split);
size_t rt_pending_count(rt_pending *p);

/* ---- the retry journal: pending retries that outlive the process (retry_journal.c) ---- */
#define RT_JOURNAL_COMPACT_BYTES (1u << 20) /* the file is rewritten past this size */
typedef struct rt_journal_slice {
    char *tenant; /* owned */
    uint32_t split;
    uint64_t t_ms; /* when the request routed its first row of the slice (CLOCK_MONOTONIC) */
} rt_journal_slice;
/* One request's part of the journal, inside its state (zeroed: nothing written yet). Owned by
 * the request; linked into the journal's open requests while id != 0 (under the journal's lock). */
typedef struct rt_journal_req {
    uint64_t id; /* 0 until its first slice is written */
    struct rt_journal_req *prev, *next;
    rt_journal_slice *slices;
    size_t n, cap;
} rt_journal_req;
/* Opens the journal at path (taking its lock file path.lock: one router per journal), holds in
 * pending what the router that wrote it last expected (a request that never ended: its slices
 * for a whole window from now; a failed one: the rest of its window) and rewrites the file with
 * only that. path NULL: no file, only the open writes' slices in memory (rt_journal_inflight_ms).
 * *out is the caller's (rt_journal_close). */
int rt_journal_open(const char *path, rt_pending *pending, rt_journal **out, ferry_err *err);
void rt_journal_close(rt_journal *j); /* after every request ended; the file stays */
/* Records that request q sends rows of the slice, before they leave for a shard. An error (the
 * file cannot be written) must fail the request before it sends them. j NULL: no journal. */
int rt_journal_touch(rt_journal *j, rt_journal_req *q, const char *tenant, uint32_t split,
                     ferry_err *err);
/* The request ended; held: its client may retry, so its slices are held for the window (the
 * caller holds them in memory too, rt_pending_mark). Frees q's slices. */
void rt_journal_end(rt_journal *j, rt_journal_req *q, bool held);
/* Records that could not be written so far (the metric). */
uint64_t rt_journal_write_errors(rt_journal *j);
bool rt_journal_has_file(const rt_journal *j);
/* For how long (ms) a write still open has been sending rows of slice (tenant, split), counted
 * from its first row of it; tenant NULL: of any slice. 0: none open. Such a write may still fail
 * and be retried: a tiering swap of parts frozen after its first row waits for it. */
uint64_t rt_journal_inflight_ms(rt_journal *j, const char *tenant, uint32_t split);

/* ---- writes with replicas missing (quorum.c) ---- */
struct rt_out;
/* [router] min_insert_replicas: true when an insert that some shards failed may be answered
 * 200 because every slice it wrote reached at least that many of its replicas, and each slice a
 * replica missed was recorded in the catalog for repair (include/ferry/repair_need.h); the
 * shards that missed rows are then in missed (comma-separated). False (answer the failure as
 * before) when the setting is off, a slice has too few, or the record could not be written. */
bool rt_quorum_accept(ferry_router *r, const rt_touched *t, const struct rt_out *o, char *missed,
                      size_t missed_sz);

/* ---- streaming writes (stream.c) ---- */
typedef struct rt_stream rt_stream;

/* One shard's part of one insert request. */
typedef struct rt_out_shard {
    ferry_buf stage;      /* rows not yet in a stream (< flush_bytes) */
    uint64_t stage_rows;
    rt_stream *open;      /* the streamed INSERT being fed, or NULL */
    uint32_t streams;     /* streams (INSERTs) started: the next one's sequence number */
    uint64_t rows_written, rows_failed;
    uint64_t bytes_written; /* body bytes of the written rows, in the forwarded format */
    uint64_t rows_dropped; /* staged rows discarded because the request failed */
    bool failed, timed_out;
    int error_code;
    char error_name[64];
    char error[768];
} rt_out_shard;

typedef struct rt_out {
    ferry_router *r;
    rt_out_shard *shards; /* per router shard slot, n of them (grows as routes name new slots) */
    size_t n;
    char token[256];      /* the base of the deduplication tokens */
    uint64_t data_hash;   /* xxh3 of the request's first row (set before any row is added) */
    const ferry_ch_setting *settings; /* the client's settings (borrowed) */
    size_t n_settings;
    const char *format;   /* the forwarded format (borrowed) */
    const char *sql;      /* the forwarded INSERT; set before the first row */
    bool hold;            /* never open a stream: every shard's rows wait for the body's end */
} rt_out;

/* *out owned by the caller (rt_out_free). */
int rt_out_new(ferry_router *r, const char *token_base, const ferry_ch_setting *settings,
               size_t n_settings, const char *format, rt_out **out);
/* Adds one encoded row for a shard: staged, then streamed; blocks while the shard's queue is
 * full (at most shard_timeout, then the shard is failed). FERRY_ENOMEM only. */
int rt_out_row(rt_out *o, size_t shard, const char *row, size_t len);
/* Ends every open stream and waits for it; staged rows are sent (send_staged) or dropped. The
 * per-shard results accumulate; new rows may follow (new streams, next sequence numbers). */
void rt_out_finish(rt_out *o, bool send_staged);
void rt_out_free(rt_out *o);

/* The pooled keep-alive clients of a shard's replica (forward.c): take one (a new one when the
 * pool is empty), give it back when the connection is still good. */
int rt_client_take(ferry_router *r, rt_shard *s, size_t rep, ferry_ch_client **out,
                   ferry_err *err);
void rt_client_give(rt_shard *s, size_t rep, ferry_ch_client *c);
/* Runs q on replica rep of s through c, telling the replica choice (s->sel) that the request
 * began and how it ended (a connect error or timeout counts against the replica). */
int rt_replica_exec(rt_shard *s, size_t rep, ferry_ch_client *c, const ferry_ch_query *q,
                    ferry_ch_status *st, ferry_err *err);
/* Whether the slot was retired (its shard gone or changed), read under its lock. */
bool rt_shard_retired(rt_shard *s);

/* ---- reads (select.c) ---- */
typedef struct rt_reads rt_reads;
struct ferry_config;
/* Reads the read path's [router] keys; call once the tables are known. listen_host: the address
 * the router listens on (the servers reach partial results there unless advertise_url says). */
int rt_reads_init(ferry_router *r, const struct ferry_config *cfg, const char *listen_host,
                  ferry_err *err);
void rt_reads_free(ferry_router *r);
/* The read path's state for a new shard slot (its selector server and counters), called by
 * rt_shards_sync before the slot is counted. */
int rt_reads_add_shard(ferry_router *r, size_t slot, ferry_err *err);
/* Appends the read path's counters to the status JSON object being built (select.c). */
void rt_reads_status(ferry_router *r, ferry_buf *out);
/* Routes a SELECT-like statement (the query in ?query= plus the body, or the body) when it reads
 * a managed table: answers the request and returns true. Statements of a user bound to tenants
 * are checked against its scope first (ACCESS_DENIED) and restricted to its tenants' slices.
 * false: not routed (no managed table, not valid SQL, the client's own external data); then
 * *may_pass says whether the caller may pass it through for this user (admins: always; bound
 * users: only a read that passed the scope check, i.e. of the tables its user lists). */
/* text is the statement's whole text (the query parameter, a newline and the body, or the body);
 * when the read path keeps it (a routed read streams from it), it takes the buffer and leaves
 * *text empty; otherwise *text is as it was. */
bool rt_select_route(ferry_router *r, ferry_http_req *req, rt_principal *who, ferry_buf *text,
                     bool *may_pass);
/* GET /ferry/partial/<token>: a partial result published for a running merge. */
void rt_partial_on_complete(ferry_http_req *req, void *ctx);

/* ---- passthrough (passthrough.c) ---- */
/* Forwards the request unchanged (method, query string, selected headers, body) to the
 * passthrough server and streams its answer back. */
/* Frees the passthrough's idle handles (at stop, after the HTTP server). */
void rt_passthrough_pool_free(ferry_router *r);
/* held: what the router read of the request (taken: *held is left empty); the body forwarded is
 * its bytes from body_at on (before it: the query parameter and a newline, read with it so the
 * statement's text was whole). No copy is made. */
void rt_passthrough(ferry_router *r, ferry_http_req *req, ferry_buf *held, size_t body_at);
/* A passthrough whose body streams to the server as it arrives (an INSERT that is not routed,
 * the client's external data): memory per request is [router] stream_buffer_bytes (charged to
 * the memory budget), whatever the body's size.
 *   open    starts the transfer; NULL after answering the request itself (no server
 *           configured, the budget, resources).
 *   feed    hands on a piece of the body, waiting while the ring is full: 0, 1 when the server
 *           has answered already (the rest of the body is not needed: drop it), -1 when the
 *           server took nothing for [router] passthrough_timeout (the transfer is aborted;
 *           answer TIMEOUT_EXCEEDED).
 *   finish  the body ended: answers the request with the server's answer (streamed); takes p.
 *   abort   the request went away or was refused: the upload fails (the server never sees a
 *           complete-looking body); frees p. NULL is fine. */
typedef struct rt_pt rt_pt;
rt_pt *rt_passthrough_open(ferry_router *r, ferry_http_req *req);
int rt_passthrough_feed(rt_pt *p, const char *data, size_t len);
void rt_passthrough_finish(rt_pt *p, ferry_http_req *req);
void rt_passthrough_abort(rt_pt *p);
/* Whether a URL parameter carries the client's credentials (never forwarded). */
bool rt_credential_param(const char *name);

/* ---- authentication (auth.c) ---- */
/* Reads [router] auth, passthrough_user / passthrough_password_file, bound_insert_max_bytes and
 * [cluster] router_token_file; listen_addr: the address the router listens on (auth = none is
 * accepted only on a loopback address named explicitly). */
int rt_auth_init(ferry_router *r, const ferry_config *cfg, const char *listen_addr,
                 bool listen_explicit, ferry_err *err);
void rt_auth_free(ferry_router *r);
/* The users of a snapshot from their catalog records (sorted; a record that cannot be enforced
 * is kept, marked unusable, and logged). */
int rt_users_build(const ferry_record_list *users, rt_user **out, size_t *n, ferry_err *err);
void rt_users_free(rt_user *u, size_t n);
/* Authenticates a request to the ClickHouse interface ("/"): NULL after answering the request
 * itself (AUTHENTICATION_FAILED with ClickHouse's status, or the limit's error), else the
 * principal (free with rt_principal_free), holding one of the user's request slots. */
rt_principal *rt_authenticate(ferry_router *r, ferry_http_req *req);
void rt_principal_free(ferry_router *r, rt_principal *p);
/* Whether a request to the router's own endpoints (/ferry/router, /metrics, /ferry/partial/)
 * may go on: auth = none, an admin user's credentials, or the cluster's token (X-Ferry-Token,
 * or Authorization: Bearer). Answers the request itself when not. */
bool rt_auth_internal(ferry_router *r, ferry_http_req *req);
/* The signature of a partial result's token (hex HMAC-SHA256 with the router's partial key), put
 * in the url() the shards call (?sig=) so they need no credentials. out: 65 bytes. */
void rt_partial_sign(const ferry_router *r, const char *token, char *out);
bool rt_partial_sig_ok(const ferry_router *r, const char *token, const char *sig);

/* ---- limits (limits.c) ---- */
int rt_limits_new(ferry_router *r, rt_limits **out, ferry_err *err);
void rt_limits_free(rt_limits *l);
/* Takes a request slot for p's user (rate, then concurrency with the user's queue wait).
 * FERRY_OK, or a ClickHouse error name and message for the client (QUOTA_EXCEEDED,
 * TOO_MANY_SIMULTANEOUS_QUERIES). */
int rt_limits_enter(rt_limits *l, rt_principal *p, char *name, size_t namesz, char *msg,
                    size_t msgsz);
void rt_limits_leave(rt_limits *l, rt_principal *p);
/* A read's deadline: after ms, every shard is asked to KILL the queries tagged with the
 * deadline's tag (their query ids start with it and their text carries it in a comment), and
 * rt_deadline_expired turns true. NULL when ms is 0 or memory is short. */
rt_deadline *rt_deadline_start(rt_limits *l, uint64_t ms);
const char *rt_deadline_tag(const rt_deadline *d);
bool rt_deadline_expired(rt_deadline *d);
uint64_t rt_deadline_ms(const rt_deadline *d);
/* A query id for the deadline's next server query (tag-N) into out (64 bytes). */
void rt_deadline_query_id(rt_deadline *d, char *out, size_t outsz);
void rt_deadline_end(rt_limits *l, rt_deadline *d);
/* The limits' status for GET /ferry/router. */
void rt_limits_status(rt_limits *l, ferry_buf *out);

/* ---- metrics (metrics.c) ---- */
int rt_metrics_init(ferry_router *r);
void rt_metrics_free(ferry_router *r);
/* One finished request: its kind, its answer's status, how long it took. */
void rt_metrics_request(ferry_router *r, enum rt_kind kind, unsigned status, double seconds);
/* One request the router refused. */
void rt_metrics_refused(ferry_router *r, enum rt_refusal why);
/* GET /metrics */
void rt_on_metrics(ferry_http_req *req, void *ctx);
/* The read path's part of the metrics (select.c): failovers, queries and errors per shard. */
void rt_reads_metrics(ferry_router *r, ferry_buf *out);

/* ---- configuration ---- */
/* config.c: reads [router] into r (and the budget through rt_budget_config); the listen address
 * (listen, else the config's, else 127.0.0.1:8124) into addr and port; the retry journal's path
 * (journal, else the config's; none while retry_window is 0) into r->journal_path. FERRY_EINVAL
 * names the file, key and what is expected. */
int rt_read_config(ferry_router *r, const ferry_config *cfg, const char *listen,
                   const char *journal, char *addr, size_t addrsz, uint16_t *port, ferry_err *err);
/* budget.c: the [router] keys for memory, connections and deadlines; reserving bytes of
 * the process-wide memory budget (false: over it) and giving them back. */
int rt_budget_config(ferry_router *r, const ferry_config *cfg, ferry_err *err);
bool rt_mem_reserve(ferry_router *r, size_t n);
void rt_mem_release(ferry_router *r, size_t n);

/* ---- answers ---- */
/* A ClickHouse-style error: "Code: N. DB::Exception: MSG. (NAME) (version ferry router)" with
 * X-ClickHouse-Exception-Code and the status ClickHouse would send for NAME. */
void rt_respond_error(ferry_http_req *req, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int rt_error_code(const char *name);
/* GET /ferry/router (status.c): admins and the cluster token only. */
void rt_on_status(ferry_http_req *req, void *ctx);

#endif

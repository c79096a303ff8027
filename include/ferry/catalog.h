/* The catalog: ferry's shared metadata (cluster settings, shards, tables, tenants, slices, the
 * routing table, partitions per server, cold parts and their objects, the move journal) behind
 * one interface with two backends, selected by URL:
 *
 *   sqlite:/abs/path/catalog.db                       one SQLite file in WAL mode
 *   zk://host:port[,host:port]/chroot[?timeout_ms=N]  Apache ZooKeeper or ClickHouse Keeper
 *
 * Every record carries a version, an opaque concurrency token that starts at 0 when the record is
 * created and grows on every update. Updates and deletes compare it (compare-and-set): a lost race
 * returns FERRY_ECONFLICT and changes nothing. Batches apply all their changes or none, however
 * many there are (see docs/catalog.md for how the ZooKeeper backend chunks them). The routing
 * table has its own version, a number that grows by one with every commit that changes a route,
 * a tenant, a shard or a user (every router reloads them together).
 *
 * Record structs use fixed-size strings and arrays (a route's or a slice's shards are a
 * ferry_shard_set, ferry/shard_set.h, stored as the comma-separated text they always were) so
 * they can be copied freely; only ferry_part owns heap memory (its objects), released by
 * ferry_record_free. Names used in keys (tenants, shards,
 * tables, servers, partition ids, part names, move ids) follow ferry/names.h (ferry_name_ok:
 * 1..127 characters of [A-Za-z0-9_.-], not "." or ".."). */
#ifndef FERRY_CATALOG_H
#define FERRY_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/names.h"
#include "ferry/partition.h"
#include "ferry/shard_set.h"

/* FERRY_NAME_MAX, FERRY_ZONE_NAME_MAX: ferry/names.h */
#define FERRY_URL_MAX 512
#define FERRY_LIST_MAX 1024 /* comma-separated lists of names or URLs */

/* Expected version meaning "whatever it is now" (update or delete without CAS). */
#define FERRY_VERSION_ANY (-1)

/* ---- records ---------------------------------------------------------------------------- */

/* Fixed at `ferry init`; re-initialising with different values is refused. */
typedef struct ferry_settings {
    char name[FERRY_NAME_MAX];            /* cluster name */
    char hash[16];                        /* placement hash: sha256 | xxh3 */
    uint32_t rf;                          /* replication factor, >= 1 */
    double fill;                          /* fill target, 0 < fill <= 1 */
    char clickhouse_version[32];          /* pinned ClickHouse version, e.g. "26.7" */
    uint32_t pointer_format;              /* object-storage metadata format version, 1..5 */
    uint32_t hot_days;                    /* partitions older than this are tiered */
} ferry_settings;

/* A table's layout: enum ferry_layout from partition.h (shared or per_tenant). */

typedef struct ferry_table_def {
    char name[FERRY_NAME_MAX];
    char database[FERRY_NAME_MAX];
    enum ferry_layout layout;
    char tenant_column[64];
    char day_column[64];
    char split_column[64];
    char split_key[64]; /* the column whose value picks a row's split; "" when not configured */
} ferry_table_def;

/* NEW: added to a running cluster (ferry init or ferry shard add) and not yet filled by its
 * first rebalance. The rebalance plan and moves treat it as active (the rebalance fills it), but
 * no split raise and no new tenant places a slice on it: a slice routed there before the first
 * rebalance would make that rebalance take the shard as already part of the layout and plan
 * nothing for it, so a raise cannot race the first rebalance. The rebalance that leaves no step
 * to it makes it ACTIVE (ferry_shards_settle). */
enum ferry_shard_state {
    FERRY_SHARD_ACTIVE = 0,
    FERRY_SHARD_DRAINING,
    FERRY_SHARD_GONE,
    FERRY_SHARD_NEW
};

typedef struct ferry_shard {
    char name[FERRY_NAME_MAX];
    double weight;
    /* The weight the routing table was balanced for, when the shard was re-weighted since
     * (`ferry shard add NAME --weight W` on a shard already in service); 0: balanced for
     * `weight`. The rebalance plan takes it as the shard's old weight, so a heavier shard
     * attracts slices and a lighter one gives some up, and the rebalance that leaves no step to
     * or from the shard clears it (ferry_shards_settle). */
    double placed_weight;
    uint64_t capacity;              /* bytes */
    char replicas[FERRY_LIST_MAX];  /* ClickHouse HTTP URLs, comma-separated */
    char agent[FERRY_URL_MAX];      /* node agent URL */
    char zone[FERRY_ZONE_NAME_MAX + 1]; /* optional */
    enum ferry_shard_state state;
    /* How ferry's processes reach the shard, recorded from [shard "x"] at `ferry init` / `ferry
     * shard add` so that every router, coordinator and flow follows the catalog's shards without
     * a config of its own for each (docs/config.md). Secrets by reference only: file paths,
     * read on the host that connects. "" when not recorded (catalogs of older versions): the
     * reader's config section is used instead (ferry_shard_conn_get). */
    char user[128];                 /* ClickHouse user */
    char password_file[FERRY_URL_MAX];
    char agent_token_file[FERRY_URL_MAX];
    char data_path[FERRY_URL_MAX];  /* the server's ClickHouse path, when reachable locally */
} ferry_shard;

typedef struct ferry_tenant {
    char name[FERRY_NAME_MAX];
    uint32_t splits; /* number of slices, >= 1 */
    uint32_t rf;     /* replication factor override; 0 = the cluster's rf (settings.rf) */
} ferry_tenant;

/* One split of one tenant; placement is where the placement algorithm wants it. */
typedef struct ferry_slice {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    uint64_t bytes;
    uint64_t rows;
    ferry_shard_set placement; /* shard names; stored comma-separated */
} ferry_slice;

/* The routing table's row: which shard(s) serve a slice right now. */
typedef struct ferry_route {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    ferry_shard_set shards; /* stored comma-separated ("node1,node2") */
} ferry_route;

enum ferry_tier { FERRY_TIER_HOT = 0, FERRY_TIER_COLD };

/* One partition of one managed table as it exists on one server. */
typedef struct ferry_partition {
    char server[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char partition_id[FERRY_NAME_MAX];
    char tenant[FERRY_NAME_MAX];
    uint32_t day; /* YYYYMMDD */
    uint32_t split;
    enum ferry_tier tier;
    uint64_t bytes;
    uint64_t rows;
} ferry_partition;

typedef struct ferry_cold_object {
    char key[FERRY_URL_MAX];  /* object key in the store */
    uint64_t size;
    char checksum[80];        /* e.g. "sha256:..." */
} ferry_cold_object;

/* A part tiered to object storage: its objects and the servers whose pointer files reference
 * them. objects is owned by the record (ferry_record_free). */
/* One part's objects in the store. Key: (table, partition_id, origin, name). Part names are
 * unique per server only, so the same name in the same partition can stand for different bytes
 * on two servers; origin says whose objects these are: for parts ferry uploaded, the FREEZE that
 * produced the files (the segment before the part name in the object keys,
 * <db>/<table>/<partition_id>/<freeze>/<part>/<file>); "native" for objects ClickHouse wrote
 * itself (keys of its own, unique per object: that record holds the union of every server's
 * objects of parts of that name). Servers that received pointer copies of the same objects are
 * added to `servers`. */
typedef struct ferry_part {
    char table[FERRY_NAME_MAX];
    char partition_id[FERRY_NAME_MAX];
    char origin[FERRY_NAME_MAX];
    char name[FERRY_NAME_MAX];
    uint64_t bytes;
    uint64_t rows;
    char servers[FERRY_LIST_MAX]; /* comma-separated */
    size_t n_objects;
    ferry_cold_object *objects;
} ferry_part;

enum ferry_move_state {
    FERRY_MOVE_PLANNED = 0,
    FERRY_MOVE_CLONE,
    FERRY_MOVE_VERIFY,
    FERRY_MOVE_SWITCH,
    FERRY_MOVE_CLEANUP,
    FERRY_MOVE_DONE,
    FERRY_MOVE_FAILED,
};
#define FERRY_MOVE_STATES (FERRY_MOVE_FAILED + 1)

/* A move in SWITCH whose step is at least this is publishing (staging -> the target's real
 * table): readers must not read the union of source and target any more (docs/routing.md). */
#define FERRY_MOVE_STEP_PUBLISH 1000

/* The move journal: one record per move. */
typedef struct ferry_move {
    char id[64];
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    /* The source shard and the target shard: one name each (ferry writes no other count and
     * the move engine refuses another, lib/flow/move.c); a ferry_shard_set like a route's
     * shards, stored as the same comma-separated text ("node1") */
    ferry_shard_set from, to;
    enum ferry_move_state state;
    uint32_t step;             /* progress inside the state */
    uint32_t steps;
    char owner[FERRY_NAME_MAX];
    char detail[256];          /* last error or note */
    int64_t created;           /* unix seconds */
    int64_t updated;
} ferry_move;

/* The journal of a long-running job other than a slice move (tiering a partition, applying
 * retention, ...): one record per job, advanced by CAS on its version so two workers never run
 * the same job. state is the flow's own step name ("FREEZE", "UPLOAD", ..., "DONE", "FAILED");
 * the data is the flow's own JSON state (what a resumed run needs: freeze name, parts, objects
 * already uploaded ...), fewer than FERRY_JOB_DATA_MAX bytes, kept on the heap: the record owns
 * it (ferry_record_free frees it, ferry_record_copy copies it; a plain struct copy shares it),
 * read and set through ferry_job_data / ferry_job_set_data. The bound keeps a record, escaped
 * inside its document, under the ZooKeeper backend's document limit (docs/catalog.md,
 * "Limits"): a move's fingerprints of about 650 tables, a tier job's list of about 3,500 hot
 * parts. Builds before December 2026 kept the data in a fixed 2 KB field and refuse a record
 * holding more: every process of a cluster runs one version (docs/operations.md, "Upgrades"). */
#define FERRY_JOB_DATA_MAX (128 * 1024)
typedef struct ferry_job {
    char id[FERRY_NAME_MAX];   /* key, e.g. "tier.node1.events.3-20261101-0" */
    char kind[32];             /* "tier", "retention", ... */
    char state[32];
    char owner[FERRY_NAME_MAX];
    char detail[256];          /* last error or note */
    char *data_json;           /* owned, NULL when none: use ferry_job_data / _set_data */
    int64_t created;           /* unix seconds */
    int64_t updated;
} ferry_job;

/* The job's data, its JSON text ("" when it has none); borrowed from j. */
const char *ferry_job_data(const ferry_job *j);
/* Replaces the job's data with a copy of text (NULL or "": none). FERRY_EINVAL naming the job
 * when text holds FERRY_JOB_DATA_MAX bytes or more, FERRY_ENOMEM; on failure the data is as it
 * was. */
int ferry_job_set_data(ferry_job *j, const char *text, ferry_err *err);

/* A user of `ferry router` (docs/security.md): who may send queries and rows through the router,
 * to which tenants' rows they are bound, and their limits. Every router of the cluster reads the
 * same records, so they agree; a change raises the routing version like a shard change, so
 * running routers take it within one routing-version wait. The password is never stored: only a
 * random salt and SHA-256(salt || SHA-256(password)) (include/ferry/auth.h), so a hash given as
 * ClickHouse's password_sha256_hex can be recorded without the password. */
#define FERRY_USER_TENANTS_MAX 4096
typedef struct ferry_user {
    char name[FERRY_NAME_MAX];
    char salt[33];                        /* 16 random bytes, lower-case hex */
    char hash[65];                        /* lower-case hex SHA-256(salt bytes || SHA-256(pw)) */
    bool admin;                           /* every statement, every tenant; else bound */
    char tenants[FERRY_USER_TENANTS_MAX]; /* bound users: the tenants, comma-separated */
    char tables[FERRY_LIST_MAX];          /* bound users: tables ferry does not manage that they
                                           * may read as each server has them (db.table,...) */
    char networks[FERRY_LIST_MAX];        /* client networks allowed (CIDR,...); "" = any */
    uint32_t max_concurrent;              /* requests at once; 0 = unlimited */
    uint32_t max_rps;                     /* requests started per second; 0 = unlimited */
    uint32_t max_execution_ms;            /* reads cancelled on every shard after this; 0 = none */
    uint32_t queue_wait_ms;               /* over max_concurrent: wait this long for a slot */
} ferry_user;

enum ferry_record_kind {
    FERRY_REC_SETTINGS = 0,
    FERRY_REC_TABLE,
    FERRY_REC_SHARD,
    FERRY_REC_TENANT,
    FERRY_REC_SLICE,
    FERRY_REC_ROUTE,
    FERRY_REC_PARTITION,
    FERRY_REC_PART,
    FERRY_REC_MOVE,
    FERRY_REC_JOB,
    FERRY_REC_USER,
    FERRY_REC_KIND_COUNT
};

typedef struct ferry_record {
    enum ferry_record_kind kind;
    int64_t version; /* from reads; the expected version for updates and deletes */
    union {
        ferry_settings settings;
        ferry_table_def table;
        ferry_shard shard;
        ferry_tenant tenant;
        ferry_slice slice;
        ferry_route route;
        ferry_partition partition;
        ferry_part part;
        ferry_move move;
        ferry_job job;
        ferry_user user;
    } u;
} ferry_record;

typedef struct ferry_record_list {
    ferry_record *items;
    size_t n;
} ferry_record_list;

/* A zeroed record of that kind with version FERRY_VERSION_ANY. */
void ferry_record_init(ferry_record *r, enum ferry_record_kind kind);
/* Releases what the record owns (a part's objects, a job's data) and zeroes it. */
void ferry_record_free(ferry_record *r);
void ferry_record_list_free(ferry_record_list *l);
/* Deep copy (a part's objects and a job's data duplicated). */
int ferry_record_copy(ferry_record *dst, const ferry_record *src, ferry_err *err);

/* Names as they appear in JSON and on the command line, and back. */
const char *ferry_record_kind_name(enum ferry_record_kind k); /* "shard", "move", ... */
const char *ferry_shard_state_name(enum ferry_shard_state s); /* active draining gone new */
/* ACTIVE or NEW: a shard the placement fills (moves may go to it). */
bool ferry_shard_placeable(enum ferry_shard_state s);
/* Gives *s the weight w (> 0). For a shard the routing table already counts (not NEW), the
 * weight it was balanced for is kept in placed_weight, unless an earlier re-weight still waits
 * for its rebalance (that one's is kept), and cleared when w is that weight again. */
void ferry_shard_reweight(ferry_shard *s, double w);
int ferry_shard_state_parse(const char *s, enum ferry_shard_state *out);
const char *ferry_move_state_name(enum ferry_move_state s);
int ferry_move_state_parse(const char *s, enum ferry_move_state *out);
const char *ferry_tier_name(enum ferry_tier t);
/* Same as ferry_layout_name. */
const char *ferry_table_layout_name(enum ferry_layout l);
/* True for the states a move never leaves: DONE, and FAILED (rolled back). Which transitions a
 * move may make is the flow engine's to check (ferry_move_flow in ferry/move.h): the catalog
 * only stores them, and indexes the moves not finished. */
bool ferry_move_finished(enum ferry_move_state s);

/* Adds an object to a part record (copies the strings). */
int ferry_part_add_object(ferry_part *p, const char *key, uint64_t size, const char *checksum,
                          ferry_err *err);

/* ---- the handle --------------------------------------------------------------------------- */

typedef struct ferry_catalog ferry_catalog;

/* Opens (and on first use lays out) the catalog at url. The caller owns *out. */
int ferry_catalog_open(const char *url, ferry_catalog **out, ferry_err *err);
void ferry_catalog_close(ferry_catalog *c);
const char *ferry_catalog_backend(const ferry_catalog *c); /* "sqlite" or "zk" */

/* Reads the record whose kind and key fields are set in *rec; fills the rest and rec->version.
 * FERRY_ENOTFOUND when absent. On success rec may own memory (ferry_record_free). */
int ferry_catalog_get(ferry_catalog *c, ferry_record *rec, ferry_err *err);

/* Every record of kind, or only those under a key prefix (the first nprefix key fields, e.g.
 * {"acme"} for the slices of tenant acme, {"events", "p1"} for the parts of one partition).
 * Sorted by key. The caller frees out with ferry_record_list_free. */
int ferry_catalog_list(ferry_catalog *c, enum ferry_record_kind kind, const char *const *prefix,
                       size_t nprefix, ferry_record_list *out, ferry_err *err);

/* The same records one at a time: fn gets each (decoded into one ferry_record, freed after fn
 * returns: what must outlive the call is copied, ferry_record_copy for a part or a job), in key
 * order. Memory follows the stored documents, not a ferry_record per item (about 6.4 KB each,
 * the size of the largest record kind), so it is the way to read every slice or route of a
 * large cluster. fn returns FERRY_OK
 * to go on; anything else stops the scan and is returned (fn sets err). */
typedef int (*ferry_record_fn)(const ferry_record *rec, void *arg, ferry_err *err);
int ferry_catalog_each(ferry_catalog *c, enum ferry_record_kind kind, const char *const *prefix,
                       size_t nprefix, ferry_record_fn fn, void *arg, ferry_err *err);

/* The move records whose state is not finished (neither DONE nor FAILED), sorted by key, as
 * ferry_catalog_list(FERRY_REC_MOVE) with the finished ones left out. It reads the index of
 * unfinished moves (docs/catalog.md), so its cost follows the moves in flight, not the history;
 * on a catalog written before the index existed the first call builds the index. The caller
 * frees out with ferry_record_list_free. */
int ferry_catalog_list_unfinished_moves(ferry_catalog *c, ferry_record_list *out,
                                        ferry_err *err);

/* Single-record writes (each a batch of one). create fails with FERRY_ECONFLICT when the record
 * exists; update and delete compare rec->version (FERRY_VERSION_ANY: no comparison) and return
 * FERRY_ECONFLICT when it moved on, FERRY_ENOTFOUND when the record is gone. On success
 * rec->version is the new version (delete: -1). */
int ferry_catalog_create(ferry_catalog *c, ferry_record *rec, ferry_err *err);
int ferry_catalog_update(ferry_catalog *c, ferry_record *rec, ferry_err *err);
int ferry_catalog_delete(ferry_catalog *c, ferry_record *rec, ferry_err *err);

/* ---- batches ------------------------------------------------------------------------------- */

typedef struct ferry_batch ferry_batch;

ferry_batch *ferry_batch_new(void); /* NULL on allocation failure; free with ferry_batch_free */
void ferry_batch_free(ferry_batch *b);
size_t ferry_batch_size(const ferry_batch *b);
/* Queue one change. The record is encoded now; the caller keeps ownership of rec. update, delete
 * and check compare rec->version (check only asserts the version, it changes nothing). */
int ferry_batch_create(ferry_batch *b, const ferry_record *rec, ferry_err *err);
int ferry_batch_update(ferry_batch *b, const ferry_record *rec, ferry_err *err);
int ferry_batch_delete(ferry_batch *b, const ferry_record *rec, ferry_err *err);
int ferry_batch_check(ferry_batch *b, const ferry_record *rec, ferry_err *err);

typedef struct ferry_commit_info {
    size_t ops;          /* operations committed */
    size_t round_trips;  /* requests to the backend that wrote (ZooKeeper multis, creates...) */
    size_t chunks;       /* ZooKeeper: multis that carried the batch's operations */
    uint64_t routing_version; /* after the commit, when it changed routes; else 0 */
} ferry_commit_info;

/* Applies every queued change atomically: all of them, or none (FERRY_ECONFLICT naming the
 * first record whose check failed, FERRY_ENOTFOUND for a missing one). A batch that changes any
 * route, tenant, shard or user raises the routing version by one. info may be NULL. The batch
 * can be freed afterwards. */
int ferry_catalog_commit(ferry_catalog *c, const ferry_batch *b, ferry_commit_info *info,
                         ferry_err *err);
/* The same, and new_versions (ferry_batch_size(b) slots, caller-owned) gets the version each
 * queued change left its record at (-1 for delete and check), so a caller that updates many
 * records in one batch can compare-and-set them again without reading them back. */
int ferry_catalog_commit_versions(ferry_catalog *c, const ferry_batch *b, int64_t *new_versions,
                                  ferry_commit_info *info, ferry_err *err);

/* Maximum operations per ZooKeeper multi (default 100); for benchmarks and tests. */
void ferry_catalog_set_chunk_ops(ferry_catalog *c, size_t ops);

/* Called after each chunk of a batch has been written (before the batch is committed), with the
 * number of chunks written and the total. For progress reports, and for tests that crash a
 * writer half-way. NULL clears it. */
typedef void (*ferry_catalog_progress_fn)(size_t done, size_t total, void *arg);
void ferry_catalog_set_progress(ferry_catalog *c, ferry_catalog_progress_fn fn, void *arg);

/* Finishes what crashed writers left: rolls back every batch whose writer is gone and was not
 * committed, removes the journals of committed ones. *recovered (may be NULL) counts batches
 * rolled back. Readers and writers do this by themselves when a dead writer's batch is in their
 * way; this call does it eagerly. */
int ferry_catalog_recover(ferry_catalog *c, size_t *recovered, ferry_err *err);

/* ---- routing ------------------------------------------------------------------------------- */

int ferry_catalog_routing_version(ferry_catalog *c, uint64_t *version, ferry_err *err);
/* Waits until the routing version differs from known, at most timeout_ms; stores it in *now.
 * FERRY_ETIMEOUT when it did not change. ZooKeeper: a watch; SQLite: polling. */
int ferry_catalog_routing_wait(ferry_catalog *c, uint64_t known, int timeout_ms, uint64_t *now,
                               ferry_err *err);
/* The routing table as JSON text, consistent with its version:
 *   {"version":N,"slices":[{"tenant":"acme","split":0,"shards":["node1"]},...]}
 * tenant NULL = all tenants; split -1 = all splits. Caller frees *json with free(). This is what
 * the coordinator serves over HTTP. */
int ferry_catalog_routing_json(ferry_catalog *c, const char *tenant, int64_t split, char **json,
                               ferry_err *err);

/* ---- the routing table as routers load it (lib/catalog/routing_delta.c) ---------------------
 * A router reads the routing table through these rather than through the JSON above: rows to a
 * callback, and, when the routing version moved on, only the tenants the commits in between
 * touched (docs/catalog.md "The routing change log", docs/routing.md "Loading the table"). */

/* One row: a tenant (name, splits), a route (tenant, split, shards) or a slice's replicas that
 * missed acknowledged writes (kind FERRY_REC_JOB: its open repair-need record, tenant, split,
 * shards = the replicas that missed; docs/routing.md "Replicas that missed writes"). The strings
 * are borrowed for the call, not NUL-terminated. */
typedef struct ferry_routing_row {
    enum ferry_record_kind kind; /* FERRY_REC_TENANT, FERRY_REC_ROUTE or FERRY_REC_JOB */
    const char *tenant;
    size_t tenant_len;
    uint32_t splits;    /* tenant */
    uint32_t split;     /* route, need */
    const char *shards; /* route: comma-separated shard names; need: those that missed writes */
    size_t shards_len;
} ferry_routing_row;
typedef int (*ferry_routing_row_fn)(const ferry_routing_row *row, void *arg, ferry_err *err);

/* tenant NULL: every tenant row, then every route row, then every open repair need; else that
 * tenant's row (none when it is not registered), then its routes, then the repair needs of its
 * routes with more than one shard (one read each). Rows of one kind come in no particular order. Not
 * consistent with a routing version by itself: read the version before and after (as
 * ferry_catalog_routing_json does). fn returns FERRY_OK to go on, else the scan stops with it. */
int ferry_catalog_routing_rows(ferry_catalog *c, const char *tenant, ferry_routing_row_fn fn,
                               void *arg, ferry_err *err);

/* The tenants whose record or routes the commits that raised the routing version from since to
 * upto changed (sorted, unique; *tenants malloc'ed, free with ferry_routing_changes_free), from
 * the routing change log. Shard and user changes raise the version too and list no tenant.
 * *covered false (and no names) when the log does not reach back to since (it keeps the last
 * 1,000 versions), or a commit changed too many tenants to list: read the whole table then. */
int ferry_catalog_routing_changes(ferry_catalog *c, uint64_t since, uint64_t upto, bool *covered,
                                  char ***tenants, size_t *n, ferry_err *err);
void ferry_routing_changes_free(char **tenants, size_t n);

/* The repair-need records (include/ferry/repair_need.h) are job records with these ids:
 * "repair-need.<tenant>.<split>", or "repair-need.h<XXH3 of the tenant, 16 hex>.<split>" when
 * that would not fit in a job id. They are part of the routing state (routers keep reads off
 * the replicas they name): creating, updating or deleting one raises the routing version and
 * names the tenant in the change log (a hashed id: the log says "read everything"), except an
 * update made with ferry_catalog_update_quiet. */
#define FERRY_REPAIR_NEED_ID_PREFIX "repair-need."
void ferry_catalog_repair_need_id(const char *tenant, uint32_t split, char *out, size_t size);
/* ferry_catalog_update for a change routers need not see (a repair-need record whose shard lists
 * stay the same, only its counters move): the routing version stays. FERRY_EINVAL for the
 * records whose every change is a routing change (tenants, routes, shards, users). */
int ferry_catalog_update_quiet(ferry_catalog *c, ferry_record *rec, ferry_err *err);

/* ---- the shards' loads ------------------------------------------------------------------------
 * What each shard holds (the bytes of the slices its routes name), as the inventory sync last
 * computed it: derived data kept in one document (not a record: dumps leave it out, the next
 * sync rewrites it), so that placing a tenant's new slices can check the fill target without
 * reading every slice and route (docs/catalog.md). Moves after the sync shift what they moved. */
typedef struct ferry_shard_load {
    char shard[FERRY_NAME_MAX];
    uint64_t bytes;
} ferry_shard_load;

/* Replaces the stored loads with loads[0..n). */
int ferry_catalog_loads_put(ferry_catalog *c, const ferry_shard_load *loads, size_t n,
                            ferry_err *err);
/* The stored loads (*out malloc'ed, caller frees; *measured: unix seconds of the sync, may be
 * NULL). FERRY_ENOTFOUND when no sync has stored them. */
int ferry_catalog_loads_get(ferry_catalog *c, ferry_shard_load **out, size_t *n,
                            int64_t *measured, ferry_err *err);

/* ---- the coordinator lease ---------------------------------------------------------------- */

typedef struct ferry_lease ferry_lease;

/* Takes the lease `name` for owner (a free-form description, e.g. "host:pid"). FERRY_ECONFLICT
 * when another holder has it (the message names that holder). The lease ends when released, when
 * the process dies, or (ZooKeeper) when the session expires. The caller owns *out. */
int ferry_catalog_lease_acquire(ferry_catalog *c, const char *name, const char *owner,
                                ferry_lease **out, ferry_err *err);
/* Whether the lease is still held; false once the ZooKeeper session has expired. */
bool ferry_catalog_lease_valid(ferry_catalog *c, const ferry_lease *lease);
/* Gives the lease up (if still held) and frees it. */
void ferry_catalog_lease_release(ferry_catalog *c, ferry_lease *lease);

/* ---- the cluster's configuration ([cluster], [shard "x"], [table "y"]; docs/config.md) ---- */

struct ferry_config;

typedef struct ferry_cluster_config {
    char catalog[FERRY_URL_MAX]; /* catalog URL */
    ferry_settings settings;
    ferry_shard *shards; /* owned; n_shards entries, state active */
    size_t n_shards;
    ferry_table_def *tables; /* owned */
    size_t n_tables;
} ferry_cluster_config;

/* Reads and checks the sections the catalog owns. Bad values and unknown keys are FERRY_EINVAL
 * with "FILE:LINE: ...". Free *out with ferry_cluster_config_free. */
int ferry_cluster_config_read(const struct ferry_config *cfg, ferry_cluster_config *out,
                              ferry_err *err);
void ferry_cluster_config_free(ferry_cluster_config *cc);

/* [cluster] clickhouse_object_access of cfg (may be NULL): *readonly true for "read-only" (the
 * ClickHouse credential may only read and list: cold parts are loaded into a staging table by
 * re-attaching the table, never by ATTACH PARTITION; docs/object-store.md), false for
 * "read-create" or when absent. Another value is FERRY_EINVAL naming FILE:LINE. */
int ferry_object_access_readonly(const struct ferry_config *cfg, bool *readonly, ferry_err *err);

/* How to reach a shard: the connection details of its catalog record, each one falling back to
 * [shard "NAME"] of cfg (may be NULL) when the record has none (catalogs written before shards
 * carried them). Every field is a string, "" when neither says; borrowed from sh or cfg. */
typedef struct ferry_shard_conn {
    const char *user;
    const char *password_file;
    const char *agent_token_file;
    const char *data_path;
} ferry_shard_conn;
void ferry_shard_conn_get(const ferry_shard *sh, const struct ferry_config *cfg,
                          ferry_shard_conn *out);
/* Whether two shard records differ in how a process reaches them (replicas, agent, credentials,
 * data path) - what makes a running router or coordinator reconnect. */
bool ferry_shard_conn_differs(const ferry_shard *a, const ferry_shard *b);

/* Whether two settings agree on everything fixed at `ferry init` (all fields but hot_days);
 * when not, *what names the first field that differs. */
bool ferry_settings_same_fixed(const ferry_settings *a, const ferry_settings *b,
                               const char **what);

/* ---- dump ------------------------------------------------------------------------------------ */

/* The whole catalog as canonical JSON text (sorted, compact-per-record; identical for identical
 * contents whatever the backend). Record versions are not part of it; the routing version is.
 * Caller frees *json. */
int ferry_catalog_export(ferry_catalog *c, char **json, ferry_err *err);
/* Loads a dump into an empty catalog, atomically. FERRY_ECONFLICT when the catalog is not empty,
 * FERRY_EINVAL (naming the record) when the dump is malformed. */
int ferry_catalog_import(ferry_catalog *c, const char *json, ferry_err *err);

#endif

/* Private: connections of a move to one shard (its ClickHouse through ferry's client, its node
 * agent), and small query helpers. Every statement goes through ferry_guarded_exec. */
#ifndef FERRY_MOVE_ENV_H
#define FERRY_MOVE_ENV_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferry/agent_ops.h"
#include "ferry/buf.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"

struct ferry_config;

typedef struct mv_conn {
    char name[FERRY_NAME_MAX];
    char agent_url[FERRY_URL_MAX];
    char ch_url[FERRY_URL_MAX];
    char *token; /* agent bearer token (wiped on close) */
    ferry_ch_client *ch;
    ferry_agent_client *ag;
    unsigned long n_sql;   /* statements made through mv_sql */
    unsigned long n_agent; /* agent requests made for this shard through other clients than ag
                            * (a send pool's, tiering's pool); ag counts its own
                            * (mv_agent_requests) */
    int agent_api;   /* the agent's FERRY_AGENT_API_VERSION; 0 until asked (mv_agent_api) */
    bool ro_objects; /* [cluster] clickhouse_object_access = read-only: staging is loaded by
                      * re-attaching a load table (flow/staging_load.h), never ATTACH PARTITION */
    ferry_catalog *cat; /* borrowed, may be NULL: the flow's catalog, whose lease serializes
                         * the loads of one staging table across threads and processes */
    bool replace_checked; /* replace_safe holds the server's answer (mv_replace_crash_safe) */
    bool replace_safe;
} mv_conn;

/* Opens clients for the shard: ClickHouse at the first of its replicas, the agent at its agent
 * URL; token, user and password files come from [shard "NAME"] of cfg, the object access mode
 * from [cluster] clickhouse_object_access. Nothing is contacted. */
int mv_conn_open(const ferry_shard *sh, const struct ferry_config *cfg, mv_conn *c,
                 ferry_err *err);
void mv_conn_close(mv_conn *c);

/* Runs a statement (through the SQL guard) and parses its TSV result into rows (caller frees
 * with ferry_ch_rows_free; rows may be NULL to discard). */
int mv_sql(mv_conn *c, const char *sql, ferry_ch_rows *rows, ferry_err *err);
/* The agent requests made for the shard: ag's own (ferry_agent_client_stats_get) and n_agent. */
unsigned long mv_agent_requests(const mv_conn *c);

/* Whether table numbers its blocks (and mutations) from one counter for the whole table, as
 * a MergeTree that is not Replicated or Shared does (those number them per partition): then a
 * part written, attached or mutated after a listing has a higher block number or data version
 * than every part listed, in any partition (mv_part_top). */
int mv_table_wide_blocks(mv_conn *c, const char *db, const char *table, bool *out,
                         ferry_err *err);

/* One part of a partition as system.parts shows it. */
typedef struct mv_part {
    char name[FERRY_NAME_MAX];
    char hash[40]; /* hash_of_all_files */
    uint64_t rows, bytes;
    bool cold;   /* on a remote disk (pointer files) */
    bool active; /* false: outdated, or another inactive state */
    int64_t min_block, max_block; /* min_block_number, max_block_number */
    int64_t version;              /* data_version: min_block, or the last mutation applied */
} mv_part;

typedef struct mv_parts {
    mv_part *p; /* malloc'ed; the caller frees it */
    size_t n;
} mv_parts;

/* The parts of partition pid of db.table on c, by name: the active ones only, or every state.
 * Parts with no rows are always left out: DETACH / MOVE / REPLACE PARTITION leave an empty part
 * covering the range they removed, and the server's cleanup thread drops it at a moment of its
 * own choosing, so naming one (DETACH PART: NO_SUCH_DATA_PART) or hashing it (a move's cold
 * digest) races with that thread. They hold no rows, so no comparison needs them. Used by moves
 * and by replica sync alike. */
int mv_list_parts(mv_conn *c, const char *db, const char *table, const char *pid,
                  bool active_only, mv_parts *out, ferry_err *err);
/* The part named name in ps, or NULL. */
const mv_part *mv_parts_find(const mv_parts *ps, const char *name);

/* Every part of one slice in one table on one server, from one system.parts query (a move
 * looks at all of a slice's partitions at once instead of one query per partition). pids: the
 * partitions with an active part with rows, sorted; parts: sorted by partition, then name, with
 * first[k]..first[k+1] the parts of pids[k] (inactive ones of a partition without an active part
 * are dropped: they are on their way out). Owned by the slice (mv_slice_free). */
typedef struct mv_slice {
    size_t n_pids;
    char (*pids)[FERRY_NAME_MAX];
    size_t *first;   /* n_pids + 1 entries */
    mv_part *parts;
    size_t n_parts;
} mv_slice;

struct ferry_table_def;
/* The parts of slice (tenant, split) in table (t's layout; table may be a staging table of t),
 * active ones only or every state; parts with no rows are left out (see mv_list_parts). */
int mv_slice_list(mv_conn *c, const struct ferry_table_def *t, const char *table,
                  const char *tenant, uint32_t split, bool active_only, mv_slice *out,
                  ferry_err *err);
/* mv_slice_list of n slices (tenants[k], splits[k]) of one table at once: one query, outs[k]
 * the parts of slice k (a batch of moves between two shards, move_batch.c). */
int mv_slice_list_n(mv_conn *c, const struct ferry_table_def *t, const char *table,
                    const char *const *tenants, const uint32_t *splits, size_t n,
                    bool active_only, mv_slice *outs, ferry_err *err);
/* The parts of the partitions pids[0..n) of db.table (any partitions, not one slice's: tiering
 * looks at all the partitions of a wave at once), grouped as mv_slice_list groups them, active
 * ones only or every state; parts with no rows are left out. */
int mv_pids_list(mv_conn *c, const char *db, const char *table, const char *const *pids,
                 size_t n, bool active_only, mv_slice *out, ferry_err *err);
void mv_slice_free(mv_slice *s);
/* The parts of partition pid (a view into s: not to be freed); n 0 when s has none. */
mv_parts mv_slice_parts(const mv_slice *s, const char *pid);
/* The index of pid in s->pids, or -1. */
long mv_slice_pid(const mv_slice *s, const char *pid);

/* ---- shared by move.c and move_begin.c ---- */

/* The partition ids of a slice on one server. */
typedef struct mv_pids {
    char (*ids)[FERRY_NAME_MAX];
    size_t n;
} mv_pids;

void mv_pids_free(mv_pids *p);
bool mv_pids_has(const mv_pids *p, const char *id);
int mv_pids_add(mv_pids *p, const char *id); /* once; FERRY_ENOMEM */

/* ---- ferry's empty twin table (move_twin.c) ---- */

/* Whether c's server keeps parts replaced by REPLACE PARTITION out of the table after a restart
 * (ClickHouse 26.7 and later; an older one loads them again). Asked once per connection; a
 * version that cannot be read counts as no. */
bool mv_replace_crash_safe(mv_conn *c);
/* Whether twin, the empty twin of db.table on c, exists (created when missing, AS the table:
 * same structure and storage policy) and holds no part (REPLACE would copy one in). A no is
 * logged with `otherwise`, what the caller does instead. */
bool mv_twin_ready(mv_conn *c, const char *db, const char *table, const char *twin,
                   const char *otherwise);
/* Empties what it safely can of the partitions src (of db.table on c, a server giving up a
 * slice: a move's source, a dropped replica) by one REPLACE PARTITION ... FROM ferry's empty
 * twin, pinning the server's own cold parts first (move_release.c has the rules); those leave
 * src, and the count is returned. Never an error: the caller detaches what is left in src.
 * flow and id_kv name the caller in the log lines ("move", "move=ID"). */
size_t mv_release_replace_on(mv_conn *c, const char *flow, const char *id_kv,
                             const ferry_table_def *t, mv_pids *src);
/* Appends to sql one ALTER TABLE db.table emptying partitions ids[i] (those with pick[i]; every
 * one when pick is NULL) by REPLACE PARTITION ... FROM db.twin. */
void mv_twin_replace_sql(ferry_buf *sql, const char *db, const char *table, const char *twin,
                         char (*ids)[FERRY_NAME_MAX], const bool *pick, size_t n);

#define MV_STAGING_SUFFIX "_ferry_staging"
/* The staging table's name for table (table + MV_STAGING_SUFFIX) into out. */
void mv_staging_name(const char *table, char *out, size_t outsz);
/* Removes every detached part of db.table on c whose partition is in pids; with tmp_too also
 * the half-received folders a killed agent left (the agent refuses those still being written).
 * The folders are listed from system.detached_parts (one statement), removed by the agent. */
int mv_remove_detached_of(mv_conn *c, const char *db, const char *table, const mv_pids *pids,
                          bool tmp_too, ferry_err *err);
/* mv_remove_detached_of on the source (src_table, without tmp_too) and on the target
 * (dst_table, with tmp_too) side by side: the two servers' agents and ClickHouse clients are
 * separate, and each waits on its own server. The source's error is reported first. */
int mv_remove_detached_both(mv_conn *src, const char *src_table, mv_conn *dst,
                            const char *dst_table, const char *db, const mv_pids *pids,
                            ferry_err *err);

/* One call run on a thread of its own beside the caller's work, on clients nothing else uses
 * meanwhile (the other shard's mv_conn). mv_side_start runs it at once, in the caller's thread,
 * when no thread can be started; mv_side_join waits for it and returns its code, its message
 * in err. Every started side must be joined. */
typedef struct mv_side {
    int (*fn)(void *arg, ferry_err *err);
    void *arg;
    int rc;
    ferry_err err;
    bool threaded;
    pthread_t th;
} mv_side;
void mv_side_start(mv_side *s, int (*fn)(void *arg, ferry_err *err), void *arg);
int mv_side_join(mv_side *s, ferry_err *err);
/* *api: c's agent's FERRY_AGENT_API_VERSION; its status is asked once per connection, unless a
 * move's begin already did. */
int mv_agent_api(mv_conn *c, int *api, ferry_err *err);
/* *out: whether c's agent sends pointer parts live, from the table's folder (API 3). */
int mv_sends_live(mv_conn *c, bool *out, ferry_err *err);
/* Whether two lists of parts hold the same multiset of hash_of_all_files. */
bool mv_same_hashes(const mv_parts *a, const mv_parts *b);
/* The partition ids of the slice in db.table on c (active parts with rows), added to out. */
int mv_slice_pids(mv_conn *c, const ferry_table_def *t, const char *table, const char *tenant,
                  uint32_t split, mv_pids *out, ferry_err *err);
/* Copies src into dst (size dstsz), truncating; names in the catalog always fit. */
void mv_copy_str(char *dst, size_t dstsz, const char *src);
/* s as a number, 0 when it is not one. */
uint64_t mv_u64_of(const char *s);
/* The shard record named name: FERRY_EINVAL naming it when the catalog has none. */
int mv_load_shard(ferry_catalog *cat, const char *name, ferry_record *r, ferry_err *err);
/* The catalog's managed tables: FERRY_EUNSUPPORTED for a per_tenant one, FERRY_EINVAL for none. */
int mv_load_tables(ferry_catalog *cat, ferry_record_list *out, ferry_err *err);

#endif

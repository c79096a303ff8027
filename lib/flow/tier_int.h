/* Tiering's private pieces shared by tier.c (the job state machine) and tier_run.c (finding
 * partitions, running and resuming jobs). See include/ferry/tier.h and docs/tiering.md. */
#ifndef FERRY_TIER_INT_H
#define FERRY_TIER_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferry/agent.h"
#include "ferry/buf.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/objstore.h"
#include "ferry/tier.h"

/* One server (a shard's first replica) as the flow talks to it. The ClickHouse client is only
 * ever used through tier_sql (ferry_guarded_exec) and the read-only fingerprints of verify.h. */
typedef struct tier_server {
    ferry_shard shard;
    ferry_ch_client *ch;
    ferry_agent_client *agent;
    bool opened;
    bool checked;      /* the pointer-format check ran */
    int check_rc;      /* its result */
    char check_msg[FERRY_ERR_MSG_MAX];
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
    ferry_objstore *store; /* clickhouse role: reading back checksums.txt and count.txt */
    char owner[FERRY_NAME_MAX];
    int64_t now;
    uint64_t older_than;
    json_t *report;
    double step_ms[FERRY_TIER_STATE_COUNT];
    double load_ms;        /* the ATTACH in staging and the swap statements themselves */
    double fingerprint_ms; /* verification queries */
} tier_ctx;

/* One job while it runs. data is the journal's JSON state:
 *   db, table, catalog_table, pid, partition, tenant, day, split  what is tiered
 *   attempt, freeze          the FREEZE attempt and its name
 *   merges_stopped           SYSTEM STOP MERGES was (about to be) sent
 *   hot                      names of the frozen hot parts (after FREEZE)
 *   fp                       fingerprint of the frozen hot parts {rows,sum,xor,distinct}
 *   max_block                the partition's highest block number before the swap
 *   swap                     "replace" | "attach": the swap chosen (journaled before it runs)
 *   swapped                  true once the swap may have happened (no rollback after that)
 *   recorded                 the catalog records of CLEANUP were committed */
typedef struct tier_job {
    ferry_record rec;
    enum ferry_tier_state state;
    json_t *data;
    tier_server *srv;
    char db[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char staging[FERRY_NAME_MAX];
    char pid[FERRY_NAME_MAX];
    json_t *objects;       /* part name -> the upload answer's objects (this process only) */
    bool freeze_started_here;
    bool resumed;
    uint64_t bytes_uploaded, files_uploaded, pointer_bytes, pointer_files;
    double step_ms[FERRY_TIER_STATE_COUNT];
} tier_job;

/* Runs sql on the server through the SQL guard; out may be NULL. */
int tier_sql(tier_server *srv, const char *sql, ferry_buf *out, ferry_err *err);
/* db.table, both back-quoted. */
void tier_qualified(ferry_buf *b, const char *db, const char *table);

/* The storage policy of db.table (*exists false when there is no such table) and whether it
 * has a disk on object storage. */
int tier_table_policy(tier_server *srv, const char *db, const char *table, bool *exists,
                      char *policy, size_t policysz, bool *has_remote, ferry_err *err);

/* The staging table of db.table, when it exists (or must_exist), has the table's storage policy
 * and a disk on object storage. */
int tier_check_staging(tier_server *srv, const char *db, const char *table, bool must_exist,
                       ferry_err *err);

/* The job's state machine: runs from its journaled state to DONE or FAILED (or stops at the
 * first error it cannot handle: the journal then says where to resume). */
int tier_job_run(tier_ctx *ctx, tier_job *job, ferry_err *err);
/* Checks that the server's ClickHouse reads the pointer format pinned in the catalog (cached per
 * run). */
int tier_server_check(tier_ctx *ctx, tier_server *srv, ferry_err *err);
/* Opens the ClickHouse and agent clients of srv (cached). */
int tier_server_open(tier_ctx *ctx, tier_server *srv, ferry_err *err);

#endif

/* Rewrite's private pieces shared by rewrite.c (the job's journal and its steps BUILD, SWAP,
 * TIER, RECORD) and rewrite_run.c (finding the partitions, resuming, the run). See
 * include/ferry/rewrite.h and docs/rewrite.md. */
#ifndef FERRY_REWRITE_INT_H
#define FERRY_REWRITE_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/fleet.h"
#include "ferry/rewrite.h"
#include "flow/rewrite_state.h"

/* One job: one partition of one table on one server. st is the journal's state, typed
 * (rewrite_state.h lists its keys): decoded when a job is resumed, encoded at each rw_journal. */
typedef struct rw_job {
    ferry_record rec; /* as last read or written (rec.version; ferry_flow_job_stored) */
    enum ferry_rewrite_state state;
    rw_state st; /* owned: rw_state_free */
    ferry_fleet_server *srv;
    const ferry_table_def *def;
    char build[FERRY_NAME_MAX]; /* <table>_ferry_rewrite */
    bool resumed;
    bool out;  /* finished, failed, or waits for the next run */
    int rc;    /* this run's failure */
    ferry_err err;
} rw_job;

typedef struct rw_ctx {
    const ferry_rewrite_options *opt;
    ferry_fleet *fl;
    char owner[FERRY_NAME_MAX];
    ferry_flow_journal journal; /* the jobs' records (include/ferry/flow_journal.h) */
    rw_job *jobs;
    size_t n_jobs, cap_jobs;
    json_t *report;
    json_t *skipped;
} rw_ctx;

/* s, or "" for an absent expression (NULL): it goes into SQL, where ClickHouse refuses it. */
static inline const char *rw_text(const char *s)
{
    return s ? s : "";
}
/* Runs sql on the job's server through the SQL guard; rows may be NULL. */
int rw_sql(ferry_fleet_server *srv, const char *sql, ferry_ch_rows *rows, ferry_err *err);
/* db.table, both back-quoted. */
void rw_qualified(ferry_buf *b, const char *db, const char *table);
/* The condition that selects the rows the job changes (a NULL value of it counts as false):
 * where in mode "update", else expr. */
void rw_match_sql(ferry_buf *b, const char *mode, const char *expr, const char *where);

/* Journals state `to` with the job's data (j->st, encoded) through the flow engine
 * (flow_journal.h): PLANNED creates the job (or takes a finished record back), the job's own
 * state writes a note, any other state is a declared transition by compare-and-set with the crash
 * points around it. FERRY_ECONFLICT: another worker changed the job (it is left to that worker).
 * FERRY_EINVAL naming the key when st cannot be written. */
int rw_journal(rw_ctx *x, rw_job *j, enum ferry_rewrite_state to, const char *detail,
               ferry_err *err);
/* A failure of the job: before the swap, the build partition emptied and the job FAILED; after
 * it, the job stays in its state with the reason as detail (the next run resumes it). */
void rw_job_fail(rw_ctx *x, rw_job *j, int rc, const ferry_err *err);

int rw_step_build(rw_ctx *x, rw_job *j, ferry_err *err);
int rw_step_swap(rw_ctx *x, rw_job *j, ferry_err *err);
/* Tiers the jobs js[0..n) (one server, one catalog table, all in TIER) in one tiering run. */
int rw_step_tier(rw_ctx *x, rw_job **js, size_t n, ferry_err *err);
int rw_step_record(rw_ctx *x, rw_job *j, ferry_err *err);

#endif

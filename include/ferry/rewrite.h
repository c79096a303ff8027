/* Rewriting cold partitions (docs/rewrite.md): late corrections and deletion requests (GDPR
 * erasure) on data that is already in object storage. Cold data is immutable, so changing old
 * rows means rewriting the partition: for each (server, table, partition) ferry builds the
 * corrected partition on the server's hot disk in a build table (INSERT ... SELECT from the
 * current partition with the filter or the update applied), swaps it into the real table at once
 * (REPLACE PARTITION: a reader sees the old partition or the new one), tiers it again as new
 * objects through the tiering flow (tier.h, the same journal and steps), and takes the server off
 * the catalog records of the old parts, whose objects the sweep then deletes once no pointer file
 * names them. Never a mutation on the tiered table: ALTER ... DELETE/UPDATE there would make
 * ClickHouse rewrite and delete shared objects.
 *
 * Each job is journaled (FERRY_REC_JOB, kind "rewrite", id "rewrite.<server>.<table>.<pid>") and
 * advanced by compare-and-set; a run resumes the unfinished ones first. Test-only fault
 * injection (never set in production): FERRY_TEST_REWRITE_CRASH_AFTER=<STATE> /
 * FERRY_TEST_REWRITE_CRASH_BEFORE=<STATE> make the process _exit(137) right after / before a job
 * is journaled in STATE, and FERRY_TEST_REWRITE_CRASH_AFTER=INSERTED / SWAP_JOURNALED / REPLACED
 * right after the build's INSERT, after the swap is journaled (before its statement), and right
 * after the swap statement (before the journal hears of either); the tiering
 * flow's own points (FERRY_TEST_CRASH_AFTER=UPLOAD, ...) work inside the TIER state. */
#ifndef FERRY_REWRITE_H
#define FERRY_REWRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"
#include "ferry/flow_journal.h"

enum ferry_rewrite_state {
    FERRY_REWRITE_PLANNED = 0, /* created; nothing touched */
    FERRY_REWRITE_BUILD,       /* the source parts journaled; building the corrected partition */
    FERRY_REWRITE_SWAP,        /* the build holds it; REPLACE PARTITION into the real table */
    FERRY_REWRITE_TIER,        /* swapped (hot); tiering it again as new objects */
    FERRY_REWRITE_RECORD,      /* cold again; the old parts' catalog records released */
    FERRY_REWRITE_DONE,
    FERRY_REWRITE_FAILED,
    FERRY_REWRITE_STATE_COUNT
};

const char *ferry_rewrite_state_name(enum ferry_rewrite_state s);
int ferry_rewrite_state_parse(const char *name, enum ferry_rewrite_state *out, ferry_err *err);
/* The declared table of rewrite's journal (include/ferry/flow_journal.h): PLANNED, BUILD, SWAP,
 * TIER, RECORD, DONE in order (PLANNED -> DONE: nothing matches any more), FAILED from any
 * unfinished state, PLANNED again from DONE or FAILED; crash points
 * FERRY_TEST_REWRITE_CRASH_BEFORE/_AFTER. */
extern const ferry_flow_kind ferry_rewrite_flow;

/* ---- expressions (pure) ---- */

/* Checks a user expression (a --delete-where or --where filter, or the value of --update) before
 * it goes into ferry's own statements: one expression, non-empty, at most 1024 bytes, no
 * semicolon, no subquery (SELECT, WITH, FROM, JOIN, UNION, ...) and no `IN table` (both read
 * other tables), no query parameter, no SETTINGS/FORMAT clause, no function that reads beyond the
 * table (files, URLs, dictionaries, Join tables; sqlrw.h), balanced brackets. what names the
 * option in messages ("--delete-where"). FERRY_EINVAL with where and why otherwise. */
int ferry_rewrite_expr_check(const char *what, const char *expr, ferry_err *err);

/* Splits --update 'col = expr' into the column (unquoted; a bare or quoted identifier) and the
 * expression (checked with ferry_rewrite_expr_check). */
int ferry_rewrite_update_parse(const char *text, char *col, size_t colsz, char *expr,
                               size_t exprsz, ferry_err *err);

/* --days RANGE: "YYYYMMDD" or "YYYYMMDD..YYYYMMDD" (inclusive, from <= to). */
int ferry_rewrite_days_parse(const char *text, uint32_t *from, uint32_t *to, ferry_err *err);

/* ---- the run ---- */

/* Progress of a run, given after each job (partition on one server) ends this run: DONE,
 * failed, or left for the next run. Jobs run in batches of FERRY_REWRITE_BATCH (built, swapped,
 * tiered and recorded together), so a tenant-wide erasure reports (and holds on the hot disks)
 * one batch at a time. */
#define FERRY_REWRITE_BATCH 8
typedef struct ferry_rewrite_progress {
    size_t done, total;         /* jobs ended this run (any outcome), jobs of the run */
    size_t failed;              /* of done: failed or left unfinished */
    uint64_t rows_read, rows_total; /* rows_before of the ended jobs, of all jobs */
    uint64_t rows_changed;      /* rows the ended (DONE) jobs erased or changed */
    double elapsed_s;
    double eta_s;               /* by rows read (jobs when no rows); < 0 before the first */
    const char *job;            /* the job that just ended: its id, server, partition, state */
    const char *server, *partition_id, *state;
} ferry_rewrite_progress;
typedef void (*ferry_rewrite_progress_fn)(const ferry_rewrite_progress *p, void *arg);

typedef struct ferry_rewrite_options {
    const char *config_path; /* required */
    const char *tenant;      /* required: the tenant whose partitions are rewritten */
    int64_t split;           /* -1: every split */
    const char *partition_id;  /* one partition (--partition), or NULL */
    uint32_t day_from, day_to; /* --days (0: none) */
    bool all_days;             /* --all-days */
    const char *delete_where;  /* erase the rows where this holds, or NULL */
    const char *update_col;    /* with update_expr and where: set col = expr where where holds */
    const char *update_expr;
    const char *where;
    bool dry_run;              /* count (and sample) the rows that would change; change nothing */
    size_t sample;             /* rows in the dry run's sample (0: 5) */
    const char *owner;         /* journal owner; NULL: "host:pid" */
    ferry_rewrite_progress_fn progress; /* may be NULL; called from the running thread */
    void *progress_arg;
} ferry_rewrite_options;

/* One rewrite run: resumes the unfinished rewrite jobs of the journal (with their journaled
 * expressions), then plans a job per cold partition of the tenant (filtered) on every server
 * whose rows the expression changes, and runs them. *report (caller decrefs; set whenever the
 * run started):
 *   {"dry_run":b, "tenant":s, "mode":"delete"|"update", "partitions":N, "rows_changed":N,
 *    "jobs_resumed":N, "jobs_failed":N, "wall_ms":ms,
 *    "jobs":[{"id","server","table","partition_id","day","state","rows_before","rows_matched",
 *             "rows_after","resumed",("detail")}],
 *    "sample":[row objects] (dry run), "skipped":[{"server","partition_id","reason"}]}
 * FERRY_OK when every job finished (or the dry run was made); else the first failure. */
int ferry_rewrite_run(const ferry_rewrite_options *opt, json_t **report, ferry_err *err);

#endif

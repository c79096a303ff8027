/* Retention: removing data older than a keep period (or all of one tenant's data), the only
 * flow in which ferry deletes cold objects. Per expired partition (table, partition id), one
 * job in the catalog's job journal (kind "retention", id "retention.TABLE.PARTITION_ID"):
 *
 *   SCAN    on every server that holds the partition (live system.parts, detached parts, the
 *           catalog's partition records), read the pointer files of its parts through the agent
 *           and record their objects in the catalog's part records (so a resumed run still
 *           knows them after the pointer files are gone)
 *   DETACH  ALTER TABLE ... DETACH PARTITION ID on each of them (through ferry_guarded_exec;
 *           never DROP, which makes ClickHouse delete shared objects)
 *   REMOVE  remove the detached folders through the agents (plain file removal, objects are
 *           not touched); drop the servers from the part records and the partition records
 *   DELETE  delete each recorded object with the janitor role, but only when the catalog (no
 *           part record still lists a server for it) AND a live read of every server's pointer
 *           files (no file anywhere names it) agree that nothing references it. Objects still
 *           referenced stay, and the job stays in DELETE until a later run finds them free.
 *   DONE
 *
 * Jobs advance by compare-and-set on their record, so two runs never work on one job; a run
 * first resumes every unfinished retention job. The pure pieces (dates, the cut-off, selection,
 * the deletion verdict) do no I/O. */
#ifndef FERRY_RETENTION_H
#define FERRY_RETENTION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/flow_journal.h"
#include "ferry/partition.h"
#include "ferry/sweep.h"

struct ferry_fleet;

/* ---- pure ----------------------------------------------------------------------------------- */

/* true for a real calendar day written as YYYYMMDD. */
bool ferry_ymd_valid(uint32_t ymd);
/* The day `days` after (or before, when negative) ymd, which must be valid. */
uint32_t ferry_ymd_add(uint32_t ymd, int64_t days);
/* The UTC calendar day of a time. */
uint32_t ferry_ymd_of_time(time_t t);

/* The first day retention keeps: partitions of days before it are expired. keep_s is the keep
 * period in seconds and must be whole days, at least one; the newest keep_days days (today
 * included, UTC) are kept. FERRY_EINVAL when keep is not whole days or shorter than the hot
 * window hot_days (data still hot would be deleted before it was ever tiered). */
int ferry_retention_cutoff(time_t now, uint64_t keep_s, uint32_t hot_days, uint32_t *cutoff,
                           ferry_err *err);

typedef struct ferry_retention_select {
    const char *tenant; /* NULL: every tenant */
    bool all;           /* every partition of tenant, whatever its day (tenant removal) */
    uint32_t cutoff;    /* when !all: days before it are expired */
} ferry_retention_select;

/* Whether retention removes the partition with this key (key->tenant "" = unknown, as for
 * per_tenant tables: selected only when no tenant is asked for). */
bool ferry_retention_selects(const ferry_retention_select *sel, const ferry_partition_key *key);

/* The verdict on one object a retention job recorded. */
typedef struct ferry_retention_verdict {
    const char *key;      /* borrowed from the candidate */
    bool deletable;
    char blocker[512];    /* when not deletable: who still references it */
} ferry_retention_verdict;

/* For each candidate key, deletable only when no live reference (live: every pointer file of
 * every server, read just now) and no catalog part record that still lists a server names it.
 * verdicts must have room for n entries. */
void ferry_retention_decide(const char *const *keys, size_t n, const ferry_refset *live,
                            const ferry_record *parts, size_t n_parts,
                            ferry_retention_verdict *verdicts);

/* ---- the flow ------------------------------------------------------------------------------- */

/* A retention job's journaled states (one job per partition). */
enum ferry_retention_state {
    FERRY_RETENTION_SCAN = 0, /* recording the partition's parts and objects on every server */
    FERRY_RETENTION_DETACH,   /* DETACH PARTITION on every server */
    FERRY_RETENTION_REMOVE,   /* the detached folders removed by the agents */
    FERRY_RETENTION_DELETE,   /* objects no live pointer file names deleted by the janitor */
    FERRY_RETENTION_DONE,
    FERRY_RETENTION_STATE_COUNT
};
/* The declared table of retention's journal (include/ferry/flow_journal.h): the states above in
 * order, SCAN again from DETACH, REMOVE or DELETE (the partition found on a server the job did
 * not know), SCAN again from DONE (a new run of the partition); no failed state (a job that
 * cannot go on stays in its state with a detail); crash points FERRY_TEST_CRASH_BEFORE/_AFTER. */
extern const ferry_flow_kind ferry_retention_flow;

typedef struct ferry_retention_options {
    uint64_t keep_s;    /* keep period; 0 only with all */
    const char *tenant; /* NULL: every tenant; must exist in the catalog */
    bool all;           /* with tenant: all of its data, hot and cold (tenant removal) */
    bool dry_run;       /* plan only: nothing is written or removed */
    time_t now;         /* 0: time(NULL) */
    const char *owner;  /* written into the job records; NULL: "host:pid" */
} ferry_retention_options;

/* Plans and runs retention (see above). *report (caller decrefs) is
 *   {cutoff, tenant, all, dry_run, complete, jobs: [{id, table, database, partition_id, tenant,
 *    day, servers: [...], state, detail, deleted: N, deleted_bytes, kept: [{key, blocker}]}],
 *    problems: [...]}
 * FERRY_EINVAL for bad input (unknown tenant, keep shorter than the hot window, ...); other
 * errors for what stops the run (catalog). A job that cannot finish now (a server down, an
 * object still referenced) is not an error: it stays in its state with a detail, and
 * report.complete is false. */
int ferry_retention_run(struct ferry_fleet *fl, const ferry_retention_options *opt,
                        json_t **report, ferry_err *err);

#endif

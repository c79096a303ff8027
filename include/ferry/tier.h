/* Tiering: ageing partitions from a server's local disk into object storage as pointer parts
 * (the blog's step 2, docs/tiering.md). For one (server, table, partition) ferry freezes the
 * partition, uploads every file of every frozen hot part unchanged (the agent, uploader role,
 * checking each file against the part's checksums.txt), writes pointer parts into a staging
 * table's detached/ on the cold disk, attaches them in staging, swaps them into the real table
 * (REPLACE PARTITION, or ATTACH PARTITION FROM + DETACH PART when the partition already holds cold
 * parts or rows arrived since the freeze), verifies that the new cold parts are the frozen ones
 * (their part hashes, or their rows), cleans up and records the cold parts in the catalog.
 *
 * Each job is journaled in a catalog job record (FERRY_REC_JOB, kind "tier", id
 * "tier.<server>.<table>.<partition_id>") advanced by compare-and-set, so a crash at any point is
 * finished by the next run. The jobs of one server and table run as a wave: each step for all of
 * them at once (one statement, agent requests for many parts, one catalog batch). A tiering run holds the catalog lease "tier.<server>" of every server
 * it works on (a run over all servers also "tier"), so two runs never work on one server at once
 * while runs limited to different servers (options.server) may run side by side. Every SQL statement goes through ferry_guarded_exec (sqlguard.h).
 *
 * Test-only fault injection (never set in production): FERRY_TEST_CRASH_AFTER=<STATE> makes the
 * process _exit(137) right after a job's journal reached STATE; FERRY_TEST_CRASH_BEFORE=<STATE>
 * right before it would be journaled (the previous step's work done, the journal not yet told).
 * FERRY_TEST_NOW=<unix seconds> fixes the clock the age rule uses (when options.now is 0), so a
 * test that crosses midnight UTC sees the same partitions due.
 * Two more points for FERRY_TEST_CRASH_AFTER: SWAP (the swap's choice journaled, the ALTER not
 * sent) and RECORDED (CLEANUP's catalog batch committed, the freezes not removed). Either acts
 * like kill -9 at that point. */
#ifndef FERRY_TIER_H
#define FERRY_TIER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/flow_journal.h"

/* The journal states, in order. A job in state X has finished every step before X; X itself
 * may be partly done (every step is idempotent, so it is simply run again). */
enum ferry_tier_state {
    FERRY_TIER_PLANNED = 0, /* created; nothing touched on the server */
    FERRY_TIER_FREEZE,      /* merges stopped; FREEZE under the attempt's name */
    FERRY_TIER_UPLOAD,      /* the frozen hot parts are known (data.hot); uploading them */
    FERRY_TIER_POINTERS,    /* every object uploaded; writing pointer parts into staging */
    FERRY_TIER_ATTACH,      /* pointer parts in staging's detached/; ATTACH in staging, compare */
    FERRY_TIER_REPLACE,     /* staging equals the frozen parts; swapping into the real table */
    FERRY_TIER_VERIFY,      /* swapped; checking the real table */
    FERRY_TIER_CLEANUP,     /* verified; staging, detached and shadow folders, catalog records */
    FERRY_TIER_DONE,
    FERRY_TIER_FAILED,
    FERRY_TIER_STATE_COUNT
};

const char *ferry_tier_state_name(enum ferry_tier_state s);
/* FERRY_EINVAL for an unknown name. */
int ferry_tier_state_parse(const char *name, enum ferry_tier_state *out, ferry_err *err);
/* True when a job may go from -> to: the next state in PLANNED..DONE; FREEZE -> FREEZE (a fresh
 * attempt); FAILED from any state but DONE and FAILED; PLANNED again from DONE or FAILED (a new
 * run of the same partition, e.g. for late rows). */
bool ferry_tier_transition_ok(enum ferry_tier_state from, enum ferry_tier_state to);
/* The declared table of tiering's journal (include/ferry/flow_journal.h): the states above, the
 * transitions ferry_tier_transition_ok allows, crash points FERRY_TEST_CRASH_BEFORE/_AFTER. */
extern const ferry_flow_kind ferry_tier_flow;

/* "tier.<server>.<table>.<partition_id>" into out. FERRY_EINVAL when it would not be a catalog
 * name (1..127 characters of [A-Za-z0-9_.-]). */
int ferry_tier_job_id(const char *server, const char *table, const char *partition_id, char *out,
                      size_t outsz, ferry_err *err);
/* The FREEZE name of a job's attempt: "ferry_tier_<16 hex digits of xxh3(job id)>_<attempt>",
 * only [A-Za-z0-9_] so ClickHouse keeps it unescaped under shadow/. out needs 48 bytes. */
void ferry_tier_freeze_name(const char *job_id, unsigned attempt, char *out, size_t outsz);

/* Whether the partition of day (YYYYMMDD) is older than older_than seconds at now (unix
 * seconds): its last instant (the next day, 00:00 UTC) lies at least older_than before now.
 * False for an invalid day. */
bool ferry_tier_day_due(uint32_t day, int64_t now, uint64_t older_than);

/* The staging table's name for a table: "<table>_ferry_staging" into out (FERRY_EINVAL when
 * too long). */
int ferry_tier_staging_name(const char *table, char *out, size_t outsz, ferry_err *err);
/* The name of the always-empty twin of a table that tiering empties staging's partitions from
 * (REPLACE PARTITION ... FROM it): "<table>_ferry_empty" (FERRY_EINVAL when too long). */
int ferry_tier_empty_name(const char *table, char *out, size_t outsz, ferry_err *err);

typedef struct ferry_tier_options {
    const char *config_path; /* required: [cluster] catalog, shards' agent_token_file, the
                                object store (for the checksums recorded in the catalog) */
    uint64_t older_than;     /* seconds; 0: the catalog's hot_days */
    const char *tenant;      /* only this tenant; NULL: all */
    const char *table;       /* only this catalog table; NULL: all */
    const char *server;      /* only this shard; NULL: all */
    bool dry_run;            /* list what would be tiered or resumed; change nothing */
    int64_t now;             /* unix seconds; 0: the clock */
    const char *owner;       /* journal owner; NULL: "host:pid" */
    const char *const *partition_ids; /* only these partition ids (n_partition_ids of them),
                                         both for new and for resumed jobs; NULL: all
                                         (`ferry rewrite` tiers the partitions it rebuilt) */
    size_t n_partition_ids;
    /* Swap a partition that holds exactly its frozen parts with REPLACE PARTITION (atomic for
     * readers) instead of DETACH PART + ATTACH PARTITION FROM staging (a reader may see the
     * frozen rows missing for an instant). Only for a caller that keeps writes away from the
     * partitions (a rewrite): REPLACE also drops a part inserted between ferry's look at the
     * partition and the statement (docs/tiering.md, "The swap, and late rows"). */
    bool atomic_swap;
    /* Tier a due partition of many small hot parts as it is, without merging it into one part
     * first (docs/tiering.md, "Many small parts are merged first"). */
    bool no_compact;
} ferry_tier_options;

/* One tiering run: resumes the unfinished tier jobs of the journal first, then tiers every hot
 * partition older than the threshold on every server (filtered by the options). *report
 * (caller decrefs; set even on failure when the run started) is
 *   {"dry_run":b, "older_than_s":N, "partitions_tiered":N, "jobs_resumed":N, "jobs_failed":N,
 *    "bytes_uploaded":N, "files_uploaded":N, "pointer_bytes":N, "pointer_files":N,
 *    "step_ms":{"FREEZE":ms,...}, "wall_ms":ms, "load_sql_ms":ms (the ATTACH in staging and the
 *    swap statements alone), "fingerprint_ms":ms (verification queries that read rows),
 *    "upload_check_ms":ms (the agents' time checking uploads against checksums.txt, summed over
 *    parts uploaded side by side),
 *    "waves":N, "statements":N, "agent_requests":N, "catalog_writes":N,
 *    "jobs":[{"id","server","table","partition_id","tenant","day","state","swap","rows",
 *             "hot_parts","bytes_uploaded","pointer_bytes","resumed","wave","verified_by",
 *             "step_ms" (its share of its wave's step times),("error")}],
 *    "planned":[...] (dry run)}
 * Returns FERRY_OK when every job finished; otherwise the first failure's code and message
 * (other jobs still ran). FERRY_ECONFLICT when another run holds one of the run's leases. */
int ferry_tier_run(const ferry_tier_options *opt, json_t **report, ferry_err *err);

#endif

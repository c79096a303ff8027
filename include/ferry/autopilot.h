/* The coordinator's autopilot: what the one active coordinator runs on its own, each action on
 * its own interval, under limits that hold across everything it runs (docs/config.md,
 * [autopilot]; docs/operations.md, "Running unattended").
 *
 *   rebalance  the plan of `ferry rebalance` (a shard added, drained or re-weighted; fill above
 *              the target or a spread above `skew` are named as reasons), run through
 *              ferry_plan_run with max_moves_per_shard, max_moves (in flight in total),
 *              bandwidth (bytes/s, all moves together), bandwidth_per_shard (bytes/s each
 *              shard sends plus receives) and the maintenance window (UTC; no move
 *              starts outside it, moves in flight finish)
 *
 * The window holds every action but doctor (window_actions can narrow it): outside it splits,
 * tier, repair and retention do not start (a run in progress finishes) and the sweep reports
 * without deleting.
 *   splits     `ferry splits`;  tier  `ferry tier`;  repair  `ferry repair`
 *   retention  `ferry retention --keep KEEP`
 *   sweep      `ferry sweep`: a report, unless delete_orphans and min_age are both set
 *   doctor     `ferry doctor` (doctor_skip: checks left out)
 *
 * Every action but doctor (which only reads) first reads the pause (include/ferry/pause.h):
 * while paused it is skipped, and a
 * rebalance starts no further move. Each run is recorded in the catalog (the job record
 * "autopilot.<action>", kind "autopilot", state DONE or FAILED) with the reason that started it
 * and its result, so `ferry status` and the status page show it whoever reads the catalog. */
#ifndef FERRY_AUTOPILOT_H
#define FERRY_AUTOPILOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

struct ferry_config;
struct ferry_coord_job;

enum ferry_ap_action {
    FERRY_AP_REBALANCE = 0,
    FERRY_AP_SPLITS,
    FERRY_AP_TIER,
    FERRY_AP_REPAIR,
    FERRY_AP_RETENTION,
    FERRY_AP_SWEEP,
    FERRY_AP_DOCTOR,
    FERRY_AP_ACTIONS
};
const char *ferry_ap_action_name(enum ferry_ap_action a); /* "rebalance", ... */

/* A maintenance window in UTC minutes of the day; end before start crosses midnight. */
typedef struct ferry_ap_window {
    bool set; /* false: always open */
    unsigned start_min, end_min;
} ferry_ap_window;

/* "HH:MM-HH:MM" (UTC). FERRY_EINVAL on anything else. */
int ferry_ap_window_parse(const char *s, ferry_ap_window *out, ferry_err *err);
/* Whether a move may start at now. */
bool ferry_ap_window_open(const ferry_ap_window *w, time_t now);
/* "HH:MM-HH:MM" ("always" when not set); out of at least 32 bytes. */
void ferry_ap_window_fmt(const ferry_ap_window *w, char *out, size_t sz);
/* now when open, else when it opens next. */
time_t ferry_ap_window_next(const ferry_ap_window *w, time_t now);

/* Moves of one batch by default, as `ferry rebalance --batch` (docs/moves.md, "Batches"). */
#define FERRY_AP_MOVE_BATCH 8

typedef struct ferry_autopilot_config {
    bool enabled;                          /* [autopilot] enabled (default true) */
    unsigned interval_s[FERRY_AP_ACTIONS]; /* 0: the action does not run */
    unsigned max_moves_per_shard;          /* moves in flight touching one shard (default 1) */
    unsigned max_moves;                    /* moves in flight in total (default 2) */
    unsigned move_batch;                   /* moves between the same two shards run as one
                                              batch (ferry_move_run_batch), 1..64; a batch
                                              counts as one move for the two limits above
                                              (default FERRY_AP_MOVE_BATCH) */
    uint64_t bandwidth;                    /* bytes/s, all moves together; 0: unlimited */
    uint64_t bandwidth_per_shard;          /* bytes/s each shard sends plus receives; 0: none */
    ferry_ap_window window;
    unsigned window_actions;               /* bit 1 << action: held outside the window (default
                                              every action but doctor; sweep: its deletes) */
    double skew;                           /* fill spread named as a reason (default 0.2) */
    uint64_t keep_s;                       /* retention: the keep period (required with it) */
    bool delete_orphans;                   /* sweep: delete orphans older than min_age_s */
    uint64_t min_age_s;                    /* required with delete_orphans */
    char doctor_skip[256];                 /* doctor: checks left out, comma-separated */
    char notes[512];                       /* aliases used ([cluster] tier_interval ...) */
} ferry_autopilot_config;

/* Reads [autopilot], and the older [cluster] tier_interval / splits_interval / repair_interval
 * as aliases of [autopilot]'s keys of the same names (both given: FERRY_EINVAL). Bad values and
 * unknown keys: FERRY_EINVAL naming FILE:LINE. */
int ferry_autopilot_config_read(const struct ferry_config *cfg, ferry_autopilot_config *out,
                                ferry_err *err);

/* Whether the window holds action a at now: the window is set, closed at now, and covers a
 * ([autopilot] window_actions). For the sweep it holds the deletes only (the report runs);
 * doctor, which only reads, is never held. why (may be NULL) gets "outside the window HH:MM-HH:MM
 * UTC (next opens ...)". */
bool ferry_ap_window_holds(const ferry_autopilot_config *ac, enum ferry_ap_action a, time_t now,
                           char *why, size_t whysz);

/* ---- the action log ---------------------------------------------------------------------- */

typedef struct ferry_ap_run {
    char action[32];
    int64_t started, finished; /* unix seconds */
    int64_t next;              /* when it runs next (0: unknown) */
    char result[32];           /* "ok", "idle", "failed", "paused", "outside window" */
    char reason[256];          /* what started it, or why it did nothing */
    char summary[512];         /* what it did */
    char owner[FERRY_NAME_MAX];
} ferry_ap_run;

/* Records run as the job "autopilot.<action>" (replacing the previous one). */
int ferry_ap_log_put(ferry_catalog *cat, const ferry_ap_run *run, ferry_err *err);
/* Every recorded run, in action order. *out malloc'ed (caller frees), *n entries. */
int ferry_ap_log_list(ferry_catalog *cat, ferry_ap_run **out, size_t *n, ferry_err *err);

/* ---- running it --------------------------------------------------------------------------- */

typedef struct ferry_autopilot ferry_autopilot;

/* cfg (the loaded config; shard credentials) and config_path (for the flows that load it
 * themselves) must outlive the autopilot. */
int ferry_autopilot_new(const ferry_autopilot_config *ac, const struct ferry_config *cfg,
                        const char *config_path, const char *catalog_url, const char *owner,
                        ferry_autopilot **out, ferry_err *err);
/* The coordinator jobs of the enabled actions (at most FERRY_AP_ACTIONS). */
size_t ferry_autopilot_jobs(ferry_autopilot *ap, struct ferry_coord_job *jobs, size_t max);
/* One rebalance pass now (what the job runs): *run says what it did. */
int ferry_autopilot_rebalance(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err);
/* Reads the config file at path again (SIGHUP) and, only when it passes the checks the
 * coordinator's start makes ([cluster], the same catalog, [autopilot], [coordinator]), makes it
 * the config every action run from now on uses: intervals, limits, the window, shard
 * credentials. Runs in progress finish with the config they started with. A bad file changes
 * nothing: FERRY_EINVAL (or the loader's error) saying what is wrong and where. window (may be
 * NULL) gets the new maintenance window. */
int ferry_autopilot_reload(ferry_autopilot *ap, const char *path, ferry_ap_window *window,
                           ferry_err *err);
/* No new move starts after this (moves in flight finish); call before stopping the coordinator. */
void ferry_autopilot_stop(ferry_autopilot *ap);
void ferry_autopilot_free(ferry_autopilot *ap);

#endif

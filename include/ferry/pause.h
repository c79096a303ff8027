/* The cluster-wide pause (`ferry pause` / `ferry resume`): one record in the catalog that every
 * coordinator's autopilot reads before each action and between moves, and that the commands
 * which move data (`ferry rebalance`, `ferry move`, `ferry tier`) obey unless --force.
 *
 * It is stored as the job record "autopilot.pause" (kind "pause"), so both backends hold it
 * without a record kind of their own. Its state is "DONE": jobs in another state are work in
 * flight to the flows that look at the journal (the sweep waits for them), and a pause is not
 * work. Resuming deletes the record. */
#ifndef FERRY_PAUSE_H
#define FERRY_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

#define FERRY_PAUSE_JOB_ID "autopilot.pause"

typedef struct ferry_pause {
    bool paused;
    char reason[256]; /* as given to ferry pause --reason ("" when none) */
    char by[FERRY_NAME_MAX]; /* who paused (user@host:pid) */
    int64_t since;    /* unix seconds */
} ferry_pause;

/* Reads the pause; out->paused false when there is none. */
int ferry_pause_get(ferry_catalog *cat, ferry_pause *out, ferry_err *err);
/* Pauses the cluster (again: the reason and time are replaced). */
int ferry_pause_set(ferry_catalog *cat, const char *reason, const char *by, ferry_err *err);
/* Resumes; *was (may be NULL) says whether it was paused. */
int ferry_pause_clear(ferry_catalog *cat, bool *was, ferry_err *err);
/* For commands: FERRY_ECONFLICT "the cluster is paused ... (ferry resume, or --force)" when
 * paused, naming what (e.g. "rebalance") would have run. */
int ferry_pause_check(ferry_catalog *cat, const char *what, ferry_err *err);
/* The same, opening the catalog at url for the check. */
int ferry_pause_check_url(const char *catalog_url, const char *what, ferry_err *err);

#endif

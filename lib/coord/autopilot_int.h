/* The autopilot's internals shared by its files: the handle (autopilot.c: the actions, the
 * jobs), the rebalance pass (autopilot_rebalance.c) and the config reload (autopilot_reload.c).
 *
 * A reload never changes a config a run is using: each config is a generation (a struct
 * ferry_autopilot: the [autopilot] settings, the loaded config file, names), a run takes the
 * current one when it starts and works with it to its end, and a reload publishes a new
 * generation; the old ones are kept until the autopilot is freed (reloads are rare, and a run
 * may still hold one). What outlives generations - the stop flag, each action's schedule and
 * last result - is in the shared part. */
#ifndef FERRY_AUTOPILOT_INT_H
#define FERRY_AUTOPILOT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ferry/autopilot.h"
#include "ferry/config.h"
#include "ferry/move.h"

struct ap_shared;

struct ap_slot {
    struct ap_shared *sh;
    enum ferry_ap_action action;
    double last_end;  /* CLOCK_MONOTONIC seconds its last run ended (the start at first) */
    char last[300];   /* the last run's result and reason (only its job's thread touches it) */
};

struct ferry_autopilot {
    ferry_autopilot_config ac;
    const struct ferry_config *cfg;
    struct ferry_config *own_cfg; /* a reloaded generation's config (freed with it), else NULL */
    char config_path[1024];
    char catalog_url[FERRY_URL_MAX];
    char owner[FERRY_NAME_MAX];
    struct ap_shared *sh;
    struct ferry_autopilot *older; /* the generation it replaced (kept until the end) */
};

struct ap_shared {
    pthread_mutex_t mu;
    struct ferry_autopilot *cur; /* the newest generation (under mu) */
    atomic_bool stopping;
    struct ap_slot slots[FERRY_AP_ACTIONS];
};

/* The move options of the autopilot's flows (its catalog, config and owner). */
void ap_move_opts(ferry_autopilot *ap, ferry_move_opts *mo);
/* The generation runs take now. */
ferry_autopilot *ap_current(struct ap_shared *sh);
/* Logs the schedule of a generation's actions ("autopilot action scheduled"). */
void ap_log_schedule(const ferry_autopilot *ap);

#endif

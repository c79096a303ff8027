/* The autopilot's internals shared by its files: the handle (autopilot.c: the actions, the
 * jobs) and the rebalance pass (autopilot_rebalance.c). */
#ifndef FERRY_AUTOPILOT_INT_H
#define FERRY_AUTOPILOT_INT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "ferry/autopilot.h"
#include "ferry/move.h"

struct ap_slot {
    ferry_autopilot *ap;
    enum ferry_ap_action action;
    char last[300]; /* the last run's result and reason (only its job's thread touches it) */
};

struct ferry_autopilot {
    ferry_autopilot_config ac;
    const struct ferry_config *cfg;
    char config_path[1024];
    char catalog_url[FERRY_URL_MAX];
    char owner[FERRY_NAME_MAX];
    atomic_bool stopping;
    struct ap_slot slots[FERRY_AP_ACTIONS];
};

/* The move options of the autopilot's flows (its catalog, config and owner). */
void ap_move_opts(ferry_autopilot *ap, ferry_move_opts *mo);

#endif

/* The cluster at a glance, from the catalog: each shard's bytes and fill, the counts of tenants
 * and slices, the largest tenants, the moves in flight, the tier backlog, the pause, the
 * autopilot's last runs, the slices awaiting a repair of writes a replica missed, and the
 * tallies of moves, tiering, sweeps and doctor runs (ferry/tally.h). `ferry status`, the
 * coordinator's GET /metrics and its status page all read it from here. */
#ifndef FERRY_CLUSTER_STATUS_H
#define FERRY_CLUSTER_STATUS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/autopilot.h"
#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/pause.h"
#include "ferry/repair_need.h"
#include "ferry/tally.h"

typedef struct ferry_shard_status {
    ferry_shard shard;
    uint64_t bytes;   /* bytes of the slices routed to it (each replica counts its slice) */
    size_t slices;    /* slices routed to it */
    double fill;      /* bytes / capacity; negative when the shard has no capacity */
} ferry_shard_status;

typedef struct ferry_tenant_status {
    char name[FERRY_NAME_MAX];
    uint32_t splits;
    uint64_t bytes;
    char shards[FERRY_LIST_MAX]; /* the shards serving its slices, distinct, comma-separated */
} ferry_tenant_status;

typedef struct ferry_cluster_status {
    ferry_settings settings;
    char backend[16];               /* "sqlite" or "zk" */
    uint64_t routing_version;
    size_t tenants, slices;
    ferry_shard_status *shards;     /* owned, catalog order */
    size_t n_shards;
    ferry_shard_status *unknown;    /* owned: the shards routes name that have no shard record
                                       (a route edited by hand or imported), in the order met;
                                       only the name, bytes and slices set, fill -1 */
    size_t n_unknown;
    ferry_tenant_status *top;       /* owned: the largest tenants, largest first */
    size_t n_top;
    ferry_record_list moves;        /* owned: the unfinished moves */
    size_t moves_by_state[FERRY_MOVE_STATES];
    size_t partitions_hot, partitions_cold;
    size_t tier_backlog;            /* hot partitions older than hot_days (days before today,
                                       UTC): what tiering has still to do */
    ferry_pause pause;              /* ferry pause / resume */
    ferry_ap_run *autopilot;        /* owned: the last run of each autopilot action */
    size_t n_autopilot;
    ferry_repair_need *repair_needed; /* owned: slices written while a replica missed the
                                         write ([router] min_insert_replicas), awaiting repair */
    size_t n_repair_needed;
    ferry_tallies tallies;          /* moves ended and bytes copied, the last sweep and doctor */
} ferry_cluster_status;

/* Reads the status (top_n largest tenants). *out owned by the caller (ferry_cluster_status_free);
 * FERRY_ENOTFOUND when the catalog holds no cluster (ferry init). */
int ferry_cluster_status_read(ferry_catalog *cat, size_t top_n, ferry_cluster_status *out,
                              ferry_err *err);
void ferry_cluster_status_free(ferry_cluster_status *s);

/* How many routes name shard (every route, through the catalog's compact scan: a route is a few
 * bytes there, not a 3.4 KB record), for `ferry shard remove`, which refuses a shard that still
 * serves slices. */
int ferry_shard_routes_count(ferry_catalog *cat, const char *shard, size_t *n, ferry_err *err);

/* The status as `ferry status --json` prints it: the settings and counts, "shards",
 * "unknown_shards" (when any), "moves_in_flight", "tier_backlog", "autopilot" (the pause, the
 * maintenance window w when set and the autopilot's last runs: {"pause": {...}, "window": {utc,
 * open, next_open}, "runs": [...]}) and "repair_needed". Caller decrefs. */
json_t *ferry_cluster_status_json(const ferry_cluster_status *cs, const ferry_ap_window *w);

#endif

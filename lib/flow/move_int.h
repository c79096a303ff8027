/* Private pieces of the move module shared between its files. The plan's shards, slices and
 * moves below are indices into the caller's arrays (the catalog's shard records, the view's
 * slices): rebalance_plan.c maps them onto placement's sorted clusters and inventory
 * (ferry/placement.h) and back, and marks which shards serve routes, are active or were just
 * added, which placement's own model does not carry. */
#ifndef FERRY_MOVE_INT_H
#define FERRY_MOVE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

typedef struct mv_plan_shard {
    const char *name;
    double weight;
    uint64_t capacity;
    bool in_old; /* serves routes now */
    bool in_new; /* active */
    bool added;  /* state NEW: the plan fills it as a shard just added, also once it serves
                  * routes (a rebalance cut short, resumed) */
    const char *zone; /* NULL or "": none */
} mv_plan_shard;

typedef struct mv_plan_slice {
    const char *tenant;
    uint32_t split;
    uint64_t bytes;
    size_t route; /* index into the shards */
    size_t view;  /* the caller's own index (its view of the slice) */
} mv_plan_slice;

typedef struct mv_plan_move {
    size_t slice;     /* index into the slices */
    size_t from, to;  /* indices into the shards */
    uint64_t bytes;
} mv_plan_move;

/* The moves from the routing table (slices[i].route, on the in_old shards) to the rebalanced
 * layout on the in_new shards. *out is malloc'ed (caller frees). */
int mv_plan(const char *hash, unsigned rf, double fill, const mv_plan_shard *shards, size_t nsh,
            const mv_plan_slice *slices, size_t nsl, mv_plan_move **out, size_t *n,
            ferry_err *err);

/* The zone rule of placement (ferry_pl_pick_replica, ferry_pl_zone_repair in placement.h) over the
 * catalog's shards, for the replica steps of a rebalance: shards are indices into the array
 * given to mv_zones_open, which must outlive the context; eligible shards are the active ones
 * (in_new); loads start at 0 and follow mv_zones_load. */
typedef struct mv_zones mv_zones;

int mv_zones_open(const char *hash, double fill, const mv_plan_shard *shards, size_t n,
                  mv_zones **out, ferry_err *err);
void mv_zones_close(mv_zones *z);
/* Adds delta bytes (negative: removes) to a shard's load. */
void mv_zones_load(mv_zones *z, size_t shard, int64_t delta);
/* The shard for one more replica of slice_id on held[0..n_held) (indices), or -1. */
long mv_zones_pick(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                   size_t n_held);
/* Zone repair: true with *victim (index into held) and *to (shard) when a replica should move. */
bool mv_zones_repair(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                     size_t n_held, size_t *victim, size_t *to);
/* An added shard's pull (ferry_pl_attract_replica): true with *victim (index into held) and *to
 * (an added shard) when a replica should move there. */
bool mv_zones_attract(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                      size_t n_held, size_t *victim, size_t *to);

/* ---- the catalog's tenants, slices and routes, compactly (catalog_view.c) ---- */

typedef struct mv_view_tenant {
    const char *name; /* pooled */
    uint32_t splits, rf; /* rf 0: the cluster's */
    int64_t version;
} mv_view_tenant;

/* One slice key: its slice record, its route, or both. */
typedef struct mv_view_slice {
    const char *tenant; /* pooled */
    uint32_t split;
    uint64_t bytes, rows;
    const char *placement; /* pooled; NULL: no slice record */
    int64_t version;       /* the slice record's; -1: none */
    const char *route;     /* pooled: the shards serving it, comma-separated; NULL: no route
                            * record */
    int64_t route_version; /* -1: none */
} mv_view_slice;

typedef struct mv_view {
    mv_view_tenant *tenants; /* sorted by name (bytewise) */
    size_t n_tenants;
    mv_view_slice *slices; /* sorted by tenant (bytewise), then split */
    size_t n_slices;
    struct mv_pool *pool; /* every string above: names once each, shard lists once each */
} mv_view;

struct ferry_catalog;

/* Reads every tenant, slice and route through the catalog's compact scans
 * (ferry/catalog_scan.h). Free with mv_view_free, also after a failure. */
int mv_view_read(struct ferry_catalog *cat, mv_view *v, ferry_err *err);
/* The same view from every record decoded (ferry_catalog_each), the way it was read before the
 * compact scans: the reference the tests and the scale benchmark compare mv_view_read with. */
int mv_view_read_records(struct ferry_catalog *cat, mv_view *v, ferry_err *err);
void mv_view_free(mv_view *v);
/* The tenant named name, or NULL; the index of slice (tenant, split), or -1. */
const mv_view_tenant *mv_view_tenant_find(const mv_view *v, const char *name);
long mv_view_slice_find(const mv_view *v, const char *tenant, uint32_t split);
/* ferry_rebalance_plan_compute with the view from mv_view_read_records: the plan as it was
 * computed before the compact scans, for the tests and the scale benchmark to compare. */
struct ferry_rebalance_plan;
int mv_plan_compute_records(struct ferry_catalog *cat, struct ferry_rebalance_plan *out,
                            ferry_err *err);
/* The view's order: tenant bytewise, then split. */
int mv_slice_key_cmp(const char *ta, uint32_t sa, const char *tb, uint32_t sb);

/* Names (of shards) to their index in the caller's array, by binary search. names is borrowed
 * and must outlive m. */
typedef struct mv_names {
    const char *const *names;
    size_t *by_name; /* indices sorted by name */
    size_t n;
} mv_names;
int mv_names_init(mv_names *m, const char *const *names, size_t n, ferry_err *err);
/* The index of the name given as name[0..len) (not NUL-terminated there), or -1. */
long mv_names_find(const mv_names *m, const char *name, size_t len);
void mv_names_free(mv_names *m);

#endif

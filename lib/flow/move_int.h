/* Private pieces of the move module shared between its files. rebalance_plan.c includes
 * ferry/placement.h, whose type names collide with ferry/catalog.h, so it talks to the rest of
 * the module through the plain types below. */
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
    const char *zone; /* NULL or "": none */
} mv_plan_shard;

typedef struct mv_plan_slice {
    const char *tenant;
    uint32_t split;
    uint64_t bytes;
    size_t route; /* index into the shards */
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

/* The placement score of slice_id ("<tenant>/split<k>") on a shard (ferry_score with the named
 * hash); FERRY_EINVAL for an unknown hash. */
int mv_score(const char *hash, const char *slice_id, const char *shard, double weight,
             double *out, ferry_err *err);

/* The zone rule of placement (ferry_pick_replica, ferry_zone_repair in placement.h) over the
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

#endif

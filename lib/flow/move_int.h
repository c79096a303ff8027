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

#endif

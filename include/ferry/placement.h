/* Slice placement: weighted rendezvous hashing with capacity, anti-affinity and replication,
 * and the planner that turns a cluster change into an ordered list of slice moves.
 *
 * A slice is one split of one tenant; its id string is "<tenant>/split<k>". Every slice scores
 * every shard and prefers higher scores; docs/placement.md describes the algorithm and what it
 * guarantees. This module is pure: it does no I/O (parsers take text, callers read files).
 *
 * Ownership: every struct filled by a function here owns its memory and is released with the
 * matching *_free function; pointers inside a layout or plan borrow from the inventory and
 * clusters they were computed from, which must outlive them. */
#ifndef FERRY_PLACEMENT_H
#define FERRY_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/names.h"

/* ---- hashes and scores ------------------------------------------------------------------- */

/* The rendezvous hash, a cluster setting chosen once. Both hash the same key string
 * "<slice id>:<shard name>" to 64 bits:
 *   sha256: the first 8 bytes of SHA-256(key) read big-endian (= its first 16 hex digits);
 *   xxh3:   XXH3_64bits(key) (xxHash 0.8, seed 0). */
typedef enum ferry_hash { FERRY_HASH_SHA256 = 0, FERRY_HASH_XXH3 = 1 } ferry_hash;

/* "sha256" / "xxh3" -> value; false for anything else. */
bool ferry_hash_parse(const char *name, ferry_hash *out);
const char *ferry_hash_name(ferry_hash h);

/* The 64-bit hash of key (len bytes). */
uint64_t ferry_hash64(ferry_hash h, const char *key, size_t len);

/* score = -weight / ln(u), u = (h + 0.5) / 2^64 computed in double precision exactly as the
 * reference Python does. When u rounds to 1.0 (h >= 2^64 - 1024) the score is +infinity. */
double ferry_score_from_hash(uint64_t h, double weight);

/* The score of one slice on one shard: hashes "<slice_id>:<shard>". */
double ferry_score(ferry_hash h, const char *slice_id, const char *shard, double weight);

/* ---- inventory: shards and slices -------------------------------------------------------- */

/* Names follow ferry/names.h, the catalog's rule, so every shard the catalog holds can be placed:
 * a shard name passes ferry_name_ok (1..FERRY_NAME_MAX - 1 bytes of [A-Za-z0-9._-]), a zone too
 * and is at most FERRY_ZONE_NAME_MAX bytes; a tenant is 1..FERRY_NAME_MAX - 1 bytes of printable
 * ASCII without space or '/' (wider than the catalog's rule: `ferry place` reads any inventory). */
#define FERRY_SLICE_ID_MAX (FERRY_NAME_MAX + 24) /* "<tenant>/split<k>" and its NUL */

typedef struct ferry_pl_shard {
    char *name;
    double weight;     /* > 0 */
    uint64_t capacity; /* bytes; 0 = unlimited */
    long line;         /* source line, 0 when added in code */
    char *zone;        /* NULL: no zone declared (the shard is a zone of its own) */
    uint32_t zone_id;  /* set by ferry_pl_cluster_finish: equal for shards of one zone */
} ferry_pl_shard;

/* A set of shards, sorted by name (bytewise) once finished. */
typedef struct ferry_pl_cluster {
    char *path; /* source name for messages */
    ferry_pl_shard *shards;
    size_t n, cap;
    /* set by ferry_pl_cluster_finish: */
    size_t n_zones;      /* distinct zones, a shard without a zone counting as one */
    uint32_t *zone_size; /* [n_zones] shards in each zone */
    bool zoned;          /* at least one shard declares a zone */
} ferry_pl_cluster;

typedef struct ferry_pl_slice {
    char *tenant;
    uint32_t split;
    uint64_t bytes;
    long line;
    uint32_t tenant_index; /* set by ferry_pl_inventory_finish */
} ferry_pl_slice;

/* All slices, sorted by (tenant bytewise, split) once finished. */
typedef struct ferry_pl_inventory {
    char *path;
    ferry_pl_slice *slices;
    size_t n, cap;
    size_t n_tenants;
    uint32_t *tenant_first;  /* [n_tenants] index of the tenant's first slice */
    uint32_t *tenant_splits; /* [n_tenants] how many slices the tenant has */
} ferry_pl_inventory;

/* Starts an empty cluster / inventory; path names the source in messages. */
int ferry_pl_cluster_init(ferry_pl_cluster *c, const char *path, ferry_err *err);
int ferry_pl_inventory_init(ferry_pl_inventory *inv, const char *path, ferry_err *err);

/* Adds one entry after validating it (name syntax, weight > 0 and finite). line is used in
 * messages ("PATH:LINE: ..."; 0 leaves the line out). */
int ferry_pl_cluster_add(ferry_pl_cluster *c, const char *name, double weight, uint64_t capacity,
                         long line, ferry_err *err);
/* The same with a zone (NULL or "": none; else the shard-name syntax, at most
 * FERRY_ZONE_NAME_MAX bytes). Replicas of a slice are spread over zones (docs/placement.md). */
int ferry_pl_cluster_add_zoned(ferry_pl_cluster *c, const char *name, double weight,
                               uint64_t capacity, const char *zone, long line, ferry_err *err);
int ferry_pl_inventory_add(ferry_pl_inventory *inv, const char *tenant, uint32_t split,
                           uint64_t bytes, long line, ferry_err *err);

/* Sorts canonically and rejects duplicates (naming both lines) and, for a cluster, an empty
 * shard list. Must be called before the set is used. */
int ferry_pl_cluster_finish(ferry_pl_cluster *c, ferry_err *err);
int ferry_pl_inventory_finish(ferry_pl_inventory *inv, ferry_err *err);
/* The index of slice (tenant, split) in a finished inventory, or where it would be (the first
 * slice not before it: inv->n when none). */
size_t ferry_pl_inventory_find(const ferry_pl_inventory *inv, const char *tenant, uint32_t split);

/* Parse the TSV formats (see docs/placement.md); '#' lines and blank lines are comments.
 *   shards: name<TAB>weight[<TAB>capacity_bytes[<TAB>zone]] (capacity "-": unlimited)
 *   slices: tenant<TAB>split<TAB>bytes
 * Sizes accept a binary suffix (K, M, G, T, KiB, ...). On success the result is finished. */
int ferry_pl_cluster_parse(const char *text, const char *path, ferry_pl_cluster *out,
                           ferry_err *err);
int ferry_pl_inventory_parse(const char *text, const char *path, ferry_pl_inventory *out,
                             ferry_err *err);

void ferry_pl_cluster_free(ferry_pl_cluster *c);
void ferry_pl_inventory_free(ferry_pl_inventory *inv);

/* Index of a shard by name in a finished cluster, or -1. */
long ferry_pl_cluster_find(const ferry_pl_cluster *c, const char *name);

/* Writes "<tenant>/split<k>" into buf (FERRY_SLICE_ID_MAX bytes are always enough). */
void ferry_pl_slice_id(const ferry_pl_slice *s, char *buf, size_t bufsz);

/* ---- placement ---------------------------------------------------------------------------- */

typedef struct ferry_pl_opts {
    ferry_hash hash;
    unsigned rf;      /* replicas per slice, 1..shard count */
    double fill;      /* fill target in (0, 1]: a shard holds at most fill * capacity bytes */
    unsigned threads; /* scoring threads, at most 16; 0 or 1 = the calling thread only */
    /* true: a replica that fits on no shard below its fill target is an error (FERRY_EINVAL).
     * false: it goes to the shard with the most room left and is counted in overfilled. */
    bool strict;
    /* ferry_pl_rebalance only: NULL, or [new cluster's shard count] shards that a replica
     * needing a new home (evicted over the fill target or over its tenant's cap, or on a
     * shard that left) goes to first: the one least filled relative to its limit among those
     * that can take it, so they fill evenly (a fill spread being evened); else as without.
     * No replica moves to one for any other reason (borrowed) */
    const bool *prefer;
} ferry_pl_opts;

#define FERRY_PL_OPTS_DEFAULT {FERRY_HASH_SHA256, 1, 0.85, 1, true, NULL}

/* Validates opts against a cluster (rf <= shard count, fill in (0,1]). */
int ferry_pl_opts_check(const ferry_pl_opts *o, const ferry_pl_cluster *c, ferry_err *err);

#define FERRY_PL_NO_SHARD UINT32_MAX

typedef struct ferry_pl_layout {
    const ferry_pl_inventory *inv;   /* borrowed */
    const ferry_pl_cluster *cluster; /* borrowed */
    ferry_pl_opts opts;
    unsigned rf;
    /* replicas[i * rf + j]: shard index (into cluster) of replica slot j of slice i. Slots are
     * stable across a rebalance: a moved replica keeps its slot. */
    uint32_t *replicas;
    uint64_t *shard_bytes;    /* [cluster->n] bytes held, counting every replica */
    uint32_t *shard_replicas; /* [cluster->n] replicas held */
    size_t overfilled;        /* replicas placed beyond the fill target (non-strict only) */
    size_t spread_relaxed;    /* replicas that had to share a shard with more of their tenant's
                                 replicas than the anti-affinity cap allows */
    size_t zone_relaxed;      /* replicas placed in a zone that already held more of their
                                 slice's replicas than an even spread allows (no room elsewhere) */
    uint64_t scored;          /* slice/shard pairs scored to compute it: slices x shards for a
                                 fresh placement; about slices x (rf + shards added) for a
                                 rebalance that adds shards (docs/placement.md) */
} ferry_pl_layout;

/* A fresh layout for inv on cluster. */
int ferry_pl_place(const ferry_pl_inventory *inv, const ferry_pl_cluster *cluster,
                   const ferry_pl_opts *opts, ferry_pl_layout *out, ferry_err *err);

/* Incremental placement: the slices of inv without any replica in fixed (every one of their
 * rf slots FERRY_PL_NO_SHARD: new slices) are placed by the rules of ferry_pl_place, in its order
 * (biggest first, then tenant and split), around the replicas fixed holds for the other slices,
 * which stay where they are (a slice with only some of its replicas keeps them; its empty slots
 * stay FERRY_PL_NO_SHARD). fixed is [inv->n * opts->rf] shard indices into cluster. base_load
 * [cluster->n] (NULL: zeros) is what replicas of slices outside inv already hold on each shard,
 * so inv need only hold the slices that matter to the new ones: a new slice's home depends on
 * the shards, their loads (fill target) and its own tenant's replicas (spread), nothing else.
 * Scores only the new slices. Guarantee (tested): when fixed is what ferry_pl_place gives for the
 * other slices and the new slices come after all of them in its order (e.g. they hold 0 bytes
 * and are a tenant's highest splits), the result equals ferry_pl_place of everything. The layout's
 * shard_bytes include base_load; its shard_replicas count inv's replicas only. */
int ferry_pl_place_more(const ferry_pl_inventory *inv, const ferry_pl_cluster *cluster,
                        const ferry_pl_opts *opts, const uint32_t *fixed, const uint64_t *base_load,
                        ferry_pl_layout *out, ferry_err *err);

/* The layout reached from old (computed on old_cluster for the same inv) when the cluster
 * becomes new_cluster, moving as little as the rules allow (see docs/placement.md). */
int ferry_pl_rebalance(const ferry_pl_inventory *inv, const ferry_pl_cluster *old_cluster,
                       const ferry_pl_layout *old, const ferry_pl_cluster *new_cluster,
                       const ferry_pl_opts *opts, ferry_pl_layout *out, ferry_err *err);

void ferry_pl_layout_free(ferry_pl_layout *l);

/* Slice i's shards ordered by score (best first); writes rf indices into out. */
void ferry_pl_layout_ranked(const ferry_pl_layout *l, size_t i, uint32_t *out);

/* ---- zones: one more replica, and zone repair ------------------------------------------------
 * The rule placement applies to every replica (and the catalog's rebalance to clone, move-off
 * and repair steps): a slice's replicas are on distinct shards, and over the zones as evenly as
 * possible. A shard may take one more replica of a slice when it does not hold one and its
 * zone holds the fewest of the slice's replicas among the zones that still have a shard without
 * one (an eligible one, for these functions). */

/* The shard for one more replica of slice_id (bytes big), which is on held[0..n_held) (shard
 * indices into c; FERRY_PL_NO_SHARD entries are skipped): among the shards with eligible[s] (NULL:
 * every shard) that hold no replica, those the zone rule allows; among them those with room
 * below fill * capacity given load[] (NULL: every shard has room) when there are any; then the
 * best rendezvous score (ties: shard name). When the zone rule allows no shard with room, the
 * shards with room in the least crowded zone. FERRY_PL_NO_SHARD when no eligible shard is free. */
uint32_t ferry_pl_pick_replica(const ferry_pl_cluster *c, ferry_hash h, const char *slice_id,
                               uint64_t bytes, const uint32_t *held, size_t n_held,
                               const bool *eligible, const uint64_t *load, double fill);

/* Zone repair for a slice on held[0..n_held): true when one of its replicas can move to a free
 * eligible shard with room (load, fill as above) in a zone holding at least two fewer of the
 * slice's replicas than the replica's own zone, i.e. the spread is not as even as the shards
 * allow. Then *victim is the index into held of the replica to move (in the most crowded such
 * zone: the lowest score; ties: the later shard name) and *to its destination (as
 * ferry_pl_pick_replica chooses it among the shards of the least crowded zones). */
bool ferry_pl_zone_repair(const ferry_pl_cluster *c, ferry_hash h, const char *slice_id,
                          uint64_t bytes, const uint32_t *held, size_t n_held, const bool *eligible,
                          const uint64_t *load, double fill, size_t *victim, uint32_t *to);

/* Rule 4 of a rebalance ("the change flipped the slice's preference") for a slice with rf > 1 on
 * held[0..n_held), toward shards just added (gainer[s]): its replicas are taken weakest first
 * (lowest score; replicas on gainers never move again), and one moves from shard x to the
 * gainer d that outranks x for this slice (the best such d) among those that hold no replica,
 * have room (load, fill as above) and keep the slice's zone spread even, or no less even than it
 * was (eligible: the shards that may take replicas, for the zone levels; NULL: every shard).
 * True with *victim (index into held) and *to; false when no replica moves. Called again after
 * the move is applied, it finds the next, so a slice ends on the best of the old and added
 * shards as a fresh placement would put it where room and zones allow. */
bool ferry_pl_attract_replica(const ferry_pl_cluster *c, ferry_hash h, const char *slice_id,
                              uint64_t bytes, const uint32_t *held, size_t n_held,
                              const bool *gainer, const bool *eligible, const uint64_t *load,
                              double fill, size_t *victim, uint32_t *to);

/* ---- planning ----------------------------------------------------------------------------- */

/* One replica move: copy the slice from `from` to `to`, then drop it from `from`. */
typedef struct ferry_pl_move {
    uint32_t slice;   /* index into the inventory */
    const char *from; /* shard name (borrowed from the old cluster); NULL: a new replica, copy
                         it from any current one (only when rf grew) */
    const char *to;   /* shard name (borrowed from the new cluster); NULL: drop the replica
                         (only when rf shrank) */
    uint64_t bytes;
    bool to_existing;  /* the destination was already in the old cluster */
    bool from_removed; /* the source is not in the new cluster (it is being drained) */
} ferry_pl_move;

typedef struct ferry_pl_plan {
    size_t slices;       /* slices in the inventory */
    size_t moved;        /* moves (replica changes) */
    size_t moved_slices; /* distinct slices with at least one move */
    uint64_t moved_bytes;
    uint64_t total_bytes;          /* bytes of all replicas */
    size_t moved_between_existing; /* moves whose destination was already in the old cluster */
    ferry_pl_move *moves;          /* [moved], in execution order */
} ferry_pl_plan;

/* The moves that turn old into new (both over the same inventory). Moves off removed shards
 * come first, then bigger before smaller; a move whose destination has no room yet below its
 * fill target waits until moves out of that shard make room, unless moves wait on each other
 * in a cycle, in which case the first waiting one goes anyway. */
int ferry_pl_plan_build(const ferry_pl_layout *old, const ferry_pl_layout *new_layout,
                        ferry_pl_plan *out, ferry_err *err);
void ferry_pl_plan_free(ferry_pl_plan *p);

#endif

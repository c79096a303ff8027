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
#include "ferry/strmap.h"

typedef struct mv_plan_shard {
    const char *name;
    double weight;
    uint64_t capacity;
    bool in_old; /* serves routes now */
    bool in_new; /* active */
    bool added;  /* state NEW: the plan fills it as a shard just added, also once it serves
                  * routes (a rebalance cut short, resumed) */
    double old_weight; /* the weight the routing table was balanced for (the record's
                        * placed_weight: re-weighted since); 0: weight */
    bool prefer;       /* below the mean fill while a skew is evened: a slice that needs a new
                        * home goes to such a shard first (ferry_pl_opts.prefer) */
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
 * (an added shard, or one whose weight rose above the one the routing table was balanced for)
 * when a replica should move there. */
bool mv_zones_attract(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                      size_t n_held, size_t *victim, size_t *to);
/* The same rule the other way round for shards whose weight fell below the one the routing table
 * was balanced for: true with *victim (a replica on such a shard) and *to (a shard that now
 * outranks it for the slice, holds no replica of it, has room and keeps the zones even). */
bool mv_zones_shed(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                   size_t n_held, size_t *victim, size_t *to);
/* Evening a fill spread above the skew (mv_plan_shard.prefer set by the plan's fill target):
 * true with *victim (index into held: the replica on the shard furthest above fill * capacity)
 * and *to (a preferred shard, below the mean fill, that holds none of the slice, has room for it
 * under the target and the zone rule allows, as ferry_pl_pick_replica picks among them); false
 * when no skew is evened, no replica is on a shard above its target, or no such shard has room. */
bool mv_zones_even(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                   size_t n_held, size_t *victim, size_t *to);

/* ---- stored shard lists as indexes into one shard table (catalog_view.c) ---- */

/* An index into a shard table (mv_shards): at most MV_SHARDS_TABLE_MAX names. */
typedef uint16_t mv_shard;
#define MV_SHARDS_TABLE_MAX UINT16_MAX

/* The stored shard lists (a route's shards, a slice's placement: the comma-separated text of the
 * catalog's compact scans) as indexes into one table of names. The table starts with the shards
 * the caller gives ("known": the catalog's shard records, in the caller's order, so index k is the
 * caller's shard k); a name a list holds that is none of them (a shard without a record: a route
 * edited by hand, imported, or naming a shard whose record was deleted) is appended once in the
 * order met ("unknown", k >= n_known). No list loses a name: the consumers that cannot act on a
 * shard without a record refuse with its name, the others count it apart (docs/architecture.md,
 * "One domain model"). Each distinct text is taken apart once, with the catalog decoder's rule
 * (ferry_shard_set_parse_stored: blanks and empty items skipped; a list that breaks the rule is
 * refused with the decoder's message), and its indexes are stored once in idx: lists of the same
 * text share them, so a million slices on a few thousand distinct lists cost a few thousand
 * lists. */
typedef struct mv_text_map mv_text_map;

typedef struct mv_shards {
    const char **names;  /* [n]: known [0, n_known), then the unknown ones; copies, in pool */
    size_t n_known, n, cap;
    mv_shard *idx;       /* every distinct list's indexes; one is idx[at .. at + count) */
    size_t n_idx, cap_idx;
    struct mv_pool *pool; /* the names */
    mv_text_map *texts;   /* the texts met, to their lists; NULL once sealed */
    ferry_strmap by_name; /* each name (in names) to its index */
} mv_shards;

/* A table of the n_known names known[] (copied; a name twice is refused). Free with
 * mv_shards_free, also after a failure. */
int mv_shards_init(mv_shards *s, const char *const *known, size_t n_known, ferry_err *err);
/* The list text (NUL-terminated, as stored) as *at (into s->idx) and *count (0..FERRY_SHARDS_MAX);
 * the same text gives the same *at. FERRY_EINVAL (the decoder's message) for a list that breaks
 * the rule, FERRY_EUNSUPPORTED past MV_SHARDS_TABLE_MAX names. s->idx and s->names may move. */
int mv_shards_put(mv_shards *s, const char *text, uint32_t *at, uint8_t *count, ferry_err *err);
/* Frees what only mv_shards_put needs (the texts met); the table and the lists stay. */
void mv_shards_seal(mv_shards *s);
void mv_shards_free(mv_shards *s);
/* The index of name in the table (known or unknown), or -1. */
long mv_shards_find(const mv_shards *s, const char *name);
static inline bool mv_shard_known(const mv_shards *s, mv_shard k)
{
    return k < s->n_known;
}

/* ---- the catalog's tenants, slices and routes, compactly (catalog_view.c) ---- */

typedef struct mv_view_tenant {
    const char *name; /* pooled */
    uint32_t splits, rf; /* rf 0: the cluster's */
    int64_t version;
} mv_view_tenant;

/* One slice key: its slice record, its route, or both. The route's shards and the slice's
 * placement are lists of the view's shard table: view->shards.idx[route .. route + n_route)
 * (mv_view_route) and [placement .. placement + n_placement). */
typedef struct mv_view_slice {
    const char *tenant; /* pooled */
    uint32_t split;
    uint32_t route;      /* into shards.idx; 0 without a route record */
    uint64_t bytes, rows;
    int64_t version;       /* the slice record's; -1: none */
    int64_t route_version; /* -1: none */
    uint32_t placement;    /* into shards.idx; 0 without a slice record */
    uint8_t n_route, n_placement;
    bool has_slice; /* a slice record (bytes, rows, placement) */
    bool has_route; /* a route record (n_route may still be 0: a route of no shard) */
} mv_view_slice;

typedef struct mv_view {
    mv_view_tenant *tenants; /* sorted by name (bytewise) */
    size_t n_tenants;
    mv_view_slice *slices; /* sorted by tenant (bytewise), then split */
    size_t n_slices;
    mv_shards shards; /* the shard table the routes and placements index, sealed */
    struct mv_pool *pool; /* the tenants' names, each once */
} mv_view;

struct ferry_catalog;

/* Reads every tenant, slice and route through the catalog's compact scans
 * (ferry/catalog_scan.h), each route and placement as indexes into a shard table that starts with
 * shards[0..n_shards) (the caller's, in its order; see mv_shards for names outside them). A list
 * that breaks the decoder's rule fails the read with the slice named. Free with mv_view_free, also
 * after a failure. */
int mv_view_read(struct ferry_catalog *cat, const char *const *shards, size_t n_shards, mv_view *v,
                 ferry_err *err);
/* The same view from every record decoded (ferry_catalog_each), the way it was read before the
 * compact scans: the reference the tests and the scale benchmark compare mv_view_read with. */
int mv_view_read_records(struct ferry_catalog *cat, const char *const *shards, size_t n_shards,
                         mv_view *v, ferry_err *err);
void mv_view_free(mv_view *v);
/* The tenant named name, or NULL; the index of slice (tenant, split), or -1. */
const mv_view_tenant *mv_view_tenant_find(const mv_view *v, const char *name);
long mv_view_slice_find(const mv_view *v, const char *tenant, uint32_t split);
/* A slice's route and placement: n_route / n_placement indexes into v->shards.names. */
static inline const mv_shard *mv_view_route(const mv_view *v, const mv_view_slice *s)
{
    return v->shards.idx + s->route;
}
static inline const mv_shard *mv_view_placement(const mv_view *v, const mv_view_slice *s)
{
    return v->shards.idx + s->placement;
}
/* ferry_rebalance_plan_compute with the view from mv_view_read_records: the plan as it was
 * computed before the compact scans, for the tests and the scale benchmark to compare. */
struct ferry_rebalance_plan;
int mv_plan_compute_records(struct ferry_catalog *cat, struct ferry_rebalance_plan *out,
                            ferry_err *err);
/* The view's order: tenant bytewise, then split. */
int mv_slice_key_cmp(const char *ta, uint32_t sa, const char *tb, uint32_t sb);

#endif

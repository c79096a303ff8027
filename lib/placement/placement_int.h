/* Private pieces of the placement module shared between its files: the scorer (hashes a slice
 * against every shard and keeps the best few), and small helpers. */
#ifndef FERRY_PLACEMENT_INT_H
#define FERRY_PLACEMENT_INT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "ferry/placement.h"

/* One scored shard for one slice. Rank order: higher score first, then lower shard index
 * (shards are sorted by name, so that is "ties broken by shard name"). */
typedef struct pl_cand {
    double score;
    uint32_t shard;
} pl_cand;

static inline bool pl_ranks_before(double sa, uint32_t a, double sb, uint32_t b)
{
    return sa > sb || (sa == sb && a < b);
}

/* 16 key bytes as two little-endian words (bytes 0-7, bytes 8-15). */
typedef struct block16 {
    uint64_t lo, hi;
} block16;

/* Everything about a cluster the scorer needs, prepared once. Shards with the same weight form
 * a group: inside a group the score only grows with the hash, so the best few of a group can
 * be picked by hash value and only those need a logarithm. */
typedef struct pl_scorer {
    ferry_hash hash;
    size_t n;
    const char **names;
    uint8_t *name_len;
    char (*padded)[FERRY_NAME_MAX]; /* names, zero-padded: copied with one fixed memcpy */
    double *weight;
    uint32_t *group; /* [n] group of each shard */
    size_t n_groups;
    uint32_t *group_size;  /* [n_groups] shards in the group */
    uint32_t *group_start; /* [n_groups] sum of the sizes of the groups before it */
    uint32_t *members;     /* [n] shards by group, from group_start[g]; index order inside */
    block16 *name_top;     /* [n] xxh3: a name of <= 16 bytes as the end of a block */
} pl_scorer;

#define PL_KEY_MAX (FERRY_SLICE_ID_MAX + FERRY_NAME_MAX + 8)
/* The bytes of a padded name copied for a name this short (the common case), so the hot loop
 * copies what it did when names were at most 64 bytes: fixed-size copies compile to a few
 * moves. Enough for the SHA-256 fast path whatever the name: it takes keys of at most 55 bytes,
 * and 64 bytes from the prefix's end reach past the block's length field. */
#define PL_NAME_COPY_SHORT 64
_Static_assert(PL_NAME_COPY_SHORT <= FERRY_NAME_MAX, "padded names hold the short copy");

/* Per-thread working memory of a scorer. */
typedef struct pl_scratch {
    ferry_hash hash;
    /* 16 zero bytes, then the key: a 16-byte read that ends inside the key stays in bounds */
    char buf[16 + PL_KEY_MAX];
    char *key;         /* buf + 16 */
    size_t prefix_len; /* bytes of "<slice id>:" at the start of key */
    uint64_t xxh3_prefix_mix[4]; /* xxh3: the 16-byte blocks wholly inside the prefix, mixed */
    block16 prefix_tail;         /* xxh3: the prefix's last 16 bytes */
    /* sha256: the prefix, then room for a zero-padded name: the block is finished per shard */
    unsigned char sha_block[64 + PL_NAME_COPY_SHORT];
    size_t m;          /* candidates kept per slice */
    pl_cand *gtop;     /* [n_groups * (m + 1)] */
    uint64_t *gh;      /* [n_groups * (m + 1)] hashes of the group's best so far */
    size_t *glen;      /* [n_groups] */
    pl_cand *merge;    /* [max(n, n_groups * m)] */
    /* [n] each, laid out like members: the current slice's hash on every shard, and the
     * shards (and their hashes) that reached their group's cut */
    uint64_t *hashes, *surv_hash;
    uint32_t *surv;
    uint64_t *group_cut; /* [n_groups] see pl_scratch_init */
} pl_scratch;

int pl_scorer_init(pl_scorer *s, const ferry_pl_cluster *c, ferry_hash hash, ferry_err *err);
void pl_scorer_free(pl_scorer *s);
int pl_scratch_init(pl_scratch *x, const pl_scorer *s, size_t m, ferry_err *err);
void pl_scratch_free(pl_scratch *x);

/* Writes "<tenant>/split<k>:" into x->key. */
void pl_set_slice(pl_scratch *x, const ferry_pl_slice *sl);
/* ferry_hash64 of "<current slice id>:<name of shard i>", computed faster from what
 * pl_set_slice prepared (the hot loop's hash; equal to ferry_hash64 for every key). */
uint64_t pl_pair_hash(const pl_scorer *s, pl_scratch *x, uint32_t i);
/* Score of the current slice (pl_set_slice) on shard i, with the given weight. */
double pl_pair_score(const pl_scorer *s, pl_scratch *x, uint32_t i, double weight);
/* The best min(m, n) shards of the current slice, in rank order, into out. */
void pl_top(const pl_scorer *s, pl_scratch *x, pl_cand *out);
/* All n shards of the current slice in rank order, into out[n]. */
void pl_rank_all(const pl_scorer *s, pl_scratch *x, pl_cand *out);

/* Work over all slices on several threads. Workers take PL_CHUNK slices at a time from a
 * shared counter rather than a fixed share each: on a shared machine one thread is often
 * descheduled for a while, and a fixed split would leave the others idle at the end. Each
 * slice's result is independent of who computes it, so the output is the same for any thread
 * count and timing. */
#define PL_CHUNK 2048
#define PL_THREADS_MAX 16 /* each job is on the starter's stack, an error message (1 KiB) in it */

/* The threads worth starting for n_slices (opts.threads clamped to 1..PL_THREADS_MAX, 1 for
 * few slices). */
unsigned pl_threads_for(unsigned threads, size_t n_slices);

/* The next chunk of [0, n) from the shared counter *next into [*begin, *end); false when none
 * is left. */
static inline bool pl_chunk_take(atomic_size_t *next, size_t n, size_t *begin, size_t *end)
{
    size_t b = atomic_fetch_add(next, PL_CHUNK);
    if (b >= n)
        return false;
    *begin = b;
    *end = b + PL_CHUNK < n ? b + PL_CHUNK : n;
    return true;
}

/* Runs fn on jobs[0..threads) (each job_size bytes), jobs[0] on the calling thread and the
 * others on threads of their own; a thread that cannot be created is left out, so fn must take
 * its work from a shared counter (its share then goes to the others). Returns how many jobs
 * ran, the first ones (at least jobs[0]); 1 <= threads <= PL_THREADS_MAX. */
unsigned pl_run_threads(unsigned threads, void *(*fn)(void *), void *jobs, size_t job_size);

/* The shards of the top-m candidates of every slice of inv, best first, into
 * out[inv->n * m], using up to `threads` threads. m <= PL_TOP_MAX. */
#define PL_TOP_MAX (64 + 3)
int pl_top_all(const pl_scorer *s, const ferry_pl_inventory *inv, size_t m, unsigned threads,
               uint32_t *out, ferry_err *err);

/* ferry_pl_rebalance, which scores a slice's candidates only when one of its replicas needs a
 * new home (score_all false); score_all true first scores every slice on every shard, as a
 * fresh placement does: the full computation, which tests and the benchmark compare it with
 * (the layouts are identical; only ferry_pl_layout.scored differs). */
int pl_rebalance(const ferry_pl_inventory *inv, const ferry_pl_cluster *old_cluster,
                 const ferry_pl_layout *old, const ferry_pl_cluster *new_cluster,
                 const ferry_pl_opts *opts, bool score_all, ferry_pl_layout *out, ferry_err *err);

/* How a slice's replicas spread over zones (lib/placement/zones.c). */
#define PL_RF_MAX 64
typedef struct pl_zones {
    size_t n; /* zones holding at least one replica */
    uint32_t zone[PL_RF_MAX], count[PL_RF_MAX];
    /* the fewest replicas among the zones that still have a free shard (eligible, holding no
     * replica); UINT32_MAX when no shard is free */
    uint32_t level;
} pl_zones;

/* The zones of held[0..n_held) (FERRY_PL_NO_SHARD skipped). eligible: NULL = every shard. */
void pl_zones_of(const ferry_pl_cluster *c, const uint32_t *held, size_t n_held,
                 const bool *eligible, pl_zones *z);
/* Replicas of the slice in zone `zone`. */
uint32_t pl_zone_count(const pl_zones *z, uint32_t zone);
/* How far a slice's replicas are from an even zone spread: the most crowded zone's count minus
 * the fewest among zones with a free shard (0 when none is free). Even means at most 1. */
uint32_t pl_zones_unevenness(const pl_zones *z);

#endif

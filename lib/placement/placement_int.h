/* Private pieces of the placement module shared between its files: the scorer (hashes a slice
 * against every shard and keeps the best few), and small helpers. */
#ifndef FERRY_PLACEMENT_INT_H
#define FERRY_PLACEMENT_INT_H

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

/* Everything about a cluster the scorer needs, prepared once. Shards with the same weight form
 * a group: inside a group the score only grows with the hash, so the best few of a group can
 * be picked by hash value and only those need a logarithm. */
typedef struct pl_scorer {
    ferry_hash hash;
    size_t n;
    const char **names;
    uint8_t *name_len;
    char (*padded)[FERRY_SHARD_NAME_MAX]; /* names, zero-padded: copied with one fixed memcpy */
    double *weight;
    uint32_t *group; /* [n] group of each shard */
    size_t n_groups;
} pl_scorer;

/* Per-thread working memory of a scorer. */
typedef struct pl_scratch {
    char key[FERRY_SLICE_ID_MAX + FERRY_SHARD_NAME_MAX + 8];
    size_t prefix_len; /* bytes of "<slice id>:" at the start of key */
    size_t m;          /* candidates kept per slice */
    pl_cand *gtop;     /* [n_groups * (m + 1)] */
    uint64_t *gh;      /* [n_groups * (m + 1)] hashes of the group's best so far */
    size_t *glen;      /* [n_groups] */
    pl_cand *merge;    /* [max(n, n_groups * m)] */
} pl_scratch;

int pl_scorer_init(pl_scorer *s, const ferry_cluster *c, ferry_hash hash, ferry_err *err);
void pl_scorer_free(pl_scorer *s);
int pl_scratch_init(pl_scratch *x, const pl_scorer *s, size_t m, ferry_err *err);
void pl_scratch_free(pl_scratch *x);

/* Writes "<tenant>/split<k>:" into x->key. */
void pl_set_slice(pl_scratch *x, const ferry_slice *sl);
/* Score of the current slice (pl_set_slice) on shard i, with the given weight. */
double pl_pair_score(const pl_scorer *s, pl_scratch *x, uint32_t i, double weight);
/* The best min(m, n) shards of the current slice, in rank order, into out. */
void pl_top(const pl_scorer *s, pl_scratch *x, pl_cand *out);
/* All n shards of the current slice in rank order, into out[n]. */
void pl_rank_all(const pl_scorer *s, pl_scratch *x, pl_cand *out);

/* The shards of the top-m candidates of every slice of inv, best first, into
 * out[inv->n * m], using up to `threads` threads. m <= PL_TOP_MAX. */
#define PL_TOP_MAX (64 + 3)
int pl_top_all(const pl_scorer *s, const ferry_inventory *inv, size_t m, unsigned threads,
               uint32_t *out, ferry_err *err);

#endif

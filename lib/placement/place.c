/* Capacity-aware placement: a fresh layout (ferry_pl_place) and the layout reached from an old one
 * when the cluster changes (ferry_pl_rebalance). docs/placement.md states the rules; in short:
 *  - a replica goes to the best-scoring shard that does not hold the slice yet, has room below
 *    the fill target, and holds fewer of the tenant's replicas than its cap (below); only
 *    when no such shard exists is the anti-affinity cap relaxed;
 *  - slices are placed biggest first (then by tenant and split), so the result does not depend
 *    on input order and large slices get the first pick of room;
 *  - a rebalance keeps every replica where it is unless (a) its shard left, (b) its shard is
 *    over the fill target, (b') its shard is over the tenant's cap and a shard that was added
 *    or gained weight can take it, or (c) the cluster change flipped the slice's
 *    preference between its shard and another one (a shard was added or gained weight, or its
 *    own shard lost weight). Forced moves prefer shards that were added or gained weight.
 * The anti-affinity cap of a tenant on a shard is 1 while the tenant's k * rf replicas fit on
 * distinct shards, else ceil(k * rf * weight / total weight). */
#include "placement/placement_int.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

#define EXTRA_CANDIDATES 3 /* candidates kept per slice beyond rf */
/* ... and beyond that with zones, where the zone rule skips candidates (the result is the same
 * with any number: choose() ranks every shard when the candidates run out) */
#define EXTRA_ZONE_CANDIDATES 6

/* A tenant with at most this many replicas is counted by scanning its replica slots (slices
 * are sorted by tenant, so they are adjacent in pstate.rep: one or two cache lines); bigger
 * tenants keep their counts in the tcount_map. Both give the same counts. */
#define TC_SCAN_MAX 64

/* How many slices ahead the greedy pass prefetches what it will touch: slices are visited
 * biggest first, i.e. in random memory order, and each visit otherwise waits on 3-4 cache
 * misses in a row (slice, tenant, replica slots). */
#define PREFETCH_AHEAD 16

/* (tenant, shard) -> count of the tenant's replicas on the shard, for tenants with more than
 * TC_SCAN_MAX replicas. */
typedef struct tcount_map {
    uint64_t *keys; /* key + 1; 0 = empty */
    uint32_t *vals;
    size_t mask;
} tcount_map;

typedef struct pstate {
    const ferry_pl_inventory *inv;
    const ferry_pl_cluster *cl;
    const ferry_pl_opts *o;
    size_t n; /* shards */
    unsigned rf;
    size_t m; /* candidates per slice */
    pl_scorer sc;
    pl_scratch x;
    uint32_t *cands; /* [inv->n * m] each slice's best m shards, best first */
    /* NULL: every slice's candidates were scored up front (a fresh placement scores every
     * pair anyway, on all threads). Else [inv->n]: whether cands holds slice i's yet; a
     * rebalance or an incremental placement scores a slice's candidates only when one of its
     * replicas needs a home, so adding a shard costs O(slices) scores, not O(slices x shards). */
    uint8_t *cands_ready;
    uint64_t scored; /* slice/shard pairs scored (ferry_pl_layout.scored) */
    pl_cand *all;    /* [n] */
    uint32_t *rep;   /* [inv->n * rf] */
    uint64_t *load, *limit;
    uint32_t *nrep;
    bool *gainer;
    double total_weight;
    tcount_map tc;
    uint32_t *order; /* slices, biggest first */
    size_t overfilled, relaxed, zone_relaxed;
} pstate;

static int tc_init(tcount_map *t, size_t entries)
{
    size_t cap = 16;
    while (cap < entries * 2)
        cap <<= 1;
    t->keys = calloc(cap, sizeof *t->keys);
    t->vals = calloc(cap, sizeof *t->vals);
    t->mask = cap - 1;
    return t->keys && t->vals ? FERRY_OK : FERRY_ENOMEM;
}

static uint32_t *tc_slot(tcount_map *t, uint32_t tenant, uint32_t shard)
{
    uint64_t key = (((uint64_t)tenant << 32) | shard) + 1;
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 17) & t->mask;
    while (t->keys[h] && t->keys[h] != key)
        h = (h + 1) & t->mask;
    if (!t->keys[h])
        t->keys[h] = key;
    return &t->vals[h];
}

static bool counted_in_map(const pstate *st, uint32_t tenant)
{
    return (size_t)st->inv->tenant_splits[tenant] * st->rf > TC_SCAN_MAX;
}

static uint32_t tenant_count(pstate *st, uint32_t tenant, uint32_t shard)
{
    uint32_t k = st->inv->tenant_splits[tenant];
    if (k < 2)
        return 0; /* a lone slice's replicas are on distinct shards anyway */
    if (counted_in_map(st, tenant))
        return *tc_slot(&st->tc, tenant, shard);
    const uint32_t *r = st->rep + (size_t)st->inv->tenant_first[tenant] * st->rf;
    size_t nr = (size_t)k * st->rf;
    uint32_t c = 0;
    for (size_t j = 0; j < nr; j++)
        c += r[j] == shard;
    return c;
}

/* How many of the tenant's replicas shard s may hold: 1 while the tenant's replicas fit on
 * distinct shards, else the shard's weight share of them, rounded up. */
static uint32_t tenant_cap(const pstate *st, uint32_t tenant, uint32_t s)
{
    uint64_t want = (uint64_t)st->inv->tenant_splits[tenant] * st->rf;
    if (want <= st->n)
        return 1;
    double share = (double)want * st->cl->shards[s].weight / st->total_weight;
    return (uint32_t)ceil(share * (1 - 1e-12));
}

static bool fits(const pstate *st, uint32_t s, uint64_t bytes)
{
    return st->load[s] <= st->limit[s] && bytes <= st->limit[s] - st->load[s];
}

static bool holding(const pstate *st, size_t i, uint32_t s)
{
    for (unsigned j = 0; j < st->rf; j++)
        if (st->rep[i * st->rf + j] == s)
            return true;
    return false;
}

static void assign(pstate *st, size_t i, unsigned slot, uint32_t s)
{
    const ferry_pl_slice *sl = &st->inv->slices[i];
    st->rep[i * st->rf + slot] = s;
    st->load[s] += sl->bytes;
    st->nrep[s]++;
    if (counted_in_map(st, sl->tenant_index))
        (*tc_slot(&st->tc, sl->tenant_index, s))++;
}

static void unassign(pstate *st, size_t i, unsigned slot)
{
    const ferry_pl_slice *sl = &st->inv->slices[i];
    uint32_t s = st->rep[i * st->rf + slot];
    st->rep[i * st->rf + slot] = FERRY_PL_NO_SHARD;
    st->load[s] -= sl->bytes;
    st->nrep[s]--;
    if (counted_in_map(st, sl->tenant_index))
        (*tc_slot(&st->tc, sl->tenant_index, s))--;
}

/* order[] = slice indexes by size, biggest first, equal sizes by index. An LSD radix sort
 * (stable, so equal sizes keep index order): a comparison sort of 10^6 slices took longer
 * than the rest of the greedy pass. Byte positions where every size agrees are skipped. */
static int sort_by_size(const ferry_pl_inventory *inv, uint32_t *order)
{
    size_t n = inv->n;
    uint64_t *key = malloc((n ? n : 1) * sizeof *key), *key2 = malloc((n ? n : 1) * sizeof *key2);
    uint32_t *idx2 = malloc((n ? n : 1) * sizeof *idx2);
    size_t(*hist)[256] = calloc(8, sizeof *hist);
    int rc = FERRY_OK;
    if (!key || !key2 || !idx2 || !hist) {
        rc = FERRY_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        key[i] = ~inv->slices[i].bytes; /* ascending ~bytes = descending bytes */
        order[i] = (uint32_t)i;
        for (int d = 0; d < 8; d++)
            hist[d][(key[i] >> (8 * d)) & 0xff]++;
    }
    uint64_t *ka = key, *kb = key2;
    uint32_t *ia = order, *ib = idx2;
    for (int d = 0; d < 8; d++) {
        if (n == 0 || hist[d][(ka[0] >> (8 * d)) & 0xff] == n)
            continue; /* every key has the same byte here */
        size_t pos[256], sum = 0;
        for (int b = 0; b < 256; b++) {
            pos[b] = sum;
            sum += hist[d][b];
        }
        for (size_t i = 0; i < n; i++) {
            size_t p = pos[(ka[i] >> (8 * d)) & 0xff]++;
            kb[p] = ka[i];
            ib[p] = ia[i];
        }
        uint64_t *kt = ka;
        ka = kb;
        kb = kt;
        uint32_t *it = ia;
        ia = ib;
        ib = it;
    }
    if (ia != order)
        memcpy(order, ia, n * sizeof *order);
out:
    free(key);
    free(key2);
    free(idx2);
    free(hist);
    return rc;
}

static int state_init(pstate *st, const ferry_pl_inventory *inv, const ferry_pl_cluster *cl,
                      const ferry_pl_opts *o, bool score_all, ferry_err *err)
{
    memset(st, 0, sizeof *st);
    st->inv = inv;
    st->cl = cl;
    st->o = o;
    st->n = cl->n;
    st->rf = o->rf;
    size_t extra = EXTRA_CANDIDATES + (cl->zoned && o->rf > 1 ? EXTRA_ZONE_CANDIDATES : 0);
    st->m = o->rf + extra < cl->n ? o->rf + extra : cl->n;
    if (st->m > PL_TOP_MAX)
        st->m = PL_TOP_MAX;
    int rc = ferry_pl_opts_check(o, cl, err);
    if (rc)
        return rc;
    rc = pl_scorer_init(&st->sc, cl, o->hash, err);
    if (!rc)
        rc = pl_scratch_init(&st->x, &st->sc, st->m, err);
    if (rc)
        return rc;
    size_t ns = inv->n ? inv->n : 1;
    st->cands = malloc(ns * st->m * sizeof *st->cands);
    st->all = malloc(st->n * sizeof *st->all);
    st->rep = malloc(ns * st->rf * sizeof *st->rep);
    st->load = calloc(st->n, sizeof *st->load);
    st->limit = calloc(st->n, sizeof *st->limit);
    st->nrep = calloc(st->n, sizeof *st->nrep);
    st->gainer = calloc(st->n, sizeof *st->gainer);
    st->order = malloc(ns * sizeof *st->order);
    size_t tracked = 0;
    for (size_t t = 0; t < inv->n_tenants; t++)
        if (counted_in_map(st, (uint32_t)t))
            tracked += inv->tenant_splits[t];
    if (!st->cands || !st->all || !st->rep || !st->load || !st->limit || !st->nrep ||
        !st->gainer || !st->order || tc_init(&st->tc, tracked * st->rf + 1) ||
        sort_by_size(inv, st->order))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < inv->n * st->rf; i++)
        st->rep[i] = FERRY_PL_NO_SHARD;
    for (size_t s = 0; s < st->n; s++) {
        uint64_t cap = cl->shards[s].capacity;
        st->total_weight += cl->shards[s].weight;
        st->limit[s] = cap ? (uint64_t)floorl((long double)cap * o->fill) : UINT64_MAX;
    }
    if (!score_all) {
        st->cands_ready = calloc(ns, 1);
        return st->cands_ready ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    st->scored += (uint64_t)inv->n * st->n;
    return pl_top_all(&st->sc, inv, st->m, o->threads, st->cands, err);
}

/* Slice i's best m shards, scored now if they were not yet. */
static const uint32_t *slice_cands(pstate *st, size_t i)
{
    uint32_t *c = st->cands + i * st->m;
    if (st->cands_ready && !st->cands_ready[i]) {
        pl_cand top[PL_TOP_MAX];
        pl_set_slice(&st->x, &st->inv->slices[i]);
        pl_top(&st->sc, &st->x, top);
        for (size_t k = 0; k < st->m; k++)
            c[k] = top[k].shard;
        st->cands_ready[i] = 1;
        st->scored += st->n;
    }
    return c;
}

/* The score of the slice last given to pl_set_slice(&st->x, ...) on shard s, counted. */
static double pair_score(pstate *st, uint32_t s, double weight)
{
    st->scored++;
    return pl_pair_score(&st->sc, &st->x, s, weight);
}

static void state_free(pstate *st)
{
    pl_scratch_free(&st->x);
    pl_scorer_free(&st->sc);
    free(st->cands);
    free(st->cands_ready);
    free(st->all);
    free(st->rep);
    free(st->load);
    free(st->limit);
    free(st->nrep);
    free(st->gainer);
    free(st->order);
    free(st->tc.keys);
    free(st->tc.vals);
    memset(st, 0, sizeof *st);
}

/* Cache hints for the greedy pass at step k (no effect on results): the record, candidates and
 * replica slots of the slice PREFETCH_AHEAD steps on; the tenant arrays of the slice half as
 * far on (its record has arrived by then); the tenant's replica slots a quarter as far on. */
static inline void prefetch_ahead(const pstate *st, size_t k)
{
    const ferry_pl_inventory *inv = st->inv;
    if (k + PREFETCH_AHEAD < inv->n) {
        uint32_t i = st->order[k + PREFETCH_AHEAD];
        __builtin_prefetch(&inv->slices[i]);
        __builtin_prefetch(&st->cands[(size_t)i * st->m]);
        __builtin_prefetch(&st->rep[(size_t)i * st->rf], 1);
    }
    if (k + PREFETCH_AHEAD / 2 < inv->n) {
        uint32_t t = inv->slices[st->order[k + PREFETCH_AHEAD / 2]].tenant_index;
        __builtin_prefetch(&inv->tenant_splits[t]);
        __builtin_prefetch(&inv->tenant_first[t]);
    }
    if (k + PREFETCH_AHEAD / 4 < inv->n) {
        uint32_t t = inv->slices[st->order[k + PREFETCH_AHEAD / 4]].tenant_index;
        __builtin_prefetch(&st->rep[(size_t)inv->tenant_first[t] * st->rf], 1);
    }
}

static int no_room(pstate *st, size_t i, ferry_err *err)
{
    const ferry_pl_slice *sl = &st->inv->slices[i];
    long double need = 0, room = 0;
    for (size_t k = 0; k < st->inv->n; k++)
        need += (long double)st->inv->slices[k].bytes * st->rf;
    for (size_t s = 0; s < st->n; s++)
        room += st->limit[s] == UINT64_MAX ? 0 : (long double)st->limit[s];
    char id[FERRY_SLICE_ID_MAX], b1[32], b2[32], b3[32];
    ferry_pl_slice_id(sl, id, sizeof id);
    return ferry_err_set(err, FERRY_EINVAL,
                         "%s: no shard has room for %s (%s) below the fill target %.2f: all "
                         "replicas need %s, the shards allow %s; add capacity or raise --fill",
                         st->cl->path, id, ferry_fmt_bytes(sl->bytes, b1, sizeof b1), st->o->fill,
                         ferry_fmt_bytes((uint64_t)need, b2, sizeof b2),
                         ferry_fmt_bytes((uint64_t)room, b3, sizeof b3));
}

/* Replicas of slice i in shard s's zone, and whether the zone rule lets s take one more: its
 * zone holds the fewest of the slice's replicas among zones with a free shard. Without zones
 * every shard is a zone of its own and the rule is "not holding", checked anyway. */
static uint32_t zone_count(const pstate *st, const pl_zones *z, uint32_t s)
{
    return st->cl->zoned ? pl_zone_count(z, st->cl->shards[s].zone_id) : 0;
}

static void slice_zones(const pstate *st, size_t i, pl_zones *z)
{
    if (st->cl->zoned)
        pl_zones_of(st->cl, st->rep + i * st->rf, st->rf, NULL, z);
    else
        z->n = 0, z->level = 0;
}

/* The shard for one more replica of slice i (see the file comment). */
static int choose(pstate *st, size_t i, bool prefer_gainers, uint32_t *out, ferry_err *err)
{
    const ferry_pl_slice *sl = &st->inv->slices[i];
    uint32_t t = sl->tenant_index;
    const uint32_t *c = slice_cands(st, i);
    pl_zones z;
    slice_zones(st, i, &z);
    if (prefer_gainers && st->o->prefer) {
        /* the caller's preferred shards (a fill spread being evened) fill like water: the one
         * least filled, relative to its limit, that can take the replica */
        uint32_t best = FERRY_PL_NO_SHARD;
        long double best_fill = 0;
        for (uint32_t s = 0; s < st->n; s++) {
            if (!st->o->prefer[s] || holding(st, i, s) || zone_count(st, &z, s) != z.level ||
                !fits(st, s, sl->bytes) || tenant_count(st, t, s) >= tenant_cap(st, t, s))
                continue;
            long double f = st->limit[s] == UINT64_MAX
                                ? 0
                                : (long double)st->load[s] / (long double)(st->limit[s] + 1);
            if (best == FERRY_PL_NO_SHARD || f < best_fill) {
                best = s;
                best_fill = f;
            }
        }
        if (best != FERRY_PL_NO_SHARD) {
            *out = best;
            return FERRY_OK;
        }
    }
    for (size_t j = 0; j < st->m; j++) {
        uint32_t s = c[j];
        if ((!prefer_gainers || st->gainer[s]) && !holding(st, i, s) &&
            zone_count(st, &z, s) == z.level && fits(st, s, sl->bytes) &&
            tenant_count(st, t, s) < tenant_cap(st, t, s)) {
            *out = s;
            return FERRY_OK;
        }
    }
    /* Not among the best few: rank every shard. */
    pl_set_slice(&st->x, sl);
    pl_rank_all(&st->sc, &st->x, st->all);
    st->scored += st->n;
    for (int pass = prefer_gainers ? 0 : 1; pass < 2; pass++)
        for (size_t j = 0; j < st->n; j++) {
            uint32_t s = st->all[j].shard;
            if ((pass == 1 || st->gainer[s]) && !holding(st, i, s) &&
                zone_count(st, &z, s) == z.level && fits(st, s, sl->bytes) &&
                tenant_count(st, t, s) < tenant_cap(st, t, s)) {
                *out = s;
                return FERRY_OK;
            }
        }
    /* Relax: the least crowded zone first (zones are about surviving an outage), then the
     * fewest of the tenant's replicas (anti-affinity), then the best score. */
    uint32_t best = FERRY_PL_NO_SHARD, best_count = 0, best_zc = 0;
    for (size_t j = 0; j < st->n; j++) {
        uint32_t s = st->all[j].shard;
        if (holding(st, i, s) || !fits(st, s, sl->bytes))
            continue;
        uint32_t cnt = tenant_count(st, t, s), zc = zone_count(st, &z, s);
        if (best == FERRY_PL_NO_SHARD || zc < best_zc || (zc == best_zc && cnt < best_count)) {
            best = s;
            best_count = cnt;
            best_zc = zc;
        }
    }
    if (best != FERRY_PL_NO_SHARD) {
        if (best_count >= tenant_cap(st, t, best))
            st->relaxed++;
        if (best_zc != z.level)
            st->zone_relaxed++;
        *out = best;
        return FERRY_OK;
    }
    if (st->o->strict)
        return no_room(st, i, err);
    /* Over the fill target: the shard with the most room left (or the least overshoot), in
     * the least crowded zone. */
    long double best_room = 0;
    for (size_t j = 0; j < st->n; j++) {
        uint32_t s = st->all[j].shard;
        if (holding(st, i, s))
            continue;
        long double room = (long double)st->limit[s] - (long double)st->load[s];
        uint32_t zc = zone_count(st, &z, s);
        if (best == FERRY_PL_NO_SHARD || zc < best_zc || (zc == best_zc && room > best_room)) {
            best = s;
            best_room = room;
            best_zc = zc;
        }
    }
    if (best_zc != z.level)
        st->zone_relaxed++;
    st->overfilled++;
    *out = best;
    return FERRY_OK;
}

/* Whether moving slice i's replica from shard x to shard d keeps its zone spread even (or no
 * less even than it was). */
static bool zone_move_ok(const pstate *st, size_t i, uint32_t x, uint32_t d)
{
    if (!st->cl->zoned || st->cl->shards[x].zone_id == st->cl->shards[d].zone_id)
        return true;
    uint32_t held[PL_RF_MAX];
    for (unsigned j = 0; j < st->rf; j++) {
        held[j] = st->rep[i * st->rf + j];
        if (held[j] == x)
            held[j] = d;
    }
    pl_zones before, after;
    slice_zones(st, i, &before);
    pl_zones_of(st->cl, held, st->rf, NULL, &after);
    uint32_t was = pl_zones_unevenness(&before), now = pl_zones_unevenness(&after);
    return now <= (was > 1 ? was : 1);
}

static void state_to_layout(pstate *st, const ferry_pl_inventory *inv, const ferry_pl_cluster *cl,
                            const ferry_pl_opts *o, ferry_pl_layout *out)
{
    out->inv = inv;
    out->cluster = cl;
    out->opts = *o;
    out->rf = st->rf;
    out->replicas = st->rep;
    out->shard_bytes = st->load;
    out->shard_replicas = st->nrep;
    out->overfilled = st->overfilled;
    out->spread_relaxed = st->relaxed;
    out->zone_relaxed = st->zone_relaxed;
    out->scored = st->scored;
    st->rep = NULL;
    st->load = NULL;
    st->nrep = NULL;
}

int ferry_pl_opts_check(const ferry_pl_opts *o, const ferry_pl_cluster *c, ferry_err *err)
{
    if (!(o->fill > 0 && o->fill <= 1))
        return ferry_err_set(err, FERRY_EINVAL, "fill target %g must be in (0, 1]", o->fill);
    if (o->rf < 1)
        return ferry_err_set(err, FERRY_EINVAL, "replication factor must be at least 1");
    if (o->rf > c->n)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: replication factor %u is larger than the %zu shard%s listed",
                             c->path, o->rf, c->n, c->n == 1 ? "" : "s");
    if (o->rf > 64)
        return ferry_err_set(err, FERRY_EINVAL, "replication factor %u is above the limit 64",
                             o->rf);
    if (o->hash != FERRY_HASH_SHA256 && o->hash != FERRY_HASH_XXH3)
        return ferry_err_set(err, FERRY_EINVAL, "unknown hash");
    return FERRY_OK;
}

int ferry_pl_place(const ferry_pl_inventory *inv, const ferry_pl_cluster *cluster,
                   const ferry_pl_opts *opts, ferry_pl_layout *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    pstate st;
    int rc = state_init(&st, inv, cluster, opts, true, err);
    if (rc)
        goto out;
    for (size_t k = 0; k < inv->n; k++) {
        size_t i = st.order[k];
        prefetch_ahead(&st, k);
        for (unsigned slot = 0; slot < st.rf; slot++) {
            uint32_t s = FERRY_PL_NO_SHARD;
            rc = choose(&st, i, false, &s, err);
            if (rc)
                goto out;
            assign(&st, i, slot, s);
        }
    }
    state_to_layout(&st, inv, cluster, opts, out);
out:
    state_free(&st);
    return rc;
}

int ferry_pl_place_more(const ferry_pl_inventory *inv, const ferry_pl_cluster *cluster,
                        const ferry_pl_opts *opts, const uint32_t *fixed, const uint64_t *base_load,
                        ferry_pl_layout *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    pstate st;
    int rc = state_init(&st, inv, cluster, opts, false, err);
    if (rc)
        goto out;
    size_t rf = st.rf;
    for (size_t s = 0; base_load && s < st.n; s++)
        st.load[s] = base_load[s];
    /* Keep what is placed; check it first (a caller's layout, e.g. from the routing table). */
    for (size_t i = 0; i < inv->n; i++)
        for (unsigned j = 0; j < rf; j++) {
            uint32_t s = fixed[i * rf + j];
            if (s == FERRY_PL_NO_SHARD)
                continue;
            if (s >= st.n || holding(&st, i, s)) {
                char id[FERRY_SLICE_ID_MAX];
                ferry_pl_slice_id(&inv->slices[i], id, sizeof id);
                rc = ferry_err_set(err, FERRY_EINVAL, "%s: replica %u %s", id, j,
                                   s >= st.n ? "names no shard of the cluster"
                                             : "is on the same shard as another replica");
                goto out;
            }
            assign(&st, i, j, s);
        }
    /* Place the slices that have no replica at all, in the canonical order. */
    for (size_t k = 0; k < inv->n; k++) {
        size_t i = st.order[k];
        bool empty = true;
        for (unsigned j = 0; j < rf && empty; j++)
            empty = st.rep[i * rf + j] == FERRY_PL_NO_SHARD;
        for (unsigned j = 0; empty && j < rf; j++) {
            uint32_t s = FERRY_PL_NO_SHARD;
            rc = choose(&st, i, false, &s, err);
            if (rc)
                goto out;
            assign(&st, i, j, s);
        }
    }
    state_to_layout(&st, inv, cluster, opts, out);
out:
    state_free(&st);
    return rc;
}

/* ---- rebalance ------------------------------------------------------------------------------ */

typedef struct evict_key {
    uint32_t shard;
    double score;
    uint32_t slice;
    unsigned slot;
} evict_key;

/* Weakest first on each shard: lowest score, then the later slice. */
static int evict_cmp(const void *a, const void *b)
{
    const evict_key *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    if (x->slice != y->slice)
        return x->slice > y->slice ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static double replica_score(pstate *st, size_t i, uint32_t s)
{
    pl_set_slice(&st->x, &st->inv->slices[i]);
    return pair_score(st, s, st->cl->shards[s].weight);
}

/* A shard holding more of a tenant's replicas than its cap (the cap shrinks when shards are
 * added) hands its weakest excess replicas to the best gainer that can take them. Spreading is
 * a preference: an excess replica no gainer can take stays, rather than moving between shards
 * that were there before. */
static int evict_over_cap(pstate *st, bool *evicted, const uint32_t *gainers, size_t n_gainers,
                          ferry_err *err)
{
    if (!n_gainers)
        return FERRY_OK;
    const ferry_pl_inventory *inv = st->inv;
    evict_key *keys = NULL;
    size_t kcap = 0;
    for (size_t t = 0; t < inv->n_tenants; t++) {
        uint32_t k = inv->tenant_splits[t];
        if (k < 2)
            continue;
        uint32_t first = inv->tenant_first[t];
        size_t nk = 0;
        if (kcap < (size_t)k * st->rf) {
            kcap = (size_t)k * st->rf;
            evict_key *p = realloc(keys, kcap * sizeof *keys);
            if (!p) {
                free(keys);
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
            keys = p;
        }
        for (uint32_t i = first; i < first + k; i++)
            for (unsigned j = 0; j < st->rf; j++) {
                uint32_t s = st->rep[(size_t)i * st->rf + j];
                if (s != FERRY_PL_NO_SHARD &&
                    tenant_count(st, (uint32_t)t, s) > tenant_cap(st, (uint32_t)t, s))
                    keys[nk++] = (evict_key){s, replica_score(st, i, s), i, j};
            }
        if (!nk)
            continue;
        qsort(keys, nk, sizeof *keys, evict_cmp);
        for (size_t e = 0; e < nk; e++) {
            evict_key *ek = &keys[e];
            if (tenant_count(st, (uint32_t)t, ek->shard) <=
                tenant_cap(st, (uint32_t)t, ek->shard))
                continue;
            const ferry_pl_slice *sl = &inv->slices[ek->slice];
            pl_set_slice(&st->x, sl);
            uint32_t best = FERRY_PL_NO_SHARD;
            double best_score = 0;
            for (size_t q = 0; q < n_gainers; q++) {
                uint32_t d = gainers[q];
                if (holding(st, ek->slice, d) || !fits(st, d, sl->bytes) ||
                    tenant_count(st, (uint32_t)t, d) >= tenant_cap(st, (uint32_t)t, d) ||
                    !zone_move_ok(st, ek->slice, ek->shard, d))
                    continue;
                double sc = pair_score(st, d, st->cl->shards[d].weight);
                if (best == FERRY_PL_NO_SHARD || pl_ranks_before(sc, d, best_score, best)) {
                    best = d;
                    best_score = sc;
                }
            }
            if (best == FERRY_PL_NO_SHARD)
                continue;
            unassign(st, ek->slice, ek->slot);
            assign(st, ek->slice, ek->slot, best);
            evicted[(size_t)ek->slice * st->rf + ek->slot] = true;
        }
    }
    free(keys);
    return FERRY_OK;
}

/* Evicts the weakest replicas from every shard above its fill target until it is not. */
static int evict_over_fill(pstate *st, bool *evicted, ferry_err *err)
{
    bool any = false;
    for (size_t s = 0; s < st->n; s++)
        any |= st->load[s] > st->limit[s];
    if (!any)
        return FERRY_OK;
    size_t nk = 0, cap = 0;
    evict_key *keys = NULL;
    for (size_t i = 0; i < st->inv->n; i++)
        for (unsigned j = 0; j < st->rf; j++) {
            uint32_t s = st->rep[i * st->rf + j];
            if (s == FERRY_PL_NO_SHARD || st->load[s] <= st->limit[s])
                continue;
            if (nk == cap) {
                cap = cap ? cap * 2 : 1024;
                evict_key *p = realloc(keys, cap * sizeof *keys);
                if (!p) {
                    free(keys);
                    return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                }
                keys = p;
            }
            keys[nk++] = (evict_key){s, replica_score(st, i, s), (uint32_t)i, j};
        }
    qsort(keys, nk, sizeof *keys, evict_cmp);
    for (size_t e = 0; e < nk; e++)
        if (st->load[keys[e].shard] > st->limit[keys[e].shard]) {
            unassign(st, keys[e].slice, keys[e].slot);
            evicted[(size_t)keys[e].slice * st->rf + keys[e].slot] = true;
        }
    free(keys);
    return FERRY_OK;
}

/* A slice whose most crowded zone holds at least two more of its replicas than a zone with a
 * free shard that has room (a zone was added, or the old layout had no zones) moves replicas
 * one at a time, the weakest of the most crowded zone first, to the shard choose() picks under
 * the zone rule, until the spread is as even as the room allows. */
static int zone_repair(pstate *st, bool *moved, ferry_err *err)
{
    if (!st->cl->zoned || st->rf < 2)
        return FERRY_OK;
    for (size_t k = 0; k < st->inv->n; k++) {
        size_t i = st->order[k];
        const ferry_pl_slice *sl = &st->inv->slices[i];
        for (unsigned round = 0; round < st->rf; round++) {
            pl_zones z;
            slice_zones(st, i, &z);
            uint32_t maxc = 0;
            for (size_t j = 0; j < z.n; j++)
                if (z.count[j] > maxc)
                    maxc = z.count[j];
            if (pl_zones_unevenness(&z) < 2)
                break;
            bool dest = false;
            for (uint32_t s = 0; s < st->n && !dest; s++)
                dest = !holding(st, i, s) && fits(st, s, sl->bytes) &&
                       zone_count(st, &z, s) + 2 <= maxc;
            if (!dest)
                break;
            unsigned victim = 0;
            double victim_score = 0;
            bool have = false;
            for (unsigned j = 0; j < st->rf; j++) {
                uint32_t s = st->rep[i * st->rf + j];
                if (s == FERRY_PL_NO_SHARD || zone_count(st, &z, s) != maxc)
                    continue;
                double sc = replica_score(st, i, s);
                if (!have || pl_ranks_before(victim_score, st->rep[i * st->rf + victim], sc, s)) {
                    have = true;
                    victim = j;
                    victim_score = sc;
                }
            }
            unassign(st, i, victim);
            uint32_t to = FERRY_PL_NO_SHARD;
            int rc = choose(st, i, false, &to, err);
            if (rc)
                return rc;
            assign(st, i, victim, to);
            moved[i * st->rf + victim] = true;
        }
    }
    return FERRY_OK;
}

/* What step 4 of a rebalance needs to know about the change. */
typedef struct flip_ctx {
    const uint32_t *gainers;
    size_t n_gainers;
    const bool *loser;       /* [n] lost weight */
    const double *old_weight; /* [n] 0: added */
} flip_ctx;

/* A scorer of one thread: the slice last given to pl_set_slice(&x, ...), and the pairs it
 * scored (added to ferry_pl_layout.scored). */
typedef struct flip_scorer {
    pl_scratch *x;
    uint64_t scored;
} flip_scorer;

static double flip_score(const pstate *st, flip_scorer *k, uint32_t s, double weight)
{
    k->scored++;
    return pl_pair_score(&st->sc, k->x, s, weight);
}

/* Whether the change flipped the current slice's preference from its shard x (scores x_new
 * now, x_old before) to shard d: d outranks x now and did not before. *d_new: d's score now.
 * d's two scores come from one hash of the pair (the weights differ, the hash does not). */
static bool flip(const pstate *st, flip_scorer *k, const flip_ctx *f, uint32_t x, double x_new,
                 double x_old, uint32_t d, double *d_new)
{
    k->scored++;
    uint64_t h = pl_pair_hash(&st->sc, k->x, d);
    *d_new = ferry_score_from_hash(h, st->cl->shards[d].weight);
    if (!pl_ranks_before(*d_new, d, x_new, x))
        return false;
    if (f->old_weight[d] > 0) {
        double d_old = *d_new;
        if (f->old_weight[d] != st->cl->shards[d].weight)
            d_old = ferry_score_from_hash(h, f->old_weight[d]);
        if (pl_ranks_before(d_old, d, x_old, x))
            return false; /* D already outranked X: not a flip */
    }
    return true;
}

/* Whether slice i has a flip at all (scores only): a replica not moved yet whose shard the
 * change made some other shard outrank. The slice is set in k's scratch on return. */
static bool slice_has_flip(const pstate *st, flip_scorer *k, const flip_ctx *f,
                           const bool *moved, size_t i)
{
    size_t rf = st->rf;
    pl_set_slice(k->x, &st->inv->slices[i]);
    for (unsigned j = 0; j < rf; j++) {
        uint32_t x = st->rep[i * rf + j];
        if (moved[i * rf + j] || x == FERRY_PL_NO_SHARD)
            continue;
        double x_new = flip_score(st, k, x, st->cl->shards[x].weight);
        double x_old =
            f->loser[x] || st->gainer[x] ? flip_score(st, k, x, f->old_weight[x]) : x_new;
        size_t nd = f->loser[x] ? st->n : f->n_gainers;
        for (size_t q = 0; q < nd; q++) {
            uint32_t d = f->loser[x] ? (uint32_t)q : f->gainers[q];
            double d_new;
            if (d != x && flip(st, k, f, x, x_new, x_old, d, &d_new))
                return true;
        }
    }
    return false;
}

/* The flip scan on several threads: every slice's slice_has_flip into flips[]. It only reads
 * the state (the replicas, moved[], the weights), each thread with a scratch of its own. */
typedef struct flip_shared {
    const pstate *st;
    const flip_ctx *f;
    const bool *moved;
    bool *flips;
    atomic_size_t next; /* first slice not yet taken */
} flip_shared;

typedef struct flip_job {
    flip_shared *sh;
    uint64_t scored;
    int rc;
    ferry_err err;
} flip_job;

static void *flip_worker(void *arg)
{
    flip_job *j = arg;
    flip_shared *sh = j->sh;
    size_t n = sh->st->inv->n;
    pl_scratch x;
    j->rc = pl_scratch_init(&x, &sh->st->sc, sh->st->m, &j->err);
    if (j->rc)
        return NULL;
    flip_scorer k = {&x, 0};
    for (size_t begin, end; pl_chunk_take(&sh->next, n, &begin, &end);)
        for (size_t i = begin; i < end; i++)
            sh->flips[i] = slice_has_flip(sh->st, &k, sh->f, sh->moved, i);
    j->scored = k.scored;
    pl_scratch_free(&x);
    return NULL;
}

/* flips[i] for every slice, on up to opts.threads threads (the same result on any number). */
static int find_flips(pstate *st, const flip_ctx *f, const bool *moved, bool *flips,
                      ferry_err *err)
{
    flip_shared sh = {st, f, moved, flips, 0};
    flip_job jobs[PL_THREADS_MAX];
    unsigned threads = pl_threads_for(st->o->threads, st->inv->n);
    for (unsigned t = 0; t < threads; t++)
        jobs[t] = (flip_job){&sh, 0, 0, {0, ""}};
    unsigned ran = pl_run_threads(threads, flip_worker, jobs, sizeof *jobs);
    for (unsigned t = 0; t < ran; t++) {
        if (jobs[t].rc) {
            *err = jobs[t].err;
            return jobs[t].rc;
        }
        st->scored += jobs[t].scored;
    }
    return FERRY_OK;
}

int pl_rebalance(const ferry_pl_inventory *inv, const ferry_pl_cluster *old_cluster,
                 const ferry_pl_layout *old, const ferry_pl_cluster *new_cluster,
                 const ferry_pl_opts *opts, bool score_all, ferry_pl_layout *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    pstate st;
    int rc = FERRY_OK;
    uint32_t *old_to_new = NULL, *gainers = NULL;
    double *old_weight = NULL;
    bool *loser = NULL, *had_prev = NULL, *moved = NULL, *flips = NULL;
    pl_cand *tmp = NULL;
    flip_ctx fl;
    size_t n_gainers = 0, n_preferred = 0;
    memset(&st, 0, sizeof st);
    if (old->inv != inv || old->cluster != old_cluster) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "rebalance: old layout is over other inputs");
        goto out;
    }
    rc = state_init(&st, inv, new_cluster, opts, score_all, err);
    if (rc)
        goto out;
    size_t n = st.n, rf = st.rf, nrep = inv->n * rf;
    old_to_new = malloc(old_cluster->n * sizeof *old_to_new);
    old_weight = calloc(n, sizeof *old_weight);
    loser = calloc(n, sizeof *loser);
    gainers = calloc(n, sizeof *gainers);
    had_prev = calloc(nrep ? nrep : 1, sizeof *had_prev);
    moved = calloc(nrep ? nrep : 1, sizeof *moved);
    tmp = calloc(old->rf > rf ? old->rf : rf, sizeof *tmp);
    flips = calloc(inv->n ? inv->n : 1, sizeof *flips);
    if (!old_to_new || !old_weight || !loser || !gainers || !had_prev || !moved || !tmp ||
        !flips) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < old_cluster->n; s++) {
        long k = ferry_pl_cluster_find(new_cluster, old_cluster->shards[s].name);
        old_to_new[s] = k < 0 ? FERRY_PL_NO_SHARD : (uint32_t)k;
    }
    for (size_t s = 0; s < n; s++) {
        long k = ferry_pl_cluster_find(old_cluster, new_cluster->shards[s].name);
        old_weight[s] = k < 0 ? 0 : old_cluster->shards[k].weight;
        st.gainer[s] = k < 0 || new_cluster->shards[s].weight > old_weight[s];
        loser[s] = k >= 0 && new_cluster->shards[s].weight < old_weight[s];
        if (st.gainer[s])
            gainers[n_gainers++] = (uint32_t)s;
    }
    /* the caller's preferred shards take homeless replicas first, as gainers do (choose), but
     * are not gainers for the flips and the cap's excess: their weight did not change */
    for (size_t s = 0; opts->prefer && s < n; s++)
        if (opts->prefer[s] && !st.gainer[s]) {
            st.gainer[s] = true;
            n_preferred++;
        }

    /* 1. Keep every replica whose shard is still there (the best rf if rf shrank). */
    for (size_t i = 0; i < inv->n; i++) {
        size_t kept = 0;
        for (unsigned j = 0; j < old->rf; j++) {
            uint32_t s = old->replicas[i * old->rf + j];
            uint32_t ns = s == FERRY_PL_NO_SHARD ? FERRY_PL_NO_SHARD : old_to_new[s];
            if (j < rf)
                had_prev[i * rf + j] = s != FERRY_PL_NO_SHARD;
            if (ns == FERRY_PL_NO_SHARD)
                continue;
            tmp[kept].shard = ns;
            tmp[kept].score = (double)j; /* slot, for rf == old rf */
            kept++;
        }
        if (old->rf == rf) {
            for (size_t k = 0; k < kept; k++)
                assign(&st, i, (unsigned)tmp[k].score, tmp[k].shard);
            continue;
        }
        /* rf changed: keep the best-scoring survivors, compacted into the first slots. */
        for (size_t k = 0; k < kept; k++)
            tmp[k].score = replica_score(&st, i, tmp[k].shard);
        for (size_t a = 1; a < kept; a++)
            for (size_t b = a; b > 0 && pl_ranks_before(tmp[b].score, tmp[b].shard,
                                                        tmp[b - 1].score, tmp[b - 1].shard);
                 b--) {
                pl_cand c = tmp[b];
                tmp[b] = tmp[b - 1];
                tmp[b - 1] = c;
            }
        for (size_t k = 0; k < kept && k < rf; k++)
            assign(&st, i, (unsigned)k, tmp[k].shard);
    }

    /* 1b. Zone repair first: a zone added (or declared) gets the replicas it should have before
     *     anything else competes for its shards. */
    rc = zone_repair(&st, moved, err);
    if (rc)
        goto out;

    /* 2. Over the tenant's cap: excess to the gainers. Over the fill target: evict. */
    rc = evict_over_cap(&st, moved, gainers, n_gainers, err);
    if (!rc)
        rc = evict_over_fill(&st, moved, err);
    if (rc)
        goto out;

    /* 3. Place every replica without a shard, biggest slices first. Replicas that had a shard
     *    (it left, or evicted) prefer the shards the change was meant to fill. */
    for (size_t k = 0; k < inv->n; k++) {
        size_t i = st.order[k];
        for (unsigned j = 0; j < rf; j++) {
            if (st.rep[i * rf + j] != FERRY_PL_NO_SHARD)
                continue;
            uint32_t s = FERRY_PL_NO_SHARD;
            rc = choose(&st, i, had_prev[i * rf + j] && n_gainers + n_preferred > 0, &s, err);
            if (rc)
                goto out;
            assign(&st, i, j, s);
            moved[i * rf + j] = true;
        }
    }

    /* 3b. Zone repair again: evictions may have left a slice uneven that step 3 could not
     *     mend (no room in the right zone then). */
    rc = zone_repair(&st, moved, err);
    if (rc)
        goto out;

    /* 4. Preference flips: a replica leaves its shard X for D only when the change made D
     *    outrank X for this slice (D added or heavier, or X lighter), D has room and the
     *    tenant's cap allows it. The weakest replica of a slice is considered first. */
    bool any_loser = false;
    for (size_t s = 0; s < n; s++)
        any_loser |= loser[s];
    if (n_gainers == 0 && !any_loser)
        goto done;
    fl.gainers = gainers;
    fl.n_gainers = n_gainers;
    fl.loser = loser;
    fl.old_weight = old_weight;
    /* Which slices have a flip at all: scores only, in memory order and on every thread
     * (a slice's replicas change in this step only when that slice is processed, so this is
     * the set the loop below would find moves in; it skips the rest, which in size order would
     * be a few cache misses each). */
    rc = find_flips(&st, &fl, moved, flips, err);
    if (rc)
        goto out;
    flip_scorer main_k = {&st.x, 0}; /* this thread's scores of the step, counted once below */
    for (size_t k = 0; k < inv->n; k++) {
        size_t i = st.order[k];
        if (!flips[i])
            continue;
        const ferry_pl_slice *sl = &inv->slices[i];
        uint32_t t = sl->tenant_index;
        pl_set_slice(&st.x, sl);
        size_t nk = 0;
        for (unsigned j = 0; j < rf; j++) {
            uint32_t s = st.rep[i * rf + j];
            if (moved[i * rf + j] || s == FERRY_PL_NO_SHARD)
                continue;
            tmp[nk].shard = j;
            tmp[nk].score = flip_score(&st, &main_k, s, new_cluster->shards[s].weight);
            nk++;
        }
        /* weakest first */
        for (size_t a = 1; a < nk; a++)
            for (size_t b = a; b > 0 && tmp[b].score < tmp[b - 1].score; b--) {
                pl_cand c = tmp[b];
                tmp[b] = tmp[b - 1];
                tmp[b - 1] = c;
            }
        for (size_t e = 0; e < nk; e++) {
            unsigned j = tmp[e].shard;
            uint32_t x = st.rep[i * rf + j];
            double x_new = tmp[e].score;
            double x_old =
                loser[x] || st.gainer[x] ? flip_score(&st, &main_k, x, old_weight[x]) : x_new;
            size_t nd = loser[x] ? n : n_gainers;
            uint32_t best = FERRY_PL_NO_SHARD;
            double best_score = 0;
            for (size_t q = 0; q < nd; q++) {
                uint32_t d = loser[x] ? (uint32_t)q : gainers[q];
                double d_new;
                if (d == x || holding(&st, i, d) || !fits(&st, d, sl->bytes) ||
                    tenant_count(&st, t, d) >= tenant_cap(&st, t, d) ||
                    !zone_move_ok(&st, i, x, d) ||
                    !flip(&st, &main_k, &fl, x, x_new, x_old, d, &d_new))
                    continue;
                if (best == FERRY_PL_NO_SHARD || pl_ranks_before(d_new, d, best_score, best)) {
                    best = d;
                    best_score = d_new;
                }
            }
            if (best != FERRY_PL_NO_SHARD) {
                unassign(&st, i, j);
                assign(&st, i, j, best);
                moved[i * rf + j] = true;
            }
        }
    }
    st.scored += main_k.scored;
done:
    state_to_layout(&st, inv, new_cluster, opts, out);
out:
    free(old_to_new);
    free(old_weight);
    free(loser);
    free(gainers);
    free(had_prev);
    free(moved);
    free(flips);
    free(tmp);
    state_free(&st);
    return rc;
}

int ferry_pl_rebalance(const ferry_pl_inventory *inv, const ferry_pl_cluster *old_cluster,
                       const ferry_pl_layout *old, const ferry_pl_cluster *new_cluster,
                       const ferry_pl_opts *opts, ferry_pl_layout *out, ferry_err *err)
{
    return pl_rebalance(inv, old_cluster, old, new_cluster, opts, false, out, err);
}

void ferry_pl_layout_free(ferry_pl_layout *l)
{
    free(l->replicas);
    free(l->shard_bytes);
    free(l->shard_replicas);
    memset(l, 0, sizeof *l);
}

void ferry_pl_layout_ranked(const ferry_pl_layout *l, size_t i, uint32_t *out)
{
    char id[FERRY_SLICE_ID_MAX];
    ferry_pl_slice_id(&l->inv->slices[i], id, sizeof id);
    double sc[64];
    unsigned rf = l->rf;
    for (unsigned j = 0; j < rf; j++) {
        out[j] = l->replicas[i * rf + j];
        const ferry_pl_shard *s = &l->cluster->shards[out[j]];
        sc[j < 64 ? j : 63] = ferry_score(l->opts.hash, id, s->name, s->weight);
    }
    for (unsigned a = 1; a < rf && a < 64; a++)
        for (unsigned b = a; b > 0 && pl_ranks_before(sc[b], out[b], sc[b - 1], out[b - 1]);
             b--) {
            double d = sc[b];
            sc[b] = sc[b - 1];
            sc[b - 1] = d;
            uint32_t u = out[b];
            out[b] = out[b - 1];
            out[b - 1] = u;
        }
}

/* Zones: how a slice's replicas spread over the zones its shards declare, the shard for one more
 * replica under the zone rule (ferry_pl_pick_replica), zone repair (ferry_pl_zone_repair) and the
 * pull of shards just added on replicas of slices with rf > 1 (ferry_pl_attract_replica). The
 * greedy placement in place.c applies the same rule through pl_zones_of; the catalog's
 * rebalance (lib/flow) uses the public functions for clone, move-off and repair steps. Pure. */
#include "placement/placement_int.h"

#include <math.h>
#include <string.h>

void pl_zones_of(const ferry_pl_cluster *c, const uint32_t *held, size_t n_held,
                 const bool *eligible, pl_zones *z)
{
    z->n = 0;
    for (size_t k = 0; k < n_held; k++) {
        uint32_t s = held[k];
        if (s == FERRY_PL_NO_SHARD || s >= c->n)
            continue;
        uint32_t zone = c->shards[s].zone_id;
        size_t j;
        for (j = 0; j < z->n; j++)
            if (z->zone[j] == zone)
                break;
        if (j == z->n) {
            if (z->n == PL_RF_MAX)
                continue;
            z->zone[z->n] = zone;
            z->count[z->n++] = 0;
        }
        z->count[j]++;
    }
    z->level = UINT32_MAX;
    if (!eligible) {
        /* a zone with no replica has a free shard: level 0 unless every zone is used */
        if (z->n < c->n_zones) {
            z->level = 0;
            return;
        }
        for (size_t j = 0; j < z->n; j++)
            if (z->count[j] < c->zone_size[z->zone[j]] && z->count[j] < z->level)
                z->level = z->count[j];
        return;
    }
    for (size_t s = 0; s < c->n; s++) {
        if (!eligible[s])
            continue;
        bool in = false;
        for (size_t k = 0; k < n_held && !in; k++)
            in = held[k] == s;
        if (in)
            continue;
        uint32_t cnt = pl_zone_count(z, c->shards[s].zone_id);
        if (cnt < z->level)
            z->level = cnt;
    }
}

uint32_t pl_zone_count(const pl_zones *z, uint32_t zone)
{
    for (size_t j = 0; j < z->n; j++)
        if (z->zone[j] == zone)
            return z->count[j];
    return 0;
}

static bool has_room(const ferry_pl_cluster *c, uint32_t s, uint64_t bytes, const uint64_t *load,
                     double fill)
{
    if (!load)
        return true;
    uint64_t cap = c->shards[s].capacity;
    uint64_t limit = cap ? (uint64_t)floorl((long double)cap * fill) : UINT64_MAX;
    return load[s] <= limit && bytes <= limit - load[s];
}

static bool is_held(const uint32_t *held, size_t n_held, uint32_t s)
{
    for (size_t k = 0; k < n_held; k++)
        if (held[k] == s)
            return true;
    return false;
}

uint32_t ferry_pl_pick_replica(const ferry_pl_cluster *c, ferry_hash h, const char *slice_id,
                               uint64_t bytes, const uint32_t *held, size_t n_held,
                               const bool *eligible, const uint64_t *load, double fill)
{
    pl_zones z;
    pl_zones_of(c, held, n_held, eligible, &z);
    uint32_t best = FERRY_PL_NO_SHARD, best_zc = 0;
    bool best_room = false;
    double best_score = 0;
    for (uint32_t s = 0; s < c->n; s++) {
        if ((eligible && !eligible[s]) || is_held(held, n_held, s))
            continue;
        bool room = has_room(c, s, bytes, load, fill);
        uint32_t zc = pl_zone_count(&z, c->shards[s].zone_id);
        double sc = ferry_score(h, slice_id, c->shards[s].name, c->shards[s].weight);
        bool better;
        if (best == FERRY_PL_NO_SHARD)
            better = true;
        else if (room != best_room)
            better = room; /* room first */
        else if (zc != best_zc)
            better = zc < best_zc; /* then the least crowded zone */
        else
            better = pl_ranks_before(sc, s, best_score, best);
        if (better) {
            best = s;
            best_room = room;
            best_zc = zc;
            best_score = sc;
        }
    }
    return best;
}

bool ferry_pl_zone_repair(const ferry_pl_cluster *c, ferry_hash h, const char *slice_id,
                          uint64_t bytes, const uint32_t *held, size_t n_held, const bool *eligible,
                          const uint64_t *load, double fill, size_t *victim, uint32_t *to)
{
    if (n_held < 2 || n_held > PL_RF_MAX)
        return false;
    pl_zones all;
    pl_zones_of(c, held, n_held, eligible, &all);
    uint32_t rest[PL_RF_MAX];
    bool found = false;
    uint32_t found_count = 0;
    double found_score = 0;
    for (size_t k = 0; k < n_held; k++) {
        uint32_t s = held[k];
        if (s == FERRY_PL_NO_SHARD || s >= c->n)
            continue;
        uint32_t own = pl_zone_count(&all, c->shards[s].zone_id);
        if (own < 2)
            continue; /* a lone replica in its zone never needs to leave it */
        size_t nr = 0;
        for (size_t j = 0; j < n_held; j++)
            if (j != k)
                rest[nr++] = held[j];
        uint32_t d = ferry_pl_pick_replica(c, h, slice_id, bytes, rest, nr, eligible, load, fill);
        if (d == FERRY_PL_NO_SHARD || !has_room(c, d, bytes, load, fill))
            continue;
        pl_zones zr;
        pl_zones_of(c, rest, nr, eligible, &zr);
        if (pl_zone_count(&zr, c->shards[d].zone_id) + 2 > own)
            continue;
        double sc = ferry_score(h, slice_id, c->shards[s].name, c->shards[s].weight);
        /* the most crowded zone, then the weakest replica, ties to the later name */
        if (!found || own > found_count ||
            (own == found_count && !pl_ranks_before(sc, s, found_score, held[*victim]))) {
            found = true;
            found_count = own;
            found_score = sc;
            *victim = k;
            *to = d;
        }
    }
    return found;
}

uint32_t pl_zones_unevenness(const pl_zones *z)
{
    uint32_t maxc = 0;
    for (size_t j = 0; j < z->n; j++)
        if (z->count[j] > maxc)
            maxc = z->count[j];
    return z->level == UINT32_MAX || maxc <= z->level ? 0 : maxc - z->level;
}

bool ferry_pl_attract_replica(const ferry_pl_cluster *c, ferry_hash h, const char *slice_id,
                              uint64_t bytes, const uint32_t *held, size_t n_held,
                              const bool *gainer, const bool *eligible, const uint64_t *load,
                              double fill, size_t *victim, uint32_t *to)
{
    if (n_held == 0 || n_held > PL_RF_MAX || !gainer)
        return false;
    /* the replicas that may move, weakest first */
    size_t order[PL_RF_MAX], n = 0;
    double score[PL_RF_MAX];
    for (size_t k = 0; k < n_held; k++) {
        uint32_t s = held[k];
        if (s == FERRY_PL_NO_SHARD || s >= c->n)
            return false; /* a replica the cluster does not know: the other steps first */
        score[k] = ferry_score(h, slice_id, c->shards[s].name, c->shards[s].weight);
        if (gainer[s])
            continue;
        size_t at = n++;
        for (; at > 0 && pl_ranks_before(score[order[at - 1]], held[order[at - 1]], score[k], s);
             at--)
            order[at] = order[at - 1];
        order[at] = k;
    }
    pl_zones before;
    pl_zones_of(c, held, n_held, eligible, &before);
    const uint32_t was = pl_zones_unevenness(&before);
    for (size_t e = 0; e < n; e++) {
        const size_t k = order[e];
        const uint32_t x = held[k];
        uint32_t best = FERRY_PL_NO_SHARD;
        double best_score = 0;
        for (uint32_t d = 0; d < c->n; d++) {
            if (!gainer[d] || (eligible && !eligible[d]) || is_held(held, n_held, d) ||
                !has_room(c, d, bytes, load, fill))
                continue;
            double sd = ferry_score(h, slice_id, c->shards[d].name, c->shards[d].weight);
            if (!pl_ranks_before(sd, d, score[k], x))
                continue; /* x still outranks d: no flip */
            if (c->zoned && c->shards[d].zone_id != c->shards[x].zone_id) {
                uint32_t after_held[PL_RF_MAX];
                for (size_t j = 0; j < n_held; j++)
                    after_held[j] = j == k ? d : held[j];
                pl_zones after;
                pl_zones_of(c, after_held, n_held, eligible, &after);
                if (pl_zones_unevenness(&after) > (was > 1 ? was : 1))
                    continue;
            }
            if (best == FERRY_PL_NO_SHARD || pl_ranks_before(sd, d, best_score, best)) {
                best = d;
                best_score = sd;
            }
        }
        if (best != FERRY_PL_NO_SHARD) {
            *victim = k;
            *to = best;
            return true;
        }
    }
    return false;
}

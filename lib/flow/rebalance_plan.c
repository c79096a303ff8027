/* The rebalancing plan computed from the catalog's state: the routing table as the old layout,
 * the active shards as the new cluster, then placement's own ferry_pl_rebalance and
 * ferry_pl_plan_build (the same steps `ferry plan` runs), so `ferry rebalance` moves exactly what
 * `ferry plan` shows; and placement's zone rule for the replica steps of slices with rf > 1
 * (mv_zones). The catalog side (plan_compute.c) hands it shards and slices by index; the mapping
 * onto placement's sorted clusters and back stays here. */
#include "flow/move_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/placement.h"

/* An added shard's weight in the old cluster, relative to its own: small enough that a slice
 * prefers it over its current shard "before" only about once in 10^12 (weighted rendezvous: the
 * chance is the weights' ratio), large enough to stay a positive normal double. */
#define MV_ADDED_OLD_WEIGHT 1e-12

/* Threads for placement's passes over every slice: the cores there are, up to 8 (the plan is
 * the same on any number; at a million slices the flip scan is a fifth of the plan's CPU). */
static unsigned plan_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (unsigned)n;
}

int mv_plan(const char *hash, unsigned rf, double fill, const mv_plan_shard *shards, size_t nsh,
            const mv_plan_slice *slices, size_t nsl, mv_plan_move **out, size_t *n,
            ferry_err *err)
{
    ferry_pl_cluster oldc, newc;
    ferry_pl_inventory inv;
    ferry_pl_layout old, nl;
    ferry_pl_plan plan;
    memset(&oldc, 0, sizeof oldc);
    memset(&newc, 0, sizeof newc);
    memset(&inv, 0, sizeof inv);
    memset(&old, 0, sizeof old);
    memset(&nl, 0, sizeof nl);
    memset(&plan, 0, sizeof plan);
    *out = NULL;
    *n = 0;
    size_t *inv_to_slice = NULL, *from_new = NULL, *from_old = NULL;
    bool *prefer = NULL; /* [newc.n]: opts.prefer */
    long *in_old = NULL;
    bool borrowed = false; /* inv holds the callers' names */
    int rc;
    ferry_pl_opts opts = FERRY_PL_OPTS_DEFAULT;
    if (!ferry_hash_parse(hash, &opts.hash)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "catalog: unknown placement hash '%s'", hash);
        goto out;
    }
    if (rf != 1) {
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED,
                           "rebalancing from the catalog supports rf 1 only (this cluster has rf %u)",
                           rf);
        goto out;
    }
    opts.rf = 1;
    opts.fill = fill;
    opts.strict = false;
    opts.threads = plan_threads();
    if ((rc = ferry_pl_cluster_init(&oldc, "routing table", err)) ||
        (rc = ferry_pl_cluster_init(&newc, "active shards", err)) ||
        (rc = ferry_pl_inventory_init(&inv, "catalog slices", err)))
        goto out;
    for (size_t s = 0; s < nsh; s++) {
        /* A shard just added that already serves routes (a rebalance cut short) was in the
         * old cluster with almost no weight: placement still sees it as gaining weight, so the
         * rest of its first rebalance is planned again rather than forgotten. */
        double old_weight = shards[s].added        ? shards[s].weight * MV_ADDED_OLD_WEIGHT
                            : shards[s].old_weight > 0 ? shards[s].old_weight
                                                       : shards[s].weight;
        if (shards[s].in_old && (rc = ferry_pl_cluster_add(&oldc, shards[s].name, old_weight,
                                                           shards[s].capacity, 0, err)))
            goto out;
        if (shards[s].in_new && (rc = ferry_pl_cluster_add(&newc, shards[s].name, shards[s].weight,
                                                           shards[s].capacity, 0, err)))
            goto out;
    }
    if (newc.n == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "no active shard left to place slices on");
        goto out;
    }
    if (nsl == 0 || oldc.n == 0)
        goto out; /* nothing placed yet: nothing to move */
    /* The inventory holds the caller's tenant names, borrowed (ferry_pl_inventory_add would copy
     * each name once per slice: a million copies); they are taken out again before
     * ferry_pl_inventory_free. The names are catalog keys, which cat_name_ok keeps within
     * placement's rule for tenant names. */
    if (!(inv.slices = malloc(nsl * sizeof *inv.slices))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    inv.cap = nsl;
    for (size_t i = 0; i < nsl; i++)
        inv.slices[i] =
            (ferry_pl_slice){(char *)slices[i].tenant, slices[i].split, slices[i].bytes, 0, 0};
    inv.n = nsl;
    borrowed = true;
    if ((rc = ferry_pl_cluster_finish(&oldc, err)) || (rc = ferry_pl_cluster_finish(&newc, err)) ||
        (rc = ferry_pl_inventory_finish(&inv, err)))
        goto out;
    /* the inventory is sorted now: find each input slice in it (binary search) */
    inv_to_slice = calloc(inv.n, sizeof *inv_to_slice);
    old.replicas = calloc(inv.n, sizeof *old.replicas);
    old.shard_bytes = calloc(oldc.n, sizeof *old.shard_bytes);
    old.shard_replicas = calloc(oldc.n, sizeof *old.shard_replicas);
    in_old = malloc(nsh * sizeof *in_old);
    from_new = malloc(newc.n * sizeof *from_new);
    from_old = malloc(oldc.n * sizeof *from_old);
    if (!inv_to_slice || !old.replicas || !old.shard_bytes || !old.shard_replicas || !in_old ||
        !from_new || !from_old) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < nsh; s++) {
        in_old[s] = ferry_pl_cluster_find(&oldc, shards[s].name);
        if (in_old[s] >= 0)
            from_old[in_old[s]] = s;
        long k = ferry_pl_cluster_find(&newc, shards[s].name);
        if (k >= 0)
            from_new[k] = s;
    }
    for (size_t i = 0; i < nsl; i++) {
        /* slices given in the inventory's order (the catalog view's) sit at their own index */
        size_t lo = i < inv.n && inv.slices[i].split == slices[i].split &&
                            (inv.slices[i].tenant == slices[i].tenant ||
                             !strcmp(inv.slices[i].tenant, slices[i].tenant))
                        ? i
                        : ferry_pl_inventory_find(&inv, slices[i].tenant, slices[i].split);
        inv_to_slice[lo] = i;
        long s = in_old[slices[i].route];
        old.replicas[lo] = s < 0 ? FERRY_PL_NO_SHARD : (uint32_t)s;
        if (s >= 0) {
            old.shard_bytes[s] += inv.slices[lo].bytes;
            old.shard_replicas[s]++;
        }
    }
    for (size_t s = 0; s < nsh; s++) {
        long k = shards[s].prefer ? ferry_pl_cluster_find(&newc, shards[s].name) : -1;
        if (k < 0)
            continue;
        if (!prefer && !(prefer = calloc(newc.n, sizeof *prefer))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        prefer[k] = true;
    }
    opts.prefer = prefer;
    old.inv = &inv;
    old.cluster = &oldc;
    old.opts = opts;
    old.rf = 1;
    if ((rc = ferry_pl_rebalance(&inv, &oldc, &old, &newc, &opts, &nl, err)) ||
        (rc = ferry_pl_plan_build(&old, &nl, &plan, err)))
        goto out;
    *out = calloc(plan.moved ? plan.moved : 1, sizeof **out);
    if (!*out) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < plan.moved; k++) {
        const ferry_pl_move *m = &plan.moves[k];
        if (!m->from || !m->to)
            continue; /* rf changes are not produced with rf 1 */
        mv_plan_move *o = &(*out)[*n];
        o->slice = inv_to_slice[m->slice];
        o->bytes = m->bytes;
        o->from = from_old[ferry_pl_cluster_find(&oldc, m->from)];
        o->to = from_new[ferry_pl_cluster_find(&newc, m->to)];
        (*n)++;
    }
out:
    ferry_pl_plan_free(&plan);
    ferry_pl_layout_free(&nl);
    free(old.replicas);
    free(old.shard_bytes);
    free(old.shard_replicas);
    free(inv_to_slice);
    free(in_old);
    free(from_new);
    free(from_old);
    free(prefer);
    if (borrowed)
        for (size_t i = 0; i < inv.n; i++)
            inv.slices[i].tenant = NULL;
    ferry_pl_inventory_free(&inv);
    ferry_pl_cluster_free(&oldc);
    ferry_pl_cluster_free(&newc);
    return rc;
}

struct mv_zones {
    ferry_pl_cluster c;
    ferry_hash hash;
    double fill;
    size_t n;
    long *to_cluster;    /* [n] input index -> cluster index */
    size_t *from_cluster; /* [c.n] cluster index -> input index */
    bool *eligible;       /* [c.n] */
    bool *gainer;         /* [c.n] added shards, and those re-weighted to more */
    bool *keeper;         /* [c.n] active shards not re-weighted to less; NULL: none was */
    bool *preferred;      /* [c.n] active shards below the mean fill of an evened skew
                           * (mv_plan_shard.prefer); NULL: no skew is evened */
    uint64_t *load;       /* [c.n] */
};

/* A shard's weight went down (up) since the routing table was balanced: it sheds (attracts). */
static bool reweighted_down(const mv_plan_shard *s)
{
    return !s->added && s->old_weight > 0 && s->weight < s->old_weight;
}

static bool reweighted_up(const mv_plan_shard *s)
{
    return !s->added && s->old_weight > 0 && s->weight > s->old_weight;
}

void mv_zones_close(mv_zones *z)
{
    if (!z)
        return;
    ferry_pl_cluster_free(&z->c);
    free(z->to_cluster);
    free(z->from_cluster);
    free(z->eligible);
    free(z->gainer);
    free(z->keeper);
    free(z->preferred);
    free(z->load);
    free(z);
}

int mv_zones_open(const char *hash, double fill, const mv_plan_shard *shards, size_t n,
                  mv_zones **out, ferry_err *err)
{
    *out = NULL;
    mv_zones *z = calloc(1, sizeof *z);
    int rc = FERRY_OK;
    if (!z)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    z->fill = fill > 0 && fill <= 1 ? fill : 1;
    z->n = n;
    if (!ferry_hash_parse(hash, &z->hash)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "catalog: unknown placement hash '%s'", hash);
        goto out;
    }
    if ((rc = ferry_pl_cluster_init(&z->c, "catalog shards", err)))
        goto out;
    for (size_t s = 0; s < n; s++)
        if ((rc = ferry_pl_cluster_add_zoned(&z->c, shards[s].name, shards[s].weight,
                                             shards[s].capacity, shards[s].zone, 0, err)))
            goto out;
    if (n == 0 || (rc = ferry_pl_cluster_finish(&z->c, err)))
        goto out;
    z->to_cluster = calloc(n, sizeof *z->to_cluster);
    z->from_cluster = calloc(n, sizeof *z->from_cluster);
    z->eligible = calloc(n, sizeof *z->eligible);
    z->gainer = calloc(n, sizeof *z->gainer);
    z->load = calloc(n, sizeof *z->load);
    if (!z->to_cluster || !z->from_cluster || !z->eligible || !z->gainer || !z->load) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < n; s++) {
        long k = ferry_pl_cluster_find(&z->c, shards[s].name);
        z->to_cluster[s] = k;
        z->from_cluster[k] = s;
        z->eligible[k] = shards[s].in_new;
        z->gainer[k] = shards[s].in_new && (shards[s].added || reweighted_up(&shards[s]));
    }
    for (size_t s = 0; s < n && !z->keeper; s++) {
        if (!shards[s].in_new || !reweighted_down(&shards[s]))
            continue;
        if (!(z->keeper = calloc(n, sizeof *z->keeper))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t t = 0; t < n; t++)
            z->keeper[z->to_cluster[t]] = shards[t].in_new && !reweighted_down(&shards[t]);
    }
    for (size_t s = 0; s < n && !z->preferred; s++) {
        if (!shards[s].in_new || !shards[s].prefer)
            continue;
        if (!(z->preferred = calloc(n, sizeof *z->preferred))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t t = 0; t < n; t++)
            z->preferred[z->to_cluster[t]] = shards[t].in_new && shards[t].prefer;
    }
out:
    if (rc)
        mv_zones_close(z);
    else
        *out = z;
    return rc;
}

void mv_zones_load(mv_zones *z, size_t shard, int64_t delta)
{
    if (shard >= z->n)
        return;
    uint64_t *l = &z->load[z->to_cluster[shard]];
    if (delta < 0 && (uint64_t)-delta > *l)
        *l = 0;
    else
        *l += (uint64_t)delta;
}

/* held (input indices) as cluster indices; at most 64 */
static size_t held_in_cluster(const mv_zones *z, const size_t *held, size_t n_held, uint32_t *out)
{
    size_t k = 0;
    for (size_t j = 0; j < n_held && k < 64; j++)
        if (held[j] < z->n)
            out[k++] = (uint32_t)z->to_cluster[held[j]];
    return k;
}

long mv_zones_pick(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                   size_t n_held)
{
    uint32_t h[64];
    size_t nh = held_in_cluster(z, held, n_held, h);
    if (z->n == 0)
        return -1;
    uint32_t s = ferry_pl_pick_replica(&z->c, z->hash, slice_id, bytes, h, nh, z->eligible, z->load,
                                       z->fill);
    return s == FERRY_PL_NO_SHARD ? -1 : (long)z->from_cluster[s];
}

bool mv_zones_repair(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                     size_t n_held, size_t *victim, size_t *to)
{
    uint32_t h[64], d = FERRY_PL_NO_SHARD;
    size_t nh = held_in_cluster(z, held, n_held, h), v = 0;
    if (z->n == 0 || nh != n_held ||
        !ferry_pl_zone_repair(&z->c, z->hash, slice_id, bytes, h, nh, z->eligible, z->load, z->fill,
                              &v, &d))
        return false;
    *victim = v;
    *to = z->from_cluster[d];
    return true;
}

/* placement's pull (ferry_pl_attract_replica) toward the shards `pull` marks: held (input
 * indices) as cluster indices, the answer as input indices */
static bool zones_pull(mv_zones *z, const bool *pull, const char *slice_id, uint64_t bytes,
                       const size_t *held, size_t n_held, size_t *victim, size_t *to)
{
    uint32_t h[64], d = FERRY_PL_NO_SHARD;
    size_t nh = held_in_cluster(z, held, n_held, h), v = 0;
    if (z->n == 0 || !pull || nh != n_held ||
        !ferry_pl_attract_replica(&z->c, z->hash, slice_id, bytes, h, nh, pull, z->eligible,
                                  z->load, z->fill, &v, &d))
        return false;
    *victim = v;
    *to = z->from_cluster[d];
    return true;
}

bool mv_zones_attract(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                      size_t n_held, size_t *victim, size_t *to)
{
    return zones_pull(z, z->gainer, slice_id, bytes, held, n_held, victim, to);
}

/* placement's pull with every shard that kept its weight as a "gainer": the replicas that may
 * move are those on the lighter shards, and they go where the slice now ranks higher */
bool mv_zones_shed(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                   size_t n_held, size_t *victim, size_t *to)
{
    return zones_pull(z, z->keeper, slice_id, bytes, held, n_held, victim, to);
}

/* The bytes shard k (cluster index) may hold under the fill target; 0: no capacity (no limit). */
static uint64_t zones_limit(const mv_zones *z, size_t k)
{
    uint64_t cap = z->c.shards[k].capacity;
    return cap ? (uint64_t)floorl((long double)cap * z->fill) : 0; /* as placement's limit */
}

bool mv_zones_even(mv_zones *z, const char *slice_id, uint64_t bytes, const size_t *held,
                   size_t n_held, size_t *victim, size_t *to)
{
    uint32_t h[64], rest[64];
    size_t nh = held_in_cluster(z, held, n_held, h), v = SIZE_MAX;
    if (z->n == 0 || !z->preferred || nh != n_held || nh == 0)
        return false;
    /* the replica on the shard furthest above its limit (relative to it) */
    double over = 1;
    for (size_t k = 0; k < nh; k++) {
        uint64_t lim = zones_limit(z, h[k]);
        double r = lim ? (double)z->load[h[k]] / (double)lim : 0;
        if (lim && z->load[h[k]] > lim && r > over)
            over = r, v = k;
    }
    if (v == SIZE_MAX)
        return false;
    size_t nr = 0;
    for (size_t k = 0; k < nh; k++)
        if (k != v)
            rest[nr++] = h[k];
    uint32_t d = ferry_pl_pick_replica(&z->c, z->hash, slice_id, bytes, rest, nr, z->preferred,
                                       z->load, z->fill);
    /* only to a preferred shard with room: a shard below the mean never rises above the target */
    if (d == FERRY_PL_NO_SHARD || !z->preferred[d] || !z->eligible[d] || !zones_limit(z, d) ||
        z->load[d] + bytes > zones_limit(z, d))
        return false;
    /* nor to a zone holding more of the slice's other replicas than the victim's zone does:
     * the zone spread stays as even as it was (the pick saw only the preferred shards' zones) */
    size_t in_d = 0, in_v = 0;
    for (size_t k = 0; k < nr; k++) {
        if (rest[k] == d)
            return false;
        in_d += z->c.shards[rest[k]].zone_id == z->c.shards[d].zone_id;
        in_v += z->c.shards[rest[k]].zone_id == z->c.shards[h[v]].zone_id;
    }
    if (in_d > in_v)
        return false;
    *victim = v;
    *to = z->from_cluster[d];
    return true;
}

/* The rebalancing plan computed from the catalog's state: the routing table as the old layout,
 * the active shards as the new cluster, then placement's own ferry_rebalance and ferry_plan_build
 * (the same steps `ferry plan` runs), so `ferry rebalance` moves exactly what `ferry plan` shows.
 * Kept apart from the catalog code because placement.h and catalog.h share type names. */
#include "flow/move_int.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/placement.h"

int mv_score(const char *hash, const char *slice_id, const char *shard, double weight,
             double *out, ferry_err *err)
{
    ferry_hash h;
    if (!ferry_hash_parse(hash, &h))
        return ferry_err_set(err, FERRY_EINVAL, "catalog: unknown placement hash '%s'", hash);
    *out = ferry_score(h, slice_id, shard, weight);
    return FERRY_OK;
}

int mv_plan(const char *hash, unsigned rf, double fill, const mv_plan_shard *shards, size_t nsh,
            const mv_plan_slice *slices, size_t nsl, mv_plan_move **out, size_t *n,
            ferry_err *err)
{
    ferry_cluster oldc, newc;
    ferry_inventory inv;
    ferry_layout old, nl;
    ferry_plan plan;
    memset(&oldc, 0, sizeof oldc);
    memset(&newc, 0, sizeof newc);
    memset(&inv, 0, sizeof inv);
    memset(&old, 0, sizeof old);
    memset(&nl, 0, sizeof nl);
    memset(&plan, 0, sizeof plan);
    *out = NULL;
    *n = 0;
    size_t *inv_to_slice = NULL;
    int rc;
    ferry_place_opts opts = FERRY_PLACE_OPTS_DEFAULT;
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
    if ((rc = ferry_cluster_init(&oldc, "routing table", err)) ||
        (rc = ferry_cluster_init(&newc, "active shards", err)) ||
        (rc = ferry_inventory_init(&inv, "catalog slices", err)))
        goto out;
    for (size_t s = 0; s < nsh; s++) {
        if (shards[s].in_old &&
            (rc = ferry_cluster_add(&oldc, shards[s].name, shards[s].weight, shards[s].capacity, 0,
                                    err)))
            goto out;
        if (shards[s].in_new &&
            (rc = ferry_cluster_add(&newc, shards[s].name, shards[s].weight, shards[s].capacity, 0,
                                    err)))
            goto out;
    }
    if (newc.n == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "no active shard left to place slices on");
        goto out;
    }
    if (nsl == 0 || oldc.n == 0)
        goto out; /* nothing placed yet: nothing to move */
    for (size_t i = 0; i < nsl; i++)
        if ((rc = ferry_inventory_add(&inv, slices[i].tenant, slices[i].split, slices[i].bytes, 0,
                                      err)))
            goto out;
    if ((rc = ferry_cluster_finish(&oldc, err)) || (rc = ferry_cluster_finish(&newc, err)) ||
        (rc = ferry_inventory_finish(&inv, err)))
        goto out;
    /* the inventory is sorted now: find each entry's input slice */
    inv_to_slice = calloc(inv.n, sizeof *inv_to_slice);
    old.replicas = calloc(inv.n, sizeof *old.replicas);
    old.shard_bytes = calloc(oldc.n, sizeof *old.shard_bytes);
    old.shard_replicas = calloc(oldc.n, sizeof *old.shard_replicas);
    if (!inv_to_slice || !old.replicas || !old.shard_bytes || !old.shard_replicas) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < inv.n; k++) {
        size_t i;
        for (i = 0; i < nsl; i++)
            if (slices[i].split == inv.slices[k].split && !strcmp(slices[i].tenant, inv.slices[k].tenant))
                break;
        inv_to_slice[k] = i;
        long s = ferry_cluster_find(&oldc, shards[slices[i].route].name);
        old.replicas[k] = s < 0 ? FERRY_NO_SHARD : (uint32_t)s;
        if (s >= 0) {
            old.shard_bytes[s] += inv.slices[k].bytes;
            old.shard_replicas[s]++;
        }
    }
    old.inv = &inv;
    old.cluster = &oldc;
    old.opts = opts;
    old.rf = 1;
    if ((rc = ferry_rebalance(&inv, &oldc, &old, &newc, &opts, &nl, err)) ||
        (rc = ferry_plan_build(&old, &nl, &plan, err)))
        goto out;
    *out = calloc(plan.moved ? plan.moved : 1, sizeof **out);
    if (!*out) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < plan.moved; k++) {
        const ferry_move *m = &plan.moves[k];
        if (!m->from || !m->to)
            continue; /* rf changes are not produced with rf 1 */
        mv_plan_move *o = &(*out)[*n];
        o->slice = inv_to_slice[m->slice];
        o->bytes = m->bytes;
        for (size_t s = 0; s < nsh; s++) {
            if (!strcmp(shards[s].name, m->from))
                o->from = s;
            if (!strcmp(shards[s].name, m->to))
                o->to = s;
        }
        (*n)++;
    }
out:
    ferry_plan_free(&plan);
    ferry_layout_free(&nl);
    free(old.replicas);
    free(old.shard_bytes);
    free(old.shard_replicas);
    free(inv_to_slice);
    ferry_inventory_free(&inv);
    ferry_cluster_free(&oldc);
    ferry_cluster_free(&newc);
    return rc;
}

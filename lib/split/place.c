/* Placing new slices for tenant registration and split raises: a thin wrapper over the placement
 * library's incremental placement (ferry_pl_place_more) that takes the catalog's records of the
 * active shards (catalog.h and placement.h side by side) and a tenant's slices with each
 * existing one's route (a ferry_shard_set), builds placement's cluster
 * and inventory, and gives back each slice's shards as indexes into the shards given. Only the slices given are scored; the
 * rest of the cluster enters as each shard's load. Pure. */
#include "ferry/catalog.h"
#include "ferry/placement.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The slots of one existing slice: the shards of its route (NULL: none) that are in the cluster
 * (a shard being drained is not: its replica is on its way off), at most rf. */
static void fixed_slots(const ferry_pl_cluster *cl, const ferry_shard_set *route, unsigned rf,
                        uint32_t *slots)
{
    unsigned k = 0;
    for (unsigned j = 0; j < rf; j++)
        slots[j] = FERRY_PL_NO_SHARD;
    for (size_t i = 0; route && i < ferry_shard_set_count(route) && k < rf; i++) {
        long s = ferry_pl_cluster_find(cl, ferry_shard_set_at(route, i));
        if (s >= 0) /* a set names no shard twice */
            slots[k++] = (uint32_t)s;
    }
}

int ferry_split_place(const ferry_shard *const *shards, size_t n_shards,
                      const uint64_t *base_load, const ferry_split_slice_in *slices,
                      size_t n_slices, const char *hash, unsigned rf, double fill,
                      uint32_t *placements, ferry_err *err)
{
    ferry_pl_cluster cl = {0};
    ferry_pl_inventory inv = {0};
    ferry_pl_layout lay = {0};
    uint32_t *fixed = NULL;
    uint64_t *load = NULL;
    size_t *inv_of = NULL;
    uint32_t *input = NULL;
    bool have_layout = false;
    ferry_pl_opts o = FERRY_PL_OPTS_DEFAULT;
    int rc = ferry_pl_cluster_init(&cl, "catalog", err);
    if (!rc)
        rc = ferry_pl_inventory_init(&inv, "catalog", err);
    for (size_t i = 0; i < n_shards && !rc; i++)
        rc = ferry_pl_cluster_add_zoned(&cl, shards[i]->name, shards[i]->weight,
                                        shards[i]->capacity, shards[i]->zone, 0, err);
    for (size_t i = 0; i < n_slices && !rc; i++)
        rc = ferry_pl_inventory_add(&inv, slices[i].tenant, slices[i].split, slices[i].bytes, 0,
                                    err);
    if (!rc)
        rc = ferry_pl_cluster_finish(&cl, err);
    if (!rc)
        rc = ferry_pl_inventory_finish(&inv, err);
    if (!rc && !ferry_hash_parse(hash, &o.hash))
        rc = ferry_err_set(err, FERRY_EINVAL, "unknown placement hash '%s'", hash);
    if (rc)
        goto out;
    o.rf = rf;
    o.fill = fill;
    o.strict = false;
    if ((rc = ferry_pl_opts_check(&o, &cl, err)))
        goto out;
    fixed = malloc((inv.n ? inv.n : 1) * rf * sizeof *fixed);
    load = calloc(cl.n, sizeof *load);
    inv_of = malloc((n_slices ? n_slices : 1) * sizeof *inv_of);
    if (!fixed || !load || !inv_of) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    /* find each input slice in the (sorted) inventory */
    for (size_t i = 0; i < n_slices; i++) {
        size_t lo = ferry_pl_inventory_find(&inv, slices[i].tenant, slices[i].split);
        inv_of[i] = lo;
        fixed_slots(&cl, slices[i].shards, rf, fixed + lo * rf);
    }
    /* base_load follows the input's shard order; the cluster is sorted by name */
    for (size_t i = 0; base_load && i < n_shards; i++)
        load[ferry_pl_cluster_find(&cl, shards[i]->name)] = base_load[i];
    rc = ferry_pl_place_more(&inv, &cl, &o, fixed, load, &lay, err);
    if (rc)
        goto out;
    have_layout = true;
    /* the cluster is sorted by name: its shard s is shards[input[s]] */
    if (!(input = malloc((cl.n ? cl.n : 1) * sizeof *input))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n_shards; i++) {
        long s = ferry_pl_cluster_find(&cl, shards[i]->name);
        assert(s >= 0 && (size_t)s < cl.n);
        input[s] = (uint32_t)i;
    }
    assert(lay.rf <= rf);
    for (size_t i = 0; i < n_slices; i++)
        for (unsigned j = 0; j < rf; j++) {
            uint32_t s = j < lay.rf ? lay.replicas[inv_of[i] * lay.rf + j] : FERRY_PL_NO_SHARD;
            placements[i * rf + j] = s == FERRY_PL_NO_SHARD ? FERRY_SPLIT_NO_SHARD : input[s];
        }
out:
    if (have_layout)
        ferry_pl_layout_free(&lay);
    free(fixed);
    free(load);
    free(inv_of);
    free(input);
    ferry_pl_inventory_free(&inv);
    ferry_pl_cluster_free(&cl);
    return rc;
}

/* Placing slices for the split manager: a thin wrapper over the placement library with plain
 * types, so callers that use the catalog (whose record types share names with placement's) can
 * place slices. Pure. */
#include "ferry/placement.h"
#include "ferry/split.h"

#include <stdio.h>
#include <string.h>

int ferry_split_place(const ferry_split_shard_in *shards, size_t n_shards,
                      const ferry_split_slice_in *slices, size_t n_slices, const char *hash,
                      unsigned rf, double fill, char *placements, size_t placement_size,
                      ferry_err *err)
{
    ferry_cluster cl = {0};
    ferry_inventory inv = {0};
    ferry_layout lay = {0};
    bool have_layout = false;
    ferry_place_opts o = FERRY_PLACE_OPTS_DEFAULT;
    int rc = ferry_cluster_init(&cl, "catalog", err);
    if (!rc)
        rc = ferry_inventory_init(&inv, "catalog", err);
    for (size_t i = 0; i < n_shards && !rc; i++)
        rc = ferry_cluster_add_zoned(&cl, shards[i].name, shards[i].weight, shards[i].capacity,
                                     shards[i].zone, 0, err);
    for (size_t i = 0; i < n_slices && !rc; i++)
        rc = ferry_inventory_add(&inv, slices[i].tenant, slices[i].split, slices[i].bytes, 0, err);
    if (!rc)
        rc = ferry_cluster_finish(&cl, err);
    if (!rc)
        rc = ferry_inventory_finish(&inv, err);
    if (!rc && !ferry_hash_parse(hash, &o.hash))
        rc = ferry_err_set(err, FERRY_EINVAL, "unknown placement hash '%s'", hash);
    if (rc)
        goto out;
    o.rf = rf;
    o.fill = fill;
    o.strict = false;
    rc = ferry_place_opts_check(&o, &cl, err);
    if (!rc)
        rc = ferry_place(&inv, &cl, &o, &lay, err);
    if (rc)
        goto out;
    have_layout = true;
    for (size_t i = 0; i < n_slices; i++) {
        /* The inventory is sorted by (tenant, split): find input slice i in it. */
        size_t lo = 0, hi = inv.n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int d = strcmp(inv.slices[mid].tenant, slices[i].tenant);
            if (!d)
                d = (inv.slices[mid].split > slices[i].split) - (inv.slices[mid].split < slices[i].split);
            if (d < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        char *dst = placements + i * placement_size;
        size_t len = 0;
        dst[0] = '\0';
        for (unsigned j = 0; j < lay.rf; j++) {
            uint32_t s = lay.replicas[lo * lay.rf + j];
            if (s == FERRY_NO_SHARD)
                continue;
            int w = snprintf(dst + len, placement_size - len, "%s%s", len ? "," : "",
                             cl.shards[s].name);
            if (w < 0 || (size_t)w >= placement_size - len) {
                rc = ferry_err_set(err, FERRY_EINVAL, "placement list too long");
                goto out;
            }
            len += (size_t)w;
        }
    }
out:
    if (have_layout)
        ferry_layout_free(&lay);
    ferry_inventory_free(&inv);
    ferry_cluster_free(&cl);
    return rc;
}

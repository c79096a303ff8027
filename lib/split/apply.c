/* Recording a tenant's new split count in the catalog, with its new slices placed and routed in
 * the same atomic batch (see ferry_split_set in include/ferry/split.h). */
#include "ferry/catalog.h"
#include "ferry/split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLACEMENT_SIZE FERRY_LIST_MAX

int ferry_split_set(ferry_catalog *cat, const char *tenant, uint32_t splits, bool create,
                    bool dry_run, ferry_split_change *change, ferry_err *err)
{
    ferry_record settings, trec;
    ferry_record_list shards = {0}, slices = {0};
    ferry_split_shard_in *sin = NULL;
    ferry_split_slice_in *lin = NULL;
    char *placements = NULL;
    ferry_batch *b = NULL;
    memset(change, 0, sizeof *change);
    snprintf(change->tenant, sizeof change->tenant, "%s", tenant);
    if (splits < 1 || splits > FERRY_SPLITS_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "tenant %s: a split count is 1..%d, not %u",
                             tenant, FERRY_SPLITS_MAX, splits);
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    ferry_record_init(&trec, FERRY_REC_TENANT);
    snprintf(trec.u.tenant.name, sizeof trec.u.tenant.name, "%s", tenant);
    int rc = ferry_catalog_get(cat, &settings, err);
    if (rc == FERRY_ENOTFOUND)
        ferry_err_prefix(err, "the catalog holds no cluster yet (run 'ferry init'): ");
    if (rc)
        goto out;
    bool exists = true;
    rc = ferry_catalog_get(cat, &trec, err);
    if (rc == FERRY_ENOTFOUND && create) {
        exists = false;
        rc = FERRY_OK;
        ferry_err_clear(err);
    } else if (rc == FERRY_ENOTFOUND) {
        ferry_err_set(err, FERRY_ENOTFOUND, "tenant %s is not registered (ferry tenant add %s)",
                      tenant, tenant);
    } else if (!rc && create) {
        rc = ferry_err_set(err, FERRY_ECONFLICT, "tenant %s already exists with %u split(s)",
                           tenant, trec.u.tenant.splits);
    }
    if (rc)
        goto out;
    uint32_t from = exists ? trec.u.tenant.splits : 0;
    change->from = from;
    change->to = splits;
    if (splits < from) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "tenant %s has %u splits; split counts only grow (rows already "
                           "written keep their split), so %u is refused",
                           tenant, from, splits);
        goto out;
    }
    if (splits == from) {
        rc = ferry_catalog_routing_version(cat, &change->routing_version, err);
        goto out;
    }
    rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SLICE, NULL, 0, &slices, err);
    if (rc)
        goto out;
    size_t n_new = splits - from;
    sin = calloc(shards.n ? shards.n : 1, sizeof *sin);
    lin = calloc(slices.n + n_new, sizeof *lin);
    placements = calloc(slices.n + n_new, PLACEMENT_SIZE);
    if (!sin || !lin || !placements) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t ns = 0;
    for (size_t i = 0; i < shards.n; i++) {
        const ferry_shard *s = &shards.items[i].u.shard;
        if (s->state != FERRY_SHARD_ACTIVE)
            continue; /* draining and gone shards take no new slices */
        sin[ns].name = s->name;
        sin[ns].weight = s->weight;
        sin[ns].capacity = s->capacity;
        sin[ns].zone = s->zone;
        ns++;
    }
    if (ns == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "no active shard to place tenant %s's slices on",
                           tenant);
        goto out;
    }
    size_t nl = 0;
    for (size_t i = 0; i < slices.n; i++) {
        const ferry_slice *s = &slices.items[i].u.slice;
        if (!strcmp(s->tenant, tenant) && s->split >= from)
            continue; /* left over from an older attempt; replaced below */
        lin[nl].tenant = s->tenant;
        lin[nl].split = s->split;
        lin[nl].bytes = s->bytes;
        nl++;
    }
    size_t first_new = nl;
    for (uint32_t k = from; k < splits; k++) {
        lin[nl].tenant = tenant;
        lin[nl].split = k;
        lin[nl].bytes = 0;
        nl++;
    }
    /* the tenant's own rf when it has one (ferry tenant set-rf), else the cluster's */
    unsigned rf = exists && trec.u.tenant.rf ? trec.u.tenant.rf : settings.u.settings.rf;
    if (rf > ns)
        rf = (unsigned)ns;
    rc = ferry_split_place(sin, ns, lin, nl, settings.u.settings.hash, rf,
                           settings.u.settings.fill, placements, PLACEMENT_SIZE, err);
    if (rc)
        goto out;
    if (dry_run) {
        rc = ferry_catalog_routing_version(cat, &change->routing_version, err);
        goto out;
    }
    b = ferry_batch_new();
    if (!b) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    trec.u.tenant.splits = splits;
    rc = exists ? ferry_batch_update(b, &trec, err) : ferry_batch_create(b, &trec, err);
    for (size_t i = first_new; i < nl && !rc; i++) {
        ferry_record s, r;
        ferry_record_init(&s, FERRY_REC_SLICE);
        snprintf(s.u.slice.tenant, sizeof s.u.slice.tenant, "%s", tenant);
        s.u.slice.split = lin[i].split;
        snprintf(s.u.slice.placement, sizeof s.u.slice.placement, "%s",
                 placements + i * PLACEMENT_SIZE);
        ferry_record_init(&r, FERRY_REC_ROUTE);
        snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", tenant);
        r.u.route.split = lin[i].split;
        snprintf(r.u.route.shards, sizeof r.u.route.shards, "%s", placements + i * PLACEMENT_SIZE);
        /* A slice or route left by a tenant that was removed by hand is replaced, not kept. */
        ferry_record old = s;
        if (ferry_catalog_get(cat, &old, NULL) == FERRY_OK)
            s.version = old.version, rc = ferry_batch_update(b, &s, err);
        else
            rc = ferry_batch_create(b, &s, err);
        ferry_record_free(&old);
        if (rc)
            break;
        old = r;
        if (ferry_catalog_get(cat, &old, NULL) == FERRY_OK)
            r.version = old.version, rc = ferry_batch_update(b, &r, err);
        else
            rc = ferry_batch_create(b, &r, err);
        ferry_record_free(&old);
    }
    ferry_commit_info info = {0};
    if (!rc)
        rc = ferry_catalog_commit(cat, b, &info, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "tenant %s changed while its splits were being set; run again: ",
                         tenant);
    if (!rc)
        change->routing_version = info.routing_version;
out:
    ferry_batch_free(b);
    free(placements);
    free(lin);
    free(sin);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&slices);
    ferry_record_free(&trec);
    ferry_record_free(&settings);
    return rc;
}

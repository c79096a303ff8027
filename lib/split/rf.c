/* A tenant's replication factor override (include/ferry/split.h, ferry_tenant_set_rf): the
 * tenant record's rf, checked against the shards a replica may be placed on. */
#include "ferry/split.h"

#include <stdio.h>

#include "ferry/catalog.h"

int ferry_tenant_set_rf(ferry_catalog *cat, const char *tenant, uint32_t rf, bool dry_run,
                        uint32_t *before, uint32_t *after, ferry_err *err)
{
    ferry_record t, st;
    ferry_record_list shards = {0};
    ferry_record_init(&t, FERRY_REC_TENANT);
    ferry_record_init(&st, FERRY_REC_SETTINGS);
    snprintf(t.u.tenant.name, sizeof t.u.tenant.name, "%s", tenant);
    int rc = ferry_catalog_get(cat, &t, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s is not registered (ferry tenant add %s)",
                           tenant, tenant);
    if (!rc)
        rc = ferry_catalog_get(cat, &st, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (rc)
        goto out;
    size_t active = 0;
    for (size_t i = 0; i < shards.n; i++)
        active += ferry_shard_placeable(shards.items[i].u.shard.state);
    if (rf > active) {
        rc = ferry_err_set(err, FERRY_EINVAL, "rf %u for tenant %s: the cluster has only %zu "
                           "active shard(s), and replicas must be on distinct shards", rf, tenant,
                           active);
        goto out;
    }
    *before = t.u.tenant.rf ? t.u.tenant.rf : st.u.settings.rf;
    *after = rf ? rf : st.u.settings.rf;
    t.u.tenant.rf = rf;
    if (!dry_run) {
        rc = ferry_catalog_update(cat, &t, err);
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "tenant %s changed meanwhile; run again: ", tenant);
    }
out:
    ferry_record_list_free(&shards);
    return rc;
}

/* The catalog side of `ferry init` (include/ferry/init.h): the cluster a config file
 * describes, written into the catalog it names in one batch. */
#include "ferry/init.h"

#include <stdio.h>
#include <string.h>

#include "ferry/catalog.h"
#include "ferry/config.h"

int ferry_init_cluster(const char *path, ferry_init_result *res, ferry_err *err)
{
    memset(res, 0, sizeof *res);
    ferry_config cfg = {0};
    ferry_cluster_config cc = {0};
    ferry_catalog *cat = NULL;
    ferry_batch *b = NULL;
    int rc = ferry_config_load(path, &cfg, err);
    if (!rc)
        rc = ferry_cluster_config_read(&cfg, &cc, err);
    if (!rc)
        rc = ferry_catalog_open(cc.catalog, &cat, err);
    if (rc)
        goto out;
    ferry_record settings;
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    rc = ferry_catalog_get(cat, &settings, err);
    bool existed = rc == FERRY_OK;
    if (rc && rc != FERRY_ENOTFOUND)
        goto out;
    rc = FERRY_OK;
    ferry_err_clear(err);
    const char *what = NULL;
    if (existed && !ferry_settings_same_fixed(&settings.u.settings, &cc.settings, &what)) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: the catalog %s already holds cluster '%s' with a different "
                           "'%s'; fixed settings cannot change after init (use a new catalog, or "
                           "restore the old value in the config)",
                           path, cc.catalog, settings.u.settings.name, what);
        goto out;
    }
    b = ferry_batch_new();
    if (!b) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (!existed) {
        settings.u.settings = cc.settings;
        rc = ferry_batch_create(b, &settings, err);
    }
    size_t shards_added = 0, tables_added = 0;
    for (size_t i = 0; i < cc.n_shards && !rc; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_SHARD);
        r.u.shard = cc.shards[i];
        if (existed && ferry_catalog_get(cat, &r, err) == FERRY_OK)
            continue;
        ferry_err_clear(err);
        r.u.shard = cc.shards[i];
        if (existed) /* joining a running cluster: active after its first rebalance */
            r.u.shard.state = FERRY_SHARD_NEW;
        rc = ferry_batch_create(b, &r, err);
        shards_added++;
    }
    for (size_t i = 0; i < cc.n_tables && !rc; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_TABLE);
        r.u.table = cc.tables[i];
        if (existed && ferry_catalog_get(cat, &r, err) == FERRY_OK)
            continue;
        ferry_err_clear(err);
        r.u.table = cc.tables[i];
        rc = ferry_batch_create(b, &r, err);
        tables_added++;
    }
    if (!rc)
        rc = ferry_catalog_commit(cat, b, NULL, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "another init ran at the same time: ");
    if (rc)
        goto out;
    snprintf(res->cluster, sizeof res->cluster, "%s", cc.settings.name);
    snprintf(res->backend, sizeof res->backend, "%s", ferry_catalog_backend(cat));
    res->created = !existed;
    res->shards_added = shards_added;
    res->tables_added = tables_added;
out:
    ferry_batch_free(b);
    ferry_catalog_close(cat);
    ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);
    return rc;
}

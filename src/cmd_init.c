/* `ferry init`: creates the cluster described by a config file in the catalog it names:
 * settings, shards and tables. Re-running it with the same fixed settings adds shards and tables
 * that are new in the file; different fixed settings are refused. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_init.h"
#include "ferry/catalog.h"
#include "ferry/config.h"

const char cmd_init_usage[] =
    "usage: ferry init --config FILE [--json]\n"
    "\n"
    "Creates the cluster described by FILE in the catalog its [cluster] catalog names: the\n"
    "fixed settings (name, hash, rf, fill, clickhouse_version, pointer_format), every\n"
    "[shard \"NAME\"] and every [table \"NAME\"]. Running it again with the same settings adds\n"
    "the shards and tables that are new in FILE and changes nothing else; a different fixed\n"
    "setting is refused (exit 2). Existing shards are changed by other commands, not by init.\n"
    "A shard added to an existing cluster is new (ferry status) until its first rebalance is\n"
    "over: until then no split raise or new tenant places a slice on it.\n"
    "\n"
    "  --config FILE   the cluster's config (default: $FERRY_CONFIG)\n"
    "  --json          print the result as JSON\n";

int cmd_init(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"json", no_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL;
    bool json = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 'j')
            json = true;
        else
            return cli_usage_error("init", "unknown option");
    }
    if (optind < argc)
        return cli_usage_error("init", "unexpected argument '%s'", argv[optind]);
    const char *path = cli_config_path(config);
    if (!path)
        return cli_usage_error("init", "needs --config FILE (or FERRY_CONFIG)");

    ferry_err err = {0};
    cli_init_result r;
    if (cli_init_cluster(path, &r, &err))
        return cli_fail("init", &err);
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:b, s:I, s:I}", "cluster", r.cluster, "catalog",
                              r.backend, "created", r.created, "shards_added",
                              (json_int_t)r.shards_added, "tables_added",
                              (json_int_t)r.tables_added);
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(o);
    } else if (!r.created) {
        printf("cluster %s already initialized in the %s catalog; added %zu shard(s) and %zu "
               "table(s)\n",
               r.cluster, r.backend, r.shards_added, r.tables_added);
    } else {
        printf("initialized cluster %s in the %s catalog: %zu shard(s), %zu table(s)\n",
               r.cluster, r.backend, r.shards_added, r.tables_added);
    }
    return 0;
}

int cli_init_cluster(const char *path, cli_init_result *res, ferry_err *err)
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

/* `ferry init`: creates the cluster described by a config file in the catalog it names:
 * settings, shards and tables. Re-running it with the same fixed settings adds shards and tables
 * that are new in the file; different fixed settings are refused. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ferry/init.h"

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
    static const struct option opts[] = {CLI_OPT_CONFIG, CLI_OPT_JSON, {NULL, 0, NULL, 0}};
    cli_common c = {0};
    int status;
    optind = 1;
    cli_next_option("init", argc, argv, opts, &c, &status); /* none of its own */
    if (status)
        return status;
    const char *path = cli_config_path(c.config);
    if (!path)
        return cli_usage_error("init", "needs --config FILE (or FERRY_CONFIG)");

    ferry_err err = {0};
    ferry_init_result r;
    if (ferry_init_cluster(path, &r, &err))
        return cli_fail("init", &err);
    if (c.json) {
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

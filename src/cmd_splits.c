/* `ferry splits`: the split manager. Reads every tenant's size and recent ingest from
 * system.parts on every shard, applies the split policy ([splits], docs/routing.md) and records
 * the raised counts, each with its new slices placed and routed. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/partition.h"
#include "ferry/split.h"

const char cmd_splits_usage[] =
    "usage: ferry splits [--dry-run] [--json] [--tenant T]... [--config FILE]\n"
    "\n"
    "Measures every registered tenant on every shard (one system.parts query per shard for\n"
    "every managed table and tenant, on each shard's first reachable replica): bytes on\n"
    "disk, and rows of today's partitions (UTC) per second since midnight (at least one\n"
    "hour) as its ingest rate. Then applies the policy of [splits] (target_slice_bytes,\n"
    "target_slice_rows_per_s, hysteresis, max_splits; docs/routing.md) and raises the split\n"
    "count of each tenant that outgrew it: the new slices are placed on the active shards\n"
    "and routed in one catalog batch per tenant. The coordinator runs the same with\n"
    "[cluster] splits_interval.\n"
    "Counts never go down. Bytes are summed over shards and divided by the cluster's rf.\n"
    "\n"
    "  --dry-run        print the decisions, change nothing\n"
    "  --tenant T       only decide for tenant T (repeatable; default: every tenant)\n"
    "  --config FILE    the cluster's config (default: $FERRY_CONFIG)\n"
    "  --json           JSON output\n";

int cmd_splits(int argc, char **argv)
{
    enum { O_TENANT = CLI_O_LAST };
    static const struct option opts[] = {CLI_OPT_CONFIG, CLI_OPT_DRY_RUN, CLI_OPT_JSON,
                                         {"tenant", required_argument, NULL, O_TENANT},
                                         {NULL, 0, NULL, 0}};
    const char *only[64];
    size_t n_only = 0;
    cli_common c = {0};
    int status;
    optind = 1;
    while (cli_next_option("splits", argc, argv, opts, &c, &status)) {
        if (n_only == 64)
            return cli_usage_error("splits", "at most 64 --tenant options");
        only[n_only++] = optarg;
    }
    if (status)
        return status;
    const char *path = cli_config_path(c.config);
    if (!path)
        return cli_usage_error("splits", "needs --config FILE (or FERRY_CONFIG)");
    ferry_err err = {0};
    json_t *report = NULL;
    ferry_splits_options o = {.config_path = path, .dry_run = c.dry_run, .only = only, .n_only = n_only};
    int rc = ferry_splits_run(&o, &report, &err);
    if (rc)
        return cli_fail("splits", &err);
    if (c.json) {
        json_dumpf(report, stdout, JSON_COMPACT);
        putchar('\n');
    } else {
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(report, "tenants"), i, t) {
            if (!json_is_true(json_object_get(t, "raise")))
                continue;
            printf("%s%s: %lld -> %lld splits (%s)\n", c.dry_run ? "(dry run) " : "",
                   json_string_value(json_object_get(t, "tenant")),
                   (long long)json_integer_value(json_object_get(t, "splits")),
                   (long long)json_integer_value(json_object_get(t, "new_splits")),
                   json_string_value(json_object_get(t, "reason")));
        }
        printf("%lld of %lld tenant(s) %s; routing version %lld\n",
               (long long)json_integer_value(json_object_get(report, "raised")),
               (long long)json_integer_value(json_object_get(report, "tenants_total")),
               c.dry_run ? "would be raised" : "raised",
               (long long)json_integer_value(json_object_get(report, "routing_version")));
    }
    json_decref(report);
    return 0;
}

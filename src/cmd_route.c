/* `ferry route`: which shard(s) serve each slice of a tenant, and the routing version. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/strutil.h"

const char cmd_route_usage[] =
    "usage: ferry route --tenant T [--split K] [--json] [--config FILE | --catalog URL]\n"
    "\n"
    "Prints the shard(s) serving each slice of tenant T (or only split K) from the routing\n"
    "table, and the routing version (it grows with every switch). --json prints the same\n"
    "document the coordinator serves to routers:\n"
    "  {\"version\":N,\"slices\":[{\"tenant\":\"T\",\"split\":0,\"shards\":[\"node1\"]}]}\n"
    "\n"
    "  --tenant T        the tenant (required)\n"
    "  --split K         one split only\n"
    "  --config FILE     the cluster's config (default: $FERRY_CONFIG)\n"
    "  --catalog URL     a catalog URL instead of the config's\n"
    "  --json            JSON output\n";

int cmd_route(int argc, char **argv)
{
    enum { O_TENANT = CLI_O_LAST, O_SPLIT };
    static const struct option opts[] = {{"tenant", required_argument, NULL, O_TENANT},
                                         {"split", required_argument, NULL, O_SPLIT},
                                         CLI_OPT_CONFIG, CLI_OPT_CATALOG, CLI_OPT_JSON,
                                         {NULL, 0, NULL, 0}};
    const char *tenant = NULL;
    int64_t split = -1;
    cli_common c = {0};
    int ch, status;
    optind = 1;
    while ((ch = cli_next_option("route", argc, argv, opts, &c, &status))) {
        uint64_t v;
        if (ch == O_TENANT)
            tenant = optarg;
        else if (!ferry_parse_u64(optarg, &v) || v > UINT32_MAX)
            return cli_usage_error("route", "--split '%s' is not a split number", optarg);
        else
            split = (int64_t)v;
    }
    if (status)
        return status;
    if (!tenant)
        return cli_usage_error("route", "needs --tenant T");
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    char *doc = NULL;
    json_t *o = NULL;
    int rc = cli_open_catalog(c.config, c.catalog, true, &cat, &err);
    if (!rc)
        rc = ferry_catalog_routing_json(cat, tenant, split, &doc, &err);
    if (rc)
        goto out;
    o = json_loads(doc, 0, NULL);
    json_t *slices = json_object_get(o, "slices");
    if (json_array_size(slices) == 0) {
        rc = ferry_err_set(&err, FERRY_ENOTFOUND,
                           split >= 0 ? "tenant %s split %lld has no route" : "tenant %s has no routes",
                           tenant, (long long)split);
        goto out;
    }
    if (c.json) {
        puts(doc);
        goto out;
    }
    printf("routing version %lld\n", (long long)json_integer_value(json_object_get(o, "version")));
    printf("%-24s %6s  %s\n", "TENANT", "SPLIT", "SHARDS");
    size_t i;
    json_t *s;
    json_array_foreach(slices, i, s) {
        printf("%-24s %6lld  ", json_string_value(json_object_get(s, "tenant")),
               (long long)json_integer_value(json_object_get(s, "split")));
        size_t j;
        json_t *sh;
        json_array_foreach(json_object_get(s, "shards"), j, sh)
            printf("%s%s", j ? "," : "", json_string_value(sh));
        putchar('\n');
    }
out:
    json_decref(o);
    free(doc);
    ferry_catalog_close(cat);
    return rc ? cli_fail("route", &err) : 0;
}

/* `ferry tier`: ages hot partitions older than a threshold into object storage as pointer
 * parts on every server (include/ferry/tier.h, docs/tiering.md), resuming unfinished jobs of the
 * journal first, and prints a summary. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/pause.h"
#include "ferry/strutil.h"
#include "ferry/tier.h"

const char cmd_tier_usage[] =
    "usage: ferry tier [--config FILE] [--older-than DURATION] [--tenant T] [--table NAME]\n"
    "                  [--server S] [--no-compact] [--dry-run] [--json] [--force]\n"
    "\n"
    "Tiers every hot partition older than the threshold on every server: FREEZE, upload of the\n"
    "frozen part files unchanged (node agent, uploader role), pointer parts in a staging table,\n"
    "ATTACH in staging, REPLACE PARTITION into the table (or ATTACH FROM + DETACH PART when the\n"
    "partition already has cold parts), verification against the frozen rows, cleanup, and the\n"
    "cold parts recorded in the catalog. Unfinished jobs of the journal are resumed first; only\n"
    "one tiering run works at a time (catalog lease \"tier\"). See docs/tiering.md.\n"
    "\n"
    "  --config FILE         the cluster's config (default: $FERRY_CONFIG)\n"
    "  --older-than DUR      age threshold, e.g. 3d, 36h (default: [cluster] hot_days); a\n"
    "                        partition's day must have ended at least DUR ago\n"
    "  --tenant T            only partitions of tenant T\n"
    "  --table NAME          only the catalog table NAME\n"
    "  --server S            only shard S\n"
    "  --no-compact          tier a partition of many small hot parts as it is (by default one\n"
    "                        of more than 16 hot parts, 1 GiB at most, is merged into one first)\n"
    "  --dry-run             list what would be tiered or resumed; change nothing\n"
    "  --json                print one JSON object\n"
    "  --force               run even though the cluster is paused (ferry pause)\n"
    "\n"
    "Exit status: 0 when every job finished, 1 when one failed (the journal keeps its state;\n"
    "a job that failed before its swap was rolled back and the partition stays hot), 2 for\n"
    "bad input.\n";

static void print_text(json_t *r)
{
    bool dry = json_is_true(json_object_get(r, "dry_run"));
    size_t i;
    json_t *j;
    if (dry) {
        printf("%-44s %-10s %s\n", "JOB", "STATE", "DAY");
        json_array_foreach(json_object_get(r, "planned"), i, j)
            printf("%-44s %-10s %lld\n", json_string_value(json_object_get(j, "id")),
                   json_is_true(json_object_get(j, "resume"))
                       ? json_string_value(json_object_get(j, "state"))
                       : "new",
                   (long long)json_integer_value(json_object_get(j, "day")));
        printf("%zu partitions would be tiered or resumed (dry run)\n",
               json_array_size(json_object_get(r, "planned")));
        return;
    }
    if (json_array_size(json_object_get(r, "jobs")))
        printf("%-44s %-8s %-8s %10s %12s %10s\n", "JOB", "STATE", "SWAP", "ROWS", "UPLOADED",
               "POINTERS");
    json_array_foreach(json_object_get(r, "jobs"), i, j)
    {
        printf("%-44s %-8s %-8s %10lld %12lld %10lld\n", json_string_value(json_object_get(j, "id")),
               json_string_value(json_object_get(j, "state")),
               json_string_value(json_object_get(j, "swap")),
               (long long)json_integer_value(json_object_get(j, "rows")),
               (long long)json_integer_value(json_object_get(j, "bytes_uploaded")),
               (long long)json_integer_value(json_object_get(j, "pointer_bytes")));
        const char *e = json_string_value(json_object_get(j, "error"));
        if (e)
            printf("    error: %s\n", e);
    }
    printf("%lld partitions tiered (%lld resumed, %lld failed), %lld bytes uploaded in %lld "
           "files, %lld pointer bytes in %lld files, %.0f ms\n",
           (long long)json_integer_value(json_object_get(r, "partitions_tiered")),
           (long long)json_integer_value(json_object_get(r, "jobs_resumed")),
           (long long)json_integer_value(json_object_get(r, "jobs_failed")),
           (long long)json_integer_value(json_object_get(r, "bytes_uploaded")),
           (long long)json_integer_value(json_object_get(r, "files_uploaded")),
           (long long)json_integer_value(json_object_get(r, "pointer_bytes")),
           (long long)json_integer_value(json_object_get(r, "pointer_files")),
           json_number_value(json_object_get(r, "wall_ms")));
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(json_object_get(r, "step_ms"), k, v)
        printf("%s%s %.0f ms", n++ ? ", " : "time per step: ", k, json_number_value(v));
    if (n)
        printf("\n");
    if (json_integer_value(json_object_get(r, "waves")))
        printf("%lld waves, %lld statements, %lld agent requests, %lld catalog writes\n",
               (long long)json_integer_value(json_object_get(r, "waves")),
               (long long)json_integer_value(json_object_get(r, "statements")),
               (long long)json_integer_value(json_object_get(r, "agent_requests")),
               (long long)json_integer_value(json_object_get(r, "catalog_writes")));
}

int cmd_tier(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"older-than", required_argument, NULL, 'o'},
                                         {"tenant", required_argument, NULL, 't'},
                                         {"table", required_argument, NULL, 'T'},
                                         {"server", required_argument, NULL, 's'},
                                         {"dry-run", no_argument, NULL, 'n'},
                                         {"no-compact", no_argument, NULL, 'C'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"force", no_argument, NULL, 'F'},
                                         {NULL, 0, NULL, 0}};
    ferry_tier_options o = {0};
    bool force = false;
    const char *config = NULL;
    bool json = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case 'o':
            if (!ferry_parse_duration(optarg, &o.older_than) || o.older_than == 0)
                return cli_usage_error("tier", "--older-than '%s' is not a positive duration "
                                       "such as 3d or 36h", optarg);
            break;
        case 't': o.tenant = optarg; break;
        case 'T': o.table = optarg; break;
        case 's': o.server = optarg; break;
        case 'n': o.dry_run = true; break;
        case 'C': o.no_compact = true; break;
        case 'j': json = true; break;
        case 'F': force = true; break;
        default: return cli_usage_error("tier", "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error("tier", "unexpected argument '%s'", argv[optind]);
    o.config_path = cli_config_path(config);
    if (!o.config_path)
        return cli_usage_error("tier", "needs --config FILE (or FERRY_CONFIG)");
    ferry_err err = {0};
    json_t *report = NULL;
    if (!force && !o.dry_run) { /* the pause (ferry pause) holds unless --force */
        ferry_catalog *cat = NULL;
        int prc = cli_open_catalog(o.config_path, NULL, true, &cat, &err);
        if (!prc)
            prc = ferry_pause_check(cat, "tier", &err);
        ferry_catalog_close(cat);
        if (prc == FERRY_ECONFLICT)
            return cli_fail("tier", &err);
        /* a catalog that cannot be read: the run says so in its own words */
        memset(&err, 0, sizeof err);
    }
    int rc = ferry_tier_run(&o, &report, &err);
    if (report) {
        if (json) {
            if (rc)
                json_object_set_new(report, "error", json_string(err.msg));
            char *s = json_dumps(report, JSON_COMPACT);
            if (s)
                printf("%s\n", s);
            free(s);
        } else {
            print_text(report);
        }
        json_decref(report);
    }
    if (rc) {
        int status = cli_fail("tier", &err);
        return report && status == 2 ? 1 : status; /* a job's EINVAL is not a usage error */
    }
    return 0;
}

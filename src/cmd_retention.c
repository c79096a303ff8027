/* `ferry retention`: removes partitions older than a keep period (or all of one tenant's data)
 * from every server, then deletes their objects once nothing references them
 * (include/ferry/retention.h, docs/operations.md). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferry/fleet.h"
#include "ferry/retention.h"
#include "ferry/strutil.h"

const char cmd_retention_usage[] =
    "usage: ferry retention --keep DURATION [--tenant T] [--dry-run] [--json] [--config FILE]\n"
    "       ferry retention --tenant T --all [--dry-run] [--json] [--config FILE]\n"
    "\n"
    "Removes expired partitions of the managed tables: the newest DURATION days (whole days,\n"
    "UTC, today included; at least [cluster] hot_days) are kept, older ones go. With --all,\n"
    "every partition of tenant T goes, hot and cold ('ferry tenant remove' uses this).\n"
    "\n"
    "Per partition, a job in the catalog's journal (kind retention) goes through:\n"
    "  SCAN    record the objects the partition's pointer files name, on every server\n"
    "  DETACH  ALTER TABLE ... DETACH PARTITION ID on every server holding it (never DROP)\n"
    "  REMOVE  remove the detached folders through the agents (objects untouched)\n"
    "  DELETE  delete the objects with the janitor role, only those that no catalog part and no\n"
    "          pointer file on any server (read live, now) references\n"
    "A job that cannot finish (a server down, objects still referenced elsewhere) stays in its\n"
    "state with the reason; the next run resumes it.\n"
    "\n"
    "  --keep D       keep period, e.g. 90d\n"
    "  --tenant T     only tenant T (must exist in the catalog)\n"
    "  --all          with --tenant: all of the tenant's data\n"
    "  --dry-run      list what would be removed; change nothing\n"
    "  --json         JSON report: cutoff, complete, jobs [{id, table, partition_id, tenant,\n"
    "                 day, servers, state, detail, deleted, kept}], problems\n"
    "  --config FILE  the cluster's config (default: $FERRY_CONFIG)\n"
    "\n"
    "Exit status: 0 when every job is DONE (or, with --dry-run, the plan was made), 1 when some\n"
    "job waits or failed, 2 for bad input.\n";

static void print_text(json_t *r)
{
    bool dry = json_is_true(json_object_get(r, "dry_run"));
    json_int_t cutoff = json_integer_value(json_object_get(r, "cutoff"));
    if (cutoff)
        printf("retention: partitions of days before %lld%s\n", (long long)cutoff,
               dry ? " (dry run: nothing changed)" : "");
    else
        printf("retention: all partitions of tenant %s%s\n",
               json_string_value(json_object_get(r, "tenant")),
               dry ? " (dry run: nothing changed)" : "");
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(r, "jobs"), i, j)
    {
        printf("  %s.%s %-10s tenant=%s day=%lld state=%s deleted=%lld kept=%zu",
               json_string_value(json_object_get(j, "database")),
               json_string_value(json_object_get(j, "table")),
               json_string_value(json_object_get(j, "partition_id")),
               json_string_value(json_object_get(j, "tenant")),
               (long long)json_integer_value(json_object_get(j, "day")),
               json_string_value(json_object_get(j, "state")),
               (long long)json_integer_value(json_object_get(j, "deleted")),
               json_array_size(json_object_get(j, "kept")));
        const char *d = json_string_value(json_object_get(j, "detail"));
        printf("%s%s\n", d && *d ? " - " : "", d ? d : "");
    }
    if (!json_array_size(json_object_get(r, "jobs")))
        printf("  nothing to remove\n");
    json_array_foreach(json_object_get(r, "problems"), i, j)
        printf("problem: %s\n", json_string_value(j));
}

int cmd_retention(int argc, char **argv)
{
    enum { O_KEEP = CLI_O_LAST, O_TENANT, O_ALL };
    static const struct option opts[] = {{"keep", required_argument, NULL, O_KEEP},
                                         {"tenant", required_argument, NULL, O_TENANT},
                                         {"all", no_argument, NULL, O_ALL},
                                         CLI_OPT_DRY_RUN, CLI_OPT_JSON, CLI_OPT_CONFIG,
                                         {NULL, 0, NULL, 0}};
    ferry_retention_options o = {0};
    cli_common c = {0};
    int ch, status;
    optind = 1;
    while ((ch = cli_next_option("retention", argc, argv, opts, &c, &status))) {
        switch (ch) {
        case O_KEEP:
            if (!ferry_parse_duration(optarg, &o.keep_s) || o.keep_s == 0)
                return cli_usage_error("retention", "--keep wants a duration such as 90d, not "
                                       "'%s'", optarg);
            break;
        case O_TENANT: o.tenant = optarg; break;
        case O_ALL: o.all = true; break;
        }
    }
    if (status)
        return status;
    if (!o.keep_s && !o.all)
        return cli_usage_error("retention", "--keep DURATION is required (or --tenant T --all)");
    o.dry_run = c.dry_run;
    ferry_err err = {0};
    ferry_fleet *fl = NULL;
    json_t *report = NULL;
    int rc = ferry_fleet_open(cli_config_path(c.config), &fl, &err);
    if (!rc)
        rc = ferry_retention_run(fl, &o, &report, &err);
    ferry_fleet_close(fl);
    if (rc)
        return cli_fail("retention", &err);
    cli_print_report(report, c.json, print_text);
    status = o.dry_run || json_is_true(json_object_get(report, "complete")) ? 0 : 1;
    json_decref(report);
    return status;
}

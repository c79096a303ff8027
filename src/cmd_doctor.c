/* `ferry doctor`: checks the safety rules on a live cluster (include/ferry/doctor.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferry/doctor.h"
#include "ferry/fleet.h"

const char cmd_doctor_usage[] =
    "usage: ferry doctor [--json] [--skip CHECK,...] [--config FILE]\n"
    "\n"
    "Checks the safety rules on the live cluster; each finding says what to fix:\n"
    "  delete_refused      a canary object (created with the uploader role) cannot be deleted\n"
    "                      with the clickhouse or uploader credential; the janitor deletes it\n"
    "  versioning          bucket versioning is on (reported 'unsupported' where the store has\n"
    "                      none, e.g. s3rver or a local directory)\n"
    "  clickhouse_version  every server runs the pinned version and reads the pointer format\n"
    "  unmanaged_cold      no unmanaged table uses a policy with an object-storage disk\n"
    "  shard_grants        the shard's ClickHouse user (the router's identity) reads and inserts\n"
    "                      the managed tables, kills queries, reads URLs, and cannot drop,\n"
    "                      truncate, delete, reach the object store or files, see secrets, back\n"
    "                      up or manage users (docs/security.md)\n"
    "  catalog_acl         a ZooKeeper catalog uses a digest ACL (auth_file)\n"
    "  object_access       [cluster] clickhouse_object_access; in read-only mode the store\n"
    "                      refuses a PUT signed with the clickhouse credential\n"
    "  tier_holds          no tier job has kept its table's merges stopped (its swap not yet\n"
    "                      verified) for over 10 minutes (warn) or an hour (fail)\n"
    "  broken_parts        no part folder of a managed table was set aside by ClickHouse as\n"
    "                      broken (its rows not served); in a staging table: warn\n"
    "\n"
    "  --skip CHECK,...  leave checks out (a lab's nodes have no access control to check)\n"
    "  --json          {ok, checks: [{check, status, server, message, fix}]}\n"
    "  --config FILE   the cluster's config (default: $FERRY_CONFIG)\n"
    "\n"
    "Exit status: 0 only when no check failed; 1 otherwise; 2 for bad input.\n";

static void print_text(json_t *report)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(report, "checks"), i, c)
    {
        const char *fix = json_string_value(json_object_get(c, "fix"));
        printf("%-12s %-19s %s\n", json_string_value(json_object_get(c, "status")),
               json_string_value(json_object_get(c, "check")),
               json_string_value(json_object_get(c, "message")));
        if (fix && strcmp(json_string_value(json_object_get(c, "status")), "pass"))
            printf("             fix: %s\n", fix);
    }
    printf("%s\n", json_is_true(json_object_get(report, "ok")) ? "doctor: all checks pass"
                                                               : "doctor: some checks FAIL");
}

int cmd_doctor(int argc, char **argv)
{
    enum { O_SKIP = CLI_O_LAST };
    static const struct option opts[] = {CLI_OPT_JSON, CLI_OPT_CONFIG,
                                         {"skip", required_argument, NULL, O_SKIP},
                                         {NULL, 0, NULL, 0}};
    cli_common c = {0};
    const char *skip = NULL;
    int ch, status;
    optind = 1;
    while ((ch = cli_next_option("doctor", argc, argv, opts, &c, &status)))
        if (ch == O_SKIP)
            skip = optarg;
    if (status)
        return status;
    ferry_err err = {0};
    ferry_fleet *fl = NULL;
    json_t *report = NULL;
    int rc = ferry_fleet_open(cli_config_path(c.config), &fl, &err);
    if (!rc)
        rc = ferry_doctor_run_skip(fl, skip, &report, &err);
    ferry_fleet_close(fl);
    if (rc)
        return cli_fail("doctor", &err);
    cli_print_report(report, c.json, print_text);
    status = json_is_true(json_object_get(report, "ok")) ? 0 : 1;
    json_decref(report);
    return status;
}

/* `ferry sweep`: compares every server's pointer files with the object store and the catalog;
 * reports orphans, dangling pointers and catalog drift, and deletes old orphans when asked
 * (include/ferry/sweep.h, docs/operations.md). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferry/fleet.h"
#include "ferry/strutil.h"
#include "ferry/sweep.h"

const char cmd_sweep_usage[] =
    "usage: ferry sweep [--json] [--delete-orphans --min-age DURATION] [--config FILE]\n"
    "\n"
    "Reads every server's pointer files (through its agent), lists the object store under\n"
    "[object_store] prefix (clickhouse role) and reads the catalog's cold parts, then reports:\n"
    "  orphans    objects no pointer file on any server and no catalog part names\n"
    "  dangling   pointer files naming an object that is missing or has another size\n"
    "  drift      the catalog lists a server for a part it does not hold (catalog_only), or a\n"
    "             server's live part names a catalog part's objects the catalog does not list\n"
    "             it for (server_only)\n"
    "The report is complete only when every server and the whole listing could be read.\n"
    "\n"
    "  --delete-orphans  delete the orphans older than --min-age with the janitor role. Nothing\n"
    "                    is deleted when the report is incomplete, when a move or job is in\n"
    "                    flight, or when a second read of the pointer files names the object.\n"
    "  --min-age D       grace period (e.g. 24h, 7d): younger objects may be uploads in flight\n"
    "                    and are never deleted. Required with --delete-orphans.\n"
    "  --json            JSON: complete, orphans, dangling (server:disk:path), drift, ...\n"
    "  --config FILE     the cluster's config (default: $FERRY_CONFIG)\n"
    "\n"
    "Exit status: 0 when the report is complete and shows no dangling pointer and no drift\n"
    "(orphans alone are not an error), 1 otherwise, 2 for bad input.\n";

static void print_text(const ferry_sweep_result *res)
{
    const ferry_sweep_report *r = &res->report;
    char b[32];
    printf("sweep: %s; %zu pointer files, %zu referenced objects\n",
           res->complete ? "complete" : "INCOMPLETE", r->n_pointer_files, r->n_referenced);
    printf("orphans: %zu (%s)\n", r->n_orphans, ferry_fmt_bytes(r->orphan_bytes, b, sizeof b));
    for (size_t i = 0; i < r->n_orphans; i++)
        printf("  orphan %s %llu bytes%s\n", r->orphans[i].key,
               (unsigned long long)r->orphans[i].size,
               r->orphans[i].old_enough ? "" : " (younger than the grace period)");
    printf("dangling: %zu\n", r->n_dangling);
    for (size_t i = 0; i < r->n_dangling; i++) {
        const ferry_sweep_dangling *d = &r->dangling[i];
        if (d->missing)
            printf("  dangling %s:%s:%s -> %s (missing)\n", d->server, d->disk, d->path, d->key);
        else
            printf("  dangling %s:%s:%s -> %s (size %llu, object has %llu)\n", d->server,
                   d->disk, d->path, d->key, (unsigned long long)d->want_size,
                   (unsigned long long)d->have_size);
    }
    printf("drift: %zu\n", r->n_drift);
    for (size_t i = 0; i < r->n_drift; i++) {
        const ferry_sweep_drift *d = &r->drift[i];
        if (d->kind == FERRY_DRIFT_CATALOG_ONLY)
            printf("  drift catalog lists %s for %s/%s/%s, which it does not hold\n", d->server,
                   d->table, d->partition_id, d->part);
        else
            printf("  drift %s holds %s/%s/%s (%s), the catalog does not list it\n", d->server,
                   d->table, d->partition_id, d->part, d->path);
    }
    if (r->n_catalog_only_keys)
        printf("objects only the catalog names (kept): %zu\n", r->n_catalog_only_keys);
    if (res->deleted || res->delete_failed)
        printf("deleted: %zu orphans (%s), %zu failed\n", res->deleted,
               ferry_fmt_bytes(res->deleted_bytes, b, sizeof b), res->delete_failed);
    size_t i;
    json_t *p;
    json_array_foreach(res->problems, i, p) printf("problem: %s\n", json_string_value(p));
}

int cmd_sweep(int argc, char **argv)
{
    enum { O_DELETE = CLI_O_LAST, O_MINAGE };
    static const struct option opts[] = {CLI_OPT_JSON,
                                         {"delete-orphans", no_argument, NULL, O_DELETE},
                                         {"min-age", required_argument, NULL, O_MINAGE},
                                         CLI_OPT_CONFIG,
                                         {NULL, 0, NULL, 0}};
    cli_common c = {0};
    const char *min_age = NULL;
    ferry_sweep_options o = {0};
    int ch, status;
    optind = 1;
    while ((ch = cli_next_option("sweep", argc, argv, opts, &c, &status))) {
        if (ch == O_DELETE)
            o.delete_orphans = true;
        else if (ch == O_MINAGE)
            min_age = optarg;
    }
    if (status)
        return status;
    if (min_age && (!ferry_parse_duration(min_age, &o.min_age_s) || o.min_age_s == 0))
        return cli_usage_error("sweep", "--min-age wants a duration greater than 0 such as 24h "
                               "or 7d, not '%s'", min_age);
    if (o.delete_orphans && !min_age)
        return cli_usage_error("sweep", "--delete-orphans needs --min-age (a grace period such "
                               "as 24h: younger objects may be uploads in flight)");
    if (min_age && !o.delete_orphans)
        return cli_usage_error("sweep", "--min-age goes with --delete-orphans");
    ferry_err err = {0};
    ferry_fleet *fl = NULL;
    int rc = ferry_fleet_open(cli_config_path(c.config), &fl, &err);
    if (rc)
        return cli_fail("sweep", &err);
    ferry_sweep_result res;
    rc = ferry_sweep_run(fl, &o, &res, &err);
    ferry_fleet_close(fl);
    if (rc) {
        ferry_sweep_result_free(&res);
        return cli_fail("sweep", &err);
    }
    if (c.json) {
        json_t *j = ferry_sweep_result_json(&res);
        cli_print_report(j, true, NULL);
        json_decref(j);
    } else {
        print_text(&res);
    }
    status = res.complete && !res.report.n_dangling && !res.report.n_drift &&
                         !res.delete_failed
                     ? 0
                     : 1;
    ferry_sweep_result_free(&res);
    return status;
}

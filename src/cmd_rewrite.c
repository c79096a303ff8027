/* `ferry rewrite`: rewrites cold partitions of a tenant with some rows erased or changed (late
 * corrections, GDPR erasure), on every server that holds them (include/ferry/rewrite.h,
 * docs/rewrite.md), resuming unfinished rewrite jobs first, and prints a summary. */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferry/rewrite.h"
#include "ferry/strutil.h"

const char cmd_rewrite_usage[] =
    "usage: ferry rewrite --tenant T [--split K] (--partition ID | --days RANGE | --all-days)\n"
    "                     (--delete-where EXPR | --update 'COL = EXPR' --where EXPR)\n"
    "                     [--dry-run] [--json] [--config FILE]\n"
    "\n"
    "Rewrites the tenant's cold partitions with the rows matching --delete-where erased (or\n"
    "COL set to EXPR where --where holds), on every server holding them (each replica). Per\n"
    "partition and server, a job in the catalog's journal (kind rewrite) goes through:\n"
    "  BUILD   the corrected partition written on the hot disk of <table>_ferry_rewrite\n"
    "          (INSERT ... SELECT from the current partition; never a mutation of the table)\n"
    "  SWAP    REPLACE PARTITION into the table: readers see the old or the new partition\n"
    "  TIER    the rebuilt partition tiered again as new objects (the ferry tier flow)\n"
    "  RECORD  the old parts' catalog records released: `ferry sweep --delete-orphans` deletes\n"
    "          their objects once ClickHouse has removed the replaced parts\n"
    "Unfinished jobs are resumed first, with the expression they were started with. Jobs run\n"
    "in batches of 8; after each job a progress line goes to stderr: k/N partitions, rows,\n"
    "elapsed time and ETA (with --json, one {\"event\":\"progress\",...} object a line).\n"
    "\n"
    "  --tenant T            the tenant (required)\n"
    "  --split K             only split K (default: every split)\n"
    "  --partition ID        one partition, by its partition_id\n"
    "  --days RANGE          YYYYMMDD or YYYYMMDD..YYYYMMDD (inclusive)\n"
    "  --all-days            every cold partition of the tenant\n"
    "  --delete-where EXPR   erase the rows where EXPR holds, e.g. \"user_id = 42\"\n"
    "  --update 'C = EXPR'   set column C to EXPR (not a partition column) ...\n"
    "  --where EXPR          ... in the rows where EXPR holds\n"
    "  --dry-run             count the rows that would change, per partition, and show a sample\n"
    "  --json                print one JSON object (progress: JSON lines on stderr)\n"
    "  --config FILE         the cluster's config (default: $FERRY_CONFIG)\n"
    "EXPR is one expression over the table's columns: no ';', no subquery, no IN <table>, no\n"
    "function reading files, URLs or dictionaries.\n"
    "\n"
    "Exit status: 0 when every job finished (or the dry run was made), 1 when one failed or no\n"
    "partition of the tenant was found (the journal keeps a job's state; run again to resume),\n"
    "2 for bad input (options, expressions, an update of a partition column).\n";

/* One line per ended job on stderr, so stdout keeps only the result (one JSON object with
 * --json) for scripts. */
static void on_progress(const ferry_rewrite_progress *p, void *arg)
{
    bool as_json = *(const bool *)arg;
    if (as_json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:s, s:s, s:s, s:s}",
                              "event", "progress", "done", (json_int_t)p->done, "total",
                              (json_int_t)p->total, "failed", (json_int_t)p->failed,
                              "rows_read", (json_int_t)p->rows_read, "rows_total",
                              (json_int_t)p->rows_total, "rows_changed",
                              (json_int_t)p->rows_changed, "elapsed_s", p->elapsed_s, "eta_s",
                              p->eta_s, "job", p->job, "server", p->server, "partition_id",
                              p->partition_id, "state", p->state);
        if (o) {
            json_dumpf(o, stderr, JSON_COMPACT);
            fputc('\n', stderr);
        }
        json_decref(o);
    } else {
        char eta[32] = "--", failed[48] = "";
        if (p->eta_s >= 0)
            snprintf(eta, sizeof eta, "%.0fs", p->eta_s);
        if (p->failed)
            snprintf(failed, sizeof failed, " (%zu failed)", p->failed);
        fprintf(stderr, "rewrite: %zu/%zu partitions%s, %" PRIu64 "/%" PRIu64 " rows read, "
                "%" PRIu64 " changed, elapsed %.1fs, ETA %s (%s %s %s)\n", p->done, p->total,
                failed, p->rows_read, p->rows_total, p->rows_changed, p->elapsed_s, eta,
                p->server, p->partition_id, p->state);
    }
    fflush(stderr);
}

static void print_text(json_t *r)
{
    bool dry = json_is_true(json_object_get(r, "dry_run"));
    size_t i;
    json_t *j;
    if (dry) {
        printf("%-10s %-24s %-40s %10s %10s\n", "SERVER", "TABLE", "PARTITION", "ROWS",
               "CHANGE");
        json_array_foreach(json_object_get(r, "planned"), i, j)
            printf("%-10s %-24s %-40s %10lld %10lld\n",
                   json_string_value(json_object_get(j, "server")),
                   json_string_value(json_object_get(j, "table")),
                   json_string_value(json_object_get(j, "partition_id")),
                   (long long)json_integer_value(json_object_get(j, "rows_before")),
                   (long long)json_integer_value(json_object_get(j, "rows_matched")));
        printf("%lld rows would change in %lld partitions (dry run: nothing changed)\n",
               (long long)json_integer_value(json_object_get(r, "rows_changed")),
               (long long)json_integer_value(json_object_get(r, "partitions")));
        json_array_foreach(json_object_get(r, "sample"), i, j)
        {
            char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
            printf("  sample: %s\n", s ? s : "");
            free(s);
        }
    } else {
        printf("%-56s %-7s %10s %10s %10s\n", "JOB", "STATE", "BEFORE", "CHANGED", "AFTER");
        json_array_foreach(json_object_get(r, "jobs"), i, j)
        {
            const char *d = json_string_value(json_object_get(j, "detail"));
            printf("%-56s %-7s %10lld %10lld %10lld%s%s\n",
                   json_string_value(json_object_get(j, "id")),
                   json_string_value(json_object_get(j, "state")),
                   (long long)json_integer_value(json_object_get(j, "rows_before")),
                   (long long)json_integer_value(json_object_get(j, "rows_matched")),
                   (long long)json_integer_value(json_object_get(j, "rows_after")),
                   d ? " - " : "", d ? d : "");
        }
        printf("%lld partitions rewritten (%lld resumed, %lld failed), %lld rows changed, "
               "%.0f ms\n",
               (long long)json_integer_value(json_object_get(r, "partitions")),
               (long long)json_integer_value(json_object_get(r, "jobs_resumed")),
               (long long)json_integer_value(json_object_get(r, "jobs_failed")),
               (long long)json_integer_value(json_object_get(r, "rows_changed")),
               json_number_value(json_object_get(r, "wall_ms")));
    }
    json_array_foreach(json_object_get(r, "skipped"), i, j)
        printf("skipped: %s %s: %s\n", json_string_value(json_object_get(j, "server")),
               json_string_value(json_object_get(j, "partition_id")),
               json_string_value(json_object_get(j, "reason")));
}

int cmd_rewrite(int argc, char **argv)
{
    enum { O_TENANT = CLI_O_LAST, O_SPLIT, O_PART, O_DAYS, O_ALL, O_DEL, O_UPD, O_WHERE };
    static const struct option opts[] = {{"tenant", required_argument, NULL, O_TENANT},
                                         {"split", required_argument, NULL, O_SPLIT},
                                         {"partition", required_argument, NULL, O_PART},
                                         {"days", required_argument, NULL, O_DAYS},
                                         {"all-days", no_argument, NULL, O_ALL},
                                         {"delete-where", required_argument, NULL, O_DEL},
                                         {"update", required_argument, NULL, O_UPD},
                                         {"where", required_argument, NULL, O_WHERE},
                                         CLI_OPT_DRY_RUN, CLI_OPT_JSON, CLI_OPT_CONFIG,
                                         {NULL, 0, NULL, 0}};
    ferry_rewrite_options o = {0};
    o.split = -1;
    cli_common c = {0};
    const char *days = NULL, *update = NULL;
    char col[128], expr[1024];
    int ch, status, selectors = 0;
    ferry_err err = {0};
    optind = 1;
    while ((ch = cli_next_option("rewrite", argc, argv, opts, &c, &status))) {
        switch (ch) {
        case O_TENANT: o.tenant = optarg; break;
        case O_SPLIT: {
            uint64_t k = 0;
            if (!ferry_parse_u64(optarg, &k) || k > 65535)
                return cli_usage_error("rewrite", "--split wants a split number, not '%s'",
                                       optarg);
            o.split = (int64_t)k;
            break;
        }
        case O_PART: o.partition_id = optarg; selectors++; break;
        case O_DAYS: days = optarg; selectors++; break;
        case O_ALL: o.all_days = true; selectors++; break;
        case O_DEL: o.delete_where = optarg; break;
        case O_UPD: update = optarg; break;
        case O_WHERE: o.where = optarg; break;
        }
    }
    if (status)
        return status;
    o.dry_run = c.dry_run;
    if (!o.tenant || !*o.tenant)
        return cli_usage_error("rewrite", "--tenant T is required");
    if (selectors != 1)
        return cli_usage_error("rewrite", "give exactly one of --partition ID, --days RANGE, "
                               "--all-days (%s)", selectors ? "several given" : "none given");
    if (!o.delete_where == !update)
        return cli_usage_error("rewrite", "give exactly one of --delete-where EXPR and --update "
                               "'COL = EXPR' --where EXPR");
    if (update && !o.where)
        return cli_usage_error("rewrite", "--update needs --where EXPR (the rows to change; "
                               "--where 1 for all of them)");
    if (o.where && !update)
        return cli_usage_error("rewrite", "--where goes with --update; to erase rows use "
                               "--delete-where EXPR");
    if (days && ferry_rewrite_days_parse(days, &o.day_from, &o.day_to, &err))
        return cli_usage_error("rewrite", "%s", err.msg);
    if (o.delete_where && ferry_rewrite_expr_check("--delete-where", o.delete_where, &err))
        return cli_usage_error("rewrite", "%s", err.msg);
    if (update) {
        if (ferry_rewrite_update_parse(update, col, sizeof col, expr, sizeof expr, &err) ||
            ferry_rewrite_expr_check("--where", o.where, &err))
            return cli_usage_error("rewrite", "%s", err.msg);
        o.update_col = col;
        o.update_expr = expr;
    }
    o.config_path = cli_config_path(c.config);
    o.progress = on_progress;
    o.progress_arg = &c.json;
    json_t *report = NULL;
    int rc = ferry_rewrite_run(&o, &report, &err);
    if (report) {
        cli_print_report(report, c.json, print_text);
        fflush(stdout);
    }
    bool ran = report != NULL; /* jobs ran: a failure is a job's (exit 1), not bad input */
    json_decref(report);
    if (rc) {
        status = cli_fail("rewrite", &err);
        return ran ? 1 : status;
    }
    return 0;
}

/* `ferry repair`: compares every replicated slice's partitions across its replicas and repairs
 * the replicas that missed writes by copying parts from the one that has them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_move.h"
#include "ferry/replica.h"
#include "ferry/strutil.h"

const char cmd_repair_usage[] =
    "usage: ferry repair [--tenant T] [--dry-run] [--grace MS] [--json] [--config FILE]\n"
    "\n"
    "For every slice with more than one replica in its route (only tenant T's with --tenant), and\n"
    "every partition of every managed table that any replica holds, compares the replicas'\n"
    "fingerprints (rows; sum, xor and distinct count of cityHash64 of every row). The replica with\n"
    "the most rows is the source; each other replica that differs is repaired from it:\n"
    "  copy-parts  its parts are a subset of the source's: the missing parts are copied (hot: the\n"
    "              part's files; cold: pointer files only) and added; nothing it holds changes\n"
    "  replace     parts differ after merges but its rows are a subset of the source's: its\n"
    "              partition is replaced by a snapshot of the source's (REPLACE PARTITION)\n"
    "  diverged    each holds rows the other lacks: reported, not repaired\n"
    "then compared again. One line per (partition, replica); exit 1 when a partition could not be\n"
    "repaired (or differs, with --dry-run) or a replica is unreachable. docs/replicas.md.\n"
    "\n"
    "  --tenant T     only tenant T's slices\n"
    "  --dry-run      compare and print the action, change nothing\n"
    "  --grace MS     wait before copying parts, for batches in flight (default 2000)\n"
    "  --json         one JSON object per line, a summary line last\n"
    "  --config FILE  the cluster's config (default: $FERRY_CONFIG)\n";

typedef struct rp_out {
    bool json;
} rp_out;

static void on_item(const ferry_repair_item *it, void *arg)
{
    const rp_out *o = arg;
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:b, s:I, "
                              "s:I, s:I, s:s}",
                              "event", "partition", "tenant", it->tenant, "split",
                              (json_int_t)it->split, "table", it->table, "partition_id",
                              it->partition_id, "source", it->source, "target", it->target,
                              "source_rows", (json_int_t)it->source_rows, "target_rows_before",
                              (json_int_t)it->target_rows_before, "target_rows_after",
                              (json_int_t)it->target_rows_after, "action", it->action,
                              "repaired", it->repaired, "parts_sent", (json_int_t)it->parts_sent,
                              "hot_copied_bytes", (json_int_t)it->hot_copied,
                              "cold_copied_bytes", (json_int_t)it->cold_copied, "detail",
                              it->detail);
        json_dumpf(j, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar('\n');
        json_decref(j);
    } else {
        printf("%s/split%u %s %s: %s -> %s  %s%s rows %llu/%llu%s%s\n", it->tenant, it->split,
               it->table[0] ? it->table : "-", it->partition_id[0] ? it->partition_id : "-",
               it->source[0] ? it->source : "-", it->target, it->action,
               it->repaired && strcmp(it->action, "in-sync") ? " (repaired)" : "",
               (unsigned long long)it->target_rows_after, (unsigned long long)it->source_rows,
               it->detail[0] ? "; " : "", it->detail);
    }
    fflush(stdout);
}

int cmd_repair(int argc, char **argv)
{
    enum { O_TENANT = CLI_O_LAST, O_GRACE };
    static const struct option opts[] = {{"tenant", required_argument, NULL, O_TENANT},
                                         {"grace", required_argument, NULL, O_GRACE},
                                         CLI_OPT_DRY_RUN, CLI_OPT_JSON, CLI_OPT_CONFIG,
                                         {NULL, 0, NULL, 0}};
    const char *tenant = NULL;
    uint64_t grace = 0;
    bool grace_given = false;
    cli_common c = {0};
    int ch, status = 0;
    optind = 1;
    while (!status && (ch = cli_next_option("repair", argc, argv, opts, &c, &status))) {
        switch (ch) {
        case O_TENANT: tenant = optarg; break;
        case O_GRACE:
            grace_given = true;
            status = cli_opt_u64("repair", "grace", optarg, 0, 600000,
                                 "milliseconds (0..600000)", &grace);
            break;
        }
    }
    if (status)
        return status;
    const bool dry = c.dry_run, json = c.json;
    if (tenant && (!*tenant || strlen(tenant) >= FERRY_NAME_MAX))
        return cli_usage_error("repair", "--tenant '%s' is not a tenant name", tenant);
    ferry_err err = {0};
    cli_move_env e;
    int rc = cli_move_env_init(&e, "repair", c.config, json, &err);
    e.opts.grace_ms = (unsigned)grace;
    e.opts.grace_given = grace_given;
    e.opts.progress = NULL;
    rp_out o = {json};
    ferry_repair_summary sum = {0};
    if (!rc)
        rc = ferry_repair_run(&e.opts, tenant, dry, on_item, &o, &sum, &err);
    if (!rc || sum.slices) {
        if (json) {
            json_t *j = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "event",
                                  "summary", "dry_run", dry, "slices", (json_int_t)sum.slices,
                                  "partitions", (json_int_t)sum.partitions, "in_sync",
                                  (json_int_t)sum.in_sync, "repaired", (json_int_t)sum.repaired,
                                  "failed", (json_int_t)sum.failed, "unreachable",
                                  (json_int_t)sum.unreachable, "busy", (json_int_t)sum.busy,
                                  "hot_copied_bytes",
                                  (json_int_t)sum.hot_copied, "cold_copied_bytes",
                                  (json_int_t)sum.cold_copied);
            json_dumpf(j, stdout, JSON_COMPACT | JSON_SORT_KEYS);
            putchar('\n');
            json_decref(j);
        } else {
            char a[32], b[32];
            printf("repair%s: %zu replicated slice(s), %zu comparison(s): %zu in sync, %zu "
                   "repaired, %zu %s, %zu unreachable, %zu busy (another flow); copied hot %s, cold "
                   "%s\n",
                   dry ? " (dry run)" : "", sum.slices, sum.partitions, sum.in_sync, sum.repaired,
                   sum.failed, dry ? "differ" : "failed", sum.unreachable, sum.busy,
                   ferry_fmt_bytes(sum.hot_copied, a, sizeof a),
                   ferry_fmt_bytes(sum.cold_copied, b, sizeof b));
        }
        fflush(stdout);
    }
    cli_move_env_free(&e);
    if (rc == FERRY_EIO && (sum.failed || sum.unreachable || sum.busy)) {
        fprintf(stderr, "ferry repair: %s\n", err.msg);
        return 1;
    }
    return rc ? cli_fail("repair", &err) : 0;
}

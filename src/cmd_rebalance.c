/* `ferry rebalance`: run the placement plan computed from the catalog (after adding, weighting
 * or draining shards): every slice whose shard the placement changes is moved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_move.h"
#include "ferry/autopilot.h"
#include "ferry/clock.h"
#include "ferry/pause.h"
#include "ferry/strutil.h"

const char cmd_rebalance_usage[] =
    "usage: ferry rebalance [--dry-run] [--max-parallel N] [--max-bytes-per-second B]\n"
    "                       [--max-bytes-per-second-per-shard B]\n"
    "                       [--batch N] [--grace MS] [--skew F] [--json] [--force]\n"
    "                       [--config FILE]\n"
    "\n"
    "Brings the catalog's inventory up to date from system.parts on every shard (slice sizes,\n"
    "new tenants), finishes unfinished moves, then computes the plan: the routing table is the\n"
    "current layout, the active shards the new cluster (an added shard gains slices, a draining\n"
    "one loses all of its own), with the same algorithm as `ferry plan`. Each move is a `ferry\n"
    "move` (docs/moves.md).\n"
    "\n"
    "  --dry-run         print the plan, move nothing; the sizes read from system.parts are\n"
    "                    planned with, not recorded (new tenants, slices and routes are)\n"
    "  --max-parallel N  moves at a time (default 1, at most 64)\n"
    "  --max-per-shard N moves reading from or writing to one shard at a time (default 2)\n"
    "  --max-bytes-per-second B   copy rate limit for the whole run, all moves together\n"
    "  --max-bytes-per-second-per-shard B   copy rate limit of each shard: the bytes it sends\n"
    "                    plus the bytes it receives, all moves together\n"
    "  --batch N         moves between the same two shards run N at a time as one batch: one\n"
    "                    freeze, one ATTACH, one MOVE PARTITION, one DETACH for all of them\n"
    "                    (default 8; 1: each move alone; a batch counts as one move for the\n"
    "                    limits)\n"
    "  --grace MS        wait after each routing switch for writes in flight (default 2000,\n"
    "                    or 0 when [cluster] routers lists the routers: their fence covers it)\n"
    "  --skew F          when the fill of the shards with a capacity spreads by more than F\n"
    "                    (0 < F <= 1, most minus least filled), place by a fill target of their\n"
    "                    mean fill plus F/2: the fullest shards give slices to the emptiest\n"
    "                    (the coordinator's [autopilot] skew)\n"
    "  --json            the plan, progress and each move as JSON lines; a summary line last\n"
    "  --force           run even though the cluster is paused (ferry pause); without it no\n"
    "                    move starts while paused (moves in flight finish)\n";

int cmd_rebalance(int argc, char **argv)
{
    enum { O_PAR = CLI_O_LAST, O_PER_SHARD, O_BPS, O_SHARD_BPS, O_GRACE, O_BATCH, O_FORCE,
           O_SKEW };
    static const struct option opts[] = {{"max-parallel", required_argument, NULL, O_PAR},
                                         {"max-per-shard", required_argument, NULL, O_PER_SHARD},
                                         {"max-bytes-per-second", required_argument, NULL, O_BPS},
                                         {"max-bytes-per-second-per-shard", required_argument,
                                          NULL, O_SHARD_BPS},
                                         {"grace", required_argument, NULL, O_GRACE},
                                         {"batch", required_argument, NULL, O_BATCH},
                                         {"force", no_argument, NULL, O_FORCE},
                                         {"skew", required_argument, NULL, O_SKEW},
                                         CLI_OPT_DRY_RUN, CLI_OPT_JSON, CLI_OPT_CONFIG,
                                         {NULL, 0, NULL, 0}};
    uint64_t par = 1, per_shard = 2, bps = 0, shard_bps = 0, grace = 0, batch = FERRY_AP_MOVE_BATCH;
    bool grace_given = false, force = false;
    double skew = 0;
    cli_common o = {0};
    int ch, status = 0;
    optind = 1;
    while (!status && (ch = cli_next_option("rebalance", argc, argv, opts, &o, &status))) {
        switch (ch) {
        case O_FORCE: force = true; break;
        case O_PAR:
            status = cli_opt_u64("rebalance", "max-parallel", optarg, 1, 64, "1..64", &par);
            break;
        case O_PER_SHARD:
            status = cli_opt_u64("rebalance", "max-per-shard", optarg, 1, 64, "1..64", &per_shard);
            break;
        case O_BPS: status = cli_opt_size("rebalance", "max-bytes-per-second", optarg, &bps); break;
        case O_SHARD_BPS:
            status = cli_opt_size("rebalance", "max-bytes-per-second-per-shard", optarg,
                                  &shard_bps);
            break;
        case O_SKEW:
            if (!ferry_parse_double(optarg, &skew) || !(skew > 0 && skew <= 1))
                status = cli_usage_error("rebalance", "--skew '%s' is not a fill spread "
                                         "(0 < F <= 1)", optarg);
            break;
        case O_BATCH:
            status = cli_opt_u64("rebalance", "batch", optarg, 1, 64, "1..64", &batch);
            break;
        case O_GRACE:
            grace_given = true;
            status = cli_opt_u64("rebalance", "grace", optarg, 0, 600000,
                                 "milliseconds (0..600000)", &grace);
            break;
        }
    }
    if (status)
        return status;
    const bool dry = o.dry_run, json = o.json;
    ferry_err err = {0};
    cli_move_env e;
    ferry_catalog *cat = NULL;
    ferry_rebalance_plan plan = {0};
    char (*ids)[64] = NULL;
    size_t n = 0, done = 0, failed = 0, resumed = 0;
    double t0 = ferry_clock_s();
    json_t *results = json_array();
    int rc = cli_move_env_init(&e, "rebalance", o.config, json, &err);
    e.opts.grace_ms = (unsigned)grace;
    e.opts.grace_given = grace_given;
    e.batch = (unsigned)batch;
    /* also for the unfinished moves resumed first, one at a time: each is its shards' only move */
    e.opts.max_bytes_per_second = bps && (!shard_bps || bps < shard_bps) ? bps : shard_bps;
    e.force = force;
    if (!rc)
        rc = ferry_catalog_open(e.catalog_url, &cat, &err);
    if (!rc && !force && !dry) /* the pause (ferry pause) holds unless --force */
        rc = ferry_pause_check(cat, "rebalance", &err);
    /* a dry run writes no sizes: its plan uses the servers' (ferry_inventory_sync_dry) */
    ferry_slice_sizes sizes = {0};
    if (!rc)
        rc = dry ? ferry_inventory_sync_dry(cat, &e.opts, NULL, &sizes, &err)
                 : ferry_inventory_sync(cat, &e.opts, NULL, &err);
    /* finish what an earlier run left */
    if (!rc && !dry)
        rc = ferry_move_unfinished(cat, &ids, &n, &err);
    for (size_t i = 0; !rc && i < n; i++) {
        ferry_move_result res;
        rc = ferry_move_run(&e.opts, ids[i], &res, &err);
        cli_move_print_result(&e, &res, rc, &err);
        json_array_append_new(results, cli_move_result_json(&res));
        resumed++;
    }
    if (!rc && n)
        rc = ferry_inventory_sync(cat, &e.opts, NULL, &err);
    if (!rc)
        rc = ferry_rebalance_plan_compute_sized(cat, skew, &sizes, &plan, &err);
    ferry_slice_sizes_free(&sizes);
    ferry_catalog_close(cat);
    cat = NULL;
    if (rc)
        goto out;
    if (json) {
        json_t *pj = cli_plan_json(&plan);
        json_object_set_new(pj, "event", json_string("plan"));
        json_dumpf(pj, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar('\n');
        json_decref(pj);
    } else {
        cli_plan_print(&plan);
    }
    fflush(stdout);
    if (dry)
        goto out;
    rc = cli_run_plan(&e, &plan, (unsigned)par, (unsigned)per_shard, bps, shard_bps, &done,
                      &failed, results, &err);
    if (!rc && !failed) {
        /* new shards the plan no longer fills are active from now on, and re-weighted ones
         * it no longer moves slices to or from are balanced for their weight */
        ferry_rebalance_plan again = {0};
        rc = ferry_catalog_open(e.catalog_url, &cat, &err);
        if (!rc)
            rc = ferry_rebalance_plan_compute(cat, &again, &err);
        if (!rc)
            rc = ferry_shards_settle(cat, &again, NULL, &err);
        ferry_rebalance_plan_free(&again);
        ferry_catalog_close(cat);
        cat = NULL;
    }
    double secs = ferry_clock_s() - t0;
    uint64_t hb = 0, hc = 0, cb = 0, cc = 0;
    size_t k;
    json_t *r;
    json_array_foreach(results, k, r)
    {
        hb += (uint64_t)json_integer_value(json_object_get(r, "hot_bytes"));
        hc += (uint64_t)json_integer_value(json_object_get(r, "hot_copied_bytes"));
        cb += (uint64_t)json_integer_value(json_object_get(r, "cold_bytes"));
        cc += (uint64_t)json_integer_value(json_object_get(r, "cold_copied_bytes"));
    }
    if (json) {
        json_t *s = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "event",
                              "summary", "planned", (json_int_t)plan.n_moves, "moves",
                              (json_int_t)done, "failed", (json_int_t)failed, "resumed",
                              (json_int_t)resumed, "hot_bytes", (json_int_t)hb,
                              "hot_copied_bytes", (json_int_t)hc, "cold_bytes", (json_int_t)cb,
                              "cold_copied_bytes", (json_int_t)cc, "wall_seconds", secs);
        json_dumpf(s, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar('\n');
        json_decref(s);
    } else {
        char a[32], b[32], c[32], d[32];
        printf("rebalance: %zu of %zu moves done, %zu failed; cold %s real, %s copied; hot %s "
               "real, %s copied; %.1fs\n",
               done, plan.n_moves, failed, ferry_fmt_bytes(cb, a, sizeof a),
               ferry_fmt_bytes(cc, b, sizeof b), ferry_fmt_bytes(hb, c, sizeof c),
               ferry_fmt_bytes(hc, d, sizeof d), secs);
    }
out:
    json_decref(results);
    free(ids);
    ferry_rebalance_plan_free(&plan);
    ferry_catalog_close(cat);
    cli_move_env_free(&e);
    return rc ? cli_fail("rebalance", &err) : 0;
}

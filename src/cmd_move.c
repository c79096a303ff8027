/* `ferry move`: move one slice of a tenant to another shard (or resume a move), journaled and
 * verified (docs/moves.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_move.h"
#include "ferry/cache_warm.h"
#include "ferry/pause.h"
#include "ferry/strutil.h"

const char cmd_move_usage[] =
    "usage: ferry move --tenant T --split K [--from SHARD] --to SHARD [--json] [--config FILE]\n"
    "                  [--grace MS] [--max-bytes-per-second B] [--force] [--warm-cache]\n"
    "       ferry move --resume ID|all [--json] [--config FILE] [--force]\n"
    "\n"
    "Moves slice K of tenant T to SHARD: cold partitions travel as pointer files (object storage\n"
    "is not touched), hot ones as part files sent agent to agent; every partition is verified\n"
    "(fingerprints, part checksums) before the route switches, writes to the slice go on during\n"
    "the move, and the old server's copy is detached and removed at the end. The move is\n"
    "journaled in the catalog: if it stops (a crash, a server down), the same command or\n"
    "--resume continues it. docs/moves.md describes every state.\n"
    "\n"
    "  --tenant T, --split K, --to SHARD   the slice and where it goes\n"
    "  --from SHARD     which replica moves, for a slice with several (default: the first\n"
    "                   shard of its route); the others stay\n"
    "  --resume ID|all  continue an unfinished move (all: every one, oldest first)\n"
    "  --grace MS       wait after the routing switch for writes in flight (default 2000,\n"
    "                   or 0 when [cluster] routers lists the routers: their fence covers it)\n"
    "  --max-bytes-per-second B   limit the copy rate (suffixes K M G)\n"
    "  --json           progress and the result as JSON lines on stdout\n"
    "  --config FILE    the cluster's config (default $FERRY_CONFIG)\n"
    "  --force          move even though the cluster is paused (ferry pause)\n"
    "  --warm-cache     for a target whose cold disk has a filesystem cache: before the move,\n"
    "                   note what the other servers' caches hold of the managed tables (cold\n"
    "                   partitions and columns); after it, read those columns of the slice on\n"
    "                   the target, so its first queries find them cached (docs/moves.md)\n"
    "\n"
    "Exit status: 0 done, 2 bad input (unknown tenant or shard, moving to the current shard),\n"
    "1 a failure (the message says whether it was rolled back or can be resumed).\n";

int cmd_move(int argc, char **argv)
{
    enum { O_FORCE = CLI_O_LAST, O_WARM, O_TENANT, O_SPLIT, O_TO, O_FROM, O_RESUME, O_GRACE,
           O_BPS };
    static const struct option opts[] = {{"force", no_argument, NULL, O_FORCE},
                                         {"warm-cache", no_argument, NULL, O_WARM},
                                         {"tenant", required_argument, NULL, O_TENANT},
                                         {"split", required_argument, NULL, O_SPLIT},
                                         {"to", required_argument, NULL, O_TO},
                                         {"from", required_argument, NULL, O_FROM},
                                         {"resume", required_argument, NULL, O_RESUME},
                                         {"grace", required_argument, NULL, O_GRACE},
                                         {"max-bytes-per-second", required_argument, NULL, O_BPS},
                                         CLI_OPT_JSON, CLI_OPT_CONFIG, {NULL, 0, NULL, 0}};
    const char *tenant = NULL, *to = NULL, *from = NULL, *resume = NULL;
    uint64_t split = UINT64_MAX, grace = 0, bps = 0;
    bool grace_given = false, force = false, warm = false;
    cli_common c = {0};
    int ch, status = 0;
    optind = 1;
    while (!status && (ch = cli_next_option("move", argc, argv, opts, &c, &status))) {
        switch (ch) {
        case O_TENANT: tenant = optarg; break;
        case O_TO: to = optarg; break;
        case O_FROM: from = optarg; break;
        case O_RESUME: resume = optarg; break;
        case O_FORCE: force = true; break;
        case O_WARM: warm = true; break;
        case O_SPLIT:
            status = cli_opt_u64("move", "split", optarg, 0, UINT32_MAX, "a split number", &split);
            break;
        case O_GRACE:
            grace_given = true;
            status = cli_opt_u64("move", "grace", optarg, 0, 600000, "milliseconds (0..600000)",
                                 &grace);
            break;
        case O_BPS: status = cli_opt_size("move", "max-bytes-per-second", optarg, &bps); break;
        }
    }
    if (status)
        return status;
    if (!resume && (!tenant || split == UINT64_MAX || !to))
        return cli_usage_error("move", "needs --tenant T --split K --to SHARD (or --resume ID)");
    if (resume && (tenant || to || from))
        return cli_usage_error("move", "--resume takes no --tenant/--split/--from/--to");
    if (resume && warm)
        return cli_usage_error("move", "--warm-cache goes with --tenant/--split/--to");

    ferry_err err = {0};
    cli_move_env e;
    ferry_catalog *cat = NULL;
    ferry_fleet *fl = NULL;
    json_t *hot = NULL;
    char (*ids)[64] = NULL;
    size_t n = 0;
    int rc = cli_move_env_init(&e, "move", c.config, c.json, &err);
    e.opts.grace_ms = (unsigned)grace;
    e.opts.grace_given = grace_given;
    e.opts.max_bytes_per_second = bps;
    if (!rc)
        rc = ferry_catalog_open(e.catalog_url, &cat, &err);
    if (!rc && !force) /* the pause (ferry pause) holds unless --force */
        rc = ferry_pause_check(cat, "move", &err);
    if (rc)
        goto out;
    /* the hot-list before the move: its cleanup takes the source's pointer files, which map
     * the source's cache entries to partitions and columns */
    if (warm && ((rc = ferry_fleet_open(cli_config_path(c.config), &fl, &err)) ||
                 (rc = ferry_cache_hotlist(fl, to, &hot, &err))))
        goto out;
    if (resume) {
        if (!strcmp(resume, "all")) {
            rc = ferry_move_unfinished(cat, &ids, &n, &err);
        } else {
            ids = calloc(1, sizeof *ids);
            if (!ids) {
                rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            snprintf(ids[0], sizeof ids[0], "%s", resume);
            n = 1;
        }
    } else {
        ferry_sync_summary s;
        rc = ferry_inventory_sync(cat, &e.opts, &s, &err);
        ids = calloc(1, sizeof *ids);
        if (!rc && !ids)
            rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
        bool resumed = false;
        if (!rc)
            rc = ferry_move_begin_from(&e.opts, tenant, (uint32_t)split, from, to, false, ids[0],
                                       &resumed, &err);
        if (!rc)
            n = 1;
    }
    ferry_catalog_close(cat);
    cat = NULL;
    for (size_t i = 0; !rc && i < n; i++) {
        ferry_move_result res;
        rc = ferry_move_run(&e.opts, ids[i], &res, &err);
        cli_move_print_result(&e, &res, rc, &err);
        if (!rc && res.state == FERRY_MOVE_FAILED)
            rc = ferry_err_set(&err, FERRY_EIO, "move %s had already FAILED", ids[i]);
    }
    if (!rc && warm) {
        json_t *rep = NULL;
        if ((rc = ferry_cache_warm(fl, to, tenant, (uint32_t)split, hot, &rep, &err)) == 0) {
            json_object_set_new(rep, "event", json_string("cache_warm"));
            if (c.json) {
                json_dumpf(rep, stdout, JSON_COMPACT | JSON_SORT_KEYS);
                putchar('\n');
            } else {
                printf("cache of %s warmed: %lld partitions, %lld columns, %.0f ms, %lld bytes "
                       "read from the store\n", to,
                       (long long)json_integer_value(json_object_get(rep, "partitions")),
                       (long long)json_integer_value(json_object_get(rep, "columns")),
                       json_number_value(json_object_get(rep, "ms")),
                       (long long)json_integer_value(json_object_get(rep, "read_from_store_bytes")));
            }
            fflush(stdout);
        }
        json_decref(rep);
    }
out:
    json_decref(hot);
    ferry_fleet_close(fl);
    free(ids);
    ferry_catalog_close(cat);
    cli_move_env_free(&e);
    return rc ? cli_fail("move", &err) : 0;
}

/* `ferry demo`: the options and the printed result of the demo (include/ferry/demo.h, run by
 * lib/flow/demo.c; docs/demo.md). Progress lines go to stderr, the table (or with --json one
 * JSON object) to stdout. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "demo.h"
#include "ferry/demo.h"
#include "ferry/strutil.h"

const char cmd_demo_usage[] =
    "usage: ferry demo [--json] [--dir DIR [--keep]] [--tenants N] [--days D] [--cold-days C]\n"
    "                  [--rows-per-day R] [--max-parallel P] [--batch N] [--libchdb PATH]\n"
    "                  [--object-store local|s3 --s3-endpoint URL --s3-bucket B\n"
    "                   --s3-access-key-file F --s3-secret-key-file F [--s3-prefix P]]\n"
    "       ferry demo --placement-only [--hash sha256|xxh3] [--json]\n"
    "\n"
    "Runs ferry's main job in a lab on this machine (docs/demo.md): starts 3 ClickHouse nodes,\n"
    "sets up the catalog, registers N tenants of very different sizes (Zipf-skewed, 1 to 8\n"
    "splits, placed by weighted rendezvous hashing), ingests D days of rows on the node that\n"
    "serves each slice, tiers the oldest C days into the object store, adds a 4th node,\n"
    "rebalances with the move flow, checks every tenant's row count and sums against what was\n"
    "ingested, prints what moved (real size vs bytes actually copied) and stops the lab.\n"
    "Progress goes to stderr, the table (or with --json one JSON object) to stdout, the\n"
    "components' log lines to DIR/ferry.log (kept with --keep or when the demo fails).\n"
    "\n"
    "  --tenants N        tenants (default 200; 2..2000)\n"
    "  --days D           days of rows, ending yesterday (default 4; 2..30)\n"
    "  --cold-days C      the oldest C days are tiered (default D - 2, at least 1; < D)\n"
    "  --rows-per-day R   rows a day of the largest tenant (default 200000); tenant k gets\n"
    "                     about R / k^0.9, at least R / 200 and 20\n"
    "  --max-parallel P   moves at a time (default 8; 1..16)\n"
    "  --batch N          moves between the same two shards run N at a time as one batch\n"
    "                     (default 8; 1: each move alone; 1..64)\n"
    "  --dir DIR          the lab's directory (must be new or empty; default a temporary one,\n"
    "                     removed at the end)\n"
    "  --keep             leave the lab running in DIR (needs --dir); prints how to stop it\n"
    "  --libchdb PATH     the embedded ClickHouse library (default: $FERRY_LIBCHDB or the cache)\n"
    "  --object-store s3 ...   the cold disk on S3 instead of a local blob directory (the\n"
    "                     options of `ferry lab up`)\n"
    "  --placement-only   only the in-memory placement experiment (1,000 tenants, 3 shards + 1)\n"
    "  --json             one JSON object on stdout instead of the table\n";

static void print_progress(double elapsed_s, const char *line, void *arg)
{
    (void)arg;
    fprintf(stderr, "[%6.1fs] %s\n", elapsed_s, line);
}

static int parse_uint(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
    uint64_t x;
    if (!ferry_parse_u64(v, &x) || x < lo || x > hi)
        return cli_usage_error("demo", "%s wants a number from %u to %u, not '%s'", opt, lo, hi,
                               v);
    *out = (unsigned)x;
    return 0;
}

static void print_table(const ferry_demo_options *o, const ferry_demo_result *r)
{
    char a[32], b[32], c[32], e[32];
    printf("ferry demo: %u tenants (1 to %u splits, %zu slices), %u days of rows (%llu rows), "
           "the oldest %u tiered, then node4 added\n\n",
           o->tenants, r->max_splits, r->slices, o->days,
           (unsigned long long)r->total_rows, o->cold_days);
    printf("rebalance: %zu slices of %zu tenants moved, %u at a time, in %.1f s\n\n",
           r->moves_done, r->moved_tenants, o->parallel, r->rebalance_s);
    char cold_what[64], hot_what[64], cold_size[64], hot_size[64], cold_copy[96], hot_copy[96];
    snprintf(cold_what, sizeof cold_what, "%zu cold parts (%u oldest days)", r->cold_parts,
             o->cold_days);
    snprintf(hot_what, sizeof hot_what, "%zu hot parts (%u newest days)", r->hot_parts,
             o->days - o->cold_days);
    snprintf(cold_size, sizeof cold_size, "%s in object storage",
             ferry_fmt_bytes(r->cold_bytes, a, sizeof a));
    snprintf(hot_size, sizeof hot_size, "%s on local disk",
             ferry_fmt_bytes(r->hot_bytes, b, sizeof b));
    snprintf(cold_copy, sizeof cold_copy, "%s of pointer files (%.2f%%)",
             ferry_fmt_bytes(r->cold_copied, c, sizeof c),
             r->cold_bytes ? 100.0 * (double)r->cold_copied / (double)r->cold_bytes : 0.0);
    snprintf(hot_copy, sizeof hot_copy, "%s, copied as-is",
             ferry_fmt_bytes(r->hot_copied, e, sizeof e));
    printf("%-34s %-28s %s\n", "What moved", "Real data size", "What was actually copied");
    printf("%-34s %-28s %s\n", cold_what, cold_size, cold_copy);
    printf("%-34s %-28s %s\n", hot_what, hot_size, hot_copy);
    printf("\nverified: %u tenants' rows and sum(v) as ingested, every slice only on its routed "
           "shard, %zu sampled rows in their key's split: %zu failure%s\n",
           o->tenants, r->split_checked, r->verify_failures,
           r->verify_failures == 1 ? "" : "s");
    if (r->verify_failures)
        printf("first failure: %s\n", r->first_failure);
    printf("tiering: %zu partitions, %s uploaded, %s of pointer files written\n", r->tiered,
           ferry_fmt_bytes(r->tier_uploaded, a, sizeof a),
           ferry_fmt_bytes(r->tier_pointer_bytes, b, sizeof b));
    printf("wall time: %.1f s\n", r->wall_s);
}

int cmd_demo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--placement-only")) {
            for (int j = i; j + 1 < argc; j++)
                argv[j] = argv[j + 1];
            return demo_placement_run(argc - 1, argv);
        }
    enum { O_JSON = 256, O_DIR, O_KEEP, O_TENANTS, O_DAYS, O_COLD, O_ROWS, O_PAR, O_BATCH, O_LIB, O_STORE,
           O_ENDPOINT, O_BUCKET, O_PREFIX, O_AKF, O_SKF };
    static const struct option opts[] = {{"json", no_argument, NULL, O_JSON},
                                         {"dir", required_argument, NULL, O_DIR},
                                         {"keep", no_argument, NULL, O_KEEP},
                                         {"tenants", required_argument, NULL, O_TENANTS},
                                         {"days", required_argument, NULL, O_DAYS},
                                         {"cold-days", required_argument, NULL, O_COLD},
                                         {"rows-per-day", required_argument, NULL, O_ROWS},
                                         {"max-parallel", required_argument, NULL, O_PAR},
                                         {"batch", required_argument, NULL, O_BATCH},
                                         {"libchdb", required_argument, NULL, O_LIB},
                                         {"object-store", required_argument, NULL, O_STORE},
                                         {"s3-endpoint", required_argument, NULL, O_ENDPOINT},
                                         {"s3-bucket", required_argument, NULL, O_BUCKET},
                                         {"s3-prefix", required_argument, NULL, O_PREFIX},
                                         {"s3-access-key-file", required_argument, NULL, O_AKF},
                                         {"s3-secret-key-file", required_argument, NULL, O_SKF},
                                         {NULL, 0, NULL, 0}};
    ferry_demo_options o = {.tenants = 200, .days = 4, .parallel = 8, .rows_per_day = 200000,
                            .progress = print_progress};
    bool cold_given = false, json = false;
    int ch, bad;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case O_JSON: json = true; break;
        case O_DIR: o.dir = optarg; break;
        case O_KEEP: o.keep = true; break;
        case O_TENANTS:
            if ((bad = parse_uint("--tenants", optarg, 2, 2000, &o.tenants)))
                return bad;
            break;
        case O_DAYS:
            if ((bad = parse_uint("--days", optarg, 2, 30, &o.days)))
                return bad;
            break;
        case O_COLD:
            if ((bad = parse_uint("--cold-days", optarg, 1, 29, &o.cold_days)))
                return bad;
            cold_given = true;
            break;
        case O_PAR:
            if ((bad = parse_uint("--max-parallel", optarg, 1, 16, &o.parallel)))
                return bad;
            break;
        case O_BATCH:
            if ((bad = parse_uint("--batch", optarg, 1, 64, &o.batch)))
                return bad;
            break;
        case O_ROWS:
            if (!ferry_parse_u64(optarg, &o.rows_per_day) || o.rows_per_day < 100 ||
                o.rows_per_day > 100000000)
                return cli_usage_error("demo", "--rows-per-day wants a number from 100 to "
                                               "100000000, not '%s'", optarg);
            break;
        case O_LIB: o.lab.libchdb = optarg; break;
        case O_STORE: o.lab.object_store = optarg; break;
        case O_ENDPOINT: o.lab.s3_endpoint = optarg; break;
        case O_BUCKET: o.lab.s3_bucket = optarg; break;
        case O_PREFIX: o.lab.s3_prefix = optarg; break;
        case O_AKF: o.lab.s3_access_key_file = optarg; break;
        case O_SKF: o.lab.s3_secret_key_file = optarg; break;
        default:
            return cli_usage_error("demo", "unknown option or missing value: %s",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("demo", "unexpected argument '%s'", argv[optind]);
    if (!cold_given)
        o.cold_days = o.days > 2 ? o.days - 2 : 1;
    ferry_err err = {0, ""};
    if (ferry_demo_check(&o, &err))
        return cli_usage_error("demo", "%s", err.msg);
    ferry_demo_result r;
    int rc = ferry_demo_run(&o, &r, &err);
    if (rc) {
        cli_fail("demo", &err);
        if (r.lab_started || r.dir[0])
            fprintf(stderr, "ferry demo: the logs are in %s (ferry.log, node*/node.log)%s\n",
                    r.dir, r.dir_kept ? "; the directory is kept for inspection" : "");
    } else if (json) {
        json_t *j = ferry_demo_result_json(&o, &r);
        json_dumpf(j, stdout, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
        putchar('\n');
        json_decref(j);
    } else {
        print_table(&o, &r);
    }
    fflush(stdout);
    if (r.lab_kept) {
        fprintf(stderr,
                "ferry demo: the lab keeps running in %s\n"
                "  ferry status --config %s\n"
                "  ferry rebalance --config %s --dry-run\n"
                "  ferry lab status --dir %s\n",
                r.dir, r.conf, r.conf, r.dir);
        for (size_t i = 0; i < r.n_nodes; i++)
            fprintf(stderr, "  ferry query --url %s 'SELECT tenant, count() FROM %s GROUP BY "
                    "tenant'\n", r.node_urls[i], FERRY_DEMO_TABLE);
        fprintf(stderr, "  stop it: ferry lab down --dir %s\n", r.dir);
    }
    size_t failures = r.verify_failures;
    ferry_demo_result_free(&r);
    return rc || failures ? 1 : 0;
}

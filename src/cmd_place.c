/* `ferry place`: where every slice lives on a cluster, one line per slice (or JSON). */
#include "cli.h"
#include "cli_placement.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_place_usage[] =
    "usage: ferry place --slices SLICES.tsv --shards SHARDS.tsv [--hash sha256|xxh3] [--rf N]\n"
    "                   [--fill F] [--threads N] [--json] [--scores]\n"
    "\n"
    "Places every slice (one split of one tenant) on the cluster with weighted rendezvous\n"
    "hashing, keeping each shard below its fill target, a tenant's splits on distinct shards\n"
    "and each slice's rf replicas on distinct shards. Prints one line per slice, sorted by\n"
    "tenant and split:  tenant<TAB>split<TAB>shard[,shard...]  (best-scoring shard first).\n"
    "\n"
    "  --slices FILE   tenant<TAB>split<TAB>bytes per line ('#' starts a comment)\n"
    "  --shards FILE   name<TAB>weight[<TAB>capacity_bytes] per line\n"
    "  --hash H        rendezvous hash, a cluster setting chosen once: sha256 (default) or xxh3\n"
    "  --rf N          replicas per slice (default 1, at most the number of shards)\n"
    "  --fill F        fill target in (0, 1] (default 0.85): a shard holds at most F x capacity\n"
    "  --threads N     threads for scoring (default: all cores); the output does not change\n"
    "  --json          one JSON object: placements, per-shard totals\n"
    "  --scores        debugging: instead of placing, print every slice/shard pair as\n"
    "                  slice_id<TAB>shard<TAB>hash (16 hex digits)<TAB>score (%.17g)\n"
    "\n"
    "Bad input (malformed line, wrong column count, duplicate slice or shard, weight <= 0, no\n"
    "shards, rf above the shard count, unknown hash, fill outside (0, 1], a cluster too small\n"
    "for the fill target) prints FILE:LINE and the reason on stderr and exits 2. See\n"
    "docs/placement.md for the algorithm and its guarantees.\n";

static int print_scores(const ferry_pl_inventory *inv, const ferry_pl_cluster *cl, ferry_hash hash)
{
    char id[FERRY_SLICE_ID_MAX], key[FERRY_SLICE_ID_MAX + FERRY_NAME_MAX + 1];
    for (size_t i = 0; i < inv->n; i++) {
        ferry_pl_slice_id(&inv->slices[i], id, sizeof id);
        for (size_t s = 0; s < cl->n; s++) {
            int len = snprintf(key, sizeof key, "%s:%s", id, cl->shards[s].name);
            uint64_t h = ferry_hash64(hash, key, (size_t)len);
            printf("%s\t%s\t%016" PRIx64 "\t%.17g\n", id, cl->shards[s].name, h,
                   ferry_score_from_hash(h, cl->shards[s].weight));
        }
    }
    return 0;
}

static void print_text(const ferry_pl_layout *l)
{
    uint32_t ranked[64];
    for (size_t i = 0; i < l->inv->n; i++) {
        const ferry_pl_slice *sl = &l->inv->slices[i];
        ferry_pl_layout_ranked(l, i, ranked);
        printf("%s\t%u\t", sl->tenant, sl->split);
        for (unsigned j = 0; j < l->rf; j++)
            printf("%s%s", j ? "," : "", l->cluster->shards[ranked[j]].name);
        putchar('\n');
    }
}

static void print_json(const ferry_pl_layout *l)
{
    uint32_t ranked[64];
    json_t *placements = json_array();
    for (size_t i = 0; i < l->inv->n; i++) {
        const ferry_pl_slice *sl = &l->inv->slices[i];
        ferry_pl_layout_ranked(l, i, ranked);
        json_t *shards = json_array();
        for (unsigned j = 0; j < l->rf; j++)
            json_array_append_new(shards, json_string(l->cluster->shards[ranked[j]].name));
        json_array_append_new(placements,
                              json_pack("{s:s, s:I, s:I, s:o}", "tenant", sl->tenant, "split",
                                        (json_int_t)sl->split, "bytes", (json_int_t)sl->bytes,
                                        "shards", shards));
    }
    json_t *root = json_pack("{s:s, s:I, s:f, s:I, s:I, s:I, s:I, s:o, s:o}", "hash",
                             ferry_hash_name(l->opts.hash), "rf", (json_int_t)l->rf, "fill",
                             l->opts.fill, "slices", (json_int_t)l->inv->n, "overfilled",
                             (json_int_t)l->overfilled, "spread_relaxed",
                             (json_int_t)l->spread_relaxed, "zone_relaxed",
                             (json_int_t)l->zone_relaxed, "shards", cli_layout_shards_json(l),
                             "placements", placements);
    json_dumpf(root, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(root);
}

int cmd_place(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_PLACE_LONGOPTS,
        {"shards", required_argument, NULL, OPT_SHARDS},
        {"scores", no_argument, NULL, OPT_SCORES},
        {NULL, 0, NULL, 0},
    };
    cli_place_common c;
    cli_place_common_init(&c);
    const char *slices_path = NULL, *shards_path = NULL;
    bool scores = false;
    int opt, status;
    optind = 1;
    while ((opt = cli_place_next_option("place", argc, argv, longopts, &c, &status))) {
        if (opt == OPT_SLICES)
            slices_path = optarg;
        else if (opt == OPT_SHARDS)
            shards_path = optarg;
        else if (opt == OPT_SCORES)
            scores = true;
    }
    if (status)
        return status;
    if (!slices_path || !shards_path)
        return cli_usage_error("place", "--slices and --shards are required");

    ferry_err err = {0, ""};
    ferry_pl_inventory inv;
    ferry_pl_cluster cl;
    ferry_pl_layout l;
    memset(&inv, 0, sizeof inv);
    memset(&cl, 0, sizeof cl);
    memset(&l, 0, sizeof l);
    int rc = cli_load_inventory(slices_path, &inv, &err);
    if (!rc)
        rc = cli_load_cluster(shards_path, &cl, &err);
    if (!rc && scores) {
        rc = print_scores(&inv, &cl, c.opts.hash);
        goto out;
    }
    if (!rc)
        rc = ferry_pl_place(&inv, &cl, &c.opts, &l, &err);
    if (rc)
        goto out;
    if (c.json)
        print_json(&l);
    else
        print_text(&l);
out:
    ferry_pl_layout_free(&l);
    ferry_pl_cluster_free(&cl);
    ferry_pl_inventory_free(&inv);
    return rc ? cli_fail("place", &err) : (fflush(stdout) ? 1 : 0);
}

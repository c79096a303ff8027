/* `ferry plan`: the slice moves that take a cluster from one shard list to another. */
#include "cli.h"
#include "cli_placement.h"
#include "ferry/strutil.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_plan_usage[] =
    "usage: ferry plan --slices SLICES.tsv --from OLD_SHARDS.tsv --to NEW_SHARDS.tsv\n"
    "                  [--hash sha256|xxh3] [--rf N] [--fill F] [--threads N] [--json]\n"
    "\n"
    "Computes the layout on the old shards (as `ferry place` does), then the layout on the new\n"
    "shards reached from it with as little movement as the rules allow, and prints the moves in\n"
    "the order to run them: move SLICE from shard A to shard B (copy, then drop from A). With\n"
    "rf > 1 a move replaces one replica. Shards are matched by name: a shard missing from NEW\n"
    "is drained, a new name is a new shard, a changed weight or capacity is a resize.\n"
    "\n"
    "  --slices FILE   tenant<TAB>split<TAB>bytes per line ('#' starts a comment)\n"
    "  --from FILE     the current shards: name<TAB>weight[<TAB>capacity_bytes]\n"
    "  --to FILE       the new shards, same format\n"
    "  --hash, --rf, --fill, --threads   as for `ferry place` (the same for both layouts)\n"
    "  --json          one JSON object: slices, moved, moved_slices, moved_bytes, total_bytes,\n"
    "                  moved_between_existing (moves whose destination was already in OLD),\n"
    "                  moves [{tenant, split, from, to, bytes}], shards [{name, before, after}]\n"
    "\n"
    "The old layout may be above its fill target (that is often why shards are added); the new\n"
    "one may not: if the new shards cannot hold the data below the fill target, plan fails with\n"
    "exit code 2. Bad input is reported as for `ferry place`.\n";

static json_t *shards_json(const ferry_pl_layout *old, const ferry_pl_layout *nl)
{
    json_t *arr = json_array();
    const ferry_pl_cluster *oc = old->cluster, *nc = nl->cluster;
    /* every name of either cluster, in name order */
    size_t a = 0, b = 0;
    while (a < oc->n || b < nc->n) {
        int c = a == oc->n ? 1 : b == nc->n ? -1 : strcmp(oc->shards[a].name, nc->shards[b].name);
        const char *name = c <= 0 ? oc->shards[a].name : nc->shards[b].name;
        json_t *o = json_pack("{s:s, s:s}", "name", name, "state",
                              c < 0 ? "removed" : c > 0 ? "added" : "kept");
        json_object_set_new(o, "before_replicas",
                            json_integer(c <= 0 ? (json_int_t)old->shard_replicas[a] : 0));
        json_object_set_new(o, "before_bytes",
                            json_integer(c <= 0 ? (json_int_t)old->shard_bytes[a] : 0));
        json_object_set_new(o, "after_replicas",
                            json_integer(c >= 0 ? (json_int_t)nl->shard_replicas[b] : 0));
        json_object_set_new(o, "after_bytes",
                            json_integer(c >= 0 ? (json_int_t)nl->shard_bytes[b] : 0));
        if (c >= 0)
            json_object_set_new(o, "capacity",
                                nc->shards[b].capacity
                                    ? json_integer((json_int_t)nc->shards[b].capacity)
                                    : json_null());
        json_array_append_new(arr, o);
        if (c <= 0)
            a++;
        if (c >= 0)
            b++;
    }
    return arr;
}

static void print_json(const ferry_pl_layout *old, const ferry_pl_layout *nl,
                       const ferry_pl_plan *p)
{
    json_t *moves = json_array();
    for (size_t k = 0; k < p->moved; k++) {
        const ferry_pl_move *m = &p->moves[k];
        const ferry_pl_slice *sl = &nl->inv->slices[m->slice];
        json_array_append_new(moves, json_pack("{s:s, s:I, s:o, s:o, s:I}", "tenant", sl->tenant,
                                               "split", (json_int_t)sl->split, "from",
                                               m->from ? json_string(m->from) : json_null(), "to",
                                               m->to ? json_string(m->to) : json_null(), "bytes",
                                               (json_int_t)m->bytes));
    }
    json_t *root = json_pack(
        "{s:s, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "hash",
        ferry_hash_name(nl->opts.hash), "rf", (json_int_t)nl->rf, "fill", nl->opts.fill, "slices",
        (json_int_t)p->slices, "moved", (json_int_t)p->moved, "moved_slices",
        (json_int_t)p->moved_slices, "moved_bytes", (json_int_t)p->moved_bytes, "total_bytes",
        (json_int_t)p->total_bytes, "moved_between_existing",
        (json_int_t)p->moved_between_existing, "shards", shards_json(old, nl), "moves", moves);
    json_dumpf(root, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(root);
}

static void print_text(const ferry_pl_layout *old, const ferry_pl_layout *nl,
                       const ferry_pl_plan *p)
{
    char b1[32], b2[32], id[FERRY_SLICE_ID_MAX];
    size_t replicas = p->slices * nl->rf;
    printf("plan: %zu slices, %zu moves (%.1f%% of %zu replicas), %s of %s moved, %zu moves "
           "between existing shards\n",
           p->slices, p->moved, replicas ? 100.0 * (double)p->moved / (double)replicas : 0.0,
           replicas, ferry_fmt_bytes(p->moved_bytes, b1, sizeof b1),
           ferry_fmt_bytes(p->total_bytes, b2, sizeof b2), p->moved_between_existing);
    json_t *shards = shards_json(old, nl);
    printf("\n%-20s %-8s %10s %10s %12s %12s\n", "shard", "state", "before", "after",
           "bytes before", "bytes after");
    size_t k;
    json_t *o;
    json_array_foreach(shards, k, o)
    {
        printf("%-20s %-8s %10lld %10lld %12s %12s\n",
               json_string_value(json_object_get(o, "name")),
               json_string_value(json_object_get(o, "state")),
               (long long)json_integer_value(json_object_get(o, "before_replicas")),
               (long long)json_integer_value(json_object_get(o, "after_replicas")),
               ferry_fmt_bytes((uint64_t)json_integer_value(json_object_get(o, "before_bytes")),
                               b1, sizeof b1),
               ferry_fmt_bytes((uint64_t)json_integer_value(json_object_get(o, "after_bytes")),
                               b2, sizeof b2));
    }
    json_decref(shards);
    if (p->moved)
        printf("\nmoves, in order:\n");
    for (k = 0; k < p->moved; k++) {
        const ferry_pl_move *m = &p->moves[k];
        ferry_pl_slice_id(&nl->inv->slices[m->slice], id, sizeof id);
        printf("  %-32s %s -> %s  %s\n", id, m->from ? m->from : "(new replica)",
               m->to ? m->to : "(dropped)", ferry_fmt_bytes(m->bytes, b1, sizeof b1));
    }
}

int cmd_plan(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_PLACE_LONGOPTS,
        {"from", required_argument, NULL, OPT_FROM},
        {"to", required_argument, NULL, OPT_TO},
        {NULL, 0, NULL, 0},
    };
    cli_place_common c;
    cli_place_common_init(&c);
    const char *slices_path = NULL, *from_path = NULL, *to_path = NULL;
    int opt, status;
    optind = 1;
    while ((opt = cli_place_next_option("plan", argc, argv, longopts, &c, &status))) {
        if (opt == OPT_SLICES)
            slices_path = optarg;
        else if (opt == OPT_FROM)
            from_path = optarg;
        else if (opt == OPT_TO)
            to_path = optarg;
    }
    if (status)
        return status;
    if (!slices_path || !from_path || !to_path)
        return cli_usage_error("plan", "--slices, --from and --to are required");

    ferry_err err = {0, ""};
    ferry_pl_inventory inv;
    ferry_pl_cluster oc, nc;
    ferry_pl_layout old, nl;
    ferry_pl_plan plan;
    memset(&inv, 0, sizeof inv);
    memset(&oc, 0, sizeof oc);
    memset(&nc, 0, sizeof nc);
    memset(&old, 0, sizeof old);
    memset(&nl, 0, sizeof nl);
    memset(&plan, 0, sizeof plan);
    ferry_pl_opts old_opts = c.opts;
    old_opts.strict = false; /* the current layout may already be too full */
    int rc = cli_load_inventory(slices_path, &inv, &err);
    if (!rc)
        rc = cli_load_cluster(from_path, &oc, &err);
    if (!rc)
        rc = cli_load_cluster(to_path, &nc, &err);
    if (!rc)
        rc = ferry_pl_opts_check(&c.opts, &oc, &err);
    if (!rc)
        rc = ferry_pl_place(&inv, &oc, &old_opts, &old, &err);
    if (!rc)
        rc = ferry_pl_rebalance(&inv, &oc, &old, &nc, &c.opts, &nl, &err);
    if (!rc)
        rc = ferry_pl_plan_build(&old, &nl, &plan, &err);
    if (rc)
        goto out;
    if (c.json)
        print_json(&old, &nl, &plan);
    else
        print_text(&old, &nl, &plan);
out:
    ferry_pl_plan_free(&plan);
    ferry_pl_layout_free(&nl);
    ferry_pl_layout_free(&old);
    ferry_pl_cluster_free(&nc);
    ferry_pl_cluster_free(&oc);
    ferry_pl_inventory_free(&inv);
    return rc ? cli_fail("plan", &err) : (fflush(stdout) ? 1 : 0);
}

/* `ferry status`: the cluster at a glance from the catalog: shards with their fill (bytes of the
 * slices routed to them against capacity), tenants, slices, the routing version and the moves in
 * flight. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/strutil.h"

const char cmd_status_usage[] =
    "usage: ferry status [--json] [--config FILE | --catalog URL]\n"
    "\n"
    "Shows the cluster recorded in the catalog: each shard's state, the bytes of the slices\n"
    "routed to it, its capacity and fill (bytes / capacity, against the cluster's fill target),\n"
    "the number of tenants and slices, the routing version, and every move that is not DONE or\n"
    "FAILED with its state, step and owner.\n"
    "\n"
    "  --config FILE     the cluster's config (default: $FERRY_CONFIG)\n"
    "  --catalog URL     a catalog URL instead of the config's\n"
    "  --json            JSON output\n";

static int slice_cmp(const void *a, const void *b)
{
    const ferry_record *x = a, *y = b;
    const char *tx = x->kind == FERRY_REC_SLICE ? x->u.slice.tenant : x->u.route.tenant;
    const char *ty = y->kind == FERRY_REC_SLICE ? y->u.slice.tenant : y->u.route.tenant;
    uint32_t sx = x->kind == FERRY_REC_SLICE ? x->u.slice.split : x->u.route.split;
    uint32_t sy = y->kind == FERRY_REC_SLICE ? y->u.slice.split : y->u.route.split;
    int d = strcmp(tx, ty);
    return d ? d : (sx > sy) - (sx < sy);
}

/* Whether name is one of the comma-separated list's items. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        const char *s = p;
        while (len && *s == ' ') {
            s++;
            len--;
        }
        while (len && s[len - 1] == ' ')
            len--;
        if (len == n && !memcmp(s, name, n))
            return true;
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    return false;
}

int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"catalog", required_argument, NULL, 'C'},
                                         {"json", no_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL, *catalog = NULL;
    bool json = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 'C')
            catalog = optarg;
        else if (ch == 'j')
            json = true;
        else
            return cli_usage_error("status", "unknown option");
    }
    if (optind < argc)
        return cli_usage_error("status", "unexpected argument '%s'", argv[optind]);
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    ferry_record settings;
    ferry_record_list shards = {0}, tenants = {0}, slices = {0}, routes = {0}, moves = {0};
    uint64_t *used = NULL;
    uint64_t rv = 0;
    json_t *root = NULL;
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    int rc = cli_open_catalog(config, catalog, true, &cat, &err);
    if (!rc) {
        rc = ferry_catalog_get(cat, &settings, &err);
        if (rc == FERRY_ENOTFOUND)
            ferry_err_prefix(&err, "the catalog holds no cluster yet (run 'ferry init'): ");
    }
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, &err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tenants, &err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SLICE, NULL, 0, &slices, &err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, &err);
    if (!rc)
        rc = ferry_catalog_list_unfinished_moves(cat, &moves, &err);
    if (!rc)
        rc = ferry_catalog_routing_version(cat, &rv, &err);
    if (rc)
        goto out;
    /* Bytes served by each shard: every slice's bytes go to each shard that routes it. */
    used = calloc(shards.n ? shards.n : 1, sizeof *used);
    if (!used) {
        rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (slices.n > 1)
        qsort(slices.items, slices.n, sizeof *slices.items, slice_cmp);
    if (routes.n > 1)
        qsort(routes.items, routes.n, sizeof *routes.items, slice_cmp);
    for (size_t i = 0, j = 0; i < routes.n; i++) {
        while (j < slices.n && slice_cmp(&slices.items[j], &routes.items[i]) < 0)
            j++;
        if (j == slices.n || slice_cmp(&slices.items[j], &routes.items[i]) != 0)
            continue;
        for (size_t s = 0; s < shards.n; s++)
            if (in_list(routes.items[i].u.route.shards, shards.items[s].u.shard.name))
                used[s] += slices.items[j].u.slice.bytes;
    }
    const ferry_settings *st = &settings.u.settings;
    size_t in_flight = moves.n;
    if (json) {
        root = json_pack("{s:s, s:s, s:s, s:i, s:f, s:I, s:I, s:I}", "cluster", st->name, "catalog",
                         ferry_catalog_backend(cat), "hash", st->hash, "rf", (int)st->rf,
                         "fill_target", st->fill, "routing_version", (json_int_t)rv, "tenants",
                         (json_int_t)tenants.n, "slices", (json_int_t)slices.n);
        json_t *a = json_array();
        for (size_t s = 0; s < shards.n; s++) {
            const ferry_shard *sh = &shards.items[s].u.shard;
            json_t *o = json_pack("{s:s, s:s, s:f, s:I, s:I}", "name", sh->name, "state",
                                  ferry_shard_state_name(sh->state), "weight", sh->weight,
                                  "capacity", (json_int_t)sh->capacity, "bytes",
                                  (json_int_t)used[s]);
            json_object_set_new(o, "fill", sh->capacity ? json_real((double)used[s] / (double)sh->capacity)
                                                        : json_null());
            json_array_append_new(a, o);
        }
        json_object_set_new(root, "shards", a);
        a = json_array();
        for (size_t i = 0; i < moves.n; i++) {
            const ferry_move *m = &moves.items[i].u.move;
            json_array_append_new(
                a, json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:s}", "id", m->id,
                             "tenant", m->tenant, "split", (int)m->split, "from", m->from, "to",
                             m->to, "state", ferry_move_state_name(m->state), "step", (int)m->step,
                             "steps", (int)m->steps, "owner", m->owner));
        }
        json_object_set_new(root, "moves_in_flight", a);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        putchar('\n');
        goto out;
    }
    printf("cluster %s (%s catalog): hash %s, rf %u, fill target %.2f, ClickHouse %s, pointer "
           "format %u\n",
           st->name, ferry_catalog_backend(cat), st->hash, st->rf, st->fill,
           st->clickhouse_version, st->pointer_format);
    printf("%zu tenant(s), %zu slice(s), routing version %llu, %zu move(s) in flight\n\n",
           tenants.n, slices.n, (unsigned long long)rv, in_flight);
    printf("%-16s %-9s %7s %12s %12s %7s\n", "SHARD", "STATE", "WEIGHT", "BYTES", "CAPACITY",
           "FILL");
    for (size_t s = 0; s < shards.n; s++) {
        const ferry_shard *sh = &shards.items[s].u.shard;
        char b1[32], b2[32], fill[16];
        if (sh->capacity)
            snprintf(fill, sizeof fill, "%.1f%%", 100.0 * (double)used[s] / (double)sh->capacity);
        else
            snprintf(fill, sizeof fill, "-");
        printf("%-16s %-9s %7.2f %12s %12s %7s\n", sh->name, ferry_shard_state_name(sh->state),
               sh->weight, ferry_fmt_bytes(used[s], b1, sizeof b1),
               sh->capacity ? ferry_fmt_bytes(sh->capacity, b2, sizeof b2) : "-", fill);
    }
    if (in_flight) {
        printf("\n%-20s %-16s %5s %-10s %-10s %-8s %7s %s\n", "MOVE", "TENANT", "SPLIT", "FROM",
               "TO", "STATE", "STEP", "OWNER");
        for (size_t i = 0; i < moves.n; i++) {
            const ferry_move *m = &moves.items[i].u.move;
            char step[24];
            snprintf(step, sizeof step, "%u/%u", m->step, m->steps);
            printf("%-20s %-16s %5u %-10s %-10s %-8s %7s %s\n", m->id, m->tenant, m->split, m->from,
                   m->to, ferry_move_state_name(m->state), step, m->owner);
        }
    }
out:
    json_decref(root);
    free(used);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&tenants);
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    ferry_record_list_free(&moves);
    ferry_catalog_close(cat);
    return rc ? cli_fail("status", &err) : 0;
}

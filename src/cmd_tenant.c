/* `ferry tenant add|show|set-splits|set-rf`: operators' view of tenants, their split counts and
 * their replication factor. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

const char cmd_tenant_usage[] =
    "usage: ferry tenant add NAME... [--splits N] [--dry-run] [--json] [--config FILE]\n"
    "       ferry tenant show NAME [--json] [--config FILE]\n"
    "       ferry tenant set-splits NAME N [--dry-run] [--json] [--config FILE]\n"
    "       ferry tenant set-rf NAME N|default [--dry-run] [--json] [--config FILE]\n"
    "\n"
    "add registers each tenant NAME with N splits (default 1): its slices are placed on the active\n"
    "shards (weighted rendezvous, the cluster's rf and fill; only the new slices are placed, the\n"
    "rest of the cluster counts as the shards' loads) and routed there, up to 1000 tenants per\n"
    "atomic catalog batch that raises the routing version; when a NAME exists, the names before\n"
    "it are registered and nothing after it. set-splits raises a tenant's split count the same\n"
    "way (new slices placed next to its own and routed; existing ones untouched); a lower count\n"
    "is refused, because rows already written keep their split. show prints the tenant's split\n"
    "count and each slice's placement and serving shards, and its replication factor.\n"
    "\n"
    "set-rf stores a per-tenant replication factor (1..16, at most the number of active shards)\n"
    "in the catalog; `default` removes the override (the cluster's [cluster] rf applies). Nothing\n"
    "is copied yet: `ferry rebalance` then adds replicas (clone moves, the source kept) or removes\n"
    "them (never the last one), see docs/replicas.md.\n"
    "\n"
    "  --splits N       splits for a new tenant (1..4096)\n"
    "  --dry-run        compute, print, write nothing\n"
    "  --config FILE    the cluster's config (default: $FERRY_CONFIG)\n"
    "  --catalog URL    a catalog URL instead of the config's\n"
    "  --json           JSON output\n";

typedef struct print_opts {
    bool dry, json;
} print_opts;

static int print_change(const ferry_split_change *c, bool dry, bool json)
{
    if (json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:b, s:I}", "tenant", c->tenant, "from",
                              (json_int_t)c->from, "to", (json_int_t)c->to, "dry_run", dry,
                              "routing_version", (json_int_t)c->routing_version);
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(o);
    } else if (c->from == c->to) {
        printf("tenant %s already has %u split(s); nothing changed\n", c->tenant, c->to);
    } else {
        printf("%stenant %s: %u -> %u split(s)%s; routing version %llu\n", dry ? "(dry run) " : "",
               c->tenant, c->from, c->to, dry ? " would be placed and routed" : " placed and routed",
               (unsigned long long)c->routing_version);
    }
    return 0;
}

static void print_added(const ferry_split_change *c, void *arg)
{
    const print_opts *p = arg;
    print_change(c, p->dry, p->json);
}

/* Sets (rf >= 1) or clears (rf 0) the tenant's rf override and says what the rebalance does. */
static int set_rf(ferry_catalog *cat, const char *name, uint32_t rf, bool dry, bool json,
                  ferry_err *err)
{
    uint32_t before = 0, after = 0;
    int rc = ferry_tenant_set_rf(cat, name, rf, dry, &before, &after, err);
    if (rc)
        return rc;
    if (json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:b, s:b}", "tenant", name, "from",
                              (json_int_t)before, "to", (json_int_t)after, "override", rf != 0,
                              "dry_run", dry);
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(o);
    } else {
        printf("%stenant %s: rf %u -> %u%s; run `ferry rebalance` to %s replicas\n",
               dry ? "(dry run) " : "", name, before, after,
               rf ? "" : " (the cluster's default)",
               after > before ? "add" : after < before ? "remove" : "check");
    }
    return FERRY_OK;
}

static int show(ferry_catalog *cat, const char *name, bool json, ferry_err *err)
{
    ferry_record t;
    ferry_record_list slices = {0}, routes = {0};
    ferry_record_init(&t, FERRY_REC_TENANT);
    snprintf(t.u.tenant.name, sizeof t.u.tenant.name, "%s", name);
    const char *prefix[] = {name};
    ferry_record st;
    ferry_record_init(&st, FERRY_REC_SETTINGS);
    int rc = ferry_catalog_get(cat, &t, err);
    if (rc == FERRY_ENOTFOUND)
        ferry_err_set(err, FERRY_ENOTFOUND, "tenant %s is not registered (ferry tenant add %s)",
                      name, name);
    if (!rc)
        rc = ferry_catalog_get(cat, &st, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SLICE, prefix, 1, &slices, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, prefix, 1, &routes, err);
    if (rc)
        goto out;
    uint32_t rf = t.u.tenant.rf ? t.u.tenant.rf : st.u.settings.rf;
    json_t *o = json_pack("{s:s, s:I, s:I, s:b, s:[]}", "tenant", name, "splits",
                          (json_int_t)t.u.tenant.splits, "rf", (json_int_t)rf, "rf_override",
                          t.u.tenant.rf != 0, "slices");
    json_t *arr = json_object_get(o, "slices");
    if (!json)
        printf("tenant %s: %u split(s), rf %u%s\n%6s  %-12s %-24s %s\n", name,
               t.u.tenant.splits, rf, t.u.tenant.rf ? "" : " (cluster default)", "SPLIT", "BYTES",
               "PLACEMENT", "SERVED BY");
    for (size_t i = 0; i < slices.n; i++) {
        const ferry_slice *s = &slices.items[i].u.slice;
        char served[FERRY_SHARDS_TEXT_MAX] = "", placement[FERRY_SHARDS_TEXT_MAX];
        ferry_shard_set_str(&s->placement, placement);
        for (size_t j = 0; j < routes.n; j++)
            if (routes.items[j].u.route.split == s->split)
                ferry_shard_set_str(&routes.items[j].u.route.shards, served);
        if (json) {
            json_array_append_new(arr, json_pack("{s:I, s:I, s:I, s:s, s:s}", "split",
                                                 (json_int_t)s->split, "bytes", (json_int_t)s->bytes,
                                                 "rows", (json_int_t)s->rows, "placement",
                                                 placement, "route", served));
        } else {
            char b[32];
            printf("%6u  %-12s %-24s %s\n", s->split, ferry_fmt_bytes(s->bytes, b, sizeof b),
                   placement, served);
        }
    }
    if (json) {
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
    }
    json_decref(o);
out:
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    return rc;
}

int cmd_tenant(int argc, char **argv)
{
    enum { O_SPLITS = CLI_O_LAST };
    static const struct option opts[] = {CLI_OPT_CONFIG, CLI_OPT_CATALOG, CLI_OPT_DRY_RUN,
                                         CLI_OPT_JSON,
                                         {"splits", required_argument, NULL, O_SPLITS},
                                         {NULL, 0, NULL, 0}};
    uint64_t splits = 1;
    bool have_splits = false;
    cli_common c = {.positional = true};
    int status;
    optind = 1;
    while (cli_next_option("tenant", argc, argv, opts, &c, &status)) {
        if (!ferry_parse_u64(optarg, &splits) || splits < 1 || splits > FERRY_SPLITS_MAX)
            return cli_usage_error("tenant", "--splits '%s' is not a split count (1..%d)",
                                   optarg, FERRY_SPLITS_MAX);
        have_splits = true;
    }
    if (status)
        return status;
    bool json = c.json, dry = c.dry_run;
    if (optind >= argc)
        return cli_usage_error("tenant", "needs add, show, set-splits or set-rf");
    const char *sub = argv[optind++];
    if (optind >= argc)
        return cli_usage_error("tenant", "%s needs a tenant NAME", sub);
    const char *name = argv[optind++];
    int nargs = argc - optind;
    uint32_t rf = 0;
    if (!strcmp(sub, "set-rf")) {
        uint64_t v = 0;
        if (nargs != 1)
            return cli_usage_error("tenant", "set-rf needs NAME and a replication factor N (or "
                                   "'default')");
        if (have_splits)
            return cli_usage_error("tenant", "set-rf takes no --splits");
        if (strcmp(argv[optind], "default") &&
            (!ferry_parse_u64(argv[optind], &v) || v < 1 || v > 16))
            return cli_usage_error("tenant", "'%s' is not a replication factor (1..16, or "
                                   "'default')", argv[optind]);
        rf = (uint32_t)v;
    } else if (!strcmp(sub, "set-splits")) {
        if (nargs != 1)
            return cli_usage_error("tenant", "set-splits needs NAME and a split count N");
        if (!ferry_parse_u64(argv[optind], &splits) || splits < 1 || splits > FERRY_SPLITS_MAX)
            return cli_usage_error("tenant", "'%s' is not a split count (1..%d)", argv[optind],
                                   FERRY_SPLITS_MAX);
    } else if (!strcmp(sub, "add")) {
        /* more names: added in order, in groups of atomic batches (ferry_split_add) */
    } else if (!strcmp(sub, "show")) {
        if (nargs)
            return cli_usage_error("tenant", "unexpected argument '%s'", argv[optind]);
        if (!strcmp(sub, "show") && (have_splits || dry))
            return cli_usage_error("tenant", "show takes no --splits or --dry-run");
    } else {
        return cli_usage_error("tenant", "unknown subcommand '%s' (add, show, set-splits, "
                               "set-rf)", sub);
    }
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    int rc = cli_open_catalog(c.config, c.catalog, true, &cat, &err);
    if (!rc && !strcmp(sub, "show")) {
        rc = show(cat, name, json, &err);
    } else if (!rc && !strcmp(sub, "set-rf")) {
        rc = set_rf(cat, name, rf, dry, json, &err);
    } else if (!rc && !strcmp(sub, "add")) {
        print_opts po = {dry, json};
        rc = ferry_split_add(cat, (const char *const *)argv + optind - 1,
                             (size_t)(argc - optind + 1), (uint32_t)splits, dry, print_added, &po,
                             &err);
    } else if (!rc) {
        ferry_split_change change;
        rc = ferry_split_set(cat, name, (uint32_t)splits, false, dry, &change, &err);
        if (!rc)
            print_change(&change, dry, json);
    }
    ferry_catalog_close(cat);
    return rc ? cli_fail("tenant", &err) : 0;
}

/* `ferry splits`: the split manager. Reads every tenant's size and recent ingest from
 * system.parts on every shard, applies the split policy ([splits], docs/routing.md) and records
 * the raised counts, each with its new slices placed and routed. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/partition.h"
#include "ferry/split.h"

const char cmd_splits_usage[] =
    "usage: ferry splits [--dry-run] [--json] [--tenant T]... [--config FILE]\n"
    "\n"
    "Measures every registered tenant on every shard (system.parts of each managed table, on\n"
    "each shard's first reachable replica): bytes on disk, and rows of today's partitions\n"
    "(UTC) per second since midnight (at least one hour) as its ingest rate. Then applies the\n"
    "policy of [splits] (target_slice_bytes, target_slice_rows_per_s, hysteresis, max_splits;\n"
    "docs/routing.md) and raises the split count of each tenant that outgrew it: the new\n"
    "slices are placed on the active shards and routed in one catalog batch per tenant.\n"
    "Counts never go down. Bytes are summed over shards and divided by the cluster's rf.\n"
    "\n"
    "  --dry-run        print the decisions, change nothing\n"
    "  --tenant T       only decide for tenant T (repeatable; default: every tenant)\n"
    "  --config FILE    the cluster's config (default: $FERRY_CONFIG)\n"
    "  --json           JSON output\n";

typedef struct load {
    char name[FERRY_NAME_MAX];
    uint32_t splits;
    uint64_t bytes;
    uint64_t rows_today;
} load;

static int load_cmp(const void *a, const void *b)
{
    return strcmp(((const load *)a)->name, ((const load *)b)->name);
}

/* Adds one shard's partitions of every managed table to the tenants' loads. */
static int measure_shard(const ferry_config *cfg, const char *shard, const ferry_cluster_config *cc,
                         load *loads, size_t n, uint32_t today, ferry_err *err)
{
    const char *reps = ferry_config_get(cfg, "shard", shard, "replicas");
    char urls[FERRY_LIST_MAX];
    snprintf(urls, sizeof urls, "%s", reps ? reps : "");
    char *password = NULL;
    const char *pwf = ferry_config_get(cfg, "shard", shard, "password_file");
    const char *user = ferry_config_get(cfg, "shard", shard, "user");
    int rc = FERRY_OK;
    if (pwf && *pwf) {
        size_t len;
        rc = ferry_read_file(pwf, &password, &len, err);
        if (rc)
            return rc;
        password[strcspn(password, "\r\n")] = '\0';
    }
    rc = FERRY_ECONNECT;
    char *save = NULL;
    for (char *u = strtok_r(urls, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        while (*u == ' ')
            u++;
        ferry_ch_client *c = NULL;
        ferry_ch_options o = {.url = u, .user = user, .password = password, .max_attempts = 2};
        rc = ferry_ch_client_new(&o, &c, err);
        for (size_t t = 0; !rc && t < cc->n_tables; t++) {
            const ferry_table_def *td = &cc->tables[t];
            ferry_ch_partition *p = NULL;
            size_t np = 0;
            rc = ferry_ch_list_partitions(c, td->database, td->name, &p, &np, err);
            for (size_t i = 0; !rc && i < np; i++) {
                ferry_partition_key k;
                if (ferry_partition_parse(td->layout, p[i].partition, &k, NULL))
                    continue; /* not a (tenant, day, split) partition */
                load key;
                if (strlen(k.tenant) >= sizeof key.name)
                    continue; /* longer than any tenant name */
                memcpy(key.name, k.tenant, strlen(k.tenant) + 1);
                load *l = bsearch(&key, loads, n, sizeof *loads, load_cmp);
                if (!l)
                    continue;
                l->bytes += p[i].bytes_on_disk;
                if (k.day == today)
                    l->rows_today += p[i].rows;
            }
            ferry_ch_partitions_free(p, np);
        }
        ferry_ch_client_free(c);
        if (rc != FERRY_ECONNECT && rc != FERRY_ETIMEOUT)
            break;
    }
    if (rc)
        ferry_err_prefix(err, "shard %s: ", shard);
    free(password);
    return rc;
}

int cmd_splits(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"dry-run", no_argument, NULL, 'n'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"tenant", required_argument, NULL, 't'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL;
    const char *only[64];
    size_t n_only = 0;
    bool json = false, dry = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 'n')
            dry = true;
        else if (ch == 'j')
            json = true;
        else if (ch == 't' && n_only < 64)
            only[n_only++] = optarg;
        else
            return cli_usage_error("splits", ch == 't' ? "at most 64 --tenant options" : "unknown option");
    }
    if (optind < argc)
        return cli_usage_error("splits", "unexpected argument '%s'", argv[optind]);
    const char *path = cli_config_path(config);
    if (!path)
        return cli_usage_error("splits", "needs --config FILE (or FERRY_CONFIG)");
    ferry_err err = {0};
    ferry_config cfg = {0};
    ferry_cluster_config cc = {0};
    ferry_split_policy pol;
    ferry_catalog *cat = NULL;
    ferry_record_list tenants = {0};
    ferry_record settings;
    load *loads = NULL;
    json_t *out = json_pack("{s:[]}", "tenants");
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    int rc = ferry_config_load(path, &cfg, &err);
    if (!rc)
        rc = ferry_cluster_config_read(&cfg, &cc, &err);
    if (!rc)
        rc = ferry_split_policy_read(&cfg, &pol, &err);
    if (!rc)
        rc = ferry_catalog_open(cc.catalog, &cat, &err);
    if (!rc)
        rc = ferry_catalog_get(cat, &settings, &err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tenants, &err);
    if (rc)
        goto out;
    loads = calloc(tenants.n ? tenants.n : 1, sizeof *loads);
    if (!loads) {
        rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < tenants.n; i++) {
        snprintf(loads[i].name, sizeof loads[i].name, "%s", tenants.items[i].u.tenant.name);
        loads[i].splits = tenants.items[i].u.tenant.splits;
    }
    qsort(loads, tenants.n, sizeof *loads, load_cmp);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    uint32_t today = (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
    double since_midnight = tm.tm_hour * 3600.0 + tm.tm_min * 60.0 + tm.tm_sec;
    if (since_midnight < 3600)
        since_midnight = 3600;
    for (size_t s = 0; s < cc.n_shards && !rc; s++)
        rc = measure_shard(&cfg, cc.shards[s].name, &cc, loads, tenants.n, today, &err);
    if (rc)
        goto out;
    uint32_t rf = settings.u.settings.rf ? settings.u.settings.rf : 1;
    size_t raised = 0;
    uint64_t version = 0;
    for (size_t i = 0; i < tenants.n && !rc; i++) {
        bool wanted = n_only == 0;
        for (size_t k = 0; k < n_only; k++)
            wanted |= !strcmp(only[k], loads[i].name);
        if (!wanted)
            continue;
        ferry_split_load l = {loads[i].splits, loads[i].bytes / rf,
                              (double)loads[i].rows_today / rf / since_midnight};
        ferry_split_decision d;
        ferry_split_decide(&pol, &l, &d);
        if (d.raise && !dry) {
            ferry_split_change c;
            rc = ferry_split_set(cat, loads[i].name, d.splits, false, false, &c, &err);
            if (rc)
                break;
            version = c.routing_version;
        }
        raised += d.raise;
        if (json)
            json_array_append_new(json_object_get(out, "tenants"),
                                  json_pack("{s:s, s:I, s:I, s:I, s:f, s:b, s:s}", "tenant",
                                            loads[i].name, "splits", (json_int_t)loads[i].splits,
                                            "new_splits", (json_int_t)d.splits, "bytes",
                                            (json_int_t)l.bytes, "rows_per_s", l.rows_per_s,
                                            "raise", d.raise, "reason", d.reason));
        else if (d.raise)
            printf("%s%s: %u -> %u splits (%s)\n", dry ? "(dry run) " : "", loads[i].name,
                   loads[i].splits, d.splits, d.reason);
    }
    if (rc)
        goto out;
    if (!version)
        rc = ferry_catalog_routing_version(cat, &version, &err);
    if (rc)
        goto out;
    if (json) {
        json_object_set_new(out, "raised", json_integer((json_int_t)raised));
        json_object_set_new(out, "dry_run", json_boolean(dry));
        json_object_set_new(out, "routing_version", json_integer((json_int_t)version));
        json_dumpf(out, stdout, JSON_COMPACT);
        putchar('\n');
    } else {
        printf("%zu of %zu tenant(s) %s; routing version %llu\n", raised, tenants.n,
               dry ? "would be raised" : "raised", (unsigned long long)version);
    }
out:
    json_decref(out);
    free(loads);
    ferry_record_list_free(&tenants);
    ferry_record_free(&settings);
    ferry_catalog_close(cat);
    ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);
    return rc ? cli_fail("splits", &err) : 0;
}

/* The split manager's run (ferry splits, and the coordinator's splits_interval): measures every
 * tenant on every shard with ONE query per shard (system.parts of every managed table, grouped by
 * table and partition), applies the split policy and records the raised counts. */
#include "ferry/split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/partition.h"
#include "ferry/strutil.h"
#include "split/split_int.h"

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

/* Every tenant as a load to measure (a tenant record is 3.4 KB, a load 148 bytes). */
typedef struct load_list {
    load *v;
    size_t n, cap;
} load_list;

static int add_tenant(const ferry_record *rec, void *arg, ferry_err *err)
{
    load_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        load *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    load *x = &l->v[l->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", rec->u.tenant.name);
    x->splits = rec->u.tenant.splits;
    return FERRY_OK;
}

typedef struct measure_ctx {
    const ferry_cluster_config *cc;
    load *loads;
    size_t n;
    uint32_t today;
} measure_ctx;

/* One row of the shard's answer: database, table, partition, bytes, rows. */
static int measure_row(char **f, const size_t *lens, const bool *nulls, size_t n, void *arg)
{
    (void)lens;
    (void)nulls;
    measure_ctx *m = arg;
    if (n < 5)
        return 0;
    const ferry_table_def *td = NULL;
    for (size_t t = 0; t < m->cc->n_tables && !td; t++)
        if (!strcmp(m->cc->tables[t].database, f[0]) && !strcmp(m->cc->tables[t].name, f[1]))
            td = &m->cc->tables[t];
    ferry_partition_key k;
    uint64_t bytes = 0, rows = 0;
    if (!td || ferry_partition_parse(td->layout, f[2], &k, NULL) || !ferry_parse_u64(f[3], &bytes) ||
        !ferry_parse_u64(f[4], &rows))
        return 0; /* not a (tenant, day, split) partition */
    load key;
    if (strlen(k.tenant) >= sizeof key.name)
        return 0;
    memcpy(key.name, k.tenant, strlen(k.tenant) + 1);
    load *l = (m->n ? bsearch(&key, m->loads, m->n, sizeof *m->loads, load_cmp) : NULL);
    if (!l)
        return 0;
    l->bytes += bytes;
    if (k.day == m->today)
        l->rows_today += rows;
    return 0;
}

/* Adds one shard's partitions of every managed table to the tenants' loads: one query. */
static int measure_shard(const ferry_config *cfg, const ferry_shard *sh, measure_ctx *m,
                         ferry_err *err)
{
    char urls[FERRY_LIST_MAX];
    snprintf(urls, sizeof urls, "%s", sh->replicas);
    ferry_shard_conn conn;
    ferry_shard_conn_get(sh, cfg, &conn);
    char *password = NULL;
    const char *user = conn.user[0] ? conn.user : NULL;
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    int rc = FERRY_OK;
    if (conn.password_file[0]) {
        rc = ferry_read_secret_line(conn.password_file, &password, err);
        if (rc)
            return rc;
    }
    ferry_buf_puts(&sql, "SELECT database, table, partition, sum(bytes_on_disk), sum(rows) FROM "
                         "system.parts WHERE active AND (database, table) IN (");
    for (size_t t = 0; t < m->cc->n_tables; t++) {
        ferry_buf_puts(&sql, t ? ", (" : "(");
        ferry_sql_quote(m->cc->tables[t].database, &sql);
        ferry_buf_puts(&sql, ", ");
        ferry_sql_quote(m->cc->tables[t].name, &sql);
        ferry_buf_putc(&sql, ')');
    }
    ferry_buf_puts(&sql, ") GROUP BY database, table, partition");
    rc = FERRY_ECONNECT;
    char *save = NULL;
    for (char *u = strtok_r(urls, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        while (*u == ' ')
            u++;
        ferry_ch_client *c = NULL;
        ferry_ch_options o = {.url = u, .user = user, .password = password, .max_attempts = 2};
        res.len = 0;
        rc = ferry_ch_client_new(&o, &c, err);
        if (!rc)
            rc = ferry_ch_query_buf(c, ferry_buf_cstr(&sql), "TabSeparated", &res, NULL, err);
        ferry_ch_client_free(c);
        if (rc != FERRY_ECONNECT && rc != FERRY_ETIMEOUT)
            break;
    }
    if (!rc && res.len) {
        ferry_tsv_reader rd;
        ferry_tsv_reader_init(&rd, measure_row, m);
        rc = ferry_tsv_feed(&rd, res.data, res.len, err);
        if (!rc)
            rc = ferry_tsv_finish(&rd, err);
        ferry_tsv_reader_free(&rd);
    }
    if (rc)
        ferry_err_prefix(err, "shard %s: ", sh->name);
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    free(password);
    return rc;
}

int ferry_splits_run(const ferry_splits_options *opt, json_t **report, ferry_err *err)
{
    ferry_config cfg = {0};
    ferry_cluster_config cc = {0};
    ferry_split_policy pol;
    ferry_catalog *cat = NULL;
    ferry_record_list shards = {0};
    load_list tenants = {0};
    ferry_record settings;
    split_env env;
    load *loads = NULL;
    json_t *out = json_pack("{s:[]}", "tenants");
    *report = NULL;
    memset(&env, 0, sizeof env);
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    int rc = out ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc)
        rc = ferry_config_load(opt->config_path, &cfg, err);
    if (!rc)
        rc = ferry_cluster_config_read(&cfg, &cc, err);
    if (!rc)
        rc = ferry_split_policy_read(&cfg, &pol, err);
    if (!rc)
        rc = ferry_catalog_open(cc.catalog, &cat, err);
    if (!rc)
        rc = ferry_catalog_get(cat, &settings, err);
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_TENANT, NULL, 0, add_tenant, &tenants, err);
    if (rc)
        goto out;
    loads = tenants.v;
    tenants.v = NULL;
    if (tenants.n > 1) /* qsort of NULL, 0 is undefined */
        qsort(loads, tenants.n, sizeof *loads, load_cmp);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    uint32_t today = (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
    double since_midnight = tm.tm_hour * 3600.0 + tm.tm_min * 60.0 + tm.tm_sec;
    if (since_midnight < 3600)
        since_midnight = 3600;
    measure_ctx m = {&cc, loads, tenants.n, today};
    /* the catalog's shards, not the config's: a shard added since this process read its config
     * holds slices too */
    rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    for (size_t s = 0; s < shards.n && !rc && cc.n_tables; s++)
        if (shards.items[s].u.shard.state != FERRY_SHARD_GONE)
            rc = measure_shard(&cfg, &shards.items[s].u.shard, &m, err);
    if (rc)
        goto out;
    uint32_t rf = settings.u.settings.rf ? settings.u.settings.rf : 1;
    size_t raised = 0;
    bool env_read = false;
    uint64_t version = 0;
    for (size_t i = 0; i < tenants.n && !rc; i++) {
        bool wanted = opt->n_only == 0;
        for (size_t k = 0; k < opt->n_only; k++)
            wanted |= !strcmp(opt->only[k], loads[i].name);
        if (!wanted)
            continue;
        ferry_split_load l = {loads[i].splits, loads[i].bytes / rf,
                              (double)loads[i].rows_today / rf / since_midnight};
        ferry_split_decision d;
        ferry_split_decide(&pol, &l, &d);
        char skipped[FERRY_ERR_MSG_MAX] = "";
        if (d.raise && !opt->dry_run) {
            ferry_split_change c;
            ferry_err e2 = {0};
            memset(&c, 0, sizeof c);
            snprintf(c.tenant, sizeof c.tenant, "%s", loads[i].name);
            /* the shards and their loads, read once for every raise of the run */
            if (!env_read && (rc = split_env_open(cat, &env, err)))
                break;
            env_read = true;
            int rc2 = split_set_one(cat, &env, loads[i].name, d.splits, false, false, &c, &e2);
            if (rc2 == FERRY_ECONFLICT || rc2 == FERRY_EINVAL || rc2 == FERRY_ENOTFOUND) {
                /* The tenant changed since it was measured (raised by an operator, removed):
                 * leave it to the next run; the others go on. */
                snprintf(skipped, sizeof skipped, "%s", e2.msg);
                d.raise = false;
            } else if (rc2) {
                rc = rc2;
                *err = e2;
                break;
            } else {
                version = c.routing_version;
            }
        }
        raised += d.raise;
        json_t *row = json_pack("{s:s, s:I, s:I, s:I, s:f, s:b, s:s}", "tenant", loads[i].name,
                                "splits", (json_int_t)loads[i].splits, "new_splits",
                                (json_int_t)d.splits, "bytes", (json_int_t)l.bytes, "rows_per_s",
                                l.rows_per_s, "raise", d.raise, "reason", d.reason);
        if (skipped[0])
            json_object_set_new(row, "skipped", json_string(skipped));
        json_array_append_new(json_object_get(out, "tenants"), row);
    }
    if (!rc && !version)
        rc = ferry_catalog_routing_version(cat, &version, err);
    if (rc)
        goto out;
    json_object_set_new(out, "raised", json_integer((json_int_t)raised));
    json_object_set_new(out, "tenants_total", json_integer((json_int_t)tenants.n));
    json_object_set_new(out, "dry_run", json_boolean(opt->dry_run));
    json_object_set_new(out, "routing_version", json_integer((json_int_t)version));
    *report = out;
    out = NULL;
out:
    split_env_close(&env);
    json_decref(out);
    free(loads);
    free(tenants.v);
    ferry_record_list_free(&shards);
    ferry_record_free(&settings);
    ferry_catalog_close(cat);
    ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);
    return rc;
}

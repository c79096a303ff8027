/* Reads the cluster's configuration sections ([cluster], [shard "x"], [table "y"]) from a parsed
 * ferry_config into catalog records. Pure: the file was read by the caller. Every rejected value
 * is reported as FILE:LINE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog_int.h"
#include "ferry/config.h"
#include "ferry/strutil.h"

#define MAX_SECTIONS 1024

static const char *const cluster_keys[] = {"name", "catalog", "hash", "rf", "fill",
                                           "clickhouse_version", "pointer_format", "hot_days",
                                           "tier_interval", "splits_interval", "routers",
                                           "repair_interval", "router_token_file",
                                           "clickhouse_object_access", "min_free_inodes",
                                           NULL};
static const char *const shard_keys[] = {"weight", "capacity", "replicas", "agent",
                                         "agent_token_file", "user", "password_file", "zone",
                                         "data_path", NULL};
static const char *const table_keys[] = {"database", "layout", "tenant_column", "split_column",
                                         "day_column", "tenant_table", "split_key", NULL};

static int bad(const ferry_config *cfg, const char *section, const char *sub, const char *key,
               const char *expected, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(cfg, section, sub, key);
    if (!e)
        return ferry_err_set(err, FERRY_EINVAL, "%s: %s.%s: %s", cfg->path, section, key, expected);
    if (sub)
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [%s \"%s\"] %s = '%s': expected %s",
                             cfg->path, e->line, section, sub, key, e->value, expected);
    return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [%s] %s = '%s': expected %s", cfg->path,
                         e->line, section, key, e->value, expected);
}

/* A string value (default def when absent) copied into dst, rejected when too long. */
static int get_str(const ferry_config *cfg, const char *section, const char *sub,
                   const char *key, const char *def, char *dst, size_t size, ferry_err *err)
{
    const char *v = ferry_config_get(cfg, section, sub, key);
    if (!v)
        v = def;
    if (strlen(v) >= size) {
        char what[64];
        snprintf(what, sizeof what, "at most %zu characters", size - 1);
        return bad(cfg, section, sub, key, what, err);
    }
    snprintf(dst, size, "%s", v);
    return FERRY_OK;
}

static bool column_ok(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static bool version_ok(const char *s)
{
    /* 26.7 or 26.7.3 or 26.7.3.1: numbers separated by dots */
    int parts = 0;
    while (*s) {
        size_t n = strspn(s, "0123456789");
        if (!n)
            return false;
        parts++;
        s += n;
        if (*s == '.' && s[1])
            s++;
        else if (*s)
            return false;
    }
    return parts >= 2;
}

static int read_cluster(const ferry_config *cfg, ferry_cluster_config *cc, ferry_err *err)
{
    ferry_settings *s = &cc->settings;
    const char *v;
    uint64_t n = 0;
    int rc = ferry_config_check_keys(cfg, "cluster", cluster_keys, err);
    if (!rc)
        rc = ferry_config_require(cfg, "cluster", NULL, "name", &v, err);
    if (!rc && !cat_name_ok(v))
        rc = bad(cfg, "cluster", NULL, "name", "a name of A-Z a-z 0-9 _ . - (1..127 characters)", err);
    if (!rc)
        rc = get_str(cfg, "cluster", NULL, "name", "", s->name, sizeof s->name, err);
    if (!rc)
        rc = ferry_config_require(cfg, "cluster", NULL, "catalog", &v, err);
    if (!rc && !ferry_starts_with(v, "sqlite:/") && !ferry_starts_with(v, "zk://"))
        rc = bad(cfg, "cluster", NULL, "catalog", "sqlite:/abs/path.db or zk://host:port/chroot", err);
    if (!rc)
        rc = get_str(cfg, "cluster", NULL, "catalog", "", cc->catalog, sizeof cc->catalog, err);
    if (!rc)
        rc = get_str(cfg, "cluster", NULL, "hash", "sha256", s->hash, sizeof s->hash, err);
    if (!rc && strcmp(s->hash, "sha256") && strcmp(s->hash, "xxh3"))
        rc = bad(cfg, "cluster", NULL, "hash", "sha256 or xxh3", err);
    if (!rc)
        rc = ferry_config_u64(cfg, "cluster", NULL, "rf", 1, &n, err);
    if (!rc && (n < 1 || n > 16))
        rc = bad(cfg, "cluster", NULL, "rf", "a replication factor from 1 to 16", err);
    s->rf = (uint32_t)n;
    if (!rc)
        rc = ferry_config_double(cfg, "cluster", NULL, "fill", 0.85, &s->fill, err);
    if (!rc && !(s->fill > 0 && s->fill <= 1))
        rc = bad(cfg, "cluster", NULL, "fill", "a fraction greater than 0 and at most 1", err);
    if (!rc)
        rc = get_str(cfg, "cluster", NULL, "clickhouse_version", "26.7", s->clickhouse_version,
                     sizeof s->clickhouse_version, err);
    if (!rc && !version_ok(s->clickhouse_version))
        rc = bad(cfg, "cluster", NULL, "clickhouse_version", "a version such as 26.7", err);
    if (!rc)
        rc = ferry_config_u64(cfg, "cluster", NULL, "pointer_format", 5, &n, err);
    if (!rc && (n < 1 || n > 5))
        rc = bad(cfg, "cluster", NULL, "pointer_format", "a metadata format version from 1 to 5", err);
    s->pointer_format = (uint32_t)n;
    if (!rc)
        rc = ferry_config_u64(cfg, "cluster", NULL, "hot_days", 3, &n, err);
    if (!rc && n > 36500)
        rc = bad(cfg, "cluster", NULL, "hot_days", "a number of days up to 36500", err);
    s->hot_days = (uint32_t)n;
    if (!rc) {
        bool ro;
        rc = ferry_object_access_readonly(cfg, &ro, err);
    }
    return rc;
}

int ferry_object_access_readonly(const struct ferry_config *cfg, bool *readonly, ferry_err *err)
{
    const char *v = cfg ? ferry_config_get(cfg, "cluster", NULL, "clickhouse_object_access") : NULL;
    *readonly = false;
    if (!v || !strcmp(v, "read-create"))
        return FERRY_OK;
    if (!strcmp(v, "read-only")) {
        *readonly = true;
        return FERRY_OK;
    }
    return bad(cfg, "cluster", NULL, "clickhouse_object_access",
               "read-create (the default: ClickHouse's credential may read and create objects) or "
               "read-only (it may only read and list; cold parts are loaded through a re-attached "
               "load table, docs/object-store.md)", err);
}

static int read_shard(const ferry_config *cfg, const char *name, ferry_shard *sh, ferry_err *err)
{
    memset(sh, 0, sizeof *sh);
    sh->state = FERRY_SHARD_ACTIVE;
    if (!cat_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [shard \"%s\"]: a shard name is " FERRY_NAME_RULE,
                             cfg->path, name);
    snprintf(sh->name, sizeof sh->name, "%s", name);
    const char *v;
    int rc = ferry_config_double(cfg, "shard", name, "weight", 1.0, &sh->weight, err);
    if (!rc && !(sh->weight > 0 && isfinite(sh->weight)))
        rc = bad(cfg, "shard", name, "weight", "a positive number", err);
    if (!rc)
        rc = ferry_config_bytes(cfg, "shard", name, "capacity", 0, &sh->capacity, err);
    if (!rc && sh->capacity > INT64_MAX)
        rc = bad(cfg, "shard", name, "capacity", "a size below 8 EiB", err);
    if (!rc)
        rc = ferry_config_require(cfg, "shard", name, "replicas", &v, err);
    if (!rc)
        rc = get_str(cfg, "shard", name, "replicas", "", sh->replicas, sizeof sh->replicas, err);
    if (!rc) {
        /* Each replica is an http(s) URL. */
        char tmp[FERRY_LIST_MAX];
        snprintf(tmp, sizeof tmp, "%s", sh->replicas);
        char *fields[64];
        size_t nf = ferry_split(tmp, ',', fields, 64);
        for (size_t i = 0; i < nf && i < 64 && !rc; i++) {
            char *u = ferry_trim(fields[i]);
            if (!ferry_starts_with(u, "http://") && !ferry_starts_with(u, "https://"))
                rc = bad(cfg, "shard", name, "replicas",
                         "ClickHouse HTTP URLs (http://host:port), comma-separated", err);
        }
    }
    if (!rc)
        rc = get_str(cfg, "shard", name, "agent", "", sh->agent, sizeof sh->agent, err);
    if (!rc && sh->agent[0]) {
        /* One agent URL, or one per replica in the order of replicas: the sweep and retention
         * read the pointer files of every replica through its own agent. */
        size_t na = ferry_list_count(sh->agent), nr = ferry_list_count(sh->replicas);
        char u[FERRY_URL_MAX];
        for (size_t i = 0; i < na && !rc; i++)
            if (!ferry_list_item(sh->agent, i, u, sizeof u) ||
                (!ferry_starts_with(u, "http://") && !ferry_starts_with(u, "https://")))
                rc = bad(cfg, "shard", name, "agent",
                         "the agent's URL (http://host:port), or one per replica, "
                         "comma-separated", err);
        if (!rc && na > 1 && na != nr)
            rc = bad(cfg, "shard", name, "agent",
                     "one agent URL, or as many as 'replicas' lists (one per replica, in "
                     "the same order)", err);
    }
    if (!rc)
        rc = get_str(cfg, "shard", name, "zone", "", sh->zone, sizeof sh->zone, err);
    /* connection details, recorded in the catalog so that running processes follow new shards */
    if (!rc)
        rc = get_str(cfg, "shard", name, "user", "", sh->user, sizeof sh->user, err);
    if (!rc)
        rc = get_str(cfg, "shard", name, "password_file", "", sh->password_file,
                     sizeof sh->password_file, err);
    if (!rc)
        rc = get_str(cfg, "shard", name, "agent_token_file", "", sh->agent_token_file,
                     sizeof sh->agent_token_file, err);
    if (!rc)
        rc = get_str(cfg, "shard", name, "data_path", "", sh->data_path, sizeof sh->data_path,
                     err);
    return rc;
}

static int read_table(const ferry_config *cfg, const char *name, ferry_table_def *t,
                      ferry_err *err)
{
    memset(t, 0, sizeof *t);
    if (!cat_name_ok(name) || !column_ok(name))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [table \"%s\"]: a table name is letters, digits and _",
                             cfg->path, name);
    snprintf(t->name, sizeof t->name, "%s", name);
    char layout[32];
    int rc = get_str(cfg, "table", name, "database", "default", t->database, sizeof t->database, err);
    if (!rc && !column_ok(t->database))
        rc = bad(cfg, "table", name, "database", "a database name (letters, digits, _)", err);
    if (!rc)
        rc = get_str(cfg, "table", name, "layout", "shared", layout, sizeof layout, err);
    if (!rc) {
        if (ferry_layout_parse(layout, &t->layout, NULL))
            rc = bad(cfg, "table", name, "layout", "shared or per_tenant", err);
    }
    static const char *const cols[] = {"tenant_column", "day_column", "split_column"};
    static const char *const defs[] = {"tenant", "day", "split"};
    char *dst[] = {t->tenant_column, t->day_column, t->split_column};
    for (int i = 0; i < 3 && !rc; i++) {
        rc = get_str(cfg, "table", name, cols[i], defs[i], dst[i], sizeof t->tenant_column, err);
        if (!rc && !column_ok(dst[i]))
            rc = bad(cfg, "table", name, cols[i], "a column name (letters, digits, _)", err);
    }
    if (!rc)
        rc = get_str(cfg, "table", name, "split_key", "", t->split_key, sizeof t->split_key, err);
    if (!rc && t->split_key[0] && !column_ok(t->split_key))
        rc = bad(cfg, "table", name, "split_key", "a column name (letters, digits, _)", err);
    if (!rc && t->split_key[0] &&
        (!strcmp(t->split_key, t->split_column) || !strcmp(t->split_key, t->tenant_column)))
        rc = bad(cfg, "table", name, "split_key",
                 "a column other than the tenant and split columns", err);
    return rc;
}

int ferry_cluster_config_read(const ferry_config *cfg, ferry_cluster_config *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    const char *names[MAX_SECTIONS];
    int rc = read_cluster(cfg, out, err);
    if (!rc)
        rc = ferry_config_check_keys(cfg, "shard", shard_keys, err);
    if (!rc)
        rc = ferry_config_check_keys(cfg, "table", table_keys, err);
    if (rc)
        goto out;
    size_t ns = ferry_config_subsections(cfg, "shard", names, MAX_SECTIONS);
    if (ns == 0 || ns > MAX_SECTIONS) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: needs 1 to %d [shard \"NAME\"] sections",
                           cfg->path, MAX_SECTIONS);
        goto out;
    }
    out->shards = calloc(ns, sizeof *out->shards);
    if (!out->shards) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ns && !rc; i++) {
        rc = read_shard(cfg, names[i], &out->shards[i], err);
        out->n_shards += !rc;
    }
    if (!rc && out->settings.rf > out->n_shards)
        rc = bad(cfg, "cluster", NULL, "rf", "a replication factor no larger than the number of shards", err);
    if (rc)
        goto out;
    size_t nt = ferry_config_subsections(cfg, "table", names, MAX_SECTIONS);
    if (nt > MAX_SECTIONS) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: too many [table] sections", cfg->path);
        goto out;
    }
    out->tables = calloc(nt ? nt : 1, sizeof *out->tables);
    if (!out->tables) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nt && !rc; i++) {
        rc = read_table(cfg, names[i], &out->tables[i], err);
        out->n_tables += !rc;
    }
out:
    if (rc)
        ferry_cluster_config_free(out);
    return rc;
}

void ferry_cluster_config_free(ferry_cluster_config *cc)
{
    if (!cc)
        return;
    free(cc->shards);
    free(cc->tables);
    memset(cc, 0, sizeof *cc);
}

bool ferry_settings_same_fixed(const ferry_settings *a, const ferry_settings *b, const char **what)
{
    const char *w = NULL;
    if (strcmp(a->name, b->name))
        w = "name";
    else if (strcmp(a->hash, b->hash))
        w = "hash";
    else if (a->rf != b->rf)
        w = "rf";
    else if (a->fill != b->fill)
        w = "fill";
    else if (strcmp(a->clickhouse_version, b->clickhouse_version))
        w = "clickhouse_version";
    else if (a->pointer_format != b->pointer_format)
        w = "pointer_format";
    if (what)
        *what = w;
    return w == NULL;
}

static const char *conn_field(const char *rec, const struct ferry_config *cfg, const char *name,
                              const char *key)
{
    if (rec[0])
        return rec;
    const char *v = cfg ? ferry_config_get(cfg, "shard", name, key) : NULL;
    return v ? v : "";
}

void ferry_shard_conn_get(const ferry_shard *sh, const struct ferry_config *cfg,
                          ferry_shard_conn *out)
{
    out->user = conn_field(sh->user, cfg, sh->name, "user");
    out->password_file = conn_field(sh->password_file, cfg, sh->name, "password_file");
    out->agent_token_file = conn_field(sh->agent_token_file, cfg, sh->name, "agent_token_file");
    out->data_path = conn_field(sh->data_path, cfg, sh->name, "data_path");
}

bool ferry_shard_conn_differs(const ferry_shard *a, const ferry_shard *b)
{
    return strcmp(a->replicas, b->replicas) || strcmp(a->agent, b->agent) ||
           strcmp(a->user, b->user) || strcmp(a->password_file, b->password_file) ||
           strcmp(a->agent_token_file, b->agent_token_file) || strcmp(a->data_path, b->data_path);
}

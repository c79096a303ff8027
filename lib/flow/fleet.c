/* Opening the cluster for a flow: config, catalog, and a ClickHouse and an agent client per
 * server (include/ferry/fleet.h). */
#include "ferry/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "ferry/lines.h"
#include "ferry/strutil.h"

#define AGENT_TIMEOUT_MS 120000L

/* The first line of a secret file, without its newline; caller wipes and frees. */
static int read_secret_line(const char *path, const char *what, char **out, ferry_err *err)
{
    if (ferry_read_secret_line(path, out, err) != FERRY_OK)
        return ferry_err_set(err, FERRY_EINVAL, "cannot read the %s file %s", what, path);
    return FERRY_OK;
}

static int cmp_server(const void *a, const void *b)
{
    return strcmp(((const ferry_fleet_server *)a)->name, ((const ferry_fleet_server *)b)->name);
}

int ferry_shard_clients_open(const ferry_config *cfg, const ferry_shard *sh,
                             const ferry_shard_client_opts *opts, ferry_ch_client **ch,
                             ferry_agent_client **agent, char **token_out, ferry_err *err)
{
    static const ferry_shard_client_opts defaults = {0};
    char *token = NULL, *password = NULL, urlbuf[FERRY_URL_MAX];
    int rc = FERRY_OK;
    *ch = NULL;
    *agent = NULL;
    if (token_out)
        *token_out = NULL;
    if (!opts)
        opts = &defaults;
    size_t n = strcspn(sh->replicas, ",");
    snprintf(urlbuf, sizeof urlbuf, "%.*s", (int)n, sh->replicas);
    const char *url = ferry_trim(urlbuf);
    if (!url[0] || !sh->agent[0]) {
        rc = ferry_err_set(err, FERRY_EINVAL, "shard %s has no %s in the catalog (run 'ferry "
                           "init' with [shard \"%s\"] replicas and agent)", sh->name,
                           url[0] ? "agent" : "replicas", sh->name);
        goto out;
    }
    ferry_shard_conn conn;
    ferry_shard_conn_get(sh, cfg, &conn);
    if (!conn.agent_token_file[0]) {
        rc = ferry_err_set(err, FERRY_EINVAL, "shard %s has no agent_token_file in the catalog "
                           "or in [shard \"%s\"] of %s (the file holding that shard's agent "
                           "token: every flow reaches the server's files through its agent)",
                           sh->name, sh->name, cfg && cfg->path ? cfg->path : "the config");
        goto out;
    }
    if ((rc = ferry_agent_read_token_file(conn.agent_token_file, &token, err)))
        goto out;
    const char *user = conn.user;
    if (conn.password_file[0] &&
        (rc = read_secret_line(conn.password_file, "password", &password, err)))
        goto out;
    ferry_ch_options o = {.url = url, .user = user && *user ? user : NULL, .password = password,
                          .read_timeout_ms = opts->ch_read_timeout_ms,
                          .max_attempts = opts->ch_max_attempts};
    if ((rc = ferry_ch_client_new(&o, ch, err)))
        goto out;
    char agent_url[FERRY_URL_MAX] = "";
    ferry_list_item(sh->agent, 0, agent_url, sizeof agent_url);
    if ((rc = ferry_agent_client_new(agent_url, token, opts->agent_timeout_ms, agent, err))) {
        ferry_ch_client_free(*ch);
        *ch = NULL;
        goto out;
    }
    if (token_out) {
        *token_out = token;
        token = NULL;
    }
out:
    if (token) {
        OPENSSL_cleanse(token, strlen(token));
        free(token);
    }
    if (password) {
        OPENSSL_cleanse(password, strlen(password));
        free(password);
    }
    if (rc)
        ferry_err_prefix(err, "shard %s: ", sh->name);
    return rc;
}

static void close_server(ferry_fleet_server *s)
{
    ferry_ch_client_free(s->ch);
    ferry_agent_client_free(s->agent);
    for (size_t i = 0; i < s->n_more; i++)
        ferry_agent_client_free(s->more[i].agent);
    free(s->more);
    memset(s, 0, sizeof *s);
}

/* The shard's clients, and an agent client for each further replica that [shard] agent names
 * (with the shard's token). On error nothing is left open. */
static int open_server(ferry_fleet *f, const ferry_shard *sh, ferry_fleet_server *s,
                       ferry_err *err)
{
    char *token = NULL;
    snprintf(s->name, sizeof s->name, "%s", sh->name);
    ferry_list_item(sh->replicas, 0, s->url, sizeof s->url);
    ferry_list_item(sh->agent, 0, s->agent_url, sizeof s->agent_url);
    ferry_shard_client_opts o = {.ch_read_timeout_ms = 300000, .ch_max_attempts = 2,
                                 .agent_timeout_ms = AGENT_TIMEOUT_MS};
    int rc = ferry_shard_clients_open(&f->cfg, sh, &o, &s->ch, &s->agent, &token, err);
    if (rc)
        return rc;
    size_t nr = ferry_list_count(sh->replicas), na = ferry_list_count(sh->agent);
    if (nr > 1 && !(s->more = calloc(nr - 1, sizeof *s->more))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 1; i < nr; i++) {
        ferry_fleet_replica *r = &s->more[s->n_more++];
        ferry_list_item(sh->replicas, i, r->url, sizeof r->url);
        if (na > i && ferry_list_item(sh->agent, i, r->agent_url, sizeof r->agent_url) &&
            (rc = ferry_agent_client_new(r->agent_url, token, AGENT_TIMEOUT_MS, &r->agent,
                                         err))) {
            ferry_err_prefix(err, "shard %s, replica %s: ", sh->name, r->url);
            goto out;
        }
    }
out:
    OPENSSL_cleanse(token, strlen(token));
    free(token);
    if (rc)
        close_server(s);
    return rc;
}

int ferry_fleet_open(const char *config_path, ferry_fleet **out, ferry_err *err)
{
    *out = NULL;
    if (!config_path)
        return ferry_err_set(err, FERRY_EINVAL, "no config: give --config FILE or set "
                             "FERRY_CONFIG");
    ferry_fleet *f = calloc(1, sizeof *f);
    ferry_record_list shards = {0}, tables = {0};
    if (!f || !(f->config_path = strdup(config_path))) {
        free(f);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    int rc = ferry_config_load(config_path, &f->cfg, err);
    const char *url = NULL;
    if (!rc)
        rc = ferry_config_require(&f->cfg, "cluster", NULL, "catalog", &url, err);
    if (!rc)
        rc = ferry_catalog_open(url, &f->cat, err);
    if (rc)
        goto out;
    ferry_record s;
    ferry_record_init(&s, FERRY_REC_SETTINGS);
    rc = ferry_catalog_get(f->cat, &s, err);
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "the catalog %s holds no cluster: run 'ferry "
                           "init --config %s' first", url, config_path);
        goto out;
    }
    if (rc)
        goto out;
    f->settings = s.u.settings;
    if ((rc = ferry_catalog_list(f->cat, FERRY_REC_SHARD, NULL, 0, &shards, err)) ||
        (rc = ferry_catalog_list(f->cat, FERRY_REC_TABLE, NULL, 0, &tables, err)))
        goto out;
    f->servers = calloc(shards.n ? shards.n : 1, sizeof *f->servers);
    f->tables = calloc(tables.n ? tables.n : 1, sizeof *f->tables);
    if (!f->servers || !f->tables) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < tables.n; i++)
        f->tables[f->n_tables++] = tables.items[i].u.table;
    for (size_t i = 0; i < shards.n && !rc; i++) {
        if (shards.items[i].u.shard.state == FERRY_SHARD_GONE)
            continue;
        rc = open_server(f, &shards.items[i].u.shard, &f->servers[f->n_servers], err);
        if (!rc)
            f->n_servers++;
    }
    if (!rc)
        qsort(f->servers, f->n_servers, sizeof *f->servers, cmp_server);
    const char *prefix = ferry_config_get(&f->cfg, "object_store", NULL, "prefix");
    if (prefix && *prefix)
        snprintf(f->store_prefix, sizeof f->store_prefix, "%s%s", prefix,
                 ferry_ends_with(prefix, "/") ? "" : "/");
out:
    ferry_record_list_free(&shards);
    ferry_record_list_free(&tables);
    if (rc)
        ferry_fleet_close(f);
    else
        *out = f;
    return rc;
}

void ferry_fleet_close(ferry_fleet *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_servers; i++)
        close_server(&f->servers[i]);
    free(f->servers);
    free(f->tables);
    ferry_catalog_close(f->cat);
    ferry_config_free(&f->cfg);
    free(f->config_path);
    free(f);
}

int ferry_fleet_store(ferry_fleet *f, ferry_objstore_role role, ferry_objstore **out,
                      ferry_err *err)
{
    return ferry_objstore_open_from_config(&f->cfg, role, out, err);
}

const char *ferry_fleet_store_prefix(const ferry_fleet *f) { return f->store_prefix; }

ferry_fleet_server *ferry_fleet_server_find(ferry_fleet *f, const char *name)
{
    for (size_t i = 0; i < f->n_servers; i++)
        if (!strcmp(f->servers[i].name, name))
            return &f->servers[i];
    return NULL;
}

const ferry_table_def *ferry_fleet_table_find(const ferry_fleet *f, const char *name)
{
    for (size_t i = 0; i < f->n_tables; i++)
        if (!strcmp(f->tables[i].name, name))
            return &f->tables[i];
    return NULL;
}

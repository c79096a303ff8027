/* The node agent's per-request environment: a ClickHouse client for the local server, the ferry
 * config (object store, pointer format), the disks and allowed roots, a table's directories on
 * each disk and its frozen parts; plus the pure helpers of ferry/agent.h (key naming, bearer
 * check, pointer-version rule). */
#include "agent_int.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ferry/clock.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/strutil.h"

/* ---- pure helpers ------------------------------------------------------------------------ */

bool ferry_agent_bearer_ok(const char *header, const char *token)
{
    if (!header || !token || strncmp(header, "Bearer ", 7) != 0)
        return false;
    const char *given = header + 7;
    unsigned char a[32], b[32];
    unsigned int la = 0, lb = 0;
    /* Hashing both sides first makes the comparison independent of the lengths too. */
    if (!EVP_Digest(given, strlen(given), a, &la, EVP_sha256(), NULL) ||
        !EVP_Digest(token, strlen(token), b, &lb, EVP_sha256(), NULL))
        return false;
    return CRYPTO_memcmp(a, b, sizeof a) == 0 && *token;
}

int ferry_agent_escape_name(ferry_buf *out, const char *name)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_') {
            if (ferry_buf_putc(out, (char)c))
                return FERRY_ENOMEM;
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            if (ferry_buf_append(out, e, 3))
                return FERRY_ENOMEM;
        }
    }
    return FERRY_OK;
}

int ferry_agent_object_key(const char *prefix, const char *db, const char *table,
                           const char *partition_id, const char *upload_id, const char *part,
                           const char *file, ferry_buf *out, ferry_err *err)
{
    if (!*db || !*table)
        return ferry_err_set(err, FERRY_EINVAL, "object key: empty database or table name");
    if (!ferry_safe_component(partition_id, false) || !ferry_safe_component(upload_id, false) ||
        !ferry_safe_component(part, false) || !ferry_safe_component(file, false))
        return ferry_err_set(err, FERRY_EINVAL, "object key: '%s/%s/%s/%s' holds a name that is "
                             "not a plain path component", partition_id, upload_id, part, file);
    if (ferry_buf_puts(out, prefix ? prefix : "") || ferry_agent_escape_name(out, db) ||
        ferry_buf_putc(out, '/') || ferry_agent_escape_name(out, table) ||
        ferry_buf_printf(out, "/%s/%s/%s/%s", partition_id, upload_id, part, file))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

int ferry_agent_part_partition_id(const char *part, char *out, size_t outsz, ferry_err *err)
{
    if (!ferry_safe_component(part, false))
        return ferry_err_set(err, FERRY_EINVAL, "part name '%s' is not a plain path component",
                             part);
    const char *us = strchr(part, '_');
    int fields = 0;
    for (const char *p = us; p; p = strchr(p + 1, '_'))
        fields++;
    /* <id>_<min>_<max>_<level>[_<mutation>], each number a decimal */
    bool ok = us && us != part && (fields == 3 || fields == 4);
    for (const char *p = us; ok && *p; p++)
        if (*p != '_' && (*p < '0' || *p > '9'))
            ok = false;
    if (ok && strstr(part, "__"))
        ok = false;
    if (!ok || (size_t)(us - part) >= outsz)
        return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a part name "
                             "(<partition_id>_<min_block>_<max_block>_<level>)", part);
    memcpy(out, part, (size_t)(us - part));
    out[us - part] = '\0';
    return FERRY_OK;
}

/* ---- environment --------------------------------------------------------------------------- */

void agent_env_init(agent_env *env, ferry_agent *a)
{
    memset(env, 0, sizeof *env);
    env->a = a;
}

static void store_info_free(agent_store_info *s)
{
    free(s->root);
    free(s->prefix);
    free(s->disk_key_prefix);
    memset(s, 0, sizeof *s);
}

void agent_env_free(agent_env *env)
{
    ferry_ch_client_free(env->ch);
    if (env->cfg_loaded)
        ferry_config_free(&env->cfg);
    store_info_free(&env->store);
    ferry_roots_free(&env->roots);
    for (size_t i = 0; i < env->n_disks; i++) {
        free(env->disks[i].name);
        free(env->disks[i].path);
    }
    free(env->disks);
    memset(env, 0, sizeof *env);
}

int agent_env_ch(agent_env *env, ferry_err *err)
{
    if (env->ch)
        return FERRY_OK;
    ferry_ch_options o = {.url = env->a->ch_url,
                          .user = env->a->ch_user,
                          .password = env->a->ch_password,
                          .max_attempts = 2};
    return ferry_ch_client_new(&o, &env->ch, err);
}

int agent_env_config(agent_env *env, ferry_err *err)
{
    if (env->cfg_loaded)
        return FERRY_OK;
    if (!env->a->config_path) {
        env->status = 501;
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "this agent was started without a ferry "
                             "config (--config): no object store, no pointer format");
    }
    int rc = ferry_config_load(env->a->config_path, &env->cfg, err);
    if (rc)
        return rc;
    env->cfg_loaded = true;
    return FERRY_OK;
}

static char *with_slash(const char *s)
{
    size_t n = strlen(s);
    char *r = malloc(n + 2);
    if (r)
        sprintf(r, "%s%s", s, (n && s[n - 1] == '/') ? "" : "/");
    return r;
}

int agent_env_store(agent_env *env, ferry_err *err)
{
    if (env->store_loaded)
        return FERRY_OK;
    int rc = agent_env_config(env, err);
    if (rc)
        return rc;
    const char *type = ferry_config_get(&env->cfg, "object_store", NULL, "type");
    const char *prefix = ferry_config_get(&env->cfg, "object_store", NULL, "prefix");
    agent_store_info *s = &env->store;
    s->local = !type || !strcmp(type, "local");
    if (!(s->prefix = prefix && *prefix ? with_slash(prefix) : strdup(""))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (s->local) {
        const char *path = ferry_config_get(&env->cfg, "object_store", NULL, "path");
        if (!path || path[0] != '/') {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: [object_store] path must be an "
                               "absolute directory", env->a->config_path);
            goto out;
        }
        /* local blob storage: relative keys are relative to the disk's <path> */
        if (!(s->root = with_slash(path)) || !(s->disk_key_prefix = strdup(s->root))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    } else {
        /* S3: the cold disk's endpoint is <endpoint>/<bucket>/<prefix>, so ClickHouse's key
         * prefix is ferry's upload prefix without its trailing '/'. */
        if (!(s->disk_key_prefix = strdup(s->prefix))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        size_t n = strlen(s->disk_key_prefix);
        if (n && s->disk_key_prefix[n - 1] == '/')
            s->disk_key_prefix[n - 1] = '\0';
    }
    env->store_loaded = true;
out:
    if (rc) {
        /* nothing half-made stays behind: the next call starts again */
        free(s->prefix);
        free(s->root);
        free(s->disk_key_prefix);
        s->prefix = s->root = s->disk_key_prefix = NULL;
    }
    return rc;
}

char *agent_store_ch_key(const agent_store_info *s, const char *store_key)
{
    if (!s->local)
        return strdup(store_key);
    char *r = malloc(strlen(s->root) + strlen(store_key) + 1);
    if (r)
        sprintf(r, "%s%s", s->root, store_key);
    return r;
}

char *agent_store_key_of(const agent_store_info *s, const char *ch_key)
{
    if (!s->local)
        return strdup(ch_key);
    if (!ferry_starts_with(ch_key, s->root))
        return NULL;
    return strdup(ch_key + strlen(s->root));
}

int agent_env_open_store(agent_env *env, ferry_objstore_role role, ferry_objstore **out,
                         ferry_err *err)
{
    if (role == FERRY_ROLE_JANITOR)
        return ferry_err_set(err, FERRY_EINTERNAL, "the agent never uses the janitor role");
    int rc = agent_env_store(env, err);
    if (rc)
        return rc;
    return ferry_objstore_open_from_config(&env->cfg, role, out, err);
}

/* The version read in the last AGENT_CACHE_MS into *out (false: none). */
static bool cached_version(agent_cache *cache, ferry_ch_version *out)
{
    pthread_mutex_lock(&cache->mu);
    bool fresh = cache->version_at_ms > 0 &&
                 ferry_clock_ms() - cache->version_at_ms < AGENT_CACHE_MS;
    if (fresh)
        *out = cache->version;
    pthread_mutex_unlock(&cache->mu);
    return fresh;
}

int agent_env_server_version(agent_env *env, ferry_ch_version *out, ferry_err *err)
{
    agent_cache *cache = &env->a->cache;
    if (env->cached && cached_version(cache, out))
        return FERRY_OK;
    if (env->cached) { /* one lookup at a time (agent_table_dirs) */
        pthread_mutex_lock(&cache->fill);
        if (cached_version(cache, out)) {
            pthread_mutex_unlock(&cache->fill);
            return FERRY_OK;
        }
    }
    int rc = agent_env_ch(env, err);
    if (!rc)
        rc = ferry_ch_server_version(env->ch, out, err);
    if (!rc) {
        pthread_mutex_lock(&cache->mu);
        cache->version = *out;
        cache->version_at_ms = ferry_clock_ms();
        pthread_mutex_unlock(&cache->mu);
    }
    if (env->cached)
        pthread_mutex_unlock(&cache->fill);
    return rc;
}

int agent_env_pointer_version(agent_env *env, int *version, ferry_err *err)
{
    int rc = agent_env_config(env, err);
    if (rc)
        return rc;
    uint64_t v;
    if ((rc = ferry_config_u64(&env->cfg, "cluster", NULL, "pointer_format", 5, &v, err)))
        return rc;
    ferry_ch_version sv;
    if ((rc = agent_env_server_version(env, &sv, err)))
        return rc;
    if ((rc = ferry_agent_pointer_version_ok((int)(v > 100 ? 100 : v), &sv, err))) {
        env->status = 422;
        return ferry_err_prefix(err, "%s: [cluster] pointer_format: ", env->a->config_path);
    }
    *version = (int)v;
    return FERRY_OK;
}

void agent_cache_init(agent_cache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->fill, NULL);
}

static void disks_free(agent_disk *d, size_t n);

void agent_cache_free(agent_cache *c)
{
    disks_free(c->disks, c->n_disks);
    for (size_t i = 0; i < AGENT_CACHE_TABLES; i++) {
        free(c->tables[i].db);
        free(c->tables[i].table);
        ferry_ch_data_paths_free(c->tables[i].paths, c->tables[i].n);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->fill);
    memset(c, 0, sizeof *c);
}

static void disks_free(agent_disk *d, size_t n)
{
    for (size_t i = 0; d && i < n; i++) {
        free(d[i].name);
        free(d[i].path);
    }
    free(d);
}

/* A copy of n disks (NULL: out of memory). */
static agent_disk *disks_copy(const agent_disk *from, size_t n)
{
    agent_disk *d = calloc(n ? n : 1, sizeof *d);
    for (size_t i = 0; d && i < n; i++) {
        d[i] = from[i];
        d[i].name = strdup(from[i].name);
        d[i].path = strdup(from[i].path);
        if (!d[i].name || !d[i].path) {
            disks_free(d, i + 1);
            return NULL;
        }
    }
    return d;
}

/* env's disks from the cache when listed in the last AGENT_CACHE_MS (left NULL otherwise). */
static void cached_disks(agent_env *env)
{
    agent_cache *cache = &env->a->cache;
    pthread_mutex_lock(&cache->mu);
    if (cache->disks_at_ms > 0 && ferry_clock_ms() - cache->disks_at_ms < AGENT_CACHE_MS &&
        (env->disks = disks_copy(cache->disks, cache->n_disks)))
        env->n_disks = cache->n_disks;
    pthread_mutex_unlock(&cache->mu);
}

int agent_env_roots(agent_env *env, ferry_err *err)
{
    if (env->roots_loaded)
        return FERRY_OK;
    int rc = agent_env_ch(env, err);
    ferry_ch_rows rows = {0};
    if (rc)
        return rc;
    if ((rc = ferry_roots_add(&env->roots, env->a->data_path, err)))
        return rc;
    agent_cache *cache = &env->a->cache;
    bool filling = false;
    if (env->cached) { /* a part transfer: the disks listed in the last AGENT_CACHE_MS */
        cached_disks(env);
        if (!env->disks) { /* one lookup at a time (agent_table_dirs) */
            pthread_mutex_lock(&cache->fill);
            filling = true;
            cached_disks(env);
        }
    }
    if (!env->disks) {
        /* cache_path tells a cache disk (26.7 has it; a server without the column has none) */
        ferry_err cerr = {0};
        rc = ferry_ch_query_rows(env->ch, "SELECT name, path, toUInt8(is_remote), "
                                 "toUInt8(cache_path != '') FROM system.disks ORDER BY name",
                                 &rows, NULL, &cerr);
        if (rc)
            rc = ferry_ch_query_rows(env->ch, "SELECT name, path, toUInt8(is_remote), 0 FROM "
                                     "system.disks ORDER BY name", &rows, NULL, err);
        if (rc) {
            ferry_err_prefix(err, "listing disks: ");
            goto out;
        }
        env->disks = calloc(rows.n_rows ? rows.n_rows : 1, sizeof *env->disks);
        if (!env->disks) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < rows.n_rows; i++) {
            agent_disk *d = &env->disks[env->n_disks++];
            d->name = strdup(ferry_ch_rows_get(&rows, i, 0));
            d->path = with_slash(ferry_ch_rows_get(&rows, i, 1));
            d->is_remote = !strcmp(ferry_ch_rows_get(&rows, i, 2), "1");
            d->is_cache = rows.n_cols > 3 && !strcmp(ferry_ch_rows_get(&rows, i, 3), "1");
            if (!d->name || !d->path) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
        }
        agent_disk *keep = disks_copy(env->disks, env->n_disks);
        if (keep) {
            pthread_mutex_lock(&cache->mu);
            disks_free(cache->disks, cache->n_disks);
            cache->disks = keep;
            cache->n_disks = env->n_disks;
            cache->disks_at_ms = ferry_clock_ms();
            pthread_mutex_unlock(&cache->mu);
        }
    }
    if (filling) {
        pthread_mutex_unlock(&cache->fill);
        filling = false;
    }
    for (size_t i = 0; i < env->n_disks; i++) {
        agent_disk *d = &env->disks[i];
        struct stat sb;
        ferry_err ignored = {0};
        if (d->path[0] == '/' && stat(d->path, &sb) == 0 &&
            ferry_roots_add(&env->roots, d->path, &ignored) != FERRY_OK)
            FLOG_WARN("agent: disk path not usable as a root disk=%s path=%s", d->name, d->path);
        agent_trash_register_disk(env, d->path); /* T3: what a killed agent left */
    }
    env->roots_loaded = true;
out:
    if (filling)
        pthread_mutex_unlock(&cache->fill);
    if (rc && env->disks) {
        /* nothing half-listed stays: the next call lists the disks again */
        disks_free(env->disks, env->n_disks);
        env->disks = NULL;
        env->n_disks = 0;
    }
    ferry_ch_rows_free(&rows);
    return rc;
}

bool agent_disk_walks(const agent_env *env, const agent_disk *d)
{
    for (size_t i = 0; i < env->n_disks; i++) {
        const agent_disk *o = &env->disks[i];
        if (o == d || !o->is_remote || strcmp(o->path, d->path))
            continue;
        if (o->is_cache != d->is_cache ? o->is_cache : o < d)
            return false;
    }
    return true;
}

const agent_disk *agent_env_disk(const agent_env *env, const char *name)
{
    for (size_t i = 0; i < env->n_disks; i++)
        if (!strcmp(env->disks[i].name, name))
            return &env->disks[i];
    return NULL;
}

void agent_table_dirs_free(agent_table_dir *d, size_t n)
{
    for (size_t i = 0; d && i < n; i++) {
        free(d[i].path);
        free(d[i].rel);
    }
    free(d);
}

/* A copy of the data paths of db.table kept in the last AGENT_CACHE_MS (false: none, or out of
 * memory). Called with cache->mu held. */
static bool cached_paths(agent_cache *cache, const char *db, const char *table,
                         ferry_ch_data_path **out, size_t *n)
{
    double now = ferry_clock_ms();
    for (size_t i = 0; i < AGENT_CACHE_TABLES; i++) {
        agent_cached_table *e = &cache->tables[i];
        if (e->at_ms <= 0 || now - e->at_ms >= AGENT_CACHE_MS || strcmp(e->db, db) ||
            strcmp(e->table, table))
            continue;
        ferry_ch_data_path *p = calloc(e->n + 1, sizeof *p);
        size_t np = 0;
        bool ok = p != NULL;
        for (; ok && np < e->n; np++) {
            p[np].disk = strdup(e->paths[np].disk);
            p[np].path = strdup(e->paths[np].path);
            ok = p[np].disk && p[np].path;
        }
        if (!ok) {
            ferry_ch_data_paths_free(p, np);
            return false;
        }
        *out = p;
        *n = np;
        return true;
    }
    return false;
}

int agent_table_dirs(agent_env *env, const char *db, const char *table, agent_table_dir **out,
                     size_t *n, ferry_err *err)
{
    ferry_ch_data_path *p = NULL;
    size_t np = 0;
    agent_table_dir *d = NULL;
    size_t nd = 0;
    int rc;
    if ((rc = agent_env_roots(env, err)))
        return rc;
    agent_cache *cache = &env->a->cache;
    bool from_cache = false, filling = false;
    if (env->cached) { /* a part transfer: the paths looked up in the last AGENT_CACHE_MS */
        pthread_mutex_lock(&cache->mu);
        from_cache = cached_paths(cache, db, table, &p, &np);
        pthread_mutex_unlock(&cache->mu);
        if (!from_cache) {
            /* one lookup at a time: the parts sent at once to a cold cache wait for the first
             * one's answer instead of each asking ClickHouse (agent_cache) */
            pthread_mutex_lock(&cache->fill);
            filling = true;
            pthread_mutex_lock(&cache->mu);
            from_cache = cached_paths(cache, db, table, &p, &np);
            pthread_mutex_unlock(&cache->mu);
        }
    }
    rc = from_cache ? FERRY_OK : ferry_ch_table_data_paths(env->ch, db, table, &p, &np, err);
    if (!rc && !from_cache && (env->cached || env->cache_fill) && np) {
        /* keep a copy in the oldest slot */
        ferry_ch_data_path *kp = calloc(np, sizeof *kp);
        char *kdb = strdup(db), *kt = strdup(table);
        bool ok = kp && kdb && kt;
        for (size_t i = 0; ok && i < np; i++) {
            kp[i].disk = strdup(p[i].disk);
            kp[i].path = strdup(p[i].path);
            ok = kp[i].disk && kp[i].path;
        }
        if (ok) {
            pthread_mutex_lock(&cache->mu);
            size_t slot = 0;
            for (size_t i = 1; i < AGENT_CACHE_TABLES; i++)
                if (cache->tables[i].at_ms < cache->tables[slot].at_ms)
                    slot = i;
            agent_cached_table *e = &cache->tables[slot];
            free(e->db);
            free(e->table);
            ferry_ch_data_paths_free(e->paths, e->n);
            *e = (agent_cached_table){.db = kdb, .table = kt, .paths = kp, .n = np,
                                      .at_ms = ferry_clock_ms()};
            pthread_mutex_unlock(&cache->mu);
        } else {
            free(kdb);
            free(kt);
            ferry_ch_data_paths_free(kp, kp ? np : 0);
        }
    }
    if (filling) {
        pthread_mutex_unlock(&cache->fill);
        filling = false;
    }
    if (rc == FERRY_ENOTFOUND || (rc == FERRY_OK && np == 0)) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "table %s.%s does not exist", db, table);
        goto out;
    }
    if (rc)
        goto out;
    d = calloc(np, sizeof *d);
    if (!d) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < np; i++) {
        const agent_disk *disk = agent_env_disk(env, p[i].disk);
        if (!disk || !ferry_starts_with(p[i].path, disk->path)) {
            rc = ferry_err_set(err, FERRY_EINTERNAL, "table %s.%s: data path %s is not under "
                               "its disk %s", db, table, p[i].path, p[i].disk);
            goto out;
        }
        char *canon = NULL;
        if ((rc = ferry_roots_check(&env->roots, p[i].path, &canon, err)))
            goto out;
        d[nd].disk = disk;
        d[nd].path = with_slash(canon);
        free(canon);
        d[nd].rel = strdup(p[i].path + strlen(disk->path));
        nd++;
        if (!d[nd - 1].path || !d[nd - 1].rel) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        if (!ferry_safe_relpath(d[nd - 1].rel)) {
            rc = ferry_err_set(err, FERRY_EINTERNAL, "table %s.%s: unexpected data path %s",
                               db, table, p[i].path);
            goto out;
        }
    }
    *out = d;
    *n = nd;
    d = NULL;
    nd = 0;
out:
    if (filling)
        pthread_mutex_unlock(&cache->fill);
    agent_table_dirs_free(d, nd);
    ferry_ch_data_paths_free(p, np);
    return rc;
}

int agent_pick_dir(const agent_table_dir *d, size_t n, const char *disk, bool want_remote,
                   const agent_table_dir **out, ferry_err *err)
{
    const agent_table_dir *found = NULL;
    size_t matches = 0;
    for (size_t i = 0; i < n; i++) {
        if (disk ? !strcmp(d[i].disk->name, disk) : d[i].disk->is_remote == want_remote) {
            if (!found)
                found = &d[i];
            matches++;
        }
    }
    if (!found)
        return ferry_err_set(err, FERRY_EINVAL, disk ? "the table has no data on disk '%s'"
                                                     : "the table has no %s disk%s",
                             disk ? disk : (want_remote ? "object-storage" : "local"),
                             disk ? "" : " in its storage policy");
    if (!disk && want_remote && matches > 1)
        return ferry_err_set(err, FERRY_EINVAL, "the table has several object-storage disks; "
                             "name one with \"disk\"");
    *out = found;
    return FERRY_OK;
}

int agent_find_frozen_part(agent_env *env, const agent_table_dir *dirs, size_t n,
                           const char *freeze, const char *part, char **dir,
                           const agent_disk **disk, ferry_err *err)
{
    for (size_t i = 0; i < n; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%sshadow/%s/%s%s", dirs[i].disk->path, freeze, dirs[i].rel, part);
        struct stat sb;
        if (lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        int rc = ferry_roots_check(&env->roots, p, dir, err);
        if (rc)
            return rc;
        *disk = dirs[i].disk;
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_ENOTFOUND, "part %s is not in freeze '%s' of this table",
                         part, freeze);
}

int agent_find_live_part(agent_env *env, const agent_table_dir *dirs, size_t n, const char *part,
                         char **dir, const agent_disk **disk, ferry_err *err)
{
    for (size_t i = 0; i < n; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s%s", dirs[i].path, part);
        struct stat sb;
        if (lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (!dirs[i].disk->is_remote)
            return ferry_err_set(err, FERRY_EINVAL, "part %s is on disk '%s', which is not an "
                                 "object-storage disk: only pointer parts are sent live (freeze "
                                 "a part of a local disk and send it from the freeze)",
                                 part, dirs[i].disk->name);
        int rc = ferry_roots_check(&env->roots, p, dir, err);
        if (rc)
            return rc;
        *disk = dirs[i].disk;
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_ENOTFOUND, "part %s is not in this table's folders (merged, "
                         "moved or detached since it was listed?)", part);
}

/* ---- request fields ------------------------------------------------------------------------ */

int agent_req_str(json_t *req, const char *field, const char **out, ferry_err *err)
{
    const char *s = json_string_value(json_object_get(req, field));
    if (!s || !*s)
        return ferry_err_set(err, FERRY_EINVAL, "\"%s\" (a non-empty string) is required", field);
    if (strlen(s) > 1024)
        return ferry_err_set(err, FERRY_EINVAL, "\"%s\" is too long", field);
    *out = s;
    return FERRY_OK;
}

int agent_req_name(json_t *req, const char *field, const char **out, ferry_err *err)
{
    int rc = agent_req_str(req, field, out, err);
    if (rc)
        return rc;
    if (!ferry_safe_component(*out, false))
        return ferry_err_set(err, FERRY_EINVAL, "\"%s\": '%.200s' is not allowed (a plain name "
                             "of [A-Za-z0-9_.-], not starting with '.')", field, *out);
    return FERRY_OK;
}

const char *agent_req_opt(json_t *req, const char *field)
{
    const char *s = json_string_value(json_object_get(req, field));
    return s && *s ? s : NULL;
}

/* The routing table as routers read it (docs/catalog.md "The routing change log", docs/routing.md
 * "Loading the table"): the tenants and routes as compact rows handed to a callback (no JSON text
 * to build and parse again, no ferry_record per tenant), with the open repair needs (the replicas
 * of a slice that missed acknowledged writes, which reads avoid: docs/routing.md "Replicas that
 * missed writes"), and the routing change log, which says which tenants the commits since a
 * routing version touched, so that a router reads only those again instead of every route. */
#include "catalog/catalog_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/buf.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* A log entry lists at most this many bytes of names; a commit touching more (a dump, a bulk
 * registration) writes {"all":true} and routers read everything again. */
#define LOG_NAMES_MAX 16384

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

#define NEED_DIR "jobs/" FERRY_REPAIR_NEED_ID_PREFIX

void ferry_catalog_repair_need_id(const char *tenant, uint32_t split, char *out, size_t size)
{
    char id[2 * FERRY_NAME_MAX + 32];
    snprintf(id, sizeof id, FERRY_REPAIR_NEED_ID_PREFIX "%s.%u", tenant, split);
    if (strlen(id) >= FERRY_NAME_MAX) /* a long tenant name: its hash keeps the id unique */
        snprintf(id, sizeof id, FERRY_REPAIR_NEED_ID_PREFIX "h%016llx.%u",
                 (unsigned long long)XXH3_64bits(tenant, strlen(tenant)), split);
    snprintf(out, size, "%s", id);
}

/* Whether name[0..len) has the shape of a hashed tenant in a repair-need id (h + 16 hex). */
static bool hashed_name(const char *name, size_t len)
{
    if (len != 17 || name[0] != 'h')
        return false;
    for (size_t i = 1; i < len; i++)
        if (!strchr("0123456789abcdef", name[i]))
            return false;
    return true;
}

/* The tenant named by a route's, a tenant's or a repair need's path ("routes/T/3", "tenants/T",
 * "jobs/repair-need.T.3") as [*name, +len): PATH_TENANT; PATH_NONE for other paths; PATH_ALL for
 * a repair need whose id holds a hash instead of the name (or may: a tenant named like a hash),
 * which the log cannot name. */
enum { PATH_NONE, PATH_TENANT, PATH_ALL };
static int path_tenant(const char *path, const char **name, size_t *len)
{
    const char *p;
    if (!strncmp(path, "routes/", 7)) {
        p = path + 7;
    } else if (!strncmp(path, "tenants/", 8)) {
        p = path + 8;
    } else if (!strncmp(path, NEED_DIR, strlen(NEED_DIR))) {
        p = path + strlen(NEED_DIR);
        const char *dot = strrchr(p, '.');
        if (!dot || dot == p)
            return PATH_NONE;
        *name = p;
        *len = (size_t)(dot - p);
        return hashed_name(p, *len) ? PATH_ALL : PATH_TENANT;
    } else {
        return PATH_NONE;
    }
    *name = p;
    *len = strcspn(p, "/");
    return *len > 0 ? PATH_TENANT : PATH_NONE;
}

char *cat_routing_log_doc(const cat_op *ops, size_t n)
{
    char **names = calloc(n ? n : 1, sizeof *names);
    size_t k = 0, bytes = 0;
    ferry_buf b = FERRY_BUF_INIT;
    int oom = !names;
    bool all = false;
    for (size_t i = 0; i < n && !oom; i++) {
        const char *t;
        size_t len;
        int kind = ops[i].type == CAT_CHECK ? PATH_NONE : path_tenant(ops[i].path, &t, &len);
        all |= kind == PATH_ALL;
        if (kind != PATH_TENANT)
            continue;
        if (!(names[k] = strndup(t, len)))
            oom = 1;
        else
            k++;
    }
    if (!oom && k > 1)
        qsort(names, k, sizeof *names, str_cmp);
    oom |= ferry_buf_puts(&b, "{\"tenants\":[");
    for (size_t i = 0, out = 0; i < k && !oom; i++) {
        if (i && !strcmp(names[i], names[i - 1]))
            continue;
        bytes += strlen(names[i]) + 3;
        if (bytes > LOG_NAMES_MAX)
            break;
        /* key names are [A-Za-z0-9_.-] (cat_name_ok): nothing to escape */
        oom |= ferry_buf_printf(&b, "%s\"%s\"", out++ ? "," : "", names[i]);
    }
    oom |= ferry_buf_puts(&b, "]}");
    if (!oom && (all || bytes > LOG_NAMES_MAX)) {
        ferry_buf_reset(&b);
        oom |= ferry_buf_puts(&b, "{\"all\":true}");
    }
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(names);
    if (oom) {
        ferry_buf_free(&b);
        return NULL;
    }
    return ferry_buf_detach(&b);
}

void ferry_routing_changes_free(char **tenants, size_t n)
{
    for (size_t i = 0; tenants && i < n; i++)
        free(tenants[i]);
    free(tenants);
}

int ferry_catalog_routing_changes(ferry_catalog *c, uint64_t since, uint64_t upto, bool *covered,
                                  char ***tenants, size_t *n, ferry_err *err)
{
    *covered = false;
    *tenants = NULL;
    *n = 0;
    if (upto < since)
        return FERRY_OK; /* the version went back (a catalog replaced): read everything */
    if (upto - since > CAT_ROUTING_LOG_KEEP)
        return FERRY_OK;
    char **v = NULL;
    size_t k = 0, cap = 0;
    int rc = FERRY_OK;
    bool all = false;
    for (uint64_t ver = since + 1; ver <= upto && !rc && !all; ver++) {
        char path[64];
        snprintf(path, sizeof path, CAT_ROUTING_LOG_DIR "/%llu", (unsigned long long)ver);
        cat_item it = {0};
        rc = c->ops->get(c, path, &it, err);
        if (rc == FERRY_ENOTFOUND) { /* pruned, or never written (an import set the version) */
            ferry_err_clear(err);
            rc = FERRY_OK;
            all = true;
            break;
        }
        if (rc)
            break;
        json_error_t je;
        json_t *o = json_loads(it.doc, 0, &je);
        json_t *arr = o ? json_object_get(o, "tenants") : NULL;
        if (!o || json_is_true(json_object_get(o, "all")) || !json_is_array(arr)) {
            all = true; /* too many to list, or an entry this version does not understand */
        } else {
            size_t i;
            json_t *s;
            json_array_foreach(arr, i, s) {
                const char *name = json_string_value(s);
                if (!name || !cat_name_ok(name))
                    continue;
                if (k == cap) {
                    size_t ncap = cap ? cap * 2 : 16;
                    char **nv = realloc(v, ncap * sizeof *nv);
                    if (!nv) {
                        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                        break;
                    }
                    v = nv;
                    cap = ncap;
                }
                if (!(v[k] = strdup(name))) {
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                    break;
                }
                k++;
            }
        }
        json_decref(o);
        cat_item_free(&it);
    }
    if (rc || all) {
        ferry_routing_changes_free(v, k);
        return rc;
    }
    if (k > 1)
        qsort(v, k, sizeof *v, str_cmp);
    size_t u = 0; /* unique */
    for (size_t i = 0; i < k; i++) {
        if (u && !strcmp(v[i], v[u - 1])) {
            free(v[i]);
            continue;
        }
        v[u++] = v[i];
    }
    *tenants = v;
    *n = u;
    *covered = true;
    return FERRY_OK;
}

/* A tenant document in the canonical encoding, {"name":"T"[,"rf":N],"splits":N}, taken apart
 * without a JSON parser. false: anything else (decode it). */
static bool tenant_fast(const char *doc, const char **name, size_t *n_name, uint32_t *splits)
{
    static const char k1[] = "{\"name\":\"", krf[] = ",\"rf\":", ksp[] = ",\"splits\":";
    if (strncmp(doc, k1, sizeof k1 - 1))
        return false;
    const char *p = doc + sizeof k1 - 1, *q = strpbrk(p, "\"\\");
    if (!q || *q != '"')
        return false;
    *name = p;
    *n_name = (size_t)(q - p);
    p = q + 1;
    if (!strncmp(p, krf, sizeof krf - 1)) {
        p += sizeof krf - 1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (strncmp(p, ksp, sizeof ksp - 1))
        return false;
    p += sizeof ksp - 1;
    uint64_t v = 0;
    const char *d = p;
    while (*p >= '0' && *p <= '9' && v <= UINT32_MAX)
        v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == d || v > UINT32_MAX || strcmp(p, "}"))
        return false;
    *splits = (uint32_t)v;
    return true;
}

static int tenant_row(const cat_item *it, ferry_record *r, ferry_routing_row_fn fn, void *arg,
                      ferry_err *err)
{
    ferry_routing_row row = {.kind = FERRY_REC_TENANT};
    if (!tenant_fast(it->doc, &row.tenant, &row.tenant_len, &row.splits)) {
        int rc = cat_record_decode(FERRY_REC_TENANT, it->doc, r, err);
        if (rc) {
            ferry_err_prefix(err, "%s: ", it->path);
            return rc;
        }
        row.tenant = r->u.tenant.name;
        row.tenant_len = strlen(row.tenant);
        row.splits = r->u.tenant.splits;
    }
    return fn(&row, arg, err);
}

static int route_row(const cat_item *it, ferry_record *r, ferry_routing_row_fn fn, void *arg,
                     ferry_err *err)
{
    ferry_routing_row row = {.kind = FERRY_REC_ROUTE};
    char shtext[FERRY_SHARDS_TEXT_MAX];
    if (!cat_route_fast(it->doc, &row.shards, &row.shards_len, &row.split, &row.tenant,
                        &row.tenant_len)) {
        int rc = cat_record_decode(FERRY_REC_ROUTE, it->doc, r, err);
        if (rc) {
            ferry_err_prefix(err, "%s: ", it->path);
            return rc;
        }
        row.tenant = r->u.route.tenant;
        row.tenant_len = strlen(row.tenant);
        row.split = r->u.route.split;
        row.shards = ferry_shard_set_str(&r->u.route.shards, shtext);
        row.shards_len = strlen(row.shards);
    }
    return fn(&row, arg, err);
}

/* Every document of a scan to fn, each given back as soon as it has been seen. */
static int rows_of(ferry_catalog *c, const char *prefix, int depth, bool route, ferry_record *r,
                   ferry_routing_row_fn fn, void *arg, ferry_err *err)
{
    cat_items items = {0};
    int rc = c->ops->scan(c, prefix, depth, &items, err);
    for (size_t i = 0; i < items.n && !rc; i++) {
        rc = route ? route_row(&items.v[i], r, fn, arg, err)
                   : tenant_row(&items.v[i], r, fn, arg, err);
        cat_item_free(&items.v[i]);
    }
    cat_items_free(&items);
    return rc;
}

/* A repair-need record's document as a row (FERRY_REC_JOB) to fn; a document that is not one
 * (another job kind under the prefix, a foreign encoding) is skipped. */
static int need_row(const cat_item *it, ferry_record *r, ferry_routing_row_fn fn, void *arg,
                    ferry_err *err)
{
    ferry_err e = {0};
    if (cat_record_decode(FERRY_REC_JOB, it->doc, r, &e))
        return FERRY_OK;
    json_t *d = json_loads(ferry_job_data(&r->u.job), 0, NULL);
    const char *t = json_string_value(json_object_get(d, "tenant"));
    const char *missed = json_string_value(json_object_get(d, "missed"));
    json_t *split = json_object_get(d, "split");
    int rc = FERRY_OK;
    if (t && missed && json_is_integer(split) && json_integer_value(split) >= 0 &&
        json_integer_value(split) <= UINT32_MAX) {
        ferry_routing_row row = {.kind = FERRY_REC_JOB, .tenant = t, .tenant_len = strlen(t),
                                 .split = (uint32_t)json_integer_value(split),
                                 .shards = missed, .shards_len = strlen(missed)};
        rc = fn(&row, arg, err);
    }
    json_decref(d);
    ferry_record_free(r); /* the job's data: r is read into again for the next one */
    return rc;
}

/* ---- the index of open repair needs (catalog_int.h) ---- */

/* "jobs/repair-need.X" -> "indexes/repair_needs/repair-need.X"; false for any other path. */
static bool need_index_path(const char *record_path, char *out, size_t size)
{
    if (strncmp(record_path, NEED_DIR, strlen(NEED_DIR)))
        return false;
    const char *id = record_path + strlen(cat_kind_dir(FERRY_REC_JOB)) + 1;
    return (size_t)snprintf(out, size, "%s/%s", CAT_NEED_INDEX_DIR, id) < size;
}

void cat_need_index_ops_free(cat_op *all, size_t n, size_t n_all)
{
    if (!all)
        return;
    for (size_t i = n; i < n_all; i++) {
        free(all[i].path);
        free(all[i].doc);
    }
    free(all);
}

int cat_need_index_ops(ferry_catalog *c, const cat_op *ops, size_t n, cat_op **all,
                       size_t *n_all, ferry_err *err)
{
    *all = NULL;
    *n_all = n;
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += ops[i].type != CAT_CHECK && !strncmp(ops[i].path, NEED_DIR, strlen(NEED_DIR));
    if (!want)
        return FERRY_OK;
    size_t cap = n + want, m = n;
    cat_op *out = calloc(cap, sizeof *out);
    if (!out)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memcpy(out, ops, n * sizeof *out);
    int rc = FERRY_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        char ipath[1024];
        if (ops[i].type == CAT_CHECK || !need_index_path(ops[i].path, ipath, sizeof ipath))
            continue;
        bool later = false; /* the batch's last word on the record decides */
        for (size_t j = i + 1; j < n && !later; j++)
            later = ops[j].type != CAT_CHECK && !strcmp(ops[j].path, ops[i].path);
        if (later)
            continue;
        cat_item it = {0};
        rc = c->ops->get(c, ipath, &it, err);
        bool have = rc == FERRY_OK;
        cat_item_free(&it);
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
            rc = FERRY_OK;
        }
        if (rc)
            break;
        if (ops[i].type == CAT_DELETE)
            rc = have ? cat_op_push(&out, &m, &cap, CAT_DELETE, ipath, NULL, err) : FERRY_OK;
        else /* the entry is a copy of the record's document */
            rc = cat_op_push(&out, &m, &cap, have ? CAT_SET : CAT_CREATE, ipath, ops[i].doc, err);
    }
    if (rc || m == n) {
        cat_need_index_ops_free(out, n, m);
        return rc;
    }
    *all = out;
    *n_all = m;
    return FERRY_OK;
}

/* Makes the index agree with the repair-need records and writes the marker, in one commit; each
 * entry it adds or rewrites comes with a check of its record's version, so a need that changed
 * meanwhile, or a second builder (the marker exists), fails it (FERRY_ECONFLICT). */
static int need_index_build(ferry_catalog *c, ferry_err *err)
{
    cat_items jobs = {0}, entries = {0};
    cat_op *ops = NULL;
    size_t n = 0, cap = 0;
    int64_t *versions = NULL;
    int rc = c->ops->scan(c, cat_kind_dir(FERRY_REC_JOB), 1, &jobs, err);
    if (!rc && (rc = c->ops->scan(c, CAT_NEED_INDEX_DIR, 1, &entries, err)) == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    for (size_t i = 0; !rc && i < jobs.n; i++) {
        char ipath[1024];
        if (!jobs.v[i].path || !need_index_path(jobs.v[i].path, ipath, sizeof ipath))
            continue;
        bool have = false;
        for (size_t k = 0; k < entries.n && !have; k++)
            have = !strcmp(entries.v[k].path, ipath);
        rc = cat_op_push(&ops, &n, &cap, CAT_CHECK, jobs.v[i].path, NULL, err);
        if (!rc) {
            ops[n - 1].version = jobs.v[i].version;
            rc = cat_op_push(&ops, &n, &cap, have ? CAT_SET : CAT_CREATE, ipath, jobs.v[i].doc,
                             err);
        }
    }
    for (size_t k = 0; !rc && k < entries.n; k++) { /* entries of records that are gone */
        const char *id = entries.v[k].path + strlen(CAT_NEED_INDEX_DIR) + 1;
        bool open = false;
        for (size_t i = 0; i < jobs.n && !open; i++)
            open = jobs.v[i].path &&
                   !strcmp(jobs.v[i].path + strlen(cat_kind_dir(FERRY_REC_JOB)) + 1, id);
        if (!open)
            rc = cat_op_push(&ops, &n, &cap, CAT_DELETE, entries.v[k].path, NULL, err);
    }
    if (!rc)
        rc = cat_op_push(&ops, &n, &cap, CAT_CREATE, CAT_NEED_INDEX_MARKER, "{}", err);
    if (!rc && !(versions = calloc(n, sizeof *versions)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc) {
        cat_commit_req req = {ops, n, CAT_ROUTING_KEEP, 0, versions, NULL};
        ferry_commit_info info = {0};
        rc = c->ops->commit(c, &req, &info, err);
    }
    free(versions);
    cat_need_index_ops_free(ops, 0, n);
    cat_items_free(&jobs);
    cat_items_free(&entries);
    return rc;
}

/* Every open repair need: from the index (built first when the catalog has none), else, when it
 * cannot be built now (a change meanwhile, a reader that may not write), from one scan of every
 * job record. */
static int need_rows_all(ferry_catalog *c, ferry_record *r, ferry_routing_row_fn fn, void *arg,
                         ferry_err *err)
{
    cat_item marker = {0};
    int rc = c->ops->get(c, CAT_NEED_INDEX_MARKER, &marker, err);
    cat_item_free(&marker);
    bool indexed = rc == FERRY_OK;
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        ferry_err e = {0};
        indexed = need_index_build(c, &e) == FERRY_OK;
        rc = FERRY_OK;
    }
    if (rc)
        return rc;
    cat_items items = {0};
    rc = c->ops->scan(c, indexed ? CAT_NEED_INDEX_DIR : cat_kind_dir(FERRY_REC_JOB), 1, &items,
                      err);
    if (rc == FERRY_ENOTFOUND) { /* no need was ever indexed */
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    for (size_t i = 0; i < items.n && !rc; i++)
        if (items.v[i].path && (indexed || !strncmp(items.v[i].path, NEED_DIR, strlen(NEED_DIR))))
            rc = need_row(&items.v[i], r, fn, arg, err);
    cat_items_free(&items);
    return rc;
}

/* One tenant's route rows pass through here on their way to fn: the splits of routes with more
 * than one shard are noted (only those can have a repair need: a write is acknowledged with a
 * replica missing only when another one took it). */
typedef struct tenant_pass {
    ferry_routing_row_fn fn;
    void *arg;
    uint32_t *splits;
    size_t n, cap;
} tenant_pass;

static int pass_row(const ferry_routing_row *row, void *arg, ferry_err *err)
{
    tenant_pass *tp = arg;
    if (row->kind == FERRY_REC_ROUTE && memchr(row->shards, ',', row->shards_len)) {
        if (tp->n == tp->cap) {
            size_t cap = tp->cap ? tp->cap * 2 : 16;
            uint32_t *v = realloc(tp->splits, cap * sizeof *v);
            if (!v)
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            tp->splits = v;
            tp->cap = cap;
        }
        tp->splits[tp->n++] = row->split;
    }
    return tp->fn(row, tp->arg, err);
}

int ferry_catalog_routing_rows(ferry_catalog *c, const char *tenant, ferry_routing_row_fn fn,
                               void *arg, ferry_err *err)
{
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_ROUTE);
    int rc;
    if (!tenant) {
        rc = rows_of(c, cat_kind_dir(FERRY_REC_TENANT), 1, false, &r, fn, arg, err);
        if (!rc)
            rc = rows_of(c, cat_kind_dir(FERRY_REC_ROUTE), 2, true, &r, fn, arg, err);
        if (!rc)
            rc = need_rows_all(c, &r, fn, arg, err);
        return rc;
    }
    if (!cat_name_ok(tenant))
        return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a valid tenant name", tenant);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", cat_kind_dir(FERRY_REC_TENANT), tenant);
    cat_item it = {0};
    rc = c->ops->get(c, path, &it, err);
    if (rc == FERRY_ENOTFOUND) { /* gone: its routes, if any are left, still come */
        ferry_err_clear(err);
        rc = FERRY_OK;
    } else if (!rc) {
        if (!it.path && !(it.path = strdup(path)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (!rc)
            rc = tenant_row(&it, &r, fn, arg, err);
    }
    cat_item_free(&it);
    snprintf(path, sizeof path, "%s/%s", cat_kind_dir(FERRY_REC_ROUTE), tenant);
    tenant_pass tp = {.fn = fn, .arg = arg};
    if (!rc)
        rc = rows_of(c, path, 1, true, &r, pass_row, &tp, err);
    for (size_t i = 0; i < tp.n && !rc; i++) {
        char id[FERRY_NAME_MAX];
        ferry_catalog_repair_need_id(tenant, tp.splits[i], id, sizeof id);
        snprintf(path, sizeof path, "%s/%s", cat_kind_dir(FERRY_REC_JOB), id);
        cat_item need = {0};
        rc = c->ops->get(c, path, &need, err);
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
            rc = FERRY_OK;
        } else if (!rc) {
            rc = need_row(&need, &r, fn, arg, err);
        }
        cat_item_free(&need);
    }
    free(tp.splits);
    return rc;
}

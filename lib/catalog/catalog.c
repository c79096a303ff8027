/* The catalog's public interface: opens a backend by URL and turns typed records, batches,
 * move transitions, the routing table and dumps into the backend's path/document operations. */
#include "catalog/catalog_int.h"

#include <ctype.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/buf.h"
#include "ferry/strutil.h"

#define DEFAULT_CHUNK_OPS 100
#define DUMP_FORMAT "ferry-catalog"
#define DUMP_VERSION 1

int ferry_catalog_open(const char *url, ferry_catalog **out, ferry_err *err)
{
    *out = NULL;
    if (!url || !*url)
        return ferry_err_set(err, FERRY_EINVAL,
                             "no catalog URL (expected sqlite:/path or zk://host:port/chroot)");
    ferry_catalog *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    c->chunk_ops = DEFAULT_CHUNK_OPS;
    int rc;
    if (ferry_starts_with(url, "sqlite:"))
        rc = cat_sqlite_open(c, url + strlen("sqlite:"), err);
    else if (ferry_starts_with(url, "zk://"))
        rc = cat_zk_open(c, url + strlen("zk://"), err);
    else
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "catalog URL '%s' has an unknown scheme (expected sqlite:/path or "
                           "zk://host:port[,host:port]/chroot)",
                           url);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return FERRY_OK;
}

void ferry_catalog_close(ferry_catalog *c)
{
    if (!c)
        return;
    c->ops->close(c);
    free(c);
}

const char *ferry_catalog_backend(const ferry_catalog *c) { return c->ops->name; }

void ferry_catalog_set_chunk_ops(ferry_catalog *c, size_t ops)
{
    c->chunk_ops = ops ? ops : DEFAULT_CHUNK_OPS;
}

void ferry_catalog_set_progress(ferry_catalog *c, ferry_catalog_progress_fn fn, void *arg)
{
    c->progress = fn;
    c->progress_arg = arg;
}

int ferry_catalog_recover(ferry_catalog *c, size_t *recovered, ferry_err *err)
{
    size_t n = 0;
    int rc = c->ops->recover(c, &n, err);
    if (recovered)
        *recovered = n;
    return rc;
}

/* ---- reading ---- */

int ferry_catalog_get(ferry_catalog *c, ferry_record *rec, ferry_err *err)
{
    char path[1024];
    int rc = cat_record_path(rec, path, sizeof path, err);
    if (rc)
        return rc;
    cat_item it = {0};
    rc = c->ops->get(c, path, &it, err);
    if (rc)
        return rc;
    ferry_record r;
    rc = cat_record_decode(rec->kind, it.doc, &r, err);
    if (rc) {
        ferry_err_prefix(err, "%s: ", path);
    } else {
        ferry_record_free(rec);
        *rec = r;
        rec->version = it.version;
    }
    cat_item_free(&it);
    return rc;
}

static bool seg_end(char c)
{
    return c == '/' || c == '\0';
}

/* Whether bytes [from, to) are all digits (and there is at least one). */
static bool all_digits(const char *s, size_t from, size_t to)
{
    if (to <= from)
        return false;
    for (size_t k = from; k < to; k++)
        if (s[k] < '0' || s[k] > '9')
            return false;
    return true;
}

/* One pass to the first difference, then only that segment is looked at: sorting a million
 * paths calls this twenty million times. */
int cat_path_cmp(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        i++;
    if (a[i] == b[i])
        return 0;
    size_t s = i, ea = i, eb = i;
    while (s > 0 && a[s - 1] != '/')
        s--;
    while (!seg_end(a[ea]))
        ea++;
    while (!seg_end(b[eb]))
        eb++;
    /* numbers as numbers: a shorter one (no leading zeros in keys) is smaller */
    if (ea - s != eb - s && all_digits(a, s, ea) && all_digits(b, s, eb))
        return ea < eb ? -1 : 1;
    bool enda = seg_end(a[i]), endb = seg_end(b[i]);
    if (enda && endb) /* equal segments: the path that ends is smaller */
        return a[i] == '\0' ? -1 : 1;
    if (enda || endb) /* a segment that is a prefix of the other is smaller */
        return enda ? -1 : 1;
    return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
}

static int item_cmp(const void *x, const void *y)
{
    return cat_path_cmp(((const cat_item *)x)->path, ((const cat_item *)y)->path);
}

/* Length of the path's parent ("routes/acme" of "routes/acme/3"). */
static size_t parent_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

/* Sorts items by key. A backend lists one parent's documents together (SQLite in text order,
 * which differs from key order only where numbers of different lengths meet), so each parent's
 * run is sorted alone and the runs are checked to be in order; only when they are not is the
 * whole list sorted. A million routes sort in a linear pass and short sorts, not 20 million
 * comparisons. */
static void sort_items(cat_items *items)
{
    cat_item *v = items->v;
    size_t n = items->n;
    for (size_t i = 0, j; i < n; i = j) {
        size_t pl = parent_len(v[i].path);
        for (j = i + 1; j < n && parent_len(v[j].path) == pl && !memcmp(v[j].path, v[i].path, pl);
             j++)
            ;
        if (j - i > 1)
            qsort(v + i, j - i, sizeof *v, item_cmp);
    }
    for (size_t i = 1; i < n; i++)
        if (cat_path_cmp(v[i - 1].path, v[i].path) > 0) {
            qsort(v, n, sizeof *v, item_cmp);
            return;
        }
}

/* The stored documents of kind (under prefix), sorted by key; path names the folder for
 * messages (at least 1024 bytes). */
static int scan_sorted(ferry_catalog *c, enum ferry_record_kind kind, const char *const *prefix,
                       size_t nprefix, cat_items *items, char *path, ferry_err *err)
{
    if ((unsigned)kind >= FERRY_REC_KIND_COUNT)
        return ferry_err_set(err, FERRY_EINVAL, "unknown record kind %d", (int)kind);
    int depth = cat_kind_depth(kind) - (int)nprefix;
    if (depth < 0)
        return ferry_err_set(err, FERRY_EINVAL, "%s keys have only %d fields",
                             ferry_record_kind_name(kind), cat_kind_depth(kind));
    size_t len = (size_t)snprintf(path, 1024, "%s", cat_kind_dir(kind));
    for (size_t i = 0; i < nprefix; i++) {
        if (!cat_name_ok(prefix[i]))
            return ferry_err_set(err, FERRY_EINVAL, "'%s' is not a valid key", prefix[i]);
        len += (size_t)snprintf(path + len, 1024 - len, "/%s", prefix[i]);
    }
    int rc;
    if (depth == 0) {
        cat_item it = {0};
        rc = c->ops->get(c, path, &it, err);
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
            return FERRY_OK;
        }
        if (!rc) {
            rc = cat_items_push(items, it.path ? it.path : path, it.doc, strlen(it.doc),
                                it.version);
            if (rc)
                ferry_err_set(err, FERRY_ENOMEM, "out of memory listing %s", path);
            cat_item_free(&it);
        }
    } else {
        rc = c->ops->scan(c, path, depth, items, err);
    }
    if (!rc && items->n > 1)
        sort_items(items);
    return rc;
}

int ferry_catalog_list(ferry_catalog *c, enum ferry_record_kind kind, const char *const *prefix,
                       size_t nprefix, ferry_record_list *out, ferry_err *err)
{
    out->items = NULL;
    out->n = 0;
    char path[1024];
    cat_items items = {0};
    int rc = scan_sorted(c, kind, prefix, nprefix, &items, path, err);
    if (rc)
        goto out;
    if (items.n) {
        out->items = calloc(items.n, sizeof *out->items);
        if (!out->items) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory listing %s", path);
            goto out;
        }
    }
    for (size_t i = 0; i < items.n; i++) {
        rc = cat_record_decode(kind, items.v[i].doc, &out->items[i], err);
        if (rc) {
            ferry_err_prefix(err, "%s: ", items.v[i].path);
            goto out;
        }
        out->items[i].version = items.v[i].version;
        out->n++;
    }
out:
    cat_items_free(&items);
    if (rc)
        ferry_record_list_free(out);
    return rc;
}

int ferry_catalog_each(ferry_catalog *c, enum ferry_record_kind kind, const char *const *prefix,
                       size_t nprefix, ferry_record_fn fn, void *arg, ferry_err *err)
{
    char path[1024];
    cat_items items = {0};
    ferry_record r;
    ferry_record_init(&r, kind);
    int rc = scan_sorted(c, kind, prefix, nprefix, &items, path, err);
    for (size_t i = 0; i < items.n && !rc; i++) {
        rc = cat_record_decode(kind, items.v[i].doc, &r, err);
        if (rc) {
            ferry_err_prefix(err, "%s: ", items.v[i].path);
            break;
        }
        r.version = items.v[i].version;
        /* the document is not needed any more: a long scan gives its memory back as it goes */
        free(items.v[i].doc);
        items.v[i].doc = NULL;
        rc = fn(&r, arg, err);
        ferry_record_free(&r); /* a part's objects, a job's data: fn copied what it keeps */
    }
    ferry_record_free(&r);
    cat_items_free(&items);
    return rc;
}

/* ---- batches ---- */

ferry_batch *ferry_batch_new(void) { return calloc(1, sizeof(ferry_batch)); }

void ferry_batch_free(ferry_batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->ops[i].path);
        free(b->ops[i].doc);
    }
    free(b->ops);
    free(b);
}

size_t ferry_batch_size(const ferry_batch *b) { return b->n; }

static int batch_add(ferry_batch *b, enum cat_op_type type, const ferry_record *rec, ferry_err *err)
{
    char path[1024];
    int rc = cat_record_path(rec, path, sizeof path, err);
    if (rc)
        return rc;
    if (type != CAT_CREATE && rec->version < FERRY_VERSION_ANY)
        return ferry_err_set(err, FERRY_EINVAL, "%s: bad expected version %lld", path,
                             (long long)rec->version);
    if (type == CAT_CHECK && rec->version == FERRY_VERSION_ANY)
        return ferry_err_set(err, FERRY_EINVAL, "%s: a check needs a version", path);
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        cat_op *ops = realloc(b->ops, cap * sizeof *ops);
        if (!ops)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory queueing %s", path);
        b->ops = ops;
        b->cap = cap;
    }
    cat_op *op = &b->ops[b->n];
    memset(op, 0, sizeof *op);
    op->type = type;
    op->version = type == CAT_CREATE ? FERRY_VERSION_ANY : rec->version;
    /* Shards are part of the routing state: a router must know a shard (its replicas and
     * credentials) before any route names it, so a shard change raises the routing version like
     * a route change, and routers reload both consistently. Users too: a changed password, a
     * removed user or new tenant bindings reach every router within one routing-version wait. */
    op->is_route = (rec->kind == FERRY_REC_ROUTE || rec->kind == FERRY_REC_SHARD ||
                    rec->kind == FERRY_REC_USER || rec->kind == FERRY_REC_TENANT) &&
                   type != CAT_CHECK;
    /* a slice's replicas that missed acknowledged writes: routers keep reads off them */
    if (rec->kind == FERRY_REC_JOB && type != CAT_CHECK &&
        !strncmp(rec->u.job.id, FERRY_REPAIR_NEED_ID_PREFIX, strlen(FERRY_REPAIR_NEED_ID_PREFIX)))
        op->is_route = true;
    if (rec->kind == FERRY_REC_MOVE && type != CAT_CHECK) {
        bool unfinished = type != CAT_DELETE && !ferry_move_finished(rec->u.move.state);
        op->move_index = !unfinished ? CAT_INDEX_DROP
                         : type == CAT_SET && op->version != FERRY_VERSION_ANY ? CAT_INDEX_KEEP
                                                                               : CAT_INDEX_WANT;
    }
    op->path = strdup(path);
    if (type == CAT_CREATE || type == CAT_SET) {
        op->doc = cat_record_encode(rec);
        op->doc_len = op->doc ? strlen(op->doc) : 0;
    }
    if (!op->path || ((type == CAT_CREATE || type == CAT_SET) && !op->doc)) {
        free(op->path);
        free(op->doc);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory queueing %s", path);
    }
    b->n++;
    return FERRY_OK;
}

int ferry_batch_create(ferry_batch *b, const ferry_record *rec, ferry_err *err)
{
    return batch_add(b, CAT_CREATE, rec, err);
}
int ferry_batch_update(ferry_batch *b, const ferry_record *rec, ferry_err *err)
{
    return batch_add(b, CAT_SET, rec, err);
}
int ferry_batch_delete(ferry_batch *b, const ferry_record *rec, ferry_err *err)
{
    return batch_add(b, CAT_DELETE, rec, err);
}
int ferry_batch_check(ferry_batch *b, const ferry_record *rec, ferry_err *err)
{
    return batch_add(b, CAT_CHECK, rec, err);
}

static int commit_ops(ferry_catalog *c, const ferry_batch *b, enum cat_routing_change routing,
                      uint64_t routing_value, int64_t *new_versions, ferry_commit_info *info,
                      ferry_err *err)
{
    ferry_commit_info local = {0};
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    cat_commit_req req = {b->ops, b->n, routing, routing_value, new_versions, NULL};
    if (routing == CAT_ROUTING_KEEP)
        for (size_t i = 0; i < b->n; i++)
            if (b->ops[i].is_route)
                req.routing = CAT_ROUTING_BUMP;
    if (b->n == 0 && req.routing == CAT_ROUTING_KEEP)
        return FERRY_OK;
    /* move records carry their entry in the index of unfinished moves along */
    cat_op *all = NULL;
    size_t n_all = b->n;
    int64_t *all_versions = NULL;
    char *log = NULL; /* the routing change log's entry (routing_delta.c) */
    if (req.routing == CAT_ROUTING_BUMP && !(log = cat_routing_log_doc(b->ops, b->n)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    req.routing_log = log;
    int rc = cat_move_index_ops(c, b->ops, b->n, &all, &n_all, err);
    if (rc) {
        free(log);
        return rc;
    }
    /* and repair-need records their copy in the index of open needs (routing_delta.c) */
    cat_op *with_needs = NULL;
    size_t n_needs_all = n_all;
    rc = cat_need_index_ops(c, all ? all : b->ops, n_all, &with_needs, &n_needs_all, err);
    if (rc)
        goto out;
    if (with_needs) {
        if (!all) { /* nothing of the move index: the added ops are the only ones owned */
            all = with_needs;
        } else { /* both: take the need ops over into one array owned beyond n_all */
            cat_op *grown = realloc(all, n_needs_all * sizeof *grown);
            if (!grown) {
                cat_need_index_ops_free(with_needs, n_all, n_needs_all);
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            all = grown;
            memcpy(all + n_all, with_needs + n_all, (n_needs_all - n_all) * sizeof *all);
            free(with_needs); /* its added ops now belong to all */
        }
        n_all = n_needs_all;
    }
    if (all) {
        all_versions = calloc(n_all, sizeof *all_versions);
        if (!all_versions) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        req.ops = all;
        req.n = n_all;
        req.new_versions = all_versions;
    }
    rc = c->ops->commit(c, &req, info, err);
    if (!rc && all)
        memcpy(new_versions, all_versions, b->n * sizeof *new_versions);
out:
    free(log);
    free(all_versions);
    cat_move_index_ops_free(all, b->n, n_all);
    return rc;
}

int ferry_catalog_commit_versions(ferry_catalog *c, const ferry_batch *b, int64_t *new_versions,
                                  ferry_commit_info *info, ferry_err *err)
{
    return commit_ops(c, b, CAT_ROUTING_KEEP, 0, new_versions, info, err);
}

int ferry_catalog_commit(ferry_catalog *c, const ferry_batch *b, ferry_commit_info *info,
                         ferry_err *err)
{
    int64_t *nv = calloc(b->n ? b->n : 1, sizeof *nv);
    if (!nv)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = commit_ops(c, b, CAT_ROUTING_KEEP, 0, nv, info, err);
    free(nv);
    return rc;
}

static int single(ferry_catalog *c, enum cat_op_type type, ferry_record *rec, bool quiet,
                  ferry_err *err)
{
    ferry_batch b = {0};
    int64_t nv = -1;
    int rc = batch_add(&b, type, rec, err);
    if (!rc && quiet)
        b.ops[0].is_route = false;
    if (!rc)
        rc = commit_ops(c, &b, CAT_ROUTING_KEEP, 0, &nv, NULL, err);
    if (!rc)
        rec->version = nv;
    for (size_t i = 0; i < b.n; i++) {
        free(b.ops[i].path);
        free(b.ops[i].doc);
    }
    free(b.ops);
    return rc;
}

int ferry_catalog_create(ferry_catalog *c, ferry_record *rec, ferry_err *err)
{
    return single(c, CAT_CREATE, rec, false, err);
}
int ferry_catalog_update(ferry_catalog *c, ferry_record *rec, ferry_err *err)
{
    return single(c, CAT_SET, rec, false, err);
}
int ferry_catalog_update_quiet(ferry_catalog *c, ferry_record *rec, ferry_err *err)
{
    if (rec->kind == FERRY_REC_ROUTE || rec->kind == FERRY_REC_SHARD ||
        rec->kind == FERRY_REC_USER || rec->kind == FERRY_REC_TENANT)
        return ferry_err_set(err, FERRY_EINVAL, "every change of a %s record changes the routing",
                             rec->kind == FERRY_REC_ROUTE   ? "route"
                             : rec->kind == FERRY_REC_SHARD ? "shard"
                             : rec->kind == FERRY_REC_USER  ? "user"
                                                            : "tenant");
    return single(c, CAT_SET, rec, true, err);
}
int ferry_catalog_delete(ferry_catalog *c, ferry_record *rec, ferry_err *err)
{
    return single(c, CAT_DELETE, rec, false, err);
}

/* ---- routing ---- */

int ferry_catalog_routing_version(ferry_catalog *c, uint64_t *version, ferry_err *err)
{
    return c->ops->routing_version(c, version, err);
}

int ferry_catalog_routing_wait(ferry_catalog *c, uint64_t known, int timeout_ms, uint64_t *now,
                               ferry_err *err)
{
    return c->ops->routing_wait(c, known, timeout_ms, now, err);
}

/* s[0..n) as a JSON string, escaped as jansson escapes (ASCII control characters, quote,
 * backslash), so the text equals what json_dumps would write. */
static int put_json_string(ferry_buf *b, const char *s, size_t n)
{
    int rc = ferry_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        size_t run = i; /* the characters that need no escape, in one append */
        while (run < n && (unsigned char)s[run] >= 0x20 && s[run] != '"' && s[run] != '\\')
            run++;
        if (run > i) {
            rc |= ferry_buf_append(b, s + i, run - i);
            i = run;
            if (i == n)
                break;
        }
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': rc |= ferry_buf_puts(b, "\\\""); break;
        case '\\': rc |= ferry_buf_puts(b, "\\\\"); break;
        case '\b': rc |= ferry_buf_puts(b, "\\b"); break;
        case '\f': rc |= ferry_buf_puts(b, "\\f"); break;
        case '\n': rc |= ferry_buf_puts(b, "\\n"); break;
        case '\r': rc |= ferry_buf_puts(b, "\\r"); break;
        case '\t': rc |= ferry_buf_puts(b, "\\t"); break;
        default:
            rc |= c < 0x20 ? ferry_buf_printf(b, "\\u%04x", c) : ferry_buf_putc(b, (char)c);
        }
    }
    return rc | ferry_buf_putc(b, '"');
}

/* The comma-separated list as a JSON array of its trimmed, non-empty items. */
static int put_shard_list(ferry_buf *b, const char *csv, size_t len)
{
    int rc = ferry_buf_putc(b, '[');
    bool first = true;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && csv[j] != ',')
            j++;
        size_t s = i, e = j;
        while (s < e && isspace((unsigned char)csv[s]))
            s++;
        while (e > s && isspace((unsigned char)csv[e - 1]))
            e--;
        if (e > s) {
            if (!first)
                rc |= ferry_buf_putc(b, ',');
            rc |= put_json_string(b, csv + s, e - s);
            first = false;
        }
        i = j + 1;
    }
    return rc | ferry_buf_putc(b, ']');
}

/* A route document in the canonical encoding, {"shards":"S","split":N,"tenant":"T"} (sorted keys,
 * nothing escaped: what cat_record_encode writes for names), taken apart without a JSON parser:
 * reading a million routes is most of a router's reload. false: anything else (decode it). */
bool cat_route_fast(const char *doc, const char **shards, size_t *n_shards, uint32_t *split,
                       const char **tenant, size_t *n_tenant)
{
    static const char k1[] = "{\"shards\":\"", k2[] = "\",\"split\":", k3[] = ",\"tenant\":\"";
    if (strncmp(doc, k1, sizeof k1 - 1))
        return false;
    const char *p = doc + sizeof k1 - 1, *q = strpbrk(p, "\"\\");
    if (!q || *q != '"' || strncmp(q, k2, sizeof k2 - 1))
        return false;
    *shards = p;
    *n_shards = (size_t)(q - p);
    p = q + sizeof k2 - 1;
    uint64_t v = 0;
    const char *d = p;
    while (*p >= '0' && *p <= '9' && v <= UINT32_MAX)
        v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == d || v > UINT32_MAX || (*d == '0' && p - d > 1) || strncmp(p, k3, sizeof k3 - 1))
        return false;
    *split = (uint32_t)v;
    p += sizeof k3 - 1;
    q = strpbrk(p, "\"\\");
    if (!q || *q != '"' || strcmp(q, "\"}"))
        return false;
    *tenant = p;
    *n_tenant = (size_t)(q - p);
    return true;
}

int ferry_catalog_routing_json(ferry_catalog *c, const char *tenant, int64_t split, char **json,
                               ferry_err *err)
{
    *json = NULL;
    char splitbuf[24];
    const char *prefix[2] = {tenant, splitbuf};
    size_t nprefix = tenant ? (split >= 0 ? 2 : 1) : 0;
    snprintf(splitbuf, sizeof splitbuf, "%lld", (long long)split);
    for (int attempt = 0; attempt < 20; attempt++) {
        uint64_t v1 = 0, v2 = 0;
        char path[1024];
        cat_items items = {0};
        int rc = ferry_catalog_routing_version(c, &v1, err);
        if (!rc)
            rc = scan_sorted(c, FERRY_REC_ROUTE, prefix, nprefix, &items, path, err);
        if (!rc)
            rc = ferry_catalog_routing_version(c, &v2, err);
        if (rc || v1 != v2) { /* v1 != v2: a switch happened while reading: read again */
            cat_items_free(&items);
            if (rc)
                return rc;
            continue;
        }
        /* the text json_dumps(JSON_COMPACT) wrote when this was a jansson tree: the same bytes */
        ferry_buf b = FERRY_BUF_INIT;
        int oom = ferry_buf_printf(&b, "{\"version\":%llu,\"slices\":[", (unsigned long long)v1);
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_ROUTE);
        char shtext[FERRY_SHARDS_TEXT_MAX];
        for (size_t i = 0; i < items.n && !rc; i++) {
            const char *sh, *tn;
            size_t nsh, ntn;
            uint32_t sp;
            if (!cat_route_fast(items.v[i].doc, &sh, &nsh, &sp, &tn, &ntn)) {
                rc = cat_record_decode(FERRY_REC_ROUTE, items.v[i].doc, &r, err);
                if (rc) {
                    ferry_err_prefix(err, "%s: ", items.v[i].path);
                    break;
                }
                sh = ferry_shard_set_str(&r.u.route.shards, shtext);
                nsh = strlen(sh);
                sp = r.u.route.split;
                tn = r.u.route.tenant;
                ntn = strlen(tn);
            }
            if (i)
                oom |= ferry_buf_putc(&b, ',');
            oom |= ferry_buf_puts(&b, "{\"tenant\":");
            oom |= put_json_string(&b, tn, ntn);
            oom |= ferry_buf_printf(&b, ",\"split\":%u,\"shards\":", sp);
            oom |= put_shard_list(&b, sh, nsh);
            oom |= ferry_buf_putc(&b, '}');
            /* the document is not needed any more: give its memory back as we go */
            free(items.v[i].doc);
            items.v[i].doc = NULL;
        }
        oom |= ferry_buf_puts(&b, "]}");
        cat_items_free(&items);
        if (!rc && oom)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (rc) {
            ferry_buf_free(&b);
            return rc;
        }
        *json = ferry_buf_detach(&b);
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_ETIMEOUT,
                         "the routing table kept changing while it was read; try again");
}

/* ---- lease ---- */

struct ferry_lease {
    void *token;
};

int ferry_catalog_lease_acquire(ferry_catalog *c, const char *name, const char *owner,
                                ferry_lease **out, ferry_err *err)
{
    *out = NULL;
    if (!cat_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "lease name '%s' is not a valid name", name);
    ferry_lease *l = calloc(1, sizeof *l);
    if (!l)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = c->ops->lease_acquire(c, name, owner ? owner : "", &l->token, err);
    if (rc) {
        free(l);
        return rc;
    }
    *out = l;
    return FERRY_OK;
}

bool ferry_catalog_lease_valid(ferry_catalog *c, const ferry_lease *lease)
{
    return lease && c->ops->lease_valid(c, lease->token);
}

void ferry_catalog_lease_release(ferry_catalog *c, ferry_lease *lease)
{
    if (!lease)
        return;
    c->ops->lease_release(c, lease->token);
    free(lease);
}

/* ---- dump ---- */

int ferry_catalog_export(ferry_catalog *c, char **json, ferry_err *err)
{
    *json = NULL;
    int rc = FERRY_OK;
    json_t *root = json_object();
    uint64_t rv = 0;
    rc = ferry_catalog_routing_version(c, &rv, err);
    if (rc)
        goto out;
    json_object_set_new(root, "format", json_string(DUMP_FORMAT));
    json_object_set_new(root, "format_version", json_integer(DUMP_VERSION));
    json_object_set_new(root, "routing_version", json_integer((json_int_t)rv));
    for (int k = 0; k < FERRY_REC_KIND_COUNT; k++) {
        ferry_record_list l = {0};
        rc = ferry_catalog_list(c, (enum ferry_record_kind)k, NULL, 0, &l, err);
        if (rc)
            goto out;
        json_t *a = json_array();
        for (size_t i = 0; i < l.n; i++)
            json_array_append_new(a, cat_record_to_json(&l.items[i]));
        json_object_set_new(root, cat_kind_dir((enum ferry_record_kind)k), a);
        ferry_record_list_free(&l);
    }
    *json = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    if (!*json)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(root);
    return rc;
}

int ferry_catalog_import(ferry_catalog *c, const char *text, ferry_err *err)
{
    json_error_t je;
    ferry_batch *b = NULL;
    int64_t *nv = NULL;
    int rc = FERRY_OK;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ferry_err_set(err, FERRY_EINVAL, "not a catalog dump: line %d: %s", je.line,
                             je.text);
    const json_t *fmt = json_object_get(root, "format");
    const json_t *ver = json_object_get(root, "format_version");
    const json_t *rv = json_object_get(root, "routing_version");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), DUMP_FORMAT) ||
        !json_is_integer(ver)) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "not a catalog dump (no \"format\": \"" DUMP_FORMAT "\")");
        goto out;
    }
    if (json_integer_value(ver) != DUMP_VERSION) {
        rc = ferry_err_set(err, FERRY_EINVAL, "dump format_version %lld is not supported (expected %d)",
                           (long long)json_integer_value(ver), DUMP_VERSION);
        goto out;
    }
    if (!json_is_integer(rv) || json_integer_value(rv) < 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "dump: routing_version must be a non-negative integer");
        goto out;
    }
    size_t known = 3;
    b = ferry_batch_new();
    if (!b) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < FERRY_REC_KIND_COUNT; k++) {
        const char *dir = cat_kind_dir((enum ferry_record_kind)k);
        const json_t *a = json_object_get(root, dir);
        if (!a)
            continue;
        known++;
        if (!json_is_array(a)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "dump: '%s' must be an array", dir);
            goto out;
        }
        /* The catalog must be empty: an import never merges. */
        cat_items existing = {0};
        rc = c->ops->scan(c, dir, cat_kind_depth((enum ferry_record_kind)k), &existing, err);
        size_t n_existing = existing.n;
        cat_items_free(&existing);
        if (rc)
            goto out;
        if (n_existing) {
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "the catalog is not empty (it has %s records); import loads only "
                               "into an empty catalog",
                               ferry_record_kind_name((enum ferry_record_kind)k));
            goto out;
        }
        for (size_t i = 0; i < json_array_size(a); i++) {
            ferry_record r;
            rc = cat_record_from_json((enum ferry_record_kind)k, json_array_get(a, i), &r, err);
            if (!rc)
                rc = ferry_batch_create(b, &r, err);
            ferry_record_free(&r);
            if (rc) {
                ferry_err_prefix(err, "dump: %s[%zu]: ", dir, i);
                goto out;
            }
        }
    }
    if (known != json_object_size(root)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "dump has unknown top-level fields");
        goto out;
    }
    nv = calloc(b->n ? b->n : 1, sizeof *nv);
    if (!nv) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    rc = commit_ops(c, b, CAT_ROUTING_SET, (uint64_t)json_integer_value(rv), nv, NULL, err);
out:
    free(nv);
    ferry_batch_free(b);
    json_decref(root);
    return rc;
}

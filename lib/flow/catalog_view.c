/* The catalog's tenants, slices and routes as compact arrays sorted by key, for the flows that
 * read all of them (the inventory sync, the rebalancing plan). Read through the catalog's compact
 * scans (ferry/catalog_scan.h: the slices already joined with their routes, no ferry_record per
 * item, which is 3.4 KB, the largest record kind, for a cluster of a million slices); a tenant's
 * name goes to a pool once, and each route and placement becomes indexes into one shard table
 * (mv_shards, below: each distinct stored list taken apart once, its indexes kept once), so the
 * view is a few arrays and no allocation per slice, and no consumer takes shard text apart again.
 * Every lookup after that is a binary search. The reader from decoded records
 * (mv_view_read_records) is the reference the tests compare with. */
#include "flow/move_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/catalog.h"
#include "ferry/catalog_scan.h"
#include "ferry/strmap.h"

/* ---- the string pool: chunks of memory ---- */

typedef struct mv_pool {
    char **chunks;
    size_t n_chunks, cap_chunks;
    size_t used, size; /* of the newest chunk */
} mv_pool;

#define POOL_CHUNK (256 * 1024)

/* A copy of s[0..len) and a NUL in the pool (owned by it), or NULL without memory. */
static const char *pool_put(mv_pool *p, const char *s, size_t len)
{
    if (!p->n_chunks || p->size - p->used < len + 1) {
        size_t size = len + 1 > POOL_CHUNK ? len + 1 : POOL_CHUNK;
        if (p->n_chunks == p->cap_chunks) {
            size_t nc = p->cap_chunks ? p->cap_chunks * 2 : 16;
            char **q = realloc(p->chunks, nc * sizeof *q);
            if (!q)
                return NULL;
            p->chunks = q;
            p->cap_chunks = nc;
        }
        char *c = malloc(size);
        if (!c)
            return NULL;
        p->chunks[p->n_chunks++] = c;
        p->used = 0;
        p->size = size;
    }
    char *d = p->chunks[p->n_chunks - 1] + p->used;
    memcpy(d, s, len);
    d[len] = '\0';
    p->used += len + 1;
    return d;
}

static void pool_free(mv_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_chunks; i++)
        free(p->chunks[i]);
    free(p->chunks);
    free(p);
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return FERRY_OK;
    size_t c = *cap ? *cap * 2 : 256;
    void *q = realloc(*p, c * size);
    if (!q)
        return FERRY_ENOMEM;
    *p = q;
    *cap = c;
    return FERRY_OK;
}

/* ---- shard lists as indexes (mv_shards in move_int.h) ---- */

/* The texts met, each to its list in idx: at in the low 32 bits of the value, count above. */
struct mv_text_map {
    ferry_strmap map; /* keys in pool */
    mv_pool pool;     /* the texts */
};

/* Enters names[k] (not there yet) into the names' map. */
static int name_enter(mv_shards *s, size_t k)
{
    return ferry_strmap_add(&s->by_name, s->names[k], k);
}

int mv_shards_init(mv_shards *s, const char *const *known, size_t n_known, ferry_err *err)
{
    memset(s, 0, sizeof *s);
    if (n_known > MV_SHARDS_TABLE_MAX)
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "more than %d shards", MV_SHARDS_TABLE_MAX);
    s->cap = n_known + 16;
    s->cap_idx = 1024;
    s->names = calloc(s->cap, sizeof *s->names);
    s->idx = malloc(s->cap_idx * sizeof *s->idx);
    s->pool = calloc(1, sizeof *s->pool);
    s->texts = calloc(1, sizeof *s->texts);
    if (!s->names || !s->idx || !s->pool || !s->texts)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n_known; i++) {
        if (mv_shards_find(s, known[i]) >= 0)
            return ferry_err_set(err, FERRY_EINVAL, "shard %s is there twice", known[i]);
        if (!(s->names[i] = pool_put(s->pool, known[i], strlen(known[i]))) || name_enter(s, i))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        s->n = s->n_known = i + 1;
    }
    return FERRY_OK;
}

long mv_shards_find(const mv_shards *s, const char *name)
{
    uint64_t k;
    return ferry_strmap_get(&s->by_name, name, &k) ? (long)k : -1;
}

/* The index of name, appended to the table as unknown when it is not there. */
static int shard_of(mv_shards *s, const char *name, mv_shard *out, ferry_err *err)
{
    long k = mv_shards_find(s, name);
    if (k < 0) {
        if (s->n == MV_SHARDS_TABLE_MAX)
            return ferry_err_set(err, FERRY_EUNSUPPORTED, "the lists name more than %d shards",
                                 MV_SHARDS_TABLE_MAX);
        if (grow((void **)&s->names, &s->cap, s->n, sizeof *s->names) ||
            !(s->names[s->n] = pool_put(s->pool, name, strlen(name))) || name_enter(s, s->n))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        k = (long)s->n++;
    }
    *out = (mv_shard)k;
    return FERRY_OK;
}

int mv_shards_put(mv_shards *s, const char *text, uint32_t *at, uint8_t *count, ferry_err *err)
{
    assert(s->texts); /* not sealed */
    struct mv_text_map *m = s->texts;
    uint64_t list;
    if (ferry_strmap_get(&m->map, text, &list)) {
        *at = (uint32_t)list;
        *count = (uint8_t)(list >> 32);
        return FERRY_OK;
    }
    /* a text not met before: the decoder's reading, each name to its index */
    ferry_shard_set set;
    int rc = ferry_shard_set_parse_stored(&set, text, strlen(text), err);
    if (rc)
        return rc;
    size_t n = ferry_shard_set_count(&set);
    assert(n <= FERRY_SHARDS_MAX);
    if (s->n_idx + n > UINT32_MAX)
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "more than %u shard indexes",
                             (unsigned)UINT32_MAX);
    while (s->n_idx + n > s->cap_idx) /* grow doubles a full array: cap_idx as its length */
        if (grow((void **)&s->idx, &s->cap_idx, s->cap_idx, sizeof *s->idx))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if ((rc = shard_of(s, ferry_shard_set_at(&set, i), &s->idx[s->n_idx + i], err)))
            return rc;
    const char *kept = pool_put(&m->pool, text, strlen(text));
    if (!kept || ferry_strmap_add(&m->map, kept, (uint64_t)s->n_idx | (uint64_t)n << 32))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    *at = (uint32_t)s->n_idx;
    *count = (uint8_t)n;
    s->n_idx += n;
    return FERRY_OK;
}

void mv_shards_seal(mv_shards *s)
{
    if (!s->texts)
        return;
    for (size_t i = 0; i < s->texts->pool.n_chunks; i++)
        free(s->texts->pool.chunks[i]);
    free(s->texts->pool.chunks);
    ferry_strmap_free(&s->texts->map);
    free(s->texts);
    s->texts = NULL;
}

void mv_shards_free(mv_shards *s)
{
    mv_shards_seal(s);
    pool_free(s->pool);
    free(s->names);
    free(s->idx);
    ferry_strmap_free(&s->by_name);
    memset(s, 0, sizeof *s);
}

/* ---- building the view ---- */

typedef struct view_reader {
    mv_view *v;
    size_t cap_slices, cap_tenants;
    const char *last; /* the newest tenant name in the pool (a tenant's rows come together) */
} view_reader;

static const char *tenant_name(view_reader *r, const char *name)
{
    if (r->last && !strcmp(r->last, name))
        return r->last;
    const char *s = pool_put(r->v->pool, name, strlen(name));
    return s ? (r->last = s) : NULL;
}

static int add_tenant(view_reader *r, const char *name, uint32_t splits, uint32_t rf,
                      int64_t version, ferry_err *err)
{
    mv_view *v = r->v;
    if (grow((void **)&v->tenants, &r->cap_tenants, v->n_tenants, sizeof *v->tenants))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    mv_view_tenant *t = &v->tenants[v->n_tenants];
    if (!(t->name = pool_put(v->pool, name, strlen(name))))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    t->splits = splits;
    t->rf = rf;
    t->version = version;
    v->n_tenants++;
    return FERRY_OK;
}

/* One slice key; placement NULL without a slice record, route NULL without a route. */
static int add_slice(view_reader *r, const char *tenant, uint32_t split, uint64_t bytes,
                     uint64_t rows, const char *placement, int64_t version, const char *route,
                     int64_t route_version, ferry_err *err)
{
    mv_view *v = r->v;
    if (grow((void **)&v->slices, &r->cap_slices, v->n_slices, sizeof *v->slices))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    mv_view_slice *x = &v->slices[v->n_slices];
    memset(x, 0, sizeof *x);
    if (!(x->tenant = tenant_name(r, tenant)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    if ((x->has_slice = placement != NULL) &&
        (rc = mv_shards_put(&v->shards, placement, &x->placement, &x->n_placement, err)))
        return ferry_err_prefix(err, "tenant %s split %u: placement: ", tenant, split);
    if ((x->has_route = route != NULL) &&
        (rc = mv_shards_put(&v->shards, route, &x->route, &x->n_route, err)))
        return ferry_err_prefix(err, "tenant %s split %u: route: ", tenant, split);
    x->split = split;
    x->bytes = bytes;
    x->rows = rows;
    x->version = version;
    x->route_version = route_version;
    v->n_slices++;
    return FERRY_OK;
}

int mv_slice_key_cmp(const char *ta, uint32_t sa, const char *tb, uint32_t sb)
{
    int d = strcmp(ta, tb);
    return d ? d : (sa > sb) - (sa < sb);
}

static int slice_cmp(const void *a, const void *b)
{
    const mv_view_slice *x = a, *y = b;
    return mv_slice_key_cmp(x->tenant, x->split, y->tenant, y->split);
}

static int tenant_cmp(const void *a, const void *b)
{
    return strcmp(((const mv_view_tenant *)a)->name, ((const mv_view_tenant *)b)->name);
}

/* Puts the slices in the view's order (tenant bytewise, then split as a number). The scan gives
 * each tenant's rows together with the tenants in order, the splits of one tenant perhaps not
 * ("10" before "2" on SQLite): each tenant's run (one tenant name pointer) is sorted alone by
 * split, by insertion (a run is a few dozen rows, nearly in order), and only a view that is
 * still out of order after that (it cannot be, but the check is one pass) is sorted whole. */
static void sort_slices(mv_view *v)
{
    mv_view_slice *s = v->slices;
    size_t n = v->n_slices;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && s[j].tenant == s[i].tenant; j++) {
            if (s[j - 1].split < s[j].split)
                continue;
            mv_view_slice x = s[j];
            size_t k = j;
            for (; k > i && s[k - 1].split > x.split; k--)
                s[k] = s[k - 1];
            s[k] = x;
        }
    }
    for (size_t i = 1; i < n; i++)
        if (s[i - 1].tenant == s[i].tenant ? s[i - 1].split > s[i].split
                                           : slice_cmp(&s[i - 1], &s[i]) > 0) {
            qsort(s, n, sizeof *s, slice_cmp);
            return;
        }
}

static void sort_tenants(mv_view *v)
{
    for (size_t i = 1; i < v->n_tenants; i++)
        if (tenant_cmp(&v->tenants[i - 1], &v->tenants[i]) > 0) {
            qsort(v->tenants, v->n_tenants, sizeof *v->tenants, tenant_cmp);
            return;
        }
}

static int scan_tenant(const ferry_tenant_row *t, void *arg, ferry_err *err)
{
    return add_tenant(arg, t->name, t->splits, t->rf, t->version, err);
}

static int scan_slice(const ferry_slice_row *s, void *arg, ferry_err *err)
{
    return add_slice(arg, s->tenant, s->split, s->bytes, s->rows, s->placement, s->version,
                     s->shards, s->route_version, err);
}

static int view_start(mv_view *v, view_reader *r, const char *const *shards, size_t n_shards,
                      ferry_err *err)
{
    memset(v, 0, sizeof *v);
    memset(r, 0, sizeof *r);
    r->v = v;
    if (!(v->pool = calloc(1, sizeof *v->pool)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return mv_shards_init(&v->shards, shards, n_shards, err);
}

int mv_view_read(ferry_catalog *cat, const char *const *shards, size_t n_shards, mv_view *v,
                 ferry_err *err)
{
    view_reader r;
    int rc = view_start(v, &r, shards, n_shards, err);
    if (!rc) /* one read on ZooKeeper (its slice packs carry the tenants) */
        rc = ferry_catalog_scan_tenants_slices(cat, scan_tenant, scan_slice, &r, err);
    if (rc) {
        mv_view_free(v);
        return rc;
    }
    mv_shards_seal(&v->shards);
    sort_tenants(v);
    sort_slices(v);
    return FERRY_OK;
}

/* ---- the reference reader: every record decoded ---- */

typedef struct record_reader {
    view_reader *r;
    mv_view_slice *routes; /* route records, before the merge */
    size_t n_routes, cap_routes;
} record_reader;

static int read_tenant(const ferry_record *rec, void *arg, ferry_err *err)
{
    record_reader *x = arg;
    return add_tenant(x->r, rec->u.tenant.name, rec->u.tenant.splits, rec->u.tenant.rf,
                      rec->version, err);
}

static int read_slice(const ferry_record *rec, void *arg, ferry_err *err)
{
    record_reader *x = arg;
    const ferry_slice *s = &rec->u.slice;
    char placement[FERRY_SHARDS_TEXT_MAX];
    return add_slice(x->r, s->tenant, s->split, s->bytes, s->rows,
                     ferry_shard_set_str(&s->placement, placement), rec->version, NULL, -1, err);
}

static int read_route(const ferry_record *rec, void *arg, ferry_err *err)
{
    record_reader *x = arg;
    const ferry_route *rt = &rec->u.route;
    if (grow((void **)&x->routes, &x->cap_routes, x->n_routes, sizeof *x->routes))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    mv_view_slice *s = &x->routes[x->n_routes];
    memset(s, 0, sizeof *s);
    s->tenant = tenant_name(x->r, rt->tenant);
    if (!s->tenant)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char shards[FERRY_SHARDS_TEXT_MAX];
    int rc = mv_shards_put(&x->r->v->shards, ferry_shard_set_str(&rt->shards, shards), &s->route,
                           &s->n_route, err);
    if (rc)
        return ferry_err_prefix(err, "tenant %s split %u: route: ", rt->tenant, rt->split);
    s->has_route = true;
    s->split = rt->split;
    s->route_version = rec->version;
    s->version = -1;
    x->n_routes++;
    return FERRY_OK;
}

int mv_view_read_records(ferry_catalog *cat, const char *const *shards, size_t n_shards,
                         mv_view *v, ferry_err *err)
{
    view_reader r;
    record_reader x = {.r = &r};
    mv_view_slice *all = NULL;
    int rc = view_start(v, &r, shards, n_shards, err);
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_TENANT, NULL, 0, read_tenant, &x, err);
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_SLICE, NULL, 0, read_slice, &x, err);
    r.last = NULL;
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_ROUTE, NULL, 0, read_route, &x, err);
    if (rc)
        goto out;
    /* the catalog's key order compares numbers as numbers: sort both the same (bytewise) way */
    if (v->n_tenants > 1) /* qsort of NULL, 0 is undefined */
        qsort(v->tenants, v->n_tenants, sizeof *v->tenants, tenant_cmp);
    if (v->n_slices > 1)
        qsort(v->slices, v->n_slices, sizeof *v->slices, slice_cmp);
    if (x.n_routes > 1)
        qsort(x.routes, x.n_routes, sizeof *x.routes, slice_cmp);
    all = calloc(v->n_slices + x.n_routes + 1, sizeof *all);
    if (!all) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t i = 0, j = 0, n = 0;
    while (i < v->n_slices || j < x.n_routes) {
        int d = i == v->n_slices  ? 1
                : j == x.n_routes ? -1
                                  : slice_cmp(&v->slices[i], &x.routes[j]);
        if (d < 0) {
            all[n++] = v->slices[i++];
        } else if (d > 0) {
            all[n++] = x.routes[j++]; /* a route without a slice record */
        } else {
            all[n] = v->slices[i++];
            all[n].has_route = true;
            all[n].route = x.routes[j].route;
            all[n].n_route = x.routes[j].n_route;
            all[n++].route_version = x.routes[j++].route_version;
        }
    }
    free(v->slices);
    v->slices = all;
    v->n_slices = n;
    mv_shards_seal(&v->shards);
out:
    free(x.routes);
    if (rc)
        mv_view_free(v);
    return rc;
}

void mv_view_free(mv_view *v)
{
    mv_shards_free(&v->shards);
    pool_free(v->pool);
    free(v->tenants);
    free(v->slices);
    memset(v, 0, sizeof *v);
}

const mv_view_tenant *mv_view_tenant_find(const mv_view *v, const char *name)
{
    mv_view_tenant key = {.name = (char *)name};
    return v->n_tenants ? bsearch(&key, v->tenants, v->n_tenants, sizeof *v->tenants, tenant_cmp)
                        : NULL;
}

long mv_view_slice_find(const mv_view *v, const char *tenant, uint32_t split)
{
    size_t lo = 0, hi = v->n_slices;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = mv_slice_key_cmp(v->slices[mid].tenant, v->slices[mid].split, tenant, split);
        if (!d)
            return (long)mid;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

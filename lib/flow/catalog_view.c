/* The catalog's tenants, slices and routes as compact arrays sorted by key, for the flows that
 * read all of them (the inventory sync, the rebalancing plan): read one record at a time
 * (ferry_catalog_each), since a ferry_record per item is 3.4 KB (the largest record kind) and a
 * cluster has a million slices; joined by a sort and a merge, so every lookup after that is a
 * binary search, not a scan. */
#include "flow/move_int.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/catalog.h"

typedef struct view_reader {
    mv_view *v;
    mv_view_slice *routes; /* route records, before the merge */
    size_t n_routes, cap_routes, cap_slices, cap_tenants;
    char **pool; /* tenant names of slices and routes (shared by consecutive records) */
    size_t n_pool, cap_pool;
    const char *last; /* the pool's newest name */
} view_reader;

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

/* The tenant name as a pooled string: records come in key order, so a tenant's records are
 * adjacent and share one copy. */
static const char *intern(view_reader *r, const char *name)
{
    if (r->last && !strcmp(r->last, name))
        return r->last;
    char *s = strdup(name);
    if (!s || grow((void **)&r->pool, &r->cap_pool, r->n_pool, sizeof *r->pool)) {
        free(s);
        return NULL;
    }
    r->pool[r->n_pool++] = s;
    return r->last = s;
}

static int read_tenant(const ferry_record *rec, void *arg, ferry_err *err)
{
    view_reader *r = arg;
    mv_view *v = r->v;
    if (grow((void **)&v->tenants, &r->cap_tenants, v->n_tenants, sizeof *v->tenants))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    mv_view_tenant *t = &v->tenants[v->n_tenants];
    if (!(t->name = strdup(rec->u.tenant.name)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    t->splits = rec->u.tenant.splits;
    t->rf = rec->u.tenant.rf;
    t->version = rec->version;
    v->n_tenants++;
    return FERRY_OK;
}

static int read_slice(const ferry_record *rec, void *arg, ferry_err *err)
{
    view_reader *r = arg;
    mv_view *v = r->v;
    const ferry_slice *s = &rec->u.slice;
    if (grow((void **)&v->slices, &r->cap_slices, v->n_slices, sizeof *v->slices))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    mv_view_slice *x = &v->slices[v->n_slices];
    memset(x, 0, sizeof *x);
    x->tenant = intern(r, s->tenant);
    x->placement = strdup(s->placement);
    if (!x->tenant || !x->placement) {
        free(x->placement);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    x->split = s->split;
    x->bytes = s->bytes;
    x->rows = s->rows;
    x->version = rec->version;
    x->route_version = -1;
    v->n_slices++;
    return FERRY_OK;
}

static int read_route(const ferry_record *rec, void *arg, ferry_err *err)
{
    view_reader *r = arg;
    const ferry_route *rt = &rec->u.route;
    if (grow((void **)&r->routes, &r->cap_routes, r->n_routes, sizeof *r->routes))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    mv_view_slice *x = &r->routes[r->n_routes];
    memset(x, 0, sizeof *x);
    x->tenant = intern(r, rt->tenant);
    x->route = strdup(rt->shards);
    if (!x->tenant || !x->route) {
        free(x->route);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    x->split = rt->split;
    x->route_version = rec->version;
    x->version = -1;
    r->n_routes++;
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

int mv_view_read(ferry_catalog *cat, mv_view *v, ferry_err *err)
{
    memset(v, 0, sizeof *v);
    view_reader r = {.v = v};
    mv_view_slice *all = NULL;
    int rc = ferry_catalog_each(cat, FERRY_REC_TENANT, NULL, 0, read_tenant, &r, err);
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_SLICE, NULL, 0, read_slice, &r, err);
    r.last = NULL;
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_ROUTE, NULL, 0, read_route, &r, err);
    if (rc)
        goto out;
    /* the catalog's key order compares numbers as numbers: sort both the same (bytewise) way */
    /* (qsort of an empty, NULL array is undefined behaviour: a catalog without tenants) */
    if (v->n_tenants)
        qsort(v->tenants, v->n_tenants, sizeof *v->tenants, tenant_cmp);
    if (v->n_slices)
        qsort(v->slices, v->n_slices, sizeof *v->slices, slice_cmp);
    if (r.n_routes)
        qsort(r.routes, r.n_routes, sizeof *r.routes, slice_cmp);
    all = calloc(v->n_slices + r.n_routes + 1, sizeof *all);
    if (!all) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t i = 0, j = 0, n = 0;
    while (i < v->n_slices || j < r.n_routes) {
        int d = i == v->n_slices  ? 1
                : j == r.n_routes ? -1
                                  : slice_cmp(&v->slices[i], &r.routes[j]);
        if (d < 0) {
            all[n++] = v->slices[i++];
        } else if (d > 0) {
            all[n++] = r.routes[j++]; /* a route without a slice record */
        } else {
            all[n] = v->slices[i++];
            all[n].route = r.routes[j].route;
            all[n++].route_version = r.routes[j++].route_version;
        }
    }
    free(v->slices);
    v->slices = all;
    v->n_slices = n;
    all = NULL;
    free(r.routes);
    r.routes = NULL;
    r.n_routes = 0;
out:
    for (size_t k = 0; k < r.n_routes; k++)
        free(r.routes[k].route);
    free(r.routes);
    v->pool = r.pool;
    v->n_pool = r.n_pool;
    if (rc)
        mv_view_free(v);
    return rc;
}

void mv_view_free(mv_view *v)
{
    for (size_t i = 0; i < v->n_tenants; i++)
        free(v->tenants[i].name);
    for (size_t i = 0; i < v->n_slices; i++) {
        free(v->slices[i].placement);
        free(v->slices[i].route);
    }
    for (size_t i = 0; i < v->n_pool; i++)
        free(v->pool[i]);
    free(v->tenants);
    free(v->slices);
    free(v->pool);
    memset(v, 0, sizeof *v);
}

const mv_view_tenant *mv_view_tenant_find(const mv_view *v, const char *name)
{
    mv_view_tenant key = {.name = (char *)name};
    if (!v->n_tenants)
        return NULL; /* bsearch on a NULL array is undefined, even when empty */
    return bsearch(&key, v->tenants, v->n_tenants, sizeof *v->tenants, tenant_cmp);
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

/* ---- names to indices ---- */

static const char *const *names_sorting; /* qsort has no context pointer */

static int by_name(const void *a, const void *b)
{
    return strcmp(names_sorting[*(const size_t *)a], names_sorting[*(const size_t *)b]);
}

int mv_names_init(mv_names *m, const char *const *names, size_t n, ferry_err *err)
{
    m->names = names;
    m->n = n;
    m->by_name = calloc(n + 1, sizeof *m->by_name);
    if (!m->by_name)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        m->by_name[i] = i;
    names_sorting = names;
    qsort(m->by_name, n, sizeof *m->by_name, by_name);
    return FERRY_OK;
}

long mv_names_find(const mv_names *m, const char *name, size_t len)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *x = m->names[m->by_name[mid]];
        int d = strncmp(x, name, len);
        if (!d)
            d = x[len] ? 1 : 0;
        if (!d)
            return (long)m->by_name[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

void mv_names_free(mv_names *m)
{
    free(m->by_name);
    memset(m, 0, sizeof *m);
}

/* The sweep's set computation (pure, no I/O): orphans, dangling pointers and catalog drift from
 * the pointer files read, a bucket listing and the catalog's parts. See include/ferry/sweep.h. */
#include "ferry/sweep.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

int ferry_sweep_refs_add(ferry_sweep_refs *r, const char *server, const char *disk,
                         const char *path, const char *key, uint64_t size, ferry_err *err)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        ferry_sweep_ref *n = realloc(r->items, cap * sizeof *n);
        if (!n)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        r->items = n;
        r->cap = cap;
    }
    ferry_sweep_ref *x = &r->items[r->n];
    x->server = dup0(server);
    x->disk = dup0(disk ? disk : "");
    x->path = dup0(path);
    x->key = dup0(key);
    x->size = size;
    x->outdated = false;
    if (!x->server || !x->disk || !x->path || (key && !x->key)) {
        free(x->server);
        free(x->disk);
        free(x->path);
        free(x->key);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    r->n++;
    return FERRY_OK;
}

void ferry_sweep_refs_free(ferry_sweep_refs *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->items[i].server);
        free(r->items[i].disk);
        free(r->items[i].path);
        free(r->items[i].key);
    }
    free(r->items);
    memset(r, 0, sizeof *r);
}

static int cmp_ref_key(const void *a, const void *b)
{
    const ferry_sweep_ref *x = *(const ferry_sweep_ref *const *)a;
    const ferry_sweep_ref *y = *(const ferry_sweep_ref *const *)b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if ((c = strcmp(x->server, y->server)))
        return c;
    return strcmp(x->path, y->path);
}

int ferry_refset_build(const ferry_sweep_refs *refs, ferry_refset *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    out->by_key = malloc((refs->n ? refs->n : 1) * sizeof *out->by_key);
    if (!out->by_key)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < refs->n; i++)
        if (refs->items[i].key)
            out->by_key[out->n++] = &refs->items[i];
    qsort(out->by_key, out->n, sizeof *out->by_key, cmp_ref_key);
    return FERRY_OK;
}

/* Index of the first entry whose key is >= key. */
static size_t refset_lower(const ferry_refset *s, const char *key)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(s->by_key[mid]->key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const ferry_sweep_ref *ferry_refset_find(const ferry_refset *s, const char *key)
{
    size_t lo = refset_lower(s, key);
    return lo < s->n && !strcmp(s->by_key[lo]->key, key) ? s->by_key[lo] : NULL;
}

size_t ferry_refset_range(const ferry_refset *s, const char *key, size_t *first)
{
    size_t lo = refset_lower(s, key), hi = lo;
    while (hi < s->n && !strcmp(s->by_key[hi]->key, key))
        hi++;
    *first = lo;
    return hi - lo;
}

void ferry_refset_free(ferry_refset *s)
{
    free(s->by_key);
    memset(s, 0, sizeof *s);
}

bool ferry_sweep_path_is_live(const char *path)
{
    if (ferry_starts_with(path, "shadow/") || strstr(path, "/detached/") ||
        ferry_starts_with(path, "detached/"))
        return false;
    return true;
}

size_t ferry_sweep_broken_folder(const char *path)
{
    for (const char *d = path; (d = strstr(d, "detached/broken")); d++) {
        if (d != path && d[-1] != '/')
            continue;
        const char *end = strchr(d + strlen("detached/"), '/');
        return end ? (size_t)(end - path) : 0; /* the folder itself is no pointer file */
    }
    return 0;
}

/* ---- helpers over sorted arrays ------------------------------------------------------------- */

static int cmp_info_key(const void *a, const void *b)
{
    return strcmp((*(const ferry_object_info *const *)a)->key,
                  (*(const ferry_object_info *const *)b)->key);
}

static const ferry_object_info *find_info(const ferry_object_info **sorted, size_t n,
                                          const char *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid]->key, key);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && !strcmp(sorted[lo]->key, key) ? sorted[lo] : NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool in_sorted(char *const *sorted, size_t n, const char *s)
{
    return n && bsearch(&s, sorted, n, sizeof *sorted, cmp_str) != NULL;
}

#define GROW(arr, n, cap)                                                                        \
    do {                                                                                         \
        if ((n) == (cap)) {                                                                      \
            size_t nc_ = (cap) ? (cap) * 2 : 16;                                                 \
            void *p_ = realloc((arr), nc_ * sizeof *(arr));                                      \
            if (!p_) {                                                                           \
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");                          \
                goto out;                                                                        \
            }                                                                                    \
            (arr) = p_;                                                                          \
            (cap) = nc_;                                                                         \
        }                                                                                        \
    } while (0)

static int cmp_dangling(const void *a, const void *b)
{
    const ferry_sweep_dangling *x = a, *y = b;
    int c = strcmp(x->server, y->server);
    if (!c)
        c = strcmp(x->path, y->path);
    if (!c)
        c = strcmp(x->key, y->key);
    return c;
}

static int cmp_drift(const void *a, const void *b)
{
    const ferry_sweep_drift *x = a, *y = b;
    int c = strcmp(x->server, y->server);
    if (!c)
        c = strcmp(x->table, y->table);
    if (!c)
        c = strcmp(x->partition_id, y->partition_id);
    if (!c)
        c = strcmp(x->part, y->part);
    if (!c)
        c = (int)x->kind - (int)y->kind;
    return c;
}

/* Whether a drift entry (kind, server, part) is already in the list. */
static bool drift_has(const ferry_sweep_drift *d, size_t n, enum ferry_drift_kind kind,
                      const char *server, const ferry_part *p)
{
    for (size_t i = 0; i < n; i++)
        if (d[i].kind == kind && !strcmp(d[i].server, server) && !strcmp(d[i].table, p->table) &&
            !strcmp(d[i].partition_id, p->partition_id) && !strcmp(d[i].part, p->name))
            return true;
    return false;
}

int ferry_sweep_compute(const ferry_sweep_input *in, ferry_sweep_report *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = FERRY_OK;
    ferry_refset refs = {0};
    const ferry_object_info **listing = NULL;
    char **cat_keys = NULL;
    size_t n_cat_keys = 0;
    size_t cap_o = 0, cap_d = 0, cap_x = 0, cap_c = 0;
    const char *scope = in->scope_prefix ? in->scope_prefix : "";

    if ((rc = ferry_refset_build(in->refs, &refs, err)))
        goto out;
    listing = malloc((in->n_objects ? in->n_objects : 1) * sizeof *listing);
    if (!listing) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < in->n_objects; i++)
        listing[i] = &in->objects[i];
    qsort(listing, in->n_objects, sizeof *listing, cmp_info_key);

    /* every key a catalog part names */
    size_t total = 0;
    for (size_t i = 0; i < in->n_parts; i++)
        total += in->parts[i].u.part.n_objects;
    cat_keys = malloc((total ? total : 1) * sizeof *cat_keys);
    if (!cat_keys) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < in->n_parts; i++)
        for (size_t k = 0; k < in->parts[i].u.part.n_objects; k++)
            cat_keys[n_cat_keys++] = in->parts[i].u.part.objects[k].key;
    qsort(cat_keys, n_cat_keys, sizeof *cat_keys, cmp_str);

    /* pointer files read, and references outside ferry's store or the listing's scope */
    for (size_t i = 0; i < in->refs->n; i++) {
        const ferry_sweep_ref *r = &in->refs->items[i];
        if (i == 0 || strcmp(r->server, in->refs->items[i - 1].server) ||
            strcmp(r->path, in->refs->items[i - 1].path) ||
            strcmp(r->disk, in->refs->items[i - 1].disk))
            out->n_pointer_files++;
        if (!r->key || !ferry_starts_with(r->key, scope)) {
            out->n_outside++;
            continue;
        }
        const ferry_object_info *o = find_info(listing, in->n_objects, r->key);
        if (o && o->size == r->size)
            continue;
        GROW(out->dangling, out->n_dangling, cap_d);
        ferry_sweep_dangling *d = &out->dangling[out->n_dangling];
        memset(d, 0, sizeof *d);
        d->server = strdup(r->server);
        d->disk = strdup(r->disk);
        d->path = strdup(r->path);
        d->key = strdup(r->key);
        d->want_size = r->size;
        d->missing = o == NULL;
        d->have_size = o ? o->size : 0;
        out->n_dangling++;
        if (!d->server || !d->disk || !d->path || !d->key) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }

    /* orphans: listed, named by no pointer file and no catalog part */
    for (size_t i = 0; i < in->n_objects; i++) {
        const ferry_object_info *o = listing[i];
        if (ferry_refset_find(&refs, o->key)) {
            out->n_referenced++;
            continue;
        }
        if (in_sorted(cat_keys, n_cat_keys, o->key)) {
            GROW(out->catalog_only_keys, out->n_catalog_only_keys, cap_c);
            if (!(out->catalog_only_keys[out->n_catalog_only_keys] = strdup(o->key))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            out->n_catalog_only_keys++;
            continue;
        }
        GROW(out->orphans, out->n_orphans, cap_o);
        ferry_sweep_orphan *x = &out->orphans[out->n_orphans];
        x->key = strdup(o->key);
        x->size = o->size;
        x->mtime = o->mtime;
        x->old_enough = in->min_age_s > 0 && in->now >= o->mtime &&
                        (uint64_t)(in->now - o->mtime) >= in->min_age_s;
        out->orphan_bytes += o->size;
        out->n_orphans++;
        if (!x->key) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }

    /* drift, per catalog part */
    for (size_t i = 0; i < in->n_parts; i++) {
        const ferry_part *p = &in->parts[i].u.part;
        if (!p->n_objects)
            continue;
        /* catalog_only: a listed server none of whose pointer files names any of the objects */
        char servers[FERRY_LIST_MAX];
        snprintf(servers, sizeof servers, "%s", p->servers);
        char *fields[64];
        size_t nf = servers[0] ? ferry_split(servers, ',', fields, 64) : 0;
        for (size_t s = 0; s < nf; s++) {
            const char *srv = ferry_trim(fields[s]);
            if (!*srv)
                continue;
            bool held = false;
            for (size_t k = 0; k < p->n_objects && !held; k++) {
                size_t first, n = ferry_refset_range(&refs, p->objects[k].key, &first);
                for (size_t j = first; j < first + n && !held; j++)
                    held = !strcmp(refs.by_key[j]->server, srv);
            }
            if (held || drift_has(out->drift, out->n_drift, FERRY_DRIFT_CATALOG_ONLY, srv, p))
                continue;
            GROW(out->drift, out->n_drift, cap_x);
            ferry_sweep_drift *d = &out->drift[out->n_drift];
            memset(d, 0, sizeof *d);
            d->kind = FERRY_DRIFT_CATALOG_ONLY;
            d->server = strdup(srv);
            d->table = strdup(p->table);
            d->partition_id = strdup(p->partition_id);
            d->part = strdup(p->name);
            out->n_drift++;
            if (!d->server || !d->table || !d->partition_id || !d->part) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
        }
        /* server_only: a live pointer file on a server the part does not list */
        for (size_t k = 0; k < p->n_objects; k++) {
            size_t first, n = ferry_refset_range(&refs, p->objects[k].key, &first);
            for (size_t j = first; j < first + n; j++) {
                const ferry_sweep_ref *r = refs.by_key[j];
                if (!ferry_sweep_path_is_live(r->path) || r->outdated ||
                    ferry_list_has(p->servers, r->server) ||
                    drift_has(out->drift, out->n_drift, FERRY_DRIFT_SERVER_ONLY, r->server, p))
                    continue;
                GROW(out->drift, out->n_drift, cap_x);
                ferry_sweep_drift *d = &out->drift[out->n_drift];
                memset(d, 0, sizeof *d);
                d->kind = FERRY_DRIFT_SERVER_ONLY;
                d->server = strdup(r->server);
                d->table = strdup(p->table);
                d->partition_id = strdup(p->partition_id);
                d->part = strdup(p->name);
                d->path = strdup(r->path);
                out->n_drift++;
                if (!d->server || !d->table || !d->partition_id || !d->part || !d->path) {
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                    goto out;
                }
            }
        }
    }
    if (out->n_dangling)
        qsort(out->dangling, out->n_dangling, sizeof *out->dangling, cmp_dangling);
    if (out->n_drift)
        qsort(out->drift, out->n_drift, sizeof *out->drift, cmp_drift);
out:
    ferry_refset_free(&refs);
    free(listing);
    free(cat_keys);
    if (rc)
        ferry_sweep_report_free(out);
    return rc;
}

void ferry_sweep_report_free(ferry_sweep_report *r)
{
    for (size_t i = 0; i < r->n_orphans; i++)
        free(r->orphans[i].key);
    for (size_t i = 0; i < r->n_dangling; i++) {
        free(r->dangling[i].server);
        free(r->dangling[i].disk);
        free(r->dangling[i].path);
        free(r->dangling[i].key);
    }
    for (size_t i = 0; i < r->n_drift; i++) {
        free(r->drift[i].server);
        free(r->drift[i].table);
        free(r->drift[i].partition_id);
        free(r->drift[i].part);
        free(r->drift[i].path);
    }
    for (size_t i = 0; i < r->n_catalog_only_keys; i++)
        free(r->catalog_only_keys[i]);
    free(r->orphans);
    free(r->dangling);
    free(r->drift);
    free(r->catalog_only_keys);
    memset(r, 0, sizeof *r);
}

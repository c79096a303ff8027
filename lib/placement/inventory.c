/* The placement inventory: clusters (shards with weight and capacity) and slices (tenant,
 * split, bytes), built in code or parsed from their TSV text, validated, and sorted canonically
 * so that the order of the input never shows in any result. */
#include "placement/placement_int.h"
#include "ferry/strutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "PATH:LINE: " or "PATH: " when the line is unknown. */
static void where(char *buf, size_t sz, const char *path, long line)
{
    if (line > 0)
        snprintf(buf, sz, "%s:%ld: ", path, line);
    else
        snprintf(buf, sz, "%s: ", path);
}

static bool valid_tenant(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= FERRY_NAME_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x21 || *p > 0x7e || *p == '/')
            return false;
    return true;
}

int ferry_pl_cluster_init(ferry_pl_cluster *c, const char *path, ferry_err *err)
{
    memset(c, 0, sizeof *c);
    c->path = strdup(path ? path : "<shards>");
    return c->path ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

int ferry_pl_inventory_init(ferry_pl_inventory *inv, const char *path, ferry_err *err)
{
    memset(inv, 0, sizeof *inv);
    inv->path = strdup(path ? path : "<slices>");
    return inv->path ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

int ferry_pl_cluster_add(ferry_pl_cluster *c, const char *name, double weight, uint64_t capacity,
                         long line, ferry_err *err)
{
    return ferry_pl_cluster_add_zoned(c, name, weight, capacity, NULL, line, err);
}

int ferry_pl_cluster_add_zoned(ferry_pl_cluster *c, const char *name, double weight,
                               uint64_t capacity, const char *zone, long line, ferry_err *err)
{
    char w[512];
    where(w, sizeof w, c->path, line);
    if (zone && !*zone)
        zone = NULL;
    if (zone && (!ferry_name_ok(zone) || strlen(zone) > FERRY_ZONE_NAME_MAX))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%sshard %.80s: bad zone name '%.80s' (use 1..%d characters of A-Z "
                             "a-z 0-9 _ . -, not . or ..)", w, name, zone, FERRY_ZONE_NAME_MAX);
    if (!ferry_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "%sbad shard name '%.80s' (" FERRY_NAME_RULE ")",
                             w, name);
    if (!(weight > 0) || !isfinite(weight))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%sshard %s: weight %g must be a positive number", w, name, weight);
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        ferry_pl_shard *p = realloc(c->shards, cap * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        c->shards = p;
        c->cap = cap;
    }
    char *copy = strdup(name), *zcopy = zone ? strdup(zone) : NULL;
    if (!copy || (zone && !zcopy)) {
        free(copy);
        free(zcopy);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    c->shards[c->n++] = (ferry_pl_shard){copy, weight, capacity, line, zcopy, 0};
    return FERRY_OK;
}

int ferry_pl_inventory_add(ferry_pl_inventory *inv, const char *tenant, uint32_t split,
                           uint64_t bytes, long line, ferry_err *err)
{
    char w[512];
    where(w, sizeof w, inv->path, line);
    if (!valid_tenant(tenant))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%sbad tenant name '%.80s' (use 1..%d printable characters, no "
                             "spaces and no '/')",
                             w, tenant, FERRY_NAME_MAX - 1);
    if (inv->n >= UINT32_MAX - 1)
        return ferry_err_set(err, FERRY_EINVAL, "%stoo many slices", w);
    if (inv->n == inv->cap) {
        size_t cap = inv->cap ? inv->cap * 2 : 64;
        ferry_pl_slice *p = realloc(inv->slices, cap * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        inv->slices = p;
        inv->cap = cap;
    }
    char *copy = strdup(tenant);
    if (!copy)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    inv->slices[inv->n++] = (ferry_pl_slice){copy, split, bytes, line, 0};
    return FERRY_OK;
}

static int shard_cmp(const void *a, const void *b)
{
    return strcmp(((const ferry_pl_shard *)a)->name, ((const ferry_pl_shard *)b)->name);
}

/* Tenant names compared; callers that borrow one name per tenant (the rebalancing plan) give
 * a tenant's slices the same pointer, which needs no comparison. */
static int tenant_cmp(const char *a, const char *b)
{
    return a == b ? 0 : strcmp(a, b);
}

static int slice_cmp(const void *a, const void *b)
{
    const ferry_pl_slice *x = a, *y = b;
    int c = tenant_cmp(x->tenant, y->tenant);
    if (c)
        return c;
    return x->split < y->split ? -1 : x->split > y->split;
}

int ferry_pl_cluster_finish(ferry_pl_cluster *c, ferry_err *err)
{
    if (c->n == 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: no shards (expected lines name<TAB>weight[<TAB>capacity_bytes])",
                             c->path);
    qsort(c->shards, c->n, sizeof *c->shards, shard_cmp);
    for (size_t i = 1; i < c->n; i++)
        if (!strcmp(c->shards[i - 1].name, c->shards[i].name)) {
            long a = c->shards[i - 1].line, b = c->shards[i].line;
            char w[512];
            where(w, sizeof w, c->path, a > b ? a : b);
            return ferry_err_set(err, FERRY_EINVAL, "%sduplicate shard %s (first at line %ld)",
                                 w, c->shards[i].name, a < b ? a : b);
        }
    /* zone ids: shards of one zone share the id of the zone's first shard by name order, a
     * shard without a zone has an id of its own; ids are dense, in shard order */
    free(c->zone_size);
    c->zone_size = calloc(c->n, sizeof *c->zone_size);
    if (!c->zone_size)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    c->n_zones = 0;
    c->zoned = false;
    for (size_t i = 0; i < c->n; i++) {
        ferry_pl_shard *s = &c->shards[i];
        size_t j = 0;
        if (s->zone) {
            c->zoned = true;
            for (j = 0; j < i; j++)
                if (c->shards[j].zone && !strcmp(c->shards[j].zone, s->zone))
                    break;
        }
        s->zone_id = s->zone && j < i ? c->shards[j].zone_id : (uint32_t)c->n_zones++;
        c->zone_size[s->zone_id]++;
    }
    return FERRY_OK;
}

int ferry_pl_inventory_finish(ferry_pl_inventory *inv, ferry_err *err)
{
    /* callers that read a sorted catalog add the slices in order: one pass instead of a sort
     * (a million slices: 20 million comparisons) */
    bool sorted = true;
    for (size_t i = 1; i < inv->n && sorted; i++)
        sorted = slice_cmp(&inv->slices[i - 1], &inv->slices[i]) < 0;
    if (inv->n && !sorted)
        qsort(inv->slices, inv->n, sizeof *inv->slices, slice_cmp);
    size_t tenants = 0;
    for (size_t i = 0; i < inv->n; i++) {
        if (i > 0 && !slice_cmp(&inv->slices[i - 1], &inv->slices[i])) {
            long a = inv->slices[i - 1].line, b = inv->slices[i].line;
            char w[512];
            where(w, sizeof w, inv->path, a > b ? a : b);
            return ferry_err_set(err, FERRY_EINVAL,
                                 "%sduplicate slice %s/split%u (first at line %ld)", w,
                                 inv->slices[i].tenant, inv->slices[i].split, a < b ? a : b);
        }
        if (i == 0 || tenant_cmp(inv->slices[i - 1].tenant, inv->slices[i].tenant))
            tenants++;
    }
    free(inv->tenant_first);
    free(inv->tenant_splits);
    inv->tenant_first = calloc(tenants ? tenants : 1, sizeof *inv->tenant_first);
    inv->tenant_splits = calloc(tenants ? tenants : 1, sizeof *inv->tenant_splits);
    if (!inv->tenant_first || !inv->tenant_splits)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    inv->n_tenants = 0;
    for (size_t i = 0; i < inv->n; i++) {
        if (i == 0 || tenant_cmp(inv->slices[i - 1].tenant, inv->slices[i].tenant))
            inv->tenant_first[inv->n_tenants++] = (uint32_t)i;
        inv->slices[i].tenant_index = (uint32_t)(inv->n_tenants - 1);
        inv->tenant_splits[inv->n_tenants - 1]++;
    }
    return FERRY_OK;
}

void ferry_pl_cluster_free(ferry_pl_cluster *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->shards[i].name);
        free(c->shards[i].zone);
    }
    free(c->shards);
    free(c->zone_size);
    free(c->path);
    memset(c, 0, sizeof *c);
}

void ferry_pl_inventory_free(ferry_pl_inventory *inv)
{
    for (size_t i = 0; i < inv->n; i++)
        free(inv->slices[i].tenant);
    free(inv->slices);
    free(inv->tenant_first);
    free(inv->tenant_splits);
    free(inv->path);
    memset(inv, 0, sizeof *inv);
}

long ferry_pl_cluster_find(const ferry_pl_cluster *c, const char *name)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(c->shards[mid].name, name);
        if (r == 0)
            return (long)mid;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

void ferry_pl_slice_id(const ferry_pl_slice *s, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/split%u", s->tenant, s->split);
}

/* ---- TSV parsing ---------------------------------------------------------------------------- */

typedef int (*line_fn)(void *dst, char **fields, size_t nfields, const char *path, long line,
                       ferry_err *err);

/* Calls fn for every line that is not blank or a '#' comment, with its tab-separated fields. */
static int parse_lines(const char *text, const char *path, void *dst, line_fn fn, ferry_err *err)
{
    long lineno = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char *line = ferry_strndup(p, len);
        if (!line)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        p = eol ? eol + 1 : p + len;
        ferry_chomp(line);
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '#') {
            free(line);
            continue;
        }
        char *fields[4];
        size_t nf = ferry_split(line, '\t', fields, 4);
        int rc = fn(dst, fields, nf, path, lineno, err);
        free(line);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

static int shard_line(void *dst, char **f, size_t nf, const char *path, long line, ferry_err *err)
{
    if (nf < 2 || nf > 4)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: expected 2 to 4 tab-separated columns "
                             "(name, weight[, capacity_bytes[, zone]]), got %zu",
                             path, line, nf);
    double weight;
    if (!ferry_parse_double(f[1], &weight))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: shard %.80s: weight '%.40s' is not a number", path, line,
                             f[0], f[1]);
    uint64_t capacity = 0;
    bool unlimited = nf == 4 && !strcmp(f[2], "-");
    if (nf >= 3 && !unlimited && (!ferry_parse_bytes(f[2], &capacity) || capacity == 0))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: shard %.80s: capacity '%.40s' must be a positive byte "
                             "count (e.g. 500000000000 or 500G%s)",
                             path, line, f[0], f[2], nf == 4 ? ", or - for unlimited" : "");
    return ferry_pl_cluster_add_zoned(dst, f[0], weight, capacity, nf == 4 ? f[3] : NULL, line,
                                      err);
}

static int slice_line(void *dst, char **f, size_t nf, const char *path, long line, ferry_err *err)
{
    if (nf != 3)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: expected 3 tab-separated columns (tenant, split, bytes), "
                             "got %zu",
                             path, line, nf);
    uint64_t split, bytes;
    if (!ferry_parse_u64(f[1], &split) || split >= UINT32_MAX)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: split '%.40s' is not a non-negative integer", path, line,
                             f[1]);
    if (!ferry_parse_bytes(f[2], &bytes))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: bytes '%.40s' is not a byte count (e.g. 1200000 or 3G)",
                             path, line, f[2]);
    return ferry_pl_inventory_add(dst, f[0], (uint32_t)split, bytes, line, err);
}

int ferry_pl_cluster_parse(const char *text, const char *path, ferry_pl_cluster *out,
                           ferry_err *err)
{
    int rc = ferry_pl_cluster_init(out, path, err);
    if (!rc)
        rc = parse_lines(text, out->path, out, shard_line, err);
    if (!rc)
        rc = ferry_pl_cluster_finish(out, err);
    if (rc)
        ferry_pl_cluster_free(out);
    return rc;
}

int ferry_pl_inventory_parse(const char *text, const char *path, ferry_pl_inventory *out,
                             ferry_err *err)
{
    int rc = ferry_pl_inventory_init(out, path, err);
    if (!rc)
        rc = parse_lines(text, out->path, out, slice_line, err);
    if (!rc)
        rc = ferry_pl_inventory_finish(out, err);
    if (rc)
        ferry_pl_inventory_free(out);
    return rc;
}

size_t ferry_pl_inventory_find(const ferry_pl_inventory *inv, const char *tenant, uint32_t split)
{
    size_t lo = 0, hi = inv->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(inv->slices[mid].tenant, tenant);
        if (!d)
            d = (inv->slices[mid].split > split) - (inv->slices[mid].split < split);
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

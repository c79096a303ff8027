/* Registering tenants and raising split counts in the catalog: the new slices placed next to the
 * tenant's own (ferry_split_place: only they are scored; the rest of the cluster enters as the
 * shards' loads) and routed, in the same atomic batch (ferry_split_set, ferry_split_add in
 * include/ferry/split.h). What is read does not grow with the cluster: the settings, the shards,
 * the tenant's own slices and routes, and when a shard has a capacity (the fill target needs the
 * loads) the loads the last inventory sync stored (ferry_catalog_loads_get); only before any
 * sync ran, every slice and route. */
#include "ferry/catalog.h"
#include "ferry/split.h"
#include "ferry/strutil.h"
#include "split/split_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>


void split_env_close(split_env *e)
{
    ferry_record_free(&e->settings);
    ferry_record_list_free(&e->shards);
    free(e->active);
    free(e->load);
    memset(e, 0, sizeof *e);
}

/* ---- the shards' loads: slice bytes (by key) summed over the shards of their routes ---- */

typedef struct bytes_map {
    char **keys; /* "tenant/split", owned */
    uint64_t *bytes;
    size_t mask, n;
} bytes_map;

static uint64_t *bytes_slot(bytes_map *m, const char *key, bool insert)
{
    size_t h = (size_t)XXH3_64bits(key, strlen(key)) & m->mask;
    while (m->keys[h] && strcmp(m->keys[h], key))
        h = (h + 1) & m->mask;
    if (m->keys[h])
        return &m->bytes[h];
    if (!insert)
        return NULL;
    if (!(m->keys[h] = strdup(key)))
        return NULL;
    m->n++;
    return &m->bytes[h];
}

static int bytes_grow(bytes_map *m)
{
    size_t cap = m->mask ? (m->mask + 1) * 2 : 1024;
    bytes_map g = {calloc(cap, sizeof *g.keys), calloc(cap, sizeof *g.bytes), cap - 1, 0};
    if (!g.keys || !g.bytes) {
        free(g.keys);
        free(g.bytes);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; m->mask && i <= m->mask; i++)
        if (m->keys[i]) {
            size_t h = (size_t)XXH3_64bits(m->keys[i], strlen(m->keys[i])) & g.mask;
            while (g.keys[h])
                h = (h + 1) & g.mask;
            g.keys[h] = m->keys[i];
            g.bytes[h] = m->bytes[i];
            g.n++;
        }
    free(m->keys);
    free(m->bytes);
    *m = g;
    return FERRY_OK;
}

static void bytes_free(bytes_map *m)
{
    for (size_t i = 0; m->mask && i <= m->mask; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->bytes);
}

typedef struct load_scan {
    split_env *e;
    bytes_map map;
} load_scan;

static int load_slice(const ferry_record *rec, void *arg, ferry_err *err)
{
    load_scan *ls = arg;
    const ferry_slice *s = &rec->u.slice;
    if (ls->map.n * 2 >= ls->map.mask && bytes_grow(&ls->map))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char key[FERRY_NAME_MAX + 16];
    snprintf(key, sizeof key, "%s/%u", s->tenant, s->split);
    uint64_t *b = bytes_slot(&ls->map, key, true);
    if (!b)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    *b = s->bytes;
    return FERRY_OK;
}

static int load_route(const ferry_record *rec, void *arg, ferry_err *err)
{
    (void)err;
    load_scan *ls = arg;
    const ferry_route *r = &rec->u.route;
    char key[FERRY_NAME_MAX + 16];
    snprintf(key, sizeof key, "%s/%u", r->tenant, r->split);
    const uint64_t *b = ls->map.mask ? bytes_slot(&ls->map, key, false) : NULL;
    if (!b)
        return FERRY_OK; /* a route without a slice record */
    for (size_t i = 0; i < ls->e->ns; i++)
        if (ferry_shard_set_has(&r->shards, ls->e->active[i]->name))
            ls->e->load[i] += *b;
    return FERRY_OK;
}

int split_env_open(ferry_catalog *cat, split_env *e, ferry_err *err)
{
    memset(e, 0, sizeof *e);
    ferry_record_init(&e->settings, FERRY_REC_SETTINGS);
    int rc = ferry_catalog_get(cat, &e->settings, err);
    if (rc == FERRY_ENOTFOUND)
        ferry_err_prefix(err, "the catalog holds no cluster yet (run 'ferry init'): ");
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &e->shards, err);
    if (rc)
        return rc;
    e->active = calloc(e->shards.n ? e->shards.n : 1, sizeof *e->active);
    if (!e->active)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    bool capacity = false;
    for (size_t i = 0; i < e->shards.n; i++) {
        const ferry_shard *s = &e->shards.items[i].u.shard;
        if (s->state != FERRY_SHARD_ACTIVE)
            continue; /* draining and gone shards take no new slices, nor a NEW one: only its
                         first rebalance fills it, so a raise or a new tenant placed meanwhile
                         cannot make it look filled to that rebalance (ferry_shards_settle) */
        e->active[e->ns++] = s;
        capacity |= s->capacity > 0;
    }
    if (!capacity)
        return FERRY_OK;
    e->load = calloc(e->ns, sizeof *e->load);
    if (!e->load)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* the loads the last inventory sync stored: one read */
    ferry_shard_load *stored = NULL;
    size_t n_stored = 0;
    rc = ferry_catalog_loads_get(cat, &stored, &n_stored, NULL, err);
    for (size_t i = 0; !rc && i < n_stored; i++)
        for (size_t k = 0; k < e->ns; k++)
            if (!strcmp(stored[i].shard, e->active[k]->name))
                e->load[k] = stored[i].bytes;
    free(stored);
    if (rc != FERRY_ENOTFOUND)
        return rc;
    /* none stored yet (no sync ran): count every slice on the shards of its route */
    ferry_err_clear(err);
    load_scan ls = {e, {0}};
    rc = ferry_catalog_each(cat, FERRY_REC_SLICE, NULL, 0, load_slice, &ls, err);
    if (!rc)
        rc = ferry_catalog_each(cat, FERRY_REC_ROUTE, NULL, 0, load_route, &ls, err);
    bytes_free(&ls.map);
    return rc;
}

/* The replication factor of a tenant's new slices: its own (ferry tenant set-rf), else the
 * cluster's, at most the active shards. */
static unsigned tenant_rf(const split_env *e, uint32_t own)
{
    unsigned rf = own ? own : e->settings.u.settings.rf;
    if (rf < 1)
        rf = 1;
    return rf > e->ns ? (unsigned)e->ns : rf;
}

/* Queues the slice and route records of split k placed on the active shards of slots[0..rf)
 * (ferry_split_place's indexes into e->active): created, or updated at the version of a left-over
 * record (slice_v, route_v >= 0). */
static int queue_slice(ferry_batch *b, const split_env *e, const char *tenant, uint32_t k,
                       const uint32_t *slots, unsigned rf, int64_t slice_v, int64_t route_v,
                       ferry_err *err)
{
    ferry_record s, r;
    ferry_record_init(&s, FERRY_REC_SLICE);
    snprintf(s.u.slice.tenant, sizeof s.u.slice.tenant, "%s", tenant);
    s.u.slice.split = k;
    int rc = FERRY_OK;
    for (unsigned j = 0; j < rf && !rc; j++)
        if (slots[j] != FERRY_SPLIT_NO_SHARD) {
            assert(slots[j] < e->ns);
            rc = ferry_shard_set_add(&s.u.slice.placement, e->active[slots[j]]->name, err);
        }
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", tenant);
    r.u.route.split = k;
    r.u.route.shards = s.u.slice.placement;
    s.version = slice_v;
    r.version = route_v;
    if (!rc)
        rc = slice_v >= 0 ? ferry_batch_update(b, &s, err) : ferry_batch_create(b, &s, err);
    if (!rc)
        rc = route_v >= 0 ? ferry_batch_update(b, &r, err) : ferry_batch_create(b, &r, err);
    return rc;
}

int split_set_one(ferry_catalog *cat, split_env *e, const char *tenant, uint32_t splits,
                   bool create, bool dry_run, ferry_split_change *change, ferry_err *err)
{
    ferry_record trec;
    ferry_record_list slices = {0}, routes = {0};
    ferry_split_slice_in *lin = NULL;
    int64_t *slice_v = NULL, *route_v = NULL;
    uint64_t *base = NULL;
    uint32_t *placements = NULL;
    ferry_batch *b = NULL;
    ferry_record_init(&trec, FERRY_REC_TENANT);
    snprintf(trec.u.tenant.name, sizeof trec.u.tenant.name, "%s", tenant);
    bool exists = true;
    int rc = ferry_catalog_get(cat, &trec, err);
    if (rc == FERRY_ENOTFOUND && create) {
        exists = false;
        rc = FERRY_OK;
        ferry_err_clear(err);
    } else if (rc == FERRY_ENOTFOUND) {
        ferry_err_set(err, FERRY_ENOTFOUND, "tenant %s is not registered (ferry tenant add %s)",
                      tenant, tenant);
    } else if (!rc && create) {
        rc = ferry_err_set(err, FERRY_ECONFLICT, "tenant %s already exists with %u split(s)",
                           tenant, trec.u.tenant.splits);
    }
    if (rc)
        goto out;
    uint32_t from = exists ? trec.u.tenant.splits : 0;
    change->from = from;
    change->to = splits;
    if (splits < from) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "tenant %s has %u splits; split counts only grow (rows already "
                           "written keep their split), so %u is refused",
                           tenant, from, splits);
        goto out;
    }
    if (splits == from) {
        rc = ferry_catalog_routing_version(cat, &change->routing_version, err);
        goto out;
    }
    if (e->ns == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "no active shard to place tenant %s's slices on",
                           tenant);
        goto out;
    }
    const char *prefix[] = {tenant};
    rc = ferry_catalog_list(cat, FERRY_REC_SLICE, prefix, 1, &slices, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, prefix, 1, &routes, err);
    if (rc)
        goto out;
    size_t n_new = splits - from;
    lin = calloc(slices.n + n_new, sizeof *lin);
    slice_v = malloc(n_new * sizeof *slice_v);
    route_v = malloc(n_new * sizeof *route_v);
    unsigned rf = tenant_rf(e, exists ? trec.u.tenant.rf : 0);
    placements = calloc((slices.n + n_new) * rf, sizeof *placements);
    if (!lin || !slice_v || !route_v || !placements) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < n_new; k++)
        slice_v[k] = route_v[k] = -1;
    for (size_t i = 0; i < routes.n; i++) {
        const ferry_route *r = &routes.items[i].u.route;
        if (r->split >= from && r->split < splits)
            route_v[r->split - from] = routes.items[i].version; /* left over: replaced */
    }
    size_t nl = 0;
    for (size_t i = 0; i < slices.n; i++) {
        const ferry_slice *s = &slices.items[i].u.slice;
        if (s->split >= from) {
            if (s->split < splits)
                slice_v[s->split - from] = slices.items[i].version;
            continue; /* left over from an older attempt; replaced below */
        }
        const ferry_shard_set *where = NULL;
        for (size_t j = 0; j < routes.n; j++)
            if (routes.items[j].u.route.split == s->split)
                where = &routes.items[j].u.route.shards;
        lin[nl++] = (ferry_split_slice_in){s->tenant, s->split, s->bytes, where};
    }
    size_t first_new = nl;
    for (uint32_t k = from; k < splits; k++)
        lin[nl++] = (ferry_split_slice_in){tenant, k, 0, NULL};
    if (e->load) {
        /* the loads without the tenant's own slices: the placement counts those it keeps */
        if (!(base = malloc(e->ns * sizeof *base))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(base, e->load, e->ns * sizeof *base);
        for (size_t i = 0; i < slices.n; i++)
            for (size_t j = 0; j < routes.n; j++)
                if (routes.items[j].u.route.split == slices.items[i].u.slice.split)
                    for (size_t k = 0; k < e->ns; k++)
                        if (ferry_shard_set_has(&routes.items[j].u.route.shards,
                                                e->active[k]->name))
                            base[k] -= base[k] < slices.items[i].u.slice.bytes
                                           ? base[k]
                                           : slices.items[i].u.slice.bytes;
    }
    rc = ferry_split_place(e->active, e->ns, base, lin, nl, e->settings.u.settings.hash,
                           rf, e->settings.u.settings.fill, placements, err);
    if (rc)
        goto out;
    if (dry_run) {
        rc = ferry_catalog_routing_version(cat, &change->routing_version, err);
        goto out;
    }
    if (!(b = ferry_batch_new())) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    trec.u.tenant.splits = splits;
    rc = exists ? ferry_batch_update(b, &trec, err) : ferry_batch_create(b, &trec, err);
    for (size_t i = first_new; i < nl && !rc; i++)
        rc = queue_slice(b, e, tenant, lin[i].split, placements + i * rf, rf,
                         slice_v[i - first_new], route_v[i - first_new], err);
    ferry_commit_info info = {0};
    if (!rc)
        rc = ferry_catalog_commit(cat, b, &info, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "tenant %s changed while its splits were being set; run again: ",
                         tenant);
    if (!rc)
        change->routing_version = info.routing_version;
out:
    ferry_batch_free(b);
    free(placements);
    free(lin);
    free(slice_v);
    free(route_v);
    free(base);
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    ferry_record_free(&trec);
    return rc;
}

static int check_splits(const char *tenant, uint32_t splits, ferry_err *err)
{
    if (splits < 1 || splits > FERRY_SPLITS_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "tenant %s: a split count is 1..%d, not %u",
                             tenant, FERRY_SPLITS_MAX, splits);
    return FERRY_OK;
}

int ferry_split_set(ferry_catalog *cat, const char *tenant, uint32_t splits, bool create,
                    bool dry_run, ferry_split_change *change, ferry_err *err)
{
    memset(change, 0, sizeof *change);
    snprintf(change->tenant, sizeof change->tenant, "%s", tenant);
    int rc = check_splits(tenant, splits, err);
    if (rc)
        return rc;
    split_env e;
    rc = split_env_open(cat, &e, err);
    if (!rc)
        rc = split_set_one(cat, &e, tenant, splits, create, dry_run, change, err);
    split_env_close(&e);
    return rc;
}

/* names[0..n) as one batch of new tenants. FERRY_ECONFLICT, FERRY_EINVAL or FERRY_ENOTFOUND
 * (an existing or left-over record, a bad name, a concurrent writer): nothing was written. */
static int add_group(ferry_catalog *cat, split_env *e, const char *const *names, size_t n,
                     uint32_t splits, uint64_t *version, ferry_err *err)
{
    size_t total = n * splits;
    ferry_split_slice_in *lin = calloc(total ? total : 1, sizeof *lin);
    unsigned rf = tenant_rf(e, 0);
    uint32_t *placements = calloc((total ? total : 1) * rf, sizeof *placements);
    ferry_batch *b = ferry_batch_new();
    int rc = lin && placements && b ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t t = 0; t < n && !rc; t++)
        for (uint32_t k = 0; k < splits; k++)
            lin[t * splits + k] = (ferry_split_slice_in){names[t], k, 0, NULL};
    if (!rc)
        rc = ferry_split_place(e->active, e->ns, e->load, lin, total, e->settings.u.settings.hash,
                               rf, e->settings.u.settings.fill, placements, err);
    for (size_t t = 0; t < n && !rc; t++) {
        ferry_record tr;
        ferry_record_init(&tr, FERRY_REC_TENANT);
        snprintf(tr.u.tenant.name, sizeof tr.u.tenant.name, "%s", names[t]);
        tr.u.tenant.splits = splits;
        rc = ferry_batch_create(b, &tr, err);
        for (uint32_t k = 0; k < splits && !rc; k++)
            rc = queue_slice(b, e, names[t], k, placements + (t * splits + k) * rf, rf, -1, -1,
                             err);
    }
    ferry_commit_info info = {0};
    if (!rc)
        rc = ferry_catalog_commit(cat, b, &info, err);
    if (!rc)
        *version = info.routing_version;
    ferry_batch_free(b);
    free(placements);
    free(lin);
    return rc;
}

int ferry_split_add(ferry_catalog *cat, const char *const *names, size_t n, uint32_t splits,
                    bool dry_run, ferry_split_added_fn added, void *arg, ferry_err *err)
{
    split_env e;
    ferry_split_change c;
    int rc = check_splits(n ? names[0] : "", splits, err);
    if (rc)
        return rc;
    if ((rc = split_env_open(cat, &e, err)))
        goto out;
    for (size_t g = 0; g < n && !rc; g += FERRY_SPLIT_ADD_GROUP) {
        size_t gn = n - g < FERRY_SPLIT_ADD_GROUP ? n - g : FERRY_SPLIT_ADD_GROUP;
        uint64_t version = 0;
        int grc = dry_run || e.ns == 0 ? FERRY_EINVAL
                                        : add_group(cat, &e, names + g, gn, splits, &version, err);
        if (grc == FERRY_OK) {
            for (size_t t = 0; t < gn && added; t++) {
                memset(&c, 0, sizeof c);
                snprintf(c.tenant, sizeof c.tenant, "%s", names[g + t]);
                c.to = splits;
                c.routing_version = version;
                added(&c, arg);
            }
            continue;
        }
        if (grc != FERRY_ECONFLICT && grc != FERRY_EINVAL && grc != FERRY_ENOTFOUND) {
            rc = grc;
            break;
        }
        /* One name at a time: registers those before the first that fails, and says why. */
        ferry_err_clear(err);
        for (size_t t = 0; t < gn && !rc; t++) {
            memset(&c, 0, sizeof c);
            snprintf(c.tenant, sizeof c.tenant, "%s", names[g + t]);
            rc = split_set_one(cat, &e, names[g + t], splits, true, dry_run, &c, err);
            if (!rc && added)
                added(&c, arg);
        }
    }
out:
    split_env_close(&e);
    return rc;
}

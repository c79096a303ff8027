/* The router's routing table: a snapshot of every tenant's split count, every slice's serving
 * shards and the moves in SWITCH, loaded from the catalog consistently with one routing version,
 * refreshed by a watcher thread when the version changes and checked again before every forward
 * (the version check of the write path); and rt_read_set, the one rule for which shards serve
 * reads of a slice.
 *
 * READS WHILE A SLICE MOVES (docs/routing.md "Reads during a move", docs/moves.md).
 *
 * What each shard holds of a slice during a move from S to T (lib/flow/move.c), and the routing
 * version V at each step (every step marked * is one catalog batch that changes the journal
 * and touches the slice's route, so it raises the routing version):
 *
 *    journal                     route    S real            T real               T staging
 *    PLANNED..VERIFY             S        every row         -                    a copy
 *  * SWITCH (V1)                 T        rows before the   rows written after    catching up
 *                                         switch + grace    the switch
 *  * SWITCH step PUBLISH (V2)    T        (same, frozen)    new rows + published  partitions not
 *                                                           partitions            yet published
 *  * CLEANUP (V3)                T        until DETACH      every row            -
 *
 * The rule (rt_read_set), for a snapshot of version v:
 *   - no move in SWITCH: the route's shards are complete copies: read one (those a repair need
 *     names as having missed acknowledged writes last: docs/routing.md "Replicas that missed
 *     writes");
 *   - a move in SWITCH: the route's shards other than T are complete copies (a clone's source,
 *     the other replicas of a slice with rf > 1): read one of them when there is one;
 *   - else, before PUBLISH (V1 <= v < V2): S real and T real hold disjoint parts whose union is
 *     the slice: read both, each restricted to the slice;
 *   - else, in PUBLISH (V2 <= v < V3): a read of T's real table can miss partitions still in
 *     staging, and a read of real and staging could see a partition in both or in neither (two
 *     tables are not one snapshot; MOVE PARTITION runs between them): hold the read until a
 *     newer snapshot (bounded by [router] publish_wait, then an error). MOVE PARTITION is a
 *     metadata operation, so the hold is short while the mover runs;
 *   - from CLEANUP (v >= V3): T alone (the route), never S, whose rows go at DETACH.
 *
 * Why it is exact: the union is read only under snapshots older than V2; the move, after writing
 * V2 and before its first MOVE PARTITION, waits (ferry_router_fence) until every router in
 * [cluster] routers has published V2 or later and has no read or write in flight under an older
 * version. A read takes its snapshot and registers in flight under that version in one critical
 * section (rt_read_begin), so once a router reports "V2, nothing older in flight" no union read
 * can still be running or start later. Reads under V2 of the moving slice wait before touching
 * any server; V3 is written only after the last MOVE PARTITION, so what they read after it is
 * complete on T. The source is detached only in CLEANUP, after V2's fence: no union read runs
 * then. Moves that touch a slice's state in other ways (step counters, details) do not raise
 * the version and do not change the rule's inputs (state SWITCH, step PUBLISH or not, S, T). */
#include "router_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"
#include "ferry/log.h"
#include "ferry/split.h"

/* ---- tenant blocks and snapshots ----
 *
 * LOADING THE TABLE (docs/routing.md "Loading the table"). A tenant's routes are one block: the
 * rt_route array, the shard indices they point to, the tenant's name and any shard names the
 * router does not know, in one allocation with a reference count; a snapshot's rt_tenant entries
 * point into blocks and hold one reference each. The first load reads every tenant and route as
 * rows (ferry_catalog_routing_rows). A later one reads the routing change log since the current
 * snapshot's version (ferry_catalog_routing_changes): every commit that changes a tenant's record
 * or routes raises the routing version and names the tenant there, so the tenants it does not
 * name are the same at the new version; only the named ones are read again and get new blocks,
 * the others' entries are copied with a reference. Shards, users and the moves in flight are
 * small and read whole every time. The shard indices of unchanged blocks stay right only while
 * every shard name resolves to the same slot: a snapshot keeps the name -> slot map it was built
 * with, and a reload whose map differs (a shard added, changed, gone) reads everything; so does
 * one whose log does not reach back (pruned after 1,000 versions, an import). */

static const char no_name[] = "";

struct rt_tblock {
    atomic_int refs;
    /* then, in the same allocation: the routes, their shard indices, the names */
};

static void tblock_put(rt_tblock *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1)
        free(b);
}

void rt_snapshot_put(rt_snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (size_t i = 0; i < s->n_tenants; i++)
        tblock_put(s->tenants[i].block);
    free(s->tenants);
    for (size_t i = 0; i < s->n_moves; i++)
        free(s->moves[i].tenant);
    free(s->moves);
    for (size_t i = 0; i < s->n_shard_refs; i++)
        free(s->shard_refs[i].name);
    free(s->shard_refs);
    rt_users_free(s->users, s->n_users);
    free(s);
}

rt_snapshot *rt_snapshot_get(ferry_router *r)
{
    pthread_mutex_lock(&r->mu);
    rt_snapshot *s = r->snap;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* name[0..len) against the NUL-terminated t, byte-wise then by length: a name holding a NUL
 * byte or longer than t never matches, and nothing past either end is read. */
static int name_cmp(const char *t, const char *name, size_t len)
{
    size_t tl = strlen(t);
    int d = memcmp(t, name, tl < len ? tl : len);
    if (!d)
        d = tl < len ? -1 : tl > len ? 1 : 0;
    return d;
}

const rt_tenant *rt_find_tenant(const rt_snapshot *s, const char *name, size_t len)
{
    size_t lo = 0, hi = s->n_tenants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = name_cmp(s->tenants[mid].name, name, len);
        if (!d)
            return &s->tenants[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const rt_move *rt_find_move(const rt_snapshot *s, const char *tenant, uint32_t split)
{
    size_t lo = 0, hi = s->n_moves;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rt_move *m = &s->moves[mid];
        int d = strcmp(m->tenant, tenant);
        if (!d)
            d = m->split < split ? -1 : m->split > split ? 1 : 0;
        if (!d)
            return m;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The slot name[0..len) resolves to in refs (sorted by name), or -1. */
static long ref_slot(const rt_shard_ref *refs, size_t n, const char *name, size_t len)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = name_cmp(refs[mid].name, name, len);
        if (!d)
            return (long)refs[mid].slot;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int ref_cmp(const void *a, const void *b)
{
    return strcmp(((const rt_shard_ref *)a)->name, ((const rt_shard_ref *)b)->name);
}

/* The name -> live slot map of the router's shard slots now (under reload_mu, after the sync):
 * what rt_shard_index answers for every name that has a live slot. */
static int shard_refs_now(ferry_router *r, rt_shard_ref **out, size_t *n_out, ferry_err *err)
{
    size_t n = r->n_shards, k = 0;
    rt_shard_ref *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (rt_shard_index(r, r->shards[i]->name) != (long)i)
            continue; /* retired, or an older slot of the name */
        if (!(v[k].name = strdup(r->shards[i]->name))) {
            for (size_t j = 0; j < k; j++)
                free(v[j].name);
            free(v);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        v[k++].slot = (uint32_t)i;
    }
    if (k > 1)
        qsort(v, k, sizeof *v, ref_cmp);
    *out = v;
    *n_out = k;
    return FERRY_OK;
}

static bool shard_refs_same(const rt_snapshot *s, const rt_shard_ref *v, size_t n)
{
    if (s->n_shard_refs != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s->shard_refs[i].slot != v[i].slot || strcmp(s->shard_refs[i].name, v[i].name))
            return false;
    return true;
}

/* ---- the rows read from the catalog, before the shard slots are known ---- */

typedef struct ld_tenant {
    char *name;
    uint32_t splits;
    uint32_t id;       /* the order its row came in */
} ld_tenant;

typedef struct ld_route {
    uint32_t tenant;   /* the tenant's id */
    uint32_t split;
    uint32_t text;     /* the shard list in ld.text */
    uint32_t len;
} ld_route;             /* also a repair need: the shards that missed writes */

typedef struct rt_loader {
    ld_tenant *tenants;
    size_t n_tenants, cap_tenants;
    bool sorted;       /* tenants sorted (the first route row sorts them) */
    size_t last;       /* where the previous route row's tenant is (rows come grouped) */
    ld_route *routes;
    size_t n_routes, cap_routes;
    ld_route *needs;   /* the open repair needs (docs/routing.md "Replicas that missed writes") */
    size_t n_needs, cap_needs;
    char *text;
    size_t n_text, cap_text;
} rt_loader;

static void loader_free(rt_loader *ld)
{
    for (size_t i = 0; i < ld->n_tenants; i++)
        free(ld->tenants[i].name);
    free(ld->tenants);
    free(ld->routes);
    free(ld->needs);
    free(ld->text);
    memset(ld, 0, sizeof *ld);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return FERRY_OK;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    void *q = realloc(*p, ncap * size);
    if (!q)
        return FERRY_ENOMEM;
    *p = q;
    *cap = ncap;
    return FERRY_OK;
}

static int ld_tenant_cmp(const void *a, const void *b)
{
    return strcmp(((const ld_tenant *)a)->name, ((const ld_tenant *)b)->name);
}

/* The id of the tenant name[0..len), or -1. One tenant's rows come before its routes when
 * they are read tenant by tenant: the newest row is tried first, and the tenants are sorted
 * only when a route names another. */
static long ld_find(rt_loader *ld, const char *name, size_t len)
{
    if (!ld->sorted && ld->n_tenants &&
        !name_cmp(ld->tenants[ld->n_tenants - 1].name, name, len))
        return (long)ld->tenants[ld->n_tenants - 1].id;
    if (!ld->sorted) {
        if (ld->n_tenants > 1)
            qsort(ld->tenants, ld->n_tenants, sizeof *ld->tenants, ld_tenant_cmp);
        ld->sorted = true;
        ld->last = 0;
    }
    if (ld->last < ld->n_tenants && !name_cmp(ld->tenants[ld->last].name, name, len))
        return (long)ld->tenants[ld->last].id;
    size_t lo = 0, hi = ld->n_tenants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = name_cmp(ld->tenants[mid].name, name, len);
        if (!d) {
            ld->last = mid;
            return (long)ld->tenants[mid].id;
        }
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int ld_row(const ferry_routing_row *row, void *arg, ferry_err *err)
{
    rt_loader *ld = arg;
    if (row->kind == FERRY_REC_TENANT) {
        if (grow((void **)&ld->tenants, &ld->cap_tenants, ld->n_tenants + 1, sizeof *ld->tenants))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        ld_tenant *t = &ld->tenants[ld->n_tenants];
        memset(t, 0, sizeof *t);
        if (!(t->name = strndup(row->tenant, row->tenant_len)))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        t->splits = row->splits;
        t->id = (uint32_t)ld->n_tenants++;
        ld->sorted = false;
        return FERRY_OK;
    }
    if (row->split >= FERRY_SPLITS_MAX)
        return FERRY_OK;
    long t = ld_find(ld, row->tenant, row->tenant_len);
    if (t < 0)
        return FERRY_OK; /* a route of a tenant that is gone: nothing routes to it */
    if (row->shards_len >= UINT32_MAX - ld->n_text - 1)
        return ferry_err_set(err, FERRY_ENOMEM, "the routing table's shard lists are too long");
    bool need = row->kind == FERRY_REC_JOB;
    if ((need ? grow((void **)&ld->needs, &ld->cap_needs, ld->n_needs + 1, sizeof *ld->needs)
              : grow((void **)&ld->routes, &ld->cap_routes, ld->n_routes + 1,
                     sizeof *ld->routes)) ||
        grow((void **)&ld->text, &ld->cap_text, ld->n_text + row->shards_len + 1, 1))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    ld_route *rr = need ? &ld->needs[ld->n_needs++] : &ld->routes[ld->n_routes++];
    rr->tenant = (uint32_t)t;
    rr->split = row->split;
    rr->text = (uint32_t)ld->n_text;
    rr->len = (uint32_t)row->shards_len;
    memcpy(ld->text + ld->n_text, row->shards, row->shards_len);
    ld->n_text += row->shards_len;
    ld->text[ld->n_text++] = '\0';
    return FERRY_OK;
}

/* A tenant's block from its rows, its shard names resolved with refs. slots and misses are
 * scratch space the caller reuses. */
typedef struct ld_scratch {
    uint32_t *slots; /* per route: resolved slots, in order */
    size_t n_slots, cap_slots;
    struct {
        uint32_t first, n; /* into slots */
        const char *miss;  /* the last unknown name, borrowed from ld.text, or NULL */
        size_t miss_len;
    } *r;
    size_t cap_r;
} ld_scratch;

/* Marks in routes[0..n_routes) the shards the need lr names as stale (rt_route.stale). */
static void mark_stale(const rt_loader *ld, const ld_route *lr, const rt_shard_ref *refs,
                       size_t n_refs, rt_route *routes, uint32_t n_routes)
{
    if (lr->split >= n_routes)
        return;
    rt_route *rr = &routes[lr->split];
    const char *csv = ld->text + lr->text, *item;
    size_t a = 0, len;
    while (ferry_shard_text_next(csv, lr->len, &a, &item, &len)) {
        long slot = len ? ref_slot(refs, n_refs, item, len) : -1;
        for (uint32_t k = 0; slot >= 0 && k < rr->n_shards && k < 32; k++)
            if (rr->shards[k] == (uint32_t)slot)
                rr->stale |= 1u << k;
    }
}

static int build_tenant(const rt_loader *ld, size_t ti, const uint32_t *order, size_t n,
                        const uint32_t *needs, size_t n_needs, const rt_shard_ref *refs,
                        size_t n_refs, ld_scratch *sc, rt_tenant *out, ferry_err *err)
{
    const ld_tenant *lt = &ld->tenants[ti];
    uint32_t n_routes = 0;
    for (size_t i = 0; i < n; i++)
        if (ld->routes[order[i]].split + 1 > n_routes)
            n_routes = ld->routes[order[i]].split + 1;
    if (grow((void **)&sc->r, &sc->cap_r, n_routes ? n_routes : 1, sizeof *sc->r))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memset(sc->r, 0, (n_routes ? n_routes : 1) * sizeof *sc->r);
    sc->n_slots = 0;
    size_t text = strlen(lt->name) + 1;
    for (size_t i = 0; i < n; i++) {
        const ld_route *lr = &ld->routes[order[i]];
        const char *csv = ld->text + lr->text, *item;
        sc->r[lr->split].first = (uint32_t)sc->n_slots;
        sc->r[lr->split].miss = NULL;
        /* the stored list's trimmed, non-empty items (as the catalog's decoder reads it) */
        size_t a = 0, len;
        while (ferry_shard_text_next(csv, lr->len, &a, &item, &len)) {
            if (!len)
                continue;
            long k = ref_slot(refs, n_refs, item, len);
            if (k < 0) {
                sc->r[lr->split].miss = item;
                sc->r[lr->split].miss_len = len < FERRY_NAME_MAX ? len : FERRY_NAME_MAX - 1;
                continue;
            }
            if (grow((void **)&sc->slots, &sc->cap_slots, sc->n_slots + 1, sizeof *sc->slots))
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            sc->slots[sc->n_slots++] = (uint32_t)k;
        }
        sc->r[lr->split].n = (uint32_t)sc->n_slots - sc->r[lr->split].first;
        if (sc->r[lr->split].miss)
            text += sc->r[lr->split].miss_len + 1;
    }
    size_t off_routes = (sizeof(rt_tblock) + _Alignof(rt_route) - 1) / _Alignof(rt_route) *
                        _Alignof(rt_route);
    size_t off_slots = off_routes + (size_t)n_routes * sizeof(rt_route);
    size_t off_text = off_slots + sc->n_slots * sizeof(uint32_t);
    rt_tblock *b = malloc(off_text + text);
    if (!b)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    atomic_init(&b->refs, 1);
    rt_route *routes = (rt_route *)((char *)b + off_routes);
    uint32_t *slots = (uint32_t *)((char *)b + off_slots);
    char *t = (char *)b + off_text;
    if (sc->n_slots)
        memcpy(slots, sc->slots, sc->n_slots * sizeof *slots);
    size_t nl = strlen(lt->name) + 1;
    memcpy(t, lt->name, nl);
    out->name = t;
    t += nl;
    /* routes with no row (gaps) have no shards and no name */
    for (uint32_t k = 0; k < n_routes; k++) {
        routes[k].n_shards = 0;
        routes[k].shards = NULL;
        routes[k].missing = no_name;
        routes[k].stale = 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = ld->routes[order[i]].split;
        routes[k].n_shards = sc->r[k].n;
        routes[k].shards = slots + sc->r[k].first;
        if (sc->r[k].miss) {
            memcpy(t, sc->r[k].miss, sc->r[k].miss_len);
            t[sc->r[k].miss_len] = '\0';
            routes[k].missing = t;
            t += sc->r[k].miss_len + 1;
        }
    }
    for (size_t i = 0; i < n_needs; i++)
        mark_stale(ld, &ld->needs[needs[i]], refs, n_refs, routes, n_routes);
    out->splits = lt->splits;
    out->n_routes = n_routes;
    out->routes = n_routes ? routes : NULL;
    out->block = b;
    return FERRY_OK;
}

/* Blocks for every tenant of the loader, sorted by name (out: ld->n_tenants entries). */
static int build_tenants(rt_loader *ld, const rt_shard_ref *refs, size_t n_refs, rt_tenant *out,
                         ferry_err *err)
{
    if (!ld->sorted) {
        if (ld->n_tenants > 1)
            qsort(ld->tenants, ld->n_tenants, sizeof *ld->tenants, ld_tenant_cmp);
        ld->sorted = true;
    }
    /* the route rows by tenant (counting sort: rows need not come grouped) */
    size_t *first = calloc(ld->n_tenants + 1, sizeof *first);
    uint32_t *order = malloc((ld->n_routes ? ld->n_routes : 1) * sizeof *order);
    uint32_t *pos = malloc((ld->n_tenants ? ld->n_tenants : 1) * sizeof *pos); /* id -> index */
    size_t *nfirst = calloc(ld->n_tenants + 1, sizeof *nfirst); /* the needs, the same way */
    uint32_t *norder = malloc((ld->n_needs ? ld->n_needs : 1) * sizeof *norder);
    ld_scratch sc = {0};
    int rc = FERRY_OK;
    size_t built = 0;
    if (!first || !order || !pos || !nfirst || !norder) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t t = 0; t < ld->n_tenants; t++)
        pos[ld->tenants[t].id] = (uint32_t)t;
    for (size_t i = 0; i < ld->n_routes; i++)
        first[pos[ld->routes[i].tenant] + 1]++;
    for (size_t t = 0; t < ld->n_tenants; t++)
        first[t + 1] += first[t];
    for (size_t i = 0; i < ld->n_routes; i++)
        order[first[pos[ld->routes[i].tenant]]++] = (uint32_t)i;
    for (size_t t = ld->n_tenants; t > 0; t--) /* back to the starts */
        first[t] = first[t - 1];
    first[0] = 0;
    for (size_t i = 0; i < ld->n_needs; i++)
        nfirst[pos[ld->needs[i].tenant] + 1]++;
    for (size_t t = 0; t < ld->n_tenants; t++)
        nfirst[t + 1] += nfirst[t];
    for (size_t i = 0; i < ld->n_needs; i++)
        norder[nfirst[pos[ld->needs[i].tenant]]++] = (uint32_t)i;
    for (size_t t = ld->n_tenants; t > 0; t--)
        nfirst[t] = nfirst[t - 1];
    nfirst[0] = 0;
    for (; built < ld->n_tenants && !rc; built++)
        rc = build_tenant(ld, built, order + first[built], first[built + 1] - first[built],
                          norder + nfirst[built], nfirst[built + 1] - nfirst[built], refs, n_refs,
                          &sc, &out[built], err);
    if (rc) {
        for (size_t i = 0; i + 1 < built; i++)
            tblock_put(out[i].block);
    }
out:
    free(first);
    free(order);
    free(pos);
    free(nfirst);
    free(norder);
    free(sc.slots);
    free(sc.r);
    return rc;
}

typedef struct rt_move_seq {
    rt_move m;
    size_t seq;
} rt_move_seq;

static int move_cmp(const void *a, const void *b)
{
    const rt_move_seq *x = a, *y = b;
    int d = strcmp(x->m.tenant, y->m.tenant);
    if (!d)
        d = x->m.split < y->m.split ? -1 : x->m.split > y->m.split ? 1 : 0;
    if (!d)
        d = x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
    return d;
}

/* The slot of a move's source or target shard (its one name; -1: none, or not in refs). */
static long move_slot(const rt_shard_ref *refs, size_t n, const ferry_shard_set *shards)
{
    if (!ferry_shard_set_count(shards))
        return -1;
    const char *name = ferry_shard_set_at(shards, 0);
    return ref_slot(refs, n, name, strlen(name));
}

/* The moves in SWITCH (the move journal's states are in include/ferry/catalog.h; step >=
 * FERRY_MOVE_STEP_PUBLISH: publishing), one per slice (the last of the journal's order). */
static int build_moves(rt_snapshot *s, const ferry_record_list *moves, ferry_err *err)
{
    rt_move_seq *v = calloc(moves->n ? moves->n : 1, sizeof *v);
    size_t n = 0;
    if (!v)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < moves->n; i++) {
        const ferry_move *m = &moves->items[i].u.move;
        if (m->state != FERRY_MOVE_SWITCH)
            continue;
        rt_move *rm = &v[n].m;
        if (!(rm->tenant = strdup(m->tenant))) {
            for (size_t k = 0; k < n; k++)
                free(v[k].m.tenant);
            free(v);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        rm->split = m->split;
        rm->publishing = m->step >= FERRY_MOVE_STEP_PUBLISH;
        rm->move_from = move_slot(s->shard_refs, s->n_shard_refs, &m->from);
        rm->move_to = move_slot(s->shard_refs, s->n_shard_refs, &m->to);
        snprintf(rm->move_id, sizeof rm->move_id, "%s", m->id);
        v[n++].seq = i;
    }
    if (n > 1)
        qsort(v, n, sizeof *v, move_cmp);
    s->moves = calloc(n ? n : 1, sizeof *s->moves);
    if (!s->moves) {
        for (size_t k = 0; k < n; k++)
            free(v[k].m.tenant);
        free(v);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        bool later = i + 1 < n && !strcmp(v[i].m.tenant, v[i + 1].m.tenant) &&
                     v[i].m.split == v[i + 1].m.split;
        if (later) /* the same slice again later in the journal: that one counts */
            free(v[i].m.tenant);
        else
            s->moves[s->n_moves++] = v[i].m;
    }
    free(v);
    return FERRY_OK;
}

/* The snapshot: base's tenants, those named in changed[0..n_changed) replaced by the loader's
 * (or dropped when the loader has none of that name); base NULL: the loader's tenants. Takes
 * the shard refs. */
static int build(const rt_snapshot *base, char **changed, size_t n_changed, rt_loader *ld,
                 rt_shard_ref *refs, size_t n_refs, const ferry_record_list *moves,
                 const ferry_record_list *users, uint64_t version, rt_snapshot **out,
                 ferry_err *err)
{
    rt_snapshot *s = calloc(1, sizeof *s);
    rt_tenant *fresh = calloc(ld->n_tenants ? ld->n_tenants : 1, sizeof *fresh);
    int rc = FERRY_OK;
    if (!s || !fresh) {
        for (size_t i = 0; i < n_refs; i++)
            free(refs[i].name);
        free(refs);
        free(s);
        free(fresh);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    atomic_init(&s->refs, 1);
    s->version = version;
    s->shard_refs = refs;
    s->n_shard_refs = n_refs;
    s->incremental = base != NULL;
    rc = build_tenants(ld, refs, n_refs, fresh, err);
    if (rc) {
        free(fresh);
        goto out;
    }
    if (!base) {
        s->tenants = fresh;
        s->n_tenants = ld->n_tenants;
    } else {
        /* merge two sorted lists: base's entries not named in changed (a reference each), and
         * the fresh ones */
        s->tenants = calloc(base->n_tenants + ld->n_tenants + 1, sizeof *s->tenants);
        if (!s->tenants) {
            for (size_t i = 0; i < ld->n_tenants; i++)
                tblock_put(fresh[i].block);
            free(fresh);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        size_t i = 0, j = 0, c = 0;
        while (i < base->n_tenants || j < ld->n_tenants) {
            const rt_tenant *bt = i < base->n_tenants ? &base->tenants[i] : NULL;
            if (bt) {
                while (c < n_changed && strcmp(changed[c], bt->name) < 0)
                    c++;
                if (c < n_changed && !strcmp(changed[c], bt->name)) {
                    i++; /* read again: its fresh entry, if any, comes from the loader */
                    continue;
                }
            }
            if (bt && (j == ld->n_tenants || strcmp(bt->name, fresh[j].name) < 0)) {
                s->tenants[s->n_tenants++] = *bt;
                if (bt->block)
                    atomic_fetch_add(&bt->block->refs, 1);
                i++;
            } else {
                s->tenants[s->n_tenants++] = fresh[j++];
            }
        }
        free(fresh);
    }
    rc = build_moves(s, moves, err);
    if (!rc)
        rc = rt_users_build(users, &s->users, &s->n_users, err);
out:
    if (rc) {
        rt_snapshot_put(s);
        return rc;
    }
    *out = s;
    return FERRY_OK;
}

bool rt_snapshot_same(const rt_snapshot *a, const rt_snapshot *b, char *why, size_t size)
{
#define DIFF(...)                                                                              \
    do {                                                                                       \
        snprintf(why, size, __VA_ARGS__);                                                      \
        return false;                                                                          \
    } while (0)
    if (a->version != b->version)
        DIFF("version %llu != %llu", (unsigned long long)a->version,
             (unsigned long long)b->version);
    if (a->n_tenants != b->n_tenants)
        DIFF("%zu tenants != %zu", a->n_tenants, b->n_tenants);
    for (size_t i = 0; i < a->n_tenants; i++) {
        const rt_tenant *x = &a->tenants[i], *y = &b->tenants[i];
        if (strcmp(x->name, y->name) || x->splits != y->splits || x->n_routes != y->n_routes)
            DIFF("tenant %zu: %s/%u/%u != %s/%u/%u", i, x->name, x->splits, x->n_routes, y->name,
                 y->splits, y->n_routes);
        for (uint32_t k = 0; k < x->n_routes; k++) {
            const rt_route *p = &x->routes[k], *q = &y->routes[k];
            if (p->n_shards != q->n_shards || strcmp(p->missing, q->missing) ||
                p->stale != q->stale ||
                (p->n_shards && memcmp(p->shards, q->shards, p->n_shards * sizeof *p->shards)))
                DIFF("tenant %s split %u: the routes differ", x->name, k);
        }
    }
    if (a->n_moves != b->n_moves)
        DIFF("%zu moves != %zu", a->n_moves, b->n_moves);
    for (size_t i = 0; i < a->n_moves; i++) {
        const rt_move *x = &a->moves[i], *y = &b->moves[i];
        if (strcmp(x->tenant, y->tenant) || x->split != y->split ||
            x->publishing != y->publishing || x->move_from != y->move_from ||
            x->move_to != y->move_to || strcmp(x->move_id, y->move_id))
            DIFF("move %zu (%s) differs", i, x->move_id);
    }
    if (a->n_users != b->n_users)
        DIFF("%zu users != %zu", a->n_users, b->n_users);
    for (size_t i = 0; i < a->n_users; i++)
        if (memcmp(&a->users[i].rec, &b->users[i].rec, sizeof a->users[i].rec))
            DIFF("user %s differs", a->users[i].rec.name);
    if (a->n_shard_refs != b->n_shard_refs || !shard_refs_same(a, b->shard_refs, b->n_shard_refs))
        DIFF("the shard slots differ");
#undef DIFF
    return true;
}

void rt_read_set(const rt_snapshot *s, const rt_tenant *t, uint32_t split, rt_readers *out)
{
    memset(out, 0, sizeof *out);
    const rt_route *rr = split < t->n_routes ? &t->routes[split] : NULL;
    if (!rr || !rr->n_shards) {
        out->mode = RT_READ_NONE;
        out->missing = rr && rr->missing && rr->missing[0] ? rr->missing : NULL;
        return;
    }
    const rt_move *mv = s->n_moves ? rt_find_move(s, t->name, split) : NULL;
    /* complete copies: the route's shards, except a move's target while it is in SWITCH; those
     * that took every acknowledged write first, then those that missed some (a repair need) */
    out->mode = RT_READ_ONE;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t k = 0; k < rr->n_shards && out->n < RT_READ_SET_MAX; k++) {
            bool stale = k < 32 && (rr->stale >> k & 1u);
            if (stale == (pass == 0) || (mv && (long)rr->shards[k] == mv->move_to))
                continue;
            out->shards[out->n++] = rr->shards[k];
        }
        if (pass == 0)
            out->n_fresh = out->n;
    }
    if (out->n || !mv)
        return;
    out->move_id = mv->move_id;
    if (mv->move_to < 0 || (!mv->publishing && mv->move_from < 0)) {
        out->mode = RT_READ_NONE; /* a shard of the move the router's config does not name */
        return;
    }
    if (mv->publishing) {
        out->mode = RT_READ_HOLD;
        out->shards[out->n++] = (uint32_t)mv->move_to;
        out->n_fresh = out->n;
        return;
    }
    out->mode = RT_READ_UNION;
    out->shards[out->n++] = (uint32_t)mv->move_from;
    if (mv->move_to != mv->move_from)
        out->shards[out->n++] = (uint32_t)mv->move_to;
    out->n_fresh = out->n;
}

/* One consistent read of the catalog at one routing version, and the snapshot built from it:
 * from base and the routing change log when base is given and the log reaches back to it, else
 * from every row. *s NULL with FERRY_OK: the version moved while reading (read again). Under
 * reload_mu when publish is set: the shard slots follow the state read before the snapshot
 * names them, and the snapshot is published unless a newer one is (*stale). */
static int load_once(ferry_router *r, ferry_catalog *cat, const rt_snapshot *base, bool publish,
                     rt_snapshot **out, bool *stale, bool *need_full, ferry_err *err)
{
    uint64_t v1 = 0, v2 = 0;
    ferry_record_list moves = {0}, shards = {0}, users = {0};
    rt_loader ld = {0};
    char **changed = NULL;
    size_t n_changed = 0;
    bool covered = false, locked = false;
    rt_shard_ref *refs = NULL;
    size_t n_refs = 0;
    *out = NULL;
    *stale = false;
    *need_full = false;
    int rc = ferry_catalog_routing_version(cat, &v1, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc && base && base->version <= v1)
        rc = ferry_catalog_routing_changes(cat, base->version, v1, &covered, &changed, &n_changed,
                                           err);
    for (size_t i = 0; !rc && covered && i < n_changed; i++)
        rc = ferry_catalog_routing_rows(cat, changed[i], ld_row, &ld, err);
    if (!rc && !covered)
        rc = ferry_catalog_routing_rows(cat, NULL, ld_row, &ld, err);
    if (!rc)
        /* only moves in flight matter (SWITCH); DONE and FAILED ones are history, which
         * the index of unfinished moves keeps out of every reload */
        rc = ferry_catalog_list_unfinished_moves(cat, &moves, err);
    if (!rc)
        /* users change the routing version too: they come at the same version */
        rc = ferry_catalog_list(cat, FERRY_REC_USER, NULL, 0, &users, err);
    if (!rc)
        rc = ferry_catalog_routing_version(cat, &v2, err);
    /* Every change of a tenant's record or routes, of a shard or of a user raises the routing
     * version (and names the tenant in the change log); a move's state changes that matter to
     * readers (switch, publish, cleanup) in the same batch as its route. So one routing version
     * before and after the reads makes shards, tenants, routes and moves one consistent state,
     * and the tenants the log does not name are as base has them. The shard slots follow that
     * state before the snapshot names them (one sync at a time). */
    if (rc || v1 != v2)
        goto out;
    if (publish) {
        pthread_mutex_lock(&r->reload_mu);
        locked = true;
        pthread_mutex_lock(&r->mu);
        *stale = r->snap && r->snap->version >= v1; /* another reload got there first */
        pthread_mutex_unlock(&r->mu);
        if (*stale)
            goto out;
        rc = rt_shards_sync(r, &shards, err);
    }
    if (!rc)
        rc = shard_refs_now(r, &refs, &n_refs, err);
    if (rc)
        goto out;
    if (covered && !shard_refs_same(base, refs, n_refs)) {
        /* a shard name resolves to another slot now: the unchanged tenants' indices are not
         * right any more; read everything (the next attempt, base NULL) */
        for (size_t i = 0; i < n_refs; i++)
            free(refs[i].name);
        free(refs);
        *need_full = true;
        goto out;
    }
    rc = build(covered ? base : NULL, changed, n_changed, &ld, refs, n_refs, &moves, &users, v1,
               out, err);
    if (rc || !publish)
        goto out;
    pthread_mutex_lock(&r->mu);
    rt_snapshot *old = r->snap;
    r->snap = *out;
    if ((*out)->incremental)
        r->loads_incremental++;
    else
        r->loads_full++;
    pthread_cond_broadcast(&r->cond); /* reads held for a newer table */
    pthread_mutex_unlock(&r->mu);
    rt_snapshot_put(old);
    *out = NULL;
out:
    if (locked)
        pthread_mutex_unlock(&r->reload_mu);
    if (!rc && !*need_full && publish && v1 == v2)
        *stale = true; /* published (or a newer one was): nothing more to do */
    loader_free(&ld);
    ferry_routing_changes_free(changed, n_changed);
    ferry_record_list_free(&moves);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&users);
    return rc;
}

/* Up to 20 reads until one is consistent; base the snapshot to build from (NULL: everything). */
static int load(ferry_router *r, ferry_catalog *cat, bool full, bool publish, rt_snapshot **out,
                ferry_err *err)
{
    *out = NULL;
    for (int attempt = 0; attempt < 20; attempt++) {
        rt_snapshot *base = full ? NULL : rt_snapshot_get(r);
        bool done = false, need_full = false;
        int rc = load_once(r, cat, base, publish, out, &done, &need_full, err);
        rt_snapshot_put(base);
        if (!rc && need_full) { /* the shard slots changed: read everything */
            full = true;
            continue;
        }
        if (rc)
            return rc;
        if (done || *out)
            return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_ETIMEOUT,
                         "the routing table kept changing while it was read; giving up");
}

int rt_reload(ferry_router *r, ferry_catalog *cat, ferry_err *err)
{
    rt_snapshot *s = NULL;
    int rc = load(r, cat, false, true, &s, err);
    rt_snapshot_put(s);
    return rc;
}

int rt_load(ferry_router *r, ferry_catalog *cat, bool full, rt_snapshot **out, ferry_err *err)
{
    pthread_mutex_lock(&r->reload_mu); /* the shard slots do not change meanwhile */
    int rc = load(r, cat, full, false, out, err);
    pthread_mutex_unlock(&r->reload_mu);
    return rc;
}

int rt_fresh_snapshot(ferry_router *r, rt_snapshot **out, ferry_err *err)
{
    uint64_t v = 0;
    pthread_mutex_lock(&r->check_mu);
    int rc = ferry_catalog_routing_version(r->check_cat, &v, err);
    rt_snapshot *s = rc ? NULL : rt_snapshot_get(r);
    if (!rc && s->version < v) {
        rt_snapshot_put(s);
        s = NULL;
        rc = rt_reload(r, r->check_cat, err);
        if (!rc)
            s = rt_snapshot_get(r);
        pthread_mutex_lock(&r->mu);
        r->reroutes++;
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&r->check_mu);
    *out = s;
    return rc;
}

void *rt_watch_main(void *arg)
{
    ferry_router *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool stop = r->stopping;
        uint64_t known = r->snap ? r->snap->version : 0;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
        ferry_err err = {0};
        uint64_t now = 0;
        int rc = ferry_catalog_routing_wait(r->watch_cat, known, 500, &now, &err);
        if (rc == FERRY_ETIMEOUT)
            continue;
        if (!rc)
            rc = rt_reload(r, r->watch_cat, &err);
        if (rc) {
            FLOG_WARN("msg=\"router: refreshing the routing table failed; retrying\" err=\"%s\"",
                      err.msg);
            sleep(1);
            continue;
        }
        FLOG_INFO("msg=\"router: routing table reloaded\" version=%llu",
                  (unsigned long long)now);
    }
    return NULL;
}

static void inflight_add_locked(ferry_router *r, uint64_t version)
{
    size_t i;
    for (i = 0; i < r->n_inflight; i++)
        if (r->inflight[i].version == version)
            break;
    if (i == r->n_inflight && r->n_inflight < sizeof r->inflight / sizeof r->inflight[0]) {
        r->inflight[i].version = version;
        r->inflight[i].count = 0;
        r->n_inflight++;
    }
    if (i < r->n_inflight)
        r->inflight[i].count++;
}

void rt_inflight_add(ferry_router *r, uint64_t version)
{
    pthread_mutex_lock(&r->mu);
    inflight_add_locked(r, version);
    pthread_mutex_unlock(&r->mu);
}

rt_snapshot *rt_route_begin(ferry_router *r)
{
    ferry_err err = {0};
    rt_snapshot *s = NULL;
    if (rt_fresh_snapshot(r, &s, &err))
        FLOG_WARN("msg=\"router: routing version check failed; using the cached table\" err=\"%s\"",
                  err.msg);
    rt_snapshot_put(s);
    pthread_mutex_lock(&r->mu);
    s = r->snap;
    atomic_fetch_add(&s->refs, 1);
    inflight_add_locked(r, s->version);
    pthread_mutex_unlock(&r->mu);
    return s;
}

rt_snapshot *rt_read_begin(ferry_router *r)
{
    pthread_mutex_lock(&r->mu);
    rt_snapshot *s = r->snap;
    if (s) {
        atomic_fetch_add(&s->refs, 1);
        inflight_add_locked(r, s->version);
    }
    pthread_mutex_unlock(&r->mu);
    return s;
}

bool rt_wait_newer(ferry_router *r, uint64_t version, uint64_t deadline_ms)
{
    struct timespec until;
    uint64_t now = ferry_clock_ms_u64();
    uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
    clock_gettime(CLOCK_REALTIME, &until); /* r->cond uses the default (realtime) clock */
    until.tv_sec += (time_t)(left / 1000);
    until.tv_nsec += (long)(left % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&r->mu);
    bool newer = r->snap && r->snap->version > version;
    while (!newer && !r->stopping) {
        if (pthread_cond_timedwait(&r->cond, &r->mu, &until) != 0)
            break;
        newer = r->snap && r->snap->version > version;
    }
    newer = r->snap && r->snap->version > version;
    pthread_mutex_unlock(&r->mu);
    return newer;
}

void rt_route_end(ferry_router *r, rt_snapshot *s)
{
    if (!s)
        return;
    rt_inflight_done(r, s->version);
    rt_snapshot_put(s);
}

bool rt_route_stale(ferry_router *r, const rt_snapshot *s)
{
    pthread_mutex_lock(&r->mu);
    bool stale = r->snap && r->snap->version > s->version;
    pthread_mutex_unlock(&r->mu);
    return stale;
}

void rt_inflight_done(ferry_router *r, uint64_t version)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_inflight; i++)
        if (r->inflight[i].version == version) {
            if (--r->inflight[i].count == 0)
                r->inflight[i] = r->inflight[--r->n_inflight];
            break;
        }
    pthread_mutex_unlock(&r->mu);
}

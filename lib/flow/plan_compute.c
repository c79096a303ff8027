/* The rebalancing plan computed from the catalog: the routing table as the current layout, the
 * active shards as the new cluster; the slices with one replica and rf 1 go through placement's
 * own ferry_pl_rebalance and ferry_pl_plan_build (rebalance_plan.c, the same steps `ferry plan`
 * runs), every other slice through the replica steps below with placement's zone rule. Reads the
 * catalog through the compact view (catalog_view.c, on the catalog's compact scans) and looks
 * everything up by index or binary search: its cost grows as slices x log(slices), whatever the
 * cluster's size. */
#include "ferry/move.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/placement.h"
#include "ferry/strutil.h"
#include "flow/move_int.h"

const char *ferry_rebalance_step_name(enum ferry_plan_kind k)
{
    switch (k) {
    case FERRY_PLAN_MOVE: return "move";
    case FERRY_PLAN_CLONE: return "clone";
    case FERRY_PLAN_DROP: return "drop";
    }
    return "?";
}

/* The replication factor a tenant's slices should have: its override, else the cluster's. */
static unsigned tenant_rf(const mv_view *v, const char *tenant, unsigned cluster_rf)
{
    const mv_view_tenant *t = mv_view_tenant_find(v, tenant);
    if (t && t->rf)
        return t->rf;
    return cluster_rf ? cluster_rf : 1;
}

/* Shard lists already taken apart, by the address of the view's (pooled) string: open
 * addressing, at most half full. */
typedef struct route_memo {
    const char *route; /* NULL: a free slot */
    size_t first;      /* into the indices */
    uint8_t count;
} route_memo;

typedef struct memo_map {
    route_memo *v;
    size_t n, cap;
} memo_map;

static size_t memo_slot(const memo_map *m, const char *route)
{
    uint64_t h = (uint64_t)(uintptr_t)route * 0x9E3779B97F4A7C15ULL;
    size_t k = (size_t)(h >> 20) & (m->cap - 1);
    while (m->v[k].route && m->v[k].route != route)
        k = (k + 1) & (m->cap - 1);
    return k;
}

static int memo_init(memo_map *m, ferry_err *err)
{
    m->cap = 1024;
    m->n = 0;
    m->v = calloc(m->cap, sizeof *m->v);
    return m->v ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* The slot of route: its entry, or the free slot where it goes (route NULL). */
static route_memo *memo_find(memo_map *m, const char *route)
{
    return &m->v[memo_slot(m, route)];
}

static int memo_add(memo_map *m, const char *route, size_t first, uint8_t count, ferry_err *err)
{
    if (2 * (m->n + 1) > m->cap) {
        memo_map g = {calloc(m->cap * 2, sizeof *m->v), 0, m->cap * 2};
        if (!g.v)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].route)
                g.v[memo_slot(&g, m->v[i].route)] = m->v[i];
        g.n = m->n;
        free(m->v);
        *m = g;
    }
    m->v[memo_slot(m, route)] = (route_memo){route, first, count};
    m->n++;
    return FERRY_OK;
}

static int plan_push(ferry_rebalance_plan *out, size_t *cap, enum ferry_plan_kind kind,
                     const mv_view_slice *sl, const char *from, const char *to, ferry_err *err)
{
    if (out->n_moves == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        ferry_planned_move *n = realloc(out->moves, nc * sizeof *n);
        if (!n)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        out->moves = n;
        *cap = nc;
    }
    ferry_planned_move *m = &out->moves[out->n_moves++];
    memset(m, 0, sizeof *m);
    m->kind = kind;
    snprintf(m->tenant, sizeof m->tenant, "%s", sl->tenant);
    m->split = sl->split;
    snprintf(m->from, sizeof m->from, "%s", from);
    snprintf(m->to, sizeof m->to, "%s", to ? to : "");
    m->bytes = kind == FERRY_PLAN_DROP ? 0 : sl->bytes;
    out->moved_bytes += m->bytes;
    return FERRY_OK;
}

static bool shard_active(const ferry_record_list *shards, size_t k)
{
    return ferry_shard_placeable(shards->items[k].u.shard.state);
}

/* The replica steps of one slice whose route lists the shards idx[0..have) (indices into
 * shards) and whose tenant wants `want` replicas, in the order they run:
 *  1. DROP while it has too many: a replica on a draining shard first, else the lowest score;
 *     never the last one;
 *  2. MOVE of every replica left on a shard that is not active (draining) to the shard
 *     placement's zone rule picks among the active shards the slice is not on;
 *  3. CLONE while it has too few, to the shard the same rule picks (from a replica that stays);
 *  4. MOVE for zone repair while its replicas crowd a zone and a less crowded zone has room;
 *  5. MOVE of its weakest replicas to shards just added (state NEW) that now outrank them, as
 *     placement's rule 4 moves the slices of rf 1 (ferry_pl_attract_replica).
 * Every step updates idx and the shard loads, so later steps (and slices) see its result. */
static int plan_slice(ferry_hash hash, const ferry_record_list *shards, mv_zones *zones,
                      const mv_view_slice *sl, size_t *idx, size_t have, unsigned want,
                      ferry_rebalance_plan *out, size_t *cap, ferry_err *err)
{
    char id[FERRY_SLICE_ID_MAX];
    snprintf(id, sizeof id, "%s/split%u", sl->tenant, sl->split);
    const int64_t bytes = (int64_t)sl->bytes;
    int rc = FERRY_OK;
    while (!rc && have > want && have > 1) {
        size_t worst = 0;
        double worst_score = 0;
        for (size_t k = 0; k < have; k++) {
            const ferry_shard *sh = &shards->items[idx[k]].u.shard;
            double sc = ferry_score(hash, id, sh->name, sh->weight > 0 ? sh->weight : 1);
            if (!shard_active(shards, idx[k]))
                sc = -1; /* a replica on a draining shard goes first */
            if (k == 0 || sc < worst_score)
                worst = k, worst_score = sc;
        }
        rc = plan_push(out, cap, FERRY_PLAN_DROP, sl, shards->items[idx[worst]].u.shard.name, NULL,
                       err);
        mv_zones_load(zones, idx[worst], -bytes);
        memmove(&idx[worst], &idx[worst + 1], (have - worst - 1) * sizeof *idx);
        have--;
    }
    size_t rest[65];
    for (size_t k = 0; !rc && k < have && have <= 64; k++) {
        if (shard_active(shards, idx[k]))
            continue;
        size_t nr = 0;
        for (size_t j = 0; j < have; j++)
            if (j != k)
                rest[nr++] = idx[j];
        long to = mv_zones_pick(zones, id, sl->bytes, rest, nr);
        if (to < 0)
            continue; /* no active shard free for it: it stays until one is */
        rc = plan_push(out, cap, FERRY_PLAN_MOVE, sl, shards->items[idx[k]].u.shard.name,
                       shards->items[to].u.shard.name, err);
        mv_zones_load(zones, idx[k], -bytes);
        mv_zones_load(zones, (size_t)to, bytes);
        idx[k] = (size_t)to;
    }
    while (!rc && have < want && have < 64) {
        long to = mv_zones_pick(zones, id, sl->bytes, idx, have);
        if (to < 0)
            break; /* no active shard left to hold another replica */
        size_t src = idx[0];
        for (size_t k = 0; k < have; k++)
            if (shard_active(shards, idx[k])) {
                src = idx[k];
                break;
            }
        rc = plan_push(out, cap, FERRY_PLAN_CLONE, sl, shards->items[src].u.shard.name,
                       shards->items[to].u.shard.name, err);
        mv_zones_load(zones, (size_t)to, bytes);
        idx[have++] = (size_t)to;
    }
    bool all_active = true;
    for (size_t k = 0; k < have; k++)
        all_active &= shard_active(shards, idx[k]);
    /* 4 and 5 (zone repair needs two replicas: ferry_pl_zone_repair says no with one): each round
     * moves one replica, so a slice needs at most `have` rounds of each */
    static bool (*const pulls[])(mv_zones *, const char *, uint64_t, const size_t *, size_t,
                                 size_t *, size_t *) = {mv_zones_repair, mv_zones_attract};
    for (size_t p = 0; p < sizeof pulls / sizeof pulls[0]; p++)
        for (size_t round = 0; !rc && all_active && round < have; round++) {
            size_t victim, to;
            if (!pulls[p](zones, id, sl->bytes, idx, have, &victim, &to))
                break;
            rc = plan_push(out, cap, FERRY_PLAN_MOVE, sl,
                           shards->items[idx[victim]].u.shard.name,
                           shards->items[to].u.shard.name, err);
            mv_zones_load(zones, idx[victim], -bytes);
            mv_zones_load(zones, to, bytes);
            idx[victim] = to;
        }
    return rc;
}

/* The plan from the view mv_view_read gives, or (records) from the reference reader. */
static int plan_compute(ferry_catalog *cat, bool records, ferry_rebalance_plan *out,
                        ferry_err *err)
{
    memset(out, 0, sizeof *out);
    ferry_record settings;
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    ferry_record_list shards = {0};
    mv_view view = {0};
    mv_names sn = {0};
    const char **names = NULL;
    mv_plan_shard *ps = NULL;
    mv_plan_slice *pl = NULL;
    mv_plan_move *moves = NULL;
    size_t nm = 0, npl = 0, cap = 0;
    size_t *idx = NULL, *ridx = NULL, *rfirst = NULL;
    uint8_t *rcount = NULL;
    mv_zones *zones = NULL;
    memo_map memo = {0};
    ferry_hash hash = FERRY_HASH_SHA256;
    int rc = ferry_catalog_get(cat, &settings, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "the catalog has no cluster yet (ferry init)");
    if (!rc && !ferry_hash_parse(settings.u.settings.hash, &hash))
        rc = ferry_err_set(err, FERRY_EINVAL, "catalog: unknown placement hash '%s'",
                           settings.u.settings.hash);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc)
        rc = records ? mv_view_read_records(cat, &view, err) : mv_view_read(cat, &view, err);
    if (rc)
        goto out;
    size_t nv = view.n_slices;
    ps = calloc(shards.n + 1, sizeof *ps);
    pl = calloc(nv + 1, sizeof *pl);
    idx = calloc(shards.n + 1, sizeof *idx);
    names = calloc(shards.n + 1, sizeof *names);
    rfirst = calloc(nv + 1, sizeof *rfirst);
    rcount = calloc(nv + 1, sizeof *rcount);
    if (!ps || !pl || !idx || !names || !rfirst || !rcount) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t active = 0;
    for (size_t i = 0; i < shards.n; i++) {
        const ferry_shard *sh = &shards.items[i].u.shard;
        ps[i].name = sh->name;
        ps[i].weight = sh->weight > 0 ? sh->weight : 1;
        ps[i].capacity = sh->capacity;
        ps[i].in_new = ferry_shard_placeable(sh->state);
        ps[i].added = sh->state == FERRY_SHARD_NEW;
        ps[i].zone = sh->zone;
        active += ps[i].in_new;
        names[i] = sh->name;
    }
    if ((rc = mv_names_init(&sn, names, shards.n, err)))
        goto out;
    /* Each routed slice's shards as indices (names the catalog does not know are left out;
     * the first one must be known). The view holds each distinct shard list once, so a list is
     * taken apart once however many slices share it (memo: the list's address to its indices). */
    size_t n_ridx = 0, cap_ridx = 0;
    if ((rc = memo_init(&memo, err)))
        goto out;
    for (size_t i = 0; i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        if (!sl->placement || !sl->route)
            continue; /* a route without a slice record, or a slice nobody routes yet */
        route_memo *m = memo_find(&memo, sl->route);
        if (m->route) {
            rfirst[i] = m->first;
            rcount[i] = m->count;
            continue;
        }
        /* the list as the catalog's decoder reads it (ferry_shard_text_next) */
        size_t rlen = strlen(sl->route), at = 0, len = 0;
        const char *p = sl->route;
        while (ferry_shard_text_next(sl->route, rlen, &at, &p, &len) && !len)
            ;
        if (mv_names_find(&sn, p, len) < 0) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is routed to unknown shard "
                               "%.*s", sl->tenant, sl->split, (int)(len < 127 ? len : 127), p);
            goto out;
        }
        rfirst[i] = n_ridx;
        for (at = 0; rcount[i] < 64 && ferry_shard_text_next(sl->route, rlen, &at, &p, &len);) {
            long k = len ? mv_names_find(&sn, p, len) : -1;
            if (k >= 0) {
                if (n_ridx == cap_ridx) {
                    cap_ridx = cap_ridx ? cap_ridx * 2 : 1024;
                    size_t *q = realloc(ridx, cap_ridx * sizeof *ridx);
                    if (!q) {
                        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                        goto out;
                    }
                    ridx = q;
                }
                ridx[n_ridx++] = (size_t)k;
                rcount[i]++;
                ps[k].in_old = true; /* every shard serving a route was in the old cluster */
            }
        }
        if ((rc = memo_add(&memo, sl->route, rfirst[i], rcount[i], err)))
            goto out;
    }
    size_t n_replica_steps = 0;   /* routed slices left to the replica steps below */
    const char *rf_tenant = NULL; /* tenant_rf of the slices of one tenant, looked up once */
    unsigned rf_want = 0;
    for (size_t i = 0; i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        if (!sl->placement)
            continue;
        out->slices++;
        if (!sl->route)
            continue;
        if (sl->tenant != rf_tenant) {
            rf_tenant = sl->tenant;
            rf_want = tenant_rf(&view, sl->tenant, settings.u.settings.rf);
        }
        unsigned want = rf_want;
        if (want > active)
            want = (unsigned)active;
        out->total_bytes += sl->bytes * (want ? want : 1);
        if (want <= 1 && !strchr(sl->route, ',')) {
            /* rf 1 with one replica: the shard-change plan below decides */
            pl[npl].tenant = sl->tenant;
            pl[npl].split = sl->split;
            pl[npl].bytes = sl->bytes;
            pl[npl].route = ridx[rfirst[i]];
            pl[npl].view = i;
            npl++;
        } else {
            n_replica_steps++;
        }
    }
    rc = mv_plan(settings.u.settings.hash, 1, settings.u.settings.fill, ps, shards.n, pl, npl,
                 &moves, &nm, err);
    for (size_t i = 0; !rc && i < nm; i++)
        rc = plan_push(out, &cap, FERRY_PLAN_MOVE, &view.slices[pl[moves[i].slice].view],
                       ps[moves[i].from].name, ps[moves[i].to].name, err);
    /* slices with rf > 1 or several replicas: placement's zone rule over the shards' loads as
     * the routes and the moves above leave them (none: no loads to keep) */
    if (!rc && n_replica_steps)
        rc = mv_zones_open(settings.u.settings.hash, settings.u.settings.fill, ps, shards.n,
                           &zones, err);
    for (size_t i = 0; !rc && zones && i < nv; i++)
        for (size_t k = 0; view.slices[i].placement && k < rcount[i]; k++)
            mv_zones_load(zones, ridx[rfirst[i] + k], (int64_t)view.slices[i].bytes);
    for (size_t i = 0; !rc && zones && i < nm; i++) {
        mv_zones_load(zones, moves[i].from, -(int64_t)moves[i].bytes);
        mv_zones_load(zones, moves[i].to, (int64_t)moves[i].bytes);
    }
    for (size_t i = 0; !rc && zones && i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        if (!sl->placement || !sl->route || !sl->route[0])
            continue;
        if (sl->tenant != rf_tenant) {
            rf_tenant = sl->tenant;
            rf_want = tenant_rf(&view, sl->tenant, settings.u.settings.rf);
        }
        unsigned want = rf_want;
        if (want > active)
            want = (unsigned)active;
        if (want <= 1 && !strchr(sl->route, ','))
            continue; /* planned above */
        size_t have = rcount[i];
        memcpy(idx, ridx + rfirst[i], have * sizeof *idx);
        if (have && want >= 1)
            rc = plan_slice(hash, &shards, zones, sl, idx, have, want, out, &cap, err);
    }
    if (!rc && !out->moves)
        out->moves = calloc(1, sizeof *out->moves);
    if (!rc && !out->moves)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    free(memo.v);
    free(moves);
    free(ps);
    free(pl);
    free(idx);
    free(ridx);
    free(rfirst);
    free(rcount);
    mv_names_free(&sn);
    free(names);
    mv_zones_close(zones);
    mv_view_free(&view);
    ferry_record_list_free(&shards);
    ferry_record_free(&settings);
    if (rc)
        ferry_rebalance_plan_free(out);
    return rc;
}

int ferry_rebalance_plan_compute(ferry_catalog *cat, ferry_rebalance_plan *out, ferry_err *err)
{
    return plan_compute(cat, false, out, err);
}

int mv_plan_compute_records(ferry_catalog *cat, ferry_rebalance_plan *out, ferry_err *err)
{
    return plan_compute(cat, true, out, err);
}

void ferry_rebalance_plan_free(ferry_rebalance_plan *p)
{
    free(p->moves);
    memset(p, 0, sizeof *p);
}

int ferry_shards_settle(ferry_catalog *cat, const ferry_rebalance_plan *remaining, size_t *settled,
                        ferry_err *err)
{
    ferry_record_list shards = {0};
    size_t n = 0;
    int rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    for (size_t i = 0; !rc && i < shards.n; i++) {
        ferry_record *r = &shards.items[i];
        if (r->u.shard.state != FERRY_SHARD_NEW)
            continue;
        bool wanted = false;
        for (size_t k = 0; k < remaining->n_moves && !wanted; k++)
            wanted = !strcmp(remaining->moves[k].to, r->u.shard.name);
        if (wanted)
            continue;
        r->u.shard.state = FERRY_SHARD_ACTIVE;
        /* compare-and-set: a shard drained or changed meanwhile keeps what it was given */
        rc = ferry_catalog_update(cat, r, err);
        if (rc == FERRY_ECONFLICT) {
            ferry_err_clear(err);
            rc = FERRY_OK;
            continue;
        }
        n += !rc;
    }
    ferry_record_list_free(&shards);
    if (settled)
        *settled = n;
    return rc;
}

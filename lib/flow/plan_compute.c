/* The rebalancing plan computed from the catalog: the routing table as the current layout, the
 * active shards as the new cluster; the slices with one replica and rf 1 go through placement's
 * own ferry_pl_rebalance and ferry_pl_plan_build (rebalance_plan.c, the same steps `ferry plan`
 * runs), every other slice through the replica steps below with placement's zone rule. Reads the
 * catalog through the compact view (catalog_view.c, on the catalog's compact scans), whose routes
 * are already indexes into the shard records, and looks everything up by index or binary search:
 * its cost grows as slices x log(slices), whatever the cluster's size. */
#include "ferry/move.h"

#include <assert.h>
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
 *  5. MOVE of its weakest replicas to shards just added (state NEW), or re-weighted to more,
 *     that now outrank them, as placement's rule 4 moves the slices of rf 1
 *     (ferry_pl_attract_replica);
 *  6. MOVE of its replicas on shards re-weighted to less to the shards that now outrank them;
 *  7. MOVE, while a fill spread above the skew is evened, of its replica on a shard above the
 *     fill target to a shard below the mean fill with room (mv_zones_even).
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
    /* 4 to 7 (zone repair needs two replicas: ferry_pl_zone_repair says no with one): each
     * round moves one replica, so a slice needs at most `have` rounds of each */
    static bool (*const pulls[])(mv_zones *, const char *, uint64_t, const size_t *, size_t,
                                 size_t *, size_t *) = {mv_zones_repair, mv_zones_attract,
                                                        mv_zones_shed, mv_zones_even};
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

/* The fill target to place by: the cluster's, or, when skew > 0 and the fill spread of the
 * placeable shards with a capacity is above it, their mean fill plus skew / 2 if that is lower;
 * then those below the mean are preferred (ps[i].prefer) for the slices the lower target moves.
 * Loads are the bytes of every routed replica. Sets out->fill, out->spread, out->evened. */
static int plan_fill(const ferry_record_list *shards, const mv_view *view, double cluster_fill,
                     double skew, mv_plan_shard *ps, ferry_rebalance_plan *out, ferry_err *err)
{
    out->fill = cluster_fill;
    out->spread = -1;
    if (!(skew > 0))
        return FERRY_OK;
    uint64_t *load = calloc(shards->n + 1, sizeof *load);
    if (!load)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < view->n_slices; i++) {
        const mv_view_slice *sl = &view->slices[i];
        if (!sl->has_slice || !sl->has_route)
            continue;
        const mv_shard *r = mv_view_route(view, sl);
        for (size_t k = 0; k < sl->n_route; k++)
            if (r[k] < shards->n)
                load[r[k]] += sl->bytes;
    }
    double lo = 0, hi = 0;
    long double sum_load = 0, sum_cap = 0;
    size_t n = 0;
    for (size_t i = 0; i < shards->n; i++) {
        const ferry_shard *sh = &shards->items[i].u.shard;
        if (!sh->capacity || !ferry_shard_placeable(sh->state))
            continue;
        double f = (double)load[i] / (double)sh->capacity;
        lo = n == 0 || f < lo ? f : lo;
        hi = n == 0 || f > hi ? f : hi;
        sum_load += load[i];
        sum_cap += sh->capacity;
        n++;
    }
    if (n >= 2) {
        out->spread = hi - lo;
        double mean = (double)(sum_load / sum_cap), even = mean + skew / 2;
        if (out->spread > skew && even < out->fill) {
            out->fill = even;
            out->evened = true;
            for (size_t i = 0; i < shards->n; i++) {
                const ferry_shard *sh = &shards->items[i].u.shard;
                ps[i].prefer = sh->capacity && ferry_shard_placeable(sh->state) &&
                               (double)load[i] / (double)sh->capacity < mean;
            }
        }
    }
    free(load);
    return FERRY_OK;
}

/* Puts the sizes a dry run's sync read (ferry_inventory_sync_dry) into the view, where the sync
 * would have written them; a slice the view lacks has none to replace. */
static void view_resize(mv_view *view, const ferry_slice_sizes *sizes)
{
    for (size_t i = 0; sizes && i < sizes->n; i++) {
        const ferry_slice_size *z = &sizes->v[i];
        long vi = mv_view_slice_find(view, z->tenant, z->split);
        if (vi >= 0 && view->slices[vi].has_slice) {
            view->slices[vi].bytes = z->bytes;
            view->slices[vi].rows = z->rows;
        }
    }
}

/* The plan from the view mv_view_read gives, or (records) from the reference reader. With sizes
 * (a dry run's), those sizes in place of the catalog's. */
static int plan_compute(ferry_catalog *cat, bool records, double skew,
                        const ferry_slice_sizes *sizes, ferry_rebalance_plan *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    ferry_record settings;
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    ferry_record_list shards = {0};
    mv_view view = {0};
    const char **names = NULL;
    mv_plan_shard *ps = NULL;
    mv_plan_slice *pl = NULL;
    mv_plan_move *moves = NULL;
    size_t nm = 0, npl = 0, cap = 0;
    size_t *idx = NULL;
    mv_zones *zones = NULL;
    ferry_hash hash = FERRY_HASH_SHA256;
    int rc = ferry_catalog_get(cat, &settings, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "the catalog has no cluster yet (ferry init)");
    if (!rc && !ferry_hash_parse(settings.u.settings.hash, &hash))
        rc = ferry_err_set(err, FERRY_EINVAL, "catalog: unknown placement hash '%s'",
                           settings.u.settings.hash);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc && !(names = calloc(shards.n + 1, sizeof *names)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < shards.n; i++)
        names[i] = shards.items[i].u.shard.name;
    /* the view's shard table starts with the shard records: its index k is shards.items[k] */
    if (!rc)
        rc = records ? mv_view_read_records(cat, names, shards.n, &view, err)
                     : mv_view_read(cat, names, shards.n, &view, err);
    if (rc)
        goto out;
    view_resize(&view, sizes);
    size_t nv = view.n_slices;
    ps = calloc(shards.n + 1, sizeof *ps);
    pl = calloc(nv + 1, sizeof *pl);
    idx = calloc(shards.n + FERRY_SHARDS_MAX + 1, sizeof *idx); /* a route, and the clones */
    if (!ps || !pl || !idx) {
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
        ps[i].old_weight = sh->placed_weight;
        ps[i].zone = sh->zone;
        active += ps[i].in_new;
    }
    /* Every shard serving a routed slice was in the old cluster. A route of no shard, or one
     * naming a shard without a record, cannot be planned: the plan would drop a replica it does
     * not see (or clone from nothing), so it is refused with the slice and the name. */
    for (size_t i = 0; i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        if (!sl->has_slice || !sl->has_route)
            continue; /* a route without a slice record, or a slice nobody routes yet */
        const mv_shard *r = mv_view_route(&view, sl);
        if (!sl->n_route) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u has a route of no shard",
                               sl->tenant, sl->split);
            goto out;
        }
        for (size_t k = 0; k < sl->n_route; k++) {
            if (!mv_shard_known(&view.shards, r[k])) {
                rc = ferry_err_set(err, FERRY_EINVAL,
                                   "tenant %s split %u is routed to shard %s, which has no "
                                   "shard record (ferry shard add it, or route the slice "
                                   "elsewhere)", sl->tenant, sl->split,
                                   view.shards.names[r[k]]);
                goto out;
            }
            ps[r[k]].in_old = true;
        }
    }
    if ((rc = plan_fill(&shards, &view, settings.u.settings.fill, skew, ps, out, err)))
        goto out;
    size_t n_replica_steps = 0;   /* routed slices left to the replica steps below */
    const char *rf_tenant = NULL; /* tenant_rf of the slices of one tenant, looked up once */
    unsigned rf_want = 0;
    for (size_t i = 0; i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        if (!sl->has_slice)
            continue;
        out->slices++;
        if (!sl->has_route)
            continue;
        if (sl->tenant != rf_tenant) {
            rf_tenant = sl->tenant;
            rf_want = tenant_rf(&view, sl->tenant, settings.u.settings.rf);
        }
        unsigned want = rf_want;
        if (want > active)
            want = (unsigned)active;
        out->total_bytes += sl->bytes * (want ? want : 1);
        if (want <= 1 && sl->n_route == 1) {
            /* rf 1 with one replica: the shard-change plan below decides */
            pl[npl].tenant = sl->tenant;
            pl[npl].split = sl->split;
            pl[npl].bytes = sl->bytes;
            pl[npl].route = mv_view_route(&view, sl)[0];
            pl[npl].view = i;
            npl++;
        } else {
            n_replica_steps++;
        }
    }
    rc = mv_plan(settings.u.settings.hash, 1, out->fill, ps, shards.n, pl, npl, &moves, &nm, err);
    for (size_t i = 0; !rc && i < nm; i++)
        rc = plan_push(out, &cap, FERRY_PLAN_MOVE, &view.slices[pl[moves[i].slice].view],
                       ps[moves[i].from].name, ps[moves[i].to].name, err);
    /* slices with rf > 1 or several replicas: placement's zone rule over the shards' loads as
     * the routes and the moves above leave them (none: no loads to keep) */
    if (!rc && n_replica_steps)
        rc = mv_zones_open(settings.u.settings.hash, out->fill, ps, shards.n, &zones, err);
    for (size_t i = 0; !rc && zones && i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        const mv_shard *r = mv_view_route(&view, sl);
        for (size_t k = 0; sl->has_slice && sl->has_route && k < sl->n_route; k++)
            mv_zones_load(zones, r[k], (int64_t)sl->bytes);
    }
    for (size_t i = 0; !rc && zones && i < nm; i++) {
        mv_zones_load(zones, moves[i].from, -(int64_t)moves[i].bytes);
        mv_zones_load(zones, moves[i].to, (int64_t)moves[i].bytes);
    }
    for (size_t i = 0; !rc && zones && i < nv; i++) {
        const mv_view_slice *sl = &view.slices[i];
        if (!sl->has_slice || !sl->has_route)
            continue;
        if (sl->tenant != rf_tenant) {
            rf_tenant = sl->tenant;
            rf_want = tenant_rf(&view, sl->tenant, settings.u.settings.rf);
        }
        unsigned want = rf_want;
        if (want > active)
            want = (unsigned)active;
        if (want <= 1 && sl->n_route == 1)
            continue; /* planned above */
        size_t have = sl->n_route;
        assert(have >= 1 && have <= FERRY_SHARDS_MAX);
        const mv_shard *r = mv_view_route(&view, sl);
        for (size_t k = 0; k < have; k++)
            idx[k] = r[k];
        if (want >= 1)
            rc = plan_slice(hash, &shards, zones, sl, idx, have, want, out, &cap, err);
    }
    if (!rc && !out->moves)
        out->moves = calloc(1, sizeof *out->moves);
    if (!rc && !out->moves)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    free(moves);
    free(ps);
    free(pl);
    free(idx);
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
    return plan_compute(cat, false, 0, NULL, out, err);
}

int ferry_rebalance_plan_compute_skew(ferry_catalog *cat, double skew, ferry_rebalance_plan *out,
                                      ferry_err *err)
{
    return plan_compute(cat, false, skew, NULL, out, err);
}

int ferry_rebalance_plan_compute_sized(ferry_catalog *cat, double skew,
                                       const ferry_slice_sizes *sizes, ferry_rebalance_plan *out,
                                       ferry_err *err)
{
    return plan_compute(cat, false, skew, sizes, out, err);
}

int mv_plan_compute_records(ferry_catalog *cat, ferry_rebalance_plan *out, ferry_err *err)
{
    return plan_compute(cat, true, 0, NULL, out, err);
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
        bool added = r->u.shard.state == FERRY_SHARD_NEW;
        if (!added && !(r->u.shard.placed_weight > 0))
            continue;
        /* an added shard is filled once no step goes to it; a re-weighted one is balanced once
         * no step goes to it or leaves it */
        bool wanted = false;
        for (size_t k = 0; k < remaining->n_moves && !wanted; k++)
            wanted = !strcmp(remaining->moves[k].to, r->u.shard.name) ||
                     (!added && !strcmp(remaining->moves[k].from, r->u.shard.name));
        if (wanted)
            continue;
        if (added)
            r->u.shard.state = FERRY_SHARD_ACTIVE;
        r->u.shard.placed_weight = 0;
        /* compare-and-set: a shard drained or changed meanwhile keeps what it was given */
        rc = ferry_catalog_update(cat, r, err);
        if (rc == FERRY_ECONFLICT) {
            ferry_err_clear(err);
            rc = FERRY_OK;
            continue;
        }
        n += !rc && added;
    }
    ferry_record_list_free(&shards);
    if (settled)
        *settled = n;
    return rc;
}

/* Keeping the catalog's inventory in step with the servers (tenants, slices with their bytes and
 * rows from system.parts, a first route for slices nobody routed yet), and the rebalancing plan
 * computed from it (the placement side lives in rebalance_plan.c). */
#include "ferry/move.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/strutil.h"
#include "flow/move_env.h"
#include "flow/move_int.h"

typedef struct inv_row {
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
    size_t shard;
    uint64_t bytes, rows;
} inv_row;

typedef struct inv_rows {
    inv_row *r;
    size_t n, cap;
} inv_rows;

static int inv_add(inv_rows *v, const char *tenant, uint32_t split, size_t shard, uint64_t bytes,
                   uint64_t rows)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->r[i].split == split && v->r[i].shard == shard && !strcmp(v->r[i].tenant, tenant)) {
            v->r[i].bytes += bytes;
            v->r[i].rows += rows;
            return FERRY_OK;
        }
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        void *p = realloc(v->r, nc * sizeof *v->r);
        if (!p)
            return FERRY_ENOMEM;
        v->r = p;
        v->cap = nc;
    }
    inv_row *r = &v->r[v->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    r->split = split;
    r->shard = shard;
    r->bytes = bytes;
    r->rows = rows;
    return FERRY_OK;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= FERRY_NAME_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            return false;
    return true;
}

int ferry_inventory_sync(ferry_catalog *cat, const ferry_move_opts *o, ferry_sync_summary *s,
                         ferry_err *err)
{
    ferry_sync_summary dummy;
    if (!s)
        s = &dummy;
    memset(s, 0, sizeof *s);
    ferry_record_list shards = {0}, tables = {0}, tenants = {0}, slices = {0}, routes = {0};
    inv_rows rows = {0};
    ferry_batch *b = NULL;
    int rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TABLE, NULL, 0, &tables, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tenants, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SLICE, NULL, 0, &slices, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, err);
    for (size_t sh = 0; !rc && sh < shards.n; sh++) {
        const ferry_shard *shard = &shards.items[sh].u.shard;
        if (shard->state == FERRY_SHARD_GONE)
            continue;
        mv_conn c;
        if ((rc = mv_conn_open(shard, o->cfg, &c, err)))
            break;
        for (size_t t = 0; !rc && t < tables.n; t++) {
            const ferry_table_def *td = &tables.items[t].u.table;
            if (td->layout != FERRY_LAYOUT_SHARED)
                continue;
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_ch_rows r = {0};
            ferry_buf_puts(&sql, "SELECT partition, sum(bytes_on_disk), sum(rows) FROM "
                                 "system.parts WHERE active AND database = ");
            ferry_sql_quote(td->database, &sql);
            ferry_buf_puts(&sql, " AND table = ");
            ferry_sql_quote(td->name, &sql);
            ferry_buf_puts(&sql, " GROUP BY partition");
            rc = mv_sql(&c, ferry_buf_cstr(&sql), &r, err);
            ferry_buf_free(&sql);
            if (rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT) {
                /* a shard that is down: its slices keep their catalog sizes this time */
                ferry_log(FERRY_LOG_WARN, "msg=\"inventory sync skips an unreachable shard\" "
                          "shard=%s error=\"%s\"", shard->name, err->msg);
                ferry_err_clear(err);
                rc = FERRY_OK;
                break;
            }
            for (size_t i = 0; !rc && i < r.n_rows; i++) {
                ferry_partition_key k;
                ferry_err perr = {0};
                if (ferry_partition_parse(td->layout, ferry_ch_rows_get(&r, i, 0), &k, &perr) ||
                    !name_ok(k.tenant))
                    continue;
                uint64_t bytes = 0, nrows = 0;
                ferry_parse_u64(ferry_ch_rows_get(&r, i, 1), &bytes);
                ferry_parse_u64(ferry_ch_rows_get(&r, i, 2), &nrows);
                if (inv_add(&rows, k.tenant, k.split, sh, bytes, nrows))
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
            ferry_ch_rows_free(&r);
        }
        mv_conn_close(&c);
    }
    if (rc)
        goto out;
    b = ferry_batch_new();
    if (!b) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    /* tenants: splits = highest split seen + 1 */
    for (size_t i = 0; !rc && i < rows.n; i++) {
        uint32_t want = rows.r[i].split + 1;
        bool seen_before = false;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(rows.r[j].tenant, rows.r[i].tenant))
                seen_before = true;
        if (seen_before)
            continue;
        for (size_t j = i + 1; j < rows.n; j++)
            if (!strcmp(rows.r[j].tenant, rows.r[i].tenant) && rows.r[j].split + 1 > want)
                want = rows.r[j].split + 1;
        ferry_record *have = NULL;
        for (size_t j = 0; j < tenants.n; j++)
            if (!strcmp(tenants.items[j].u.tenant.name, rows.r[i].tenant))
                have = &tenants.items[j];
        if (have && have->u.tenant.splits >= want)
            continue;
        ferry_record tr;
        if (have) {
            tr = *have;
            tr.u.tenant.splits = want;
            rc = ferry_batch_update(b, &tr, err);
        } else {
            ferry_record_init(&tr, FERRY_REC_TENANT);
            snprintf(tr.u.tenant.name, sizeof tr.u.tenant.name, "%s", rows.r[i].tenant);
            tr.u.tenant.splits = want;
            rc = ferry_batch_create(b, &tr, err);
            s->tenants_created++;
        }
    }
    /* slices and routes */
    for (size_t i = 0; !rc && i < rows.n; i++) {
        const inv_row *x = &rows.r[i];
        bool first = true;
        for (size_t j = 0; j < i; j++)
            if (rows.r[j].split == x->split && !strcmp(rows.r[j].tenant, x->tenant))
                first = false;
        if (!first)
            continue;
        ferry_record *route = NULL, *slice = NULL;
        for (size_t j = 0; j < routes.n; j++)
            if (routes.items[j].u.route.split == x->split &&
                !strcmp(routes.items[j].u.route.tenant, x->tenant))
                route = &routes.items[j];
        for (size_t j = 0; j < slices.n; j++)
            if (slices.items[j].u.slice.split == x->split &&
                !strcmp(slices.items[j].u.slice.tenant, x->tenant))
                slice = &slices.items[j];
        /* the slice's size is what its serving shard holds; without a route, the only holder */
        const inv_row *serving = NULL;
        size_t holders = 0;
        for (size_t j = i; j < rows.n; j++) {
            const inv_row *y = &rows.r[j];
            if (y->split != x->split || strcmp(y->tenant, x->tenant))
                continue;
            holders++;
            if (route ? ferry_list_has(route->u.route.shards, shards.items[y->shard].u.shard.name)
                      : !serving)
                serving = y;
        }
        if (!route && holders > 1) {
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "tenant %s split %u has data on %zu shards and no route; route it "
                               "or remove the extra copies first", x->tenant, x->split, holders);
            break;
        }
        if (!serving)
            continue; /* routed to a shard that holds nothing yet (a fresh move target) */
        if (!route) {
            ferry_record rr;
            ferry_record_init(&rr, FERRY_REC_ROUTE);
            snprintf(rr.u.route.tenant, sizeof rr.u.route.tenant, "%s", x->tenant);
            rr.u.route.split = x->split;
            snprintf(rr.u.route.shards, sizeof rr.u.route.shards, "%s",
                     shards.items[serving->shard].u.shard.name);
            rc = ferry_batch_create(b, &rr, err);
            s->routes_created++;
        }
        ferry_record sr;
        if (!rc && slice) {
            if (slice->u.slice.bytes != serving->bytes || slice->u.slice.rows != serving->rows) {
                sr = *slice;
                sr.u.slice.bytes = serving->bytes;
                sr.u.slice.rows = serving->rows;
                rc = ferry_batch_update(b, &sr, err);
                s->slices_updated++;
            }
        } else if (!rc) {
            ferry_record_init(&sr, FERRY_REC_SLICE);
            snprintf(sr.u.slice.tenant, sizeof sr.u.slice.tenant, "%s", x->tenant);
            sr.u.slice.split = x->split;
            sr.u.slice.bytes = serving->bytes;
            sr.u.slice.rows = serving->rows;
            rc = ferry_batch_create(b, &sr, err);
            s->slices_created++;
        }
        s->slices++;
        s->bytes += serving->bytes;
    }
    if (!rc && ferry_batch_size(b))
        rc = ferry_catalog_commit(cat, b, NULL, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "inventory sync: ");
out:
    ferry_batch_free(b);
    free(rows.r);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&tables);
    ferry_record_list_free(&tenants);
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    return rc;
}

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
static unsigned tenant_rf(const ferry_record_list *tenants, const char *tenant, unsigned cluster_rf)
{
    for (size_t i = 0; i < tenants->n; i++)
        if (!strcmp(tenants->items[i].u.tenant.name, tenant) && tenants->items[i].u.tenant.rf)
            return tenants->items[i].u.tenant.rf;
    return cluster_rf ? cluster_rf : 1;
}

static int plan_push(ferry_rebalance_plan *out, size_t *cap, enum ferry_plan_kind kind,
                     const ferry_slice *sl, const char *from, const char *to, ferry_err *err)
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

static const ferry_route *find_route(const ferry_record_list *routes, const ferry_slice *sl)
{
    for (size_t j = 0; j < routes->n; j++)
        if (routes->items[j].u.route.split == sl->split &&
            !strcmp(routes->items[j].u.route.tenant, sl->tenant))
            return &routes->items[j].u.route;
    return NULL;
}

static bool shard_active(const ferry_record_list *shards, size_t k)
{
    return shards->items[k].u.shard.state == FERRY_SHARD_ACTIVE;
}

/* The replica steps of one slice whose route lists the shards idx[0..have) (indices into
 * shards) and whose tenant wants `want` replicas, in the order they run:
 *  1. DROP while it has too many: a replica on a draining shard first, else the lowest score;
 *     never the last one;
 *  2. MOVE of every replica left on a shard that is not active (draining) to the shard
 *     placement's zone rule picks among the active shards the slice is not on;
 *  3. CLONE while it has too few, to the shard the same rule picks (from a replica that stays);
 *  4. MOVE for zone repair while its replicas crowd a zone and a less crowded zone has room.
 * Every step updates idx and the shard loads, so later steps (and slices) see its result. */
static int plan_slice(const ferry_settings *st, const ferry_record_list *shards, mv_zones *zones,
                      const ferry_slice *sl, size_t *idx, size_t have, unsigned want,
                      ferry_rebalance_plan *out, size_t *cap, ferry_err *err)
{
    char id[FERRY_NAME_MAX + 32];
    snprintf(id, sizeof id, "%s/split%u", sl->tenant, sl->split);
    const int64_t bytes = (int64_t)sl->bytes;
    int rc = FERRY_OK;
    while (!rc && have > want && have > 1) {
        size_t worst = 0;
        double worst_score = 0;
        for (size_t k = 0; !rc && k < have; k++) {
            const ferry_shard *sh = &shards->items[idx[k]].u.shard;
            double sc;
            rc = mv_score(st->hash, id, sh->name, sh->weight > 0 ? sh->weight : 1, &sc, err);
            if (!shard_active(shards, idx[k]))
                sc = -1; /* a replica on a draining shard goes first */
            if (!rc && (k == 0 || sc < worst_score))
                worst = k, worst_score = sc;
        }
        if (rc)
            break;
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
    for (size_t round = 0; !rc && all_active && have >= 2 && round < have; round++) {
        size_t victim, to;
        if (!mv_zones_repair(zones, id, sl->bytes, idx, have, &victim, &to))
            break;
        rc = plan_push(out, cap, FERRY_PLAN_MOVE, sl, shards->items[idx[victim]].u.shard.name,
                       shards->items[to].u.shard.name, err);
        mv_zones_load(zones, idx[victim], -bytes);
        mv_zones_load(zones, to, bytes);
        idx[victim] = to;
    }
    return rc;
}

int ferry_rebalance_plan_compute(ferry_catalog *cat, ferry_rebalance_plan *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    ferry_record settings;
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    ferry_record_list shards = {0}, slices = {0}, routes = {0}, tenants = {0};
    mv_plan_shard *ps = NULL;
    mv_plan_slice *pl = NULL;
    mv_plan_move *moves = NULL;
    size_t nm = 0, npl = 0, cap = 0;
    size_t *idx = NULL;
    mv_zones *zones = NULL;
    int rc = ferry_catalog_get(cat, &settings, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "the catalog has no cluster yet (ferry init)");
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SLICE, NULL, 0, &slices, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tenants, err);
    if (rc)
        goto out;
    ps = calloc(shards.n + 1, sizeof *ps);
    pl = calloc(slices.n + 1, sizeof *pl);
    idx = calloc(shards.n + 1, sizeof *idx);
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
        ps[i].in_new = sh->state == FERRY_SHARD_ACTIVE;
        ps[i].zone = sh->zone;
        active += ps[i].in_new;
    }
    for (size_t i = 0; i < slices.n; i++) {
        const ferry_slice *sl = &slices.items[i].u.slice;
        const ferry_route *rt = NULL;
        for (size_t j = 0; j < routes.n; j++)
            if (routes.items[j].u.route.split == sl->split &&
                !strcmp(routes.items[j].u.route.tenant, sl->tenant))
                rt = &routes.items[j].u.route;
        if (!rt)
            continue;
        char first[FERRY_NAME_MAX];
        size_t fl = strcspn(rt->shards, ",");
        if (fl >= sizeof first)
            fl = sizeof first - 1;
        memcpy(first, rt->shards, fl);
        first[fl] = '\0';
        size_t k;
        for (k = 0; k < shards.n; k++)
            if (!strcmp(ps[k].name, first))
                break;
        if (k == shards.n) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is routed to unknown shard "
                               "%s", sl->tenant, sl->split, first);
            goto out;
        }
        unsigned want = tenant_rf(&tenants, sl->tenant, settings.u.settings.rf);
        if (want > active)
            want = (unsigned)active;
        out->total_bytes += sl->bytes * (want ? want : 1);
        /* every shard serving a route was in the old cluster (else it would look added) */
        char rcopy[FERRY_LIST_MAX], *rsave = NULL;
        snprintf(rcopy, sizeof rcopy, "%s", rt->shards);
        for (char *x = strtok_r(rcopy, ",", &rsave); x; x = strtok_r(NULL, ",", &rsave))
            for (size_t j = 0; j < shards.n; j++)
                if (!strcmp(ps[j].name, x))
                    ps[j].in_old = true;
        if (want <= 1 && !strchr(rt->shards, ',')) {
            /* rf 1 with one replica: the shard-change plan below decides */
            pl[npl].tenant = sl->tenant;
            pl[npl].split = sl->split;
            pl[npl].bytes = sl->bytes;
            pl[npl].route = k;
            npl++;
        }
    }
    out->slices = slices.n;
    rc = mv_plan(settings.u.settings.hash, 1, settings.u.settings.fill, ps, shards.n, pl, npl,
                 &moves, &nm, err);
    if (rc)
        goto out;
    for (size_t i = 0; !rc && i < nm; i++) {
        ferry_slice tmp;
        memset(&tmp, 0, sizeof tmp);
        snprintf(tmp.tenant, sizeof tmp.tenant, "%s", pl[moves[i].slice].tenant);
        tmp.split = pl[moves[i].slice].split;
        tmp.bytes = moves[i].bytes;
        rc = plan_push(out, &cap, FERRY_PLAN_MOVE, &tmp, ps[moves[i].from].name,
                       ps[moves[i].to].name, err);
    }
    /* slices with rf > 1 or several replicas: placement's zone rule over the shards' loads as
     * the routes and the moves above leave them */
    if (!rc)
        rc = mv_zones_open(settings.u.settings.hash, settings.u.settings.fill, ps, shards.n,
                           &zones, err);
    for (size_t i = 0; !rc && i < slices.n; i++) {
        const ferry_slice *sl = &slices.items[i].u.slice;
        const ferry_route *rt = find_route(&routes, sl);
        char copy[FERRY_LIST_MAX], *save = NULL;
        snprintf(copy, sizeof copy, "%s", rt ? rt->shards : "");
        for (char *x = strtok_r(copy, ",", &save); x; x = strtok_r(NULL, ",", &save))
            for (size_t j = 0; j < shards.n; j++)
                if (!strcmp(ps[j].name, x))
                    mv_zones_load(zones, j, (int64_t)sl->bytes);
    }
    for (size_t i = 0; !rc && i < nm; i++) {
        mv_zones_load(zones, moves[i].from, -(int64_t)moves[i].bytes);
        mv_zones_load(zones, moves[i].to, (int64_t)moves[i].bytes);
    }
    for (size_t i = 0; !rc && i < slices.n; i++) {
        const ferry_slice *sl = &slices.items[i].u.slice;
        const ferry_route *rt = find_route(&routes, sl);
        if (!rt || !rt->shards[0])
            continue;
        unsigned want = tenant_rf(&tenants, sl->tenant, settings.u.settings.rf);
        if (want > active)
            want = (unsigned)active;
        if (want <= 1 && !strchr(rt->shards, ','))
            continue; /* planned above */
        size_t have = 0;
        char copy[FERRY_LIST_MAX], *save = NULL;
        snprintf(copy, sizeof copy, "%s", rt->shards);
        for (char *x = strtok_r(copy, ",", &save); x && have < shards.n;
             x = strtok_r(NULL, ",", &save))
            for (size_t j = 0; j < shards.n; j++)
                if (!strcmp(ps[j].name, x))
                    idx[have++] = j;
        if (have && want >= 1)
            rc = plan_slice(&settings.u.settings, &shards, zones, sl, idx, have, want, out, &cap,
                            err);
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
    mv_zones_close(zones);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    ferry_record_list_free(&tenants);
    ferry_record_free(&settings);
    if (rc)
        ferry_rebalance_plan_free(out);
    return rc;
}

void ferry_rebalance_plan_free(ferry_rebalance_plan *p)
{
    free(p->moves);
    memset(p, 0, sizeof *p);
}

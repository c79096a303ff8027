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
 *   - no move in SWITCH: the route's shards are complete copies: read one;
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

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/log.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

void rt_snapshot_put(rt_snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (size_t i = 0; i < s->n_tenants; i++) {
        for (uint32_t k = 0; k < s->tenants[i].n_routes; k++)
            free(s->tenants[i].routes[k].shards);
        free(s->tenants[i].routes);
        free(s->tenants[i].name);
    }
    free(s->tenants);
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

static int tenant_cmp(const void *a, const void *b)
{
    return strcmp(((const rt_tenant *)a)->name, ((const rt_tenant *)b)->name);
}

const rt_tenant *rt_find_tenant(const rt_snapshot *s, const char *name, size_t len)
{
    size_t lo = 0, hi = s->n_tenants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        /* byte-wise over the shorter length, then the lengths: a name holding a NUL byte or
         * longer than the stored one never matches, and nothing past either end is read */
        const char *t = s->tenants[mid].name;
        size_t tl = strlen(t);
        int d = memcmp(t, name, tl < len ? tl : len);
        if (!d)
            d = tl < len ? -1 : tl > len ? 1 : 0;
        if (!d)
            return &s->tenants[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The first name of a comma-separated shard list, as an index into router->shards (-1: none). */
static long first_shard_index(ferry_router *r, const char *list)
{
    char name[FERRY_NAME_MAX];
    size_t n = strcspn(list, ",");
    if (n >= sizeof name)
        return -1;
    memcpy(name, list, n);
    name[n] = '\0';
    return rt_shard_index(r, ferry_trim(name));
}

/* Marks the routes of slices whose move is in SWITCH (the move journal's states are in
 * include/ferry/catalog.h; step >= FERRY_MOVE_STEP_PUBLISH: publishing). */
static void apply_moves(ferry_router *r, rt_snapshot *s, const ferry_record_list *moves)
{
    for (size_t i = 0; i < moves->n; i++) {
        const ferry_move *m = &moves->items[i].u.move;
        if (m->state != FERRY_MOVE_SWITCH)
            continue;
        rt_tenant *t = (rt_tenant *)rt_find_tenant(s, m->tenant, strlen(m->tenant));
        if (!t || m->split >= t->n_routes)
            continue;
        rt_route *rr = &t->routes[m->split];
        rr->moving = true;
        rr->publishing = m->step >= FERRY_MOVE_STEP_PUBLISH;
        rr->move_from = first_shard_index(r, m->from);
        rr->move_to = first_shard_index(r, m->to);
        snprintf(rr->move_id, sizeof rr->move_id, "%s", m->id);
    }
}

void rt_read_set(const rt_snapshot *s, const rt_tenant *t, uint32_t split, rt_readers *out)
{
    (void)s;
    memset(out, 0, sizeof *out);
    const rt_route *rr = split < t->n_routes ? &t->routes[split] : NULL;
    if (!rr || !rr->n_shards) {
        out->mode = RT_READ_NONE;
        out->missing = rr && rr->missing[0] ? rr->missing : NULL;
        return;
    }
    /* complete copies: the route's shards, except a move's target while it is in SWITCH */
    out->mode = RT_READ_ONE;
    for (uint32_t k = 0; k < rr->n_shards && out->n < RT_READ_SET_MAX; k++)
        if (!rr->moving || (long)rr->shards[k] != rr->move_to)
            out->shards[out->n++] = rr->shards[k];
    if (out->n || !rr->moving)
        return;
    out->move_id = rr->move_id;
    if (rr->move_to < 0 || (!rr->publishing && rr->move_from < 0)) {
        out->mode = RT_READ_NONE; /* a shard of the move the router's config does not name */
        return;
    }
    if (rr->publishing) {
        out->mode = RT_READ_HOLD;
        out->shards[out->n++] = (uint32_t)rr->move_to;
        return;
    }
    out->mode = RT_READ_UNION;
    out->shards[out->n++] = (uint32_t)rr->move_from;
    if (rr->move_to != rr->move_from)
        out->shards[out->n++] = (uint32_t)rr->move_to;
}

/* Builds a snapshot from the routing JSON, the tenant list, the move journal and the users. */
static int build(ferry_router *r, const char *json, const ferry_record_list *tenants,
                 const ferry_record_list *moves, const ferry_record_list *users,
                 rt_snapshot **out, ferry_err *err)
{
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    rt_snapshot *s = calloc(1, sizeof *s);
    int rc = FERRY_OK;
    if (!o || !s) {
        rc = ferry_err_set(err, o ? FERRY_ENOMEM : FERRY_EINTERNAL, "routing JSON: %s",
                           o ? "out of memory" : je.text);
        goto out;
    }
    atomic_init(&s->refs, 1);
    s->version = (uint64_t)json_integer_value(json_object_get(o, "version"));
    s->tenants = calloc(tenants->n ? tenants->n : 1, sizeof *s->tenants);
    if (!s->tenants) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < tenants->n; i++) {
        rt_tenant *t = &s->tenants[s->n_tenants];
        t->name = strdup(tenants->items[i].u.tenant.name);
        if (!t->name) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        t->splits = tenants->items[i].u.tenant.splits;
        s->n_tenants++;
    }
    qsort(s->tenants, s->n_tenants, sizeof *s->tenants, tenant_cmp);
    size_t idx;
    json_t *sl;
    json_array_foreach(json_object_get(o, "slices"), idx, sl) {
        const char *tn = json_string_value(json_object_get(sl, "tenant"));
        json_int_t split = json_integer_value(json_object_get(sl, "split"));
        if (!tn || split < 0 || split >= FERRY_SPLITS_MAX)
            continue;
        rt_tenant *t = (rt_tenant *)rt_find_tenant(s, tn, strlen(tn));
        if (!t)
            continue; /* a route of a tenant that is gone: nothing routes to it */
        if ((uint32_t)split >= t->n_routes) {
            uint32_t n = (uint32_t)split + 1;
            void *p = realloc(t->routes, n * sizeof *t->routes);
            if (!p) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            t->routes = p;
            memset(t->routes + t->n_routes, 0, (n - t->n_routes) * sizeof *t->routes);
            t->n_routes = n;
        }
        rt_route *rr = &t->routes[split];
        json_t *shards = json_object_get(sl, "shards");
        rr->shards = calloc(json_array_size(shards) + 1, sizeof *rr->shards);
        if (!rr->shards) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        size_t j;
        json_t *sh;
        json_array_foreach(shards, j, sh) {
            const char *name = json_string_value(sh);
            long k = name ? rt_shard_index(r, name) : -1;
            if (k < 0) {
                snprintf(rr->missing, sizeof rr->missing, "%s", name ? name : "?");
                continue;
            }
            rr->shards[rr->n_shards++] = (uint32_t)k;
        }
    }
    apply_moves(r, s, moves);
    rc = rt_users_build(users, &s->users, &s->n_users, err);
out:
    json_decref(o);
    if (rc) {
        rt_snapshot_put(s);
        return rc;
    }
    *out = s;
    return FERRY_OK;
}

int rt_reload(ferry_router *r, ferry_catalog *cat, ferry_err *err)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        uint64_t v1 = 0, v2 = 0;
        char *json = NULL;
        ferry_record_list tenants = {0}, moves = {0}, shards = {0}, users = {0};
        rt_snapshot *s = NULL;
        int rc = ferry_catalog_routing_version(cat, &v1, err);
        if (!rc)
            rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
        if (!rc)
            rc = ferry_catalog_routing_json(cat, NULL, -1, &json, err);
        if (!rc)
            rc = ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tenants, err);
        if (!rc)
            /* only moves in flight matter (SWITCH); DONE and FAILED ones are history, which
             * the index of unfinished moves keeps out of every reload */
            rc = ferry_catalog_list_unfinished_moves(cat, &moves, err);
        if (!rc)
            /* users change the routing version too: they come at the same version */
            rc = ferry_catalog_list(cat, FERRY_REC_USER, NULL, 0, &users, err);
        if (!rc)
            rc = ferry_catalog_routing_version(cat, &v2, err);
        /* Split counts change in the same batch as the new slices' routes, a move's state
         * changes that matter to readers (switch, publish, cleanup) in the same batch as its
         * route, and shard changes raise the version too, so one routing version before and
         * after the reads makes shards, tenants, routes and moves one consistent state. The
         * shard slots follow that state before the snapshot names them (one sync at a time). */
        bool consistent = !rc && v1 == v2;
        bool published = false;
        if (consistent) {
            pthread_mutex_lock(&r->reload_mu);
            pthread_mutex_lock(&r->mu);
            bool stale = r->snap && r->snap->version >= v1; /* another reload got there first */
            pthread_mutex_unlock(&r->mu);
            if (!stale)
                rc = rt_shards_sync(r, &shards, err);
            if (!stale && !rc)
                rc = build(r, json, &tenants, &moves, &users, &s, err);
            if (!stale && !rc && s->version == v1) {
                published = true;
                pthread_mutex_lock(&r->mu);
                rt_snapshot *old = r->snap;
                r->snap = s;
                s = old;
                pthread_cond_broadcast(&r->cond); /* reads held for a newer table */
                pthread_mutex_unlock(&r->mu);
            }
            published = published || stale;
            pthread_mutex_unlock(&r->reload_mu);
        }
        free(json);
        ferry_record_list_free(&tenants);
        ferry_record_list_free(&moves);
        ferry_record_list_free(&shards);
        ferry_record_list_free(&users);
        rt_snapshot_put(s);
        if (rc)
            return rc;
        if (published)
            return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_ETIMEOUT,
                         "the routing table kept changing while it was read; giving up");
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
    struct timespec now_mono, until;
    clock_gettime(CLOCK_MONOTONIC, &now_mono);
    uint64_t now = (uint64_t)now_mono.tv_sec * 1000 + (uint64_t)now_mono.tv_nsec / 1000000;
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

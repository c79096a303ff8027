/* Keeping the catalog's inventory in step with the servers: tenants, slices with their bytes and
 * rows from system.parts, a first route for slices nobody routed yet (the rebalancing plan
 * computed from it is in plan_compute.c). A dry run's sync keeps the new sizes out of the
 * catalog and hands them to its plan instead. */
#include "ferry/move.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Appends one partition's row; rows of one (tenant, split, shard) are summed after sorting. */
static int inv_add(inv_rows *v, const char *tenant, uint32_t split, size_t shard, uint64_t bytes,
                   uint64_t rows)
{
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

static int row_cmp(const void *a, const void *b)
{
    const inv_row *x = a, *y = b;
    int d = mv_slice_key_cmp(x->tenant, x->split, y->tenant, y->split);
    return d ? d : (x->shard > y->shard) - (x->shard < y->shard);
}

/* Sorts rows [from, n) by (tenant, split, shard) and sums the rows of each: run after each
 * answer, so memory follows the (slice, shard) pairs, not the partitions (days) of each. */
static void inv_merge(inv_rows *v, size_t from)
{
    if (v->n - from > 1)
        qsort(v->r + from, v->n - from, sizeof *v->r, row_cmp);
    size_t n = from;
    for (size_t i = from; i < v->n; i++) {
        if (n > from && !row_cmp(&v->r[n - 1], &v->r[i])) {
            v->r[n - 1].bytes += v->r[i].bytes;
            v->r[n - 1].rows += v->r[i].rows;
        } else {
            v->r[n++] = v->r[i];
        }
    }
    v->n = n;
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

/* Every shard's partitions of the shared tables, as rows (one query per table and shard). */
static int read_servers(const ferry_record_list *shards, const ferry_record_list *tables,
                        const ferry_move_opts *o, inv_rows *rows, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t sh = 0; !rc && sh < shards->n; sh++) {
        const ferry_shard *shard = &shards->items[sh].u.shard;
        if (shard->state == FERRY_SHARD_GONE)
            continue;
        mv_conn c;
        if ((rc = mv_conn_open(shard, o->cfg, &c, err)))
            break;
        for (size_t t = 0; !rc && t < tables->n; t++) {
            const ferry_table_def *td = &tables->items[t].u.table;
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
            size_t from = rows->n;
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
                if (inv_add(rows, k.tenant, k.split, sh, bytes, nrows))
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
            inv_merge(rows, from);
            ferry_ch_rows_free(&r);
        }
        mv_conn_close(&c);
    }
    return rc;
}

/* The shards' loads after the sync (every routed slice's bytes on each shard of its route, plus
 * the routes the sync created, already in loads), stored for placing new slices
 * (ferry_catalog_loads_put). A shard a route names without a shard record has no load to keep:
 * nothing is placed on it. */
static int store_loads(ferry_catalog *cat, const ferry_record_list *shards, const mv_view *view,
                       const uint64_t *newb, ferry_shard_load *loads, ferry_err *err)
{
    assert(view->shards.n_known == shards->n);
    for (size_t i = 0; i < shards->n; i++)
        snprintf(loads[i].shard, sizeof loads[i].shard, "%s", shards->items[i].u.shard.name);
    for (size_t i = 0; i < view->n_slices; i++) {
        const mv_view_slice *vs = &view->slices[i];
        const mv_shard *r = mv_view_route(view, vs);
        for (size_t k = 0; vs->has_route && k < vs->n_route; k++)
            if (mv_shard_known(&view->shards, r[k]))
                loads[r[k]].bytes += newb[i];
    }
    return ferry_catalog_loads_put(cat, loads, shards->n, err);
}

/* Whether the slice vs is routed to shard k (an index of the view's shard table). */
static bool routed_to(const mv_view *view, const mv_view_slice *vs, size_t k)
{
    const mv_shard *r = mv_view_route(view, vs);
    for (size_t i = 0; i < vs->n_route; i++)
        if (r[i] == k)
            return true;
    return false;
}

/* Sync attempts when the batch meets a concurrent write (another sync, a move's routing switch,
 * a registration): each re-reads the catalog, not the servers. */
#define SYNC_ATTEMPTS 5

void ferry_slice_sizes_free(ferry_slice_sizes *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Appends a slice's size to *z (kept in the rows' key order by the caller). */
static int sizes_push(ferry_slice_sizes *z, const inv_row *x, ferry_err *err)
{
    if (z->n == z->cap) {
        size_t nc = z->cap ? z->cap * 2 : 256;
        void *p = realloc(z->v, nc * sizeof *z->v);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        z->v = p;
        z->cap = nc;
    }
    ferry_slice_size *e = &z->v[z->n++];
    snprintf(e->tenant, sizeof e->tenant, "%s", x->tenant);
    e->split = x->split;
    e->bytes = x->bytes;
    e->rows = x->rows;
    return FERRY_OK;
}

/* One attempt: the catalog's view now, the batch from it and the servers' rows, committed. With
 * keep (a dry run), the new sizes of slices the catalog has go there instead of into the batch,
 * and the loads are not stored. */
static int sync_once(ferry_catalog *cat, const ferry_record_list *shards, const inv_rows *rows,
                     ferry_sync_summary *s, ferry_slice_sizes *keep, ferry_err *err)
{
    mv_view view = {0};
    ferry_batch *b = NULL;
    uint64_t *newb = NULL; /* each view slice's bytes after the sync */
    ferry_shard_load *loads = NULL;
    const char **names = calloc(shards->n + 1, sizeof *names);
    memset(s, 0, sizeof *s);
    if (keep)
        keep->n = 0;
    int rc = names ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < shards->n; i++)
        names[i] = shards->items[i].u.shard.name;
    /* the view's shard index k is shards->items[k], the rows' shard */
    if (!rc)
        rc = mv_view_read(cat, names, shards->n, &view, err);
    if (rc)
        goto out;
    b = ferry_batch_new();
    newb = malloc((view.n_slices ? view.n_slices : 1) * sizeof *newb);
    loads = calloc(shards->n + 1, sizeof *loads);
    if (!b || !newb || !loads) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < view.n_slices; i++)
        newb[i] = view.slices[i].bytes;
    /* tenants: splits = highest split seen + 1 (the last row of each tenant's run) */
    for (size_t i = 0; !rc && i < rows->n; i++) {
        if (i + 1 < rows->n && !strcmp(rows->r[i + 1].tenant, rows->r[i].tenant))
            continue;
        uint32_t want = rows->r[i].split + 1;
        const mv_view_tenant *have = mv_view_tenant_find(&view, rows->r[i].tenant);
        if (have && have->splits >= want)
            continue;
        ferry_record tr;
        ferry_record_init(&tr, FERRY_REC_TENANT);
        snprintf(tr.u.tenant.name, sizeof tr.u.tenant.name, "%s", rows->r[i].tenant);
        tr.u.tenant.splits = want;
        if (have) {
            tr.u.tenant.rf = have->rf;
            tr.version = have->version;
            rc = ferry_batch_update(b, &tr, err);
        } else {
            rc = ferry_batch_create(b, &tr, err);
            s->tenants_created++;
        }
    }
    /* slices and routes: one run of rows per slice (one row per shard holding it) */
    for (size_t i = 0, next; !rc && i < rows->n; i = next) {
        const inv_row *x = &rows->r[i];
        for (next = i + 1; next < rows->n && !mv_slice_key_cmp(rows->r[next].tenant,
                                                               rows->r[next].split, x->tenant,
                                                               x->split);
             next++)
            ;
        long vi = mv_view_slice_find(&view, x->tenant, x->split);
        const mv_view_slice *vs = vi >= 0 ? &view.slices[vi] : NULL;
        bool route = vs && vs->has_route;
        /* the slice's size is what its serving shard holds; without a route, the only holder */
        const inv_row *serving = NULL;
        size_t holders = next - i;
        for (size_t j = i; j < next; j++)
            if (route ? routed_to(&view, vs, rows->r[j].shard) : !serving)
                serving = &rows->r[j];
        if (!route && holders > 1) {
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "tenant %s split %u has data on %zu shards and no route; route it "
                               "or remove the extra copies first", x->tenant, x->split, holders);
            break;
        }
        if (!serving)
            continue; /* routed to a shard that holds nothing yet (a fresh move target) */
        if (vs)
            newb[vi] = serving->bytes;
        else
            loads[serving->shard].bytes += serving->bytes; /* the route created below */
        if (!route) {
            ferry_record rr;
            ferry_record_init(&rr, FERRY_REC_ROUTE);
            snprintf(rr.u.route.tenant, sizeof rr.u.route.tenant, "%s", x->tenant);
            rr.u.route.split = x->split;
            rc = ferry_shard_set_add(&rr.u.route.shards,
                                     shards->items[serving->shard].u.shard.name, err);
            if (!rc)
                rc = ferry_batch_create(b, &rr, err);
            s->routes_created++;
        }
        ferry_record sr;
        ferry_record_init(&sr, FERRY_REC_SLICE);
        snprintf(sr.u.slice.tenant, sizeof sr.u.slice.tenant, "%s", x->tenant);
        sr.u.slice.split = x->split;
        sr.u.slice.bytes = serving->bytes;
        sr.u.slice.rows = serving->rows;
        if (!rc && vs && vs->has_slice) {
            bool changed = vs->bytes != serving->bytes || vs->rows != serving->rows;
            if (changed && keep) { /* a dry run: for its plan, not the catalog */
                rc = sizes_push(keep, serving, err);
                s->slices_updated++;
            } else if (changed) {
                /* the placement as it was, every name kept (one without a shard record too) */
                const mv_shard *p = mv_view_placement(&view, vs);
                for (size_t k = 0; !rc && k < vs->n_placement; k++)
                    rc = ferry_shard_set_add(&sr.u.slice.placement, view.shards.names[p[k]],
                                             err);
                sr.version = vs->version;
                if (!rc)
                    rc = ferry_batch_update(b, &sr, err);
                s->slices_updated++;
            }
        } else if (!rc) {
            rc = ferry_batch_create(b, &sr, err);
            s->slices_created++;
        }
        s->slices++;
        s->bytes += serving->bytes;
    }
    if (!rc && ferry_batch_size(b))
        rc = ferry_catalog_commit(cat, b, NULL, err);
    if (!rc && !keep)
        rc = store_loads(cat, shards, &view, newb, loads, err);
out:
    free(newb);
    free(loads);
    free(names);
    ferry_batch_free(b);
    mv_view_free(&view);
    return rc;
}

static int sync_run(ferry_catalog *cat, const ferry_move_opts *o, ferry_sync_summary *s,
                    ferry_slice_sizes *keep, ferry_err *err)
{
    ferry_sync_summary dummy;
    if (!s)
        s = &dummy;
    memset(s, 0, sizeof *s);
    ferry_record_list shards = {0}, tables = {0};
    inv_rows rows = {0};
    int rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TABLE, NULL, 0, &tables, err);
    if (!rc)
        rc = read_servers(&shards, &tables, o, &rows, err);
    if (rc)
        goto out;
    inv_merge(&rows, 0);
    /* The batch is one compare-and-set over every record it changes: a move switching a route or
     * another process syncing at the same time makes it fail as a whole, and nothing is
     * half-written. The sizes read from the servers are still true, so only the catalog is read
     * again (a user's `ferry shard drain` must not fail because the coordinator synced). */
    for (int attempt = 1;; attempt++) {
        rc = sync_once(cat, &shards, &rows, s, keep, err);
        if (rc != FERRY_ECONFLICT || attempt == SYNC_ATTEMPTS)
            break;
        ferry_log(FERRY_LOG_DEBUG, "msg=\"inventory sync meets a concurrent write; again\" "
                  "attempt=%d error=\"%s\"", attempt, err->msg);
        ferry_err_clear(err);
        /* 20-99 ms, from the clock: two processes that met should not meet again */
        struct timespec now, pause = {0, 0};
        clock_gettime(CLOCK_MONOTONIC, &now);
        pause.tv_nsec = (20 + now.tv_nsec / 1000 % 80) * 1000000L;
        nanosleep(&pause, NULL);
    }
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "inventory sync (%d attempts): ", SYNC_ATTEMPTS);
out:
    free(rows.r);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&tables);
    return rc;
}

int ferry_inventory_sync(ferry_catalog *cat, const ferry_move_opts *o, ferry_sync_summary *s,
                         ferry_err *err)
{
    return sync_run(cat, o, s, NULL, err);
}

int ferry_inventory_sync_dry(ferry_catalog *cat, const ferry_move_opts *o, ferry_sync_summary *s,
                             ferry_slice_sizes *sizes, ferry_err *err)
{
    assert(sizes);
    return sync_run(cat, o, s, sizes, err);
}

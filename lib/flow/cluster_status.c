/* The cluster at a glance (include/ferry/cluster_status.h): one pass over shards, tenants and
 * slices joined with their routes through the catalog's compact scans (ferry/catalog_scan.h: a
 * few fields per row, no ferry_record per slice or route, so a million slices take a fraction of
 * a second, docs/benchmarks.md "Scale"), the partitions from the catalog's partition counts (no
 * partition record read on SQLite), the index of unfinished moves, then the routes of the few
 * largest tenants for the shards that serve them. Each route's text becomes shard indexes once
 * per distinct list (mv_shards, move_int.h); a shard a route names without a shard record is
 * counted apart (ferry_cluster_status.unknown), not lost. */
#include "ferry/cluster_status.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/catalog_scan.h"
#include "ferry/strutil.h"
#include "flow/move_int.h"


/* YYYYMMDD of the day `days` before today (UTC). */
static uint32_t day_before(uint32_t days)
{
    time_t t = time(NULL) - (time_t)days * 86400;
    struct tm tm;
    gmtime_r(&t, &tm);
    return (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
}

/* A tenant while the slices are summed: its name (owned), splits and bytes. */
typedef struct tenant_sum {
    char *name;
    uint32_t splits;
    uint64_t bytes;
} tenant_sum;

typedef struct status_pass {
    ferry_cluster_status *out;
    tenant_sum *t;
    size_t n_t, cap_t;
    mv_shards shards;    /* the routes' shard lists as indexes: the records' first */
    ferry_shard_status *unknown; /* [shards.n - shards.n_known]: the names without a record */
    size_t cap_unknown;
    long tenant;         /* the index of the current rows' tenant; -1: it has no record */
    char last[FERRY_NAME_MAX]; /* the current rows' tenant */
    bool have_last;
    uint32_t oldest_hot; /* partitions */
    bool sealed;         /* every tenant is in t, in name order (before the first slice) */
} status_pass;

static int tenant_name_cmp(const void *a, const void *b)
{
    return strcmp(((const tenant_sum *)a)->name, ((const tenant_sum *)b)->name);
}

/* After the last tenant row: t in name order for add_slice's bsearch (the scan gives them so: a
 * check and no work). */
static void seal_tenants(status_pass *x)
{
    x->sealed = true;
    for (size_t i = 1; i < x->n_t; i++)
        if (strcmp(x->t[i - 1].name, x->t[i].name) > 0) {
            qsort(x->t, x->n_t, sizeof *x->t, tenant_name_cmp);
            return;
        }
}

static int add_tenant(const ferry_tenant_row *row, void *arg, ferry_err *err)
{
    status_pass *x = arg;
    if (x->n_t == x->cap_t) {
        size_t nc = x->cap_t ? x->cap_t * 2 : 256;
        tenant_sum *q = realloc(x->t, nc * sizeof *q);
        if (!q)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        x->t = q;
        x->cap_t = nc;
    }
    tenant_sum *t = &x->t[x->n_t];
    if (!(t->name = strdup(row->name)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    t->splits = row->splits;
    t->bytes = 0;
    x->n_t++;
    return FERRY_OK;
}

/* Largest first; equal sizes by name, as a stable sort of the tenants in name order gives. */
static int tenant_bytes_cmp(const void *a, const void *b)
{
    const tenant_sum *x = a, *y = b;
    if (x->bytes != y->bytes)
        return (x->bytes < y->bytes) - (x->bytes > y->bytes);
    return strcmp(x->name, y->name);
}

/* The sums of shard k: a record's (out->shards), or one more name without a record. */
static ferry_shard_status *shard_sums(status_pass *x, mv_shard k, ferry_err *err)
{
    if (mv_shard_known(&x->shards, k))
        return &x->out->shards[k];
    size_t u = k - x->shards.n_known; /* unknown names are appended in the order met */
    assert(u <= x->out->n_unknown);
    if (u == x->out->n_unknown) {
        if (u == x->cap_unknown) {
            size_t nc = x->cap_unknown ? x->cap_unknown * 2 : 4;
            ferry_shard_status *q = realloc(x->unknown, nc * sizeof *q);
            if (!q) {
                ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                return NULL;
            }
            x->unknown = x->out->unknown = q;
            x->cap_unknown = nc;
        }
        ferry_shard_status *ss = &x->unknown[x->out->n_unknown++];
        memset(ss, 0, sizeof *ss);
        snprintf(ss->shard.name, sizeof ss->shard.name, "%s", x->shards.names[k]);
        ss->fill = -1;
    }
    return &x->unknown[u];
}

/* Every routed slice's bytes go to each shard its route names (a list names a shard once) and
 * to its tenant; a route without a slice record counts with 0 bytes. */
static int add_slice(const ferry_slice_row *row, void *arg, ferry_err *err)
{
    status_pass *x = arg;
    ferry_cluster_status *out = x->out;
    if (!x->sealed)
        seal_tenants(x);
    out->slices += row->placement != NULL;
    if (!row->shards)
        return FERRY_OK;
    uint64_t bytes = row->placement ? row->bytes : 0;
    uint32_t at;
    uint8_t n;
    int rc = mv_shards_put(&x->shards, row->shards, &at, &n, err);
    if (rc)
        return ferry_err_prefix(err, "tenant %s split %u: route: ", row->tenant, row->split);
    for (size_t i = 0; i < n; i++) {
        ferry_shard_status *ss = shard_sums(x, x->shards.idx[at + i], err);
        if (!ss)
            return FERRY_ENOMEM;
        ss->bytes += bytes;
        ss->slices++;
    }
    if (!x->have_last || strcmp(x->last, row->tenant)) {
        snprintf(x->last, sizeof x->last, "%s", row->tenant);
        x->have_last = true;
        tenant_sum key = {.name = x->last};
        tenant_sum *t = x->n_t ? bsearch(&key, x->t, x->n_t, sizeof *x->t, tenant_name_cmp)
                               : NULL;
        x->tenant = t ? (long)(t - x->t) : -1;
    }
    if (x->tenant >= 0)
        x->t[x->tenant].bytes += bytes;
    return FERRY_OK;
}

/* The partitions hot and cold, and the hot ones older than hot_days (the tiering backlog),
 * from the catalog's partition counts (per tier and day: no partition record read on SQLite). */
static int add_partitions(ferry_catalog *cat, status_pass *x, ferry_err *err)
{
    ferry_partition_count *pc = NULL;
    size_t n = 0;
    int rc = ferry_catalog_partition_counts(cat, &pc, &n, err);
    for (size_t i = 0; !rc && i < n; i++) {
        if (pc[i].tier == FERRY_TIER_COLD) {
            x->out->partitions_cold += pc[i].n;
        } else {
            x->out->partitions_hot += pc[i].n;
            if (pc[i].day && pc[i].day < x->oldest_hot)
                x->out->tier_backlog += pc[i].n;
        }
    }
    free(pc);
    return rc;
}

/* The largest tenants (x->t sorted largest first) into out->top, each with the shards serving
 * its slices in the order of its routes. */
static int fill_top(ferry_catalog *cat, status_pass *x, size_t top_n, ferry_err *err)
{
    ferry_cluster_status *out = x->out;
    size_t n = x->n_t < top_n ? x->n_t : top_n;
    out->top = calloc(n + 1, sizeof *out->top);
    if (!out->top)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        ferry_tenant_status *ts = &out->top[i];
        snprintf(ts->name, sizeof ts->name, "%s", x->t[i].name);
        ts->splits = x->t[i].splits;
        ts->bytes = x->t[i].bytes;
        const char *prefix[1] = {ts->name};
        ferry_record_list routes = {0};
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, prefix, 1, &routes, err);
        for (size_t r = 0; !rc && r < routes.n; r++) {
            const ferry_shard_set *rs = &routes.items[r].u.route.shards;
            for (size_t k = 0; k < ferry_shard_set_count(rs); k++)
                ferry_list_add(ts->shards, sizeof ts->shards, ferry_shard_set_at(rs, k));
        }
        ferry_record_list_free(&routes);
        out->n_top++;
    }
    return rc;
}

int ferry_cluster_status_read(ferry_catalog *cat, size_t top_n, ferry_cluster_status *out,
                              ferry_err *err)
{
    ferry_record settings;
    ferry_record_list shards = {0};
    status_pass x = {.out = out, .tenant = -1};
    const char **names = NULL;
    memset(out, 0, sizeof *out);
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    int rc = ferry_catalog_get(cat, &settings, err);
    if (rc == FERRY_ENOTFOUND)
        ferry_err_prefix(err, "the catalog holds no cluster yet (run 'ferry init'): ");
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (rc)
        goto out;
    out->settings = settings.u.settings;
    snprintf(out->backend, sizeof out->backend, "%s", ferry_catalog_backend(cat));
    out->shards = calloc(shards.n + 1, sizeof *out->shards);
    names = calloc(shards.n + 1, sizeof *names);
    if (!out->shards || !names) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    out->n_shards = shards.n;
    for (size_t s = 0; s < shards.n; s++) {
        out->shards[s].shard = shards.items[s].u.shard;
        names[s] = out->shards[s].shard.name;
    }
    x.oldest_hot = day_before(out->settings.hot_days);
    /* every tenant, then every slice (one read on ZooKeeper) */
    if ((rc = mv_shards_init(&x.shards, names, shards.n, err)) ||
        (rc = ferry_catalog_scan_tenants_slices(cat, add_tenant, add_slice, &x, err)))
        goto out;
    if (!x.sealed)
        seal_tenants(&x);
    out->tenants = x.n_t;
    if ((rc = add_partitions(cat, &x, err)) ||
        (rc = ferry_catalog_list_unfinished_moves(cat, &out->moves, err)) ||
        (rc = ferry_catalog_routing_version(cat, &out->routing_version, err)) ||
        (rc = ferry_tallies_read(cat, &out->tallies, err)))
        goto out;
    for (size_t s = 0; s < shards.n; s++)
        out->shards[s].fill = out->shards[s].shard.capacity
                                  ? (double)out->shards[s].bytes /
                                        (double)out->shards[s].shard.capacity
                                  : -1;
    for (size_t i = 0; i < out->moves.n; i++) {
        unsigned st = (unsigned)out->moves.items[i].u.move.state;
        if (st < FERRY_MOVE_STATES)
            out->moves_by_state[st]++;
    }
    if ((rc = ferry_pause_get(cat, &out->pause, err)) ||
        (rc = ferry_ap_log_list(cat, &out->autopilot, &out->n_autopilot, err)) ||
        (rc = ferry_repair_need_list(cat, &out->repair_needed, &out->n_repair_needed, err)))
        goto out;
    if (x.n_t > 1)
        qsort(x.t, x.n_t, sizeof *x.t, tenant_bytes_cmp);
    rc = fill_top(cat, &x, top_n, err);
out:
    for (size_t i = 0; i < x.n_t; i++)
        free(x.t[i].name);
    free(x.t);
    mv_shards_free(&x.shards);
    free(names);
    ferry_record_free(&settings);
    ferry_record_list_free(&shards);
    if (rc)
        ferry_cluster_status_free(out);
    return rc;
}

void ferry_cluster_status_free(ferry_cluster_status *s)
{
    free(s->shards);
    free(s->unknown);
    free(s->top);
    free(s->autopilot);
    free(s->repair_needed);
    ferry_record_list_free(&s->moves);
    memset(s, 0, sizeof *s);
}

/* ---- the routes of one shard ---- */

typedef struct serving_count {
    mv_shards shards;
    long shard; /* its index */
    size_t n;
} serving_count;

static int count_serving(const ferry_slice_row *row, void *arg, ferry_err *err)
{
    serving_count *x = arg;
    if (!row->shards)
        return FERRY_OK;
    uint32_t at;
    uint8_t n;
    if (mv_shards_put(&x->shards, row->shards, &at, &n, err))
        return ferry_err_prefix(err, "tenant %s split %u: route: ", row->tenant, row->split);
    for (size_t i = 0; i < n; i++)
        x->n += x->shards.idx[at + i] == x->shard;
    return FERRY_OK;
}

int ferry_shard_routes_count(ferry_catalog *cat, const char *shard, size_t *n, ferry_err *err)
{
    serving_count x = {.shard = -1};
    *n = 0;
    /* a table of this one shard: every other name a route holds is appended as one it does not
     * know, which is all this count needs of it */
    int rc = mv_shards_init(&x.shards, &shard, 1, err);
    if (!rc) {
        x.shard = mv_shards_find(&x.shards, shard);
        assert(x.shard == 0);
        rc = ferry_catalog_scan_slices(cat, count_serving, &x, err);
    }
    if (!rc)
        *n = x.n;
    mv_shards_free(&x.shards);
    return rc;
}

/* The "autopilot" object of ferry_cluster_status_json. */
static json_t *autopilot_json(const ferry_cluster_status *cs, const ferry_ap_window *w)
{
    json_t *o = json_object();
    json_t *p = cs->pause.paused ? json_pack("{s:b, s:s, s:s, s:I}", "paused", 1, "reason",
                                             cs->pause.reason, "by", cs->pause.by, "since",
                                             (json_int_t)cs->pause.since)
                                 : json_pack("{s:b}", "paused", 0);
    json_object_set_new(o, "pause", p);
    if (w->set) {
        char win[32];
        time_t now = time(NULL);
        ferry_ap_window_fmt(w, win, sizeof win);
        json_object_set_new(o, "window", json_pack("{s:s, s:b, s:I}", "utc", win, "open",
                                                   ferry_ap_window_open(w, now), "next_open",
                                                   (json_int_t)ferry_ap_window_next(w, now)));
    }
    json_t *a = json_array();
    for (size_t i = 0; i < cs->n_autopilot; i++) {
        const ferry_ap_run *r = &cs->autopilot[i];
        json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:s}", "action",
                                           r->action, "started", (json_int_t)r->started,
                                           "finished", (json_int_t)r->finished, "next",
                                           (json_int_t)r->next, "result", r->result, "reason",
                                           r->reason, "summary", r->summary, "owner",
                                           r->owner));
    }
    json_object_set_new(o, "runs", a);
    return o;
}

json_t *ferry_cluster_status_json(const ferry_cluster_status *cs, const ferry_ap_window *w)
{
    const ferry_settings *st = &cs->settings;
    json_t *root = json_pack("{s:s, s:s, s:s, s:i, s:f, s:I, s:I, s:I}", "cluster", st->name,
                             "catalog", cs->backend, "hash", st->hash, "rf", (int)st->rf,
                             "fill_target", st->fill, "routing_version",
                             (json_int_t)cs->routing_version, "tenants", (json_int_t)cs->tenants,
                             "slices", (json_int_t)cs->slices);
    json_t *a = json_array();
    for (size_t s = 0; s < cs->n_shards; s++) {
        const ferry_shard_status *ss = &cs->shards[s];
        json_t *o = json_pack("{s:s, s:s, s:f, s:I, s:I, s:I}", "name", ss->shard.name, "state",
                              ferry_shard_state_name(ss->shard.state), "weight", ss->shard.weight,
                              "capacity", (json_int_t)ss->shard.capacity, "bytes",
                              (json_int_t)ss->bytes, "slices", (json_int_t)ss->slices);
        json_object_set_new(o, "fill", ss->fill >= 0 ? json_real(ss->fill) : json_null());
        if (ss->shard.placed_weight > 0) /* re-weighted, not yet rebalanced */
            json_object_set_new(o, "placed_weight", json_real(ss->shard.placed_weight));
        json_array_append_new(a, o);
    }
    json_object_set_new(root, "shards", a);
    if (cs->n_unknown) { /* routes naming shards without a record: shown, not lost */
        a = json_array();
        for (size_t s = 0; s < cs->n_unknown; s++)
            json_array_append_new(a, json_pack("{s:s, s:I, s:I}", "name",
                                               cs->unknown[s].shard.name, "bytes",
                                               (json_int_t)cs->unknown[s].bytes, "slices",
                                               (json_int_t)cs->unknown[s].slices));
        json_object_set_new(root, "unknown_shards", a);
    }
    a = json_array();
    for (size_t i = 0; i < cs->moves.n; i++) {
        const ferry_move *m = &cs->moves.items[i].u.move;
        char ftext[FERRY_SHARDS_TEXT_MAX], ttext[FERRY_SHARDS_TEXT_MAX];
        json_array_append_new(
            a, json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:s}", "id", m->id, "tenant",
                         m->tenant, "split", (int)m->split, "from",
                         ferry_shard_set_str(&m->from, ftext), "to",
                         ferry_shard_set_str(&m->to, ttext), "state",
                         ferry_move_state_name(m->state), "step", (int)m->step, "steps",
                         (int)m->steps, "owner", m->owner));
    }
    json_object_set_new(root, "moves_in_flight", a);
    json_object_set_new(root, "tier_backlog", json_integer((json_int_t)cs->tier_backlog));
    json_object_set_new(root, "autopilot", autopilot_json(cs, w));
    a = json_array();
    for (size_t i = 0; i < cs->n_repair_needed; i++) {
        const ferry_repair_need *n = &cs->repair_needed[i];
        char mtext[FERRY_SHARDS_TEXT_MAX], htext[FERRY_SHARDS_TEXT_MAX];
        json_array_append_new(a, json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I}", "tenant",
                                           n->tenant, "split", (json_int_t)n->split, "missed",
                                           ferry_shard_set_str(&n->missed, mtext), "held",
                                           ferry_shard_set_str(&n->held, htext), "writes",
                                           (json_int_t)n->writes, "first",
                                           (json_int_t)n->first, "last", (json_int_t)n->last));
    }
    json_object_set_new(root, "repair_needed", a);
    return root;
}

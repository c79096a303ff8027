/* The cluster at a glance (include/ferry/cluster_status.h): one pass over shards, tenants,
 * slices, routes, partitions and the index of unfinished moves. */
#include "ferry/cluster_status.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int slice_cmp(const void *a, const void *b)
{
    const ferry_record *x = a, *y = b;
    const char *tx = x->kind == FERRY_REC_SLICE ? x->u.slice.tenant : x->u.route.tenant;
    const char *ty = y->kind == FERRY_REC_SLICE ? y->u.slice.tenant : y->u.route.tenant;
    uint32_t sx = x->kind == FERRY_REC_SLICE ? x->u.slice.split : x->u.route.split;
    uint32_t sy = y->kind == FERRY_REC_SLICE ? y->u.slice.split : y->u.route.split;
    int d = strcmp(tx, ty);
    return d ? d : (sx > sy) - (sx < sy);
}

/* Whether name is one of the comma-separated list's items. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        const char *s = p;
        while (len && *s == ' ')
            s++, len--;
        while (len && s[len - 1] == ' ')
            len--;
        if (len == n && !memcmp(s, name, n))
            return true;
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    return false;
}

static int tenant_name_cmp(const void *a, const void *b)
{
    return strcmp(((const ferry_tenant_status *)a)->name, ((const ferry_tenant_status *)b)->name);
}

static int tenant_bytes_cmp(const void *a, const void *b)
{
    const ferry_tenant_status *x = a, *y = b;
    return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/* YYYYMMDD of the day `days` before today (UTC). */
static uint32_t day_before(uint32_t days)
{
    time_t t = time(NULL) - (time_t)days * 86400;
    struct tm tm;
    gmtime_r(&t, &tm);
    return (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
}

static void add_shard_name(char *list, size_t size, const char *names)
{
    char copy[FERRY_LIST_MAX];
    snprintf(copy, sizeof copy, "%s", names);
    char *save = NULL;
    for (char *n = strtok_r(copy, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        while (*n == ' ')
            n++;
        if (!*n || in_list(list, n))
            continue;
        size_t l = strlen(list);
        snprintf(list + l, size - l, "%s%s", l ? "," : "", n);
    }
}

int ferry_cluster_status_read(ferry_catalog *cat, size_t top_n, ferry_cluster_status *out,
                              ferry_err *err)
{
    ferry_record settings;
    ferry_record_list shards = {0}, tenants = {0}, slices = {0}, routes = {0}, parts = {0};
    ferry_tenant_status *ts = NULL;
    memset(out, 0, sizeof *out);
    ferry_record_init(&settings, FERRY_REC_SETTINGS);
    int rc = ferry_catalog_get(cat, &settings, err);
    if (rc == FERRY_ENOTFOUND)
        ferry_err_prefix(err, "the catalog holds no cluster yet (run 'ferry init'): ");
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_TENANT, NULL, 0, &tenants, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_SLICE, NULL, 0, &slices, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_PARTITION, NULL, 0, &parts, err);
    if (!rc)
        rc = ferry_catalog_list_unfinished_moves(cat, &out->moves, err);
    if (!rc)
        rc = ferry_catalog_routing_version(cat, &out->routing_version, err);
    if (!rc)
        rc = ferry_tallies_read(cat, &out->tallies, err);
    if (rc)
        goto out;
    out->settings = settings.u.settings;
    snprintf(out->backend, sizeof out->backend, "%s", ferry_catalog_backend(cat));
    out->tenants = tenants.n;
    out->slices = slices.n;
    out->shards = calloc(shards.n + 1, sizeof *out->shards);
    ts = calloc(tenants.n + 1, sizeof *ts);
    if (!out->shards || !ts) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    out->n_shards = shards.n;
    for (size_t s = 0; s < shards.n; s++)
        out->shards[s].shard = shards.items[s].u.shard;
    for (size_t t = 0; t < tenants.n; t++) {
        snprintf(ts[t].name, sizeof ts[t].name, "%s", tenants.items[t].u.tenant.name);
        ts[t].splits = tenants.items[t].u.tenant.splits;
    }
    if (tenants.n > 1)
        qsort(ts, tenants.n, sizeof *ts, tenant_name_cmp);
    /* every slice's bytes go to each shard that routes it, and to its tenant */
    if (slices.n > 1)
        qsort(slices.items, slices.n, sizeof *slices.items, slice_cmp);
    if (routes.n > 1)
        qsort(routes.items, routes.n, sizeof *routes.items, slice_cmp);
    size_t t = 0;
    for (size_t i = 0, j = 0; i < routes.n; i++) {
        const ferry_route *r = &routes.items[i].u.route;
        while (j < slices.n && slice_cmp(&slices.items[j], &routes.items[i]) < 0)
            j++;
        uint64_t bytes = j < slices.n && !slice_cmp(&slices.items[j], &routes.items[i])
                             ? slices.items[j].u.slice.bytes
                             : 0;
        for (size_t s = 0; s < shards.n; s++)
            if (in_list(r->shards, shards.items[s].u.shard.name)) {
                out->shards[s].bytes += bytes;
                out->shards[s].slices++;
            }
        /* tenants are listed by name, as routes are sorted */
        while (t < tenants.n && strcmp(ts[t].name, r->tenant) < 0)
            t++;
        if (t < tenants.n && !strcmp(ts[t].name, r->tenant)) {
            ts[t].bytes += bytes;
            add_shard_name(ts[t].shards, sizeof ts[t].shards, r->shards);
        }
    }
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
    uint32_t oldest_hot = day_before(out->settings.hot_days);
    for (size_t i = 0; i < parts.n; i++) {
        const ferry_partition *p = &parts.items[i].u.partition;
        if (p->tier == FERRY_TIER_COLD) {
            out->partitions_cold++;
        } else {
            out->partitions_hot++;
            if (p->day && p->day < oldest_hot)
                out->tier_backlog++;
        }
    }
    if ((rc = ferry_pause_get(cat, &out->pause, err)) ||
        (rc = ferry_ap_log_list(cat, &out->autopilot, &out->n_autopilot, err)) ||
        (rc = ferry_repair_need_list(cat, &out->repair_needed, &out->n_repair_needed, err)))
        goto out;
    if (tenants.n > 1)
        qsort(ts, tenants.n, sizeof *ts, tenant_bytes_cmp);
    out->n_top = tenants.n < top_n ? tenants.n : top_n;
    out->top = ts;
    ts = NULL;
out:
    free(ts);
    ferry_record_free(&settings);
    ferry_record_list_free(&shards);
    ferry_record_list_free(&tenants);
    ferry_record_list_free(&slices);
    ferry_record_list_free(&routes);
    ferry_record_list_free(&parts);
    if (rc)
        ferry_cluster_status_free(out);
    return rc;
}

void ferry_cluster_status_free(ferry_cluster_status *s)
{
    free(s->shards);
    free(s->top);
    free(s->autopilot);
    free(s->repair_needed);
    ferry_record_list_free(&s->moves);
    memset(s, 0, sizeof *s);
}

json_t *ferry_cluster_status_autopilot_json(const ferry_cluster_status *cs, const ferry_ap_window *w)
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

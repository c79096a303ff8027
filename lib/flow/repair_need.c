/* The records of slices written with replicas missing (include/ferry/repair_need.h): one job
 * record per slice, merged by compare-and-set when several routers record at once. */
#include "ferry/repair_need.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/strutil.h"

static void need_key(ferry_record *r, const char *tenant, uint32_t split)
{
    ferry_record_init(r, FERRY_REC_JOB);
    ferry_catalog_repair_need_id(tenant, split, r->u.job.id, sizeof r->u.job.id);
}

/* Appends name to the list out (of size sz) unless it is there (or empty, or does not fit: the
 * lists hold shard names, at most FERRY_LIST_MAX bytes of them like a route). */
static void list_add(char *out, size_t sz, const char *name)
{
    if (*name)
        ferry_list_add(out, sz, name);
}

/* Calls add(name) for each name of csv. */
static void list_each(const char *csv, void (*add)(char *, size_t, const char *), char *out,
                      size_t sz)
{
    char copy[FERRY_LIST_MAX], *save = NULL;
    snprintf(copy, sizeof copy, "%s", csv);
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save))
        add(out, sz, s);
}

static int decode(const ferry_record *r, ferry_repair_need *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *d = json_loads(r->u.job.data, 0, NULL);
    const char *t = json_string_value(json_object_get(d, "tenant"));
    if (!d || !t) {
        json_decref(d);
        return ferry_err_set(err, FERRY_EINVAL, "catalog job %s: not a repair-need record",
                             r->u.job.id);
    }
    snprintf(out->tenant, sizeof out->tenant, "%s", t);
    out->split = (uint32_t)json_integer_value(json_object_get(d, "split"));
    const char *s;
    if ((s = json_string_value(json_object_get(d, "missed"))))
        snprintf(out->missed, sizeof out->missed, "%s", s);
    if ((s = json_string_value(json_object_get(d, "held"))))
        snprintf(out->held, sizeof out->held, "%s", s);
    out->writes = (uint64_t)json_integer_value(json_object_get(d, "writes"));
    out->first = r->u.job.created;
    out->last = r->u.job.updated;
    out->version = r->version;
    json_decref(d);
    return FERRY_OK;
}

static int encode(const ferry_repair_need *n, ferry_record *r, ferry_err *err)
{
    need_key(r, n->tenant, n->split);
    snprintf(r->u.job.kind, sizeof r->u.job.kind, FERRY_REPAIR_NEED_KIND);
    snprintf(r->u.job.state, sizeof r->u.job.state, "DONE");
    snprintf(r->u.job.detail, sizeof r->u.job.detail, "missed by %.200s", n->missed);
    r->u.job.created = n->first;
    r->u.job.updated = n->last;
    r->version = n->version;
    json_t *d = json_pack("{s:s, s:I, s:s, s:s, s:I}", "tenant", n->tenant, "split",
                          (json_int_t)n->split, "missed", n->missed, "held", n->held, "writes",
                          (json_int_t)n->writes);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (!text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t len = strlen(text);
    if (len >= sizeof r->u.job.data) {
        free(text);
        return ferry_err_set(err, FERRY_EINVAL, "the repair-need record of %s/%u is too long "
                             "(%zu bytes: too many shard names)", n->tenant, n->split, len);
    }
    memcpy(r->u.job.data, text, len + 1);
    free(text);
    return FERRY_OK;
}

int ferry_repair_need_get(ferry_catalog *cat, const char *tenant, uint32_t split,
                          ferry_repair_need *out, bool *found, ferry_err *err)
{
    ferry_record r;
    need_key(&r, tenant, split);
    *found = false;
    memset(out, 0, sizeof *out);
    int rc = ferry_catalog_get(cat, &r, err);
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        return FERRY_OK;
    }
    if (!rc && !(rc = decode(&r, out, err)))
        *found = true;
    ferry_record_free(&r);
    return rc;
}

/* Keeps in out (size sz) only the names also in keep and not in drop. */
static void list_intersect(char *out, size_t sz, const char *keep, const char *drop)
{
    char result[FERRY_LIST_MAX] = "", copy[FERRY_LIST_MAX], *save = NULL;
    snprintf(copy, sizeof copy, "%s", out);
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save))
        if (ferry_list_has(keep, s) && !ferry_list_has(drop, s))
            list_add(result, sizeof result, s);
    snprintf(out, sz, "%s", result);
}

int ferry_repair_need_mark(ferry_catalog *cat, const char *tenant, uint32_t split,
                           const char *missed, const char *held, ferry_err *err)
{
    int64_t now = (int64_t)time(NULL);
    /* a few rounds: each lost race means another router recorded a write of the same slice */
    for (int round = 0; round < 20; round++) {
        ferry_repair_need n;
        bool found = false;
        int rc = ferry_repair_need_get(cat, tenant, split, &n, &found, err);
        if (rc)
            return rc;
        char was_missed[FERRY_LIST_MAX], was_held[FERRY_LIST_MAX];
        snprintf(was_missed, sizeof was_missed, "%s", n.missed);
        snprintf(was_held, sizeof was_held, "%s", n.held);
        if (!found) {
            memset(&n, 0, sizeof n);
            snprintf(n.tenant, sizeof n.tenant, "%s", tenant);
            n.split = split;
            n.first = now;
            list_each(held, list_add, n.held, sizeof n.held);
            list_intersect(n.held, sizeof n.held, n.held, missed);
        } else {
            list_intersect(n.held, sizeof n.held, held, missed);
        }
        list_each(missed, list_add, n.missed, sizeof n.missed);
        n.writes++;
        n.last = now;
        ferry_record r;
        if ((rc = encode(&n, &r, err)))
            return rc;
        /* the shard lists are what routers read (they keep reads off the missed replicas): a
         * write that changes neither, only the counters, leaves the routing version alone, so
         * the writes of an outage do not make every router reload and reopen its streams */
        bool same = found && !strcmp(was_missed, n.missed) && !strcmp(was_held, n.held);
        rc = !found ? ferry_catalog_create(cat, &r, err)
             : same ? ferry_catalog_update_quiet(cat, &r, err)
                    : ferry_catalog_update(cat, &r, err);
        if (rc != FERRY_ECONFLICT && rc != FERRY_ENOTFOUND)
            return rc;
        ferry_err_clear(err);
    }
    return ferry_err_set(err, FERRY_ECONFLICT, "the repair-need record of %s/%u kept changing "
                         "(20 tries)", tenant, split);
}

/* list with `to` in from's place (clone: beside it) when from is in it; `to` never twice */
static bool list_hand_over(char *list, size_t sz, const char *from, const char *to, bool clone)
{
    if (!ferry_list_has(list, from))
        return false;
    char result[FERRY_LIST_MAX] = "", copy[FERRY_LIST_MAX], *save = NULL;
    snprintf(copy, sizeof copy, "%s", list);
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        if (!strcmp(s, to))
            continue;
        if (strcmp(s, from) || clone)
            list_add(result, sizeof result, s);
        if (!strcmp(s, from))
            list_add(result, sizeof result, to);
    }
    snprintf(list, sz, "%s", result);
    return true;
}

int ferry_repair_need_hand_over(ferry_catalog *cat, const char *tenant, uint32_t split,
                                const char *from, const char *to, bool clone,
                                ferry_record *out, bool *changed, ferry_err *err)
{
    ferry_repair_need n;
    bool found = false;
    *changed = false;
    int rc = ferry_repair_need_get(cat, tenant, split, &n, &found, err);
    if (rc || !found)
        return rc;
    bool in_missed = list_hand_over(n.missed, sizeof n.missed, from, to, clone);
    bool in_held = list_hand_over(n.held, sizeof n.held, from, to, clone);
    if (!in_missed && !in_held)
        return FERRY_OK;
    if ((rc = encode(&n, out, err)))
        return rc;
    *changed = true;
    return FERRY_OK;
}

typedef struct list_ctx {
    ferry_repair_need *items;
    size_t n, cap;
} list_ctx;

static int list_one(const ferry_record *r, void *arg, ferry_err *err)
{
    list_ctx *x = arg;
    if (strcmp(r->u.job.kind, FERRY_REPAIR_NEED_KIND))
        return FERRY_OK;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        ferry_repair_need *p = realloc(x->items, cap * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        x->items = p;
        x->cap = cap;
    }
    ferry_err e = {0};
    if (decode(r, &x->items[x->n], &e) == FERRY_OK)
        x->n++;
    return FERRY_OK;
}

int ferry_repair_need_list(ferry_catalog *cat, ferry_repair_need **out, size_t *n,
                           ferry_err *err)
{
    list_ctx x = {0};
    int rc = ferry_catalog_each(cat, FERRY_REC_JOB, NULL, 0, list_one, &x, err);
    if (rc) {
        free(x.items);
        return rc;
    }
    *out = x.items;
    *n = x.n;
    return FERRY_OK;
}

int ferry_repair_need_clear(ferry_catalog *cat, const ferry_repair_need *need, ferry_err *err)
{
    ferry_record r;
    need_key(&r, need->tenant, need->split);
    r.version = need->version;
    int rc = ferry_catalog_delete(cat, &r, err);
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    return rc;
}

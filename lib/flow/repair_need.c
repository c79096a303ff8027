/* The records of slices written with replicas missing (include/ferry/repair_need.h): one job
 * record per slice, merged by compare-and-set when several routers record at once. */
#include "ferry/repair_need.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static void need_key(ferry_record *r, const char *tenant, uint32_t split)
{
    ferry_record_init(r, FERRY_REC_JOB);
    ferry_catalog_repair_need_id(tenant, split, r->u.job.id, sizeof r->u.job.id);
}

/* The shard list k of a record's data (absent or not a string: empty), read as the catalog
 * reads a route's (ferry/shard_set.h). */
static int get_list(const json_t *d, const char *k, const char *id, ferry_shard_set *out,
                    ferry_err *err)
{
    const json_t *v = json_object_get(d, k);
    ferry_shard_set_clear(out);
    if (!json_is_string(v))
        return FERRY_OK;
    int rc = ferry_shard_set_parse_stored(out, json_string_value(v), json_string_length(v), err);
    if (rc)
        ferry_err_prefix(err, "catalog job %s: '%s': ", id, k);
    return rc;
}

static int decode(const ferry_record *r, ferry_repair_need *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *d = json_loads(ferry_job_data(&r->u.job), 0, NULL);
    const char *t = json_string_value(json_object_get(d, "tenant"));
    int rc = FERRY_OK;
    if (!d || !t) {
        rc = ferry_err_set(err, FERRY_EINVAL, "catalog job %s: not a repair-need record",
                           r->u.job.id);
        goto out;
    }
    snprintf(out->tenant, sizeof out->tenant, "%s", t);
    out->split = (uint32_t)json_integer_value(json_object_get(d, "split"));
    if ((rc = get_list(d, "missed", r->u.job.id, &out->missed, err)) ||
        (rc = get_list(d, "held", r->u.job.id, &out->held, err)))
        goto out;
    out->writes = (uint64_t)json_integer_value(json_object_get(d, "writes"));
    out->first = r->u.job.created;
    out->last = r->u.job.updated;
    out->version = r->version;
out:
    json_decref(d);
    return rc;
}

static int encode(const ferry_repair_need *n, ferry_record *r, ferry_err *err)
{
    char missed[FERRY_SHARDS_TEXT_MAX], held[FERRY_SHARDS_TEXT_MAX];
    ferry_shard_set_str(&n->missed, missed);
    ferry_shard_set_str(&n->held, held);
    need_key(r, n->tenant, n->split);
    snprintf(r->u.job.kind, sizeof r->u.job.kind, FERRY_REPAIR_NEED_KIND);
    snprintf(r->u.job.state, sizeof r->u.job.state, "DONE");
    snprintf(r->u.job.detail, sizeof r->u.job.detail, "missed by %.200s", missed);
    r->u.job.created = n->first;
    r->u.job.updated = n->last;
    r->version = n->version;
    json_t *d = json_pack("{s:s, s:I, s:s, s:s, s:I}", "tenant", n->tenant, "split",
                          (json_int_t)n->split, "missed", missed, "held", held, "writes",
                          (json_int_t)n->writes);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    int rc = text ? ferry_job_set_data(&r->u.job, text, err)
                  : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    free(text);
    return rc;
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

/* Keeps in list only the names also in keep and not in drop (in list's order). */
static void list_intersect(ferry_shard_set *list, const ferry_shard_set *keep,
                           const ferry_shard_set *drop)
{
    for (size_t i = ferry_shard_set_count(list); i-- > 0;) {
        const char *name = ferry_shard_set_at(list, i);
        if (!ferry_shard_set_has(keep, name) || ferry_shard_set_has(drop, name))
            ferry_shard_set_remove(list, name);
    }
}

int ferry_repair_need_mark(ferry_catalog *cat, const char *tenant, uint32_t split,
                           const ferry_shard_set *missed, const ferry_shard_set *held,
                           ferry_err *err)
{
    int64_t now = (int64_t)time(NULL);
    /* a few rounds: each lost race means another router recorded a write of the same slice */
    for (int round = 0; round < 20; round++) {
        ferry_repair_need n;
        bool found = false;
        int rc = ferry_repair_need_get(cat, tenant, split, &n, &found, err);
        if (rc)
            return rc;
        ferry_shard_set was_missed = n.missed, was_held = n.held;
        if (!found) {
            memset(&n, 0, sizeof n);
            snprintf(n.tenant, sizeof n.tenant, "%s", tenant);
            n.split = split;
            n.first = now;
            n.held = *held;
        }
        list_intersect(&n.held, held, missed);
        /* the union: a shard left out would serve reads it lacks rows of, so a union past
         * FERRY_SHARDS_MAX is an error (the write is then answered as failed) */
        for (size_t i = 0; !rc && i < ferry_shard_set_count(missed); i++)
            rc = ferry_shard_set_add(&n.missed, ferry_shard_set_at(missed, i), err);
        if (rc) {
            ferry_err_prefix(err, "the repair-need record of %s/%u: ", tenant, split);
            return rc;
        }
        n.writes++;
        n.last = now;
        ferry_record r;
        if ((rc = encode(&n, &r, err)))
            return rc;
        /* the shard lists are what routers read (they keep reads off the missed replicas): a
         * write that changes neither, only the counters, leaves the routing version alone, so
         * the writes of an outage do not make every router reload and reopen its streams */
        bool same = found && ferry_shard_set_equal(&was_missed, &n.missed) &&
                    ferry_shard_set_equal(&was_held, &n.held);
        rc = !found ? ferry_catalog_create(cat, &r, err)
             : same ? ferry_catalog_update_quiet(cat, &r, err)
                    : ferry_catalog_update(cat, &r, err);
        ferry_record_free(&r);
        if (rc != FERRY_ECONFLICT && rc != FERRY_ENOTFOUND)
            return rc;
        ferry_err_clear(err);
    }
    return ferry_err_set(err, FERRY_ECONFLICT, "the repair-need record of %s/%u kept changing "
                         "(20 tries)", tenant, split);
}

/* list with `to` in from's place (clone: beside it) when from is in it (*in); `to` never
 * twice. FERRY_EINVAL when a clone's list would pass FERRY_SHARDS_MAX. */
static int list_hand_over(ferry_shard_set *list, const char *from, const char *to, bool clone,
                          bool *in, ferry_err *err)
{
    if (!(*in = ferry_shard_set_has(list, from)))
        return FERRY_OK;
    ferry_shard_set result = {0};
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < ferry_shard_set_count(list); i++) {
        const char *s = ferry_shard_set_at(list, i);
        if (!strcmp(s, to))
            continue;
        if (strcmp(s, from) || clone)
            rc = ferry_shard_set_add(&result, s, err);
        if (!rc && !strcmp(s, from))
            rc = ferry_shard_set_add(&result, to, err);
    }
    if (!rc)
        *list = result;
    return rc;
}

int ferry_repair_need_hand_over(ferry_catalog *cat, const char *tenant, uint32_t split,
                                const char *from, const char *to, bool clone,
                                ferry_record *out, bool *changed, ferry_err *err)
{
    ferry_repair_need n;
    bool found = false, in_missed = false, in_held = false;
    *changed = false;
    int rc = ferry_repair_need_get(cat, tenant, split, &n, &found, err);
    if (rc || !found)
        return rc;
    if ((rc = list_hand_over(&n.missed, from, to, clone, &in_missed, err)) ||
        (rc = list_hand_over(&n.held, from, to, clone, &in_held, err))) {
        ferry_err_prefix(err, "the repair-need record of %s/%u: ", tenant, split);
        return rc;
    }
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

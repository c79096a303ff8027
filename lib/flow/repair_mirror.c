/* The intents of repairs to mirror part records (repair_mirror.h). */
#include "flow/repair_mirror.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define ID_PREFIX FERRY_REPAIR_MIRROR_KIND "."

static void mirror_key(ferry_record *r, const char *table, const char *pid, const char *target)
{
    ferry_record_init(r, FERRY_REC_JOB);
    char id[4 * FERRY_NAME_MAX];
    snprintf(id, sizeof id, ID_PREFIX "%s.%s.%s", target, table, pid);
    if (strlen(id) >= sizeof r->u.job.id) { /* long names: the hash keeps the id unique */
        XXH3_state_t *st = XXH3_createState();
        unsigned long long h = 0;
        if (st && XXH3_64bits_reset(st) == XXH_OK) {
            XXH3_64bits_update(st, target, strlen(target) + 1);
            XXH3_64bits_update(st, table, strlen(table) + 1);
            XXH3_64bits_update(st, pid, strlen(pid) + 1);
            h = XXH3_64bits_digest(st);
        }
        XXH3_freeState(st);
        snprintf(id, sizeof id, ID_PREFIX "h%016llx", h);
    }
    snprintf(r->u.job.id, sizeof r->u.job.id, "%s", id);
}

static void copy_str(char *dst, size_t sz, json_t *d, const char *key)
{
    const char *s = json_string_value(json_object_get(d, key));
    snprintf(dst, sz, "%s", s ? s : "");
}

static int list_one(const ferry_record *r, void *arg, ferry_err *err)
{
    repair_mirror_set *s = arg;
    if (strcmp(r->u.job.kind, FERRY_REPAIR_MIRROR_KIND))
        return FERRY_OK;
    json_t *d = json_loads(ferry_job_data(&r->u.job), 0, NULL);
    if (!d) /* not ours to judge: a later repair writes it again if it still matters */
        return FERRY_OK;
    repair_mirror *grown = realloc(s->items, (s->n + 1) * sizeof *grown);
    if (!grown) {
        json_decref(d);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    s->items = grown;
    repair_mirror *m = &s->items[s->n++];
    memset(m, 0, sizeof *m);
    copy_str(m->tenant, sizeof m->tenant, d, "tenant");
    m->split = (uint32_t)json_integer_value(json_object_get(d, "split"));
    copy_str(m->table, sizeof m->table, d, "table");
    copy_str(m->partition_id, sizeof m->partition_id, d, "partition_id");
    copy_str(m->target, sizeof m->target, d, "target");
    copy_str(m->source, sizeof m->source, d, "source");
    json_decref(d);
    return FERRY_OK;
}

int repair_mirror_list(ferry_catalog *cat, repair_mirror_set *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = ferry_catalog_each(cat, FERRY_REC_JOB, NULL, 0, list_one, out, err);
    if (rc)
        repair_mirror_set_free(out);
    return rc;
}

void repair_mirror_set_free(repair_mirror_set *s)
{
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

repair_mirror *repair_mirror_find(repair_mirror_set *s, const char *table, const char *pid,
                                  const char *target)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->items[i].table, table) && !strcmp(s->items[i].partition_id, pid) &&
            !strcmp(s->items[i].target, target))
            return &s->items[i];
    return NULL;
}

int repair_mirror_open(ferry_catalog *cat, const repair_mirror *m, ferry_err *err)
{
    ferry_record r;
    mirror_key(&r, m->table, m->partition_id, m->target);
    snprintf(r.u.job.kind, sizeof r.u.job.kind, FERRY_REPAIR_MIRROR_KIND);
    snprintf(r.u.job.state, sizeof r.u.job.state, "DONE");
    snprintf(r.u.job.detail, sizeof r.u.job.detail, "repairing from %.200s", m->source);
    r.u.job.created = r.u.job.updated = (int64_t)time(NULL);
    json_t *d = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s}", "tenant", m->tenant, "split",
                          (json_int_t)m->split, "table", m->table, "partition_id",
                          m->partition_id, "target", m->target, "source", m->source);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    int rc = text ? ferry_job_set_data(&r.u.job, text, err)
                  : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    free(text);
    if (!rc)
        rc = ferry_catalog_create(cat, &r, err);
    if (rc == FERRY_ECONFLICT) { /* an earlier cut run's: it says the same */
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    ferry_record_free(&r);
    return rc;
}

int repair_mirror_close(ferry_catalog *cat, const char *table, const char *pid,
                        const char *target, ferry_err *err)
{
    int rc = FERRY_OK;
    for (int attempt = 0; attempt < 4; attempt++) {
        ferry_record r;
        mirror_key(&r, table, pid, target);
        rc = ferry_catalog_get(cat, &r, err);
        if (!rc)
            rc = ferry_catalog_delete(cat, &r, err);
        ferry_record_free(&r);
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
            return FERRY_OK;
        }
        if (rc != FERRY_ECONFLICT)
            return rc;
        ferry_err_clear(err);
    }
    return ferry_err_set(err, FERRY_ECONFLICT, "the repair-mirror record of %s partition %s on "
                         "%s kept changing under 4 attempts to remove it", table, pid, target);
}

/* The cluster-wide pause record (include/ferry/pause.h). */
#include "ferry/pause.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void pause_key(ferry_record *r)
{
    ferry_record_init(r, FERRY_REC_JOB);
    snprintf(r->u.job.id, sizeof r->u.job.id, "%s", FERRY_PAUSE_JOB_ID);
}

int ferry_pause_get(ferry_catalog *cat, ferry_pause *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    ferry_record r;
    pause_key(&r);
    int rc = ferry_catalog_get(cat, &r, err);
    if (rc == FERRY_ENOTFOUND)
        return FERRY_OK;
    if (rc)
        return rc;
    out->paused = true;
    snprintf(out->by, sizeof out->by, "%s", r.u.job.owner);
    out->since = r.u.job.created;
    json_t *d = json_loads(ferry_job_data(&r.u.job), 0, NULL);
    const char *reason = json_string_value(json_object_get(d, "reason"));
    snprintf(out->reason, sizeof out->reason, "%s", reason ? reason : r.u.job.detail);
    json_decref(d);
    ferry_record_free(&r);
    return FERRY_OK;
}

int ferry_pause_set(ferry_catalog *cat, const char *reason, const char *by, ferry_err *err)
{
    if (reason && strlen(reason) >= sizeof ((ferry_pause *)0)->reason)
        return ferry_err_set(err, FERRY_EINVAL, "the pause reason is too long (%zu bytes, at "
                             "most %zu)", strlen(reason), sizeof ((ferry_pause *)0)->reason - 1);
    ferry_record r;
    pause_key(&r);
    snprintf(r.u.job.kind, sizeof r.u.job.kind, "pause");
    snprintf(r.u.job.state, sizeof r.u.job.state, "DONE");
    snprintf(r.u.job.owner, sizeof r.u.job.owner, "%s", by ? by : "");
    snprintf(r.u.job.detail, sizeof r.u.job.detail, "%s", reason ? reason : "");
    r.u.job.created = r.u.job.updated = (int64_t)time(NULL);
    json_t *d = json_pack("{s:s}", "reason", reason ? reason : "");
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    int rc = text ? ferry_job_set_data(&r.u.job, text, err)
                  : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    free(text);
    if (!rc)
        rc = ferry_catalog_create(cat, &r, err);
    if (rc == FERRY_ECONFLICT) { /* paused already: the newer reason and time win */
        ferry_record old;
        pause_key(&old);
        if (!(rc = ferry_catalog_get(cat, &old, err))) {
            r.version = old.version;
            rc = ferry_catalog_update(cat, &r, err);
        }
        ferry_record_free(&old);
    }
    ferry_record_free(&r);
    return rc;
}

int ferry_pause_clear(ferry_catalog *cat, bool *was, ferry_err *err)
{
    ferry_record r;
    pause_key(&r);
    if (was)
        *was = false;
    int rc = ferry_catalog_delete(cat, &r, err);
    if (rc == FERRY_ENOTFOUND)
        return FERRY_OK;
    if (!rc && was)
        *was = true;
    return rc;
}

int ferry_pause_check(ferry_catalog *cat, const char *what, ferry_err *err)
{
    ferry_pause p;
    int rc = ferry_pause_get(cat, &p, err);
    if (rc || !p.paused)
        return rc;
    char when[32] = "?";
    time_t t = (time_t)p.since;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return ferry_err_set(err, FERRY_ECONFLICT, "the cluster is paused (since %s by %s%s%s): %s "
                         "not started; run `ferry resume`, or give --force to run it anyway",
                         when, p.by[0] ? p.by : "?", p.reason[0] ? ": " : "", p.reason, what);
}

int ferry_pause_check_url(const char *catalog_url, const char *what, ferry_err *err)
{
    ferry_catalog *cat = NULL;
    int rc = ferry_catalog_open(catalog_url, &cat, err);
    if (!rc)
        rc = ferry_pause_check(cat, what, err);
    ferry_catalog_close(cat);
    return rc;
}

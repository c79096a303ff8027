/* The autopilot's action log: the last run of each action, one job record per action in the
 * catalog ("autopilot.<action>", kind "autopilot"), read back by `ferry status` and the
 * coordinator's status page (include/ferry/autopilot.h). */
#include "ferry/autopilot.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AP_KIND "autopilot"

int ferry_ap_log_put(ferry_catalog *cat, const ferry_ap_run *run, ferry_err *err)
{
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_JOB);
    snprintf(r.u.job.id, sizeof r.u.job.id, "autopilot.%s", run->action);
    snprintf(r.u.job.kind, sizeof r.u.job.kind, AP_KIND);
    /* DONE or FAILED: never "in flight" to the flows that read the journal (the sweep) */
    snprintf(r.u.job.state, sizeof r.u.job.state, "%s",
             strcmp(run->result, "failed") ? "DONE" : "FAILED");
    snprintf(r.u.job.owner, sizeof r.u.job.owner, "%s", run->owner);
    snprintf(r.u.job.detail, sizeof r.u.job.detail, "%s", run->reason);
    r.u.job.created = run->started;
    r.u.job.updated = run->finished;
    json_t *d = json_pack("{s:s, s:s, s:s, s:I}", "result", run->result, "reason", run->reason,
                          "summary", run->summary, "next", (json_int_t)run->next);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (!text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = ferry_job_set_data(&r.u.job, text, err);
    free(text);
    if (!rc)
        rc = ferry_catalog_update(cat, &r, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_catalog_create(cat, &r, err);
    ferry_record_free(&r);
    return rc;
}

/* Decodes one run record into r. */
static void decode(const ferry_job *j, ferry_ap_run *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->action, sizeof r->action, "%s", j->id + 10);
    snprintf(r->owner, sizeof r->owner, "%s", j->owner);
    r->started = j->created;
    r->finished = j->updated;
    json_t *d = json_loads(ferry_job_data(j), 0, NULL);
    const char *s;
    if ((s = json_string_value(json_object_get(d, "result"))))
        snprintf(r->result, sizeof r->result, "%s", s);
    if ((s = json_string_value(json_object_get(d, "reason"))))
        snprintf(r->reason, sizeof r->reason, "%s", s);
    if ((s = json_string_value(json_object_get(d, "summary"))))
        snprintf(r->summary, sizeof r->summary, "%s", s);
    r->next = (int64_t)json_integer_value(json_object_get(d, "next"));
    json_decref(d);
}

int ferry_ap_log_list(ferry_catalog *cat, ferry_ap_run **out, size_t *n, ferry_err *err)
{
    /* one read per action by key: the journal may hold many other jobs */
    ferry_ap_run *v = calloc(FERRY_AP_ACTIONS, sizeof *v);
    size_t k = 0;
    if (!v)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (int a = 0; a < FERRY_AP_ACTIONS; a++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_JOB);
        snprintf(r.u.job.id, sizeof r.u.job.id, "autopilot.%s",
                 ferry_ap_action_name((enum ferry_ap_action)a));
        int rc = ferry_catalog_get(cat, &r, err);
        if (rc == FERRY_ENOTFOUND)
            continue;
        if (rc) {
            free(v);
            return rc;
        }
        if (!strcmp(r.u.job.kind, AP_KIND))
            decode(&r.u.job, &v[k++]);
        ferry_record_free(&r);
    }
    *out = v;
    *n = k;
    return FERRY_OK;
}

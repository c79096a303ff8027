/* A tier job's list of frozen hot parts in its journal, when the list is long. A partition can
 * hold hundreds of hot parts when the tiering runs (a part per insert and partition, and merges
 * are stopped on the table while a wave runs: the chaos soak's list took 15,903 bytes). Every
 * step rewrites the job's record, so a job whose data would pass TIER_JOB_DATA_INLINE bytes (about
 * 60 part names) journals its list in companion job records `<job id>.hot.<k>` instead (kind
 * "tier-hot", state DONE, so nothing resumes or waits for them; data {"hot": [names]}), written
 * in the same catalog batch as the job's record only when the list changed, and the job's record
 * holds "hot_in": <number of companions> instead of "hot". A run that loads the job reads them
 * back. Bounded: TIER_HOT_RECORDS_MAX companions, about 4,000 parts. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define TIER_HOT_RECORDS_MAX 64
#define TIER_JOB_DATA_INLINE 2048 /* a record's data, and a companion's, up to this */
#define TIER_HOT_KIND "tier-hot"

static uint64_t hot_hash(json_t *hot)
{
    char *t = json_dumps(hot, JSON_COMPACT | JSON_ENCODE_ANY);
    uint64_t h = t ? XXH64(t, strlen(t), 0) : 0;
    free(t);
    return h ? h : 1; /* 0 means "nothing written" */
}

/* The hot list cut into arrays whose record data ({"hot":[...]}) fits a job record. */
static json_t *hot_chunks(json_t *hot)
{
    json_t *chunks = json_array(), *cur = NULL, *h;
    size_t used = 0, i;
    json_array_foreach(hot, i, h) {
        char *q = json_dumps(h, JSON_ENCODE_ANY); /* the name as the record will hold it */
        size_t len = (q ? strlen(q) : 6 * strlen(json_string_value(h) ?: "") + 2) + 1;
        free(q);
        if (!cur || used + len > TIER_JOB_DATA_INLINE - 32) {
            cur = json_array();
            json_array_append_new(chunks, cur);
            used = 0;
        }
        json_array_append(cur, h);
        used += len;
    }
    return chunks;
}

static int companion_id(const tier_job *job, size_t k, char *out, size_t outsz, ferry_err *err)
{
    int n = snprintf(out, outsz, "%s.hot.%zu", job->rec.u.job.id, k);
    if (n < 0 || (size_t)n >= outsz)
        return ferry_err_set(err, FERRY_EINVAL, "job %s: its id is too long for the records of "
                             "its part list", job->rec.u.job.id);
    return FERRY_OK;
}

int tier_hot_text(tier_job *job, char **text, ferry_err *err)
{
    ferry_job *j = &job->rec.u.job;
    *text = json_dumps(job->data, JSON_COMPACT | JSON_SORT_KEYS);
    if (!*text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (strlen(*text) < TIER_JOB_DATA_INLINE)
        return FERRY_OK;
    json_t *hot = json_object_get(job->data, "hot");
    if (json_array_size(hot) > 0) {
        uint64_t h = hot_hash(hot);
        json_t *chunks = hot_chunks(hot), *d = json_copy(job->data);
        size_t k = json_array_size(chunks);
        json_decref(chunks);
        if (!d)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        json_object_del(d, "hot");
        json_object_set_new(d, "hot_in", json_integer((json_int_t)k));
        free(*text);
        *text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(d);
        if (!*text)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (k > TIER_HOT_RECORDS_MAX)
            return ferry_err_set(err, FERRY_EINVAL, "job %s: %zu frozen hot parts in partition %s "
                                 "are more than a tier job journals (%d records of about %d "
                                 "names); merge it first: OPTIMIZE TABLE ... PARTITION ID '%s' "
                                 "FINAL", j->id, json_array_size(hot), job->pid,
                                 TIER_HOT_RECORDS_MAX, TIER_JOB_DATA_INLINE / 32, job->pid);
        if (h != job->hot_written && h != job->hot_staged)
            return ferry_err_set(err, FERRY_EINTERNAL, "job %s: its part list changed outside a "
                                 "journal step", j->id);
    }
    if (strlen(*text) < FERRY_JOB_DATA_MAX)
        return FERRY_OK;
    return ferry_err_set(err, FERRY_EINVAL, "job %s: its journal state needs %zu bytes, more "
                         "than the %d a job record holds", j->id, strlen(*text),
                         FERRY_JOB_DATA_MAX - 1);
}

int tier_hot_stage(tier_ctx *ctx, tier_job *job, ferry_batch *b, ferry_err *err)
{
    job->hot_staged = 0;
    json_t *hot = json_object_get(job->data, "hot");
    if (json_array_size(hot) == 0)
        return FERRY_OK;
    char *text = json_dumps(job->data, JSON_COMPACT | JSON_SORT_KEYS);
    bool fits = text && strlen(text) < TIER_JOB_DATA_INLINE;
    free(text);
    uint64_t h = hot_hash(hot);
    if (fits || h == job->hot_written)
        return FERRY_OK;
    json_t *chunks = hot_chunks(hot), *c;
    size_t k;
    int rc = FERRY_OK;
    json_array_foreach(chunks, k, c) {
        if (k >= TIER_HOT_RECORDS_MAX)
            break; /* tier_hot_text refuses the job */
        ferry_record r, old;
        ferry_record_init(&r, FERRY_REC_JOB);
        if ((rc = companion_id(job, k, r.u.job.id, sizeof r.u.job.id, err)))
            break;
        json_t *d = json_pack("{s:O}", "hot", c);
        char *t = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        rc = t ? ferry_job_set_data(&r.u.job, t, err)
               : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        free(t);
        if (rc)
            break;
        snprintf(r.u.job.kind, sizeof r.u.job.kind, TIER_HOT_KIND);
        snprintf(r.u.job.state, sizeof r.u.job.state, "DONE");
        r.u.job.created = r.u.job.updated = (int64_t)time(NULL);
        /* an earlier job of the same partition may have left companions: update those */
        ferry_record_init(&old, FERRY_REC_JOB);
        snprintf(old.u.job.id, sizeof old.u.job.id, "%s", r.u.job.id);
        ferry_err e = {0};
        bool exists = k < job->hot_records || ferry_catalog_get(ctx->cat, &old, &e) == FERRY_OK;
        ferry_record_free(&old);
        r.version = FERRY_VERSION_ANY;
        rc = exists ? ferry_batch_update(b, &r, err) : ferry_batch_create(b, &r, err);
        ferry_record_free(&r); /* the batch holds its document */
        if (rc)
            break;
    }
    if (!rc) {
        job->hot_staged = h;
        job->hot_staged_records = json_array_size(chunks);
    }
    json_decref(chunks);
    return rc;
}

void tier_hot_committed(tier_job *job, bool ok)
{
    if (ok && job->hot_staged) {
        job->hot_written = job->hot_staged;
        if (job->hot_staged_records > job->hot_records)
            job->hot_records = job->hot_staged_records;
    }
    job->hot_staged = 0;
}

int tier_hot_load(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    json_t *in = json_object_get(job->data, "hot_in");
    if (!json_is_integer(in))
        return FERRY_OK;
    json_int_t k = json_integer_value(in);
    if (k < 1 || k > TIER_HOT_RECORDS_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "job %s: hot_in %lld is out of range",
                             job->rec.u.job.id, (long long)k);
    json_t *hot = json_array();
    int rc = hot ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (json_int_t i = 0; !rc && i < k; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_JOB);
        if (!(rc = companion_id(job, (size_t)i, r.u.job.id, sizeof r.u.job.id, err)))
            rc = ferry_catalog_get(ctx->cat, &r, err);
        json_t *d = rc ? NULL : json_loads(ferry_job_data(&r.u.job), 0, NULL);
        json_t *part = json_object_get(d, "hot");
        if (!rc && !json_is_array(part))
            rc = ferry_err_set(err, FERRY_EINVAL, "job %s: record %s holds no part list",
                               job->rec.u.job.id, r.u.job.id);
        if (!rc)
            json_array_extend(hot, part);
        json_decref(d);
        ferry_record_free(&r);
    }
    if (rc) {
        ferry_err_prefix(err, "job %s: reading its part list: ", job->rec.u.job.id);
        json_decref(hot);
        return rc;
    }
    json_object_set_new(job->data, "hot", hot);
    json_object_del(job->data, "hot_in");
    job->hot_records = (size_t)k;
    job->hot_written = hot_hash(hot);
    return FERRY_OK;
}

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

/* A hash of the hot list, to know whether the companions hold it (this process only). */
static uint64_t hot_hash(const tier_state *st)
{
    uint64_t h = 0;
    for (size_t i = 0; i < st->n_hot; i++) /* each name with its NUL: a separator */
        h = XXH64(st->hot[i], strlen(st->hot[i]) + 1, h);
    return h ? h : 1; /* 0 means "nothing written" */
}

/* The hot list cut into runs whose record data ({"hot":[...]}) is at most TIER_JOB_DATA_INLINE: *starts
 * (malloc'ed, the caller frees) holds the first name of each run, *n how many runs. */
static int hot_chunks(const tier_state *st, size_t **starts, size_t *n, ferry_err *err)
{
    size_t used = 0;
    *n = 0;
    if (!(*starts = calloc(st->n_hot + 1, sizeof **starts)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < st->n_hot; i++) {
        json_t *s = json_string(st->hot[i]);
        char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL; /* the name as the record holds it */
        size_t len = (q ? strlen(q) : 6 * strlen(st->hot[i]) + 2) + 1;
        free(q);
        json_decref(s);
        if (*n == 0 || used + len > TIER_JOB_DATA_INLINE - 32) {
            (*starts)[(*n)++] = i;
            used = 0;
        }
        used += len;
    }
    return FERRY_OK;
}

/* The data of companion k: {"hot":[names of run k]}; *text malloc'ed. */
static int chunk_text(const tier_state *st, const size_t *starts, size_t n, size_t k,
                      char **text, ferry_err *err)
{
    size_t end = k + 1 < n ? starts[k + 1] : st->n_hot;
    json_t *a = json_array(), *d = a ? json_pack("{s:o}", "hot", a) : NULL;
    for (size_t i = starts[k]; d && i < end; i++)
        if (json_array_append_new(a, json_string(st->hot[i]))) {
            json_decref(d);
            d = NULL;
        }
    *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    return *text ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
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
    size_t *starts = NULL, k = 0;
    int rc = tier_state_encode(&job->st, text, err);
    if (rc || strlen(*text) < TIER_JOB_DATA_INLINE)
        return rc;
    if (job->st.n_hot > 0) {
        uint64_t h = hot_hash(&job->st);
        if ((rc = hot_chunks(&job->st, &starts, &k, err)))
            goto out;
        /* the record says where the list is instead: the same state, hot_in for hot */
        tier_state rec = job->st; /* a shallow copy, only encoded */
        rec.hot = NULL;
        rec.n_hot = 0;
        rec.has_hot = false;
        rec.hot_in = (uint32_t)k;
        rec.has_hot_in = true;
        free(*text);
        if ((rc = tier_state_encode(&rec, text, err)))
            goto out;
        if (k > TIER_HOT_RECORDS_MAX) {
            rc = ferry_err_set(err, FERRY_EINVAL, "job %s: %zu frozen hot parts in partition %s "
                               "are more than a tier job journals (%d records of about %d "
                               "names); merge it first: OPTIMIZE TABLE ... PARTITION ID '%s' "
                               "FINAL", j->id, job->st.n_hot, job->pid, TIER_HOT_RECORDS_MAX,
                               TIER_JOB_DATA_INLINE / 32, job->pid);
            goto out;
        }
        if (h != job->hot_written && h != job->hot_staged) {
            rc = ferry_err_set(err, FERRY_EINTERNAL, "job %s: its part list changed outside a "
                               "journal step", j->id);
            goto out;
        }
    }
    if (strlen(*text) >= FERRY_JOB_DATA_MAX)
        rc = ferry_err_set(err, FERRY_EINVAL, "job %s: its journal state needs %zu bytes, more "
                           "than the %d a job record holds", j->id, strlen(*text),
                           FERRY_JOB_DATA_MAX - 1);
out:
    free(starts);
    return rc;
}

int tier_hot_stage(tier_ctx *ctx, tier_job *job, ferry_batch *b, ferry_err *err)
{
    job->hot_staged = 0;
    if (job->st.n_hot == 0)
        return FERRY_OK;
    char *text = NULL;
    ferry_err ignored = {0};
    bool fits = !tier_state_encode(&job->st, &text, &ignored) &&
                strlen(text) < TIER_JOB_DATA_INLINE;
    free(text);
    uint64_t h = hot_hash(&job->st);
    if (fits || h == job->hot_written)
        return FERRY_OK;
    size_t *starts = NULL, nc = 0;
    int rc = hot_chunks(&job->st, &starts, &nc, err);
    for (size_t k = 0; !rc && k < nc; k++) {
        if (k >= TIER_HOT_RECORDS_MAX)
            break; /* tier_hot_text refuses the job */
        ferry_record r, old;
        ferry_record_init(&r, FERRY_REC_JOB);
        if ((rc = companion_id(job, k, r.u.job.id, sizeof r.u.job.id, err)) ||
            (rc = chunk_text(&job->st, starts, nc, k, &text, err)))
            break;
        rc = ferry_job_set_data(&r.u.job, text, err);
        free(text);
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
    }
    if (!rc) {
        job->hot_staged = h;
        job->hot_staged_records = nc;
    }
    free(starts);
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
    if (!job->st.has_hot_in)
        return FERRY_OK;
    uint32_t k = job->st.hot_in;
    if (k < 1 || k > TIER_HOT_RECORDS_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "job %s: hot_in %u is out of range",
                             job->rec.u.job.id, (unsigned)k);
    int rc = FERRY_OK;
    tier_state_hot_clear(&job->st);
    job->st.has_hot = true; /* what the companions hold, an empty list too */
    for (uint32_t i = 0; !rc && i < k; i++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_JOB);
        if (!(rc = companion_id(job, i, r.u.job.id, sizeof r.u.job.id, err)))
            rc = ferry_catalog_get(ctx->cat, &r, err);
        json_t *d = rc ? NULL : json_loads(ferry_job_data(&r.u.job), 0, NULL);
        json_t *part = json_object_get(d, "hot"), *h;
        size_t x;
        if (!rc && !json_is_array(part))
            rc = ferry_err_set(err, FERRY_EINVAL, "job %s: record %s holds no part list",
                               job->rec.u.job.id, r.u.job.id);
        json_array_foreach(part, x, h) {
            if (rc)
                break;
            if (!json_is_string(h))
                rc = ferry_err_set(err, FERRY_EINVAL, "job %s: record %s holds a part name "
                                   "that is not a string", job->rec.u.job.id, r.u.job.id);
            else
                rc = tier_state_hot_add(&job->st, json_string_value(h), err);
        }
        json_decref(d);
        ferry_record_free(&r);
    }
    if (rc) {
        ferry_err_prefix(err, "job %s: reading its part list: ", job->rec.u.job.id);
        return rc;
    }
    job->st.hot_in = 0;
    job->st.has_hot_in = false;
    job->hot_records = k;
    job->hot_written = hot_hash(&job->st);
    return FERRY_OK;
}

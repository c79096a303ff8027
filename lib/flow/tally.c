/* The cluster-wide tallies of moves, sweeps and doctor runs (include/ferry/tally.h): one job
 * record each, read, changed and written back by compare-and-set. */
#include "ferry/tally.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TALLY_MOVES "tally.moves"
#define TALLY_SWEEP "tally.sweep"
#define TALLY_DOCTOR "tally.doctor"
#define TALLY_TIER "tally.tier"
/* concurrent writers are a handful of movers: a CAS lost this many times in a row means
 * something else is wrong */
#define TALLY_TRIES 32

/* Changes the tally's data in place; returns FERRY_OK or an error. */
typedef int (*tally_change_fn)(json_t *data, const void *arg, ferry_err *err);

static void tally_key(ferry_record *r, const char *id)
{
    ferry_record_init(r, FERRY_REC_JOB);
    snprintf(r->u.job.id, sizeof r->u.job.id, "%s", id);
}

/* The move tally's recent list is the only part that grows: it is cut, oldest first, until
 * the record fits. Other tallies are bounded by construction. */
static char *dump_fitting(json_t *data)
{
    for (;;) {
        char *s = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
        if (!s || strlen(s) < FERRY_JOB_DATA_MAX)
            return s;
        free(s);
        json_t *recent = json_object_get(data, "recent");
        size_t n = json_array_size(recent);
        if (!n)
            return NULL;
        json_array_remove(recent, n - 1);
    }
}

static int tally_change(ferry_catalog *cat, const char *id, tally_change_fn change,
                        const void *arg, ferry_err *err)
{
    int rc = FERRY_ECONFLICT;
    for (int attempt = 0; attempt < TALLY_TRIES && rc == FERRY_ECONFLICT; attempt++) {
        ferry_record r;
        tally_key(&r, id);
        rc = ferry_catalog_get(cat, &r, err);
        bool exists = rc == FERRY_OK;
        if (rc && rc != FERRY_ENOTFOUND)
            return rc;
        json_t *data = exists ? json_loads(ferry_job_data(&r.u.job), 0, NULL) : NULL;
        if (!json_is_object(data)) { /* absent, or written by someone else: start again */
            json_decref(data);
            data = json_object();
        }
        if (!data) {
            ferry_record_free(&r);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        rc = change(data, arg, err);
        char *text = rc ? NULL : dump_fitting(data);
        json_decref(data);
        if (!rc && !text)
            rc = ferry_err_set(err, FERRY_ENOMEM, "tally %s: cannot encode it", id);
        if (!rc) {
            snprintf(r.u.job.kind, sizeof r.u.job.kind, FERRY_TALLY_KIND);
            snprintf(r.u.job.state, sizeof r.u.job.state, "DONE");
            r.u.job.updated = (int64_t)time(NULL);
            if (!exists)
                r.u.job.created = r.u.job.updated;
            /* create conflicts when another process created it meanwhile; update when it
             * changed it: either way, read again and redo the change */
            rc = ferry_job_set_data(&r.u.job, text, err);
            if (!rc)
                rc = exists ? ferry_catalog_update(cat, &r, err)
                            : ferry_catalog_create(cat, &r, err);
            if (rc == FERRY_ENOTFOUND)
                rc = FERRY_ECONFLICT; /* deleted meanwhile */
        }
        free(text);
        ferry_record_free(&r);
    }
    if (rc == FERRY_ECONFLICT)
        ferry_err_set(err, FERRY_ECONFLICT, "tally %s: %d concurrent updates in a row", id,
                      TALLY_TRIES);
    return rc;
}

static uint64_t get_u64(const json_t *o, const char *k)
{
    json_int_t v = json_integer_value(json_object_get(o, k));
    return v > 0 ? (uint64_t)v : 0;
}

static int add_u64(json_t *o, const char *k, uint64_t add)
{
    return json_object_set_new(o, k, json_integer((json_int_t)(get_u64(o, k) + add)));
}

/* ---- moves ---------------------------------------------------------------------------------- */

static int change_moves(json_t *d, const void *arg, ferry_err *err)
{
    const ferry_move_result *r = arg;
    bool ended = r->state == FERRY_MOVE_DONE || r->state == FERRY_MOVE_FAILED;
    int bad = add_u64(d, "hot_copied", r->hot_copied) | add_u64(d, "cold_copied", r->cold_copied);
    bad |= json_object_set_new(d, "seconds",
                               json_real(json_number_value(json_object_get(d, "seconds")) +
                                         r->seconds));
    if (ended) {
        bad |= add_u64(d, r->state == FERRY_MOVE_DONE ? "done" : "failed", 1);
        json_t *recent = json_object_get(d, "recent");
        if (!json_is_array(recent)) {
            recent = json_array();
            bad |= json_object_set_new(d, "recent", recent);
        }
        json_t *m = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:I, s:I, s:f, s:I}", "id", r->id,
                              "tenant", r->tenant, "split", (int)r->split, "from", r->from, "to",
                              r->to, "state", ferry_move_state_name(r->state), "hot_copied",
                              (json_int_t)r->hot_copied, "cold_copied",
                              (json_int_t)r->cold_copied, "seconds", r->seconds, "finished",
                              (json_int_t)time(NULL));
        bad |= !m || json_array_insert_new(recent, 0, m);
        while (json_array_size(recent) > FERRY_TALLY_RECENT_MOVES)
            json_array_remove(recent, json_array_size(recent) - 1);
    }
    return bad ? ferry_err_set(err, FERRY_ENOMEM, "out of memory") : FERRY_OK;
}

int ferry_tally_move_add(ferry_catalog *cat, const ferry_move_result *r, ferry_err *err)
{
    return tally_change(cat, TALLY_MOVES, change_moves, r, err);
}

/* ---- sweeps --------------------------------------------------------------------------------- */

struct sweep_arg {
    const ferry_sweep_result *r;
    int64_t now;
};

static int change_sweep(json_t *d, const void *arg, ferry_err *err)
{
    const struct sweep_arg *a = arg;
    const ferry_sweep_result *r = a->r;
    int64_t last_complete = r->complete ? a->now : (int64_t)get_u64(d, "last_complete");
    json_t *n = json_pack("{s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "at",
                          (json_int_t)a->now, "last_complete", (json_int_t)last_complete,
                          "complete", r->complete, "orphans", (json_int_t)r->report.n_orphans,
                          "orphan_bytes", (json_int_t)r->report.orphan_bytes, "dangling",
                          (json_int_t)r->report.n_dangling, "drift", (json_int_t)r->report.n_drift,
                          "deleted", (json_int_t)r->deleted, "deleted_bytes",
                          (json_int_t)r->deleted_bytes, "delete_failed",
                          (json_int_t)r->delete_failed);
    if (!n || json_object_update(d, n)) {
        json_decref(n);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    json_decref(n);
    return FERRY_OK;
}

int ferry_tally_sweep_put(ferry_catalog *cat, const ferry_sweep_result *r, int64_t now,
                          ferry_err *err)
{
    struct sweep_arg a = {r, now};
    return tally_change(cat, TALLY_SWEEP, change_sweep, &a, err);
}

/* ---- doctor --------------------------------------------------------------------------------- */

/* A check's findings, worst first: one failed finding fails the check. */
static int status_rank(const char *s)
{
    static const char *const order[] = {"fail", "warn", "unsupported", "skipped", "pass"};
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (!strcmp(s, order[i]))
            return i;
    return 0; /* a status this code does not know is taken for the worst */
}

struct doctor_arg {
    const json_t *report;
    int64_t now;
};

static int change_doctor(json_t *d, const void *arg, ferry_err *err)
{
    const struct doctor_arg *a = arg;
    json_t *checks = json_object();
    size_t i;
    json_t *c;
    if (!checks)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    json_array_foreach(json_object_get(a->report, "checks"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "check"));
        const char *st = json_string_value(json_object_get(c, "status"));
        if (!name || !st || strlen(name) >= sizeof ((ferry_tally_check *)0)->check ||
            strlen(st) >= sizeof ((ferry_tally_check *)0)->status)
            continue;
        const char *had = json_string_value(json_object_get(checks, name));
        if (!had && json_object_size(checks) >= FERRY_TALLY_CHECKS)
            continue;
        if (!had || status_rank(st) < status_rank(had))
            json_object_set_new(checks, name, json_string(st));
    }
    json_object_clear(d);
    int bad = json_object_set_new(d, "at", json_integer((json_int_t)a->now)) |
              json_object_set_new(d, "checks", checks);
    return bad ? ferry_err_set(err, FERRY_ENOMEM, "out of memory") : FERRY_OK;
}

int ferry_tally_doctor_put(ferry_catalog *cat, const json_t *report, int64_t now,
                           ferry_err *err)
{
    struct doctor_arg a = {report, now};
    return tally_change(cat, TALLY_DOCTOR, change_doctor, &a, err);
}

/* ---- tiering -------------------------------------------------------------------------------- */

struct tier_arg {
    const ferry_tally_tier *run;
    int64_t now;
};

static int change_tier(json_t *d, const void *arg, ferry_err *err)
{
    const struct tier_arg *a = arg;
    int bad = add_u64(d, "runs", 1) |
              add_u64(d, "partitions_tiered", a->run->partitions_tiered) |
              add_u64(d, "jobs_failed", a->run->jobs_failed) |
              add_u64(d, "bytes_uploaded", a->run->bytes_uploaded) |
              add_u64(d, "pointer_bytes", a->run->pointer_bytes) |
              json_object_set_new(d, "last_run", json_integer((json_int_t)a->now));
    return bad ? ferry_err_set(err, FERRY_ENOMEM, "out of memory") : FERRY_OK;
}

int ferry_tally_tier_add(ferry_catalog *cat, const ferry_tally_tier *run, int64_t now,
                         ferry_err *err)
{
    struct tier_arg a = {run, now};
    return tally_change(cat, TALLY_TIER, change_tier, &a, err);
}

/* ---- reading -------------------------------------------------------------------------------- */

/* The tally's data, or NULL when absent (FERRY_OK) or unreadable (an error). */
static int tally_load(ferry_catalog *cat, const char *id, json_t **out, ferry_err *err)
{
    ferry_record r;
    tally_key(&r, id);
    *out = NULL;
    int rc = ferry_catalog_get(cat, &r, err);
    if (rc == FERRY_ENOTFOUND)
        return FERRY_OK;
    if (rc)
        return rc;
    if (!strcmp(r.u.job.kind, FERRY_TALLY_KIND))
        *out = json_loads(ferry_job_data(&r.u.job), 0, NULL);
    ferry_record_free(&r);
    return FERRY_OK;
}

static void copy_str(char *dst, size_t sz, const json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, sz, "%s", s ? s : "");
}

int ferry_tallies_read(ferry_catalog *cat, ferry_tallies *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *m = NULL, *s = NULL, *d = NULL, *tr = NULL;
    int rc = tally_load(cat, TALLY_MOVES, &m, err);
    if (!rc)
        rc = tally_load(cat, TALLY_TIER, &tr, err);
    if (!rc)
        rc = tally_load(cat, TALLY_SWEEP, &s, err);
    if (!rc)
        rc = tally_load(cat, TALLY_DOCTOR, &d, err);
    if (rc)
        goto out;
    if (m) {
        ferry_tally_moves *t = &out->moves;
        t->done = get_u64(m, "done");
        t->failed = get_u64(m, "failed");
        t->hot_copied = get_u64(m, "hot_copied");
        t->cold_copied = get_u64(m, "cold_copied");
        t->seconds = json_number_value(json_object_get(m, "seconds"));
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(m, "recent"), i, e)
        {
            if (t->n_recent == FERRY_TALLY_RECENT_MOVES)
                break;
            ferry_tally_move *x = &t->recent[t->n_recent++];
            copy_str(x->id, sizeof x->id, json_object_get(e, "id"));
            copy_str(x->tenant, sizeof x->tenant, json_object_get(e, "tenant"));
            x->split = (uint32_t)get_u64(e, "split");
            copy_str(x->from, sizeof x->from, json_object_get(e, "from"));
            copy_str(x->to, sizeof x->to, json_object_get(e, "to"));
            copy_str(x->state, sizeof x->state, json_object_get(e, "state"));
            x->hot_copied = get_u64(e, "hot_copied");
            x->cold_copied = get_u64(e, "cold_copied");
            x->seconds = json_number_value(json_object_get(e, "seconds"));
            x->finished = (int64_t)get_u64(e, "finished");
        }
    }
    if (tr) {
        ferry_tally_tier *t = &out->tier;
        t->runs = get_u64(tr, "runs");
        t->partitions_tiered = get_u64(tr, "partitions_tiered");
        t->jobs_failed = get_u64(tr, "jobs_failed");
        t->bytes_uploaded = get_u64(tr, "bytes_uploaded");
        t->pointer_bytes = get_u64(tr, "pointer_bytes");
        t->last_run = (int64_t)get_u64(tr, "last_run");
    }
    if (s) {
        ferry_tally_sweep *t = &out->sweep;
        t->present = true;
        t->at = (int64_t)get_u64(s, "at");
        t->last_complete = (int64_t)get_u64(s, "last_complete");
        t->complete = json_is_true(json_object_get(s, "complete"));
        t->orphans = get_u64(s, "orphans");
        t->orphan_bytes = get_u64(s, "orphan_bytes");
        t->dangling = get_u64(s, "dangling");
        t->drift = get_u64(s, "drift");
        t->deleted = get_u64(s, "deleted");
        t->deleted_bytes = get_u64(s, "deleted_bytes");
        t->delete_failed = get_u64(s, "delete_failed");
    }
    if (d) {
        ferry_tally_doctor *t = &out->doctor;
        t->present = true;
        t->at = (int64_t)get_u64(d, "at");
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(d, "checks"), k, v)
        {
            if (t->n_checks == FERRY_TALLY_CHECKS)
                break;
            ferry_tally_check *c = &t->checks[t->n_checks++];
            snprintf(c->check, sizeof c->check, "%s", k);
            copy_str(c->status, sizeof c->status, v);
        }
    }
out:
    json_decref(m);
    json_decref(s);
    json_decref(d);
    json_decref(tr);
    return rc;
}

/* Tiering's agent requests for a wave of jobs (tier_int.h): FREEZE of many partitions in one
 * request, uploads and pointer parts of many parts per request with several requests in flight
 * at once (a pool of threads, each with its own agent client), removals of many folders per
 * request. An agent of API version 1 answers 400 to a many-part form; the server then gets one
 * request per part for the rest of the run (tier_server.one_at_a_time). A part that fails fails
 * only its job. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/log.h"
#include "ferry/pointer.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

int tier_agent(tier_server *srv, const char *op, json_t *req, json_t **resp, long *status,
               ferry_err *err)
{
    int rc = req ? mv_agent(&srv->conn, op, req, resp, status, err)
                 : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    json_decref(req);
    return rc;
}

/* Whether a failed many-part request was refused by an agent that does not know the form. */
static bool old_form(int rc, long status)
{
    return rc == FERRY_EINVAL && status == 400;
}

/* ---- freeze ------------------------------------------------------------------------------------ */

int tier_agent_freeze(tier_wave *w, tier_job **js, size_t n, json_t **answer, ferry_err *err)
{
    tier_server *srv = w->srv;
    json_t *parts = NULL;
    long status = 0;
    int rc;
    *answer = NULL;
    if (!(srv->one_at_a_time & TIER_ONE_FREEZE)) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < n; i++)
            if (!js[i]->rc)
                json_array_append_new(list, json_pack("{s:s, s:s}", "partition_id", js[i]->pid,
                                                      "name", tier_dstr(js[i], "freeze")));
        rc = tier_agent(srv, "freeze",
                        list ? json_pack("{s:s, s:s, s:o}", "database", w->db, "table", w->table,
                                         "partitions", list)
                             : NULL,
                        answer, &status, err);
        if (!rc || !old_form(rc, status))
            return rc;
        srv->one_at_a_time |= TIER_ONE_FREEZE;
        FLOG_INFO("msg=\"agent freezes one partition per request (API 1)\" server=%s",
                  srv->shard.name);
    }
    /* one request per partition: a partition gone meanwhile fails only its job */
    if (!(parts = json_array()))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        tier_job *j = js[i];
        json_t *resp = NULL;
        ferry_err e = {0};
        if (j->rc)
            continue;
        const char *name = tier_dstr(j, "freeze");
        rc = tier_agent(srv, "freeze",
                        json_pack("{s:s, s:s, s:s, s:s}", "database", w->db, "table", w->table,
                                  "partition_id", j->pid, "name", name),
                        &resp, &status, &e);
        if (rc == FERRY_ENOTFOUND)
            ferry_err_prefix(&e, "partition %s of %s.%s is gone: ", j->pid, w->db, w->table);
        if (rc && rc != FERRY_ENOTFOUND && rc != FERRY_EINVAL) {
            /* the agent or ClickHouse is unreachable: every job of the step fails alike */
            json_decref(resp);
            json_decref(parts);
            *err = e;
            return rc;
        }
        if (rc) {
            tier_job_fail(j, rc, &e);
        } else {
            size_t k;
            json_t *p;
            json_array_foreach(json_object_get(resp, "parts"), k, p) {
                json_object_set_new(p, "freeze", json_string(name));
                json_object_set_new(p, "partition_id", json_string(j->pid));
                json_array_append(parts, p);
            }
        }
        json_decref(resp);
    }
    *answer = json_pack("{s:o}", "parts", parts);
    return *answer ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* ---- a pool of requests ------------------------------------------------------------------------ */

typedef struct pool_req {
    json_t *req;  /* owned */
    json_t *resp; /* owned; NULL on failure */
    int rc;
    long status;
    ferry_err err;
} pool_req;

typedef struct pool {
    tier_server *srv;
    const char *op;
    pool_req *reqs;
    size_t n, next;
    pthread_mutex_t mu;
} pool;

static void pool_one(pool *p, ferry_agent_client *cl, pool_req *r)
{
    r->rc = ferry_agent_call(cl, p->op, r->req, &r->resp, &r->status, &r->err);
    if (r->rc) {
        ferry_err_prefix(&r->err, "agent of %s (%s): ", p->srv->shard.name, p->op);
        json_decref(r->resp);
        r->resp = NULL;
    }
}

/* Takes requests until none is left, on client cl (NULL: its own, made here). */
static void pool_loop(pool *p, ferry_agent_client *cl)
{
    ferry_agent_client *own = NULL;
    ferry_err cerr = {0};
    int crc = cl ? FERRY_OK
                 : ferry_agent_client_new(p->srv->conn.agent_url, p->srv->conn.token,
                                          tier_agent_timeout_ms(),
                                          &own, &cerr);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        pool_req *r = p->next < p->n ? &p->reqs[p->next++] : NULL;
        pthread_mutex_unlock(&p->mu);
        if (!r)
            break;
        if (crc) {
            r->rc = crc;
            r->err = cerr;
            continue;
        }
        pool_one(p, cl ? cl : own, r);
    }
    ferry_agent_client_free(own);
}

static void *pool_thread(void *arg)
{
    pool_loop(arg, NULL);
    return NULL;
}

/* Runs the n requests of reqs on the server's agent, up to TIER_AGENT_THREADS at once (the
 * calling thread on the server's own client, the others each on a client of its own: a client
 * is one connection and not thread-safe). Each request's outcome is in its pool_req. */
static void pool_run(tier_server *srv, const char *op, pool_req *reqs, size_t n)
{
    pool p = {.srv = srv, .op = op, .reqs = reqs, .n = n};
    pthread_t th[TIER_AGENT_THREADS];
    bool started[TIER_AGENT_THREADS] = {false};
    size_t nt = n < TIER_AGENT_THREADS ? n : TIER_AGENT_THREADS;
    ferry_agent_client_stats before, after;
    ferry_agent_client_stats_get(srv->conn.ag, &before);
    pthread_mutex_init(&p.mu, NULL);
    for (size_t i = 1; i < nt; i++)
        started[i] = pthread_create(&th[i], NULL, pool_thread, &p) == 0;
    pool_loop(&p, srv->conn.ag);
    for (size_t i = 1; i < nt; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.mu);
    /* the server's own client counts its requests (mv_agent_requests); the others here */
    ferry_agent_client_stats_get(srv->conn.ag, &after);
    srv->conn.n_agent += n - (after.requests - before.requests);
}

static void pool_free(pool_req *reqs, size_t n)
{
    for (size_t i = 0; reqs && i < n; i++) {
        json_decref(reqs[i].req);
        json_decref(reqs[i].resp);
    }
    free(reqs);
}

/* ---- parts of a wave, in chunks ------------------------------------------------------------------ */

/* One part of one job for a many-part request. */
typedef struct part_task {
    tier_job *job;
    const char *part; /* borrowed from the job's data */
    uint64_t bytes;   /* for balancing; 0 when unknown */
    size_t chunk;
} part_task;

static int task_by_bytes(const void *a, const void *b)
{
    const part_task *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* Spreads the tasks over chunks, one request each: at least TIER_AGENT_THREADS (when there are
 * that many tasks), at most TIER_CHUNK_PARTS tasks in a chunk, and about TIER_CHUNK_BYTES (more
 * chunks when the bytes need them); largest first, each into the lightest chunk that still has
 * room. Returns the number of chunks; 0 when out of memory. */
static size_t make_chunks(part_task *t, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += t[i].bytes;
    size_t nc = (n + TIER_CHUNK_PARTS - 1) / TIER_CHUNK_PARTS;
    size_t by_bytes = (size_t)((total + TIER_CHUNK_BYTES - 1) / TIER_CHUNK_BYTES);
    if (by_bytes > nc)
        nc = by_bytes;
    if (nc < TIER_AGENT_THREADS)
        nc = TIER_AGENT_THREADS;
    if (nc > n)
        nc = n;
    size_t room = (n + nc - 1) / nc; /* tasks per chunk: nc * room >= n */
    uint64_t *load = calloc(nc, sizeof *load);
    size_t *count = calloc(nc, sizeof *count);
    if (!load || !count) {
        free(load);
        free(count);
        return 0;
    }
    qsort(t, n, sizeof *t, task_by_bytes);
    for (size_t i = 0; i < n; i++) {
        size_t best = nc;
        for (size_t c = 0; c < nc; c++)
            if (count[c] < room && (best == nc || load[c] < load[best]))
                best = c;
        t[i].chunk = best;
        load[best] += t[i].bytes ? t[i].bytes : 1;
        count[best]++;
    }
    free(load);
    free(count);
    return nc;
}

long tier_agent_timeout_ms(void)
{
    const char *e = ferry_test_knob("FERRY_TEST_AGENT_TIMEOUT_MS");
    uint64_t ms = 0;
    if (e && *e && ferry_parse_u64(e, &ms) && ms > 0 && ms <= 600000)
        return (long)ms;
    return 600000;
}

/* Fails the task's job with the agent's per-part error answer e ({part, error, status}). */
static void fail_part(tier_wave *w, const char *op, part_task *t, json_t *e)
{
    ferry_err pe;
    long st = (long)json_integer_value(json_object_get(e, "status"));
    ferry_err_set(&pe, ferry_agent_code_for_status(st), "agent of %s (%s): HTTP %ld: %s",
                  w->srv->shard.name, op, st,
                  json_string_value(json_object_get(e, "error")) ?: "no error text");
    tier_job_fail(t->job, pe.code, &pe);
}

/* Runs one op for every task: in chunks of many parts ("parts": [build(task)...]) unless the
 * server's agent takes one part per request (then body(task) whole, one request each). Each
 * part's answer is handed to done(task, answer); a part that fails fails its job. A chunk that
 * fails as a whole fails the jobs of its parts. */
typedef json_t *(*task_json_fn)(tier_wave *w, part_task *t);
typedef void (*task_done_fn)(tier_ctx *ctx, part_task *t, json_t *answer);

static int run_tasks(tier_ctx *ctx, tier_wave *w, const char *op, const char *table,
                     unsigned one_bit, part_task *t, size_t n, task_json_fn part_fn,
                     task_json_fn single_fn, task_done_fn done, ferry_err *err)
{
    tier_server *srv = w->srv;
    pool_req *reqs = NULL;
    size_t nr = 0;
    int rc = FERRY_OK;
    if (n == 0)
        return FERRY_OK;
    if (!(srv->one_at_a_time & one_bit)) {
        size_t nc = make_chunks(t, n);
        if (!nc || !(reqs = calloc(nc, sizeof *reqs)))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t c = 0; c < nc; c++) {
            json_t *parts = json_array();
            for (size_t i = 0; parts && i < n; i++)
                if (t[i].chunk == c)
                    json_array_append_new(parts, part_fn(w, &t[i]));
            reqs[c].req = parts ? json_pack("{s:s, s:s, s:o}", "database", w->db, "table", table,
                                            "parts", parts)
                                : NULL;
            if (!reqs[c].req) {
                pool_free(reqs, nc);
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
        }
        nr = nc;
        pool_run(srv, op, reqs, nr);
        bool refused = false;
        for (size_t c = 0; c < nr; c++)
            refused = refused || old_form(reqs[c].rc, reqs[c].status);
        if (!refused) {
            for (size_t c = 0; c < nr; c++) {
                json_t *results = json_object_get(reqs[c].resp, "results");
                size_t k = 0;
                for (size_t i = 0; i < n; i++) {
                    if (t[i].chunk != c)
                        continue;
                    json_t *a = json_array_get(results, k++);
                    if (reqs[c].rc)
                        tier_job_fail(t[i].job, reqs[c].rc, &reqs[c].err);
                    else if (!json_is_object(a)) {
                        ferry_err e;
                        ferry_err_set(&e, FERRY_EREMOTE, "agent of %s (%s): no answer for part "
                                      "%s", srv->shard.name, op, t[i].part);
                        tier_job_fail(t[i].job, FERRY_EREMOTE, &e);
                    } else if (json_object_get(a, "error"))
                        fail_part(w, op, &t[i], a);
                    else
                        done(ctx, &t[i], a);
                }
            }
            pool_free(reqs, nr);
            return FERRY_OK;
        }
        pool_free(reqs, nr);
        srv->one_at_a_time |= one_bit;
        FLOG_INFO("msg=\"agent takes one part per request (API 1)\" server=%s op=%s",
                  srv->shard.name, op);
    }
    if (!(reqs = calloc(n, sizeof *reqs)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++)
        if (!(reqs[i].req = single_fn(w, &t[i])))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc) {
        pool_run(srv, op, reqs, n);
        for (size_t i = 0; i < n; i++) {
            if (reqs[i].rc)
                tier_job_fail(t[i].job, reqs[i].rc, &reqs[i].err);
            else
                done(ctx, &t[i], reqs[i].resp);
        }
    }
    pool_free(reqs, n);
    return rc;
}

/* The tasks: every hot part of every job without a failure (only those whose objects this
 * process does not know, unless all). *out: caller frees. */
static int hot_tasks(tier_job **js, size_t n, bool all, part_task **out, size_t *nt,
                     ferry_err *err)
{
    size_t cap = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        cap += json_array_size(json_object_get(js[i]->data, "hot"));
    part_task *t = calloc(cap + 1, sizeof *t);
    if (!t)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t h;
        json_t *p;
        if (js[i]->rc)
            continue;
        json_array_foreach(json_object_get(js[i]->data, "hot"), h, p) {
            const char *name = json_string_value(p);
            if (!name || (!all && json_object_get(js[i]->objects, name)))
                continue;
            json_t *b = json_object_get(js[i]->sizes, name);
            t[k++] = (part_task){.job = js[i], .part = name,
                                 .bytes = (uint64_t)json_integer_value(b)};
        }
    }
    *out = t;
    *nt = k;
    return FERRY_OK;
}

/* ---- upload ------------------------------------------------------------------------------------- */

static json_t *upload_part_json(tier_wave *w, part_task *t)
{
    (void)w;
    return json_pack("{s:s, s:s}", "freeze", tier_dstr(t->job, "freeze"), "part", t->part);
}

static json_t *upload_single_json(tier_wave *w, part_task *t)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "database", w->db, "table", w->table, "freeze",
                     tier_dstr(t->job, "freeze"), "part", t->part);
}

static void upload_done(tier_ctx *ctx, part_task *t, json_t *a)
{
    (void)ctx;
    t->job->bytes_uploaded += (uint64_t)json_integer_value(json_object_get(a, "bytes_uploaded"));
    t->job->files_uploaded += (uint64_t)json_integer_value(json_object_get(a, "uploaded"));
    t->job->check_ms += json_number_value(json_object_get(a, "check_ms"));
    json_object_set(t->job->objects, t->part, a);
}

int tier_agent_upload(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, bool force,
                      ferry_err *err)
{
    part_task *t = NULL;
    size_t nt = 0;
    int rc = hot_tasks(js, n, force, &t, &nt, err);
    if (!rc)
        rc = run_tasks(ctx, w, "upload", w->table, TIER_ONE_UPLOAD, t, nt, upload_part_json,
                       upload_single_json, upload_done, err);
    free(t);
    return rc;
}

/* ---- write-pointers ----------------------------------------------------------------------------- */

/* Size of the pointer file the agent writes for one object (format 5: the full key). */
static uint64_t pointer_size(const char *clickhouse_key, uint64_t size)
{
    ferry_pointer pt = FERRY_POINTER_INIT;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_err e = {0};
    pt.ref_count = 1;
    uint64_t n = 0;
    if (ferry_pointer_add_object(&pt, clickhouse_key, size, &e) == FERRY_OK &&
        ferry_pointer_serialize(&pt, 5, "", &b, &e) == FERRY_OK)
        n = b.len;
    ferry_pointer_free(&pt);
    ferry_buf_free(&b);
    return n;
}

/* The {file, key, size} list write-pointers takes, from the part's upload answer. */
static json_t *pointer_objects(part_task *t)
{
    json_t *list = json_array(), *o;
    size_t k;
    json_array_foreach(json_object_get(json_object_get(t->job->objects, t->part), "objects"), k,
                       o)
        json_array_append_new(list, json_pack("{s:O, s:O, s:O}", "file",
                                              json_object_get(o, "file"), "key",
                                              json_object_get(o, "key"), "size",
                                              json_object_get(o, "size")));
    return list;
}

static json_t *pointers_part_json(tier_wave *w, part_task *t)
{
    (void)w;
    return json_pack("{s:s, s:o}", "part", t->part, "objects", pointer_objects(t));
}

static json_t *pointers_single_json(tier_wave *w, part_task *t)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "database", w->db, "table", w->staging, "part",
                     t->part, "objects", pointer_objects(t));
}

static void pointers_done(tier_ctx *ctx, part_task *t, json_t *a)
{
    (void)ctx;
    (void)a;
    size_t k;
    json_t *o;
    json_array_foreach(json_object_get(json_object_get(t->job->objects, t->part), "objects"), k,
                       o) {
        t->job->pointer_bytes += pointer_size(
            json_string_value(json_object_get(o, "clickhouse_key")) ?: "",
            (uint64_t)json_integer_value(json_object_get(o, "size")));
        t->job->pointer_files++;
    }
}

int tier_agent_pointers(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    part_task *t = NULL;
    size_t nt = 0;
    int rc = hot_tasks(js, n, true, &t, &nt, err);
    for (size_t i = 0; !rc && i < nt; i++)
        if (!json_object_get(t[i].job->objects, t[i].part))
            rc = ferry_err_set(err, FERRY_EINTERNAL, "part %s has no upload answer",
                               t[i].part);
    if (!rc)
        rc = run_tasks(ctx, w, "write-pointers", w->staging, TIER_ONE_POINTERS, t, nt,
                       pointers_part_json, pointers_single_json, pointers_done, err);
    free(t);
    return rc;
}

/* ---- removals ------------------------------------------------------------------------------------ */

int tier_agent_remove_detached(tier_wave *w, const char *table, json_t *names, ferry_err *err)
{
    tier_server *srv = w->srv;
    long status = 0;
    int rc;
    if (json_array_size(names) == 0)
        return FERRY_OK;
    if (!(srv->one_at_a_time & TIER_ONE_DETACHED)) {
        rc = tier_agent(srv, "remove-detached",
                        json_pack("{s:s, s:s, s:O}", "database", w->db, "table", table, "parts",
                                  names),
                        NULL, &status, err);
        if (!rc || !old_form(rc, status))
            return rc;
        srv->one_at_a_time |= TIER_ONE_DETACHED;
    }
    size_t i;
    json_t *p;
    json_array_foreach(names, i, p) {
        rc = tier_agent(srv, "remove-detached",
                        json_pack("{s:s, s:s, s:O}", "database", w->db, "table", table, "part",
                                  p),
                        NULL, NULL, err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

int tier_agent_remove_freezes(tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    tier_server *srv = w->srv;
    json_t *names = json_array();
    long status = 0;
    int rc = names ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        unsigned attempts = (unsigned)tier_du64(js[i], "attempt");
        for (unsigned a = 1; a <= attempts; a++) {
            char name[64];
            ferry_tier_freeze_name(js[i]->rec.u.job.id, a, name, sizeof name);
            json_array_append_new(names, json_string(name));
        }
    }
    if (rc || json_array_size(names) == 0)
        goto out;
    if (!(srv->one_at_a_time & TIER_ONE_UNFREEZE)) {
        rc = tier_agent(srv, "remove-freeze", json_pack("{s:O}", "names", names), NULL, &status,
                        err);
        if (!rc || !old_form(rc, status))
            goto out;
        srv->one_at_a_time |= TIER_ONE_UNFREEZE;
        ferry_err_clear(err);
    }
    size_t i;
    json_t *nm;
    rc = FERRY_OK;
    json_array_foreach(names, i, nm) {
        if ((rc = tier_agent(srv, "remove-freeze", json_pack("{s:O}", "name", nm), NULL, NULL,
                             err)))
            break;
    }
out:
    json_decref(names);
    return rc;
}

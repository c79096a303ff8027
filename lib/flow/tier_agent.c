/* Tiering's agent requests for a wave of jobs (tier_int.h), on the typed agent client
 * (ferry/agent_ops.h): FREEZE of many partitions in one request, uploads and pointer parts of
 * many parts per request with several requests in flight at once (a pool of threads, each with a
 * client of its own), removals of many folders per request. An agent of API version 1 answers
 * 400 to a many-part form; each client then asks one part per request for the rest of its life
 * (the typed client remembers it). A part that fails fails only its job. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/agent_ops.h"
#include "ferry/log.h"
#include "ferry/pointer.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

static int nomem(ferry_err *err)
{
    return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* ---- freeze ------------------------------------------------------------------------------------ */

int tier_agent_freeze(tier_wave *w, tier_job **js, size_t n, ferry_agent_frozen *out,
                      ferry_err *err)
{
    ferry_agent_freeze_item *items = calloc(n + 1, sizeof *items);
    tier_job **asked = calloc(n + 1, sizeof *asked);
    size_t k = 0;
    int rc = items && asked ? FERRY_OK : nomem(err);
    memset(out, 0, sizeof *out);
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (!js[i]->rc) {
            asked[k] = js[i];
            items[k++] = (ferry_agent_freeze_item){js[i]->pid, js[i]->st.freeze};
        }
    if ((rc = ferry_agent_freeze_each(w->srv->conn.ag, w->db, w->table, items, k, out, err)))
        goto out;
    /* an agent of API 1 froze one partition per request: one gone meanwhile (404) or refused
     * fails only its job */
    for (size_t i = 0; i < out->n_items; i++) {
        const ferry_agent_item *it = &out->items[i];
        ferry_err e;
        if (!it->code)
            continue;
        ferry_err_set(&e, it->code, "%s", it->error ? it->error : "no error text");
        if (it->code == FERRY_ENOTFOUND)
            ferry_err_prefix(&e, "partition %s of %s.%s is gone: ", asked[i]->pid, w->db,
                             w->table);
        tier_job_fail(asked[i], it->code, &e);
    }
out:
    free(items);
    free(asked);
    return rc;
}

/* ---- a pool of requests ------------------------------------------------------------------------ */

/* One part of one job for a many-part request. */
typedef struct part_task {
    tier_job *job;
    const char *part; /* borrowed from the job's data */
    uint64_t bytes;   /* for balancing; 0 when unknown */
    size_t chunk;
} part_task;

/* The parts of one request and its outcome. */
typedef struct chunk {
    tier_wave *w;
    part_task **t; /* its tasks, in request order */
    size_t n;
    int rc;        /* the request as a whole failed (each part's own outcome is in up or wp) */
    ferry_err err;
    ferry_agent_upload_list up;  /* upload's answers */
    ferry_agent_written_list wp; /* write-pointers' answers */
} chunk;

/* An operation on many parts: send runs a chunk's request on the client cl and leaves its
 * outcome in the chunk; item is part k's outcome, done takes part k's answer when it is OK. */
typedef struct task_op {
    const char *op;
    void (*send)(chunk *ch, ferry_agent_client *cl);
    const ferry_agent_item *(*item)(const chunk *ch, size_t k);
    void (*done)(tier_ctx *ctx, chunk *ch, size_t k);
} task_op;

typedef struct pool {
    const task_op *op;
    chunk *chunks;
    size_t n, next;
    pthread_mutex_t mu;
} pool;

typedef struct pool_thread_arg {
    pool *p;
    ferry_agent_client *cl;
} pool_thread_arg;

/* Takes chunks until none is left, on client cl. */
static void pool_loop(pool *p, ferry_agent_client *cl)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        chunk *ch = p->next < p->n ? &p->chunks[p->next++] : NULL;
        pthread_mutex_unlock(&p->mu);
        if (!ch)
            break;
        p->op->send(ch, cl);
    }
}

static void *pool_thread(void *arg)
{
    pool_thread_arg *a = arg;
    pool_loop(a->p, a->cl);
    return NULL;
}

/* The pool's client number i (1 and up; 0 is the server's own), made on first use and kept for
 * the run, so what it learnt of an agent of API 1 stays learnt. NULL when it cannot be made:
 * the pool then runs on fewer threads. */
static ferry_agent_client *pool_client(tier_server *srv, size_t i)
{
    ferry_agent_client **c = &srv->pool_clients[i - 1];
    ferry_err e = {0};
    if (*c)
        return *c;
    if (ferry_agent_client_new(srv->conn.agent_url, srv->conn.token, tier_agent_timeout_ms(), c,
                               &e)) {
        FLOG_WARN("msg=\"agent client for parallel requests\" server=%s error=\"%s\"",
                  srv->shard.name, e.msg);
        *c = NULL;
        return NULL;
    }
    ferry_agent_client_set_name(*c, srv->shard.name); /* its errors name the server, as ag's */
    return *c;
}

void tier_agent_close(tier_server *srv)
{
    for (size_t i = 0; i < TIER_AGENT_THREADS - 1; i++) {
        ferry_agent_client_free(srv->pool_clients[i]);
        srv->pool_clients[i] = NULL;
    }
}

/* Runs the n chunks' requests on the server's agent, up to TIER_AGENT_THREADS at once (the
 * calling thread on the server's own client, the others each on a client of its own: a client
 * is one connection and not thread-safe). Each chunk's outcome is in the chunk. */
static void pool_run(tier_server *srv, const task_op *op, chunk *chunks, size_t n)
{
    pool p = {.op = op, .chunks = chunks, .n = n};
    pthread_t th[TIER_AGENT_THREADS];
    pool_thread_arg args[TIER_AGENT_THREADS];
    bool started[TIER_AGENT_THREADS] = {false};
    ferry_agent_client_stats before[TIER_AGENT_THREADS], after;
    size_t nt = n < TIER_AGENT_THREADS ? n : TIER_AGENT_THREADS;
    pthread_mutex_init(&p.mu, NULL);
    for (size_t i = 1; i < nt; i++) {
        args[i] = (pool_thread_arg){&p, pool_client(srv, i)};
        if (!args[i].cl)
            continue;
        ferry_agent_client_stats_get(args[i].cl, &before[i]);
        started[i] = pthread_create(&th[i], NULL, pool_thread, &args[i]) == 0;
    }
    pool_loop(&p, srv->conn.ag);
    for (size_t i = 1; i < nt; i++)
        if (started[i]) {
            pthread_join(th[i], NULL);
            /* the server's own client counts its requests (mv_agent_requests); the others here */
            ferry_agent_client_stats_get(args[i].cl, &after);
            srv->conn.n_agent += after.requests - before[i].requests;
        }
    pthread_mutex_destroy(&p.mu);
}

static void chunks_free(chunk *chs, size_t n)
{
    for (size_t i = 0; chs && i < n; i++) {
        free(chs[i].t);
        ferry_agent_upload_list_free(&chs[i].up);
        ferry_agent_written_list_free(&chs[i].wp);
    }
    free(chs);
}

/* ---- parts of a wave, in chunks ------------------------------------------------------------------ */

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

/* Fails the task's job with its part's outcome it. */
static void fail_item(tier_wave *w, const char *op, part_task *t, const ferry_agent_item *it)
{
    ferry_err pe;
    const char *text = it->error ? it->error : "no error text";
    if (it->alone) /* its own request's error (API 1), which names the server already */
        ferry_err_set(&pe, it->code, "%s", text);
    else if (it->status)
        ferry_err_set(&pe, it->code, "agent of %s (%s): HTTP %ld: %s", w->srv->shard.name, op,
                      it->status, text);
    else /* the answer had no result for the part */
        ferry_err_set(&pe, it->code, "agent of %s (%s): part %s: %s", w->srv->shard.name, op,
                      t->part, text);
    tier_job_fail(t->job, pe.code, &pe);
}

/* Runs op for every task, in chunks of many parts, several chunks at once (the typed client
 * falls back to one part per request for an agent of API 1). Each part's answer is handed to
 * op->done; a part that fails fails its job, and a chunk that fails as a whole fails the jobs of
 * its parts. Fails only when out of memory. */
static int run_tasks(tier_ctx *ctx, tier_wave *w, const task_op *op, part_task *t, size_t n,
                     ferry_err *err)
{
    chunk *chs = NULL;
    size_t nc = 0;
    int rc = FERRY_OK;
    if (n == 0)
        return FERRY_OK;
    if (!(nc = make_chunks(t, n)) || !(chs = calloc(nc, sizeof *chs))) {
        rc = nomem(err);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        chs[t[i].chunk].n++; /* counted first, then filled in task order */
    for (size_t c = 0; c < nc; c++) {
        chs[c].w = w;
        if (!(chs[c].t = calloc(chs[c].n + 1, sizeof *chs[c].t))) {
            rc = nomem(err);
            goto out;
        }
        chs[c].n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        chunk *ch = &chs[t[i].chunk];
        ch->t[ch->n++] = &t[i];
    }
    pool_run(w->srv, op, chs, nc);
    for (size_t c = 0; c < nc; c++)
        for (size_t k = 0; k < chs[c].n; k++) {
            part_task *pt = chs[c].t[k];
            const ferry_agent_item *it = chs[c].rc ? NULL : op->item(&chs[c], k);
            if (chs[c].rc)
                tier_job_fail(pt->job, chs[c].rc, &chs[c].err);
            else if (it->code)
                fail_item(w, op->op, pt, it);
            else
                op->done(ctx, &chs[c], k);
        }
out:
    chunks_free(chs, nc);
    return rc;
}

/* The tasks: every hot part of every job without a failure (only those whose objects this
 * process does not know, unless all). *out: caller frees. */
static int hot_tasks(tier_job **js, size_t n, bool all, part_task **out, size_t *nt,
                     ferry_err *err)
{
    size_t cap = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        cap += js[i]->st.n_hot;
    part_task *t = calloc(cap + 1, sizeof *t);
    if (!t)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (js[i]->rc)
            continue;
        for (size_t h = 0; h < js[i]->st.n_hot; h++) {
            const char *name = js[i]->st.hot[h];
            if (!all && json_object_get(js[i]->objects, name))
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

static void upload_send(chunk *ch, ferry_agent_client *cl)
{
    ferry_agent_part_ref *refs = calloc(ch->n + 1, sizeof *refs);
    if (!refs) {
        ch->rc = nomem(&ch->err);
        return;
    }
    for (size_t k = 0; k < ch->n; k++)
        refs[k] = (ferry_agent_part_ref){ch->t[k]->job->st.freeze, ch->t[k]->part};
    ch->rc = ferry_agent_upload(cl, ch->w->db, ch->w->table, refs, ch->n, &ch->up, &ch->err);
    free(refs);
}

static const ferry_agent_item *upload_item(const chunk *ch, size_t k)
{
    return &ch->up.parts[k].item;
}

static void upload_done(tier_ctx *ctx, chunk *ch, size_t k)
{
    const ferry_agent_uploaded *u = &ch->up.parts[k];
    tier_job *job = ch->t[k]->job;
    (void)ctx;
    job->bytes_uploaded += u->bytes_uploaded;
    job->files_uploaded += u->uploaded;
    job->check_ms += u->check_ms;
    /* the whole answer: the later steps read its objects (tier_cleanup.c) and "verified" */
    json_object_set(job->objects, ch->t[k]->part, (json_t *)u->answer);
}

static const task_op UPLOAD = {"upload", upload_send, upload_item, upload_done};

int tier_agent_upload(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, bool force,
                      ferry_err *err)
{
    part_task *t = NULL;
    size_t nt = 0;
    int rc = hot_tasks(js, n, force, &t, &nt, err);
    if (!rc)
        rc = run_tasks(ctx, w, &UPLOAD, t, nt, err);
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

static void pointers_send(chunk *ch, ferry_agent_client *cl)
{
    ferry_agent_pointer_part *pp = calloc(ch->n + 1, sizeof *pp);
    json_t **objs = calloc(ch->n + 1, sizeof *objs);
    if (!pp || !objs) {
        ch->rc = nomem(&ch->err);
        goto out;
    }
    for (size_t k = 0; k < ch->n; k++) {
        objs[k] = pointer_objects(ch->t[k]);
        pp[k] = (ferry_agent_pointer_part){ch->t[k]->part, objs[k]};
    }
    /* no disk: the staging table's object-storage disk */
    ch->rc = ferry_agent_write_pointers(cl, ch->w->db, ch->w->staging, NULL, pp, ch->n, &ch->wp,
                                        &ch->err);
out:
    for (size_t k = 0; objs && k < ch->n; k++)
        json_decref(objs[k]);
    free(objs);
    free(pp);
}

static const ferry_agent_item *pointers_item(const chunk *ch, size_t k)
{
    return &ch->wp.parts[k].item;
}

static void pointers_done(tier_ctx *ctx, chunk *ch, size_t k)
{
    tier_job *job = ch->t[k]->job;
    size_t i;
    json_t *o;
    (void)ctx;
    json_array_foreach(json_object_get(json_object_get(job->objects, ch->t[k]->part),
                                       "objects"), i, o) {
        job->pointer_bytes += pointer_size(
            json_string_value(json_object_get(o, "clickhouse_key")) ?: "",
            (uint64_t)json_integer_value(json_object_get(o, "size")));
        job->pointer_files++;
    }
}

static const task_op POINTERS = {"write-pointers", pointers_send, pointers_item, pointers_done};

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
        rc = run_tasks(ctx, w, &POINTERS, t, nt, err);
    free(t);
    return rc;
}

/* ---- removals ------------------------------------------------------------------------------------ */

int tier_agent_remove_detached(tier_wave *w, const char *table, json_t *names, ferry_err *err)
{
    size_t n = json_array_size(names);
    const char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return nomem(err);
    for (size_t i = 0; i < n; i++)
        v[i] = json_string_value(json_array_get(names, i));
    int rc = ferry_agent_remove_detached_n(w->srv->conn.ag, w->db, table, v, n, NULL, err);
    free(v);
    return rc;
}

int tier_agent_remove_freezes(tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    char (*names)[64] = NULL;
    const char **v = NULL;
    size_t nn = 0, cap = 0;
    int rc = FERRY_OK;
    for (size_t i = 0; i < n; i++)
        cap += js[i]->st.attempt;
    if (!cap)
        return FERRY_OK;
    if (!(names = calloc(cap, sizeof *names)) || !(v = calloc(cap, sizeof *v))) {
        rc = nomem(err);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned attempts = js[i]->st.attempt;
        for (unsigned a = 1; a <= attempts && nn < cap; a++) {
            ferry_tier_freeze_name(js[i]->rec.u.job.id, a, names[nn], sizeof names[nn]);
            v[nn] = names[nn];
            nn++;
        }
    }
    rc = ferry_agent_remove_freeze_n(w->srv->conn.ag, v, nn, err);
out:
    free(names);
    free(v);
    return rc;
}

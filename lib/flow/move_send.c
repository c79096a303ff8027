/* Sending a move's parts, several at a time (move_run.h): a pool of sender threads, one agent
 * request per part (source agent to target agent), the bandwidth limit, progress; the copy
 * round that freezes, sends and checks what arrived; and the fingerprints that compare the
 * slice on source and target. */
#include "ferry/move.h"
#include "ferry/fence.h"
#include "ferry/stop.h"

#include <jansson.h>
#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ferry/agent.h"
#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/rate.h"
#include "ferry/strutil.h"
#include "ferry/tally.h"
#include "ferry/testknob.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/move_run.h"
#include "flow/part_records.h"
#include "flow/replica_int.h"
#include "flow/staging_load.h"

#define MV_SEND_THREADS 4 /* parts (or batches of them) in flight agent to agent at once */
#define MV_SEND_BATCH_MIN 8
#define MV_SEND_BATCH_MAX 64

typedef struct send_job {
    const char *name;  /* the part (borrowed from the freeze answer, or the source's listing) */
    bool live;         /* a pointer part sent from the table's folder, not from the freeze */
    mvctx *x;          /* the move whose slice it is (its result counts it) */
    const mv_slice *src; /* that slice's listing on the source */
    size_t pid;        /* its partition's index in the slice listing */
    size_t slot;       /* the partition's index in the round's list of every slice's */
    uint64_t cost;     /* bytes that travel: a hot part's size; 0 for pointer files */
    size_t order;      /* its place in the listing: the tie-break of send_order */
    bool sent;
} send_job;

/* The costliest sends first (hot parts by size, then pointer parts in listing order): with
 * MV_SEND_THREADS in flight, a large hot part listed late ran on after the others had
 * finished (65-72 ms, the blog move's last send, in three runs; docs/benchmarks.md "Session 24"). */
static int send_order(const void *a, const void *b)
{
    const send_job *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

typedef struct send_pool {
    mvctx *x; /* the connections (a batch's first move) */
    const ferry_table_def *t;
    const char *staging, *freeze;
    bool first;
    send_job *jobs;
    size_t n, next;
    size_t per_batch; /* live pointer parts sent by one request (API 5 on both sides), else 1 */
    pthread_mutex_t mu; /* next, stop, the error, x's counters and result */
    bool stop;
    int rc;
    long status;
    ferry_err err;
} send_pool;

/* Accounts a part sent (under p->mu): bytes that travelled, its move's result and progress. */
static void sent_account(send_pool *p, send_job *j, bool pointer, uint64_t sent_bytes)
{
    mvctx *x = j->x;
    if (j->live)
        x->res->parts_sent_live++;
    if (pointer)
        x->res->cold_copied += sent_bytes;
    else
        x->res->hot_copied += sent_bytes;
    if (!p->first) {
        mv_parts sp_all = mv_slice_parts(j->src, j->src->pids[j->pid]);
        const mv_part *sp = mv_parts_find(&sp_all, j->name);
        if (sp && sp->cold)
            x->res->cold_bytes += sp->bytes, x->res->cold_parts++;
        else if (sp)
            x->res->hot_bytes += sp->bytes, x->res->hot_parts++;
    }
    x->bytes_done += sent_bytes;
    x->parts_done++;
    j->sent = true;
    mv_progress(x);
}

/* Sends one part from the source's agent (client cl) to the target's staging detached/, and
 * accounts it. */
static int send_one(send_pool *p, ferry_agent_client *cl, send_job *j, ferry_err *err)
{
    mvctx *x = j->x;
    const ferry_table_def *t = p->t;
    ferry_agent_sent ans;
    ferry_agent_send_req sr = {.db = t->database, .table = t->name, .freeze = p->freeze,
                               .live = j->live, .part = j->name,
                               .target_url = x->dst.agent_url, .target_token = x->dst.token,
                               .target_db = t->database, .target_table = p->staging};
    int rc = ferry_agent_send(cl, &sr, &ans, err);
    long status = ferry_agent_client_last_status(cl);
    pthread_mutex_lock(&p->mu);
    x->src.n_agent++; /* on the pool's client, not x->src.ag (mv_agent_requests) */
    if (rc && j->live && status == 410) {
        /* gone from the source since it was listed (merged, moved or detached): as a frozen
         * part merged away, nothing to send now; the exact comparison after the switch copies
         * until staging equals the source, so it cannot be lost */
        FLOG_INFO("msg=\"part not sent: no longer in the source's table\" move=%s table=%s.%s "
                  "part=%s", x->mv.u.move.id, t->database, t->name, j->name);
        pthread_mutex_unlock(&p->mu);
        return FERRY_OK;
    }
    if (rc) {
        if (status == 507 || status == 422 || status == 409)
            x->permanent = true; /* target full, or a part that fails its checks */
        if (status == 507)
            ferry_err_prefix(err, "target shard %s ran out of disk space while receiving part "
                             "%s of %s.%s (free space on that disk, then start the move "
                             "again): ", x->dst.name, j->name, t->database, t->name);
        else
            ferry_err_prefix(err, "agent of %s (send): sending part %s of %s.%s from %s to %s: ",
                             x->src.name, j->name, t->database, t->name, x->src.name,
                             x->dst.name);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    uint64_t sent_bytes = ans.bytes_sent;
    sent_account(p, j, ans.pointer, sent_bytes);
    pthread_mutex_unlock(&p->mu);
    ferry_agent_sent_free(&ans);
    ferry_rate_account(x->rate, sent_bytes); /* the run's bandwidth limit (shared or its own) */
    return FERRY_OK;
}

/* Whether name is in the JSON array of strings a. */
static bool json_names_have(const json_t *a, const char *name)
{
    for (size_t i = 0; i < json_array_size(a); i++)
        if (json_string_value(json_array_get(a, i)) &&
            !strcmp(json_string_value(json_array_get(a, i)), name))
            return true;
    return false;
}

/* Sends jobs[0..n) (live pointer parts of one table) by one request: the source's agent streams
 * them to the target's staging detached/ in receives of several parts (agent API 5). */
static int send_batch(send_pool *p, ferry_agent_client *cl, send_job *jobs, size_t n,
                      ferry_err *err)
{
    mvctx *x0 = p->x;
    const ferry_table_def *t = p->t;
    const char **names = calloc(n, sizeof *names);
    if (!names)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        names[i] = jobs[i].name;
    ferry_agent_sent ans;
    ferry_agent_send_req sr = {.db = t->database, .table = t->name, .live = true,
                               .parts = names, .n_parts = n,
                               .target_url = x0->dst.agent_url, .target_token = x0->dst.token,
                               .target_db = t->database, .target_table = p->staging};
    int rc = ferry_agent_send(cl, &sr, &ans, err);
    long status = ferry_agent_client_last_status(cl);
    free(names);
    pthread_mutex_lock(&p->mu);
    x0->src.n_agent++; /* on the pool's client, not x->src.ag (mv_agent_requests) */
    if (rc) {
        if (status == 507 || status == 422 || status == 409)
            for (size_t i = 0; i < n; i++)
                jobs[i].x->permanent = true; /* target full, or a part that fails its checks */
        if (status == 507)
            ferry_err_prefix(err, "target shard %s ran out of disk space while receiving %zu "
                             "parts of %s.%s (free space on that disk, then start the move "
                             "again): ", x0->dst.name, n, t->database, t->name);
        else
            ferry_err_prefix(err, "agent of %s (send): sending %zu parts of %s.%s (%s ...) from "
                             "%s to %s: ", x0->src.name, n, t->database, t->name, jobs[0].name,
                             x0->src.name, x0->dst.name);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    size_t n_sent = 0;
    for (size_t i = 0; i < n; i++)
        n_sent += !json_names_have(ans.gone, jobs[i].name);
    uint64_t share = n_sent ? ans.bytes_sent / n_sent : 0, rest = ans.bytes_sent;
    for (size_t i = 0, k = 0; i < n; i++) {
        send_job *j = &jobs[i];
        if (json_names_have(ans.gone, j->name)) {
            /* as a single live send answered 410 (send_one) */
            FLOG_INFO("msg=\"part not sent: no longer in the source's table\" move=%s "
                      "table=%s.%s part=%s", j->x->mv.u.move.id, t->database, t->name, j->name);
            continue;
        }
        /* the stream's bytes shared among its parts, the remainder to the last */
        uint64_t b = ++k == n_sent ? rest : share;
        rest -= b;
        sent_account(p, j, true, b);
    }
    pthread_mutex_unlock(&p->mu);
    ferry_rate_account(x0->rate, ans.bytes_sent);
    ferry_agent_sent_free(&ans);
    return FERRY_OK;
}

static void *send_worker(void *arg)
{
    send_pool *p = arg;
    mvctx *x = p->x;
    ferry_agent_client *cl = NULL;
    ferry_err err = {0};
    int rc = ferry_agent_client_new(x->src.agent_url, x->src.token, 600000, &cl, &err);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        send_job *j = !rc && !p->stop && p->next < p->n ? &p->jobs[p->next++] : NULL;
        size_t k = 1; /* with j: live pointer parts that go with it (send_order puts them last) */
        while (j && j->live && k < p->per_batch && p->next < p->n && p->jobs[p->next].live)
            p->next++, k++;
        pthread_mutex_unlock(&p->mu);
        if (!j)
            break;
        rc = k > 1 ? send_batch(p, cl, j, k, &err) : send_one(p, cl, j, &err);
    }
    if (rc) {
        pthread_mutex_lock(&p->mu);
        if (!p->rc) {
            p->rc = rc;
            p->err = err;
        }
        p->stop = true;
        pthread_mutex_unlock(&p->mu);
    }
    ferry_agent_client_free(cl);
    return NULL;
}

/* How many live pointer parts go by one request, of n_live: spread over the pool's threads, so
 * the target's receives run side by side, but at least MV_SEND_BATCH_MIN (a few small batches
 * would each pay a journal commit of their own) and at most MV_SEND_BATCH_MAX. */
static size_t mv_send_batch_size(size_t n_live)
{
    size_t k = (n_live + MV_SEND_THREADS - 1) / MV_SEND_THREADS;
    if (k < MV_SEND_BATCH_MIN)
        k = MV_SEND_BATCH_MIN;
    return k > MV_SEND_BATCH_MAX ? MV_SEND_BATCH_MAX : k;
}

/* Sends every job: the calling thread and up to MV_SEND_THREADS - 1 more, each with its own
 * agent client (a client is one connection, not shared). The first error stops the others
 * after their current part; it is the one returned. */
static int send_all(send_pool *p, ferry_err *err)
{
    size_t nt = MV_SEND_THREADS;
    if (nt > p->n)
        nt = p->n;
    pthread_t th[MV_SEND_THREADS];
    bool started[MV_SEND_THREADS] = {false};
    pthread_mutex_init(&p->mu, NULL);
    for (size_t i = 1; i < nt; i++)
        started[i] = pthread_create(&th[i], NULL, send_worker, p) == 0;
    send_worker(p);
    for (size_t i = 1; i < nt; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    if (p->rc)
        *err = p->err;
    return p->rc;
}

/* The slices of xs[0..n) (moves between the same two shards) listed on both sides, through
 * xs[0]'s connections: src[m] in the source's table (exact: rows and hashes read), stg[m] in
 * the target's staging table. What a copy round and a comparison both start from. */
typedef struct sides {
    mv_slice *src, *stg;
    const char **tenants;
    uint32_t *splits;
} sides;

typedef struct staging_listing {
    mv_conn *c;
    const ferry_table_def *t;
    const char *table;
    sides *s;
    size_t n;
} staging_listing;

static int list_staging(void *arg, ferry_err *err)
{
    staging_listing *l = arg;
    return mv_slice_list_n(l->c, l->t, l->table, l->s->tenants, l->s->splits, l->n, true,
                           l->s->stg, err);
}

static int sides_list(mvctx **xs, size_t n, const ferry_table_def *t, bool exact, sides *s,
                      ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    s->src = calloc(n, sizeof *s->src);
    s->stg = calloc(n, sizeof *s->stg);
    s->tenants = calloc(n, sizeof *s->tenants);
    s->splits = calloc(n, sizeof *s->splits);
    if (!s->src || !s->stg || !s->tenants || !s->splits)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t m = 0; m < n; m++) {
        s->tenants[m] = xs[m]->mv.u.move.tenant;
        s->splits[m] = xs[m]->mv.u.move.split;
    }
    /* the target's staging listed beside the source's: two servers, two clients */
    staging_listing sl = {.c = &xs[0]->dst, .t = t, .table = st, .s = s, .n = n};
    mv_side side;
    mv_side_start(&side, list_staging, &sl);
    int rc = mv_slice_list_n(&xs[0]->src, t, t->name, s->tenants, s->splits, n, exact, s->src,
                             err);
    ferry_err stg_err = {0};
    int stg_rc = mv_side_join(&side, &stg_err);
    if (!rc && stg_rc) {
        *err = stg_err;
        rc = stg_rc;
    }
    return rc;
}

/* Frees what sides_list made, also after it failed. */
static void sides_free(sides *s, size_t n)
{
    for (size_t m = 0; m < n && s->src && s->stg; m++) {
        mv_slice_free(&s->src[m]);
        mv_slice_free(&s->stg[m]);
    }
    free(s->src);
    free(s->stg);
    free(s->tenants);
    free(s->splits);
}

/* A part a copy round may send: its name (borrowed) and size. */
typedef struct round_part {
    const char *name;
    uint64_t bytes;
} round_part;

static bool all_cold(const mv_parts *ps);

/* One copy round for one table: make the target's staging partitions of the slice equal to a
 * snapshot of the source's. `first` counts every snapshot part's real size in the result (the
 * CLONE round); later rounds count only what they send. The slice's parts are listed once per
 * side; a partition of pointer parts only is sent live from the table's folder (an agent of API
 * 3), every other partition is frozen, all by one agent request (one ALTER TABLE); and the
 * partitions that received parts are attached by one ALTER TABLE. */
int mv_copy_round(mvctx *x, const ferry_table_def *t, const char *freeze, bool first,
                  ferry_err *err)
{
    return mv_copy_round_n(&x, 1, t, freeze, first, err);
}

int mv_copy_round_n(mvctx **xs, size_t n, const ferry_table_def *t, const char *freeze,
                    bool first, ferry_err *err)
{
    mvctx *x0 = xs[0]; /* its connections serve the whole round */
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    sides sd = {0};
    int rc = sides_list(xs, n, t, false, &sd, err);
    mv_slice *src = sd.src, *stg = sd.stg;
    ferry_agent_frozen fz = {0};
    const ferry_agent_frozen_part **fparts = NULL;
    round_part *cand = NULL; /* one partition's parts that may be sent */
    size_t n_attach = 0, n_pids = 0, max_cand = 0;
    send_job *jobs = NULL;
    size_t n_jobs = 0, cap_jobs = 0;
    bool *sent_pid = NULL, *live = NULL, live_ok = false;
    const char **load = NULL;
    for (size_t m = 0; !rc && m < n; m++)
        n_pids += src[m].n_pids;
    if (!rc && n_pids && !(live = calloc(n_pids, sizeof *live)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && n_pids)
        rc = mv_sends_live(&x0->src, &live_ok, err);
    if (!rc && n_pids) {
        /* A partition whose parts are all on the object-storage disk is sent live, from the
         * table's folder, and not frozen (docs/moves.md, "A copy round"). The others are frozen,
         * all by one request (an agent of API 1: one each, ferry/agent_ops.h). */
        const char **ids = calloc(n_pids, sizeof *ids);
        size_t k = 0, s = 0;
        for (size_t m = 0; ids && m < n; m++)
            for (size_t i = 0; i < src[m].n_pids; i++, s++) {
                mv_parts sp_all = mv_slice_parts(&src[m], src[m].pids[i]);
                live[s] = live_ok && all_cold(&sp_all);
                if (!live[s])
                    ids[k++] = src[m].pids[i];
            }
        if (!ids)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else if (k && !mv_freeze_journaled(x0, freeze)) /* named before it exists */
            rc = mv_freeze_journal_n(xs, n, freeze, err);
        if (!rc && k)
            rc = ferry_agent_freeze_ids(x0->src.ag, t->database, t->name, freeze, ids, k, &fz,
                                        err);
        for (size_t m = 0; k && m < n; m++) /* each member counts the batch's one request */
            xs[m]->res->freezes++;
        free(ids);
    }
    max_cand = fz.n;
    for (size_t m = 0; m < n && src; m++)
        max_cand = src[m].n_parts > max_cand ? src[m].n_parts : max_cand;
    if (!rc && (!(fparts = calloc(max_cand + 1, sizeof *fparts)) ||
                !(cand = calloc(max_cand + 1, sizeof *cand)) ||
                !(sent_pid = calloc(n_pids + 1, sizeof *sent_pid))))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t slot = 0;
    for (size_t m = 0; !rc && m < n; m++) {
        mvctx *x = xs[m];
        for (size_t i = 0; !rc && i < src[m].n_pids; i++, slot++) {
            const char *pid = src[m].pids[i];
            mv_parts sp_all = mv_slice_parts(&src[m], pid), sg = mv_slice_parts(&stg[m], pid);
            size_t nf = 0;
            if (live[slot]) { /* the listing's active parts, all of them pointer parts */
                for (size_t k = 0; k < sp_all.n; k++)
                    if (sp_all.p[k].active)
                        cand[nf++] = (round_part){sp_all.p[k].name, sp_all.p[k].bytes};
            } else {
                nf = ferry_agent_frozen_of(&fz, pid, fparts, max_cand);
                for (size_t k = 0; k < nf; k++)
                    cand[k] = (round_part){fparts[k]->name, fparts[k]->bytes};
            }
            bool *need = calloc(nf + 1, sizeof *need), *keep = calloc(sg.n + 1, sizeof *keep);
            if (!need || !keep)
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            /* diff by content: a part whose hash staging holds (and not yet matched) stays */
            for (size_t k = 0; !rc && k < nf; k++) {
                const char *name = cand[k].name;
                const mv_part *sp = mv_parts_find(&sp_all, name);
                if (!sp) {
                    /* an empty part (not listed), or one merged away since the freeze: either
                     * way nothing to send now; the exact comparison after the switch copies
                     * until staging equals the source, so a part skipped here cannot be lost */
                    FLOG_INFO("msg=\"frozen part not sent: empty, or merged since the freeze\" "
                              "move=%s table=%s.%s part=%s", x->mv.u.move.id, t->database,
                              t->name, name ? name : "?");
                    continue;
                }
                if (first) {
                    if (sp->cold)
                        x->res->cold_bytes += sp->bytes, x->res->cold_parts++;
                    else
                        x->res->hot_bytes += sp->bytes, x->res->hot_parts++;
                }
                need[k] = true;
                for (size_t j = 0; j < sg.n; j++)
                    if (!keep[j] && !strcmp(sg.p[j].hash, sp->hash) && sg.p[j].rows == sp->rows) {
                        keep[j] = true;
                        need[k] = false;
                        break;
                    }
                if (need[k]) {
                    x->parts_total++;
                    x->bytes_total += cand[k].bytes;
                }
            }
            /* staging parts the snapshot no longer has (the source merged them away) */
            for (size_t j = 0; !rc && j < sg.n; j++)
                if (!keep[j])
                    rc = mv_staging_drop_part(x0, t, sg.p[j].name, err);
            mv_progress(x);
            for (size_t k = 0; !rc && k < nf; k++) {
                if (!need[k])
                    continue;
                if (n_jobs == cap_jobs) {
                    size_t cap = cap_jobs ? 2 * cap_jobs : 16;
                    send_job *j = realloc(jobs, cap * sizeof *j);
                    if (!j) {
                        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                        break;
                    }
                    jobs = j;
                    cap_jobs = cap;
                }
                const mv_part *sp = mv_parts_find(&sp_all, cand[k].name);
                jobs[n_jobs] = (send_job){
                    .name = cand[k].name, .live = live[slot],
                    .x = x, .src = &src[m], .pid = i, .slot = slot,
                    .cost = sp && !sp->cold ? cand[k].bytes : 0, .order = n_jobs};
                n_jobs++;
            }
            free(need);
            free(keep);
        }
    }
    /* the parts go agent to agent, several at a time; live pointer parts several to a request
     * when both agents take batches */
    size_t per_batch = 1;
    if (!rc && n_jobs) {
        size_t n_live = 0;
        for (size_t j = 0; j < n_jobs; j++)
            n_live += jobs[j].live;
        int sapi = 0, dapi = 0;
        if (n_live > 1 && !(rc = mv_agent_api(&x0->src, &sapi, err)) &&
            !(rc = mv_agent_api(&x0->dst, &dapi, err)) && sapi >= 5 && dapi >= 5)
            per_batch = mv_send_batch_size(n_live);
    }
    if (!rc && n_jobs) {
        qsort(jobs, n_jobs, sizeof *jobs, send_order);
        send_pool pool = {.x = x0, .t = t, .staging = st, .freeze = freeze, .first = first,
                          .jobs = jobs, .n = n_jobs, .per_batch = per_batch};
        rc = send_all(&pool, err);
        for (size_t j = 0; j < n_jobs; j++)
            if (jobs[j].sent)
                sent_pid[jobs[j].slot] = true;
    }
    if (!rc && !(load = calloc(n_pids + 1, sizeof *load)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    slot = 0;
    for (size_t m = 0; !rc && m < n; m++)
        for (size_t i = 0; i < src[m].n_pids; i++, slot++)
            if (sent_pid[slot])
                load[n_attach++] = src[m].pids[i];
    if (!rc && n_attach) {
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "CLONE:sent");
        /* ATTACH PARTITION, or the read-only route (staging_load.h) */
        rc = stg_load(&x0->dst, t->database, st, load, n_attach, err);
    }
    free(load);
    free(jobs);
    free(sent_pid);
    free(live);
    free(cand);
    free(fparts);
    ferry_agent_frozen_free(&fz);
    sides_free(&sd, n);
    return rc;
}

/* Whether every part of the list is on an object-storage disk (a cold partition). */
static bool all_cold(const mv_parts *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->p[i].active && !ps->p[i].cold)
            return false;
    return ps->n > 0;
}

/* The digest of a cold partition from its active parts alone (docs/moves.md, "Verification"):
 * rows = the parts' rows, sum and xor of xxh64 over each part's hash_of_all_files. A cold part's
 * files are pointer files naming immutable objects (the key carries the freeze name, so no two
 * parts share a key for different bytes), and the receiving agent checked that every object they
 * name exists with its size; two parts with equal hash_of_all_files (the hash of checksums.txt,
 * which holds every file's hash) and rows read the same bytes. Reading every row on both sides
 * would only read those same objects twice. */
static void cold_digest(const mv_parts *ps, ferry_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    for (size_t i = 0; i < ps->n; i++) {
        if (!ps->p[i].active)
            continue;
        uint64_t h = XXH64(ps->p[i].hash, strlen(ps->p[i].hash), 0x66657272u);
        fp->rows += ps->p[i].rows;
        fp->hash_sum += h;
        fp->hash_xor ^= h;
        fp->parts++;
        fp->bytes += ps->p[i].bytes;
    }
}

/* The union of two slices' partition ids, sorted (into out). */
static int pids_union(const mv_slice *a, const mv_slice *b, mv_pids *out, ferry_err *err)
{
    for (size_t i = 0; i < a->n_pids; i++)
        if (mv_pids_add(out, a->pids[i]))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < b->n_pids; i++)
        if (!mv_pids_has(out, b->pids[i]) && mv_pids_add(out, b->pids[i]))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

/* Adds b's rows and hashes to a (the fingerprints of disjoint sets of rows or parts). */
static void fp_add(ferry_fingerprint *a, const ferry_fingerprint *b)
{
    a->rows += b->rows;
    a->hash_sum += b->hash_sum;
    a->hash_xor ^= b->hash_xor;
}

/* Adds the source's rows of the partitions hot to fp: one query for all of them. */
static int fingerprint_hot(mvctx *x, const ferry_table_def *t, const mv_pids *hot,
                           ferry_fingerprint *fp, ferry_err *err)
{
    const char **ids = calloc(hot->n, sizeof *ids);
    ferry_fingerprint *f = calloc(hot->n, sizeof *f);
    int rc = ids && f ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < hot->n; k++)
        ids[k] = hot->ids[k];
    if (!rc)
        rc = ferry_fingerprint_partitions(x->src.ch, t->database, t->name, ids, hot->n, f, err);
    for (size_t k = 0; !rc && k < hot->n; k++)
        fp_add(fp, &f[k]);
    free(ids);
    free(f);
    return rc;
}

/* Compares the staging copy with the source, partition by partition, from one listing of the
 * slice's parts per side. exact: the source is quiescent (after the switch), so part hashes
 * must be equal (*stable false when the source changed since the copy: another round is
 * needed). Not exact (VERIFY): every staged part must be a copy of a source part (hash and
 * rows). Equal multisets of hash_of_all_files are equal data (each staged part was checked
 * against its checksums.txt while it was written, and the hash covers every file's checksum),
 * so no row is read to compare. fp (may be NULL; exact and stable only) accumulates the source's
 * fingerprint of the slice, which CLEANUP checks again before it detaches the source; digest
 * (may be NULL) the digest of its parts. Cold partitions go into fp by their part digest. Hot
 * ones too when the table numbers its blocks table-wide (mv_table_wide_blocks), and then
 * top[m] is the highest mv_part_top of the slice's source parts: a later merge keeps every part
 * at or under it, a later write does not, so CLEANUP needs no row read. Otherwise (top[m] -1,
 * or top NULL) hot partitions go into fp by their rows (one query for all of them; a later merge
 * on the source changes the parts, not the rows). */
int mv_compare_copy(mvctx *x, const ferry_table_def *t, bool exact, bool *stable,
                    ferry_fingerprint *fp, ferry_fingerprint *digest, int64_t *top,
                    ferry_err *err)
{
    return mv_compare_copy_n(&x, 1, t, exact, stable, fp, digest, top, err);
}

int64_t mv_part_top(const mv_part *p)
{
    return p->max_block > p->version ? p->max_block : p->version;
}

int mv_compare_copy_n(mvctx **xs, size_t n, const ferry_table_def *t, bool exact, bool *stable,
                      ferry_fingerprint *fp, ferry_fingerprint *digest, int64_t *top,
                      ferry_err *err)
{
    mvctx *x0 = xs[0];
    mv_pids hot = {0};
    size_t *hot_of = NULL; /* hot.ids[k] is a partition of slice hot_of[k] */
    bool by_top = false;   /* hot partitions by their parts and the top (no row read) */
    for (size_t m = 0; m < n; m++) {
        stable[m] = true;
        if (top)
            top[m] = -1;
    }
    sides sd = {0};
    int rc = fp && top ? mv_table_wide_blocks(&x0->src, t->database, t->name, &by_top, err)
                       : FERRY_OK;
    if (!rc)
        rc = sides_list(xs, n, t, exact, &sd, err);
    mv_slice *src = sd.src, *stg = sd.stg;
    for (size_t m = 0; !rc && m < n; m++) {
        mvctx *x = xs[m];
        mv_pids pids = {0};
        rc = pids_union(&src[m], &stg[m], &pids, err);
        for (size_t i = 0; !rc && i < pids.n; i++) {
            const char *pid = pids.ids[i];
            mv_parts sv = mv_slice_parts(&src[m], pid), sg = mv_slice_parts(&stg[m], pid);
            mv_parts src_active = {0};
            src_active.p = calloc(sv.n + 1, sizeof *src_active.p);
            if (!src_active.p)
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            for (size_t k = 0; !rc && k < sv.n; k++)
                if (sv.p[k].active)
                    src_active.p[src_active.n++] = sv.p[k];
            bool same = !rc && mv_same_hashes(&src_active, &sg);
            if (!rc && !exact && !same) {
                /* The source's parts changed since the freeze (new rows, or a merge: a server
                 * may drop merged-away parts at once, old_parts_lifetime = 0), so a staged part
                 * need not match any part listed now. Such a partition is checked exactly after
                 * the switch, where rounds copy until staging equals the source; a bad copy
                 * cannot survive that. */
                size_t unmatched = 0;
                for (size_t j = 0; j < sg.n; j++) {
                    bool found = false;
                    for (size_t k = 0; k < sv.n && !found; k++)
                        found = !strcmp(sv.p[k].hash, sg.p[j].hash) &&
                                sv.p[k].rows == sg.p[j].rows;
                    unmatched += !found;
                }
                if (unmatched)
                    FLOG_INFO("msg=\"verify: source parts changed since the copy; checked after "
                              "the switch\" move=%s table=%s.%s partition=%s staged_unmatched=%zu",
                              x->mv.u.move.id, t->database, t->name, pid, unmatched);
            }
            if (!rc && same) {
                ferry_fingerprint a, b;
                cold_digest(&src_active, &a);
                cold_digest(&sg, &b);
                if (a.rows != b.rows) {
                    x->permanent = !exact;
                    rc = ferry_err_set(err, FERRY_EIO,
                                       "verify: %s.%s partition %s: same part hashes but %llu "
                                       "rows on %s and %llu on %s",
                                       t->database, t->name, pid, (unsigned long long)a.rows,
                                       x->src.name, (unsigned long long)b.rows, x->dst.name);
                    free(src_active.p);
                    break;
                }
                if (digest) {
                    fp_add(&digest[m], &a);
                    digest[m].parts += a.parts;
                }
                for (size_t k = 0; by_top && k < src_active.n; k++)
                    if (mv_part_top(&src_active.p[k]) > top[m])
                        top[m] = mv_part_top(&src_active.p[k]);
                if (all_cold(&src_active) && all_cold(&sg)) {
                    x->cold_verified++;
                    if (fp)
                        fp_add(&fp[m], &a);
                } else {
                    x->hot_verified++;
                    if (fp && by_top) {
                        fp_add(&fp[m], &a);
                    } else if (fp) {
                        size_t *h = realloc(hot_of, (hot.n + 1) * sizeof *h);
                        if (!h || mv_pids_add(&hot, pid))
                            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                        if (h)
                            hot_of = h;
                        if (!rc)
                            hot_of[hot.n - 1] = m;
                    }
                }
            } else if (!rc && exact) {
                stable[m] = false; /* other parts than the source's: another round makes them
                                    * equal */
            }
            free(src_active.p);
        }
        mv_pids_free(&pids);
    }
    if (!rc && fp && hot.n) {
        /* the rows of the hot partitions of the stable slices, on the source only (staging
         * holds the same parts): one query for every slice */
        const char **ids = calloc(hot.n, sizeof *ids);
        ferry_fingerprint *f = calloc(hot.n, sizeof *f);
        size_t k2 = 0;
        rc = ids && f ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; !rc && k < hot.n; k++)
            if (stable[hot_of[k]])
                ids[k2++] = hot.ids[k];
        if (!rc && k2)
            rc = ferry_fingerprint_partitions(x0->src.ch, t->database, t->name, ids, k2, f, err);
        k2 = 0;
        for (size_t k = 0; !rc && k < hot.n; k++)
            if (stable[hot_of[k]])
                fp_add(&fp[hot_of[k]], &f[k2++]);
        free(ids);
        free(f);
    }
    free(hot_of);
    mv_pids_free(&hot);
    sides_free(&sd, n);
    return rc;
}

int mv_slice_digest(const mv_slice *sl, ferry_fingerprint *fp, ferry_fingerprint *digest,
                    mv_pids *hot, ferry_err *err)
{
    for (size_t i = 0; i < sl->n_pids; i++) {
        mv_parts ps = mv_slice_parts(sl, sl->pids[i]);
        ferry_fingerprint a;
        cold_digest(&ps, &a);
        fp_add(digest, &a);
        digest->parts += a.parts;
        if (all_cold(&ps)) {
            if (fp)
                fp_add(fp, &a);
        } else if (hot && mv_pids_add(hot, sl->pids[i])) {
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
    }
    return FERRY_OK;
}

const mv_part *mv_slice_above_top(const mv_slice *sl, int64_t top)
{
    for (size_t i = 0; i < sl->n_parts; i++)
        if (sl->parts[i].active && mv_part_top(&sl->parts[i]) > top)
            return &sl->parts[i];
    return NULL;
}

/* The source's part digest of the slice (cold_digest over every active part) and, when rows is
 * true, its fingerprint as compare_copy journals it (cold partitions by part digest, hot ones by
 * their rows, one query). */
int mv_source_fingerprint(mvctx *x, const ferry_table_def *t, bool rows,
                          ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err)
{
    mv_slice sl = {0};
    mv_pids hot = {0};
    memset(fp, 0, sizeof *fp);
    memset(digest, 0, sizeof *digest);
    int rc = mv_slice_list(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, true,
                           &sl, err);
    if (!rc)
        rc = mv_slice_digest(&sl, fp, digest, &hot, err);
    if (!rc && rows && hot.n)
        rc = fingerprint_hot(x, t, &hot, fp, err);
    mv_pids_free(&hot);
    mv_slice_free(&sl);
    return rc;
}

unsigned ferry_move_grace(const ferry_move_opts *o)
{
    if (o->grace_given)
        return o->grace_ms;
    const char *routers = o->cfg ? ferry_config_get(o->cfg, "cluster", NULL, "routers") : NULL;
    return routers && *routers ? 0 : 2000;
}


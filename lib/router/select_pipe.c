/* The router's read path, pipelined merges (select_int.h): from a statement's second run on,
 * with its partials' structure learned, the initiator starts with the partial queries and reads
 * their answers while they arrive; failover stays exact. Also the dispatch between a single,
 * merged and pipelined run of a plan. */
#include "select_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "ferry/chhttp.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/read_pick.h"
#include "ferry/sqlrw.h"
#include "ferry/strutil.h"
#include "qcache.h"

/* ---- pipelined merges: the initiator starts with the partials -------------------------------
 *
 * rd_run_merged runs every partial query to its end, buffers them, and only then starts the
 * initiator, whose url() first asks the router for the partials' schema and then reads them.
 * When the partials' column structure is known (learned beside an earlier run of the same
 * statement: merge_learn), run_merged_pipelined instead starts the initiator at once: it computes
 * its own server's partials itself, as subqueries, and reads the other servers' through
 * url(.., 'Native', 'structure') from a live partial that the router fills while they run. No
 * schema request, no transfer of the initiator's own partial, its scan overlaps the others'.
 *
 * Failover is kept exact because a server's answers enter the live partial only once all of
 * that server's queries of the round have ended successfully: the initiator never reads a byte
 * of an answer that could still fail. A server that cannot be reached has its unanswered
 * slices planned again on their next replicas (the same rounds as rd_run_merged's:
 * rd_rounds_run, select_round.c), and those answers join the same live partial; the initiator
 * waits for them. When a slice has no replica left, or a server reports an error, the live
 * partials fail: the initiator's read breaks and the query fails with the partial's error
 * (after the first byte: a broken answer, never a short one). The initiator server itself failing before any byte reached the client runs the query
 * again without pipelining, with that server failed over (run_merged_again). */

/* The placeholder group of query i: the managed reference (gather) or -1 (one for all). */
static int merge_group_ref(const ferry_read_plan *p, size_t i)
{
    return p->kind == FERRY_PLAN_GATHER ? p->queries[i].ref : -1;
}

/* The distinct groups of the plan in order of appearance, and the first query of each. */
static size_t merge_groups(const ferry_read_plan *p, int *refs, size_t *first)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_queries; i++) {
        int ref = merge_group_ref(p, i);
        size_t g = 0;
        while (g < n && refs[g] != ref)
            g++;
        if (g == n) {
            refs[n] = ref;
            first[n++] = i;
        }
    }
    return n;
}

static void merge_placeholder(int ref, char *out, size_t outsz)
{
    if (ref >= 0)
        snprintf(out, outsz, "{{ferry.rows.%d}}", ref);
    else
        snprintf(out, outsz, "%s", FERRY_PLAN_PARTIAL);
}

/* The cache key of a group's partial structure: what the partial's columns depend on (the
 * statement, the database, the client's settings, the plan kind and the group), not which
 * slices or replicas a query picked. */
static int merge_struct_key(const rd_ctx *cx, const ferry_read_plan *p, int ref, ferry_buf *key)
{
    const rd_opts *o = cx->o;
    ferry_buf_printf(key, "%s\x1f%d\x1f%d\x1f", o->database ? o->database : "", (int)p->kind, ref);
    for (size_t i = 0; i < o->n_all; i++)
        ferry_buf_printf(key, "%s=%s\x1e", o->all[i].name, o->all[i].value);
    ferry_buf_putc(key, '\x1f');
    return ferry_buf_append(key, cx->a->toks.text, cx->a->toks.text_len) ? FERRY_ENOMEM
                                                                          : FERRY_OK;
}

/* Whether the plan can run pipelined: no GLOBAL data (its result limits must not bound the
 * initiator's own partials, and its URLs change per request) and no initiator-only setting (the
 * initiator's own partials run inside the initiator query, under its settings). */
static bool merge_pipelinable(const rd_ctx *cx, const ferry_read_plan *p, size_t n_extra)
{
    if (n_extra || p->n_globals || cx->o->n_all != cx->o->n_server || !cx->pick || !cx->a ||
        cx->a->toks.text_len > MERGE_STRUCT_TEXT_MAX)
        return false;
    for (size_t i = 0; i < p->n_settings; i++)
        if (ferry_sql_setting_initiator_only(p->settings[i].name))
            return false;
    for (size_t i = 0; i < p->n_queries; i++)
        if (strstr(p->queries[i].sql, "/ferry/partial/"))
            return false;
    return true;
}

static int describe_collect(const void *data, size_t len, void *arg)
{
    return ferry_buf_append(arg, data, len) ? FERRY_ENOMEM : FERRY_OK;
}

static void *describe_main(void *arg)
{
    describe_job *j = arg;
    const rd_opts *o = j->cx->o;
    ferry_ch_setting *set = calloc(o->n_server + 1, sizeof *set);
    if (!set) {
        j->rc = FERRY_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < o->n_server; i++)
        set[i] = o->server[i];
    /* DESCRIBE's answer is small; buffered, which the lab's ferry-node needs for DESCRIBE */
    set[o->n_server] = (ferry_ch_setting){"wait_end_of_query", "1"};
    ferry_ch_query q = {.sql = j->sql,
                        .database = o->database,
                        .format = "TabSeparated",
                        .settings = set,
                        .n_settings = o->n_server + 1,
                        .on_data = describe_collect,
                        .on_data_arg = &j->out};
    ferry_ch_status st;
    ferry_err err = {0};
    j->rc = rd_shard_exec_cx(j->cx, j->server, &q, &st, &err);
    free(set);
    return NULL;
}

/* "`name` Type, ..." from DESCRIBE's TabSeparated rows (name, type, ...). */
static int structure_from_describe(ferry_buf *tsv, ferry_buf *out)
{
    ferry_ch_rows rows;
    ferry_err err = {0};
    size_t len = tsv->len;
    char *text = ferry_buf_detach(tsv);
    if (!text || ferry_ch_rows_parse(text, len, &rows, &err))
        return FERRY_EINVAL;
    int rc = rows.n_rows && rows.n_cols >= 2 ? FERRY_OK : FERRY_EINVAL;
    for (size_t i = 0; i < rows.n_rows && !rc; i++) {
        if (i)
            ferry_buf_puts(out, ", ");
        ferry_sql_ident(ferry_ch_rows_get(&rows, i, 0), out);
        ferry_buf_putc(out, ' ');
        rc = ferry_buf_puts(out, ferry_ch_rows_get(&rows, i, 1)) ? FERRY_ENOMEM : FERRY_OK;
    }
    ferry_ch_rows_free(&rows);
    return rc;
}

/* rd_run_merged, with the partials' structures learned beside it (a DESCRIBE per group on the
 * group's first server) and kept for the next run of the same statement. */
static int merge_learn(rd_ctx *cx, ferry_read_plan *p, const size_t *first, size_t n_groups,
                       ferry_buf *keys, const char *format, ferry_ch_write_fn sink, void *arg,
                       rd_fail *f)
{
    describe_job *jobs = calloc(n_groups, sizeof *jobs);
    pthread_t *th = calloc(n_groups, sizeof *th);
    bool *started = calloc(n_groups, sizeof *started);
    for (size_t g = 0; jobs && th && started && g < n_groups; g++) {
        ferry_buf b = {0};
        ferry_buf_printf(&b, "DESCRIBE TABLE (%s)", p->queries[first[g]].sql);
        jobs[g] = (describe_job){.cx = cx, .server = p->queries[first[g]].server,
                                 .sql = ferry_buf_detach(&b)};
        started[g] = jobs[g].sql && pthread_create(&th[g], NULL, describe_main, &jobs[g]) == 0;
    }
    int rc = rd_run_merged(cx, p, format, NULL, 0, sink, arg, f);
    for (size_t g = 0; jobs && th && started && g < n_groups; g++) {
        if (!started[g])
            continue;
        pthread_join(th[g], NULL);
        ferry_buf st = {0};
        if (!rc && !jobs[g].rc && !structure_from_describe(&jobs[g].out, &st) && st.data)
            rt_qcache_put(cx->rd->structs, keys[g].data, keys[g].len, st.data);
        ferry_buf_free(&st);
    }
    for (size_t g = 0; jobs && g < n_groups; g++) {
        free(jobs[g].sql);
        ferry_buf_free(&jobs[g].out);
    }
    free(jobs);
    free(th);
    free(started);
    return rc;
}

/* A published live partial (a reference kept for the request, unpublished with it). */
static rt_partial *live_publish(rd_ctx *cx)
{
    rt_partial *p = rd_partial_publish(cx->rd, NULL, 0);
    if (!p)
        return NULL;
    /* set before any reader: the token is random and not yet handed out */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->live = true;
    return rd_pub_keep(cx, p) ? NULL : p;
}

/* Appends a complete answer (taken over) to a live partial. */
static int live_append(rt_partial *p, ferry_buf *b)
{
    int rc = FERRY_OK;
    pthread_mutex_lock(&p->mu);
    if (p->n_segs == p->cap) {
        size_t c = p->cap ? 2 * p->cap : 4;
        ferry_buf *n = realloc(p->segs, c * sizeof *n);
        if (n) {
            p->segs = n;
            p->cap = c;
        }
    }
    if (p->n_segs < p->cap) {
        p->segs[p->n_segs++] = *b;
        memset(b, 0, sizeof *b);
        pthread_cond_broadcast(&p->cond);
    } else {
        rc = FERRY_ENOMEM;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* No more segments: done (its readers end) or failed (their transfer breaks). Only the first
 * call counts. */
void rd_live_end(rt_partial *p, bool failed)
{
    pthread_mutex_lock(&p->mu);
    if (!p->done && !p->failed) {
        p->done = !failed;
        p->failed = failed;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->mu);
}

/* A partial job of a pipelined merge: when it ends, and every job of its server in this round
 * has ended without an error, their answers join their live partials (all or none: a server
 * that fails is failed over whole, so none of its answers may have been read). */
static void *pipe_job_main(void *arg)
{
    partial_job *j = arg;
    rd_partial_main(j);
    pipe_round *pr = j->pipe;
    pthread_mutex_lock(&pr->mu);
    j->ended = true;
    bool all = true, ok = true;
    for (size_t i = pr->from; i < pr->n; i++) {
        const partial_job *k = pr->jobs[i];
        if (k->server != j->server)
            continue;
        all = all && k->ended;
        ok = ok && !k->rc && !k->sink.over && !k->sink.mem_over;
    }
    for (size_t i = pr->from; all && ok && i < pr->n; i++) {
        partial_job *k = pr->jobs[i];
        if (k->server == j->server && live_append(k->live, &k->out))
            pr->append_failed = true;
    }
    pthread_mutex_unlock(&pr->mu);
    return NULL;
}

/* A pipelined merge's additions to the rounds (rd_round_hooks). */
typedef struct pipe_hooks {
    pipe_round *pr;
    const int *refs;     /* the groups' references */
    rt_partial **lives;  /* the groups' live partials (NULL: all on the initiator) */
    size_t n_groups;
} pipe_hooks;

/* Before a round: its jobs know the round (pipe_job_main). */
static void pipe_before(rd_rounds *r, void *arg)
{
    pipe_round *pr = ((pipe_hooks *)arg)->pr;
    pr->jobs = r->jobs;
    pr->from = r->from;
    pr->n = r->n;
    for (size_t i = r->from; i < r->n; i++)
        r->jobs[i]->pipe = pr;
}

static int pipe_after(rd_rounds *r, void *arg, rd_fail *f)
{
    (void)r;
    if (((pipe_hooks *)arg)->pr->append_failed)
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    return FERRY_OK;
}

/* The failover queries' answers join their group's live partial. */
static int pipe_joined(rd_rounds *r, void *arg, rd_fail *f)
{
    const pipe_hooks *h = arg;
    for (size_t i = r->from; i < r->n; i++) {
        for (size_t g = 0; g < h->n_groups; g++)
            if (h->refs[g] == r->jobs[i]->ref)
                r->jobs[i]->live = h->lives[g];
        if (!r->jobs[i]->live)
            /* a group that had no remote partial (its slices were all on the initiator, which
             * is never failed over here): cannot happen, but never read it short */
            return rd_fail_set(f, FERRY_EINTERNAL, "NOT_IMPLEMENTED",
                               "a failover query has no partial to join");
    }
    return FERRY_OK;
}

/* Whether the statement's SETTINGS or the client's URL settings name the setting. */
static bool setting_given(const ferry_read_plan *p, const rd_opts *o, const char *name)
{
    for (size_t i = 0; i < p->n_settings; i++)
        if (!strcmp(p->settings[i].name, name))
            return true;
    for (size_t i = 0; i < o->n_all; i++)
        if (!strcmp(o->all[i].name, name))
            return true;
    return false;
}

static int init_sink(const void *data, size_t len, void *arg)
{
    init_job *j = arg;
    j->delivered += len;
    return j->sink(data, len, j->arg);
}

static void *init_main(void *arg)
{
    init_job *j = arg;
    j->rc = rd_run_final_ex(j->cx, j->server, j->sql, j->p, j->format, NULL, 0, init_sink, j, &j->f,
                            NULL, j->read_timeout_ms);
    return NULL;
}

/* The merge failed before any byte reached the client and must run again without pipelining:
 * replicas picked anew (a failed server, `failed` unless SIZE_MAX, is failed over at once), the
 * query planned again, rd_run_merged (or one server, when the pick now allows it). */
static int run_merged_again(rd_ctx *cx, size_t failed, const ferry_err *why, const char *format,
                            ferry_ch_write_fn sink, void *arg, rd_fail *f)
{
    ferry_read_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = rd_pick_build(cx, cx->a);
    if (rc)
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    if (failed != SIZE_MAX && (rc = rd_fail_over(cx, failed, why, f)))
        return rc;
    rc = rd_plan_for_pick(cx, &plan, f);
    if (!rc)
        rc = rd_run_single(cx, &plan, format, NULL, 0, sink, arg, f);
    ferry_read_plan_free(&plan);
    return rc;
}

/* See the section comment. structs[g]: the structure of group g's partials. *fallback: the
 * initiator failed before any byte reached the client while every partial was fine (a stale
 * structure, e.g. after ALTER TABLE): the caller forgets the structures and runs it again. */
static int run_merged_pipelined(rd_ctx *cx, ferry_read_plan *p, const int *refs, size_t n_groups,
                                char **structs, const char *format, ferry_ch_write_fn sink,
                                void *arg, rd_fail *f, bool *fallback)
{
    size_t init_server = p->queries[0].server;
    rd_rounds rounds;
    rd_rounds_init(&rounds);
    rt_partial **lives = calloc(n_groups + 1, sizeof *lives);
    pipe_round pr = {0};
    pthread_mutex_init(&pr.mu, NULL);
    pipe_hooks hk = {.pr = &pr, .refs = refs, .lives = lives, .n_groups = n_groups};
    const rd_round_hooks hooks = {.job_main = pipe_job_main, .before = pipe_before,
                                  .after = pipe_after, .joined = pipe_joined, .arg = &hk};
    init_job ij = {0};
    pthread_t init_th;
    bool init_started = false;
    char *init = strdup(p->initiator_sql);
    ferry_sql_setting *set = calloc(p->n_settings + 3, sizeof *set);
    int rc = FERRY_OK;
    *fallback = false;
    if (!lives || !init || !set) {
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    /* Per group: the initiator's own partials as subqueries, the others' through a live
     * partial read with an explicit structure. */
    for (size_t g = 0; g < n_groups && !rc; g++) {
        ferry_buf expr = {0};
        size_t parts = 0, remote = 0;
        ferry_buf_putc(&expr, '(');
        for (size_t i = 0; i < p->n_queries; i++) {
            if (merge_group_ref(p, i) != refs[g])
                continue;
            if (p->queries[i].server != init_server) {
                remote++;
                continue;
            }
            ferry_buf_printf(&expr, "%sSELECT * FROM (%s)", parts++ ? " UNION ALL " : "",
                             p->queries[i].sql);
        }
        if (remote) {
            if (!(lives[g] = live_publish(cx))) {
                ferry_buf_free(&expr);
                rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                break;
            }
            ferry_buf_printf(&expr, "%sSELECT * FROM ", parts++ ? " UNION ALL " : "");
            rd_partial_expr(cx, lives[g], &expr);
            expr.len -= 1; /* reopen "url(.., 'Native')" to add the structure */
            ferry_buf_puts(&expr, ", ");
            ferry_sql_quote(structs[g], &expr);
            ferry_buf_putc(&expr, ')');
        }
        ferry_buf_putc(&expr, ')');
        char ph[64];
        merge_placeholder(refs[g], ph, sizeof ph);
        if (!expr.data || rd_replace_all(&init, ph, ferry_buf_cstr(&expr)))
            rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        ferry_buf_free(&expr);
        for (size_t i = 0; i < p->n_queries && !rc; i++) {
            if (merge_group_ref(p, i) != refs[g] || p->queries[i].server == init_server)
                continue;
            rc = rd_rounds_add(cx, p, &rounds, p->queries[i].server, refs[g], p->queries[i].sql,
                               f);
            if (!rc)
                rounds.jobs[rounds.n - 1]->live = lives[g];
        }
    }
    if (rc)
        goto out;
    /* the initiator's own slices are answered by the initiator query: a failover round must not
     * plan them again (a server failed over onto the initiator gets queries of its own) */
    ferry_rpick_answered(cx->pick, (uint32_t)init_server);
    /* The initiator's url() read waits for whole partials, which may take longer than the
     * server's receive timeout (30 s); the router ends the read itself when one fails, and a
     * router that is gone closes the connection. In the statement's SETTINGS (a URL setting
     * costs the lab's ferry-node a session of its own), unless the client chose one. */
    ferry_read_plan ip = *p;
    for (size_t i = 0; i < p->n_settings; i++)
        set[i] = p->settings[i];
    ip.settings = set;
    ip.n_settings = p->n_settings;
    if (!setting_given(p, cx->o, "http_receive_timeout"))
        set[ip.n_settings++] = (ferry_sql_setting){"http_receive_timeout", "3600"};
    /* url() with a structure first sends a HEAD request (for ranged parallel reads, which a
     * live partial cannot serve); ClickHouse 26.7 then spent ~100 ms before its GET, measured
     * against the lab's servers (10 ms without it for a one-row read) */
    if (!setting_given(p, cx->o, "http_make_head_request"))
        set[ip.n_settings++] = (ferry_sql_setting){"http_make_head_request", "0"};
    /* Its first byte comes after its own partials and every other server's, failover rounds
     * included (each bounded by shard_timeout, at most one round per server): the read timeout
     * covers them all. A hanging initiator is noticed that much later. */
    long shard_to = cx->r->shard_timeout_ms > 0 ? cx->r->shard_timeout_ms : 30000;
    ij = (init_job){.cx = cx, .server = init_server, .sql = init, .p = &ip, .format = format,
                    .sink = sink, .arg = arg,
                    .read_timeout_ms = shard_to * (long)(cx->cache->n_servers + 2)};
    init_started = pthread_create(&init_th, NULL, init_main, &ij) == 0;
    if (!init_started) {
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_SCHEDULE_TASK", "cannot start a thread");
        goto out;
    }
    /* The partial queries, in rounds: a server that cannot be reached is failed over and its
     * slices' queries planned again (rd_rounds_run). */
    if ((rc = rd_rounds_run(cx, p, &rounds, &hooks, f)))
        goto out;
    for (size_t g = 0; g < n_groups; g++)
        if (lives[g])
            rd_live_end(lives[g], false);
out:
    /* a partial that failed: the initiator must not take what it read for complete */
    for (size_t g = 0; lives && g < n_groups; g++)
        if (lives[g])
            rd_live_end(lives[g], true); /* no-op for those that ended */
    if (init_started) {
        pthread_join(init_th, NULL);
        if (!rc && ij.rc) {
            if (ij.delivered || !(rd_conn_error(ij.rc) || ij.f.remote)) {
                *f = ij.f; /* after the first byte: the answer breaks */
                rc = ij.rc;
            } else if (rd_conn_error(ij.rc)) {
                FLOG_WARN("msg=\"router: read failover (pipelined initiator)\" shard=%s "
                          "err=\"%s\"",
                          cx->r->shards[init_server]->name, ij.f.err.msg);
                rc = run_merged_again(cx, init_server, &ij.f.err, format, sink, arg, f);
            } else {
                *f = ij.f;
                rc = ij.rc;
                *fallback = true;
            }
        } else if (!rc && !ij.rc) {
            pthread_mutex_lock(&cx->rd->mu);
            cx->rd->pipelined++;
            pthread_mutex_unlock(&cx->rd->mu);
        }
    }
    rd_rounds_free(&rounds);
    pthread_mutex_destroy(&pr.mu);
    free(lives);
    free(init);
    free(set);
    return rc;
}

/* A merged plan: pipelined when the partials' structures are known, else rd_run_merged, learning
 * them for the next time. */
static int run_merged_best(rd_ctx *cx, ferry_read_plan *p, const char *format,
                           const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                           void *arg, rd_fail *f)
{
    /* extra settings (a GLOBAL subquery's result limits) must bound only the final result, not
     * the initiator's own partials: such plans run the first way */
    if (!merge_pipelinable(cx, p, n_extra))
        return rd_run_merged(cx, p, format, extra, n_extra, sink, arg, f);
    size_t n = p->n_queries, n_groups;
    int *refs = calloc(n + 1, sizeof *refs);
    size_t *first = calloc(n + 1, sizeof *first);
    ferry_buf *keys = calloc(n + 1, sizeof *keys);
    char **structs = calloc(n + 1, sizeof *structs);
    int rc;
    if (!refs || !first || !keys || !structs) {
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    n_groups = merge_groups(p, refs, first);
    bool known = true;
    for (size_t g = 0; g < n_groups; g++) {
        if (merge_struct_key(cx, p, refs[g], &keys[g])) {
            rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            goto out;
        }
        if (known && !rt_qcache_get(cx->rd->structs, keys[g].data, keys[g].len, &structs[g]))
            known = false;
    }
    if (known) {
        bool fallback = false;
        rc = run_merged_pipelined(cx, p, refs, n_groups, structs, format, sink, arg, f,
                                  &fallback);
        if (!fallback)
            goto out;
        FLOG_INFO("msg=\"router: a pipelined merge failed before its answer began; forgetting "
                  "its partial structure and running it again\" err=\"%s\"",
                  f->remote ? f->st.message : f->err.msg);
        for (size_t g = 0; g < n_groups; g++)
            rt_qcache_drop(cx->rd->structs, keys[g].data, keys[g].len);
        memset(f, 0, sizeof *f);
        rc = run_merged_again(cx, SIZE_MAX, NULL, format, sink, arg, f);
        goto out;
    }
    rc = merge_learn(cx, p, first, n_groups, keys, format, sink, arg, f);
out:
    for (size_t g = 0; keys && structs && g < n; g++) {
        ferry_buf_free(&keys[g]);
        free(structs[g]);
    }
    free(refs);
    free(first);
    free(keys);
    free(structs);
    return rc;
}

/* Runs a plan; the final answer goes to sink. */
int rd_exec_plan(rd_ctx *cx, ferry_read_plan *plan, const char *format,
                     const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                     void *arg, rd_fail *f)
{
    rt_reads *rd = cx->rd;
    int rc;
    uint64_t t0 = ferry_clock_ms_u64();
    if (plan->kind == FERRY_PLAN_SINGLE)
        rc = rd_run_single(cx, plan, format, extra, n_extra, sink, arg, f);
    else
        rc = run_merged_best(cx, plan, format, extra, n_extra, sink, arg, f);
    ferry_histogram_observe(&rd->plan_seconds[plan->kind == FERRY_PLAN_SINGLE ? 0 : 1],
                            (double)(ferry_clock_ms_u64() - t0) / 1e3);
    pthread_mutex_lock(&rd->mu);
    if (plan->kind == FERRY_PLAN_SINGLE)
        rd->single++;
    else
        rd->merged++;
    pthread_mutex_unlock(&rd->mu);
    return rc;
}

int rd_run_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, const char *format,
                        const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                        void *arg, rd_fail *f)
{
    ferry_read_plan plan;
    int rc = rd_plan_analyzed(cx, a, &plan, f);
    if (!rc)
        rc = rd_exec_plan(cx, &plan, format, extra, n_extra, sink, arg, f);
    ferry_read_plan_free(&plan);
    return rc;
}

/* The router's read path, the rounds of a merged plan's partial queries (select_int.h): every
 * job of a round runs at once (a thread each), the round's answers are checked, and the slices
 * of a server that could not be reached are planned again on their next replicas as the next
 * round's jobs, until a round needs no failover. Both ways of running a merged plan use it:
 * buffered (rd_run_merged, select_merge.c) and pipelined (select_pipe.c). */
#include "select_int.h"

#include <stdlib.h>
#include <string.h>

/* Runs jobs[from..n) in parallel (a thread each beyond the first) with fn (rd_partial_main). */
static void run_jobs(partial_job **jobs, size_t from, size_t n, void *(*fn)(void *))
{
    size_t m = n - from;
    pthread_t *th = calloc(m, sizeof *th);
    bool *started = calloc(m, sizeof *started);
    for (size_t i = 1; th && started && i < m; i++)
        started[i] = pthread_create(&th[i], NULL, fn, jobs[from + i]) == 0;
    fn(jobs[from]);
    for (size_t i = 1; i < m; i++) {
        if (started && started[i])
            pthread_join(th[i], NULL);
        else
            fn(jobs[from + i]);
    }
    free(th);
    free(started);
}

/* After a round of partial queries: a result over max_partial_bytes, or a server's own query
 * error (the user's: passed on as ClickHouse reported it), fails the query (non-zero, f set).
 * Connection errors are left for round_end's failover. */
static int round_check(rd_ctx *cx, partial_job **jobs, size_t from, size_t n, rd_fail *f)
{
    for (size_t i = from; i < n; i++)
        if (jobs[i]->sink.mem_over)
            return rd_fail_budget(cx, f);
    for (size_t i = from; i < n; i++)
        if (jobs[i]->sink.over)
            return rd_fail_set(f, FERRY_EINVAL, "TOO_MANY_ROWS_OR_BYTES",
                               "the servers' partial results are larger than [router] "
                               "max_partial_bytes (%llu bytes); narrow the query or raise the "
                               "limit",
                               (unsigned long long)cx->rd->max_partial_bytes);
    for (size_t i = from; i < n; i++)
        if (jobs[i]->rc && !rd_conn_error(jobs[i]->rc))
            return rd_fail_from_exec(f, jobs[i]->rc, &jobs[i]->st, &jobs[i]->err);
    return FERRY_OK;
}

/* One more (zeroed) failover plan at the end of r->retries. */
static int retries_push(rd_rounds *r, rd_fail *f)
{
    ferry_read_plan *nr = realloc(r->retries, (r->n_retries + 1) * sizeof *nr);
    if (!nr)
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    r->retries = nr;
    memset(&nr[r->n_retries++], 0, sizeof *nr);
    return FERRY_OK;
}

/* After a round of partial jobs (r->jobs[r->from..r->n)): servers that answered keep their
 * slices; a server that could not be reached has its output dropped and its unanswered slices
 * moved to their next replicas; the queries for exactly those slices are planned (same plan
 * kind) into *retry and added as new jobs at the end of r->jobs. */
static int round_end(rd_ctx *cx, const ferry_read_plan *p, rd_rounds *r, ferry_read_plan *retry,
                     rd_fail *f)
{
    size_t ns = cx->cache->n_servers;
    bool *failed = calloc(ns + 1, sizeof *failed);
    const ferry_err **why = calloc(ns + 1, sizeof *why);
    int rc = FERRY_OK;
    if (!failed || !why) {
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    bool any = false;
    for (size_t i = r->from; i < r->n; i++) {
        partial_job *j = r->jobs[i];
        if (rd_conn_error(j->rc) && !j->sink.over && !j->sink.mem_over) {
            failed[j->server] = any = true;
            why[j->server] = &j->err;
        }
    }
    if (!any)
        goto out;
    for (size_t i = r->from; i < r->n; i++) {
        partial_job *j = r->jobs[i];
        if (!failed[j->server])
            continue;
        j->dropped = true;
        atomic_fetch_sub(&r->total, j->out.len);
        rd_mem_uncharge(cx, j->out.len);
        ferry_buf_free(&j->out);
    }
    for (size_t i = r->from; i < r->n; i++)
        if (!failed[r->jobs[i]->server])
            ferry_rpick_answered(cx->pick, (uint32_t)r->jobs[i]->server);
    for (size_t s = 0; s < ns && !rc; s++)
        if (failed[s])
            rc = rd_fail_over(cx, s, why[s], f);
    if (rc)
        goto out;
    rd_targets tg;
    ferry_err err = {0};
    if (rd_targets_build(cx, cx->planned_mat, true, &tg)) {
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    rc = ferry_sql_plan(cx->a, cx->rd->tables, tg.t, tg.n, retry, &err);
    rd_targets_free(&tg);
    if (rc) {
        rc = rd_fail_set(f, rc, "NOT_IMPLEMENTED", "cannot plan the failover query: %s", err.msg);
        goto out;
    }
    if (retry->kind != p->kind) {
        rc = rd_fail_set(f, FERRY_EINTERNAL, "NOT_IMPLEMENTED",
                         "the failover plan is a %s plan, the query's a %s plan",
                         ferry_plan_kind_name(retry->kind), ferry_plan_kind_name(p->kind));
        goto out;
    }
    for (size_t q = 0; q < retry->n_queries && !rc; q++) {
        ferry_plan_server_query *sq = &retry->queries[q];
        if (sq->server < ns)
            continue; /* the filler (see rd_targets_build) */
        for (size_t k = 0; k < cx->n_repl && !rc; k++)
            rc = rd_replace_all(&sq->sql, cx->repl[2 * k], cx->repl[2 * k + 1]);
        if (!rc)
            rc = rd_job_add(cx, p, &r->jobs, &r->n, &r->cap, sq->server - ns,
                            p->kind == FERRY_PLAN_GATHER ? sq->ref : -1, sq->sql, &r->total);
    }
    if (rc)
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
out:
    free(failed);
    free(why);
    return rc;
}

void rd_rounds_init(rd_rounds *r)
{
    memset(r, 0, sizeof *r);
    atomic_init(&r->total, 0);
}

int rd_rounds_add(rd_ctx *cx, const ferry_read_plan *p, rd_rounds *r, size_t server, int ref,
                  const char *plain, rd_fail *f)
{
    if (rd_job_add(cx, p, &r->jobs, &r->n, &r->cap, server, ref, plain, &r->total))
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    return FERRY_OK;
}

int rd_rounds_run(rd_ctx *cx, const ferry_read_plan *p, rd_rounds *r, const rd_round_hooks *h,
                  rd_fail *f)
{
    int rc = FERRY_OK;
    while (!rc && r->from < r->n) {
        if (h->before)
            h->before(r, h->arg);
        run_jobs(r->jobs, r->from, r->n, h->job_main);
        if (h->after)
            rc = h->after(r, h->arg, f);
        if (!rc)
            rc = round_check(cx, r->jobs, r->from, r->n, f);
        if (!rc)
            rc = retries_push(r, f);
        if (rc)
            break;
        size_t before = r->n;
        rc = round_end(cx, p, r, &r->retries[r->n_retries - 1], f);
        r->from = before;
        if (!rc && h->joined && r->from < r->n)
            rc = h->joined(r, h->arg, f);
    }
    return rc;
}

void rd_rounds_free(rd_rounds *r)
{
    for (size_t i = 0; r->jobs && i < r->n; i++) {
        free(r->jobs[i]->sql);
        ferry_buf_free(&r->jobs[i]->out);
        free(r->jobs[i]);
    }
    free(r->jobs);
    for (size_t i = 0; i < r->n_retries; i++)
        ferry_read_plan_free(&r->retries[i]);
    free(r->retries);
    r->jobs = NULL;
    r->retries = NULL;
    r->n = r->cap = r->from = r->n_retries = 0;
}

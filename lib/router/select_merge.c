/* The router's read path, single and merged plans (select_int.h): a single-server plan streamed
 * through; a merged plan's partial queries run in rounds of jobs, buffered and published, then
 * the initiator's query merges them on one server; GLOBAL subqueries run once into a bounded
 * buffer every server reads. Failover re-plans only what failed. */
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
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/read_pick.h"
#include "ferry/sqlrw.h"
#include "ferry/strutil.h"
#include "qcache.h"

/* Replaces every occurrence of needle in *s (owned) by rep. */
int rd_replace_all(char **s, const char *needle, const char *rep)
{
    size_t nl = strlen(needle);
    if (!strstr(*s, needle))
        return FERRY_OK;
    ferry_buf b = {0};
    const char *p = *s, *hit;
    while ((hit = strstr(p, needle))) {
        ferry_buf_append(&b, p, (size_t)(hit - p));
        ferry_buf_puts(&b, rep);
        p = hit + nl;
    }
    ferry_buf_puts(&b, p);
    char *n = ferry_buf_detach(&b);
    if (!n)
        return FERRY_ENOMEM;
    free(*s);
    *s = n;
    return FERRY_OK;
}

void rd_advertise(rd_ctx *cx, char *out, size_t outsz)
{
    if (cx->rd->rd_advertise[0])
        snprintf(out, outsz, "%s", cx->rd->rd_advertise);
    else
        snprintf(out, outsz, "http://%s:%u", cx->rd->listen_host,
                 (unsigned)ferry_router_port(cx->r));
}

/* The table expression that reads a published partial. */
int rd_partial_expr(rd_ctx *cx, rt_partial *p, ferry_buf *out)
{
    char base[FERRY_URL_MAX], url[FERRY_URL_MAX + 160], sig[65];
    rd_advertise(cx, base, sizeof base);
    /* the signature lets the servers read it without credentials (auth.c) */
    rt_partial_sign(cx->r, p->token, sig);
    snprintf(url, sizeof url, "%s/ferry/partial/%s?sig=%s", base, p->token, sig);
    ferry_buf_puts(out, "url(");
    ferry_sql_quote(url, out);
    return ferry_buf_puts(out, ", 'Native')");
}

int rd_pub_keep(rd_ctx *cx, rt_partial *p)
{
    void *n = realloc(cx->pubs, (cx->n_pubs + 1) * sizeof *cx->pubs);
    if (!n) {
        rd_partial_unpublish(cx->rd, p);
        return FERRY_ENOMEM;
    }
    cx->pubs = n;
    cx->pubs[cx->n_pubs++] = p;
    return FERRY_OK;
}

int rd_buf_sink_write(const void *data, size_t len, void *arg)
{
    buf_sink *s = arg;
    if (s->shared_total) {
        uint64_t t = atomic_fetch_add(s->shared_total, len) + len;
        if (t > s->max) {
            s->over = true;
            return FERRY_EINVAL;
        }
    } else if (s->b->len + len > s->max) {
        s->over = true;
        return FERRY_EINVAL;
    }
    if (s->charged) {
        if (!rt_mem_reserve(s->r, len)) {
            s->mem_over = true;
            return FERRY_ENOMEM;
        }
        atomic_fetch_add(s->charged, len);
    }
    if (!ferry_buf_append(s->b, data, len))
        return FERRY_OK;
    if (s->charged) {
        atomic_fetch_sub(s->charged, len);
        rt_mem_release(s->r, len);
    }
    return FERRY_ENOMEM;
}

void rd_buf_sink_charge(buf_sink *s, const rd_ctx *cx)
{
    s->r = cx->r;
    s->charged = cx->mem_charged;
}

void rd_mem_uncharge(const rd_ctx *cx, size_t len)
{
    if (!cx->mem_charged || !len)
        return;
    atomic_fetch_sub(cx->mem_charged, len);
    rt_mem_release(cx->r, len);
}

int rd_fail_budget(rd_ctx *cx, rd_fail *f)
{
    rt_metrics_refused(cx->r, RT_REFUSED_MEMORY);
    return rd_fail_set(f, FERRY_ENOMEM, "MEMORY_LIMIT_EXCEEDED",
                       "the results the router holds for reads in progress (merged reads' "
                       "partials, GLOBAL subqueries, statements' analyses) and the bodies it "
                       "reads whole reached its [router] memory_budget (%zu bytes); retry "
                       "later or narrow the query",
                       cx->r->memory_budget);
}

/* " SETTINGS a = v, ..." for the statement's settings (all, or only those servers may get). */
static void settings_tail(const ferry_read_plan *p, bool server_only, ferry_buf *out)
{
    bool first = true;
    for (size_t i = 0; i < p->n_settings; i++) {
        if (server_only && ferry_sql_setting_initiator_only(p->settings[i].name))
            continue;
        ferry_buf_printf(out, "%s%s = %s", first ? " SETTINGS " : ", ", p->settings[i].name,
                         p->settings[i].value);
        first = false;
    }
}

void *rd_partial_main(void *arg)
{
    partial_job *j = arg;
    const rd_opts *o = j->cx->o;
    ferry_ch_query q = {.sql = j->sql,
                        .database = o->database,
                        .format = "Native",
                        .settings = o->server,
                        .n_settings = o->n_server,
                        .on_data = rd_buf_sink_write,
                        .on_data_arg = &j->sink};
    j->rc = rd_server_exec(j->cx, j->server, &q, &j->st, &j->err);
    return NULL;
}

static int run_final(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                     const char *format, const ferry_ch_setting *extra, size_t n_extra,
                     ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received);

/* Whether the analysis reads a managed table. */
bool rd_reads_managed(const ferry_sql_analysis *a)
{
    for (size_t i = 0; i < a->n_refs; i++)
        if (a->refs[i].table >= 0)
            return true;
    return false;
}

/* Routes sql (a GLOBAL subquery) into a bounded Native buffer. */
static int run_global(rd_ctx *cx, const char *sql, ferry_buf *out, rd_fail *f)
{
    ferry_sql_analysis a;
    ferry_err err = {0};
    int rc = ferry_sql_analyze(sql, strlen(sql), cx->rd->tables, cx->rd->n_tables, &a, &err);
    if (rc) {
        ferry_sql_analysis_free(&a);
        return rd_fail_set(f, rc, "BAD_ARGUMENTS", "GLOBAL subquery: %s", err.msg);
    }
    char rows[32];
    snprintf(rows, sizeof rows, "%llu", (unsigned long long)cx->rd->global_max_rows);
    ferry_ch_setting lim[] = {{"max_result_rows", rows}, {"result_overflow_mode", "throw"}};
    buf_sink s = {.b = out, .max = cx->rd->global_max_bytes};
    rd_buf_sink_charge(&s, cx);
    rd_ctx sub = *cx;
    sub.depth = cx->depth + 1;
    sub.plan_kind[0] = sub.shards[0] = '\0';
    /* the subquery picks its own replicas */
    sub.a = NULL;
    sub.pick = NULL;
    sub.pick_slices = NULL;
    sub.repl = NULL;
    sub.n_repl = 0;
    if (!a.understood) {
        rc = rd_fail_set(f, FERRY_EUNSUPPORTED, "NOT_IMPLEMENTED",
                         "cannot route the GLOBAL subquery: %s", a.why);
    } else if (sub.depth > 4) {
        rc = rd_fail_set(f, FERRY_EUNSUPPORTED, "NOT_IMPLEMENTED", "GLOBAL subqueries nested too deep");
    } else if (!rd_reads_managed(&a)) {
        /* Only tables every server has (e.g. a dimension table): any server computes it. */
        ferry_read_plan none = {0};
        rc = run_final(&sub, 0, sql, &none, "Native", lim, 2, rd_buf_sink_write, &s, f, NULL);
    } else {
        rc = rd_run_analyzed(&sub, &a, "Native", lim, 2, rd_buf_sink_write, &s, f);
    }
    rd_ctx_pick_free(&sub);
    cx->pubs = sub.pubs; /* what the subquery published lives as long as the request */
    cx->n_pubs = sub.n_pubs;
    ferry_sql_analysis_free(&a);
    if (s.mem_over)
        return rd_fail_budget(cx, f);
    if (s.over)
        return rd_fail_set(f, FERRY_EINVAL, "TOO_MANY_ROWS_OR_BYTES",
                           "the result of a GLOBAL IN / GLOBAL JOIN subquery is larger than [router] "
                           "global_max_bytes (%llu bytes); raise the limit or narrow the subquery",
                           (unsigned long long)cx->rd->global_max_bytes);
    if (rc && f->remote && (f->ch_code == 396 || strstr(f->st.message, "TOO_MANY_ROWS_OR_BYTES")))
        return rd_fail_set(f, FERRY_EINVAL, "TOO_MANY_ROWS_OR_BYTES",
                           "the result of a GLOBAL IN / GLOBAL JOIN subquery has more than [router] "
                           "global_max_rows (%llu) rows; raise the limit or narrow the subquery",
                           (unsigned long long)cx->rd->global_max_rows);
    return rc;
}

/* Remembers a GLOBAL replacement for queries planned again on failover. */
static int repl_keep(rd_ctx *cx, const char *name, const char *expr)
{
    char **n = realloc(cx->repl, 2 * (cx->n_repl + 1) * sizeof *n);
    if (!n)
        return FERRY_ENOMEM;
    cx->repl = n;
    n[2 * cx->n_repl] = strdup(name);
    n[2 * cx->n_repl + 1] = strdup(expr);
    cx->n_repl++;
    return n[2 * cx->n_repl - 2] && n[2 * cx->n_repl - 1] ? FERRY_OK : FERRY_ENOMEM;
}

/* Computes the plan's GLOBAL subqueries and replaces their _data_ names in every query. */
static int materialize_globals(rd_ctx *cx, ferry_read_plan *p, rd_fail *f)
{
    for (size_t g = 0; g < p->n_globals; g++) {
        if (p->globals[g].nested)
            continue;
        ferry_buf *seg = calloc(1, sizeof *seg);
        if (!seg)
            return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        int rc = run_global(cx, p->global_sql[g], seg, f);
        if (rc) {
            ferry_buf_free(seg);
            free(seg);
            return rc;
        }
        ferry_buf expr = {0};
        if (seg->len == 0) {
            /* No rows, so no Native header to read the structure from: the subquery itself,
             * run for its shape only. */
            ferry_buf_printf(&expr, "(SELECT * FROM (%s) LIMIT 0)", p->global_sql[g]);
            ferry_buf_free(seg);
            free(seg);
        } else {
            rt_partial *pub = rd_partial_publish(cx->rd, seg, 1);
            if (!pub || rd_pub_keep(cx, pub)) {
                if (!pub) {
                    ferry_buf_free(seg);
                    free(seg);
                }
                return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            }
            ferry_buf_puts(&expr, "(SELECT * FROM ");
            rd_partial_expr(cx, pub, &expr);
            ferry_buf_puts(&expr, ")");
        }
        int rc2 = expr.data ? repl_keep(cx, p->globals[g].name, ferry_buf_cstr(&expr))
                            : FERRY_ENOMEM;
        for (size_t i = 0; i < p->n_queries && !rc2; i++)
            rc2 = rd_replace_all(&p->queries[i].sql, p->globals[g].name, ferry_buf_cstr(&expr));
        if (!rc2 && p->initiator_sql)
            rc2 = rd_replace_all(&p->initiator_sql, p->globals[g].name, ferry_buf_cstr(&expr));
        ferry_buf_free(&expr);
        if (rc2)
            return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    }
    return FERRY_OK;
}

/* The final query of a plan on server `server`: text + SETTINGS + FORMAT, streamed to sink.
 * *received (may be NULL) gets the answer bytes the server delivered to sink. read_timeout_ms:
 * the longest wait for the next byte (0: [router] shard_timeout). */
int rd_run_final_ex(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                        const char *format, const ferry_ch_setting *extra, size_t n_extra,
                        ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received,
                        long read_timeout_ms)
{
    const rd_opts *o = cx->o;
    ferry_buf text = {0};
    ferry_buf_puts(&text, sql);
    settings_tail(p, false, &text);
    if (p->format)
        ferry_buf_printf(&text, " FORMAT %s", p->format);
    ferry_ch_setting *set = calloc(o->n_all + n_extra + 1, sizeof *set);
    if (received)
        *received = 0;
    if (!text.data || !set) {
        ferry_buf_free(&text);
        free(set);
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < o->n_all; i++)
        set[n++] = o->all[i];
    for (size_t i = 0; i < n_extra; i++)
        set[n++] = extra[i];
    ferry_ch_query q = {.sql = ferry_buf_cstr(&text),
                        .database = o->database,
                        .query_id = cx->depth == 0 ? o->query_id : NULL,
                        .format = p->format ? p->format : format,
                        .settings = set,
                        .n_settings = n,
                        .on_data = sink,
                        .on_data_arg = arg,
                        .read_timeout_ms = read_timeout_ms};
    ferry_ch_status st;
    ferry_err err = {0};
    int rc = rd_server_exec(cx, server, &q, &st, &err);
    if (received)
        *received = st.bytes_received;
    if (rc)
        rd_fail_from_exec(f, rc, &st, &err);
    ferry_buf_free(&text);
    free(set);
    return rc;
}

static int run_final(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                     const char *format, const ferry_ch_setting *extra, size_t n_extra,
                     ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received)
{
    return rd_run_final_ex(cx, server, sql, p, format, extra, n_extra, sink, arg, f, received, 0);
}

/* Adds a partial job (jobs grow by pointer: a job's sink points into the job). */
int rd_job_add(rd_ctx *cx, const ferry_read_plan *p, partial_job ***jobs, size_t *n,
                   size_t *cap, size_t server, int ref, const char *plain,
                   atomic_uint_fast64_t *total)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        partial_job **nj = realloc(*jobs, c * sizeof *nj);
        if (!nj)
            return FERRY_ENOMEM;
        *jobs = nj;
        *cap = c;
    }
    partial_job *j = calloc(1, sizeof *j);
    if (!j)
        return FERRY_ENOMEM;
    ferry_buf b = {0};
    ferry_buf_puts(&b, plain);
    settings_tail(p, true, &b);
    j->cx = cx;
    j->server = server;
    j->ref = ref;
    j->plain = plain;
    j->sql = ferry_buf_detach(&b);
    j->sink = (buf_sink){.b = &j->out, .max = cx->rd->max_partial_bytes, .shared_total = total};
    rd_buf_sink_charge(&j->sink, cx);
    (*jobs)[(*n)++] = j;
    return j->sql ? FERRY_OK : FERRY_ENOMEM;
}

/* Runs the partial queries in parallel (failing over per server), publishes them and runs the
 * initiator query. */
int rd_run_merged(rd_ctx *cx, ferry_read_plan *p, const char *format,
                      const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                      void *arg, rd_fail *f)
{
    size_t ns = cx->cache->n_servers;
    rd_rounds rounds;
    rd_rounds_init(&rounds);
    const rd_round_hooks hooks = {.job_main = rd_partial_main};
    char *init = NULL;
    int rc = FERRY_OK;
    for (size_t i = 0; i < p->n_queries && !rc; i++)
        rc = rd_rounds_add(cx, p, &rounds, p->queries[i].server,
                           p->kind == FERRY_PLAN_GATHER ? p->queries[i].ref : -1,
                           p->queries[i].sql, f);
    if (rc || (rc = rd_rounds_run(cx, p, &rounds, &hooks, f)))
        goto out;
    partial_job **jobs = rounds.jobs;
    size_t n = rounds.n;
    init = strdup(p->initiator_sql);
    if (!init) {
        rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    /* One published partial per placeholder: {{ferry.partial}}, or {{ferry.rows.N}} per
     * managed reference of a gather plan. */
    for (size_t i = 0; i < n; i++) {
        if (jobs[i]->dropped || jobs[i]->grouped)
            continue;
        int ref = jobs[i]->ref;
        size_t cnt = 0, bytes = 0;
        for (size_t k = i; k < n; k++)
            if (!jobs[k]->dropped && !jobs[k]->grouped && jobs[k]->ref == ref)
                cnt++, bytes += jobs[k]->out.len;
        ferry_buf expr = {0};
        if (bytes == 0) {
            ferry_buf_printf(&expr, "(SELECT * FROM (%s) LIMIT 0)", jobs[i]->plain);
        } else {
            ferry_buf *segs = calloc(cnt, sizeof *segs);
            if (!segs) {
                rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                goto out;
            }
            size_t m = 0;
            for (size_t k = i; k < n; k++)
                if (!jobs[k]->dropped && !jobs[k]->grouped && jobs[k]->ref == ref) {
                    segs[m++] = jobs[k]->out;
                    memset(&jobs[k]->out, 0, sizeof jobs[k]->out);
                }
            rt_partial *pub = rd_partial_publish(cx->rd, segs, m);
            if (!pub || rd_pub_keep(cx, pub)) {
                if (!pub) {
                    for (size_t k = 0; k < m; k++)
                        ferry_buf_free(&segs[k]);
                    free(segs);
                }
                rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                goto out;
            }
            rd_partial_expr(cx, pub, &expr);
        }
        char ph[64];
        if (ref >= 0)
            snprintf(ph, sizeof ph, "{{ferry.rows.%d}}", ref);
        else
            snprintf(ph, sizeof ph, "%s", FERRY_PLAN_PARTIAL);
        rc = expr.data ? rd_replace_all(&init, ph, ferry_buf_cstr(&expr)) : FERRY_ENOMEM;
        ferry_buf_free(&expr);
        if (rc) {
            rc = rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            goto out;
        }
        for (size_t k = i; k < n; k++)
            if (!jobs[k]->dropped && jobs[k]->ref == ref)
                jobs[k]->grouped = true;
    }
    /* The initiator: the first server of the plan that answered keeps it predictable (the
     * server with the largest partial share would save little: every partial goes through the
     * router). When it cannot be reached before any byte of the answer, the next one. */
    size_t tried = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < (pass ? ns : n); k++) {
            size_t sv = pass ? k : jobs[k]->server;
            if ((!pass && jobs[k]->dropped) || ferry_rpick_server_failed(cx->pick, (uint32_t)sv))
                continue;
            uint64_t got = 0;
            tried++;
            rc = run_final(cx, sv, init, p, format, extra, n_extra, sink, arg, f, &got);
            if (!rd_conn_error(rc) || got)
                goto out;
            FLOG_WARN("msg=\"router: read failover (initiator)\" shard=%s err=\"%s\"",
                      cx->r->shards[sv]->name, f->err.msg);
            ferry_rpick_fail(cx->pick, (uint32_t)sv, NULL);
            pthread_mutex_lock(&cx->rd->sel_mu);
            cx->rd->failovers++;
            pthread_mutex_unlock(&cx->rd->sel_mu);
        }
    }
    if (!tried)
        rc = rd_fail_set(f, FERRY_ECONNECT, "ALL_CONNECTION_TRIES_FAILED",
                         "no server is left to merge the partial results");
out:
    rd_rounds_free(&rounds);
    free(init);
    return rc;
}

/* Plans the analysed query (cx->a) over the replicas currently picked (cx->pick); GLOBAL
 * subqueries of a plan that needs several servers are computed and published. */
int rd_plan_for_pick(rd_ctx *cx, ferry_read_plan *plan, rd_fail *f)
{
    rt_reads *rd = cx->rd;
    rd_targets tg;
    ferry_err err = {0};
    memset(plan, 0, sizeof *plan);
    if (rd_targets_build(cx, false, false, &tg))
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    int rc = ferry_sql_plan(cx->a, rd->tables, tg.t, tg.n, plan, &err);
    rd_targets_free(&tg);
    cx->planned_mat = false;
    if (!rc && plan->kind != FERRY_PLAN_SINGLE && plan->n_globals) {
        ferry_read_plan_free(plan);
        memset(plan, 0, sizeof *plan);
        if (rd_targets_build(cx, true, false, &tg))
            return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        rc = ferry_sql_plan(cx->a, rd->tables, tg.t, tg.n, plan, &err);
        rd_targets_free(&tg);
        if (rc)
            return rd_fail_set(f, rc, "NOT_IMPLEMENTED", "cannot plan the query: %s", err.msg);
        cx->planned_mat = true;
        rc = materialize_globals(cx, plan, f);
        if (rc)
            return rc;
    } else if (rc) {
        return rd_fail_set(f, rc, "NOT_IMPLEMENTED", "cannot plan the query: %s", err.msg);
    }
    if (plan->n_queries == 0)
        return rd_fail_set(f, FERRY_EINTERNAL, "NOT_IMPLEMENTED", "the plan has no server query");
    return FERRY_OK;
}

/* Checks the query against the router's rules, picks a replica per slice and plans it; GLOBAL
 * subqueries of a plan that needs several servers are computed and published. *plan is the
 * caller's to free. */
int rd_plan_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, ferry_read_plan *plan,
                         rd_fail *f)
{
    rt_reads *rd = cx->rd;
    rd_cache *c = cx->cache;
    int rc;
    memset(plan, 0, sizeof *plan);
    for (size_t i = 0; i < a->n_refs; i++) {
        const ferry_sql_ref *ref = &a->refs[i];
        if (ref->table < 0)
            continue;
        const ferry_sql_table *t = &rd->tables[ref->table];
        if (!ref->has_filter && !rd->allow_fanout)
            return rd_fail_set(f, FERRY_EINVAL, "BAD_ARGUMENTS",
                               "the query reads the managed table %s.%s without a tenant filter, "
                               "which would fan out to every server, and [router] allow_fanout = "
                               "false; add `%s = 'T'` or `%s IN ('T1', ...)` to its WHERE",
                               t->database ? t->database : "default", t->name, t->tenant_column,
                               t->tenant_column);
        for (size_t u = 0; u < c->n_unrouted; u++) {
            bool reads = !ref->has_filter;
            for (size_t k = 0; k < ref->n_tenants && !reads; k++)
                reads = !strcmp(ref->tenants[k], c->unrouted[u]);
            if (reads)
                return rd_fail_set(f, FERRY_ENOTFOUND, "ALL_CONNECTION_TRIES_FAILED",
                                   "tenant '%s' has a slice that no shard in the router's config "
                                   "serves (routing version %llu); the answer would miss its rows",
                                   c->unrouted[u], (unsigned long long)c->snap->version);
        }
        for (size_t u = 0; u < c->n_held; u++) {
            bool reads = !ref->has_filter;
            for (size_t k = 0; k < ref->n_tenants && !reads; k++)
                reads = !strcmp(ref->tenants[k], c->held[u]);
            if (reads) {
                rd_fail_set(f, FERRY_ETIMEOUT, "TIMEOUT_EXCEEDED",
                            "tenant '%s' has a slice that move %s is publishing (routing version "
                            "%llu) and it was not done within [router] publish_wait; no server "
                            "holds all of its rows until then (resume the move if it stopped: "
                            "ferry move --resume %s)",
                            c->held[u], c->held_move[u], (unsigned long long)c->snap->version,
                            c->held_move[u]);
                f->held = true;
                return f->rc;
            }
        }
    }
    if (!c->n_servers)
        return rd_fail_set(f, FERRY_EINVAL, "NOT_IMPLEMENTED", "the router has no shards");
    if (rd_pick_build(cx, a))
        return rd_fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    rc = rd_plan_for_pick(cx, plan, f);
    if (rc)
        return rc;
    if (cx->depth == 0) {
        snprintf(cx->plan_kind, sizeof cx->plan_kind, "%s", ferry_plan_kind_name(plan->kind));
        size_t used = 0;
        for (size_t i = 0; i < plan->n_queries; i++) {
            const char *name = cx->r->shards[plan->queries[i].server]->name;
            bool seen = false;
            for (size_t k = 0; k < i && !seen; k++)
                seen = plan->queries[k].server == plan->queries[i].server;
            if (!seen && used + strlen(name) + 2 < sizeof cx->shards)
                used += (size_t)snprintf(cx->shards + used, sizeof cx->shards - used, "%s%s",
                                         used ? "," : "", name);
        }
    }
    return FERRY_OK;
}

/* Runs a single-server plan; when its server cannot be reached before any byte of the answer
 * was delivered, its slices move to their next replicas and the query is planned again (it may
 * then need several servers). */
int rd_run_single(rd_ctx *cx, ferry_read_plan *plan, const char *format,
                      const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                      void *arg, rd_fail *f)
{
    size_t ns = cx->cache->n_servers;
    for (;;) {
        if (plan->kind != FERRY_PLAN_SINGLE)
            return rd_run_merged(cx, plan, format, extra, n_extra, sink, arg, f);
        size_t sv = plan->queries[0].server;
        uint64_t got = 0;
        int rc = run_final(cx, sv, plan->queries[0].sql, plan, format, extra, n_extra, sink, arg,
                           f, &got);
        if (!rd_conn_error(rc) || got || !cx->pick)
            return rc;
        ferry_err why = f->err;
        if (ferry_rpick_count(cx->pick) == 0) {
            /* the query reads no slice: any server answers it */
            ferry_rpick_fail(cx->pick, (uint32_t)sv, NULL);
            size_t next = 0;
            while (next < ns && ferry_rpick_server_failed(cx->pick, (uint32_t)next))
                next++;
            if (next == ns)
                return rc;
            FLOG_WARN("msg=\"router: read failover\" shard=%s slices=0 err=\"%s\"",
                      cx->r->shards[sv]->name, why.msg);
            plan->queries[0].server = next;
            continue;
        }
        rc = rd_fail_over(cx, sv, &why, f);
        if (rc)
            return rc;
        ferry_read_plan_free(plan);
        rc = rd_plan_for_pick(cx, plan, f);
        if (rc)
            return rc;
    }
}

/* The router's read path (docs/routing.md, "Reads"): a SELECT over managed tables is analysed and
 * planned with lib/sql against the router's routing snapshot, then executed:
 *
 *   single   one server serves everything the query reads: its rewritten query (with the
 *            client's SETTINGS and FORMAT put back) is sent on a pooled keep-alive client and
 *            the answer streamed back;
 *   merged   several servers: every server's partial query runs in parallel (Native format,
 *            buffered in the router, bounded by [router] max_partial_bytes); the partials are
 *            published at GET /ferry/partial/<token> and the plan's initiator query, with its
 *            placeholders replaced by url('<router>/ferry/partial/<token>', 'Native'), runs on
 *            one of the servers, which merges them with ClickHouse's own machinery
 *            (-State/-Merge, ORDER BY/LIMIT, joins ...). Its answer is streamed back.
 *            From a statement's second run on (its partials' structure learned), the merge is
 *            pipelined: the initiator starts with the partial queries and reads their answers
 *            while they arrive (run_merged_pipelined; failover kept exact there).
 *   GLOBAL   the right-hand side of GLOBAL IN / JOIN is routed like any query, once, into a
 *            bounded buffer ([router] global_max_rows / global_max_bytes) and read by every
 *            server through the same url() mechanism.
 *
 * The per-snapshot data the planner needs (each server's served slices) is built once per
 * routing snapshot and shared by the requests that use it. */
#include "select_int.h"

#include <ctype.h>
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

/* ---- the HTTP side: one routed SELECT, streamed -------------------------------------------- */

/* Ends the request's in-flight registration (once): its servers are no longer read. */
static void read_done(rd_stream *s)
{
    if (s->inflight)
        rt_inflight_done(s->r, s->cx.cache->snap->version);
    s->inflight = false;
}

static int pipe_sink(const void *data, size_t len, void *arg)
{
    rd_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    if (!s->started) {
        s->started = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->mu);
    const char *p = data;
    while (len) {
        ssize_t w = write(s->pipe_wr, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return FERRY_EIO; /* the client went away */
        p += w;
        len -= (size_t)w;
    }
    return FERRY_OK;
}

static void deadline_fail(rd_ctx *cx, rd_fail *f);

static void *stream_main(void *arg)
{
    rd_stream *s = arg;
    int rc = rd_exec_plan(&s->cx, &s->plan, s->o.default_format, NULL, 0, pipe_sink, s, &s->fail);
    if (rc)
        deadline_fail(&s->cx, &s->fail);
    read_done(s);
    for (size_t i = 0; i < s->cx.n_pubs; i++)
        rd_partial_unpublish(s->cx.rd, s->cx.pubs[i]);
    free(s->cx.pubs);
    s->cx.pubs = NULL;
    s->cx.n_pubs = 0;
    /* the buffered results are gone with the run */
    rt_mem_release(s->r, atomic_exchange(&s->mem_charged, 0));
    if (rc && s->started)
        FLOG_WARN("msg=\"router: a routed query failed after its answer began\" err=\"%s\"",
                  s->fail.remote ? s->fail.st.message : s->fail.err.msg);
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    s->finished = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    close(s->pipe_wr);
    s->pipe_wr = -1;
    return NULL;
}

static void stream_free(void *arg)
{
    rd_stream *s = arg;
    if (!s)
        return;
    if (s->pipe_rd >= 0)
        close(s->pipe_rd); /* a worker still writing fails and stops */
    if (s->th_started)
        pthread_join(s->th, NULL);
    if (s->pipe_wr >= 0)
        close(s->pipe_wr);
    read_done(s);
    for (size_t i = 0; i < s->cx.n_pubs; i++)
        rd_partial_unpublish(s->cx.rd, s->cx.pubs[i]);
    free(s->cx.pubs);
    rd_ctx_pick_free(&s->cx);
    rd_cache_put(s->cx.cache);
    ferry_read_plan_free(&s->plan);
    ferry_buf_free(&s->small);
    rt_mem_release(s->r, atomic_exchange(&s->mem_charged, 0));
    ferry_sql_analysis_free(&s->a);
    rt_mem_release(s->r, s->a_charged);
    rt_deadline_end(s->r->limits, s->cx.deadline);
    free(s->params);
    rd_opts_free(&s->o);
    free(s->sql);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}

static ssize_t stream_read(void *cls, char *buf, size_t max)
{
    rd_stream *s = cls;
    for (;;) {
        ssize_t n = read(s->pipe_rd, buf, max);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 0)
            return n < 0 ? -1 : n;
        pthread_mutex_lock(&s->mu);
        while (!s->finished)
            pthread_cond_wait(&s->cond, &s->mu);
        int rc = s->rc;
        pthread_mutex_unlock(&s->mu);
        return rc ? -1 : 0; /* a broken answer must not look complete */
    }
}

static const char *content_type_for(const char *format)
{
    if (!format || !*format)
        return "text/tab-separated-values; charset=UTF-8";
    static const struct {
        const char *prefix;
        const char *type;
    } types[] = {{"JSONEachRow", "application/x-ndjson; charset=UTF-8"},
                 {"JSONLines", "application/x-ndjson; charset=UTF-8"},
                 {"NDJSON", "application/x-ndjson; charset=UTF-8"},
                 {"JSON", "application/json; charset=UTF-8"},
                 {"TabSeparated", "text/tab-separated-values; charset=UTF-8"},
                 {"TSV", "text/tab-separated-values; charset=UTF-8"},
                 {"CSV", "text/csv; charset=UTF-8; header=absent"},
                 {"Pretty", "text/plain; charset=UTF-8"},
                 {"Vertical", "text/plain; charset=UTF-8"},
                 {"XML", "application/xml; charset=UTF-8"}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strncasecmp(format, types[i].prefix, strlen(types[i].prefix)))
            return types[i].type;
    return "application/octet-stream";
}

/* Whether the statement's answer is expected to be small and cheap to produce again: the outer
 * SELECT has a LIMIT, or neither GROUP BY nor ORDER BY (a plain aggregate, or rows that stream
 * as they are read, so an oversized first attempt costs little). */
static bool small_answer(const ferry_sql_analysis *a)
{
    for (size_t i = 0; i < a->n_levels; i++) {
        const ferry_sql_level *l = &a->levels[i];
        if (l->parent != SIZE_MAX)
            continue;
        if (l->cl[FERRY_CL_LIMIT].present)
            continue;
        if (l->cl[FERRY_CL_GROUP_BY].present || l->cl[FERRY_CL_ORDER_BY].present)
            return false;
    }
    return true;
}

/* X-Ferry-Explain: the plan this request got (routing version, kind, the replica picked per
 * slice as the per-server queries show, the initiator's query), as JSON, instead of running it.
 * A read held by a move being published is reported at once (held: true), not waited for. */
static void respond_explain(ferry_http_req *req, rd_ctx *cx, const ferry_read_plan *plan,
                            const rd_fail *held)
{
    json_t *o = json_object();
    json_t *qs = json_array();
    if (!o || !qs) {
        ferry_http_respond(req, 500, "text/plain", "out of memory\n", 14);
        goto out;
    }
    json_object_set_new(o, "routing_version", json_integer((json_int_t)cx->cache->snap->version));
    if (cx->scope) {
        /* the restriction every managed reference got (the per-server queries show it) */
        json_t *ts = json_array();
        for (size_t i = 0; ts && i < cx->scope->n_tenants; i++)
            json_array_append_new(ts, json_string(cx->scope->tenants[i]));
        json_object_set_new(o, "restricted_to_tenants", ts ? ts : json_null());
    }
    json_object_set_new(o, "held", json_boolean(held != NULL));
    if (held) {
        json_object_set_new(o, "why", json_string(held->err.msg));
    } else {
        json_object_set_new(o, "plan", json_string(ferry_plan_kind_name(plan->kind)));
        json_object_set_new(o, "why", json_string(plan->why));
        for (size_t i = 0; i < plan->n_queries; i++) {
            json_t *q = json_object();
            json_object_set_new(q, "server",
                                json_string(cx->r->shards[plan->queries[i].server]->name));
            json_object_set_new(q, "sql", json_string(plan->queries[i].sql));
            json_array_append_new(qs, q);
        }
        json_object_set_new(o, "initiator",
                            plan->initiator_sql ? json_string(plan->initiator_sql) : json_null());
        json_t *gl = json_array();
        for (size_t i = 0; gl && i < plan->n_globals; i++)
            json_array_append_new(gl, json_string(plan->global_sql[i]));
        json_object_set_new(o, "globals", gl ? gl : json_null());
    }
    json_object_set(o, "queries", qs);
    char *text = json_dumps(o, JSON_INDENT(2));
    if (text) {
        ferry_http_respond(req, 200, "application/json", text, strlen(text));
        free(text);
        goto out;
    }
    ferry_http_respond(req, 500, "text/plain", "out of memory\n", 14);
out:
    json_decref(qs);
    json_decref(o);
}

/* A read that failed because its deadline passed (the KILLs made the servers' queries fail):
 * the client gets ClickHouse's TIMEOUT_EXCEEDED rather than the cancellation. */
static void deadline_fail(rd_ctx *cx, rd_fail *f)
{
    if (!rt_deadline_expired(cx->deadline))
        return;
    rd_fail_set(f, FERRY_ETIMEOUT, "TIMEOUT_EXCEEDED",
                "Timeout exceeded: elapsed %.3f seconds, maximum: %.3f (the user's "
                "max_execution_time; the query was cancelled on every shard)",
                (double)rt_deadline_ms(cx->deadline) / 1000.0,
                (double)rt_deadline_ms(cx->deadline) / 1000.0);
}

/* A bound user's scope for this request: the principal's tenants and tables, the request's
 * database and query parameters. false (answered) when the request names a database that holds
 * no managed table (unqualified names would read another database's tables). */
static bool scope_for(rd_stream *s, ferry_http_req *req, const rt_principal *who)
{
    rt_reads *rd = s->r->reads;
    s->scope = who->scope;
    const char *db = s->o.database && *s->o.database ? s->o.database : "default";
    bool known = !s->o.database || !*s->o.database;
    for (size_t i = 0; i < rd->n_tables && !known; i++)
        known = rd->tables[i].database && !strcmp(rd->tables[i].database, db);
    if (!known) {
        rd_fail f = {0};
        rd_fail_set(&f, FERRY_EACCESS, "ACCESS_DENIED",
                    "user %s is bound to tenants and may only use the databases of managed tables "
                    "(not %s)", who->name, db);
        rd_respond_fail(req, &f);
        return false;
    }
    s->scope.database = db;
    s->params = calloc(s->o.n_all + 1, sizeof *s->params);
    if (!s->params) {
        rd_fail f = {0};
        rd_fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        rd_respond_fail(req, &f);
        return false;
    }
    for (size_t i = 0; i < s->o.n_all; i++)
        if (!strncmp(s->o.all[i].name, "param_", 6))
            s->params[s->scope.n_params++] =
                (ferry_sql_param){s->o.all[i].name + 6, s->o.all[i].value};
    s->scope.params = s->params;
    return true;
}

size_t rd_analysis_estimate(const char *t, size_t len)
{
    size_t n = 0;
    int prev = -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '\'' || c == '"' || c == '`') {
            for (i++; i < len && (unsigned char)t[i] != c; i++)
                if (t[i] == '\\')
                    i++;
            n++;
            prev = -1;
            continue;
        }
        int cls = c < 0x80 && (isalnum(c) || c == '_') ? 1 : isspace(c) ? 2 : 0;
        if (cls == 0 || cls != prev)
            n++;
        prev = cls;
    }
    /* the token vector starts at 64 and doubles */
    return (n < 64 ? 64 : 2 * n) * sizeof(ferry_tok) + 2 * (n + 1) * sizeof(size_t);
}

size_t rd_analysis_bytes(const ferry_sql_analysis *a)
{
    return a->toks.cap * sizeof(ferry_tok) + 2 * (a->n_sig + 1) * sizeof(size_t);
}

/* The text of a plan's queries (the per-server queries, the initiator's, the GLOBAL ones). */
static size_t plan_bytes(const ferry_read_plan *p)
{
    size_t n = p->initiator_sql ? strlen(p->initiator_sql) : 0;
    for (size_t i = 0; i < p->n_queries; i++)
        n += p->queries[i].sql ? strlen(p->queries[i].sql) : 0;
    for (size_t i = 0; i < p->n_globals; i++)
        n += p->global_sql && p->global_sql[i] ? strlen(p->global_sql[i]) : 0;
    return n;
}

/* A routed read keeps the request's text (the analysis points into it); a statement that is
 * not routed gets it back for the passthrough. */
static bool give_back(rd_stream *s, ferry_buf *text, ferry_buf *held)
{
    *text = *held;
    s->sql = NULL;
    stream_free(s);
    return false;
}

static bool select_route(ferry_router *r, ferry_http_req *req, rt_principal *who,
                         ferry_buf *text, bool *may_pass)
{
    rt_reads *rd = r->reads;
    bool bound = who && !who->admin;
    *may_pass = !bound;
    if (!rd || !rd->n_tables)
        return false;
    const char *ct = ferry_http_header(req, "Content-Type");
    if (ct && !strncasecmp(ct, "multipart/", 10)) {
        if (bound) {
            rd_fail f = {0};
            rd_fail_set(&f, FERRY_EACCESS, "ACCESS_DENIED",
                        "user %s is bound to tenants: the client's own external data (a multipart "
                        "body) is not routed", who->name);
            rd_respond_fail(req, &f);
            return true;
        }
        return false; /* the client's own external data: not routed */
    }
    if (!text->data)
        return false;
    /* Only SELECT-like statements are analysed (a large DDL or INSERT body is not tokenized):
     * classified as the router classifies bodies (ClickHouse's comment rules; it stops at the
     * first word). */
    ferry_rt_insert probe;
    bool more = false;
    enum ferry_rt_stmt kind = ferry_rt_classify(text->data, text->len, true, &probe, &more);
    ferry_rt_insert_free(&probe);
    if (kind != FERRY_RT_STMT_SELECT)
        return false;
    rd_stream *s = calloc(1, sizeof *s);
    if (!s)
        return false;
    s->r = r;
    s->cx.r = r;
    s->pipe_rd = s->pipe_wr = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    /* the text is the request's buffer (charged to the budget by the request until it ends),
     * taken rather than copied */
    ferry_buf held = *text;
    memset(text, 0, sizeof *text);
    size_t len = held.len;
    s->sql = held.data;
    ferry_err err = {0};
    rd_fail f = {0};
    /* The analysis holds about 40 bytes a token (a long IN list: ten times its text): charged
     * to the memory budget before it runs, by an upper estimate, then by what it holds. */
    size_t est = rd_analysis_estimate(s->sql, len);
    if (!rt_mem_reserve(r, est)) {
        rd_fail_budget(&s->cx, &f);
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    s->a_charged = est;
    int rc = ferry_sql_analyze(s->sql, len, rd->tables, rd->n_tables, &s->a, &err);
    size_t used = rd_analysis_bytes(&s->a);
    if (used > est && !rt_mem_reserve(r, used - est)) {
        rd_fail_budget(&s->cx, &f);
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    if (used < est)
        rt_mem_release(r, est - used);
    s->a_charged = used;
    if (rc && bound) {
        /* never passed through unchecked: answered as the syntax error it is */
        rd_fail_set(&f, rc, "SYNTAX_ERROR", "%s", err.msg);
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    if (rc || (!bound && !rd_reads_managed(&s->a))) {
        /* Not valid SQL (the server reports the error as ClickHouse does) or no managed table:
         * unchanged to the passthrough server. */
        return give_back(s, text, &held);
    }
    if (rd_opts_collect(req, &s->o)) {
        rd_fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of resources");
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    if (bound) {
        /* what a bound user may name (ACCESS_DENIED otherwise); what passes is restricted to
         * its tenants' slices in planning (cx.scope) */
        if (!scope_for(s, req, who)) {
            stream_free(s);
            return true;
        }
        if (ferry_sql_scope_check(&s->a, rd->tables, rd->n_tables, &s->scope, &err)) {
            rd_fail_set(&f, FERRY_EACCESS, err.code == FERRY_ENOMEM ? "CANNOT_ALLOCATE_MEMORY"
                                                                 : "ACCESS_DENIED",
                     "user %s: %s", who->name, err.msg);
            rd_respond_fail(req, &f);
            stream_free(s);
            return true;
        }
        if (!rd_reads_managed(&s->a)) {
            *may_pass = true; /* only the tables its user lists: as each server has them */
            return give_back(s, text, &held);
        }
        s->cx.scope = &s->scope;
    }
    if (!s->a.understood) {
        rd_fail_set(&f, FERRY_EUNSUPPORTED, "NOT_IMPLEMENTED",
                    "this query reads a managed table but cannot be routed: %s", s->a.why);
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    s->cx.r = r;
    s->cx.rd = rd;
    s->cx.o = &s->o;
    s->cx.mem_charged = &s->mem_charged;
    bool explain = ferry_http_header(req, "X-Ferry-Explain") != NULL;
    if (who && who->user && who->user->rec.max_execution_ms && !explain)
        s->cx.deadline = rt_deadline_start(r->limits, who->user->rec.max_execution_ms);
    /* Plan with the current table; a query reading a slice that a move is publishing waits for
     * a newer table (rt_read_set: no server holds the slice exactly then), at most
     * publish_wait. Nothing was sent to a server before planning succeeds. */
    bool failed;
    uint64_t hold_deadline = ferry_clock_ms_u64() + (uint64_t)r->publish_wait_ms;
    if (s->cx.deadline && hold_deadline > ferry_clock_ms_u64() + rt_deadline_ms(s->cx.deadline))
        hold_deadline = ferry_clock_ms_u64() + rt_deadline_ms(s->cx.deadline);
    for (;;) {
        if (!(s->cx.cache = rd_cache_get(r, rd))) {
            rd_fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of resources");
            rd_respond_fail(req, &f);
            stream_free(s);
            return true;
        }
        s->inflight = true;
        failed = rd_plan_analyzed(&s->cx, &s->a, &s->plan, &s->fail) != FERRY_OK;
        if (!failed || !s->fail.held || explain || ferry_clock_ms_u64() >= hold_deadline)
            break;
        uint64_t held_version = s->cx.cache->snap->version;
        read_done(s);
        rd_cache_put(s->cx.cache);
        s->cx.cache = NULL;
        ferry_read_plan_free(&s->plan);
        memset(&s->plan, 0, sizeof s->plan);
        memset(&s->fail, 0, sizeof s->fail);
        s->cx.plan_kind[0] = s->cx.shards[0] = '\0';
        rt_wait_newer(r, held_version, hold_deadline);
    }
    if (!failed) {
        /* the rewritten queries: a copy of the statement (or more) per server */
        size_t q = plan_bytes(&s->plan);
        if (!rt_mem_reserve(r, q)) {
            rd_fail_budget(&s->cx, &f);
            rd_respond_fail(req, &f);
            stream_free(s);
            return true;
        }
        s->a_charged += q;
    }
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)s->cx.cache->snap->version);
    ferry_http_add_header(req, "X-Ferry-Routing-Version", v);
    if (s->cx.plan_kind[0])
        ferry_http_add_header(req, "X-Ferry-Plan", s->cx.plan_kind);
    if (s->cx.shards[0])
        ferry_http_add_header(req, "X-Ferry-Shards", s->cx.shards);
    if (explain && (!failed || s->fail.held)) {
        respond_explain(req, &s->cx, &s->plan, failed ? &s->fail : NULL);
        stream_free(s);
        return true;
    }
    const char *fmt = s->a.format ? s->a.format : s->o.default_format;
    if (!failed && s->plan.kind == FERRY_PLAN_SINGLE && small_answer(&s->a)) {
        /* The fast path: one server, an answer expected to be small: run it on this thread
         * (no thread hand-offs) into memory. An answer beyond SMALL_ANSWER_MAX is run again,
         * streamed. */
        buf_sink b = {.b = &s->small, .max = SMALL_ANSWER_MAX};
        rd_buf_sink_charge(&b, &s->cx);
        rc = rd_exec_plan(&s->cx, &s->plan, s->o.default_format, NULL, 0, rd_buf_sink_write, &b,
                          &s->fail);
        if (rc && b.mem_over)
            rd_fail_budget(&s->cx, &s->fail);
        else if (rc)
            deadline_fail(&s->cx, &s->fail);
        if (!rc || !b.over) {
            if (!rc) {
                if (fmt)
                    ferry_http_add_header(req, "X-ClickHouse-Format", fmt);
                if (s->o.query_id)
                    ferry_http_add_header(req, "X-ClickHouse-Query-Id", s->o.query_id);
                ferry_http_respond(req, 200, content_type_for(fmt), s->small.data,
                                   s->small.len);
            } else {
                rd_respond_fail(req, &s->fail);
            }
            stream_free(s);
            return true;
        }
        memset(&s->fail, 0, sizeof s->fail);
        rd_mem_uncharge(&s->cx, s->small.len);
        ferry_buf_free(&s->small);
    }
    if (failed) {
        if (s->fail.held)
            deadline_fail(&s->cx, &s->fail);
        rd_respond_fail(req, &s->fail);
        stream_free(s);
        return true;
    }
    int fds[2];
    if (pipe(fds) != 0) {
        rd_fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of resources");
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    s->pipe_rd = fds[0];
    s->pipe_wr = fds[1];
    s->th_started = pthread_create(&s->th, NULL, stream_main, s) == 0;
    if (!s->th_started) {
        rd_fail_set(&f, FERRY_ENOMEM, "CANNOT_SCHEDULE_TASK", "cannot start a thread");
        rd_respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->started && !s->finished)
        pthread_cond_wait(&s->cond, &s->mu);
    failed = !s->started && s->rc;
    pthread_mutex_unlock(&s->mu);
    if (failed) {
        rd_respond_fail(req, &s->fail);
        stream_free(s);
        return true;
    }
    if (fmt)
        ferry_http_add_header(req, "X-ClickHouse-Format", fmt);
    if (s->o.query_id)
        ferry_http_add_header(req, "X-ClickHouse-Query-Id", s->o.query_id);
    ferry_http_respond_stream(req, 200, content_type_for(fmt), stream_read, s, stream_free);
    return true;
}

bool rt_select_route(ferry_router *r, ferry_http_req *req, rt_principal *who, ferry_buf *text,
                     bool *may_pass)
{
    if (select_route(r, req, who, text, may_pass))
        return true;
    if (!*may_pass)
        return false; /* the caller refuses it */
    if (!ferry_http_header(req, "X-Ferry-Explain"))
        return false;
    /* An explained statement is never run, also when it is not routed. */
    static const char passthrough[] =
        "{\n  \"held\": false,\n  \"plan\": \"passthrough\",\n  \"why\": \"reads no managed "
        "table (or is not valid SQL): sent unchanged to [router] passthrough\",\n  \"queries\": "
        "[]\n}";
    ferry_http_respond(req, 200, "application/json", passthrough, sizeof passthrough - 1);
    return true;
}

/* The router's read path, running on servers (select_int.h): a request's options (settings,
 * format, query id), failures as ClickHouse-style errors, the replica picked per slice
 * (ClickHouse's load-balancing policies), the targets of a plan, and one query on one server
 * with failover to the next replica while no byte was delivered. */
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

/* ---- executing on a shard ------------------------------------------------------------------- */

/* Runs q on a replica of the shard (in the selector's order, the next one only when a replica
 * could not be reached and no byte was delivered). A shard that cannot be reached fails with a
 * message naming it and its URL (credentials redacted). */
static int shard_exec(ferry_router *r, size_t shard, const ferry_ch_query *q, ferry_ch_status *st,
                      ferry_err *err)
{
    rt_shard *s = r->shards[shard];
    size_t order[64];
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    int rc = ferry_rsel_select(s->sel, ferry_clock_ms_u64(), &s->rng, order, err);
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return rc;
    size_t rep = 0;
    for (size_t a = 0; a < s->n_replicas && a < 64; a++) {
        rep = order[a];
        ferry_ch_client *c = NULL;
        ferry_err_clear(err);
        rc = rt_client_take(r, s, rep, &c, err);
        if (rc)
            break;
        rc = rt_replica_exec(s, rep, c, q, st, err);
        if (!rc || rc == FERRY_EREMOTE) {
            rt_client_give(s, rep, c); /* an exception leaves the connection usable */
            break;
        }
        ferry_ch_client_free(c);
        if ((rc != FERRY_ECONNECT && rc != FERRY_ETIMEOUT) || st->bytes_received)
            break;
    }
    if (rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT) {
        char red[FERRY_URL_MAX], msg[FERRY_ERR_MSG_MAX];
        ferry_redact_url(s->urls[rep], red, sizeof red);
        snprintf(msg, sizeof msg, "%s", err->msg);
        ferry_err_set(err, rc, "shard %s (%s) %s: %s", s->name, red,
                      rc == FERRY_ETIMEOUT ? "timed out" : "cannot be reached", msg);
    }
    return rc;
}

/* ---- requests ------------------------------------------------------------------------------- */

void rd_opts_free(rd_opts *o)
{
    for (size_t i = 0; i < o->n_all; i++) {
        free((char *)o->all[i].name);
        free((char *)o->all[i].value);
    }
    free(o->all);
    free(o->server);
    free(o->database);
    free(o->default_format);
    free(o->query_id);
    memset(o, 0, sizeof *o);
}

static int collect_arg(void *cls, const char *name, const char *value)
{
    rd_opts *o = cls;
    char **slot = !strcmp(name, "database")         ? &o->database
                  : !strcmp(name, "default_format") ? &o->default_format
                  : !strcmp(name, "query_id")       ? &o->query_id
                                                    : NULL;
    if (slot) {
        free(*slot);
        *slot = strdup(value ? value : "");
        return *slot ? 0 : FERRY_ENOMEM;
    }
    enum ferry_ch_param_kind k = ferry_ch_param_kind(name);
    if (k == FERRY_CH_PARAM_PROTOCOL || !ferry_ch_name_ok(name))
        return 0;
    void *p = realloc(o->all, (o->n_all + 1) * sizeof *o->all);
    if (!p)
        return FERRY_ENOMEM;
    o->all = p;
    o->all[o->n_all].name = strdup(name);
    o->all[o->n_all].value = strdup(value ? value : "");
    if (!o->all[o->n_all].name || !o->all[o->n_all].value)
        return FERRY_ENOMEM;
    o->n_all++;
    return 0;
}

int rd_opts_collect(ferry_http_req *req, rd_opts *o)
{
    int rc = ferry_http_args_foreach(req, collect_arg, o);
    if (rc)
        return FERRY_ENOMEM;
    if (!o->database) {
        const char *h = ferry_http_header(req, "X-ClickHouse-Database");
        if (h && *h && !(o->database = strdup(h)))
            return FERRY_ENOMEM;
    }
    if (!o->default_format) {
        const char *h = ferry_http_header(req, "X-ClickHouse-Format");
        if (h && *h && !(o->default_format = strdup(h)))
            return FERRY_ENOMEM;
    }
    o->server = calloc(o->n_all + 1, sizeof *o->server);
    if (!o->server)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < o->n_all; i++)
        if (!ferry_sql_setting_initiator_only(o->all[i].name))
            o->server[o->n_server++] = o->all[i];
    return FERRY_OK;
}

int rd_fail_set(rd_fail *f, int rc, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[FERRY_ERR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f->rc = rc;
    f->remote = false;
    snprintf(f->name, sizeof f->name, "%s", name);
    ferry_err_set(&f->err, rc, "%s", msg);
    return rc;
}

/* From a shard_exec failure. */
int rd_fail_from_exec(rd_fail *f, int rc, const ferry_ch_status *st, const ferry_err *err)
{
    f->rc = rc;
    f->err = *err;
    if (rc == FERRY_EREMOTE && st->message[0]) {
        f->remote = true;
        f->st = *st;
        f->http_status = st->http_status;
        f->ch_code = st->ch_code;
        return rc;
    }
    f->remote = false;
    snprintf(f->name, sizeof f->name, "%s",
             rc == FERRY_ETIMEOUT    ? "TIMEOUT_EXCEEDED"
             : rc == FERRY_ECONNECT  ? "ALL_CONNECTION_TRIES_FAILED"
             : rc == FERRY_ENOMEM    ? "CANNOT_ALLOCATE_MEMORY"
             : rc == FERRY_EAUTH     ? "AUTHENTICATION_FAILED"
                                     : "NETWORK_ERROR");
    return rc;
}

void rd_respond_fail(ferry_http_req *req, const rd_fail *f)
{
    if (f->remote) {
        char name[64] = "", c[16];
        int code = ferry_ch_error_parse(f->st.message, name, sizeof name);
        if (!code)
            code = f->ch_code;
        long status = f->http_status && f->http_status != 200 ? f->http_status
                      : name[0]                                 ? ferry_ch_error_http_status(name)
                                                                : 500;
        snprintf(c, sizeof c, "%d", code);
        ferry_http_add_header(req, "X-ClickHouse-Exception-Code", c);
        size_t l = strlen(f->st.message);
        char *body = malloc(l + 2);
        if (body) {
            memcpy(body, f->st.message, l);
            body[l] = '\n';
            ferry_http_respond(req, (unsigned)status, "text/plain; charset=UTF-8", body,
                               l && f->st.message[l - 1] == '\n' ? l : l + 1);
            free(body);
            return;
        }
    }
    const char *name = f->name[0] ? f->name : "NETWORK_ERROR";
    int code = rt_error_code(name);
    char body[FERRY_ERR_MSG_MAX + 256], c[16];
    snprintf(body, sizeof body, "Code: %d. DB::Exception: ferry router: %s. (%s) (version ferry router)\n",
             code, f->err.msg, name);
    snprintf(c, sizeof c, "%d", code);
    ferry_http_add_header(req, "X-ClickHouse-Exception-Code", c);
    ferry_http_respond(req, ferry_ch_error_http_status(name), "text/plain; charset=UTF-8", body,
                       strlen(body));
}

/* ---- planning and running ------------------------------------------------------------------- */

void rd_ctx_pick_free(rd_ctx *cx)
{
    ferry_rpick_free(cx->pick);
    free(cx->pick_slices); /* pick_fresh lives in the same allocation */
    cx->pick = NULL;
    cx->pick_slices = NULL;
    cx->pick_fresh = NULL;
    cx->stale_refusal[0] = '\0';
    for (size_t i = 0; i < 2 * cx->n_repl; i++)
        free(cx->repl[i]);
    free(cx->repl);
    cx->repl = NULL;
    cx->n_repl = 0;
}

/* The names of cand[from..to) as "a, b" into out. */
static void cand_names(const ferry_router *r, const uint32_t *cand, size_t from, size_t to,
                       char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = from; k < to && used + 2 < size; k++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", k > from ? ", " : "",
                                 r->shards[cand[k]]->name);
}

/* A slice is read from a replica that missed acknowledged writes: counted, and said in the log
 * (the answer may lack rows that `ferry repair` has not copied yet). */
static void stale_read(rd_ctx *cx, const ferry_sql_slice *sl, uint32_t server, const char *why)
{
    pthread_mutex_lock(&cx->rd->sel_mu);
    cx->rd->stale_reads++;
    pthread_mutex_unlock(&cx->rd->sel_mu);
    FLOG_WARN("msg=\"router: reading a replica that missed acknowledged writes (the answer may "
              "lack rows until ferry repair)\" tenant=%s split=%u shard=%s why=\"%s\"",
              sl->tenant, sl->split, cx->r->shards[server]->name, why);
}

/* Picks one replica per slice the analysis reads (every slice when a managed reference has no
 * tenant filter), in [router] load_balancing order with the router's error counts. The replicas
 * that missed acknowledged writes (a repair need) come after every up-to-date one, in the
 * policy's order among themselves, so a read goes to one of them only when no up-to-date replica
 * answers (failover) or there is none; with [router] fallback_to_stale_replicas = false they are
 * not candidates, and a slice with no other one refuses the read (docs/routing.md "Replicas that
 * missed writes"). */
int rd_pick_build(rd_ctx *cx, const ferry_sql_analysis *a)
{
    rd_cache *c = cx->cache;
    const rt_snapshot *snap = c->snap;
    rd_ctx_pick_free(cx);
    cx->a = a;
    bool all = false;
    bool *want = calloc(snap->n_tenants + 1, sizeof *want);
    if (!want)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < a->n_refs && !all; i++) {
        const ferry_sql_ref *ref = &a->refs[i];
        if (ref->table < 0)
            continue;
        if (!ref->has_filter) {
            all = true;
            break;
        }
        for (size_t k = 0; k < ref->n_tenants; k++) {
            const rt_tenant *t = rt_find_tenant(snap, ref->tenants[k], strlen(ref->tenants[k]));
            if (t)
                want[t - snap->tenants] = true;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < snap->n_tenants; i++)
        if (all || want[i])
            n += c->tenant_first[i + 1] - c->tenant_first[i];
    int rc = ferry_rpick_new(c->n_servers, &cx->pick);
    /* one allocation for both: a GLOBAL subquery's context is a copy of this one with
     * pick_slices cleared (select_merge.c), and frees nothing it did not allocate */
    cx->pick_slices = calloc(1, (n + 1) * (sizeof *cx->pick_slices + sizeof *cx->pick_fresh));
    cx->pick_fresh = cx->pick_slices ? (uint32_t *)(cx->pick_slices + n + 1) : NULL;
    if (rc || !cx->pick_slices) {
        free(want);
        return FERRY_ENOMEM;
    }
    bool fallback = cx->r->fallback_to_stale;
    uint32_t order[RD_MAX_CAND];
    uint64_t now = ferry_clock_ms_u64();
    ferry_err err = {0};
    pthread_mutex_lock(&cx->rd->sel_mu);
    for (size_t i = 0; i < snap->n_tenants && !rc; i++) {
        if (!all && !want[i])
            continue;
        for (size_t k = c->tenant_first[i]; k < c->tenant_first[i + 1] && !rc; k++) {
            const rd_cslice *cs = &c->cslices[k];
            ferry_sql_slice sl = {snap->tenants[i].name, cs->split};
            uint32_t fresh = cs->n_fresh, stale = cs->n_cand - cs->n_fresh;
            if (fresh)
                rc = ferry_rsets_order(cx->rd->rsets, cs->cand, fresh, now, &cx->rd->rng, order,
                                       &err);
            if (!rc && stale && (fallback || !fresh))
                rc = ferry_rsets_order(cx->rd->rsets, cs->cand + fresh, stale, now, &cx->rd->rng,
                                       order + fresh, &err);
            uint32_t n_order = fallback || !fresh ? cs->n_cand : fresh;
            size_t idx = 0;
            if (!rc)
                rc = ferry_rpick_add(cx->pick, order, n_order, &idx);
            if (rc)
                break;
            cx->pick_slices[idx] = sl;
            cx->pick_fresh[idx] = fresh;
            if (fresh)
                continue;
            char names[256];
            cand_names(cx->r, cs->cand, 0, cs->n_cand, names, sizeof names);
            if (fallback) {
                pthread_mutex_unlock(&cx->rd->sel_mu);
                stale_read(cx, &sl, order[0], "every replica of the slice missed writes");
                pthread_mutex_lock(&cx->rd->sel_mu);
            } else if (!cx->stale_refusal[0]) {
                cx->rd->stale_refused++;
                snprintf(cx->stale_refusal, sizeof cx->stale_refusal,
                         "every replica of slice %s/%u (%s) missed acknowledged writes that "
                         "ferry repair has not copied yet, and [router] "
                         "fallback_to_stale_replicas = false",
                         sl.tenant, sl.split, names);
                FLOG_WARN("msg=\"router: read refused: every replica of the slice missed "
                          "acknowledged writes\" tenant=%s split=%u replicas=\"%s\"",
                          sl.tenant, sl.split, names);
            }
        }
    }
    pthread_mutex_unlock(&cx->rd->sel_mu);
    free(want);
    return rc;
}

void rd_targets_free(rd_targets *t)
{
    free(t->store);
    free(t->served);
    free(t->t);
    memset(t, 0, sizeof *t);
}

int rd_targets_build(rd_ctx *cx, bool mat, bool retry, rd_targets *out)
{
    size_t ns = cx->cache->n_servers, nt = cx->rd->n_tables ? cx->rd->n_tables : 1;
    size_t n = retry ? 2 * ns : ns, np = ferry_rpick_count(cx->pick);
    memset(out, 0, sizeof *out);
    size_t *cnt = calloc(n + 1, sizeof *cnt), *at = calloc(n + 1, sizeof *at);
    out->n = n;
    out->served = calloc(n * nt + 1, sizeof *out->served);
    out->t = calloc(n + 1, sizeof *out->t);
    int rc = FERRY_OK;
    if (!cnt || !at || !out->served || !out->t) {
        rc = FERRY_ENOMEM;
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < np; i++) {
            size_t no;
            const uint32_t *ord = ferry_rpick_order(cx->pick, i, &no);
            uint32_t cur = ferry_rpick_server(cx->pick, i);
            size_t tg[RD_MAX_CAND + 1], ntg = 0;
            if (!retry) {
                if (cur != FERRY_RPICK_NONE)
                    tg[ntg++] = cur;
            } else {
                for (size_t k = 0; k < no && ntg < RD_MAX_CAND; k++)
                    tg[ntg++] = ord[k];
                if (cur != FERRY_RPICK_NONE && !ferry_rpick_is_answered(cx->pick, i))
                    tg[ntg++] = ns + cur;
            }
            for (size_t k = 0; k < ntg; k++) {
                if (pass == 0)
                    cnt[tg[k]]++;
                else
                    out->store[at[tg[k]]++] = cx->pick_slices[i];
            }
        }
        if (pass == 0) {
            size_t total = 0;
            for (size_t k = 0; k < n; k++) {
                at[k] = total;
                total += cnt[k];
            }
            out->store = calloc(total + 1, sizeof *out->store);
            if (!out->store) {
                rc = FERRY_ENOMEM;
                goto out;
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        const ferry_sql_slice *first = out->store + (at[k] - cnt[k]);
        for (size_t t = 0; t < nt; t++)
            out->served[k * nt + t] = (ferry_sql_served){first, cnt[k]};
        out->t[k] = (ferry_sql_target){&out->served[k * nt], NULL, mat, cx->cache->tenant_splits,
                                       cx->cache->snap->n_tenants, cx->scope};
    }
out:
    free(cnt);
    free(at);
    if (rc)
        rd_targets_free(out);
    return rc;
}

/* Runs q on a router shard, bracketed for the replica selectors (in flight, errors). */
bool rd_conn_error(int rc)
{
    return rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT;
}

/* shard_exec for the request: with a deadline, the query gets an id and a leading comment
 * carrying the deadline's tag (limits.c cancels by either: ClickHouse keeps the id, a server
 * that makes its own ids, like the lab's node, keeps the text). */
int rd_shard_exec_cx(rd_ctx *cx, size_t server, const ferry_ch_query *q,
                         ferry_ch_status *st, ferry_err *err)
{
    if (cx->stale_refusal[0]) {
        /* a slice of the read has no replica that took every acknowledged write and the router
         * may not read the others: the read fails as ClickHouse's does, before any server */
        memset(st, 0, sizeof *st);
        st->ch_code = rt_error_code("ALL_REPLICAS_ARE_STALE");
        st->http_status = 500;
        snprintf(st->message, sizeof st->message,
                 "Code: %d. DB::Exception: ferry router: %s. (ALL_REPLICAS_ARE_STALE) (version "
                 "ferry router)", st->ch_code, cx->stale_refusal);
        return ferry_err_set(err, FERRY_EREMOTE, "%s", cx->stale_refusal);
    }
    if (!cx->deadline)
        return shard_exec(cx->r, server, q, st, err);
    if (rt_deadline_expired(cx->deadline)) {
        memset(st, 0, sizeof *st);
        return ferry_err_set(err, FERRY_ETIMEOUT, "the read ran past its deadline");
    }
    ferry_ch_query t = *q;
    char id[64];
    rt_deadline_query_id(cx->deadline, id, sizeof id);
    ferry_buf text = FERRY_BUF_INIT;
    ferry_buf_printf(&text, "/* %s */ %s", rt_deadline_tag(cx->deadline), q->sql);
    if (!text.data) {
        memset(st, 0, sizeof *st);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    t.sql = text.data;
    t.query_id = id;
    int rc = shard_exec(cx->r, server, &t, st, err);
    ferry_buf_free(&text);
    return rc;
}

int rd_server_exec(rd_ctx *cx, size_t server, const ferry_ch_query *q, ferry_ch_status *st,
                       ferry_err *err)
{
    rt_reads *rd = cx->rd;
    if (cx->stale_refusal[0]) /* refused before any server (not a query sent, not an error) */
        return rd_shard_exec_cx(cx, server, q, st, err);
    pthread_mutex_lock(&rd->sel_mu);
    if (rd->rsets)
        ferry_rsets_begin(rd->rsets, (uint32_t)server);
    rd->shard_queries[server]++;
    pthread_mutex_unlock(&rd->sel_mu);
    int rc = rd_shard_exec_cx(cx, server, q, st, err);
    pthread_mutex_lock(&rd->sel_mu);
    if (rd->rsets) {
        ferry_rsets_end(rd->rsets, (uint32_t)server);
        if (rd_conn_error(rc))
            ferry_rsets_error(rd->rsets, (uint32_t)server);
        else if (!rc)
            ferry_rsets_success(rd->rsets, (uint32_t)server);
    }
    if (rd_conn_error(rc))
        rd->shard_errors[server]++;
    pthread_mutex_unlock(&rd->sel_mu);
    return rc;
}

/* Server `server` could not be reached in this query: its unanswered slices move to their next
 * replicas. Logs the failover; when a slice has no replica left, fails with the shards tried. */
int rd_fail_over(rd_ctx *cx, size_t server, const ferry_err *why, rd_fail *f)
{
    size_t lost = 0, moved = 0, np = ferry_rpick_count(cx->pick);
    for (size_t i = 0; i < np; i++)
        moved += !ferry_rpick_is_answered(cx->pick, i) &&
                 ferry_rpick_server(cx->pick, i) == (uint32_t)server;
    int rc = ferry_rpick_fail(cx->pick, (uint32_t)server, &lost);
    pthread_mutex_lock(&cx->rd->sel_mu);
    cx->rd->failovers++;
    pthread_mutex_unlock(&cx->rd->sel_mu);
    if (rc == FERRY_ENOTFOUND) {
        uint32_t tried[RD_MAX_CAND];
        size_t nt = ferry_rpick_tried(cx->pick, lost, tried, RD_MAX_CAND);
        char names[512] = "";
        size_t used = 0;
        for (size_t k = 0; k < nt && k < RD_MAX_CAND && used + 2 < sizeof names; k++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", k ? ", " : "",
                                     cx->r->shards[tried[k]]->name);
        const ferry_sql_slice *sl = &cx->pick_slices[lost];
        FLOG_WARN("msg=\"router: read failed, no replica left\" tenant=%s split=%u tried=\"%s\"",
                  sl->tenant, sl->split, names);
        rd_fail_set(f, why->code ? why->code : FERRY_ECONNECT, "ALL_CONNECTION_TRIES_FAILED",
                    "no replica of slice %s/%u could be reached (tried %s): %s", sl->tenant,
                    sl->split, names, why->msg);
        return f->rc;
    }
    FLOG_WARN("msg=\"router: read failover\" shard=%s slices=%zu err=\"%s\"",
              cx->r->shards[server]->name, moved, why->msg);
    /* the slices whose next replica is one that missed writes: no up-to-date one is left */
    for (size_t i = 0; i < np && cx->pick_fresh; i++) {
        uint32_t cur = ferry_rpick_server(cx->pick, i), tried[RD_MAX_CAND];
        size_t no = 0, pos = 0;
        const uint32_t *ord = ferry_rpick_order(cx->pick, i, &no);
        if (cur == FERRY_RPICK_NONE || !cx->pick_fresh[i] || !ord ||
            ferry_rpick_is_answered(cx->pick, i))
            continue;
        size_t nt = ferry_rpick_tried(cx->pick, i, tried, RD_MAX_CAND);
        if (nt < 2 || nt > RD_MAX_CAND || tried[nt - 2] != (uint32_t)server)
            continue; /* it did not move now */
        while (pos < no && ord[pos] != cur)
            pos++;
        if (pos >= cx->pick_fresh[i])
            stale_read(cx, &cx->pick_slices[i], cur, "no up-to-date replica answered");
    }
    return FERRY_OK;
}

/* The router daemon: ClickHouse's HTTP interface in front of the cluster. Each request is
 * classified once its statement is known and dispatched to one handler:
 *
 *   insert       INSERT INTO <managed table> [(cols)] FORMAT F: rows are parsed as the body
 *                streams in, each gets its tenant's split (from its split key) and its serving
 *                shard(s) from the routing table taken at the request's start (version-checked
 *                against the catalog); each shard's rows stream to it as one INSERT while the
 *                body is still being read (stream.c), each with a deduplication token. When the
 *                router publishes a newer table mid-request, the open streams are ended and the
 *                rest is routed with the new table (insert.c).
 *   select       SELECT-like statements reading managed tables: planned and run by the read
 *                path (select.c); any other SELECT passes through.
 *   passthrough  anything else, unchanged, to [router] passthrough: an INSERT's body (and a
 *                multipart body) streams there as it arrives (pass_stream); any other
 *                statement is read whole first, since the read path must see all of it: at
 *                most max_query_size bytes of text, as a server would parse (stmt_limit);
 *                past it, white space is dropped and anything else refused as the server
 *                refuses it, so no more of a large body is held.
 *
 * Memory per request is bounded: per shard, flush_bytes staged plus stream_buffer_bytes queued
 * (plus one row); the unparsed tail is at most one row; a streamed passthrough body one ring of
 * stream_buffer_bytes; a statement read whole max_query_size (other bodies read whole
 * max_buffered_bytes); all of them together (with what reads buffer and the read path's
 * analysis) the memory budget (budget.c); the request is refused beyond max_request_bytes. */
#include "request.h"
#include "router_int.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ferry/chhttp.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

/* ---- per-request state (request.h) ---------------------------------------------------------- */

/* A body's statement must be classified within its first RT_HEAD_MAX bytes (ClickHouse's own
 * max_query_size is 256 KiB too). */
#define RT_HEAD_MAX (256u << 10)

static void state_free(ferry_http_req *req, void *ctx, void *state)
{
    (void)ctx;
    req_state *st = state;
    if (!st)
        return;
    rt_metrics_request(st->r, st->kind, ferry_http_delivered(req) ? ferry_http_status(req) : 499,
                       ferry_clock_s() - st->t0);
    ferry_buf_free(&st->head);
    ferry_rt_head_free(&st->scan);
    rt_mem_release(st->r, st->mem_held);
    ferry_buf_free(&st->body);
    rt_passthrough_abort(st->pt);
    ferry_buf_free(&st->carry);
    ferry_buf_free(&st->row_out);
    ferry_rt_insert_free(&st->ins);
    ferry_rt_codec_free(st->codec);
    bool held = false;
    if (st->out) {
        /* ends any stream still open (its rows are written) before the routing table is
         * released; then, when rows reached a shard but the client has no success answer (an
         * error, or it went away), the client will retry: hold its slices (pending.c) */
        rt_out_finish(st->out, false);
        uint64_t sent = 0;
        for (size_t i = 0; i < st->out->n; i++)
            sent += st->out->shards[i].rows_written + st->out->shards[i].rows_failed;
        held = sent && !(st->ok && ferry_http_delivered(req));
        if (held)
            rt_pending_mark(st->r->pending, &st->touched);
    }
    rt_journal_end(st->r->journal, &st->journal, held); /* the request leaves the open list */
    rt_touched_free(&st->touched);
    rt_out_free(st->out);
    rt_route_end(st->r, st->cur);
    for (size_t i = 0; i < st->n_kept; i++)
        rt_route_end(st->r, st->kept[i]);
    rt_principal_free(st->r, st->who);
    for (size_t i = 0; i < st->n_settings; i++) {
        free((char *)st->settings[i].name);
        free((char *)st->settings[i].value);
    }
    free(st->settings);
    free(st->columns_sql);
    free(st);
}

/* ---- classification ------------------------------------------------------------------------- */

static rt_table *managed_table(ferry_router *r, const char *db, const char *table)
{
    for (size_t i = 0; i < r->n_tables; i++)
        if (!strcmp(r->tables[i].def.name, table) && !strcmp(r->tables[i].def.database, db))
            return &r->tables[i];
    return NULL;
}

typedef struct arg_ctx {
    req_state *st;
    int rc;
} arg_ctx;

static int collect_setting(void *cls, const char *name, const char *value)
{
    arg_ctx *a = cls;
    req_state *st = a->st;
    if (!strcmp(name, "query_id")) {
        snprintf(st->query_id, sizeof st->query_id, "%s", value ? value : "");
        return 0;
    }
    if (!strcmp(name, "insert_deduplication_token")) {
        snprintf(st->token, sizeof st->token, "%s", value ? value : "");
        return 0;
    }
    if (ferry_ch_param_kind(name) != FERRY_CH_PARAM_SETTING || !ferry_ch_name_ok(name))
        return 0;
    void *p = realloc(st->settings, (st->n_settings + 1) * sizeof *st->settings);
    if (!p)
        return a->rc = FERRY_ENOMEM;
    st->settings = p;
    st->settings[st->n_settings].name = strdup(name);
    st->settings[st->n_settings].value = strdup(value ? value : "");
    st->n_settings++;
    return 0;
}

/* An INSERT the router cannot route must not slip past it into a managed table: answers (and
 * returns true) when db.table is one. */
static bool refuse_unrouted(ferry_http_req *req, req_state *st, const char *db, const char *table)
{
    ferry_router *r = st->r;
    const char *d = db[0] ? db : ferry_http_arg(req, "database");
    if (!d || !*d)
        d = ferry_http_header(req, "X-ClickHouse-Database");
    if (!d || !*d)
        d = "default";
    if (!managed_table(r, d, table))
        return false;
    if (st->who && !st->who->admin)
        rt_respond_error(req, "ACCESS_DENIED",
                         "ferry router: user %s is bound to tenants: into the managed "
                         "table %s.%s it may only insert rows as data (INSERT INTO %s "
                         "[(columns)] FORMAT F), each checked against its tenants",
                         st->who->name, d, table, table);
    else
        rt_respond_error(req, "NOT_IMPLEMENTED",
                         "ferry router: %s.%s is a managed table; inserts into it must be "
                         "INSERT INTO %s [(columns)] FORMAT <JSONEachRow | TSV | "
                         "TSVWithNames | CSV | CSVWithNames | RowBinary> with the rows "
                         "as data (VALUES, INSERT SELECT and SETTINGS clauses are not "
                         "routed; pass settings as URL parameters)",
                         d, table, table);
    st->mode = MODE_DONE;
    st->failed = true;
    return true;
}

/* The statement is known: choose the handler. sql/len is the statement text (complete). */
static void dispatch(ferry_http_req *req, req_state *st, const char *sql, size_t len,
                     const char *data, size_t data_len)
{
    ferry_router *r = st->r;
    bool need_more = false;
    enum ferry_rt_stmt kind = ferry_rt_classify(sql, len, true, &st->ins, &need_more);
    st->kind_stmt = kind;
    rt_table *t = NULL;
    if (kind == FERRY_RT_STMT_INSERT) {
        const char *db = st->ins.database[0] ? st->ins.database : ferry_http_arg(req, "database");
        if (!db || !*db)
            db = ferry_http_header(req, "X-ClickHouse-Database");
        if (!db || !*db)
            db = "default";
        t = managed_table(r, db, st->ins.table);
    } else if (kind == FERRY_RT_STMT_INSERT_OTHER) {
        char db[FERRY_RT_IDENT_MAX], table[FERRY_RT_IDENT_MAX];
        if (ferry_rt_insert_target(sql, len, db, table) && refuse_unrouted(req, st, db, table))
            return;
    }
    if (t) {
        arg_ctx a = {st, 0};
        ferry_http_args_foreach(req, collect_setting, &a);
        if (!st->token[0]) {
            if (!st->query_id[0]) {
                /* No id from the client: make one (and send it back) so a retry can reuse it. */
                unsigned long long x = (unsigned long long)time(NULL) ^ (unsigned long long)getpid() << 32;
                x ^= XXH3_64bits(&st, sizeof st) ^ XXH3_64bits(sql, len);
                snprintf(st->query_id, sizeof st->query_id, "ferry-%016llx", x);
            }
            snprintf(st->token, sizeof st->token, "%s", st->query_id);
        }
        if (!st->query_id[0])
            snprintf(st->query_id, sizeof st->query_id, "%s", st->token);
        if (a.rc || !rt_insert_begin(req, st, t)) {
            if (!ferry_http_responded(req))
                rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
            st->mode = MODE_DONE;
            st->failed = true;
            return;
        }
        /* Data inline after FORMAT in the statement text comes first. */
        if (st->ins.data_offset < len)
            rt_insert_data(req, st, sql + st->ins.data_offset, len - st->ins.data_offset, false);
        if (st->mode == MODE_INSERT && data_len)
            rt_insert_data(req, st, data, data_len, false);
        return;
    }
    /* SELECT-like statements: the read path (issue 10) will route these; until then they and
     * every other statement go through unchanged. */
    st->mode = MODE_PASS;
    if (data_len && ferry_buf_append(&st->body, data, data_len)) {
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
        st->mode = MODE_DONE;
        st->failed = true;
    }
}

/* The passthrough server took nothing of a streamed body for [router] passthrough_timeout. */
static void stream_stalled(ferry_http_req *req, req_state *st)
{
    char redacted[FERRY_URL_MAX];
    ferry_redact_url(st->r->passthrough, redacted, sizeof redacted);
    rt_respond_error(req, "TIMEOUT_EXCEEDED",
                     "ferry router: the passthrough server %s took none of the body for %u s "
                     "([router] passthrough_timeout); the statement was cut off there",
                     redacted, st->r->passthrough_timeout_s);
    st->failed = true;
    st->mode = MODE_DONE;
}

/* Appends a piece of a body the router reads whole (a statement's head, a passthrough or
 * SELECT body) within [router] max_buffered_bytes and the memory budget; answers and returns
 * false when it does not fit. */
static bool hold_append(ferry_http_req *req, req_state *st, ferry_buf *b, const char *data,
                        size_t len)
{
    ferry_router *r = st->r;
    if (st->mem_held + len > r->max_buffered_bytes) {
        rt_respond_error(req, "QUERY_IS_TOO_LARGE",
                         "ferry router: this request is read whole before it is answered (a "
                         "statement other than a routed INSERT ... FORMAT, with its data) and "
                         "it is larger than [router] max_buffered_bytes (%zu bytes)",
                         r->max_buffered_bytes);
    } else if (!rt_mem_reserve(r, len)) {
        rt_metrics_refused(r, RT_REFUSED_MEMORY);
        rt_respond_error(req, "MEMORY_LIMIT_EXCEEDED",
                         "ferry router: the requests in progress hold the router's [router] "
                         "memory_budget (%zu bytes); retry later",
                         r->memory_budget);
    } else {
        st->mem_held += len;
        if (!ferry_buf_append(b, data, len))
            return true;
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
    }
    st->failed = true;
    st->mode = MODE_DONE;
    return false;
}

/* The most of a statement's text (not an INSERT's data) the router reads whole: the request's
 * max_query_size (a URL setting, as the server takes it), else [router] max_query_size, never
 * more than max_buffered_bytes. An INSERT's data held whole (a bound user's passthrough,
 * refused at its end; X-Ferry-Explain; no passthrough server) and a multipart body keep
 * max_buffered_bytes alone (stmt_max 0). */
static void stmt_limit(ferry_http_req *req, req_state *st)
{
    ferry_router *r = st->r;
    const char *ct = ferry_http_header(req, "Content-Type");
    st->stmt_max = 0;
    if (st->kind_stmt == FERRY_RT_STMT_INSERT || st->kind_stmt == FERRY_RT_STMT_INSERT_OTHER ||
        (ct && !strncasecmp(ct, "multipart/", 10)))
        return;
    uint64_t v = r->max_query_size;
    const char *m = ferry_http_arg(req, "max_query_size");
    uint64_t u = 0;
    if (m && ferry_parse_u64(m, &u))
        v = u ? u : UINT64_MAX;
    st->stmt_max = v < r->max_buffered_bytes ? (size_t)v : r->max_buffered_bytes;
}

/* A statement's text goes past stmt_max: answered as the server answers it (or, past
 * max_buffered_bytes, as any request read whole), and nothing more of it is held. */
static void stmt_too_long(ferry_http_req *req, req_state *st)
{
    ferry_router *r = st->r;
    if (st->stmt_max >= r->max_buffered_bytes)
        rt_respond_error(req, "QUERY_IS_TOO_LARGE",
                         "ferry router: this request is read whole before it is answered (a "
                         "statement other than a routed INSERT ... FORMAT, with its data) and "
                         "it is larger than [router] max_buffered_bytes (%zu bytes)",
                         r->max_buffered_bytes);
    else
        rt_respond_error(req, "SYNTAX_ERROR",
                         "Syntax error: failed at position %zu: Max query size exceeded: the "
                         "statement (the query parameter, a newline and the body) is longer "
                         "than max_query_size = %zu bytes (the request's setting, else "
                         "[router] max_query_size; ferry router)",
                         st->stmt_max + 1, st->stmt_max);
    ferry_buf_free(&st->body);
    rt_mem_release(r, st->mem_held);
    st->mem_held = 0;
    st->failed = true;
    st->mode = MODE_DONE;
}

/* Holds a piece of a statement's text read whole, up to stmt_max; past it, white space is
 * dropped and anything else refused (stmt_too_long). False when it answered. */
static bool hold_stmt(ferry_http_req *req, req_state *st, const char *data, size_t len)
{
    size_t k = len;
    if (st->stmt_max) {
        size_t room = st->past_max || st->body.len >= st->stmt_max ? 0
                                                                    : st->stmt_max - st->body.len;
        k = len < room ? len : room;
        for (size_t i = k; i < len; i++) {
            if (!isspace((unsigned char)data[i])) {
                stmt_too_long(req, st);
                return false;
            }
        }
        if (k < len)
            st->past_max = true;
    }
    return !k || hold_append(req, st, &st->body, data, k);
}

/* A piece of the body of a request read whole (MODE_PASS). */
static void pass_body(ferry_http_req *req, req_state *st, const char *data, size_t len)
{
    if (st->want_nl && len) {
        st->want_nl = false;
        if (!hold_stmt(req, st, "\n", 1))
            return;
        st->body_at = st->body.len;
    }
    (void)hold_stmt(req, st, data, len);
}

/* A passthrough whose statement is known and whose body is its data streams to the server
 * (passthrough.c) instead of being read whole: an INSERT that is not routed (the refusal of one
 * into a managed table came first) or the client's external data (a multipart body), from an
 * admin (a bound user's passthrough is decided by the read path at the body's end). What was
 * read so far (the statement's head) goes first. Other statements, or any request with
 * X-Ferry-Explain (it is never run), stay MODE_PASS. */
static void pass_stream(ferry_http_req *req, req_state *st)
{
    ferry_router *r = st->r;
    const char *ct = ferry_http_header(req, "Content-Type");
    bool data = st->kind_stmt == FERRY_RT_STMT_INSERT || st->kind_stmt == FERRY_RT_STMT_INSERT_OTHER ||
                (ct && !strncasecmp(ct, "multipart/", 10));
    if (st->mode != MODE_PASS || !data || !st->who || !st->who->admin || !r->passthrough[0] ||
        ferry_http_header(req, "X-Ferry-Explain") || !strcmp(ferry_http_method(req), "GET"))
        return;
    if (!(st->pt = rt_passthrough_open(r, req))) {
        st->mode = MODE_DONE; /* answered */
        st->failed = true;
        return;
    }
    st->mode = MODE_STREAM;
    int rc = st->body.len ? rt_passthrough_feed(st->pt, st->body.data, st->body.len) : 0;
    if (rc < 0)
        stream_stalled(req, st);
    st->pt_answered = rc > 0; /* the server answered already: the rest is dropped */
    ferry_buf_free(&st->body);
    rt_mem_release(r, st->mem_held); /* the ring is charged instead */
    st->mem_held = 0;
}

/* The body's statement is classified (st->scan decided): an insert goes to dispatch with the
 * data after its head; anything else passes through whole, unless it is an INSERT into a
 * managed table the router cannot route. */
static void head_decided(ferry_http_req *req, req_state *st)
{
    ferry_buf h = st->head;
    memset(&st->head, 0, sizeof st->head);
    if (st->scan.kind == FERRY_RT_STMT_INSERT) {
        size_t data_at = st->scan.ins.data_offset;
        dispatch(req, st, h.data, data_at, h.data + data_at, h.len - data_at);
        if (st->mode == MODE_PASS) {
            /* dispatch copied only the data; a passthrough needs the statement too */
            ferry_buf_free(&st->body);
            st->body = h;
            pass_stream(req, st);
            return;
        }
        ferry_buf_free(&h);
        rt_mem_release(st->r, st->mem_held); /* an insert streams: no body is held */
        st->mem_held = 0;
        return;
    }
    if (st->scan.kind == FERRY_RT_STMT_INSERT_OTHER) {
        char db[FERRY_RT_IDENT_MAX], table[FERRY_RT_IDENT_MAX];
        if (ferry_rt_head_target(&st->scan, db, table) && refuse_unrouted(req, st, db, table)) {
            ferry_buf_free(&h);
            return;
        }
    }
    st->kind_stmt = st->scan.kind;
    st->mode = MODE_PASS;
    st->body = h;
    pass_stream(req, st);
    if (st->mode != MODE_PASS)
        return;
    /* the head read so far may reach past the statement's limit already */
    stmt_limit(req, st);
    if (!st->stmt_max || st->body.len <= st->stmt_max)
        return;
    for (size_t i = st->stmt_max; i < st->body.len; i++) {
        if (!isspace((unsigned char)st->body.data[i])) {
            stmt_too_long(req, st);
            return;
        }
    }
    st->body.len = st->stmt_max; /* white space past the limit: dropped */
    st->body.data[st->body.len] = '\0';
    st->past_max = true;
}

/* ---- HTTP callbacks ------------------------------------------------------------------------- */

/* ferry_http_args_foreach callback: stops at the first setting a bound user may not pass. */
static int refused_arg(void *cls, const char *name, const char *value)
{
    (void)value;
    if (ferry_ch_param_kind(name) == FERRY_CH_PARAM_SETTING &&
        ferry_sql_setting_refused_scoped(name)) {
        *(const char **)cls = name;
        return 1;
    }
    return 0;
}

static void on_headers(ferry_http_req *req, void *ctx)
{
    ferry_router *r = ctx;
    req_state *st = calloc(1, sizeof *st);
    if (!st) {
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
        return;
    }
    st->r = r;
    st->kind = RT_KIND_PASSTHROUGH;
    st->t0 = ferry_clock_s();
    ferry_http_req_set_state(req, st);
    /* a body declared far larger than any request may be: refused before a byte of it is read
     * (a smaller excess is read, dropped and answered at its end, see on_body) */
    if (ferry_http_declared_too_large(req, r->max_request_bytes)) {
        rt_respond_error(req, "QUERY_IS_TOO_LARGE",
                         "ferry router: the request's body (Content-Length %s) is larger than "
                         "[router] max_request_bytes (%zu bytes); nothing was read",
                         ferry_http_header(req, "Content-Length"), r->max_request_bytes);
        st->mode = MODE_DONE;
        st->failed = true;
        return;
    }
    if (!(st->who = rt_authenticate(r, req))) {
        st->mode = MODE_DONE; /* answered: AUTHENTICATION_FAILED or a limit */
        st->failed = true;
        return;
    }
    if (!st->who->admin) {
        /* settings a bound user may not pass (they would reach beyond its tenants) */
        const char *bad = NULL;
        ferry_http_args_foreach(req, refused_arg, &bad);
        if (bad) {
            rt_respond_error(req, "ACCESS_DENIED",
                             "ferry router: the setting %s is not allowed for users bound to "
                             "tenants", bad);
            st->mode = MODE_DONE;
            st->failed = true;
            return;
        }
    }
    const char *q = ferry_http_arg(req, "query");
    if (q) {
        dispatch(req, st, q, strlen(q), NULL, 0);
        pass_stream(req, st);
        if (st->mode == MODE_PASS) {
            /* read whole: the text is the query parameter, a newline and the body, as a
             * server reads it (and under the same max_query_size) */
            stmt_limit(req, st);
            if (hold_stmt(req, st, q, strlen(q))) {
                st->body_at = st->body.len;
                st->want_nl = true;
            }
        }
    } else {
        st->mode = MODE_HEAD;
    }
}

static int on_body(ferry_http_req *req, void *ctx, const char *data, size_t len)
{
    ferry_router *r = ctx;
    req_state *st = ferry_http_req_state(req);
    if (!st || st->failed || st->mode == MODE_DONE)
        return 0;
    st->received += len;
    if (st->received > r->max_request_bytes) {
        /* Rows already streaming to their shards are written (and the message says how many);
         * rows still staged are dropped. */
        if (st->mode == MODE_INSERT)
            rt_insert_fail(req, st, "QUERY_IS_TOO_LARGE",
                        "the request is larger than [router] max_request_bytes (%zu bytes); "
                        "the rows after byte %zu were not written",
                        r->max_request_bytes, r->max_request_bytes);
        else if (st->mode == MODE_STREAM)
            rt_respond_error(req, "QUERY_IS_TOO_LARGE",
                             "ferry router: the request is larger than [router] "
                             "max_request_bytes (%zu bytes); its body was cut off at the "
                             "passthrough server (blocks that server inserted before may stay)",
                             r->max_request_bytes);
        else
            rt_respond_error(req, "QUERY_IS_TOO_LARGE",
                             "ferry router: the request is larger than [router] "
                             "max_request_bytes (%zu bytes); nothing was written",
                             r->max_request_bytes);
        st->failed = true;
        st->mode = MODE_DONE;
        return 0;
    }
    if (st->mode == MODE_INSERT && st->hold && st->received > r->bound_insert_max_bytes) {
        rt_insert_fail(req, st, "QUERY_IS_TOO_LARGE",
                    "user %s is bound to tenants, so its inserts are held in the router until "
                    "every row is checked, and this one is larger than [router] "
                    "bound_insert_max_bytes (%zu bytes); send it in smaller batches",
                    st->who->name, r->bound_insert_max_bytes);
        return 0;
    }
    if (st->mode == MODE_INSERT) {
        rt_insert_data(req, st, data, len, false);
        return 0;
    }
    if (st->mode == MODE_PASS) {
        pass_body(req, st, data, len);
        return 0;
    }
    if (st->mode == MODE_STREAM) {
        int rc = st->pt_answered ? 1 : rt_passthrough_feed(st->pt, data, len);
        if (rc < 0)
            stream_stalled(req, st);
        st->pt_answered = rc > 0; /* the rest is read and dropped; the answer is the server's */
        return 0;
    }
    /* MODE_HEAD: the statement is at the start of the body. */
    if (!hold_append(req, st, &st->head, data, len))
        return 0;
    if (ferry_rt_head_feed(&st->scan, st->head.data, st->head.len, false)) {
        head_decided(req, st);
        return 0;
    }
    if (st->head.len > RT_HEAD_MAX) {
        /* Still undecided (an INSERT's head or comments this long): refused rather than passed
         * through, since it may be an insert into a managed table. */
        rt_respond_error(req, "QUERY_IS_TOO_LARGE",
                         "ferry router: the statement's head (up to the data after FORMAT) is "
                         "longer than %u bytes; shorten the column list or comments",
                         (unsigned)RT_HEAD_MAX);
        st->failed = true;
        st->mode = MODE_DONE;
    }
    return 0;
}

static void on_complete(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    req_state *st = ferry_http_req_state(req);
    if (!st || ferry_http_responded(req))
        return;
    if (st->mode == MODE_HEAD) {
        /* The body ended: it is all statement (an insert whose data follows FORMAT on the same
         * line, or a statement without a line end). */
        ferry_rt_head_feed(&st->scan, st->head.data ? st->head.data : "", st->head.len, true);
        head_decided(req, st);
        if (ferry_http_responded(req))
            return;
    }
    if (st->mode == MODE_STREAM) {
        rt_pt *p = st->pt;
        st->pt = NULL;
        rt_passthrough_finish(p, req);
        return;
    }
    if (st->mode == MODE_PASS) {
        /* SELECT-like statements over managed tables take the read path (select.c); it also
         * says whether a bound user's other reads may pass through (only tables its user
         * lists). Everything else passing through needs an admin user. */
        bool may_pass = false;
        if (rt_select_route(st->r, req, st->who, &st->body, &may_pass)) {
            st->kind = RT_KIND_READ;
            return;
        }
        if (!may_pass) {
            rt_respond_error(req, "ACCESS_DENIED",
                             "ferry router: user %s is bound to tenants and may only read "
                             "and insert the rows of managed tables (and read the tables its "
                             "user lists); this statement needs an admin user",
                             st->who->name);
            return;
        }
        rt_passthrough(st->r, req, &st->body, st->body_at);
        return;
    }
    if (st->mode == MODE_INSERT) {
        rt_insert_end(req, st);
        return;
    }
    if (!ferry_http_responded(req))
        rt_respond_error(req, "BAD_ARGUMENTS", "ferry router: nothing to do");
}

static void on_ping(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    ferry_http_respond_text(req, 200, "Ok.\n");
}

/* GET /metrics: an admin user or the cluster's token (Prometheus: `authorization: {type:
 * Bearer, credentials_file: ...}` with the router_token_file). */
static void on_metrics(ferry_http_req *req, void *ctx)
{
    if (rt_auth_internal(ctx, req))
        rt_on_metrics(req, ctx);
}

/* ---- configuration and life cycle ----------------------------------------------------------- */

int ferry_router_start(const ferry_router_options *opt, ferry_router **out, ferry_err *err)
{
    *out = NULL;
    ferry_router *r = calloc(1, sizeof *r);
    if (!r)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->check_mu, NULL);
    pthread_mutex_init(&r->quorum_mu, NULL);
    pthread_mutex_init(&r->reload_mu, NULL);
    pthread_mutex_init(&r->pt_pool_mu, NULL);
    pthread_mutex_init(&r->pt_work_mu, NULL);
    pthread_cond_init(&r->pt_work_cond, NULL);
    pthread_cond_init(&r->cond, NULL);
    ferry_config *cfg = &r->cfg;
    ferry_record_list tables = {0};
    char addr[64];
    uint16_t port = 0;
    snprintf(r->config_path, sizeof r->config_path, "%s", opt->config_path);
    /* The config is the bootstrap: the catalog's address and the router's own settings. Shards
     * come from the catalog (rt_reload), so a shard added later needs no restart; [shard]
     * sections only supply credentials that catalogs of older versions did not record. */
    int rc = ferry_config_load(opt->config_path, cfg, err);
    const char *catalog = rc ? NULL : ferry_config_get(cfg, "cluster", NULL, "catalog");
    if (!rc && (!catalog || !*catalog))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [cluster] has no catalog (the catalog URL "
                           "the router reads shards, tenants and routes from)", cfg->path);
    if (!rc)
        rc = rt_read_config(r, cfg, opt->listen, opt->retry_journal, addr, sizeof addr, &port,
                            err);
    if (!rc)
        rc = rt_auth_init(r, cfg, addr,
                          opt->listen || ferry_config_get(cfg, "router", NULL, "listen"), err);
    if (!rc && rt_pending_window_ms(r->pending))
        rc = rt_journal_open(r->journal_path[0] ? r->journal_path : NULL, r->pending,
                             &r->journal, err);
    if (!rc)
        rc = rt_shards_init(r, err);
    if (!rc && rt_metrics_init(r))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc)
        goto out;
    snprintf(r->catalog_url, sizeof r->catalog_url, "%s", catalog);
    rc = ferry_catalog_open(catalog, &r->watch_cat, err);
    if (!rc)
        rc = ferry_catalog_open(catalog, &r->check_cat, err);
    if (!rc)
        rc = ferry_catalog_list(r->check_cat, FERRY_REC_TABLE, NULL, 0, &tables, err);
    if (rc)
        goto out;
    r->tables = calloc(tables.n ? tables.n : 1, sizeof *r->tables);
    if (!r->tables) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < tables.n; i++)
        r->tables[r->n_tables++].def = tables.items[i].u.table;
    rc = rt_reads_init(r, cfg, addr, err);
    if (!rc)
        rc = rt_reload(r, r->check_cat, err);
    if (rc)
        goto out;
    if (pthread_create(&r->watcher, NULL, rt_watch_main, r) != 0) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "cannot start the routing watcher thread");
        goto out;
    }
    r->watcher_started = true;
    ferry_http_route routes[] = {
        {"GET", "/ping", NULL, NULL, on_ping, NULL, r, 0},
        {"GET", "/ferry/router", NULL, NULL, rt_on_status, NULL, r, 0},
        {"GET", "/metrics", NULL, NULL, on_metrics, NULL, r, 0},
        {NULL, "/ferry/partial/", NULL, NULL, rt_partial_on_complete, NULL, r, 0},
        {NULL, "/", on_headers, on_body, on_complete, state_free, r, 0},
    };
    ferry_httpd_options ho = r->http;
    ho.bind_addr = addr;
    ho.port = port;
    rc = ferry_httpd_start(&ho, routes, sizeof routes / sizeof routes[0], &r->httpd, err);
out:
    ferry_record_list_free(&tables);
    if (rc) {
        ferry_router_stop(r);
        return rc;
    }
    *out = r;
    return FERRY_OK;
}

uint16_t ferry_router_port(const ferry_router *r) { return ferry_httpd_port(r->httpd); }

void ferry_router_stop(ferry_router *r)
{
    if (!r)
        return;
    ferry_httpd_stop(r->httpd);
    rt_passthrough_pool_free(r);
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_mutex_unlock(&r->mu);
    if (r->watcher_started)
        pthread_join(r->watcher, NULL);
    rt_reads_free(r);
    rt_snapshot_put(r->snap);
    for (size_t i = 0; i < r->n_tables; i++)
        ferry_rt_schema_free(&r->tables[i].schema);
    free(r->tables);
    rt_shards_free(r);
    rt_journal_close(r->journal);
    rt_pending_free(r->pending);
    rt_auth_free(r);
    rt_metrics_free(r);
    ferry_config_free(&r->cfg);
    ferry_catalog_close(r->watch_cat);
    ferry_catalog_close(r->check_cat);
    ferry_catalog_close(r->quorum_cat);
    pthread_mutex_destroy(&r->quorum_mu);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->check_mu);
    pthread_mutex_destroy(&r->reload_mu);
    pthread_mutex_destroy(&r->pt_pool_mu);
    pthread_mutex_destroy(&r->pt_work_mu);
    pthread_cond_destroy(&r->pt_work_cond);
    pthread_cond_destroy(&r->cond);
    free(r);
}

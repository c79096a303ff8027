/* The router daemon: ClickHouse's HTTP interface in front of the cluster. Each request is
 * classified once its statement is known and dispatched to one handler:
 *
 *   insert       INSERT INTO <managed table> [(cols)] FORMAT F: rows are parsed as the body
 *                streams in, each gets its tenant's split (from its split key) and its serving
 *                shard(s) from the routing table taken at the request's start (version-checked
 *                against the catalog); each shard's rows stream to it as one INSERT while the
 *                body is still being read (stream.c), each with a deduplication token. When the
 *                router publishes a newer table mid-request, the open streams are ended and the
 *                rest is routed with the new table.
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
#include "router_int.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ferry/chhttp.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

/* ---- per-request state ---------------------------------------------------------------------- */

enum req_mode { MODE_HEAD, MODE_INSERT, MODE_PASS, MODE_STREAM, MODE_DONE };

/* A body's statement must be classified within its first RT_HEAD_MAX bytes (ClickHouse's own
 * max_query_size is 256 KiB too). */
#define RT_HEAD_MAX (256u << 10)

typedef struct req_state {
    ferry_router *r;
    rt_principal *who;  /* who sent it (auth.c); NULL only before authentication */
    enum req_mode mode;
    ferry_buf head;     /* the body's start while the statement is not known yet */
    ferry_rt_head scan; /* its classification so far (each byte looked at once) */
    size_t mem_held;    /* bytes of head and body reserved from the memory budget (budget.c) */
    ferry_buf body;     /* MODE_PASS: the statement's text read whole (the query parameter and
                           a newline, then the body; or the body) */
    size_t body_at;     /* MODE_PASS: where the client's body starts in it */
    bool want_nl;       /* MODE_PASS: the query parameter is held; a newline before the body */
    size_t stmt_max;    /* MODE_PASS of a statement (not an INSERT's data): the text a server
                           would parse at most (max_query_size); 0: max_buffered_bytes only */
    bool past_max;      /* MODE_PASS: bytes beyond stmt_max came (white space, dropped) */
    enum ferry_rt_stmt kind_stmt; /* passthrough: what the statement is */
    rt_pt *pt;          /* MODE_STREAM: the passthrough its body streams to */
    bool pt_answered;   /* MODE_STREAM: the server answered before the body's end */
    size_t received;
    /* insert */
    ferry_rt_insert ins;
    rt_table *table;
    enum ferry_rt_format format;
    ferry_rt_codec *codec;
    ferry_buf carry;    /* data not consumed yet (an incomplete row) */
    ferry_buf row_out;  /* one emitted row */
    rt_snapshot *cur;   /* the routing table rows are routed with; a write in flight under its
                           version is recorded until it is released (rt_route_begin) */
    rt_out *out;        /* per-shard streams */
    char token[256];    /* the base of the deduplication tokens */
    char query_id[256];
    ferry_ch_setting *settings; /* the client's settings, passed on */
    size_t n_settings;
    char *columns_sql;  /* the forwarded INSERT's statement */
    uint64_t rows;
    rt_touched touched; /* the slices rows were routed to (pending.c) */
    /* a bound user's insert is held whole (no stream opens) until every row passed the tenant
     * check, so a refused row stores nothing; tables it was grouped with that are not the
     * current one stay recorded in flight until the rows are sent (kept) */
    bool hold;
    rt_snapshot *kept[8];
    size_t n_kept;
    enum rt_kind kind;  /* for the metrics */
    double t0;          /* when the headers arrived (monotonic seconds) */
    bool ok;            /* answered 200 */
    bool failed;        /* an error was answered; the rest of the body is ignored */
} req_state;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void state_free(ferry_http_req *req, void *ctx, void *state)
{
    (void)ctx;
    req_state *st = state;
    if (!st)
        return;
    rt_metrics_request(st->r, st->kind, ferry_http_delivered(req) ? ferry_http_status(req) : 499,
                       mono_s() - st->t0);
    ferry_buf_free(&st->head);
    ferry_rt_head_free(&st->scan);
    rt_mem_release(st->r, st->mem_held);
    ferry_buf_free(&st->body);
    rt_passthrough_abort(st->pt);
    ferry_buf_free(&st->carry);
    ferry_buf_free(&st->row_out);
    ferry_rt_insert_free(&st->ins);
    ferry_rt_codec_free(st->codec);
    if (st->out) {
        /* ends any stream still open (its rows are written) before the routing table is
         * released; then, when rows reached a shard but the client has no success answer (an
         * error, or it went away), the client will retry: hold its slices (pending.c) */
        rt_out_finish(st->out, false);
        uint64_t sent = 0;
        for (size_t i = 0; i < st->out->n; i++)
            sent += st->out->shards[i].rows_written + st->out->shards[i].rows_failed;
        if (sent && !(st->ok && ferry_http_delivered(req)))
            rt_pending_mark(st->r->pending, &st->touched);
    }
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

/* The version check while rows stream: when the router has published a newer routing table,
 * every open stream is ended (its rows were routed with the old table, which stays recorded as
 * in flight until they are stored), then the new table is taken. A write that races a routing
 * switch is therefore sent where the table it was grouped with says, and a move waits for it
 * (docs/routing.md). */
static void take_newer(req_state *st)
{
    if (st->hold) {
        /* nothing is sent before the body ends: the rows grouped with the old table stay
         * staged, and the old table stays recorded in flight until they are sent */
        st->kept[st->n_kept++] = st->cur;
    } else {
        rt_out_finish(st->out, true);
        rt_route_end(st->r, st->cur);
    }
    st->cur = rt_route_begin(st->r);
    pthread_mutex_lock(&st->r->mu);
    st->r->reroutes++;
    pthread_mutex_unlock(&st->r->mu);
}

static void reroute_if_stale(req_state *st)
{
    /* a held insert keeps the table it began with: it is in flight under it until it ends */
    if (!st->cur || st->hold || !rt_route_stale(st->r, st->cur))
        return;
    take_newer(st);
}

/* Ends what the request still records in flight besides cur (a held insert's older tables). */
static void release_kept(req_state *st)
{
    for (size_t i = 0; i < st->n_kept; i++)
        rt_route_end(st->r, st->kept[i]);
    st->n_kept = 0;
}

/* A row's slice has no shard in the current table. Reads the catalog's version (a newer table
 * is loaded at once), else waits for the watcher to publish one, at most [router] route_wait;
 * then takes the newest table as reroute_if_stale does. true when there is a newer table to try
 * the row with. */
static bool wait_routable(req_state *st)
{
    ferry_router *r = st->r;
    uint64_t was = st->cur->version;
    ferry_err err = {0};
    rt_snapshot *s = NULL;
    if (rt_fresh_snapshot(r, &s, &err))
        FLOG_WARN("msg=\"router: routing version check failed\" err=\"%s\"", err.msg);
    rt_snapshot_put(s);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t deadline = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000 +
                        (uint64_t)r->route_wait_ms;
    if (!rt_route_stale(r, st->cur) && !rt_wait_newer(r, was, deadline))
        return false;
    if (st->hold && st->n_kept == sizeof st->kept / sizeof st->kept[0])
        return false; /* the routing changed too often during one held insert */
    if (rt_route_stale(r, st->cur))
        take_newer(st);
    return st->cur->version > was;
}

/* ---- rows ----------------------------------------------------------------------------------- */

static uint64_t rows_written(const req_state *st)
{
    uint64_t written = 0;
    for (size_t i = 0; st->out && i < st->out->n; i++)
        written += st->out->shards[i].rows_written;
    return written;
}

/* Answers an error for the insert, saying what was already written: streams already open are
 * ended (their rows are written), rows still staged are dropped. */
static void insert_fail(ferry_http_req *req, req_state *st, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void insert_fail(ferry_http_req *req, req_state *st, const char *name, const char *fmt, ...)
{
    char msg[FERRY_ERR_MSG_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (st->out)
        rt_out_finish(st->out, false);
    rt_route_end(st->r, st->cur); /* nothing more is sent with this table */
    st->cur = NULL;
    release_kept(st);
    uint64_t written = rows_written(st);
    if (written)
        rt_respond_error(req, name,
                         "ferry router: %s; %llu row(s) before it were already written (retry "
                         "the whole request with the same query_id or insert_deduplication_token "
                         "'%s': written rows are deduplicated)",
                         msg, (unsigned long long)written, st->token);
    else
        rt_respond_error(req, name, "ferry router: %s; nothing was written", msg);
    st->failed = true;
    st->mode = MODE_DONE;
}

static int insert_statement(req_state *st);

/* Whether a row's tenant (len bytes, not NUL-terminated) is one of a bound user's. */
static bool in_scope(const rt_principal *who, const char *tenant, size_t len)
{
    char name[FERRY_NAME_MAX];
    if (len >= sizeof name)
        return false; /* longer than any tenant name */
    memcpy(name, tenant, len);
    name[len] = '\0';
    return ferry_sql_scope_has(&who->scope, name);
}

/* Parses every complete row in carry (+ eof) and hands it to its shard(s)' streams. */
static void consume(ferry_http_req *req, req_state *st, bool eof)
{
    size_t off = 0;
    ferry_err err = {0};
    reroute_if_stale(st);
    for (;;) {
        ferry_rt_row row;
        size_t used = 0;
        int rc = ferry_rt_codec_next(st->codec, st->carry.data + off, st->carry.len - off, eof,
                                     &used, &row, &err);
        if (rc) {
            insert_fail(req, st, strstr(err.msg, " has no ") ? "THERE_IS_NO_COLUMN" : "INCORRECT_DATA",
                        "%s", err.msg);
            return;
        }
        if (!row.have) {
            off += used;
            break;
        }
        const char *base = st->carry.data + off;
        off += used;
        if (!st->columns_sql) {
            /* The header (if any) has been read: the forwarded statement is known. */
            if (insert_statement(st)) {
                insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                return;
            }
            st->out->sql = st->columns_sql;
            /* the first row names the request's data in the deduplication tokens */
            st->out->data_hash = XXH3_64bits(base + row.start, row.end - row.start);
        }
        if (memchr(row.tenant, '\0', row.tenant_len)) {
            insert_fail(req, st, "INCORRECT_DATA",
                        "row %llu: the tenant value holds a NUL byte", (unsigned long long)row.number);
            return;
        }
        /* The split of a key is computed from its text wherever a slice is looked up (reads
         * take it from a query's literal, tools from the command line): a NUL byte would make
         * those disagree about where the row is. */
        if (memchr(row.key, '\0', row.key_len)) {
            insert_fail(req, st, "INCORRECT_DATA",
                        "row %llu: the split key value (column %s) holds a NUL byte; split keys "
                        "must be text without NUL bytes", (unsigned long long)row.number,
                        st->table->def.split_key);
            return;
        }
        if (st->who && !st->who->admin && !in_scope(st->who, row.tenant, row.tenant_len)) {
            /* before the registration lookup, so a bound user cannot tell a registered tenant
             * from an unknown one; a held insert: nothing has been sent, staged rows dropped */
            insert_fail(req, st, "ACCESS_DENIED",
                        "row %llu: tenant '%.*s' is not one of user %s's tenants",
                        (unsigned long long)row.number,
                        (int)(row.tenant_len > 128 ? 128 : row.tenant_len), row.tenant,
                        st->who->name);
            return;
        }
        const rt_tenant *t = NULL;
        uint32_t split = 0;
        const rt_route *rr = NULL;
        for (bool waited = false;; waited = true) {
            t = rt_find_tenant(st->cur, row.tenant, row.tenant_len);
            if (!t) {
                insert_fail(req, st, "BAD_ARGUMENTS",
                            "row %llu: tenant '%.*s' is not registered (ferry tenant add)",
                            (unsigned long long)row.number,
                            (int)(row.tenant_len > 128 ? 128 : row.tenant_len), row.tenant);
                return;
            }
            split = ferry_split_of(row.key, row.key_len, t->splits);
            rr = split < t->n_routes ? &t->routes[split] : NULL;
            if (rr && rr->n_shards)
                break;
            /* No shard the router knows serves the slice yet (a shard added, a route being
             * written): wait for the routing version that serves it rather than store the
             * other rows and fail these. */
            if (waited || !wait_routable(st)) {
                insert_fail(req, st, "ALL_CONNECTION_TRIES_FAILED",
                            "row %llu: slice %s/split%u has %s (routing version %llu, waited "
                            "up to [router] route_wait = %ld ms for one that serves it)",
                            (unsigned long long)row.number, t->name, split,
                            rr && rr->missing[0] ? "a shard that is not in the catalog"
                                                 : "no route",
                            (unsigned long long)st->cur->version, st->r->route_wait_ms);
                return;
            }
        }
        st->row_out.len = 0;
        rc = ferry_rt_codec_emit(st->codec, base, &row, split, &st->row_out, &err);
        if (rc) {
            insert_fail(req, st, "INCORRECT_DATA", "row %llu: %s", (unsigned long long)row.number,
                        err.msg);
            return;
        }
        st->rows++;
        if (rt_touched_add(&st->touched, t->name, split, rr->shards, rr->n_shards)) {
            insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            return;
        }
        for (uint32_t k = 0; k < rr->n_shards; k++) {
            if (rt_out_row(st->out, rr->shards[k], st->row_out.data, st->row_out.len)) {
                insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                return;
            }
        }
    }
    /* Keep the unconsumed tail. */
    if (off) {
        memmove(st->carry.data, st->carry.data + off, st->carry.len - off);
        st->carry.len -= off;
    }
}

/* Sets up the insert handler once the statement is known. False when it answered an error. */
static bool insert_begin(ferry_http_req *req, req_state *st, rt_table *t)
{
    ferry_router *r = st->r;
    st->table = t;
    if (!t->def.split_key[0]) {
        rt_respond_error(req, "BAD_ARGUMENTS",
                         "ferry router: table %s.%s has no split_key in the catalog ([table \"%s\"] "
                         "split_key = COLUMN, then ferry init)",
                         t->def.database, t->def.name, t->def.name);
        return false;
    }
    if (!ferry_rt_format_parse(st->ins.format, &st->format)) {
        rt_respond_error(req, "NOT_IMPLEMENTED",
                         "ferry router: format %s is not routed; inserts into managed tables "
                         "accept JSONEachRow, TabSeparated (TSV), TabSeparatedWithNames "
                         "(TSVWithNames), CSV, CSVWithNames and RowBinary",
                         st->ins.format);
        return false;
    }
    const ferry_rt_schema *schema = NULL;
    if (ferry_rt_format_needs_structure(st->format, st->ins.n_columns > 0)) {
        pthread_mutex_lock(&r->mu);
        bool have = t->have_schema;
        pthread_mutex_unlock(&r->mu);
        if (!have) {
            ferry_buf sql = {0}, out = {0};
            ferry_err err = {0};
            ferry_rt_schema sc = {0};
            /* system.columns rather than DESCRIBE: same columns, and every server streams it. */
            ferry_buf_puts(&sql, "SELECT name, type, default_kind FROM system.columns WHERE database = ");
            ferry_sql_quote(t->def.database, &sql);
            ferry_buf_puts(&sql, " AND table = ");
            ferry_sql_quote(t->def.name, &sql);
            ferry_buf_puts(&sql, " ORDER BY position");
            int rc = rt_query_any(r, ferry_buf_cstr(&sql), &out, &err);
            if (!rc)
                rc = ferry_rt_schema_parse(out.data ? out.data : "", out.len, &sc, &err);
            if (!rc && sc.n == 0)
                rc = ferry_err_set(&err, FERRY_ENOTFOUND, "the table does not exist on the first "
                                   "reachable shard");
            ferry_buf_free(&sql);
            ferry_buf_free(&out);
            if (rc) {
                rt_respond_error(req, "NETWORK_ERROR",
                                 "ferry router: cannot read the structure of %s.%s: %s",
                                 t->def.database, t->def.name, err.msg);
                return false;
            }
            pthread_mutex_lock(&r->mu);
            if (!t->have_schema) {
                t->schema = sc;
                t->have_schema = true;
            } else {
                ferry_rt_schema_free(&sc);
            }
            pthread_mutex_unlock(&r->mu);
        }
        schema = &t->schema; /* never changed once set */
    }
    const char **cols = NULL;
    if (st->ins.n_columns) {
        cols = calloc(st->ins.n_columns, sizeof *cols);
        for (size_t i = 0; cols && i < st->ins.n_columns; i++)
            cols[i] = st->ins.columns[i];
    }
    ferry_rt_codec_options o = {.format = st->format,
                                .tenant_column = t->def.tenant_column,
                                .split_column = t->def.split_column,
                                .split_key = t->def.split_key,
                                .columns = cols,
                                .n_columns = st->ins.n_columns,
                                .schema = schema,
                                .max_row_bytes = r->max_row_bytes};
    ferry_err err = {0};
    int rc = ferry_rt_codec_new(&o, &st->codec, &err);
    free(cols);
    if (rc) {
        rt_respond_error(req, strstr(err.msg, "has no") ? "THERE_IS_NO_COLUMN" : "BAD_ARGUMENTS",
                         "ferry router: %s", err.msg);
        return false;
    }
    if (rt_out_new(r, st->token, st->settings, st->n_settings,
                   ferry_rt_format_forward_name(st->format), &st->out)) {
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
        return false;
    }
    st->hold = st->who && !st->who->admin;
    st->out->hold = st->hold;
    st->cur = rt_route_begin(r);
    st->mode = MODE_INSERT;
    st->kind = RT_KIND_INSERT;
    pthread_mutex_lock(&r->mu);
    r->requests++;
    pthread_mutex_unlock(&r->mu);
    return true;
}

/* Builds the forwarded statement; only possible once a header (if any) has been read. */
static int insert_statement(req_state *st)
{
    ferry_buf b = {0};
    ferry_buf_puts(&b, "INSERT INTO ");
    ferry_sql_ident(st->table->def.database, &b);
    ferry_buf_putc(&b, '.');
    ferry_sql_ident(st->table->def.name, &b);
    ferry_buf_putc(&b, ' ');
    ferry_rt_codec_columns(st->codec, &b);
    ferry_buf_printf(&b, " FORMAT %s", ferry_rt_format_forward_name(st->format));
    st->columns_sql = ferry_buf_detach(&b);
    return st->columns_sql ? FERRY_OK : FERRY_ENOMEM;
}

static void insert_data(ferry_http_req *req, req_state *st, const char *data, size_t len,
                        bool eof)
{
    if (len && ferry_buf_append(&st->carry, data, len)) {
        insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        return;
    }
    consume(req, st, eof);
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
        if (a.rc || !insert_begin(req, st, t)) {
            if (!ferry_http_responded(req))
                rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
            st->mode = MODE_DONE;
            st->failed = true;
            return;
        }
        /* Data inline after FORMAT in the statement text comes first. */
        if (st->ins.data_offset < len)
            insert_data(req, st, sql + st->ins.data_offset, len - st->ins.data_offset, false);
        if (st->mode == MODE_INSERT && data_len)
            insert_data(req, st, data, data_len, false);
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
    st->t0 = mono_s();
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
            insert_fail(req, st, "QUERY_IS_TOO_LARGE",
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
        insert_fail(req, st, "QUERY_IS_TOO_LARGE",
                    "user %s is bound to tenants, so its inserts are held in the router until "
                    "every row is checked, and this one is larger than [router] "
                    "bound_insert_max_bytes (%zu bytes); send it in smaller batches",
                    st->who->name, r->bound_insert_max_bytes);
        return 0;
    }
    if (st->mode == MODE_INSERT) {
        insert_data(req, st, data, len, false);
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

static void respond_insert(ferry_http_req *req, req_state *st)
{
    ferry_router *r = st->r;
    uint64_t written = 0;
    ferry_buf failed = {0}, shards = {0}, msgs = {0};
    const char *name = NULL;
    for (size_t i = 0; i < st->out->n; i++) {
        rt_out_shard *res = &st->out->shards[i];
        const char *nm = r->shards[i]->name;
        written += res->rows_written;
        if (res->rows_written) {
            pthread_mutex_lock(&r->metrics.mu);
            r->metrics.rows_by_slot[i] += res->rows_written;
            r->metrics.bytes_by_slot[i] += res->bytes_written;
            pthread_mutex_unlock(&r->metrics.mu);
        }
        if (res->rows_written || res->failed)
            ferry_buf_printf(&shards, "%s%s", shards.len ? "," : "", nm);
        if (!res->failed)
            continue;
        ferry_buf_printf(&failed, "%s%s", failed.len ? "," : "", nm);
        ferry_buf_printf(&msgs, "%sshard %s: %llu row(s) not written: %s", msgs.len ? "; " : "",
                         nm, (unsigned long long)res->rows_failed, res->error);
        if (!name)
            name = res->error_name;
    }
    char summary[256], v[32];
    snprintf(summary, sizeof summary,
             "{\"read_rows\":\"%llu\",\"read_bytes\":\"%zu\",\"written_rows\":\"%llu\","
             "\"written_bytes\":\"0\",\"total_rows_to_read\":\"0\",\"result_rows\":\"0\","
             "\"result_bytes\":\"0\"}",
             (unsigned long long)st->rows, st->received, (unsigned long long)written);
    ferry_http_add_header(req, "X-ClickHouse-Query-Id", st->query_id);
    ferry_http_add_header(req, "X-ClickHouse-Summary", summary);
    ferry_http_add_header(req, "X-Ferry-Shards", shards.len ? ferry_buf_cstr(&shards) : "");
    pthread_mutex_lock(&r->mu);
    snprintf(v, sizeof v, "%llu", (unsigned long long)(r->snap ? r->snap->version : 0));
    r->rows_routed += written;
    pthread_mutex_unlock(&r->mu);
    ferry_http_add_header(req, "X-Ferry-Routing-Version", v);
    char missed[FERRY_LIST_MAX];
    if (failed.len && rt_quorum_accept(r, &st->touched, st->out, missed, sizeof missed)) {
        /* every slice reached [router] min_insert_replicas replicas and the others are
         * recorded for repair: acknowledged, saying which shards missed rows */
        ferry_http_add_header(req, "X-Ferry-Missed-Shards", missed);
        st->ok = true;
        ferry_http_respond(req, 200, "text/plain; charset=UTF-8", "", 0);
    } else if (failed.len) {
        ferry_http_add_header(req, "X-Ferry-Failed-Shards", ferry_buf_cstr(&failed));
        rt_respond_error(req, name && *name ? name : "ALL_CONNECTION_TRIES_FAILED",
                         "ferry router: the insert was written only in part: %llu of %llu row(s) "
                         "written; failed: %s. Retry the whole request with the same query_id or "
                         "insert_deduplication_token '%s': rows already written are deduplicated",
                         (unsigned long long)written, (unsigned long long)st->rows,
                         ferry_buf_cstr(&msgs), st->token);
    } else {
        st->ok = true;
        ferry_http_respond(req, 200, "text/plain; charset=UTF-8", "", 0);
    }
    ferry_buf_free(&failed);
    ferry_buf_free(&shards);
    ferry_buf_free(&msgs);
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
        insert_data(req, st, NULL, 0, true);
        if (st->mode != MODE_INSERT || ferry_http_responded(req))
            return;
        if (!st->columns_sql && insert_statement(st)) {
            insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            return;
        }
        st->out->sql = st->columns_sql;
        rt_out_finish(st->out, true);
        rt_route_end(st->r, st->cur); /* every row is stored (or failed): not in flight */
        st->cur = NULL;
        release_kept(st);
        respond_insert(req, st);
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
        rc = rt_read_config(r, cfg, opt->listen, addr, sizeof addr, &port, err);
    if (!rc)
        rc = rt_auth_init(r, cfg, addr,
                          opt->listen || ferry_config_get(cfg, "router", NULL, "listen"), err);
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

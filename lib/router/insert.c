/* The router daemon's insert path (request.h; server.c classifies the request and hands an
 * INSERT INTO <managed table> [(cols)] FORMAT F here): rows are parsed as the body streams in
 * (codec.c), each gets its tenant's split from its split key and its serving shard(s) from the
 * routing table taken at the request's start, and each shard's rows stream to it as one INSERT
 * with a deduplication token (stream.c). When the router publishes a newer table mid-request,
 * the open streams are ended and the rest is routed with the new table; a bound user's insert
 * is held whole until every row passed its tenant check. */
#include "request.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ferry/clock.h"
#include "ferry/log.h"
#include "ferry/split.h"
#include "ferry/strutil.h"

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
    uint64_t deadline = ferry_clock_ms_u64() + (uint64_t)r->route_wait_ms;
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

void rt_insert_fail(ferry_http_req *req, req_state *st, const char *name, const char *fmt, ...)
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
            rt_insert_fail(req, st, strstr(err.msg, " has no ") ? "THERE_IS_NO_COLUMN" : "INCORRECT_DATA",
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
                rt_insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                return;
            }
            st->out->sql = st->columns_sql;
            /* the first row names the request's data in the deduplication tokens */
            st->out->data_hash = XXH3_64bits(base + row.start, row.end - row.start);
        }
        if (memchr(row.tenant, '\0', row.tenant_len)) {
            rt_insert_fail(req, st, "INCORRECT_DATA",
                        "row %llu: the tenant value holds a NUL byte", (unsigned long long)row.number);
            return;
        }
        /* The split of a key is computed from its text wherever a slice is looked up (reads
         * take it from a query's literal, tools from the command line): a NUL byte would make
         * those disagree about where the row is. */
        if (memchr(row.key, '\0', row.key_len)) {
            rt_insert_fail(req, st, "INCORRECT_DATA",
                        "row %llu: the split key value (column %s) holds a NUL byte; split keys "
                        "must be text without NUL bytes", (unsigned long long)row.number,
                        st->table->def.split_key);
            return;
        }
        if (st->who && !st->who->admin && !in_scope(st->who, row.tenant, row.tenant_len)) {
            /* before the registration lookup, so a bound user cannot tell a registered tenant
             * from an unknown one; a held insert: nothing has been sent, staged rows dropped */
            rt_insert_fail(req, st, "ACCESS_DENIED",
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
                rt_insert_fail(req, st, "BAD_ARGUMENTS",
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
                rt_insert_fail(req, st, "ALL_CONNECTION_TRIES_FAILED",
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
            rt_insert_fail(req, st, "INCORRECT_DATA", "row %llu: %s", (unsigned long long)row.number,
                        err.msg);
            return;
        }
        st->rows++;
        size_t known = st->touched.n;
        if (rt_touched_add(&st->touched, t->name, split, rr->shards, rr->n_shards)) {
            rt_insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            return;
        }
        /* a slice new to the request is in the retry journal before its first row goes out */
        if (st->touched.n > known &&
            rt_journal_touch(st->r->journal, &st->journal, t->name, split, &err)) {
            rt_insert_fail(req, st, "CANNOT_WRITE_TO_FILE_DESCRIPTOR", "row %llu: %s",
                           (unsigned long long)row.number, err.msg);
            return;
        }
        for (uint32_t k = 0; k < rr->n_shards; k++) {
            if (rt_out_row(st->out, rr->shards[k], st->row_out.data, st->row_out.len)) {
                rt_insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
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

bool rt_insert_begin(ferry_http_req *req, req_state *st, rt_table *t)
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

void rt_insert_data(ferry_http_req *req, req_state *st, const char *data, size_t len, bool eof)
{
    if (len && ferry_buf_append(&st->carry, data, len)) {
        rt_insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        return;
    }
    consume(req, st, eof);
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

void rt_insert_end(ferry_http_req *req, req_state *st)
{
    rt_insert_data(req, st, NULL, 0, true);
    if (st->mode != MODE_INSERT || ferry_http_responded(req))
        return;
    if (!st->columns_sql && insert_statement(st)) {
        rt_insert_fail(req, st, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        return;
    }
    st->out->sql = st->columns_sql;
    rt_out_finish(st->out, true);
    rt_route_end(st->r, st->cur); /* every row is stored (or failed): not in flight */
    st->cur = NULL;
    release_kept(st);
    respond_insert(req, st);
}

/* ClickHouse's HTTP interface on the lab node: the query in the body or in ?query=, settings and
 * {name:Type} parameters from the URL, user/password, query ids, formats, streamed results,
 * streamed INSERT bodies, and errors with ClickHouse's codes and HTTP statuses.
 *
 * Connections come from the node's pool. A request that changes session state (URL settings,
 * ?database=, a SET or USE statement, the readonly mode of GET) runs on a pooled connection
 * that is discarded afterwards, so nothing leaks into the next request. */
#include "node.h"

#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ferry/buf.h"
#include "ferry/chhttp.h"
#include "ferry/log.h"

#define ACQUIRE_TIMEOUT_MS 30000

typedef struct qreq {
    node *n;
    ferry_chdb_pool *pool;  /* n->pool, or n->ro_pool for GET (readonly = 2, as ClickHouse) */
    ferry_chdb_conn *conn;
    bool discard;           /* session state changed: close the connection afterwards */
    ferry_chdb_insert *ins; /* streamed INSERT body */
    char *ins_error;        /* the first error while appending (ClickHouse's message) */
    ferry_buf body;         /* buffered body when not a streamed INSERT */
    bool body_too_large;
    char *query;            /* ?query= (owned copy) */
    char query_id[80];
    char default_format[64];
    bool wait_end;
    ferry_chdb_param *params;
    size_t n_params;
    ferry_buf settings_sql; /* "SET a = 'x', b = 'y'" or empty */
    char *database;
} qreq;

static void qreq_free(qreq *q)
{
    if (!q)
        return;
    if (q->ins)
        ferry_chdb_insert_close(q->ins);
    if (q->conn)
        ferry_chdb_pool_release(q->pool, q->conn, q->discard);
    free(q->ins_error);
    ferry_buf_free(&q->body);
    free(q->query);
    for (size_t i = 0; i < q->n_params; i++) {
        free((char *)q->params[i].name);
        free((char *)q->params[i].value);
    }
    free(q->params);
    ferry_buf_free(&q->settings_sql);
    free(q->database);
    free(q);
}

void node_query_on_cleanup(ferry_http_req *req, void *ctx, void *state)
{
    (void)req;
    (void)ctx;
    qreq_free(state);
}

static void common_headers(ferry_http_req *req, node *n, const char *query_id)
{
    if (query_id && *query_id)
        ferry_http_add_header(req, "X-ClickHouse-Query-Id", query_id);
    ferry_http_add_header(req, "X-ClickHouse-Server-Display-Name", n->name);
    if (n->timezone[0])
        ferry_http_add_header(req, "X-ClickHouse-Timezone", n->timezone);
}

/* Answers with ClickHouse's error text, its code header and the matching HTTP status. */
static void respond_ch_error(ferry_http_req *req, node *n, const char *query_id, const char *msg)
{
    char name[128];
    int code = ferry_ch_error_parse(msg, name, sizeof name);
    unsigned status = code ? ferry_ch_error_http_status(name) : 500;
    char codebuf[32];
    snprintf(codebuf, sizeof codebuf, "%d", code ? code : 1000);
    common_headers(req, n, query_id);
    ferry_http_add_header(req, "X-ClickHouse-Exception-Code", codebuf);
    ferry_buf b = FERRY_BUF_INIT;
    ferry_buf_printf(&b, "%s\n", msg);
    ferry_http_respond(req, status, "text/plain; charset=UTF-8", ferry_buf_cstr(&b), b.len);
    ferry_buf_free(&b);
}

/* An error the node itself raises, in ClickHouse's shape. */
static void respond_node_error(ferry_http_req *req, node *n, const char *query_id, int code,
                               const char *name, const char *what)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "Code: %d. DB::Exception: %s. (%s) (version %s)", code, what, name,
             n->version);
    respond_ch_error(req, n, query_id, msg);
}

static const char *content_type_for(const char *format)
{
    if (!strncasecmp(format, "JSON", 4))
        return "application/json; charset=UTF-8";
    if (!strncasecmp(format, "TabSeparated", 12) || !strncasecmp(format, "TSV", 3))
        return "text/tab-separated-values; charset=UTF-8";
    if (!strncasecmp(format, "CSV", 3))
        return "text/csv; charset=UTF-8; header=absent";
    if (!strcasecmp(format, "Native") || !strncasecmp(format, "RowBinary", 9) ||
        !strcasecmp(format, "Parquet") || !strncasecmp(format, "Arrow", 5))
        return "application/octet-stream";
    return "text/plain; charset=UTF-8";
}

static void sha256_hex(const char *s, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(s, strlen(s), md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static bool authenticate(node *n, const char *user, const char *password)
{
    for (size_t i = 0; i < n->n_users; i++) {
        if (strcmp(n->users[i].name, user) != 0)
            continue;
        if (!n->users[i].password_sha256[0])
            return password[0] == '\0';
        char hex[65];
        sha256_hex(password, hex);
        return strcmp(hex, n->users[i].password_sha256) == 0;
    }
    return false;
}

static void make_query_id(char *out, size_t n)
{
    static atomic_ulong counter;
    unsigned char r[16];
    FILE *fp = fopen("/dev/urandom", "rb");
    if (!fp || fread(r, 1, sizeof r, fp) != sizeof r) {
        unsigned long c = atomic_fetch_add(&counter, 1);
        for (int i = 0; i < 16; i++)
            r[i] = (unsigned char)((c >> (i % 8)) ^ (unsigned long)i * 131u);
    }
    if (fp)
        fclose(fp);
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    snprintf(out, n,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1],
             r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14],
             r[15]);
}

typedef struct arg_collect {
    qreq *q;
    const char *bad; /* the first unusable name */
    bool readonly_given;
} arg_collect;

static int collect_arg(void *cls, const char *name, const char *value)
{
    arg_collect *ac = cls;
    qreq *q = ac->q;
    switch (ferry_ch_param_kind(name)) {
    case FERRY_CH_PARAM_PROTOCOL:
        return 0;
    case FERRY_CH_PARAM_QUERY: {
        if (!ferry_ch_name_ok(name + 6)) {
            ac->bad = name;
            return 1;
        }
        ferry_chdb_param *p = realloc(q->params, (q->n_params + 1) * sizeof *p);
        if (!p)
            return 1;
        q->params = p;
        p[q->n_params].name = strdup(name + 6);
        p[q->n_params].value = strdup(value);
        q->n_params++;
        return 0;
    }
    case FERRY_CH_PARAM_SETTING:
        if (!ferry_ch_name_ok(name)) {
            ac->bad = name;
            return 1;
        }
        if (!strcmp(name, "readonly"))
            ac->readonly_given = true;
        ferry_buf_puts(&q->settings_sql, q->settings_sql.len ? ", " : "SET ");
        ferry_buf_printf(&q->settings_sql, "%s = ", name);
        ferry_ch_quote_string(&q->settings_sql, value);
        return 0;
    }
    return 0;
}

/* Takes a pooled connection and applies the request's settings and database to it. */
static bool prepare_connection(ferry_http_req *req, qreq *q)
{
    node *n = q->n;
    ferry_err err = {0};
    if (ferry_chdb_pool_acquire(q->pool, ACQUIRE_TIMEOUT_MS, &q->conn, &err) != FERRY_OK) {
        respond_node_error(req, n, q->query_id, 202, "TOO_MANY_SIMULTANEOUS_QUERIES", err.msg);
        return false;
    }
    if (q->settings_sql.len) {
        q->discard = true;
        ferry_chdb_result r;
        if (ferry_chdb_query(q->conn, q->settings_sql.data, q->settings_sql.len, NULL, NULL, 0,
                             &r, &err) != FERRY_OK) {
            respond_ch_error(req, n, q->query_id, r.error ? r.error : err.msg);
            ferry_chdb_result_free(&r);
            return false;
        }
        ferry_chdb_result_free(&r);
    }
    if (q->database && *q->database) {
        q->discard = true;
        ferry_buf use = FERRY_BUF_INIT;
        ferry_buf_puts(&use, "USE `");
        for (const char *p = q->database; *p; p++) {
            if (*p == '`' || *p == '\\')
                ferry_buf_putc(&use, '\\');
            ferry_buf_putc(&use, *p);
        }
        ferry_buf_putc(&use, '`');
        ferry_chdb_result r;
        int rc = ferry_chdb_query(q->conn, use.data, use.len, NULL, NULL, 0, &r, &err);
        ferry_buf_free(&use);
        if (rc != FERRY_OK) {
            respond_ch_error(req, n, q->query_id, r.error ? r.error : err.msg);
            ferry_chdb_result_free(&r);
            return false;
        }
        ferry_chdb_result_free(&r);
    }
    return true;
}

void node_query_on_headers(ferry_http_req *req, void *ctx)
{
    node *n = ctx;
    qreq *q = calloc(1, sizeof *q);
    if (!q) {
        ferry_http_respond_text(req, 500, "out of memory\n");
        return;
    }
    q->n = n;
    q->pool = n->pool;
    ferry_http_req_set_state(req, q);

    const char *qid = ferry_http_arg(req, "query_id");
    if (qid && *qid)
        snprintf(q->query_id, sizeof q->query_id, "%s", qid);
    else
        make_query_id(q->query_id, sizeof q->query_id);

    /* Credentials: X-ClickHouse-User/Key headers, then basic auth, then URL parameters. */
    const char *user = ferry_http_header(req, "X-ClickHouse-User");
    const char *password = ferry_http_header(req, "X-ClickHouse-Key");
    const char *bu, *bp;
    if (!user && ferry_http_basic_auth(req, &bu, &bp)) {
        user = bu;
        password = bp;
    }
    if (!user)
        user = ferry_http_arg(req, "user");
    if (!password)
        password = ferry_http_arg(req, "password");
    if (!user || !*user)
        user = "default";
    if (!password)
        password = "";
    if (!authenticate(n, user, password)) {
        char what[512];
        snprintf(what, sizeof what,
                 "%s: Authentication failed: password is incorrect, or there is no user with "
                 "such name",
                 user);
        respond_node_error(req, n, q->query_id, 516, "AUTHENTICATION_FAILED", what);
        return;
    }

    const char *fmt = ferry_http_arg(req, "default_format");
    snprintf(q->default_format, sizeof q->default_format, "%s",
             fmt && *fmt ? fmt : "TabSeparated");
    const char *w = ferry_http_arg(req, "wait_end_of_query");
    q->wait_end = w && !strcmp(w, "1");
    const char *db = ferry_http_arg(req, "database");
    if (!db)
        db = ferry_http_header(req, "X-ClickHouse-Database");
    if (db && *db)
        q->database = strdup(db);
    const char *query = ferry_http_arg(req, "query");
    if (query)
        q->query = strdup(query);

    arg_collect ac = {q, NULL, false};
    if (ferry_http_args_foreach(req, collect_arg, &ac) != 0) {
        char what[512];
        snprintf(what, sizeof what, "Invalid URL parameter name '%s'", ac.bad ? ac.bad : "?");
        respond_node_error(req, n, q->query_id, 36, "BAD_ARGUMENTS", what);
        return;
    }
    /* Like ClickHouse: GET requests are read-only (readonly = 2 still allows settings); they
     * take connections opened with that setting, so no per-request SET is needed. */
    if (!strcmp(ferry_http_method(req), "GET") && !ac.readonly_given)
        q->pool = n->ro_pool;

    /* ?query=INSERT ... FORMAT X with the rows in the body: stream them into ClickHouse. */
    char *ins_sql = NULL;
    char ins_fmt[64];
    if (q->query &&
        ferry_ch_split_insert(q->query, strlen(q->query), &ins_sql, ins_fmt, sizeof ins_fmt)) {
        if (!prepare_connection(req, q)) {
            free(ins_sql);
            return;
        }
        char *error = NULL;
        ferry_err err = {0};
        int rc = ferry_chdb_insert_open(q->conn, ins_sql, ins_fmt, &q->ins, &error, &err);
        free(ins_sql);
        if (rc != FERRY_OK) {
            respond_ch_error(req, n, q->query_id, error ? error : err.msg);
            free(error);
            /* A failed insert stream can leave the connection mid-statement. */
            q->discard = true;
        }
    }
}

int node_query_on_body(ferry_http_req *req, void *ctx, const char *data, size_t len)
{
    (void)ctx;
    qreq *q = ferry_http_req_state(req);
    if (!q || ferry_http_responded(req))
        return 0;
    if (q->ins) {
        if (q->ins_error)
            return 0;
        const char *error;
        if (ferry_chdb_insert_append(q->ins, data, len, &error) != FERRY_OK)
            q->ins_error = strdup(error);
        return 0;
    }
    if (q->body_too_large)
        return 0;
    if (q->body.len + len > q->n->max_query_body) {
        q->body_too_large = true;
        return 0;
    }
    return ferry_buf_append(&q->body, data, len) == 0 ? 0 : 1;
}

/* ---- streamed results ---- */

typedef struct stream_state {
    /* The stream owns its connection: libmicrohttpd may free the response after or before it
     * reports the request complete, and the connection must not go back to the pool while
     * the stream is still open on it. */
    ferry_chdb_pool *pool;
    ferry_chdb_conn *conn;
    bool discard;
    char query_id[80];
    ferry_chdb_stream *s;
    const char *chunk;
    size_t chunk_len, chunk_off;
    char tag[17];
    char *trailer; /* the in-band exception block, once an error happened mid-stream */
    size_t trailer_len, trailer_off;
    bool ended;
} stream_state;

static ssize_t stream_read(void *cls, char *buf, size_t max)
{
    stream_state *st = cls;
    for (;;) {
        if (st->chunk && st->chunk_off < st->chunk_len) {
            size_t n = st->chunk_len - st->chunk_off;
            if (n > max)
                n = max;
            memcpy(buf, st->chunk + st->chunk_off, n);
            st->chunk_off += n;
            return (ssize_t)n;
        }
        if (st->trailer) {
            size_t n = st->trailer_len - st->trailer_off;
            if (n == 0)
                return 0;
            if (n > max)
                n = max;
            memcpy(buf, st->trailer + st->trailer_off, n);
            st->trailer_off += n;
            return (ssize_t)n;
        }
        if (st->ended)
            return 0;
        const char *error = NULL;
        int r = ferry_chdb_stream_next(st->s, &st->chunk, &st->chunk_len, &error);
        st->chunk_off = 0;
        if (r == 0) {
            st->ended = true;
            st->chunk = NULL;
            return 0;
        }
        if (r < 0) {
            /* ClickHouse 25.11+ writes an error after the 200 in-band, framed by a tag the
             * response announced in X-ClickHouse-Exception-Tag. */
            st->chunk = NULL;
            ferry_buf b = FERRY_BUF_INIT;
            ferry_buf_printf(&b, "\r\n__exception__\r\n%s\r\n%s\r\n%zu %s\r\n__exception__\r\n",
                             st->tag, error, strlen(error), st->tag);
            st->trailer_len = b.len;
            st->trailer = ferry_buf_detach(&b);
            FLOG_WARN("query failed mid-stream query_id=%s", st->query_id);
        }
    }
}

static void stream_free(void *cls)
{
    stream_state *st = cls;
    ferry_chdb_stream_close(st->s);
    if (st->conn)
        ferry_chdb_pool_release(st->pool, st->conn, st->discard);
    free(st->trailer);
    free(st);
}

static void make_tag(char tag[17])
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[16] = {0};
    FILE *fp = fopen("/dev/urandom", "rb");
    if (fp) {
        if (fread(r, 1, sizeof r, fp) != sizeof r)
            memset(r, 7, sizeof r);
        fclose(fp);
    }
    for (int i = 0; i < 16; i++)
        tag[i] = alnum[r[i] % 36];
    tag[16] = '\0';
}

/* Statements whose results are worth streaming; DDL, INSERT and the rest run buffered. */
static bool streams(const char *sql, size_t len)
{
    static const char *const kws[] = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN",
                                       "EXISTS", NULL};
    for (size_t i = 0; kws[i]; i++)
        if (ferry_ch_starts_with_keyword(sql, len, kws[i]))
            return true;
    return false;
}

static void summary_header(ferry_http_req *req, const ferry_chdb_result *r)
{
    char s[512];
    snprintf(s, sizeof s,
             "{\"read_rows\":\"%llu\",\"read_bytes\":\"%llu\",\"written_rows\":\"%llu\","
             "\"written_bytes\":\"0\",\"total_rows_to_read\":\"0\",\"result_rows\":\"0\","
             "\"result_bytes\":\"%zu\",\"elapsed_ns\":\"%llu\"}",
             (unsigned long long)r->rows_read, (unsigned long long)r->bytes_read,
             (unsigned long long)r->rows_written, r->len,
             (unsigned long long)(r->elapsed * 1e9));
    ferry_http_add_header(req, "X-ClickHouse-Summary", s);
}

void node_query_on_complete(ferry_http_req *req, void *ctx)
{
    node *n = ctx;
    qreq *q = ferry_http_req_state(req);
    ferry_err err = {0};
    ferry_buf sql = FERRY_BUF_INIT;
    if (!q)
        return;
    if (q->ins) {
        const char *error = q->ins_error;
        uint64_t rows = 0;
        if (!error)
            ferry_chdb_insert_finish(q->ins, &rows, &error);
        if (error) {
            q->discard = true;
            respond_ch_error(req, n, q->query_id, error);
            goto out;
        }
        common_headers(req, n, q->query_id);
        ferry_http_add_header(req, "X-ClickHouse-Format", q->default_format);
        char s[256];
        snprintf(s, sizeof s, "{\"read_rows\":\"0\",\"read_bytes\":\"0\",\"written_rows\":\"%llu\"}",
                 (unsigned long long)rows);
        ferry_http_add_header(req, "X-ClickHouse-Summary", s);
        ferry_http_respond(req, 200, "text/plain; charset=UTF-8", "", 0);
        goto out;
    }
    if (q->body_too_large) {
        char what[256];
        snprintf(what, sizeof what, "Query (with its inline data) is larger than %zu bytes",
                 n->max_query_body);
        respond_node_error(req, n, q->query_id, 212, "QUERY_IS_TOO_LARGE", what);
        goto out;
    }
    /* The query: ?query= followed by the body (INSERT data), or the body alone. */
    if (q->query) {
        ferry_buf_puts(&sql, q->query);
        if (q->body.len) {
            ferry_buf_putc(&sql, '\n');
            ferry_buf_append(&sql, q->body.data, q->body.len);
        }
    } else {
        ferry_buf_append(&sql, ferry_buf_cstr(&q->body), q->body.len);
    }
    bool blank = true;
    for (size_t i = 0; i < sql.len; i++)
        if (sql.data[i] != ' ' && sql.data[i] != '\n' && sql.data[i] != '\t' &&
            sql.data[i] != '\r')
            blank = false;
    if (blank) {
        respond_node_error(req, n, q->query_id, 62, "SYNTAX_ERROR", "Empty query");
        goto out;
    }
    if (!prepare_connection(req, q))
        goto out;
    if (ferry_ch_starts_with_keyword(sql.data, sql.len, "SET") ||
        ferry_ch_starts_with_keyword(sql.data, sql.len, "USE"))
        q->discard = true;

    char out_fmt[64];
    if (ferry_ch_starts_with_keyword(sql.data, sql.len, "INSERT") ||
        !ferry_ch_find_format(sql.data, sql.len, out_fmt, sizeof out_fmt, NULL))
        snprintf(out_fmt, sizeof out_fmt, "%s", q->default_format);

    if (!q->wait_end && streams(sql.data, sql.len)) {
        stream_state *st = calloc(1, sizeof *st);
        char *error = NULL;
        if (!st) {
            ferry_http_respond_text(req, 500, "out of memory\n");
            goto out;
        }
        st->pool = q->pool;
        snprintf(st->query_id, sizeof st->query_id, "%s", q->query_id);
        if (ferry_chdb_stream_open(q->conn, sql.data, sql.len, q->default_format, q->params,
                                   q->n_params, &st->s, &error, &err) != FERRY_OK) {
            /* libchdb streams only some statements (not SHOW GRANTS, for one); ClickHouse
             * answers them all the same way, so those run buffered below */
            bool buffered = error && strstr(error, "Streaming query is not supported");
            if (!buffered)
                respond_ch_error(req, n, q->query_id, error ? error : err.msg);
            free(error);
            free(st);
            if (!buffered)
                goto out;
            goto run_buffered;
        }
        /* Fetch the first chunk before answering, so errors found while starting the query
         * (most of them) still get a proper status instead of an in-band exception. */
        const char *e = NULL;
        int r = ferry_chdb_stream_next(st->s, &st->chunk, &st->chunk_len, &e);
        if (r < 0) {
            respond_ch_error(req, n, q->query_id, e);
            stream_free(st);
            goto out;
        }
        if (r == 0)
            st->ended = true;
        st->conn = q->conn;
        st->discard = q->discard;
        q->conn = NULL;
        make_tag(st->tag);
        common_headers(req, n, q->query_id);
        ferry_http_add_header(req, "X-ClickHouse-Format", out_fmt);
        ferry_http_add_header(req, "X-ClickHouse-Exception-Tag", st->tag);
        ferry_http_respond_stream(req, 200, content_type_for(out_fmt), stream_read, st,
                                  stream_free);
        goto out;
    }

run_buffered:;
    ferry_chdb_result res;
    if (ferry_chdb_query(q->conn, sql.data, sql.len, q->default_format, q->params, q->n_params,
                         &res, &err) != FERRY_OK) {
        respond_ch_error(req, n, q->query_id, res.error ? res.error : err.msg);
        ferry_chdb_result_free(&res);
        goto out;
    }
    common_headers(req, n, q->query_id);
    ferry_http_add_header(req, "X-ClickHouse-Format", out_fmt);
    summary_header(req, &res);
    ferry_http_respond(req, 200, content_type_for(out_fmt), res.data, res.len);
    ferry_chdb_result_free(&res);
out:
    ferry_buf_free(&sql);
}

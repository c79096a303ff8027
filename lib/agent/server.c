/* The node agent's HTTP side: bearer authentication on every route, the operation table under
 * /agent/v1/, JSON request and answer handling, the error-to-status mapping, and the streamed
 * receive route. The operations themselves are in ops.c and transfer.c. */
#include "agent_int.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "ferry/clock.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

#define AGENT_MAX_JSON_BODY (4u << 20)

/* ---- object ------------------------------------------------------------------------------ */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int ferry_agent_new(const ferry_agent_options *opt, ferry_agent **out, ferry_err *err)
{
    if (!opt->clickhouse_url || !*opt->clickhouse_url)
        return ferry_err_set(err, FERRY_EINVAL, "agent: a ClickHouse URL is required");
    if (!opt->data_path || opt->data_path[0] != '/')
        return ferry_err_set(err, FERRY_EINVAL, "agent: the data path must be absolute");
    if (!opt->token || strlen(opt->token) < 16)
        return ferry_err_set(err, FERRY_EINVAL, "agent: the token must have at least 16 "
                             "characters");
    ferry_agent *a = calloc(1, sizeof *a);
    if (!a)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t n = strlen(opt->data_path);
    a->data_path = malloc(n + 2);
    if (a->data_path)
        sprintf(a->data_path, "%s%s", opt->data_path, opt->data_path[n - 1] == '/' ? "" : "/");
    a->ch_url = strdup(opt->clickhouse_url);
    a->ch_user = dup_or_null(opt->clickhouse_user);
    a->ch_password = dup_or_null(opt->clickhouse_password);
    a->token = strdup(opt->token);
    a->config_path = dup_or_null(opt->config_path);
    a->refused_deletes = opt->refused_deletes;
    if (!a->data_path || !a->ch_url || !a->token) {
        ferry_agent_free(a);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&a->metrics.mu, NULL);
    agent_cache_init(&a->cache);
    for (size_t i = 0; i < AGENT_METRIC_OPS; i++)
        ferry_histogram_init(&a->metrics.seconds[i]);
    if (agent_trash_init(&a->trash) != 0)
        FLOG_WARN("agent: no thread for the trash: folders are removed in place");
    *out = a;
    return FERRY_OK;
}

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void ferry_agent_free(ferry_agent *a)
{
    if (!a)
        return;
    agent_trash_destroy(&a->trash);
    free(a->ch_url);
    free(a->ch_user);
    wipe_free(a->ch_password);
    free(a->data_path);
    wipe_free(a->token);
    free(a->config_path);
    pthread_mutex_destroy(&a->metrics.mu);
    agent_cache_free(&a->cache);
    for (size_t i = 0; i < AGENT_METRIC_OPS; i++)
        ferry_histogram_destroy(&a->metrics.seconds[i]);
    free(a);
}

int ferry_agent_check_config(ferry_agent *a, ferry_err *err)
{
    if (!a->config_path)
        return FERRY_OK;
    agent_env env;
    agent_env_init(&env, a);
    ferry_objstore *st = NULL;
    uint64_t v = 0;
    int rc = agent_env_open_store(&env, FERRY_ROLE_UPLOADER, &st, err);
    if (rc == FERRY_OK &&
        (rc = ferry_config_u64(&env.cfg, "cluster", NULL, "pointer_format", 5, &v, err)) ==
            FERRY_OK &&
        (v < 1 || v > 5))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [cluster] pointer_format must be 1..5",
                           a->config_path);
    ferry_objstore_close(st);
    agent_env_free(&env);
    return rc;
}

/* ---- answers ------------------------------------------------------------------------------- */

unsigned agent_status_for(int code)
{
    switch (code) {
    case FERRY_EINVAL: return 400;
    case FERRY_EAUTH: return 403;
    case FERRY_ENOTFOUND: return 404;
    case FERRY_ECONFLICT: return 409;
    case FERRY_EUNSUPPORTED: return 422;
    case FERRY_EREMOTE:
    case FERRY_ECONNECT: return 502;
    case FERRY_ETIMEOUT: return 504;
    default: return 500;
    }
}

static void respond_json(ferry_http_req *req, unsigned status, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s) {
        ferry_http_respond_text(req, 500, "out of memory\n");
        return;
    }
    size_t len = strlen(s);
    char *body = realloc(s, len + 2);
    if (body) {
        s = body;
        s[len++] = '\n';
        s[len] = '\0';
    }
    ferry_http_respond(req, status, "application/json", s, len);
    free(s);
}

static void respond_error(ferry_http_req *req, unsigned status, int code, const char *msg)
{
    json_t *o = json_pack("{s:s, s:s, s:i}", "error", msg, "code", ferry_code_name(code),
                          "status", (int)status);
    respond_json(req, status, o);
    json_decref(o);
}

/* ---- authentication ------------------------------------------------------------------------ */

static bool authorised(ferry_http_req *req, ferry_agent *a)
{
    if (ferry_agent_bearer_ok(ferry_http_header(req, "Authorization"), a->token))
        return true;
    pthread_mutex_lock(&a->metrics.mu);
    a->metrics.auth_failures++;
    pthread_mutex_unlock(&a->metrics.mu);
    ferry_http_add_header(req, "WWW-Authenticate", "Bearer realm=\"ferry-agent\"");
    respond_error(req, 401, FERRY_EAUTH, "missing or wrong bearer token");
    FLOG_WARN("agent: refused an unauthenticated request method=%s path=%s",
              ferry_http_method(req), ferry_http_path(req));
    return false;
}

/* ---- the operation table ------------------------------------------------------------------- */

typedef struct agent_op {
    const char *name;
    const char *method;
    agent_op_fn fn;
} agent_op;

static const agent_op OPS[] = {
    {"status", "GET", agent_op_status},
    {"parts", "POST", agent_op_parts},
    {"freeze", "POST", agent_op_freeze},
    {"frozen", "POST", agent_op_frozen},
    {"upload", "POST", agent_op_upload},
    {"write-pointers", "POST", agent_op_write_pointers},
    {"send", "POST", agent_op_send},
    {"remove-detached", "POST", agent_op_remove_detached},
    {"remove-freeze", "POST", agent_op_remove_freeze},
    {"pointers", "POST", agent_op_pointers},
    {"place-parts", "POST", agent_op_place_parts},
    {"pin", "POST", agent_op_pin},
};

#define N_OPS (sizeof OPS / sizeof OPS[0])
#define OP_RECEIVE N_OPS /* the metrics' index of the streamed receive */
_Static_assert(N_OPS + 1 <= AGENT_METRIC_OPS, "agent_metrics has a slot per operation");

/* One finished operation in the metrics: outcome, duration, and the bytes its answer reports. */
static void count_op(ferry_agent *a, size_t op, bool ok, double seconds, json_t *resp)
{
    agent_metrics *m = &a->metrics;
    ferry_histogram_observe(&m->seconds[op], seconds);
    pthread_mutex_lock(&m->mu);
    if (ok)
        m->ok[op]++;
    else
        m->failed[op]++;
    if (ok && resp) {
        m->bytes_sent += (uint64_t)json_integer_value(json_object_get(resp, "bytes_sent"));
        m->bytes_uploaded += (uint64_t)json_integer_value(json_object_get(resp, "bytes_uploaded"));
    }
    if (op == OP_RECEIVE) {
        if (ok) {
            const json_t *parts = json_object_get(resp, "parts"); /* a batch */
            m->parts_received += parts ? json_array_size(parts) : 1;
            m->bytes_received += (uint64_t)json_integer_value(json_object_get(resp, "bytes"));
        }
    }
    pthread_mutex_unlock(&m->mu);
}

/* The deletes refused on this server. ClickHouse's credential for the object store cannot
 * delete (docs/security.md), so every delete request the local ClickHouse sent to it, as its
 * own counters give them, was refused: ClickHouse tried to remove objects other servers may
 * point at. The embedder's own count (a lab node's guard) comes beside it. ClickHouse is asked
 * with a short timeout: a scrape must not hang on a stuck server, and a failed query leaves
 * the sample out and says so in ferry_agent_clickhouse_up. */
static bool refused_deletes_metrics(ferry_buf *b, ferry_agent *a)
{
    ferry_ch_options o = {.url = a->ch_url,
                          .user = a->ch_user,
                          .password = a->ch_password,
                          .connect_timeout_ms = 1000,
                          .read_timeout_ms = 2000,
                          .max_attempts = 1};
    ferry_ch_client *ch = NULL;
    ferry_ch_rows rows = {0};
    ferry_err err = {0};
    double ch_deletes = 0;
    bool up = ferry_ch_client_new(&o, &ch, &err) == FERRY_OK &&
              ferry_ch_query_rows(ch, "SELECT toString(sum(value)) FROM system.events WHERE "
                                      "event IN ('DiskS3DeleteObjects', 'DiskAzureDeleteObjects')",
                                  &rows, NULL, &err) == FERRY_OK;
    if (up && rows.n_rows == 1 && rows.n_cols == 1)
        ch_deletes = strtod(ferry_ch_rows_get(&rows, 0, 0), NULL);
    ferry_ch_rows_free(&rows);
    ferry_ch_client_free(ch);
    ferry_metrics_family(b, "ferry_agent_clickhouse_up", FERRY_METRIC_GAUGE,
                         "1 when the local ClickHouse answered this scrape's question");
    ferry_metrics_sample(b, "ferry_agent_clickhouse_up", NULL, up ? 1 : 0);
    ferry_metrics_family(b, "ferry_agent_refused_deletes_total", FERRY_METRIC_COUNTER,
                         "object deletes refused on this server: clickhouse = delete requests "
                         "the local ClickHouse sent to the object store (its credential cannot "
                         "delete), guard = deletes the embedding lab node refused");
    if (up)
        ferry_metrics_sample(b, "ferry_agent_refused_deletes_total",
                             (const char *[]){"source", "clickhouse", NULL}, ch_deletes);
    if (a->refused_deletes)
        ferry_metrics_sample(b, "ferry_agent_refused_deletes_total",
                             (const char *[]){"source", "guard", NULL},
                             (double)a->refused_deletes());
    return up;
}

/* The local disks' free bytes, sizes and free inodes now (statvfs, as `status` reports them),
 * for the disk-full alerts: ClickHouse's system.disks has no inode column, and a ClickHouse disk
 * that fills up can commit unreadable parts (docs/reliability.md). Called only when ClickHouse
 * answered this scrape (the disks are its system.disks). */
static void disk_metrics(ferry_buf *b, ferry_agent *a)
{
    agent_env env;
    agent_env_init(&env, a);
    ferry_err err = {0};
    if (agent_env_roots(&env, &err) == FERRY_OK) {
        ferry_metrics_family(b, "ferry_agent_disk_free_bytes", FERRY_METRIC_GAUGE,
                             "bytes an unprivileged writer can still use on the file system of "
                             "a local ClickHouse disk (statvfs f_bavail)");
        struct statvfs v[64];
        bool ok[64] = {0};
        size_t n = env.n_disks < 64 ? env.n_disks : 64;
        for (size_t i = 0; i < n; i++) {
            ok[i] = !env.disks[i].is_remote && statvfs(env.disks[i].path, &v[i]) == 0;
            if (ok[i])
                ferry_metrics_sample(b, "ferry_agent_disk_free_bytes",
                                     (const char *[]){"disk", env.disks[i].name, NULL},
                                     (double)v[i].f_bavail * (double)v[i].f_frsize);
        }
        ferry_metrics_family(b, "ferry_agent_disk_size_bytes", FERRY_METRIC_GAUGE,
                             "size of the file system of a local ClickHouse disk (statvfs "
                             "f_blocks): with free_bytes, how full it is");
        for (size_t i = 0; i < n; i++)
            if (ok[i])
                ferry_metrics_sample(b, "ferry_agent_disk_size_bytes",
                                     (const char *[]){"disk", env.disks[i].name, NULL},
                                     (double)v[i].f_blocks * (double)v[i].f_frsize);
        ferry_metrics_family(b, "ferry_agent_disk_free_inodes", FERRY_METRIC_GAUGE,
                             "inodes an unprivileged writer can still use on the file system of "
                             "a local ClickHouse disk (statvfs f_favail; none for a file system "
                             "without an inode limit)");
        for (size_t i = 0; i < n; i++)
            if (ok[i] && v[i].f_files > 0)
                ferry_metrics_sample(b, "ferry_agent_disk_free_inodes",
                                     (const char *[]){"disk", env.disks[i].name, NULL},
                                     (double)v[i].f_favail);
    }
    agent_env_free(&env);
}

/* GET /agent/metrics: the Prometheus text of what the agent did since it started. */
static void metrics_respond(ferry_http_req *req, ferry_agent *a)
{
    agent_metrics *m = &a->metrics;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_metrics_family(&b, "ferry_agent_operations_total", FERRY_METRIC_COUNTER,
                         "agent operations by kind and outcome");
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i <= N_OPS; i++) {
        const char *name = i < N_OPS ? OPS[i].name : "receive";
        ferry_metrics_sample(&b, "ferry_agent_operations_total",
                             (const char *[]){"operation", name, "outcome", "ok", NULL},
                             (double)m->ok[i]);
        ferry_metrics_sample(&b, "ferry_agent_operations_total",
                             (const char *[]){"operation", name, "outcome", "error", NULL},
                             (double)m->failed[i]);
    }
    agent_metrics snap = *m;
    pthread_mutex_unlock(&m->mu);
    ferry_metrics_family(&b, "ferry_agent_operation_seconds", FERRY_METRIC_HISTOGRAM,
                         "time to answer an agent operation");
    for (size_t i = 0; i <= N_OPS; i++)
        ferry_histogram_render(&m->seconds[i], &b, "ferry_agent_operation_seconds",
                               (const char *[]){"operation", i < N_OPS ? OPS[i].name : "receive",
                                                NULL});
    ferry_metrics_family(&b, "ferry_agent_sent_bytes_total", FERRY_METRIC_COUNTER,
                         "part bytes sent to other agents (moves, clones, repair)");
    ferry_metrics_sample(&b, "ferry_agent_sent_bytes_total", NULL, (double)snap.bytes_sent);
    ferry_metrics_family(&b, "ferry_agent_received_bytes_total", FERRY_METRIC_COUNTER,
                         "part bytes received from other agents and placed");
    ferry_metrics_sample(&b, "ferry_agent_received_bytes_total", NULL,
                         (double)snap.bytes_received);
    ferry_metrics_family(&b, "ferry_agent_uploaded_bytes_total", FERRY_METRIC_COUNTER,
                         "bytes uploaded to the object store (tiering)");
    ferry_metrics_sample(&b, "ferry_agent_uploaded_bytes_total", NULL,
                         (double)snap.bytes_uploaded);
    ferry_metrics_family(&b, "ferry_agent_parts_verified_total", FERRY_METRIC_COUNTER,
                         "received parts by the outcome of their checks (checksums, objects)");
    ferry_metrics_sample(&b, "ferry_agent_parts_verified_total",
                         (const char *[]){"outcome", "placed", NULL}, (double)snap.parts_received);
    ferry_metrics_sample(&b, "ferry_agent_parts_verified_total",
                         (const char *[]){"outcome", "refused", NULL}, (double)snap.parts_refused);
    if (refused_deletes_metrics(&b, a)) /* the disks are ClickHouse's: only when it answers */
        disk_metrics(&b, a);
    /* what was refused before an operation ran: a wrong token here, the HTTP server's bounds
     * (429 over the per-address limit, deadlines, bodies too large) */
    ferry_metrics_family(&b, "ferry_agent_refused_total", FERRY_METRIC_COUNTER,
                         "requests the agent refused: a missing or wrong bearer token (401)");
    ferry_metrics_sample(&b, "ferry_agent_refused_total",
                         (const char *[]){"reason", "authentication", NULL},
                         (double)snap.auth_failures);
    if (snap.httpd)
        ferry_httpd_metrics(snap.httpd, &b, "ferry_agent_http_refused_total");
    if (b.data)
        ferry_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    else
        respond_error(req, 500, FERRY_ENOMEM, "out of memory");
    ferry_buf_free(&b);
}

static void op_headers(ferry_http_req *req, void *ctx)
{
    authorised(req, ctx);
}

static void op_complete(ferry_http_req *req, void *ctx)
{
    ferry_agent *a = ctx;
    if (ferry_http_responded(req))
        return;
    const char *path = ferry_http_path(req) + strlen(FERRY_AGENT_PREFIX);
    const agent_op *op = NULL;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (!strcmp(OPS[i].name, path))
            op = &OPS[i];
    char msg[600];
    if (!op && !strcmp(path, "metrics") && !strcmp(ferry_http_method(req), "GET")) {
        metrics_respond(req, a);
        return;
    }
    if (!op) {
        snprintf(msg, sizeof msg, "no agent operation '%.200s' (see docs/agent.md)", path);
        respond_error(req, 404, FERRY_ENOTFOUND, msg);
        return;
    }
    if (strcmp(ferry_http_method(req), op->method) != 0) {
        snprintf(msg, sizeof msg, "%s takes %s", op->name, op->method);
        ferry_http_add_header(req, "Allow", op->method);
        respond_error(req, 405, FERRY_EINVAL, msg);
        return;
    }
    json_t *body = NULL;
    if (!strcmp(op->method, "POST")) {
        size_t len = 0;
        const char *data = ferry_http_body(req, &len);
        json_error_t je;
        body = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(body)) {
            snprintf(msg, sizeof msg, "the body must be a JSON object (%s)",
                     body ? "got another JSON value" : je.text);
            json_decref(body);
            respond_error(req, 400, FERRY_EINVAL, msg);
            return;
        }
    } else if (!(body = json_object())) {
        respond_error(req, 500, FERRY_ENOMEM, "out of memory");
        return;
    }
    agent_env env;
    agent_env_init(&env, a);
    ferry_err err = {0};
    json_t *resp = NULL;
    double t0 = ferry_clock_s();
    int rc = op->fn(&env, body, &resp, &err);
    /* every answer is built with jansson; a NULL one is an allocation that failed */
    if (rc == FERRY_OK && !resp)
        rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory building the answer of %s",
                           op->name);
    count_op(a, (size_t)(op - OPS), rc == FERRY_OK, ferry_clock_s() - t0, resp);
    if (rc == FERRY_OK) {
        respond_json(req, 200, resp);
        FLOG_INFO("agent: op=%s status=200", op->name);
    } else {
        unsigned st = env.status ? env.status : agent_status_for(rc);
        respond_error(req, st, rc, err.msg);
        FLOG_WARN("agent: op=%s status=%u error=\"%s\"", op->name, st, err.msg);
    }
    json_decref(resp);
    json_decref(body);
    agent_env_free(&env);
}

/* ---- the receive route (streamed body) ---------------------------------------------------- */

typedef struct recv_state {
    agent_env env;
    agent_recv *r;
    ferry_err err;
    int rc;
    double t0;
} recv_state;

static void recv_headers(ferry_http_req *req, void *ctx)
{
    ferry_agent *a = ctx;
    if (!authorised(req, a))
        return;
    if (strcmp(ferry_http_method(req), "POST") != 0) {
        ferry_http_add_header(req, "Allow", "POST");
        respond_error(req, 405, FERRY_EINVAL, "receive takes POST");
        return;
    }
    recv_state *s = calloc(1, sizeof *s);
    if (!s) {
        respond_error(req, 500, FERRY_ENOMEM, "out of memory");
        return;
    }
    agent_env_init(&s->env, a);
    s->t0 = ferry_clock_s();
    ferry_http_req_set_state(req, s);
    const char *db = ferry_http_arg(req, "database"), *table = ferry_http_arg(req, "table"),
               *part = ferry_http_arg(req, "part"), *kind = ferry_http_arg(req, "kind"),
               *disk = ferry_http_arg(req, "disk"), *batch = ferry_http_arg(req, "batch");
    bool is_batch = batch && !strcmp(batch, "1");
    if (!db || !table || (!part && !is_batch) || (part && is_batch) || !kind || !*db ||
        !*table) {
        respond_error(req, 400, FERRY_EINVAL, "receive needs the arguments database, table, "
                      "kind and either part or batch=1");
        return;
    }
    s->rc = agent_recv_begin(&s->env, db, table, part, kind, disk && *disk ? disk : NULL,
                             &s->r, &s->err);
    if (s->rc) {
        unsigned st = s->env.status ? s->env.status : agent_status_for(s->rc);
        respond_error(req, st, s->rc, s->err.msg);
        FLOG_WARN("agent: op=receive status=%u error=\"%s\"", st, s->err.msg);
    }
}

static int recv_body(ferry_http_req *req, void *ctx, const char *data, size_t len)
{
    (void)ctx;
    recv_state *s = ferry_http_req_state(req);
    if (!s || ferry_http_responded(req) || s->rc)
        return 0; /* already answered (or failed): drain the rest */
    s->rc = agent_recv_feed(s->r, data, len, &s->err);
    return 0;
}

static void recv_complete(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    recv_state *s = ferry_http_req_state(req);
    if (ferry_http_responded(req) || !s)
        return;
    json_t *resp = NULL;
    if (s->rc == FERRY_OK)
        s->rc = agent_recv_finish(s->r, &resp, &s->err);
    count_op(s->env.a, OP_RECEIVE, s->rc == FERRY_OK, ferry_clock_s() - s->t0, resp);
    if (s->rc == FERRY_EINVAL) {
        pthread_mutex_lock(&s->env.a->metrics.mu);
        s->env.a->metrics.parts_refused++; /* a part that failed its checks */
        pthread_mutex_unlock(&s->env.a->metrics.mu);
    }
    if (s->rc == FERRY_OK) {
        const json_t *parts = json_object_get(resp, "parts"); /* a batch */
        FLOG_INFO("agent: op=receive status=200 parts=%zu", parts ? json_array_size(parts) : 1);
        respond_json(req, 200, resp);
    } else {
        /* A part that fails its checks is unprocessable content, not a malformed request. */
        unsigned st = s->env.status ? s->env.status
                                    : s->rc == FERRY_EINVAL ? 422 : agent_status_for(s->rc);
        respond_error(req, st, s->rc, s->err.msg);
        FLOG_WARN("agent: op=receive status=%u error=\"%s\"", st, s->err.msg);
    }
    json_decref(resp);
}

static void recv_cleanup(ferry_http_req *req, void *ctx, void *state)
{
    (void)req;
    (void)ctx;
    recv_state *s = state;
    if (!s)
        return;
    agent_recv_free(s->r);
    agent_env_free(&s->env);
    free(s);
}

/* ---- routes -------------------------------------------------------------------------------- */

static void not_agent(ferry_http_req *req, void *ctx)
{
    if (!authorised(req, ctx))
        return;
    char msg[600];
    snprintf(msg, sizeof msg, "no agent handler for %s %.300s (the API is under %s)",
             ferry_http_method(req), ferry_http_path(req), FERRY_AGENT_PREFIX);
    respond_error(req, 404, FERRY_ENOTFOUND, msg);
}

void ferry_agent_set_httpd(ferry_agent *a, ferry_httpd *srv)
{
    pthread_mutex_lock(&a->metrics.mu);
    a->metrics.httpd = srv;
    pthread_mutex_unlock(&a->metrics.mu);
}

size_t ferry_agent_routes(ferry_agent *a, ferry_http_route *routes, size_t max)
{
    if (max < FERRY_AGENT_N_ROUTES)
        return 0;
    routes[0] = (ferry_http_route){.method = NULL, .path = FERRY_AGENT_PREFIX "receive",
                                   .on_headers = recv_headers, .on_body = recv_body,
                                   .on_complete = recv_complete, .on_cleanup = recv_cleanup,
                                   .ctx = a};
    routes[1] = (ferry_http_route){.method = NULL, .path = FERRY_AGENT_PREFIX,
                                   .on_headers = op_headers, .on_complete = op_complete,
                                   .ctx = a, .max_body = AGENT_MAX_JSON_BODY};
    routes[2] = (ferry_http_route){.method = NULL, .path = "/agent/", .on_complete = not_agent,
                                   .ctx = a};
    return FERRY_AGENT_N_ROUTES;
}

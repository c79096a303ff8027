/* ferry-node: one simulated ClickHouse server for the lab. It embeds ClickHouse (libchdb 26.7;
 * 26.5 too, its INSERT bodies spooled to DATA/spool/ as it has no streaming insert)
 * with its own data path and a generated config.xml (storage policy `tiered`: hot volume on
 * the local disk, cold volume on an object-storage disk with local pointer files), and serves
 * ClickHouse's HTTP interface on a loopback port.
 *
 *   ferry-node --config NODE.CONF
 *
 * NODE.CONF (git-config syntax, written by `ferry lab up`):
 *   [node]          name, data_path, http_port, listen (127.0.0.1), libchdb (optional path),
 *                   pool_size (16), max_query_body (256M)
 *   [object_store]  type = local, path = shared blob dir; or type = s3, endpoint, bucket,
 *                   prefix, access_key_id, secret_access_key_file
 *   [user "NAME"]   password_sha256 = hex ("" = no password)
 *
 *   [agent]         token_file (mounts the node agent under /agent/v1/), config (the ferry
 *                   config it reads: object store, pointer format)
 *
 * Routes: GET /ping, /replicas_status ("Ok.\n"), GET /ferry/status (JSON), /agent/... (the
 * node agent, lib/agent), and / for queries. Exit status: 0 after SIGTERM/SIGINT, 2 for a bad
 * config, 1 when it cannot start (library missing, port taken, ClickHouse refused the config). */
#include "node.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/testknob.h"
#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

static const char usage[] =
    "usage: ferry-node --config NODE.CONF\n\n"
    "Runs one lab ClickHouse server (embedded libchdb) with ClickHouse's HTTP interface.\n"
    "Started by 'ferry lab up'; see docs/lab.md.\n";

static int die(int status, const ferry_err *err)
{
    fprintf(stderr, "ferry-node: %s\n", err->msg);
    return status;
}

/* Appends s with XML escaping. */
static void xml_put(ferry_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': ferry_buf_puts(b, "&lt;"); break;
        case '>': ferry_buf_puts(b, "&gt;"); break;
        case '&': ferry_buf_puts(b, "&amp;"); break;
        case '"': ferry_buf_puts(b, "&quot;"); break;
        default: ferry_buf_putc(b, *s);
        }
    }
}


/* An allocation of the config loader that must not fail: out of memory otherwise. */
#define NEED(x)                                                                                  \
    do {                                                                                         \
        if (!(x)) {                                                                              \
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");                              \
            goto out;                                                                            \
        }                                                                                        \
    } while (0)

static int load_node_config(node *n, const char *path, char **s3_key, char **s3_secret,
                            char **s3_prefix, ferry_err *err)
{
    ferry_config c;
    int rc = ferry_config_load(path, &c, err);
    if (rc != FERRY_OK)
        return rc;
    static const char *const node_keys[] = {"name", "data_path", "http_port", "listen",
                                            "libchdb", "pool_size", "max_query_body",
                                            FERRY_HTTPD_CONFIG_KEYS, NULL};
    static const char *const store_keys[] = {"type", "path", "endpoint", "bucket", "prefix",
                                             "region", "access_key_id",
                                             "secret_access_key_file", "cache_size", NULL};
    static const char *const user_keys[] = {"password_sha256", NULL};
    static const char *const agent_keys[] = {"token_file", "config", NULL};
    const char *v;
    uint64_t u;
    if ((rc = ferry_config_check_keys(&c, "node", node_keys, err)) ||
        (rc = ferry_config_check_keys(&c, "object_store", store_keys, err)) ||
        (rc = ferry_config_check_keys(&c, "user", user_keys, err)) ||
        (rc = ferry_config_check_keys(&c, "agent", agent_keys, err)))
        goto out;
    v = ferry_config_get(&c, "agent", NULL, "token_file");
    if (v && *v) {
        NEED(n->agent_token_file = strdup(v));
        v = ferry_config_get(&c, "agent", NULL, "config");
        if (v && *v)
            NEED(n->agent_config = strdup(v));
    }
    if ((rc = ferry_config_require(&c, "node", NULL, "name", &v, err)))
        goto out;
    NEED(n->name = strdup(v));
    if ((rc = ferry_config_require(&c, "node", NULL, "data_path", &v, err)))
        goto out;
    if (v[0] != '/') {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: node.data_path must be absolute", path);
        goto out;
    }
    NEED(n->data_path = malloc(strlen(v) + 2));
    sprintf(n->data_path, "%s%s", v, ferry_ends_with(v, "/") ? "" : "/");
    if ((rc = ferry_config_u64(&c, "node", NULL, "http_port", 0, &u, err)))
        goto out;
    if (u == 0 || u > 65535) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: node.http_port must be 1..65535", path);
        goto out;
    }
    n->http_port = (uint16_t)u;
    v = ferry_config_get(&c, "node", NULL, "listen");
    NEED(n->listen = strdup(v && *v ? v : "127.0.0.1"));
    if ((rc = ferry_config_u64(&c, "node", NULL, "pool_size", 16, &u, err)))
        goto out;
    n->pool_size = u ? (unsigned)u : 1;
    if ((rc = ferry_config_bytes(&c, "node", NULL, "max_query_body", 256u << 20, &u, err)))
        goto out;
    n->max_query_body = (size_t)u;
    /* The HTTP server's bounds, the keys every ferry server has (docs/config.md): a header
     * deadline, idle keep-alive connections closed after a minute, at most 256 connections.
     * No per-address limit by default: every client of a lab node (routers, agents, tools,
     * tests) comes from 127.0.0.1. No body deadline or rate: a routed INSERT streams to the
     * node as fast as its own client sends (ClickHouse has none either). */
    n->http = (ferry_httpd_options){.max_connections = 256,
                                    .idle_timeout_s = 60,
                                    .header_timeout_s = 10};
    if ((rc = ferry_httpd_config_read(&c, "node", &n->http, err)))
        goto out;
    /* a filesystem cache in front of the cold disk (ferry lab up --cold-cache SIZE) */
    if ((rc = ferry_config_bytes(&c, "object_store", NULL, "cache_size", 0, &u, err)))
        goto out;
    n->cold_cache_size = u;
    v = ferry_config_get(&c, "object_store", NULL, "type");
    NEED(n->object_store_type = strdup(v && *v ? v : "local"));
    if (!strcmp(n->object_store_type, "local")) {
        if ((rc = ferry_config_require(&c, "object_store", NULL, "path", &v, err)))
            goto out;
        NEED(n->blob_path = malloc(strlen(v) + 2));
        sprintf(n->blob_path, "%s%s", v, ferry_ends_with(v, "/") ? "" : "/");
    } else if (!strcmp(n->object_store_type, "s3")) {
        if ((rc = ferry_config_require(&c, "object_store", NULL, "endpoint", &v, err)))
            goto out;
        NEED(n->s3_endpoint = strdup(v));
        if ((rc = ferry_config_require(&c, "object_store", NULL, "bucket", &v, err)))
            goto out;
        NEED(n->s3_bucket = strdup(v));
        v = ferry_config_get(&c, "object_store", NULL, "region");
        if (v && *v)
            NEED(n->s3_region = strdup(v));
        v = ferry_config_get(&c, "object_store", NULL, "prefix");
        NEED(*s3_prefix = strdup(v ? v : ""));
        v = ferry_config_get(&c, "object_store", NULL, "access_key_id");
        NEED(*s3_key = strdup(v ? v : ""));
        v = ferry_config_get(&c, "object_store", NULL, "secret_access_key_file");
        if (v && *v) {
            size_t len;
            if ((rc = ferry_read_file(v, s3_secret, &len, err)) != FERRY_OK)
                goto out;
            ferry_chomp(*s3_secret);
        } else {
            NEED(*s3_secret = strdup(""));
        }
    } else {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: object_store.type must be local or s3", path);
        goto out;
    }
    const char *users[64];
    size_t nu = ferry_config_subsections(&c, "user", users, 64);
    if (nu > 64)
        nu = 64;
    NEED(n->users = calloc(nu ? nu : 1, sizeof *n->users));
    for (size_t i = 0; i < nu; i++) {
        v = ferry_config_get(&c, "user", users[i], "password_sha256");
        n->n_users = i + 1; /* counted first: freeing the node frees what was made */
        NEED(n->users[i].name = strdup(users[i]));
        NEED(n->users[i].password_sha256 = strdup(v ? v : ""));
    }
    if (nu == 0) { /* no users configured: ClickHouse's stock "default" without password */
        n->n_users = 1;
        NEED(n->users[0].name = strdup("default"));
        NEED(n->users[0].password_sha256 = strdup(""));
    }
    v = ferry_config_get(&c, "node", NULL, "libchdb");
    if (v && *v)
        setenv("FERRY_LIBCHDB", v, 1);
out:
    ferry_config_free(&c);
    return rc;
}

/* Writes DATA/config.xml (mode 0600: it may hold the S3 secret). */
static int write_clickhouse_config(const node *n, const char *s3_key, const char *s3_secret,
                                   const char *s3_prefix, char *path_out, size_t path_sz,
                                   ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    int rc = FERRY_OK;
    snprintf(path_out, path_sz, "%sconfig.xml", n->data_path);
    ferry_buf_puts(&b, "<!-- generated by ferry-node; rewritten at every start -->\n"
                       "<clickhouse>\n"
                       "  <logger>\n    <level>information</level>\n    <log>");
    xml_put(&b, n->data_path);
    ferry_buf_puts(&b, "clickhouse.log</log>\n    <errorlog>");
    xml_put(&b, n->data_path);
    ferry_buf_puts(&b, "clickhouse.err.log</errorlog>\n    <console>false</console>\n"
                       "  </logger>\n"
                       "  <display_name>");
    xml_put(&b, n->name);
    ferry_buf_puts(&b, "</display_name>\n  <storage_configuration>\n    <disks>\n      <cold>\n");
    if (!strcmp(n->object_store_type, "local")) {
        ferry_buf_puts(&b, "        <type>object_storage</type>\n"
                           "        <object_storage_type>local_blob_storage</object_storage_type>\n"
                           "        <metadata_type>local</metadata_type>\n        <path>");
        xml_put(&b, n->blob_path);
        ferry_buf_puts(&b, "</path>\n");
    } else {
        ferry_buf_puts(&b, "        <type>s3</type>\n        <endpoint>");
        xml_put(&b, n->s3_endpoint);
        if (!ferry_ends_with(n->s3_endpoint, "/"))
            ferry_buf_putc(&b, '/');
        xml_put(&b, n->s3_bucket);
        ferry_buf_putc(&b, '/');
        xml_put(&b, s3_prefix);
        if (*s3_prefix && !ferry_ends_with(s3_prefix, "/"))
            ferry_buf_putc(&b, '/');
        ferry_buf_puts(&b, "</endpoint>\n");
        if (n->s3_region) {
            ferry_buf_puts(&b, "        <region>");
            xml_put(&b, n->s3_region);
            ferry_buf_puts(&b, "</region>\n");
        }
        ferry_buf_puts(&b, "        <access_key_id>");
        xml_put(&b, s3_key);
        ferry_buf_puts(&b, "</access_key_id>\n        <secret_access_key>");
        xml_put(&b, s3_secret);
        /* The start-up probe writes and deletes an object; the clickhouse role may not delete. */
        ferry_buf_puts(&b, "</secret_access_key>\n        <skip_access_check>true</skip_access_check>\n");
    }
    ferry_buf_puts(&b, "        <metadata_path>");
    xml_put(&b, n->data_path);
    ferry_buf_puts(&b, "disks/cold/</metadata_path>\n      </cold>\n");
    if (n->cold_cache_size) {
        /* ClickHouse's cache disk wrapping cold: the same pointer files (its metadata path
         * is cold's), object reads kept in DATA/cache/cold_cache/ (a cache path must lie
         * under the server's filesystem_caches_path, DATA/cache/ by default); parts on the
         * cold volume then name disk cold_cache (docs/object-store.md) */
        ferry_buf_printf(&b, "      <cold_cache>\n        <type>cache</type>\n"
                             "        <disk>cold</disk>\n        <path>cold_cache/</path>\n"
                             "        <max_size>%llu</max_size>\n      </cold_cache>\n",
                         (unsigned long long)n->cold_cache_size);
    }
    ferry_buf_puts(&b, "    </disks>\n"
                       "    <policies>\n      <tiered>\n        <volumes>\n"
                       "          <hot><disk>default</disk></hot>\n"
                       /* ClickHouse must not merge cold parts: a merge writes new objects
                        * only it knows of, and leaves ferry's parts (and the catalog's records
                        * of their objects) behind */
                       "          <cold><disk>");
    ferry_buf_puts(&b, n->cold_cache_size ? "cold_cache" : "cold");
    ferry_buf_puts(&b, "</disk>"
                       "<prefer_not_to_merge>true</prefer_not_to_merge>"
                       /* ClickHouse must not place a new part there either: with the hot disk
                        * full it puts inserts and merges on the next volume that reserves the
                        * space, writes objects itself and leaves broken parts (docs/operations.md).
                        * A volume reserves nothing larger than this; ferry's ATTACH / REPLACE /
                        * MOVE PARTITION TO TABLE and MOVE ... TO DISK reserve on the disk. */
                       "<max_data_part_size_bytes>1</max_data_part_size_bytes></cold>\n"
                       "        </volumes>\n        <move_factor>0</move_factor>\n"
                       "      </tiered>\n    </policies>\n  </storage_configuration>\n"
                       "</clickhouse>\n");
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%.4200s.tmp", path_out);
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        rc = ferry_err_set(err, FERRY_EIO, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fchmod(fileno(fp), 0600);
    bool ok = fwrite(b.data, 1, b.len, fp) == b.len;
    if (fclose(fp) != 0 || !ok || rename(tmp, path_out) != 0) {
        rc = ferry_err_set(err, FERRY_EIO, "cannot write %s: %s", path_out, strerror(errno));
        goto out;
    }
out:
    ferry_buf_free(&b);
    return rc;
}

static int mkdirs(const char *path, ferry_err *err)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return ferry_err_set(err, FERRY_EIO, "cannot create directory %s: %s", tmp,
                                 strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return ferry_err_set(err, FERRY_EIO, "cannot create directory %s: %s", tmp,
                             strerror(errno));
    return FERRY_OK;
}

static void ping(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    ferry_http_respond_text(req, 200, "Ok.\n");
}

/* GET / without a query answers like ClickHouse does; anything else is a query. */
static void root_headers(ferry_http_req *req, void *ctx)
{
    if (!strcmp(ferry_http_method(req), "GET") && !ferry_http_arg(req, "query")) {
        ferry_http_respond_text(req, 200, "Ok.\n");
        return;
    }
    node_query_on_headers(req, ctx);
}

static void status(ferry_http_req *req, void *ctx)
{
    node *n = ctx;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "pid", json_integer(getpid()));
    json_object_set_new(o, "http_port", json_integer(n->http_port));
    json_object_set_new(o, "data_path", json_string(n->data_path));
    json_object_set_new(o, "clickhouse_version", json_string(n->version));
    json_object_set_new(o, "libchdb", json_string(ferry_chdb_lib_path(n->lib)));
    /* "streamed" (26.7's streaming-insert API) or "spooled" (bodies via a file, 26.5) */
    json_object_set_new(o, "insert_mode", json_string(ferry_chdb_insert_mode(n->lib)));
    json_t *os = json_object();
    json_object_set_new(os, "type", json_string(n->object_store_type));
    if (n->blob_path)
        json_object_set_new(os, "path", json_string(n->blob_path));
    if (n->s3_endpoint) {
        json_object_set_new(os, "endpoint", json_string(n->s3_endpoint));
        json_object_set_new(os, "bucket", json_string(n->s3_bucket));
    }
    json_object_set_new(o, "object_store", os);
    json_object_set_new(o, "refused_deletes", json_integer((json_int_t)node_guard_refused()));
    json_object_set_new(o, "connections_in_use",
                        json_integer(ferry_chdb_pool_in_use(n->pool) +
                                                     ferry_chdb_pool_in_use(n->ro_pool)));
    json_object_set_new(o, "uptime_seconds", json_integer(time(NULL) - n->started));
    char *s = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!s) {
        ferry_http_respond_text(req, 500, "out of memory\n");
        return;
    }
    size_t len = strlen(s);
    s[len] = '\n';
    ferry_http_respond(req, 200, "application/json", s, len + 1);
    free(s);
}

static void query_one_value(node *n, const char *sql, char *out, size_t outsz)
{
    ferry_chdb_conn *c;
    ferry_err err = {0};
    out[0] = '\0';
    if (ferry_chdb_pool_acquire(n->pool, 10000, &c, &err) != FERRY_OK)
        return;
    ferry_chdb_result r;
    if (ferry_chdb_query(c, sql, strlen(sql), "TSVRaw", NULL, 0, &r, &err) == FERRY_OK) {
        snprintf(out, outsz, "%s", r.data);
        ferry_chomp(out);
    }
    ferry_chdb_result_free(&r);
    ferry_chdb_pool_release(n->pool, c, false);
}

int main(int argc, char **argv)
{
    ferry_log_init_from_env();
    ferry_test_knobs_from_env(); /* test-only knobs (include/ferry/testknob.h) */
    const char *config = NULL;
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 'h') {
            fputs(usage, stdout);
            return 0;
        } else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (!config || optind != argc) {
        fputs(usage, stderr);
        return 2;
    }

    node n = {0};
    n.config_path = (char *)config;
    n.started = time(NULL);
    ferry_err err = {0};
    char *s3_key = NULL, *s3_secret = NULL, *s3_prefix = NULL;
    int rc = load_node_config(&n, config, &s3_key, &s3_secret, &s3_prefix, &err);
    if (rc != FERRY_OK)
        return die(ferry_exit_status(rc), &err);

    char workdir[4200], cfgxml[4200];
    if (mkdirs(n.data_path, &err) != FERRY_OK)
        return die(1, &err);
    if (n.blob_path && mkdirs(n.blob_path, &err) != FERRY_OK)
        return die(1, &err);
    /* chdb's default database overlays the current directory's files as tables: run from an
     * empty directory so a table name never resolves to a stray file. */
    snprintf(workdir, sizeof workdir, "%swork", n.data_path);
    if (mkdirs(workdir, &err) != FERRY_OK)
        return die(1, &err);
    if (chdir(workdir) != 0) {
        fprintf(stderr, "ferry-node: cannot enter %s: %s\n", workdir, strerror(errno));
        return 1;
    }
    if (write_clickhouse_config(&n, s3_key ? s3_key : "", s3_secret ? s3_secret : "",
                                s3_prefix ? s3_prefix : "", cfgxml, sizeof cfgxml,
                                &err) != FERRY_OK)
        return die(1, &err);
    if (s3_secret)
        memset(s3_secret, 0, strlen(s3_secret));
    free(s3_key);
    free(s3_secret);
    free(s3_prefix);
    if (n.blob_path && node_guard_set_root(n.blob_path) != 0) {
        fprintf(stderr, "ferry-node: cannot resolve blob directory %s: %s\n", n.blob_path,
                strerror(errno));
        return 1;
    }

    /* Signals are taken by sigwait in this thread; every thread started later inherits the
     * mask, so none of them is interrupted. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if ((rc = ferry_chdb_load(NULL, &n.lib, &err)) != FERRY_OK)
        return die(1, &err);
    /* INSERT bodies of a library without streaming inserts wait in a private directory on the
     * node's own disk (not /tmp, which may be small or shared) */
    char spool[4200];
    snprintf(spool, sizeof spool, "%sspool", n.data_path);
    if (mkdir(spool, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "ferry-node: cannot create %s: %s\n", spool, strerror(errno));
        return 1;
    }
    ferry_chdb_set_spool_dir(n.lib, spool);
    char arg_path[4200], arg_cfg[4300];
    snprintf(arg_path, sizeof arg_path, "--path=%s", n.data_path);
    snprintf(arg_cfg, sizeof arg_cfg, "--config-file=%s", cfgxml);
    const char *cargs[] = {arg_path, arg_cfg};
    if ((rc = ferry_chdb_pool_create(n.lib, 2, cargs, n.pool_size, &n.pool, &err)) != FERRY_OK) {
        ferry_err_prefix(&err, "starting ClickHouse in %s (log: %sclickhouse.err.log): ",
                         n.data_path, n.data_path);
        return die(1, &err);
    }
    const char *roargs[] = {arg_path, arg_cfg, "--readonly=2"};
    if ((rc = ferry_chdb_pool_create(n.lib, 3, roargs, n.pool_size, &n.ro_pool, &err)) !=
        FERRY_OK)
        return die(1, &err);
    query_one_value(&n, "SELECT version()", n.version, sizeof n.version);
    query_one_value(&n, "SELECT timezone()", n.timezone, sizeof n.timezone);

    ferry_http_route routes[16];
    size_t nr = 0;
    routes[nr++] = (ferry_http_route){.method = "GET", .path = "/ping", .on_complete = ping};
    routes[nr++] = (ferry_http_route){.method = "HEAD", .path = "/ping", .on_complete = ping};
    routes[nr++] = (ferry_http_route){.method = "GET", .path = "/replicas_status",
                                      .on_complete = ping};
    routes[nr++] = (ferry_http_route){.method = "GET", .path = "/ferry/status",
                                      .on_complete = status, .ctx = &n};
    size_t na = node_agent_routes(&n, routes + nr, 12 - nr, &err);
    if (na == 0)
        return die(1, &err);
    nr += na;
    routes[nr++] = (ferry_http_route){.method = NULL, .path = "/",
                                      .on_headers = root_headers,
                                      .on_body = node_query_on_body,
                                      .on_complete = node_query_on_complete,
                                      .on_cleanup = node_query_on_cleanup, .ctx = &n};
    ferry_httpd_options hopt = n.http;
    hopt.bind_addr = n.listen;
    hopt.port = n.http_port;
    ferry_httpd *srv = NULL;
    if ((rc = ferry_httpd_start(&hopt, routes, nr, &srv, &err)) != FERRY_OK)
        return die(1, &err);
    node_agent_set_httpd(srv);
    FLOG_INFO("node ready name=%s http=http://%s:%u pid=%d clickhouse=%s inserts=%s data=%s",
              n.name, n.listen, n.http_port, (int)getpid(), n.version,
              ferry_chdb_insert_mode(n.lib), n.data_path);

    int sig = 0;
    sigwait(&sigs, &sig);
    FLOG_INFO("node stopping name=%s signal=%d", n.name, sig);
    /* Queries in flight may run for long; the lab stops nodes the way a server is killed
     * (parts are committed atomically), so leave without waiting for them. */
    _exit(0);
}

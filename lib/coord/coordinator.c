/* The coordinator: lease holder and routing-table server (see coordinator.h).
 *
 * Invariants: `cache` always holds the routing JSON of version `version` as one consistent
 * snapshot (ferry_catalog_routing_json reads table and version together); both change only under
 * `mu`, and every change is broadcast on `changed` so long polls wake up. The watcher owns its
 * own catalog handle (`watch_cat`); request threads use `cat` under `cat_mu` only for filtered
 * reads, which are rare, so the unfiltered read path never touches the catalog. */
#include "coord_int.h"
#include "ferry/catalog.h"
#include "ferry/config.h"
#include "ferry/httpd.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int load_snapshot(ferry_catalog *cat, char **json, uint64_t *version, ferry_err *err)
{
    char *text = NULL;
    int rc = ferry_catalog_routing_json(cat, NULL, -1, &text, err);
    if (rc)
        return rc;
    /* The version inside the JSON is the one the table was read at. */
    const char *v = strstr(text, "\"version\":");
    uint64_t ver = 0;
    if (!v || sscanf(v + 10, "%llu", (unsigned long long *)&ver) != 1) {
        free(text);
        return ferry_err_set(err, FERRY_EINTERNAL, "routing JSON without a version");
    }
    *json = text;
    *version = ver;
    return FERRY_OK;
}

static void *watch_main(void *arg)
{
    ferry_coord *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        bool stop = c->stopping;
        uint64_t known = c->version;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            break;
        ferry_err err = {0};
        uint64_t now = 0;
        int rc = ferry_catalog_routing_wait(c->watch_cat, known, 1000, &now, &err);
        if (rc == FERRY_ETIMEOUT) {
            pthread_mutex_lock(&c->cat_mu);
            bool valid = ferry_catalog_lease_valid(c->cat, c->lease);
            pthread_mutex_unlock(&c->cat_mu);
            if (!valid) {
                FLOG_ERROR("msg=\"coordinator lease lost; stopping\"");
                pthread_mutex_lock(&c->mu);
                c->lease_lost = true;
                pthread_cond_broadcast(&c->changed);
                pthread_mutex_unlock(&c->mu);
                break;
            }
            continue;
        }
        if (rc) {
            FLOG_WARN("msg=\"watching the routing version failed; retrying\" err=\"%s\"", err.msg);
            sleep(1);
            continue;
        }
        char *json = NULL;
        uint64_t ver = 0;
        if (load_snapshot(c->watch_cat, &json, &ver, &err)) {
            FLOG_WARN("msg=\"reloading the routing table failed; retrying\" err=\"%s\"", err.msg);
            sleep(1);
            continue;
        }
        pthread_mutex_lock(&c->mu);
        free(c->cache);
        c->cache = json;
        c->version = ver;
        pthread_cond_broadcast(&c->changed);
        pthread_mutex_unlock(&c->mu);
        FLOG_INFO("msg=\"routing table reloaded\" version=%llu", (unsigned long long)ver);
    }
    return NULL;
}

/* Calls one scheduled job every every_s seconds until stopping or the lease is lost. */
static void *tick_main(void *arg)
{
    struct ticker *t = arg;
    ferry_coord *c = t->c;
    for (;;) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += (time_t)t->job.every_s;
        pthread_mutex_lock(&c->mu);
        while (!c->stopping && !c->lease_lost &&
               pthread_cond_timedwait(&c->changed, &c->mu, &deadline) != ETIMEDOUT) {
        }
        bool stop = c->stopping || c->lease_lost;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            break;
        FLOG_DEBUG("msg=\"scheduled job starts\" job=%s", t->job.name ? t->job.name : "");
        t->job.fn(t->job.arg);
    }
    return NULL;
}

static void respond_json(ferry_http_req *req, unsigned status, const char *json, uint64_t version)
{
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)version);
    ferry_http_add_header(req, "X-Ferry-Routing-Version", v);
    ferry_http_add_header(req, "Cache-Control", "no-cache");
    ferry_http_respond(req, status, "application/json", json, strlen(json));
}

static void respond_error(ferry_http_req *req, unsigned status, const char *msg)
{
    char body[FERRY_ERR_MSG_MAX + 64];
    /* Messages are ferry's own (no user text echoed unescaped): quote minimal characters. */
    size_t j = 0;
    j += (size_t)snprintf(body, sizeof body, "{\"error\":\"");
    for (const char *p = msg; *p && j < sizeof body - 4; p++) {
        if (*p == '"' || *p == '\\')
            body[j++] = '\\';
        body[j++] = (*p == '\n' || *p == '\t') ? ' ' : *p;
    }
    snprintf(body + j, sizeof body - j, "\"}");
    ferry_http_respond(req, status, "application/json", body, strlen(body));
}

static void on_routing(ferry_http_req *req, void *ctx)
{
    ferry_coord *c = ctx;
    const char *tenant = ferry_http_arg(req, "tenant");
    const char *split_s = ferry_http_arg(req, "split");
    const char *known_s = ferry_http_arg(req, "known");
    const char *wait_s = ferry_http_arg(req, "wait");
    uint64_t known = 0, wait = 0, split = 0;
    if ((known_s && !ferry_parse_u64(known_s, &known)) ||
        (wait_s && !ferry_parse_u64(wait_s, &wait)) ||
        (split_s && (!ferry_parse_u64(split_s, &split) || split > INT32_MAX))) {
        respond_error(req, 400, "known, wait and split must be non-negative integers");
        return;
    }
    if (split_s && !tenant) {
        respond_error(req, 400, "split needs tenant");
        return;
    }
    if (wait > 60)
        wait = 60;
    if (known_s && wait_s) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += (time_t)wait;
        pthread_mutex_lock(&c->mu);
        while (c->version == known && !c->stopping && !c->lease_lost) {
            if (pthread_cond_timedwait(&c->changed, &c->mu, &deadline) == ETIMEDOUT)
                break;
        }
        bool unchanged = c->version == known;
        uint64_t ver = c->version;
        pthread_mutex_unlock(&c->mu);
        if (unchanged) {
            char v[32];
            snprintf(v, sizeof v, "%llu", (unsigned long long)ver);
            ferry_http_add_header(req, "X-Ferry-Routing-Version", v);
            ferry_http_respond(req, 304, NULL, "", 0);
            return;
        }
    }
    if (!tenant) {
        pthread_mutex_lock(&c->mu);
        char *copy = strdup(c->cache ? c->cache : "{}");
        uint64_t ver = c->version;
        pthread_mutex_unlock(&c->mu);
        if (!copy) {
            respond_error(req, 500, "out of memory");
            return;
        }
        respond_json(req, 200, copy, ver);
        free(copy);
        return;
    }
    ferry_err err = {0};
    char *json = NULL;
    pthread_mutex_lock(&c->cat_mu);
    int rc = ferry_catalog_routing_json(c->cat, tenant, split_s ? (int64_t)split : -1, &json,
                                        &err);
    pthread_mutex_unlock(&c->cat_mu);
    if (rc) {
        respond_error(req, rc == FERRY_EINVAL ? 400 : 500, err.msg);
        return;
    }
    const char *v = strstr(json, "\"version\":");
    unsigned long long ver = 0;
    if (v)
        sscanf(v + 10, "%llu", &ver);
    respond_json(req, 200, json, ver);
    free(json);
}

static void on_health(ferry_http_req *req, void *ctx)
{
    ferry_coord *c = ctx;
    pthread_mutex_lock(&c->mu);
    bool lost = c->lease_lost;
    uint64_t ver = c->version;
    pthread_mutex_unlock(&c->mu);
    char body[512];
    snprintf(body, sizeof body, "{\"lease\":%s,\"routing_version\":%llu,\"owner\":\"%s\"}",
             lost ? "false" : "true", (unsigned long long)ver, c->owner);
    ferry_http_respond(req, lost ? 503 : 200, "application/json", body, strlen(body));
}

#define COORD_MAX_BODY (64u << 10) /* every route is a GET */

void ferry_coord_http_defaults(ferry_httpd_options *o)
{
    *o = (ferry_httpd_options){.max_connections = 256,
                               .max_per_address = 64,
                               .idle_timeout_s = 60,
                               .header_timeout_s = 10,
                               .receive_timeout_s = 60};
}

int ferry_coord_config_read(const ferry_config *cfg, ferry_coord_options *o,
                            ferry_httpd_options *http, ferry_err *err)
{
    static const char *const keys[] = {"history_interval", "history_file",
                                       FERRY_HTTPD_CONFIG_KEYS, NULL};
    ferry_coord_http_defaults(http);
    o->http = http;
    int rc = ferry_config_check_keys(cfg, "coordinator", keys, err);
    if (rc)
        return rc;
    const char *hi = ferry_config_get(cfg, "coordinator", NULL, "history_interval");
    uint64_t hs = 0;
    if (hi && (!ferry_parse_duration(hi, &hs) || hs == 0 || hs > 86400))
        return ferry_err_set(err, FERRY_EINVAL, "%s: [coordinator] history_interval = '%s': "
                             "expected a duration from 1s to 24h, such as 5m", cfg->path, hi);
    o->history_every_s = (unsigned)hs;
    o->history_file = ferry_config_get(cfg, "coordinator", NULL, "history_file");
    return ferry_httpd_config_read(cfg, "coordinator", http, err);
}

int ferry_coord_start(const ferry_coord_options *opt, ferry_coord **out, ferry_err *err)
{
    int rc = FERRY_OK;
    ferry_coord *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    pthread_mutex_init(&c->cat_mu, NULL);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->changed, NULL);
    if (opt->owner) {
        snprintf(c->owner, sizeof c->owner, "%s", opt->owner);
    } else {
        char host[200] = "localhost";
        gethostname(host, sizeof host - 1);
        snprintf(c->owner, sizeof c->owner, "%s:%d", host, (int)getpid());
    }
    rc = ferry_catalog_open(opt->catalog_url, &c->cat, err);
    if (!rc)
        rc = ferry_catalog_open(opt->catalog_url, &c->watch_cat, err);
    if (!rc)
        rc = ferry_catalog_lease_acquire(c->cat, "coordinator", c->owner, &c->lease, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "another coordinator is running (stop it first, or wait for its "
                         "lease to expire): ");
    if (!rc)
        rc = load_snapshot(c->cat, &c->cache, &c->version, err);
    if (rc)
        goto out;
    if (pthread_create(&c->watcher, NULL, watch_main, c)) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "cannot start the routing watcher thread");
        goto out;
    }
    c->watcher_started = true;
    if ((rc = coord_view_init(c, opt, err)))
        goto out;
    c->view_ready = true;
    ferry_http_route routes[] = {
        {.method = "GET", .path = "/routing", .on_complete = on_routing, .ctx = c,
         .max_body = COORD_MAX_BODY},
        {.method = "GET", .path = "/health", .on_complete = on_health, .ctx = c,
         .max_body = COORD_MAX_BODY},
        {.method = "GET", .path = "/metrics", .on_complete = coord_on_metrics, .ctx = c,
         .max_body = COORD_MAX_BODY},
        {.method = "GET", .path = "/", .on_complete = coord_on_page, .ctx = c,
         .max_body = COORD_MAX_BODY},
    };
    ferry_httpd_options hopt;
    if (opt->http)
        hopt = *opt->http;
    else
        ferry_coord_http_defaults(&hopt);
    hopt.bind_addr = opt->bind_addr;
    hopt.port = opt->port;
    rc = ferry_httpd_start(&hopt, routes, sizeof routes / sizeof routes[0], &c->httpd, err);
    if (!rc && opt->periodic && opt->periodic_s > 0)
        c->tickers[c->n_tickers++].job =
            (ferry_coord_job){"periodic", opt->periodic, opt->periodic_arg, opt->periodic_s};
    if (!rc) {
        /* the fill history of the status page: a first sample now, then one per interval */
        coord_history_sample(c);
        c->tickers[c->n_tickers++].job = (ferry_coord_job){"fill history", coord_history_sample,
                                                           c, c->view.history_every_s};
        c->tickers[c->n_tickers++].job =
            (ferry_coord_job){"cluster status", coord_status_refresh, c, 1};
    }
    for (size_t i = 0; !rc && i < opt->n_jobs; i++) {
        if (!opt->jobs[i].fn || !opt->jobs[i].every_s)
            continue;
        if (c->n_tickers == sizeof c->tickers / sizeof c->tickers[0]) {
            rc = ferry_err_set(err, FERRY_EINVAL, "too many scheduled jobs");
            break;
        }
        c->tickers[c->n_tickers++].job = opt->jobs[i];
    }
    for (size_t i = 0; !rc && i < c->n_tickers; i++) {
        c->tickers[i].c = c;
        if (pthread_create(&c->tickers[i].th, NULL, tick_main, &c->tickers[i]))
            rc = ferry_err_set(err, FERRY_EINTERNAL, "cannot start the scheduled-work thread");
        else
            c->tickers[i].started = true;
    }
out:
    if (rc) {
        ferry_coord_stop(c);
        return rc;
    }
    *out = c;
    return FERRY_OK;
}

uint16_t ferry_coord_port(const ferry_coord *c) { return ferry_httpd_port(c->httpd); }

bool ferry_coord_healthy(ferry_coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool ok = !c->lease_lost;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void ferry_coord_stop(ferry_coord *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mu);
    ferry_httpd_stop(c->httpd);
    for (size_t i = 0; i < c->n_tickers; i++)
        if (c->tickers[i].started)
            pthread_join(c->tickers[i].th, NULL);
    if (c->watcher_started)
        pthread_join(c->watcher, NULL);
    if (c->lease)
        ferry_catalog_lease_release(c->cat, c->lease);
    if (c->view_ready)
        coord_view_free(c);
    ferry_catalog_close(c->watch_cat);
    ferry_catalog_close(c->cat);
    free(c->cache);
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->cat_mu);
    free(c);
}

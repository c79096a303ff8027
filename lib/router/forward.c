/* The router's shards: replica URLs and credentials from the config, a replica selector per
 * shard (ClickHouse's load_balancing semantics), pooled ClickHouse clients, and forwarding one
 * INSERT to a shard with failover between its replicas. */
#include "router_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The host part of a URL, for the selector's host name policies. */
static void url_host(const char *url, char *out, size_t outsz)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, ":/");
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

int rt_shards_init(ferry_router *r, const ferry_config *cfg, ferry_err *err)
{
    const char *names[1024];
    size_t n = ferry_config_subsections(cfg, "shard", names, 1024);
    r->shards = calloc(n ? n : 1, sizeof *r->shards);
    if (!r->shards)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        rt_shard *s = &r->shards[i];
        pthread_mutex_init(&s->mu, NULL);
        r->n_shards++;
        snprintf(s->name, sizeof s->name, "%s", names[i]);
        const char *reps = ferry_config_get(cfg, "shard", names[i], "replicas");
        if (!reps || !*reps)
            return ferry_err_set(err, FERRY_EINVAL, "%s: [shard \"%s\"] has no replicas",
                                 cfg->path, names[i]);
        char *tmp = strdup(reps);
        if (!tmp)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        char *fields[64];
        size_t nf = ferry_split(tmp, ',', fields, 64);
        if (nf > 64)
            nf = 64;
        s->urls = calloc(nf, sizeof *s->urls);
        s->idle = calloc(nf, sizeof *s->idle);
        char hosts_store[64][256];
        const char *hosts[64];
        for (size_t j = 0; s->urls && s->idle && j < nf; j++) {
            s->urls[j] = strdup(ferry_trim(fields[j]));
            if (!s->urls[j])
                break;
            s->n_replicas++;
            url_host(s->urls[j], hosts_store[j], sizeof hosts_store[j]);
            hosts[j] = hosts_store[j];
        }
        free(tmp);
        if (s->n_replicas != nf)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        const char *user = ferry_config_get(cfg, "shard", names[i], "user");
        snprintf(s->user, sizeof s->user, "%s", user ? user : "");
        const char *pwf = ferry_config_get(cfg, "shard", names[i], "password_file");
        if (pwf && *pwf) {
            size_t len;
            int rc = ferry_read_file(pwf, &s->password, &len, err);
            if (rc)
                return ferry_err_prefix(err, "[shard \"%s\"] password_file: ", names[i]);
            s->password[strcspn(s->password, "\r\n")] = '\0';
        }
        ferry_rsel_options o;
        ferry_rsel_options_default(&o);
        o.query.policy = r->load_balancing;
        char local[256] = "localhost";
        o.local_hostname = local;
        int rc = ferry_rsel_create(hosts, NULL, s->n_replicas, &o, &s->sel, err);
        if (rc)
            return ferry_err_prefix(err, "[shard \"%s\"]: ", names[i]);
        ferry_rsel_rng_seed(&s->rng, (uint64_t)time(NULL) ^ (uint64_t)i * 0x9e3779b97f4a7c15ULL);
    }
    return FERRY_OK;
}

void rt_shards_free(ferry_router *r)
{
    for (size_t i = 0; i < r->n_shards; i++) {
        rt_shard *s = &r->shards[i];
        for (size_t j = 0; j < s->n_replicas; j++) {
            for (rt_pool_item *it = s->idle ? s->idle[j] : NULL; it;) {
                rt_pool_item *next = it->next;
                ferry_ch_client_free(it->client);
                free(it);
                it = next;
            }
            free(s->urls[j]);
        }
        free(s->urls);
        free(s->idle);
        if (s->password) {
            memset(s->password, 0, strlen(s->password));
            free(s->password);
        }
        ferry_rsel_free(s->sel);
        pthread_mutex_destroy(&s->mu);
    }
    free(r->shards);
    r->shards = NULL;
    r->n_shards = 0;
}

static int client_take(ferry_router *r, rt_shard *s, size_t rep, ferry_ch_client **out,
                       ferry_err *err)
{
    pthread_mutex_lock(&s->mu);
    rt_pool_item *it = s->idle[rep];
    if (it)
        s->idle[rep] = it->next;
    pthread_mutex_unlock(&s->mu);
    if (it) {
        *out = it->client;
        free(it);
        return FERRY_OK;
    }
    ferry_ch_options o = {0};
    o.url = s->urls[rep];
    o.user = s->user[0] ? s->user : NULL;
    o.password = s->password;
    o.connect_timeout_ms = r->shard_timeout_ms < 5000 ? r->shard_timeout_ms : 5000;
    o.read_timeout_ms = r->shard_timeout_ms;
    o.max_attempts = 2;
    o.backoff_ms = 50;
    return ferry_ch_client_new(&o, out, err);
}

static void client_give(rt_shard *s, size_t rep, ferry_ch_client *c)
{
    rt_pool_item *it = malloc(sizeof *it);
    if (!it) {
        ferry_ch_client_free(c);
        return;
    }
    it->client = c;
    pthread_mutex_lock(&s->mu);
    it->next = s->idle[rep];
    s->idle[rep] = it;
    pthread_mutex_unlock(&s->mu);
}

void rt_send_one(rt_send *sd)
{
    ferry_router *r = sd->r;
    rt_shard *s = &r->shards[sd->shard];
    size_t order[64];
    ferry_err_clear(&sd->err);
    memset(&sd->st, 0, sizeof sd->st);
    pthread_mutex_lock(&s->mu);
    int rc = ferry_rsel_select(s->sel, now_ms(), &s->rng, order, &sd->err);
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        sd->rc = rc;
        return;
    }
    for (size_t a = 0; a < s->n_replicas; a++) {
        size_t rep = order[a];
        ferry_ch_client *c = NULL;
        ferry_err_clear(&sd->err);
        rc = client_take(r, s, rep, &c, &sd->err);
        if (rc)
            break;
        ferry_ch_query q = {0};
        q.sql = sd->sql;
        q.body = sd->body;
        q.body_len = sd->body_len;
        q.body_reader = sd->body_reader;
        q.body_reader_arg = sd->body_reader_arg;
        q.settings = sd->settings;
        q.n_settings = sd->n_settings;
        q.format = sd->format;
        pthread_mutex_lock(&s->mu);
        ferry_rsel_begin(s->sel, rep, NULL);
        pthread_mutex_unlock(&s->mu);
        rc = ferry_ch_exec(c, &q, &sd->st, &sd->err);
        pthread_mutex_lock(&s->mu);
        ferry_rsel_end(s->sel, rep, NULL);
        if (rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT)
            ferry_rsel_report_error(s->sel, rep, NULL);
        else if (!rc)
            ferry_rsel_report_success(s->sel, rep, NULL);
        pthread_mutex_unlock(&s->mu);
        if (!rc) {
            client_give(s, rep, c);
            break;
        }
        ferry_ch_client_free(c);
        /* Only a replica that could not be reached is worth another try; a server's exception
         * (bad data, unknown column) would be the same on every replica. */
        if (rc != FERRY_ECONNECT && rc != FERRY_ETIMEOUT)
            break;
        if (sd->consumed) {
            /* A streamed body already partly sent cannot go to another replica. */
            pthread_mutex_lock(sd->consumed_mu);
            bool used = *sd->consumed;
            pthread_mutex_unlock(sd->consumed_mu);
            if (used)
                break;
        }
        FLOG_WARN("msg=\"router: replica unreachable; trying the next\" shard=%s replica=%zu err=\"%s\"",
                  s->name, rep, sd->err.msg);
    }
    sd->rc = rc;
}

static void *send_thread(void *arg)
{
    rt_send_one(arg);
    return NULL;
}

void rt_send_all(rt_send *sends, size_t n)
{
    if (n == 0)
        return;
    pthread_t *th = calloc(n, sizeof *th);
    bool *started = calloc(n, sizeof *started);
    for (size_t i = 1; th && started && i < n; i++)
        started[i] = pthread_create(&th[i], NULL, send_thread, &sends[i]) == 0;
    rt_send_one(&sends[0]);
    for (size_t i = 1; i < n; i++) {
        if (started && started[i])
            pthread_join(th[i], NULL);
        else
            rt_send_one(&sends[i]);
    }
    free(th);
    free(started);
}

int rt_query_any(ferry_router *r, const char *sql, ferry_buf *out, ferry_err *err)
{
    int rc = FERRY_ENOTFOUND;
    ferry_err_set(err, rc, "no shard configured");
    for (size_t i = 0; i < r->n_shards; i++) {
        rt_shard *s = &r->shards[i];
        for (size_t rep = 0; rep < s->n_replicas; rep++) {
            ferry_ch_client *c = NULL;
            rc = client_take(r, s, rep, &c, err);
            if (rc)
                return rc;
            out->len = 0;
            rc = ferry_ch_query_buf(c, sql, "TabSeparated", out, NULL, err);
            if (!rc) {
                client_give(s, rep, c);
                return FERRY_OK;
            }
            ferry_ch_client_free(c);
            if (rc != FERRY_ECONNECT && rc != FERRY_ETIMEOUT)
                return rc;
        }
    }
    return rc;
}

int rt_client_take(ferry_router *r, rt_shard *s, size_t rep, ferry_ch_client **out,
                   ferry_err *err)
{
    return client_take(r, s, rep, out, err);
}

void rt_client_give(rt_shard *s, size_t rep, ferry_ch_client *c) { client_give(s, rep, c); }

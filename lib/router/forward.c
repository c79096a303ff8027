/* The router's shards: slots that follow the catalog's shard records (replica URLs, credentials
 * by reference to files), a replica selector per shard (ClickHouse's load_balancing semantics),
 * pooled ClickHouse clients, and forwarding one INSERT to a shard with failover between its
 * replicas. */
#include "router_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/clock.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

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

int rt_shards_init(ferry_router *r, ferry_err *err)
{
    r->shards = calloc(RT_SHARDS_MAX, sizeof *r->shards);
    if (!r->shards)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

/* Closes the idle connections of a slot; with lock held by the caller. */
static void drain_idle_locked(rt_shard *s)
{
    for (size_t j = 0; s->idle && j < s->n_replicas; j++) {
        for (rt_pool_item *it = s->idle[j]; it;) {
            rt_pool_item *next = it->next;
            ferry_ch_client_free(it->client);
            free(it);
            it = next;
        }
        s->idle[j] = NULL;
    }
}

static void shard_free(rt_shard *s)
{
    if (!s)
        return;
    drain_idle_locked(s);
    for (size_t j = 0; s->urls && j < s->n_replicas; j++)
        free(s->urls[j]);
    free(s->urls);
    free(s->idle);
    if (s->password) {
        memset(s->password, 0, strlen(s->password));
        free(s->password);
    }
    ferry_rsel_free(s->sel);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* A new slot for the shard record rec: its replica URLs and selector, and its credentials (a
 * credential file that cannot be read leaves conn_error set instead of failing). *out owned by
 * the caller until it is counted in r->shards. */
static int shard_open(ferry_router *r, const ferry_shard *rec, size_t slot, rt_shard **out,
                      ferry_err *err)
{
    rt_shard *s = calloc(1, sizeof *s);
    char *tmp = strdup(rec->replicas);
    int rc = FERRY_OK;
    if (!s || !tmp) {
        free(s);
        free(tmp);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    snprintf(s->name, sizeof s->name, "%s", rec->name);
    s->rec = *rec;
    char *fields[64];
    size_t nf = ferry_split(tmp, ',', fields, 64);
    if (nf > 64)
        nf = 64;
    s->urls = calloc(nf ? nf : 1, sizeof *s->urls);
    s->idle = calloc(nf ? nf : 1, sizeof *s->idle);
    char hosts_store[64][256];
    const char *hosts[64];
    for (size_t j = 0; s->urls && s->idle && j < nf; j++) {
        if (!(s->urls[j] = strdup(ferry_trim(fields[j]))))
            break;
        s->n_replicas++;
        url_host(s->urls[j], hosts_store[j], sizeof hosts_store[j]);
        hosts[j] = hosts_store[j];
    }
    free(tmp);
    if (!s->urls || !s->idle || s->n_replicas != nf) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (nf == 0)
        snprintf(s->conn_error, sizeof s->conn_error,
                 "shard %s has no replicas in the catalog (ferry shard add %s)", rec->name,
                 rec->name);
    ferry_shard_conn conn;
    ferry_shard_conn_get(rec, &r->cfg, &conn);
    snprintf(s->user, sizeof s->user, "%s", conn.user);
    if (conn.password_file[0]) {
        ferry_err perr = {0};
        if (ferry_read_secret_line(conn.password_file, &s->password, &perr)) {
            snprintf(s->conn_error, sizeof s->conn_error,
                     "shard %s: cannot read its password_file: %s", rec->name, perr.msg);
            FLOG_ERROR("msg=\"router: a shard's password file cannot be read; the shard is "
                       "unusable until it can\" shard=%s err=\"%s\"",
                       rec->name, perr.msg);
        }
    }
    if (nf) {
        ferry_rsel_options o;
        ferry_rsel_options_default(&o);
        o.query.policy = r->load_balancing;
        char local[256] = "localhost";
        o.local_hostname = local;
        if ((rc = ferry_rsel_create(hosts, NULL, s->n_replicas, &o, &s->sel, err))) {
            ferry_err_prefix(err, "shard %s: ", rec->name);
            goto out;
        }
    }
    ferry_rsel_rng_seed(&s->rng,
                        (uint64_t)time(NULL) ^ (uint64_t)(slot + 1) * 0x9e3779b97f4a7c15ULL);
out:
    if (rc) {
        shard_free(s);
        return rc;
    }
    *out = s;
    return FERRY_OK;
}

static void shard_retire(rt_shard *s, const char *why)
{
    pthread_mutex_lock(&s->mu);
    bool was = s->retired;
    s->retired = true;
    drain_idle_locked(s);
    pthread_mutex_unlock(&s->mu);
    if (!was)
        FLOG_INFO("msg=\"router: shard connections closed\" shard=%s why=\"%s\"", s->name, why);
}

long rt_shard_index(ferry_router *r, const char *name)
{
    size_t n = r->n_shards;
    /* the newest live slot of that name (older ones of the same name are retired) */
    for (size_t i = n; i-- > 0;) {
        rt_shard *s = r->shards[i];
        if (strcmp(s->name, name))
            continue;
        return rt_shard_retired(s) ? -1 : (long)i;
    }
    return -1;
}

int rt_shards_sync(ferry_router *r, const ferry_record_list *shards, ferry_err *err)
{
    /* retire slots whose shard is gone, vanished or changed */
    size_t n = r->n_shards;
    for (size_t i = 0; i < n; i++) {
        rt_shard *s = r->shards[i];
        if (rt_shard_retired(s))
            continue;
        const ferry_shard *now = NULL;
        for (size_t k = 0; k < shards->n && !now; k++)
            if (!strcmp(shards->items[k].u.shard.name, s->name))
                now = &shards->items[k].u.shard;
        if (!now || now->state == FERRY_SHARD_GONE)
            shard_retire(s, now ? "the shard is gone" : "the shard left the catalog");
        else if (ferry_shard_conn_differs(&s->rec, now))
            shard_retire(s, "its replicas, agent or credentials changed");
    }
    /* open a slot for every shard without a live one */
    for (size_t k = 0; k < shards->n; k++) {
        const ferry_shard *sh = &shards->items[k].u.shard;
        if (sh->state == FERRY_SHARD_GONE || rt_shard_index(r, sh->name) >= 0)
            continue;
        size_t slot = r->n_shards;
        if (slot >= RT_SHARDS_MAX)
            return ferry_err_set(err, FERRY_EINTERNAL,
                                 "the router has opened %d shard slots since it started (shards "
                                 "added or changed); restart it to use shard %s",
                                 RT_SHARDS_MAX, sh->name);
        rt_shard *s = NULL;
        int rc = shard_open(r, sh, slot, &s, err);
        if (rc)
            return rc;
        r->shards[slot] = s;
        if ((rc = rt_reads_add_shard(r, slot, err))) {
            r->shards[slot] = NULL; /* not counted: the slot is taken again next time */
            shard_free(s);
            return rc;
        }
        r->n_shards = slot + 1; /* publishes the complete slot (sequentially consistent) */
        FLOG_INFO("msg=\"router: shard connected\" shard=%s replicas=\"%s\" state=%s", sh->name,
                  sh->replicas, ferry_shard_state_name(sh->state));
    }
    return FERRY_OK;
}

void rt_shards_free(ferry_router *r)
{
    for (size_t i = 0; r->shards && i < r->n_shards; i++)
        shard_free(r->shards[i]);
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
    if (s->retired) {
        pthread_mutex_unlock(&s->mu);
        ferry_ch_client_free(c);
        free(it);
        return;
    }
    it->next = s->idle[rep];
    s->idle[rep] = it;
    pthread_mutex_unlock(&s->mu);
}

void rt_send_one(rt_send *sd)
{
    ferry_router *r = sd->r;
    rt_shard *s = r->shards[sd->shard];
    size_t order[64];
    ferry_err_clear(&sd->err);
    memset(&sd->st, 0, sizeof sd->st);
    if (s->conn_error[0] || !s->sel) {
        sd->rc = ferry_err_set(&sd->err, FERRY_ECONNECT, "%s",
                               s->conn_error[0] ? s->conn_error : "the shard has no replicas");
        return;
    }
    pthread_mutex_lock(&s->mu);
    int rc = ferry_rsel_select(s->sel, ferry_clock_ms_u64(), &s->rng, order, &sd->err);
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
        rc = rt_replica_exec(s, rep, c, &q, &sd->st, &sd->err);
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
    size_t n = r->n_shards;
    for (size_t i = 0; i < n; i++) {
        rt_shard *s = r->shards[i];
        pthread_mutex_lock(&s->mu);
        bool skip = s->retired || s->conn_error[0];
        pthread_mutex_unlock(&s->mu);
        if (skip)
            continue;
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

int rt_replica_exec(rt_shard *s, size_t rep, ferry_ch_client *c, const ferry_ch_query *q,
                    ferry_ch_status *st, ferry_err *err)
{
    pthread_mutex_lock(&s->mu);
    ferry_rsel_begin(s->sel, rep, NULL);
    pthread_mutex_unlock(&s->mu);
    int rc = ferry_ch_exec(c, q, st, err);
    pthread_mutex_lock(&s->mu);
    ferry_rsel_end(s->sel, rep, NULL);
    if (rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT)
        ferry_rsel_report_error(s->sel, rep, NULL);
    else if (!rc)
        ferry_rsel_report_success(s->sel, rep, NULL);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

bool rt_shard_retired(rt_shard *s)
{
    pthread_mutex_lock(&s->mu);
    bool retired = s->retired;
    pthread_mutex_unlock(&s->mu);
    return retired;
}

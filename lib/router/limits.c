/* Per-user limits in the router, as operators know them from chproxy (docs/security.md):
 *
 *   max_rps          requests started per second (a token bucket with a one-second burst);
 *                    over it: QUOTA_EXCEEDED
 *   max_concurrent   requests at once; over it the request waits up to queue_wait_ms for a slot
 *                    (0: refused at once), then TOO_MANY_SIMULTANEOUS_QUERIES
 *   max_execution_ms a read still running after this is cancelled on every shard: KILL QUERY
 *                    for the query ids the router gave its server queries (and the tag in their
 *                    text, for servers that keep their own ids, like the lab's node); the client
 *                    gets TIMEOUT_EXCEEDED (or a broken transfer once its answer began)
 *
 * The counters live in the router (they are per router: N routers allow N times the rate);
 * the limits come with the user's catalog record, so they change without a restart. One
 * watchdog thread serves every deadline. Memory: one entry per user that has logged in. */
#include "router_int.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/clock.h"
#include "ferry/log.h"

#define QUEUE_MAX 256 /* requests of one user waiting for a slot at once */

typedef struct lim_user {
    char name[FERRY_NAME_MAX];
    uint32_t running, waiting;
    uint64_t refused;
    ferry_bucket rate;
    struct lim_user *next;
} lim_user;

struct rt_deadline {
    char tag[40];          /* "ferry-kill-<hex>" */
    uint64_t at_ms;        /* CLOCK_MONOTONIC */
    uint64_t ms;
    atomic_uint seq;       /* query ids handed out */
    atomic_bool expired;
    bool killing;          /* the watchdog is sending the KILLs (it frees nothing then) */
    bool ended;            /* the read ended while the KILLs were being sent */
    struct rt_deadline *next;
};

struct rt_limits {
    ferry_router *r;
    pthread_mutex_t mu;
    pthread_cond_t slot;   /* a slot was freed */
    pthread_cond_t wake;   /* the watchdog's: a new deadline, or stopping */
    lim_user *users;
    rt_deadline *deadlines;
    uint64_t kills;        /* deadlines that expired */
    pthread_t th;
    bool th_started, stopping;
};

/* ---- cancelling a read on every shard ---- */

/* KILL QUERY on every replica of every live shard for the deadline's tag. The pattern is built
 * with concat() so the KILL's own text does not contain the tag comment it looks for. */
static void kill_everywhere(ferry_router *r, const char *tag)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "KILL QUERY WHERE startsWith(query_id, '%s') OR "
             "position(query, concat('/* ', '%s', ' */')) > 0 ASYNC",
             tag, tag);
    size_t n = r->n_shards;
    for (size_t i = 0; i < n; i++) {
        rt_shard *s = r->shards[i];
        if (rt_shard_retired(s) || s->conn_error[0])
            continue;
        for (size_t rep = 0; rep < s->n_replicas; rep++) {
            ferry_ch_client *c = NULL;
            ferry_err err = {0};
            if (rt_client_take(r, s, rep, &c, &err)) {
                FLOG_WARN("msg=\"router: cannot reach a shard to cancel a read\" shard=%s "
                          "err=\"%s\"", s->name, err.msg);
                continue;
            }
            ferry_ch_query q = {.sql = sql, .read_timeout_ms = 5000};
            ferry_ch_status st;
            int rc = ferry_ch_exec(c, &q, &st, &err);
            if (rc && rc != FERRY_EREMOTE) {
                ferry_ch_client_free(c);
            } else {
                rt_client_give(s, rep, c);
            }
            if (rc)
                FLOG_WARN("msg=\"router: KILL QUERY failed on a shard (give the router's "
                          "ClickHouse user the KILL QUERY grant)\" shard=%s err=\"%s\"",
                          s->name, rc == FERRY_EREMOTE ? st.message : err.msg);
        }
    }
}

static void *watchdog_main(void *arg)
{
    rt_limits *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stopping) {
        uint64_t now = ferry_clock_ms_u64(), next = 0;
        rt_deadline *due = NULL;
        for (rt_deadline *d = l->deadlines; d; d = d->next) {
            if (d->killing || atomic_load(&d->expired))
                continue;
            if (d->at_ms <= now) {
                due = d;
                break;
            }
            if (!next || d->at_ms < next)
                next = d->at_ms;
        }
        if (due) {
            atomic_store(&due->expired, true);
            due->killing = true;
            l->kills++;
            char tag[sizeof due->tag];
            snprintf(tag, sizeof tag, "%s", due->tag);
            pthread_mutex_unlock(&l->mu);
            FLOG_WARN("msg=\"router: a read ran past its user's max_execution_time; cancelling "
                      "it on every shard\" tag=%s max_ms=%llu", tag,
                      (unsigned long long)due->ms);
            kill_everywhere(l->r, tag);
            pthread_mutex_lock(&l->mu);
            due->killing = false;
            if (due->ended) { /* rt_deadline_end left it to us */
                for (rt_deadline **pp = &l->deadlines; *pp; pp = &(*pp)->next)
                    if (*pp == due) {
                        *pp = due->next;
                        break;
                    }
                free(due);
            }
            pthread_cond_broadcast(&l->slot);
            continue;
        }
        if (next) {
            struct timespec ts = ferry_clock_after_ms(next - now);
            pthread_cond_timedwait(&l->wake, &l->mu, &ts);
        } else {
            pthread_cond_wait(&l->wake, &l->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int rt_limits_new(ferry_router *r, rt_limits **out, ferry_err *err)
{
    rt_limits *l = calloc(1, sizeof *l);
    if (!l)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    l->r = r;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->slot, &ca);
    pthread_cond_init(&l->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&l->th, NULL, watchdog_main, l) != 0) {
        rt_limits_free(l);
        return ferry_err_set(err, FERRY_EINTERNAL, "cannot start the read deadline thread");
    }
    l->th_started = true;
    *out = l;
    return FERRY_OK;
}

void rt_limits_free(rt_limits *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->mu);
    if (l->th_started)
        pthread_join(l->th, NULL);
    while (l->users) {
        lim_user *n = l->users->next;
        free(l->users);
        l->users = n;
    }
    while (l->deadlines) {
        rt_deadline *n = l->deadlines->next;
        free(l->deadlines);
        l->deadlines = n;
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->slot);
    pthread_cond_destroy(&l->wake);
    free(l);
}

/* The user's entry, made on first use (under mu). NULL when memory is short. */
static lim_user *entry(rt_limits *l, const char *name)
{
    for (lim_user *u = l->users; u; u = u->next)
        if (!strcmp(u->name, name))
            return u;
    lim_user *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    /* user names are at most FERRY_NAME_MAX - 1 bytes (the catalog's key rule) */
    size_t n = strnlen(name, sizeof u->name - 1);
    memcpy(u->name, name, n);
    u->name[n] = '\0';
    u->next = l->users;
    l->users = u;
    return u;
}

int rt_limits_enter(rt_limits *l, rt_principal *p, char *name, size_t namesz, char *msg,
                    size_t msgsz)
{
    if (!p->user)
        return FERRY_OK; /* auth = none: no user, no limits */
    const ferry_user *rec = &p->user->rec;
    if (!rec->max_rps && !rec->max_concurrent)
        return FERRY_OK;
    pthread_mutex_lock(&l->mu);
    int rc = FERRY_OK;
    lim_user *u = entry(l, p->name);
    if (!u) {
        snprintf(name, namesz, "CANNOT_ALLOCATE_MEMORY");
        snprintf(msg, msgsz, "ferry router: out of memory");
        rc = FERRY_ENOMEM;
        goto out;
    }
    if (!ferry_bucket_take(&u->rate, rec->max_rps, ferry_clock_ms_u64())) {
        u->refused++;
        snprintf(name, namesz, "QUOTA_EXCEEDED");
        snprintf(msg, msgsz,
                 "Quota for user '%s' for 1 second has been exceeded: requests = %u/%u "
                 "(ferry router: the user's max_rps)",
                 p->name, rec->max_rps, rec->max_rps);
        rc = FERRY_EACCESS;
        goto out;
    }
    if (rec->max_concurrent && u->running >= rec->max_concurrent) {
        if (rec->queue_wait_ms && u->waiting < QUEUE_MAX) {
            struct timespec until = ferry_clock_after_ms(rec->queue_wait_ms);
            u->waiting++;
            while (u->running >= rec->max_concurrent && !l->stopping)
                if (pthread_cond_timedwait(&l->slot, &l->mu, &until) == ETIMEDOUT)
                    break;
            u->waiting--;
        }
        if (u->running >= rec->max_concurrent) {
            u->refused++;
            snprintf(name, namesz, "TOO_MANY_SIMULTANEOUS_QUERIES");
            snprintf(msg, msgsz,
                     "Too many simultaneous queries for user %s. Current: %u, maximum: %u "
                     "(ferry router: the user's max_concurrent%s)",
                     p->name, u->running, rec->max_concurrent,
                     rec->queue_wait_ms ? ", after waiting its queue_wait" : "");
            rc = FERRY_EACCESS;
            goto out;
        }
    }
    u->running++;
    p->has_slot = true;
out:
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void rt_limits_leave(rt_limits *l, rt_principal *p)
{
    if (!p->has_slot)
        return;
    pthread_mutex_lock(&l->mu);
    lim_user *u = entry(l, p->name);
    if (u && u->running)
        u->running--;
    p->has_slot = false;
    pthread_cond_broadcast(&l->slot);
    pthread_mutex_unlock(&l->mu);
}

rt_deadline *rt_deadline_start(rt_limits *l, uint64_t ms)
{
    if (!ms)
        return NULL;
    rt_deadline *d = calloc(1, sizeof *d);
    unsigned char rnd[8];
    if (!d || RAND_bytes(rnd, sizeof rnd) != 1) {
        free(d);
        return NULL;
    }
    int n = snprintf(d->tag, sizeof d->tag, "ferry-kill-");
    for (size_t i = 0; i < sizeof rnd; i++)
        n += snprintf(d->tag + n, sizeof d->tag - (size_t)n, "%02x", rnd[i]);
    d->ms = ms;
    d->at_ms = ferry_clock_ms_u64() + ms;
    atomic_init(&d->seq, 0);
    atomic_init(&d->expired, false);
    pthread_mutex_lock(&l->mu);
    d->next = l->deadlines;
    l->deadlines = d;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->mu);
    return d;
}

const char *rt_deadline_tag(const rt_deadline *d) { return d->tag; }
bool rt_deadline_expired(rt_deadline *d) { return d && atomic_load(&d->expired); }
uint64_t rt_deadline_ms(const rt_deadline *d) { return d ? d->ms : 0; }

void rt_deadline_query_id(rt_deadline *d, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s-%u", d->tag, atomic_fetch_add(&d->seq, 1));
}

void rt_deadline_end(rt_limits *l, rt_deadline *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&l->mu);
    if (d->killing) {
        d->ended = true; /* the watchdog frees it once its KILLs are sent */
        pthread_mutex_unlock(&l->mu);
        return;
    }
    for (rt_deadline **pp = &l->deadlines; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            break;
        }
    pthread_mutex_unlock(&l->mu);
    free(d);
}

void rt_limits_status(rt_limits *l, ferry_buf *out)
{
    pthread_mutex_lock(&l->mu);
    ferry_buf_printf(out, ",\"limits\":{\"cancelled_reads\":%llu,\"users\":{",
                     (unsigned long long)l->kills);
    bool first = true;
    for (lim_user *u = l->users; u; u = u->next) {
        ferry_buf_printf(out, "%s\"%s\":{\"running\":%u,\"waiting\":%u,\"refused\":%llu}",
                         first ? "" : ",", u->name, u->running, u->waiting,
                         (unsigned long long)u->refused);
        first = false;
    }
    ferry_buf_puts(out, "}}");
    pthread_mutex_unlock(&l->mu);
}

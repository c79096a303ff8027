/* The router fence: after a routing switch, a move asks every router listed in [cluster] routers
 * whether it has taken the new routing table and finished every write it had grouped with an
 * older one (GET /ferry/router). Only then is the source quiescent for the slice, whatever the
 * size of the batches in flight (docs/routing.md, "Moves and the router"). Reads are counted in
 * flight the same way, so the same wait before a move publishes (after its publish step raised
 * the routing version) means no router still reads the union of source and target
 * (lib/router/routing.c, "Reads while a slice moves"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#include "ferry/buf.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/fence.h"
#include "ferry/http_call.h"
#include "ferry/stop.h"
#include "ferry/strutil.h"

/* One look at a router: 1 when it is past version (and, when shard is not NULL, reaches that
 * shard), 0 when not yet, -1 when unreachable or the answer is not a router's (what is filled
 * in). */
typedef struct fence_want {
    uint64_t version;   /* routing version at least this, nothing in flight below it */
    const char *shard;  /* NULL, or a shard the router must be able to send to */
    const char *tenant; /* NULL, or a slice no client retry may be pending for */
    uint32_t split;
    uint64_t *wait_ms;  /* out: how long the router still expects a retry (tenant given) */
    uint64_t *n_pending; /* out (may be NULL): how many slices it expects retries for */
    uint64_t *inflight_ms; /* out (may be NULL): how long its oldest open write has sent rows of
                            * the slice (tenant given) or of any slice */
    const char *token;  /* [cluster] router_token_file's secret (routers with auth = catalog
                         * answer their status only with it), or NULL; never logged */
} fence_want;

static int router_past(const char *base, const fence_want *w, char *what, size_t whatsz)
{
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    ferry_buf url = FERRY_BUF_INIT, tok = FERRY_BUF_INIT;
    ferry_http_answer a;
    ferry_err err = {0};
    int res = -1;
    int bad = ferry_buf_printf(&url, "%.*s/ferry/router", (int)bl, base);
    if (!bad && w->tenant)
        bad = ferry_buf_puts(&url, "?tenant=") || ferry_url_escape(&url, w->tenant) ||
              ferry_buf_printf(&url, "&split=%u", w->split);
    if (!bad && w->token)
        bad = ferry_buf_printf(&tok, "X-Ferry-Token: %s", w->token);
    if (bad) {
        memset(&a, 0, sizeof a);
        snprintf(what, whatsz, "out of memory");
        goto out;
    }
    const char *hdrs[] = {tok.data, NULL};
    ferry_http_call call = {.url = url.data, .headers = w->token ? hdrs : NULL,
                            .timeout_ms = 2000};
    if (ferry_http_do(&call, &a, &err)) {
        snprintf(what, whatsz, "%.200s", err.msg);
        goto out;
    }
    uint64_t version = w->version;
    const char *shard = w->shard;
    long code = a.status;
    json_t *o = code == 200 ? json_loads(ferry_buf_cstr(&a.body), 0, NULL) : NULL;
    json_t *rv = o ? json_object_get(o, "routing_version") : NULL;
    json_t *old = o ? json_object_get(o, "inflight_oldest_version") : NULL;
    if (!json_is_integer(rv) && (code == 401 || code == 403)) {
        snprintf(what, whatsz, "HTTP %ld: the router refused its status; give every router "
                 "and mover the same [cluster] router_token_file", code);
    } else if (!json_is_integer(rv)) {
        snprintf(what, whatsz, "HTTP %ld, not a ferry router's status", code);
    } else {
        uint64_t have = (uint64_t)json_integer_value(rv);
        bool inflight_old = json_is_integer(old) && (uint64_t)json_integer_value(old) < version;
        res = have >= version && !inflight_old;
        if (json_is_integer(old))
            snprintf(what, whatsz, "it has routing version %llu, a read or write in flight under %lld",
                     (unsigned long long)have, (long long)json_integer_value(old));
        else
            snprintf(what, whatsz, "it has routing version %llu, nothing in flight",
                     (unsigned long long)have);
        json_t *slices = json_object_get(o, "pending_retry_slices");
        if (w->n_pending)
            *w->n_pending = json_is_integer(slices) ? (uint64_t)json_integer_value(slices) : 0;
        json_t *infl = json_object_get(o, w->tenant ? "inflight_write_ms"
                                                    : "inflight_write_oldest_ms");
        if (w->inflight_ms)
            *w->inflight_ms = json_is_integer(infl) ? (uint64_t)json_integer_value(infl) : 0;
        json_t *pend = w->tenant ? json_object_get(o, "pending_retry_ms") : NULL;
        if (w->wait_ms)
            *w->wait_ms = json_is_integer(pend) ? (uint64_t)json_integer_value(pend) : 0;
        if (res == 1 && w->tenant && json_is_integer(pend) && json_integer_value(pend) > 0) {
            res = 0;
            snprintf(what, whatsz, "it expects a client to retry failed writes to %s/%u for "
                     "%lld ms more", w->tenant, w->split, (long long)json_integer_value(pend));
        }
        if (res == 1 && shard) {
            json_t *sh = json_object_get(json_object_get(o, "shards"), shard);
            const char *e = json_string_value(json_object_get(sh, "error"));
            if (!sh || !json_is_true(json_object_get(sh, "usable"))) {
                res = 0;
                snprintf(what, whatsz, "it %s shard %s%s%s (routing version %llu)",
                         sh ? "cannot use" : "does not know", shard, e ? ": " : "", e ? e : "",
                         (unsigned long long)have);
            }
        }
    }
    json_decref(o);
out:
    ferry_http_answer_free(&a);
    ferry_buf_free(&url);
    if (tok.data)
        memset(tok.data, 0, tok.len); /* the token */
    ferry_buf_free(&tok);
    return res;
}

static int fence(const struct ferry_config *cfg, fence_want *w, unsigned timeout_ms,
                 ferry_err *err)
{
    const char *shard = w->shard;
    uint64_t version = w->version;
    const char *list = cfg ? ferry_config_get(cfg, "cluster", NULL, "routers") : NULL;
    if (!list || !*list)
        return FERRY_OK;
    char *token = NULL;
    const char *tf = ferry_config_get(cfg, "cluster", NULL, "router_token_file");
    if (tf && *tf) {
        size_t tl = 0;
        int trc = ferry_read_file(tf, &token, &tl, err);
        if (trc)
            return ferry_err_prefix(err, "[cluster] router_token_file: ");
        token[strcspn(token, "\r\n")] = '\0';
        w->token = token;
    }
    char *copy = strdup(list);
    if (!copy) {
        free(token);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    char *fields[64];
    size_t n = ferry_split(copy, ',', fields, 64);
    if (n > 64)
        n = 64;
    int rc = FERRY_OK;
    uint64_t deadline = ferry_clock_ms_u64() + (timeout_ms ? timeout_ms : 60000);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *u = ferry_trim(fields[i]);
        if (!*u)
            continue;
        char what[256] = "";
        uint64_t logged = 0;
        for (;;) {
            uint64_t pending = 0;
            w->wait_ms = &pending;
            int past = router_past(u, w, what, sizeof what);
            if (past == 1)
                break;
            if (pending) {
                /* a client's retry is expected: wait as long as the router says, not longer
                 * than the timeout from now (the window may be long) */
                uint64_t until = ferry_clock_ms_u64() + pending + 1000;
                if (until > deadline)
                    deadline = until;
                if (ferry_clock_ms_u64() - logged >= 10000) {
                    ferry_log(FERRY_LOG_INFO, "msg=\"waiting for a client's retry before the "
                              "routing switch\" router=%s tenant=%s split=%u left_ms=%llu",
                              u, w->tenant, w->split, (unsigned long long)pending);
                    logged = ferry_clock_ms_u64();
                }
            }
            if (ferry_clock_ms_u64() >= deadline && shard) {
                rc = ferry_err_set(err, FERRY_ETIMEOUT,
                                   "router %s cannot send to shard %s yet (%s); every router in "
                                   "[cluster] routers must reach a shard before a route names it "
                                   "(check the shard's record with ferry status and the "
                                   "router's log, then resume)",
                                   u, shard, what);
                break;
            }
            if (ferry_clock_ms_u64() >= deadline) {
                rc = ferry_err_set(err, FERRY_ETIMEOUT,
                                   "router %s did not confirm routing version %llu in time "
                                   "(%s); every router in [cluster] routers must take the new "
                                   "table and finish older reads and writes before a move goes on "
                                   "(remove a router that is gone from the list, then resume)",
                                   u, (unsigned long long)version, what);
                break;
            }
            usleep(20000);
        }
    }
    free(copy);
    if (token) {
        memset(token, 0, strlen(token));
        free(token);
    }
    return rc;
}

bool ferry_router_retry_pending(const struct ferry_config *cfg, const char *tenant,
                                uint32_t split, uint64_t inflight_ms, char *why, size_t whysz)
{
    const char *list = cfg ? ferry_config_get(cfg, "cluster", NULL, "routers") : NULL;
    if (!list || !*list)
        return false;
    char *token = NULL, *copy = strdup(list), *fields[64];
    const char *tf = ferry_config_get(cfg, "cluster", NULL, "router_token_file");
    ferry_err e = {0};
    size_t tl = 0;
    if (tf && *tf && !ferry_read_file(tf, &token, &tl, &e))
        token[strcspn(token, "\r\n")] = '\0';
    bool pending = false;
    size_t n = copy ? ferry_split(copy, ',', fields, 64) : 0;
    for (size_t i = 0; i < n && i < 64 && !pending; i++) {
        const char *u = ferry_trim(fields[i]);
        uint64_t left = 0, slices = 0, open_ms = 0;
        char what[256] = "";
        fence_want w = {.tenant = tenant, .split = split, .wait_ms = &left, .n_pending = &slices,
                        .inflight_ms = &open_ms, .token = token};
        if (!*u)
            continue;
        if (router_past(u, &w, what, sizeof what) < 0) {
            /* down, or restarting: a router with a retry journal holds again, once it is back,
             * what it expected before (docs/routing.md "The retry journal"); the move's fence
             * waits for it the same way */
            pending = true;
            snprintf(why, whysz, "router %.200s does not answer (%s): it may expect a client's "
                     "retry once it is back (remove a router that is gone from [cluster] routers)",
                     u, what);
        } else if (tenant && left) {
            pending = true;
            snprintf(why, whysz, "router %.200s expects a client to retry a failed write to %s/%u "
                     "for %llu ms more", u, tenant, split, (unsigned long long)left);
        } else if (!tenant && slices) {
            pending = true;
            snprintf(why, whysz, "router %.200s expects clients to retry failed writes to %llu "
                     "slices", u, (unsigned long long)slices);
        } else if (inflight_ms && open_ms >= inflight_ms) {
            /* open since before the caller's moment (its freeze): its rows may be among what
             * the caller took, and it may still fail and be retried */
            char sl[16] = "";
            if (tenant)
                snprintf(sl, sizeof sl, "/%u", split);
            pending = true;
            snprintf(why, whysz, "router %.200s has a write to %s%s open for %llu ms (it may "
                     "still fail and be retried)", u, tenant ? tenant : "a slice", sl,
                     (unsigned long long)open_ms);
        }
    }
    free(copy);
    if (token) {
        memset(token, 0, tl);
        free(token);
    }
    return pending;
}

int ferry_router_wait_open_writes(const struct ferry_config *cfg, const char *tenant,
                                  uint32_t split, unsigned max_ms, ferry_err *err)
{
    uint64_t t0 = ferry_clock_ms_u64();
    for (;;) {
        char why[400];
        uint64_t elapsed = ferry_clock_ms_u64() - t0;
        /* open for at least `elapsed`: open since t0 (a write that began later is younger) */
        if (!ferry_router_retry_pending(cfg, tenant, split, elapsed ? elapsed : 1, why,
                                        sizeof why))
            return FERRY_OK;
        if (elapsed >= max_ms || ferry_stop_sleep_ms(20))
            return ferry_err_set(err, FERRY_ETIMEOUT, "%s/%u: %s; the next run takes it up",
                                 tenant, split, why);
    }
}

int ferry_router_fence(const struct ferry_config *cfg, uint64_t version, unsigned timeout_ms,
                       ferry_err *err)
{
    fence_want w = {.version = version};
    return fence(cfg, &w, timeout_ms, err);
}

int ferry_router_fence_switch(const struct ferry_config *cfg, const char *shard,
                              const char *tenant, uint32_t split, unsigned timeout_ms,
                              ferry_err *err)
{
    fence_want w = {.shard = shard, .tenant = tenant, .split = split};
    return fence(cfg, &w, timeout_ms, err);
}

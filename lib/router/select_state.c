/* The router's read path, its state (select_int.h): configuration from [router], the replica
 * selectors per shard, the candidate cache built once per routing snapshot (each server's served
 * slices), the partial results published for a running merge at GET /ferry/partial/<token>, and
 * the read path's counters in GET /ferry/router and /metrics. */
#include "select_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "ferry/chhttp.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/read_pick.h"
#include "ferry/sqlrw.h"
#include "ferry/strutil.h"
#include "qcache.h"

/* ---- state ---------------------------------------------------------------------------------- */

/* ---- configuration -------------------------------------------------------------------------- */

/* The host part of a URL (what the host name policies compare), or the whole text. */
static void url_host_of(const char *url, char *out, size_t outsz)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *at = strchr(p, '@'), *slash = strchr(p, '/');
    if (at && (!slash || at < slash))
        p = at + 1;
    size_t n = strcspn(p, ":/?");
    if (*p == '[') {
        const char *close = strchr(p, ']');
        n = close ? (size_t)(close - p) + 1 : strlen(p);
    }
    snprintf(out, outsz, "%.*s", (int)n, p);
    if (!*out)
        snprintf(out, outsz, "%s", url);
}

/* One selector per slice candidate list, over the router's shards, with [router]
 * load_balancing; host names from each shard's first URL, the local one from gethostname. */
static int replica_sets_init(ferry_router *r, rt_reads *rd, const ferry_config *cfg,
                             ferry_err *err)
{
    const char *hl = ferry_config_get(cfg, "router", NULL, "replica_error_half_life");
    uint64_t half_life_s = 60;
    if (hl && !ferry_parse_duration(hl, &half_life_s))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [router] replica_error_half_life = '%s': expected a duration "
                             "such as 60s (0: errors are forgotten at once)",
                             cfg->path, hl);
    rd->shard_queries = calloc(RT_SHARDS_MAX, sizeof *rd->shard_queries);
    rd->shard_errors = calloc(RT_SHARDS_MAX, sizeof *rd->shard_errors);
    if (!rd->shard_queries || !rd->shard_errors)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char local[256] = "localhost";
    if (gethostname(local, sizeof local) != 0 || !local[0])
        snprintf(local, sizeof local, "localhost");
    local[sizeof local - 1] = '\0';
    ferry_rsel_options o;
    ferry_rsel_options_default(&o);
    o.query.policy = r->load_balancing;
    o.local_hostname = local;
    o.half_life_ms = half_life_s * 1000;
    /* no servers yet: each shard slot is added as the routing table names it */
    int rc = ferry_rsets_new(NULL, 0, &o, &rd->rsets, err);
    if (rc)
        return ferry_err_prefix(err, "[router] load_balancing: ");
    ferry_rsel_rng_seed(&rd->rng, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    return FERRY_OK;
}

int rt_reads_add_shard(ferry_router *r, size_t slot, ferry_err *err)
{
    rt_reads *rd = r->reads;
    const rt_shard *s = r->shards[slot];
    char host[256];
    url_host_of(s->n_replicas ? s->urls[0] : s->name, host, sizeof host);
    pthread_mutex_lock(&rd->sel_mu);
    uint32_t idx = 0;
    int rc = ferry_rsets_add_server(rd->rsets, host, &idx, err);
    if (!rc && idx != slot) /* the selectors' servers are the router's slots, in order */
        rc = ferry_err_set(err, FERRY_EINTERNAL, "replica sets: server %u for shard slot %zu",
                           (unsigned)idx, slot);
    rd->shard_queries[slot] = rd->shard_errors[slot] = 0;
    pthread_mutex_unlock(&rd->sel_mu);
    return rc;
}

int rt_reads_init(ferry_router *r, const ferry_config *cfg, const char *listen_host,
                  ferry_err *err)
{
    rt_reads *rd = calloc(1, sizeof *rd);
    if (!rd)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    pthread_mutex_init(&rd->mu, NULL);
    pthread_mutex_init(&rd->sel_mu, NULL);
    ferry_histogram_init(&rd->plan_seconds[0]);
    ferry_histogram_init(&rd->plan_seconds[1]);
    r->reads = rd;
    if (!(rd->structs = rt_qcache_new(256)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = ferry_config_bool(cfg, "router", NULL, "allow_fanout", true, &rd->allow_fanout, err);
    if (!rc)
        rc = ferry_config_u64(cfg, "router", NULL, "global_max_rows", 1000000,
                              &rd->global_max_rows, err);
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "global_max_bytes", 64u << 20,
                                &rd->global_max_bytes, err);
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "max_partial_bytes", 1ULL << 30,
                                &rd->max_partial_bytes, err);
    if (rc)
        return rc;
    const char *adv = ferry_config_get(cfg, "router", NULL, "advertise_url");
    if (adv && *adv) {
        if (!ferry_starts_with(adv, "http://") && !ferry_starts_with(adv, "https://"))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "%s: [router] advertise_url = '%s': expected the router's "
                                 "http:// URL as the servers reach it",
                                 cfg->path, adv);
        size_t l = strlen(adv);
        snprintf(rd->rd_advertise, sizeof rd->rd_advertise, "%.*s", (int)(adv[l - 1] == '/' ? l - 1 : l),
                 adv);
    }
    const char *h = listen_host && *listen_host && strcmp(listen_host, "0.0.0.0") &&
                            strcmp(listen_host, "::") && strcmp(listen_host, "[::]")
                        ? listen_host
                        : "127.0.0.1";
    snprintf(rd->listen_host, sizeof rd->listen_host, "%s", h);
    rc = replica_sets_init(r, rd, cfg, err);
    if (rc)
        return rc;
    rd->tables = calloc(r->n_tables ? r->n_tables : 1, sizeof *rd->tables);
    if (!rd->tables)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n_tables; i++) {
        const ferry_table_def *d = &r->tables[i].def;
        if (d->layout != FERRY_LAYOUT_SHARED)
            continue; /* per-tenant tables are not routed for reads (docs/routing.md) */
        rd->tables[rd->n_tables++] = (ferry_sql_table){.name = d->name,
                                                       .database = d->database,
                                                       .layout = d->layout,
                                                       .tenant_column = d->tenant_column,
                                                       .split_column = d->split_column};
    }
    return FERRY_OK;
}

void rd_cache_put(rd_cache *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    free(c->tenant_first);
    free(c->cslices);
    free(c->cand_store);
    free(c->unrouted);
    free(c->held);
    free(c->held_move);
    free(c->tenant_splits);
    rt_snapshot_put(c->snap);
    free(c);
}

static void partial_put(rt_partial *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (size_t i = 0; i < p->n_segs; i++)
        ferry_buf_free(&p->segs[i]);
    free(p->segs);
    if (p->live) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cond);
    }
    free(p);
}

void rt_reads_free(ferry_router *r)
{
    rt_reads *rd = r->reads;
    if (!rd)
        return;
    for (rt_partial *p = rd->partials; p;) {
        rt_partial *n = p->next;
        partial_put(p);
        p = n;
    }
    rd_cache_put(rd->cache);
    rt_qcache_free(rd->structs);
    free(rd->tables);
    ferry_rsets_free(rd->rsets);
    free(rd->shard_queries);
    free(rd->shard_errors);
    pthread_mutex_destroy(&rd->sel_mu);
    pthread_mutex_destroy(&rd->mu);
    ferry_histogram_destroy(&rd->plan_seconds[0]);
    ferry_histogram_destroy(&rd->plan_seconds[1]);
    free(rd);
    r->reads = NULL;
}

/* The read side of GET /ferry/router: ,"reads":{"single":N,"merged":N,"failovers":N,
 * "shards":{"NAME":{"queries":N,"errors":N,"error_count":N},...}} appended to out. error_count
 * is the selectors' decayed count as of their last use. */
void rt_reads_status(ferry_router *r, ferry_buf *out)
{
    rt_reads *rd = r->reads;
    if (!rd)
        return;
    unsigned long long hits = 0, lookups = 0;
    rt_qcache_stats(rd->structs, &hits, &lookups);
    pthread_mutex_lock(&rd->mu);
    uint64_t single = rd->single, merged = rd->merged, pipelined = rd->pipelined;
    pthread_mutex_unlock(&rd->mu);
    pthread_mutex_lock(&rd->sel_mu);
    ferry_buf_printf(out, ",\"reads\":{\"single\":%llu,\"merged\":%llu,\"pipelined\":%llu,"
                          "\"structure_hits\":%llu,\"structure_lookups\":%llu,"
                          "\"failovers\":%llu,\"stale_reads\":%llu,\"stale_refused\":%llu,"
                          "\"shards\":{",
                     (unsigned long long)single, (unsigned long long)merged,
                     (unsigned long long)pipelined, hits, lookups,
                     (unsigned long long)rd->failovers, (unsigned long long)rd->stale_reads,
                     (unsigned long long)rd->stale_refused);
    size_t n = r->n_shards;
    for (size_t i = 0; i < n; i++)
        ferry_buf_printf(out, "%s\"%s\":{\"queries\":%llu,\"errors\":%llu,\"error_count\":%llu}",
                         i ? "," : "", r->shards[i]->name,
                         (unsigned long long)rd->shard_queries[i],
                         (unsigned long long)rd->shard_errors[i],
                         (unsigned long long)(rd->rsets ? ferry_rsets_errors(rd->rsets,
                                                                             (uint32_t)i)
                                                        : 0));
    ferry_buf_puts(out, "}}");
    pthread_mutex_unlock(&rd->sel_mu);
}

/* ---- the per-snapshot cache ----------------------------------------------------------------- */

static rd_cache *cache_build(ferry_router *r, rt_reads *rd, rt_snapshot *s)
{
    (void)rd;
    rd_cache *c = calloc(1, sizeof *c);
    if (!c) {
        rt_snapshot_put(s);
        return NULL;
    }
    atomic_init(&c->refs, 1);
    c->snap = s;
    c->n_servers = r->n_shards;
    size_t total_cs = 0, total_cand = 0;
    c->tenant_first = calloc(s->n_tenants + 1, sizeof *c->tenant_first);
    c->unrouted = calloc(s->n_tenants + 1, sizeof *c->unrouted);
    c->held = calloc(s->n_tenants + 1, sizeof *c->held);
    c->held_move = calloc(s->n_tenants + 1, sizeof *c->held_move);
    c->tenant_splits = calloc(s->n_tenants + 1, sizeof *c->tenant_splits);
    if (!c->tenant_first || !c->unrouted || !c->held || !c->held_move || !c->tenant_splits)
        goto oom;
    /* every tenant's split count, so a server picked for every slice of a tenant reads it
     * without a slice restriction (ferry_sql_target.tenant_splits; the snapshot's tenants are
     * sorted by name, as the planner needs) */
    for (size_t i = 0; i < s->n_tenants; i++)
        c->tenant_splits[i] = (ferry_sql_tenant_splits){s->tenants[i].name, s->tenants[i].splits};
    /* Which servers read each slice: rt_read_set (the whole rule, moves included, is there).
     * ONE: a slice every candidate holds whole; the query picks one of them (rd_pick_build) and
     * fails over to the next. UNION: every member holds a disjoint part, so each member is a
     * slice entry of its own with that one candidate (each server's query is restricted to the
     * slices listed for it; a member that fails has no replacement). HOLD: reads of the tenant
     * wait for a newer snapshot (rd_plan_analyzed). Count first, then fill. */
    for (size_t i = 0; i < s->n_tenants; i++) {
        const rt_tenant *t = &s->tenants[i];
        bool unrouted = false;
        const char *held = NULL;
        for (uint32_t k = 0; k < t->splits; k++) {
            rt_readers rs;
            rt_read_set(s, t, k, &rs);
            if (rs.mode == RT_READ_ONE) {
                total_cs++;
                total_cand += rs.n < RD_MAX_CAND ? rs.n : RD_MAX_CAND;
            } else if (rs.mode == RT_READ_UNION) {
                total_cs += rs.n;
                total_cand += rs.n;
            } else if (rs.mode == RT_READ_HOLD) {
                held = rs.move_id;
            } else {
                unrouted = true;
            }
        }
        if (unrouted)
            c->unrouted[c->n_unrouted++] = t->name;
        if (held) {
            c->held[c->n_held] = t->name;
            c->held_move[c->n_held++] = held;
        }
    }
    c->cslices = calloc(total_cs + 1, sizeof *c->cslices);
    c->cand_store = calloc(total_cand + 1, sizeof *c->cand_store);
    if (!c->cslices || !c->cand_store)
        goto oom;
    size_t used = 0;
    for (size_t i = 0; i < s->n_tenants; i++) {
        const rt_tenant *t = &s->tenants[i];
        c->tenant_first[i] = c->n_cslices;
        for (uint32_t k = 0; k < t->splits; k++) {
            rt_readers rs;
            rt_read_set(s, t, k, &rs);
            if (rs.mode == RT_READ_ONE) {
                uint32_t n = rs.n < RD_MAX_CAND ? rs.n : RD_MAX_CAND;
                memcpy(c->cand_store + used, rs.shards, n * sizeof *rs.shards);
                c->cslices[c->n_cslices++] =
                    (rd_cslice){.split = k, .n_cand = n, .n_fresh = rs.n_fresh < n ? rs.n_fresh : n,
                                .cand = c->cand_store + used};
                used += n;
            } else if (rs.mode == RT_READ_UNION) {
                for (uint32_t j = 0; j < rs.n; j++) {
                    c->cand_store[used] = rs.shards[j];
                    c->cslices[c->n_cslices++] = (rd_cslice){
                        .split = k, .n_cand = 1, .n_fresh = 1, .cand = c->cand_store + used};
                    used++;
                }
            }
        }
    }
    c->tenant_first[s->n_tenants] = c->n_cslices;
    return c;
oom:
    rd_cache_put(c);
    return NULL;
}

/* The cache for the current snapshot, with a reference (rd_cache_put), and a read registered in
 * flight under its version (taken with the snapshot, atomically: rt_read_begin); the caller
 * ends it with rt_inflight_done(r, cache->snap->version). NULL: out of memory (nothing in
 * flight). */
rd_cache *rd_cache_get(ferry_router *r, rt_reads *rd)
{
    rt_snapshot *s = rt_read_begin(r);
    if (!s)
        return NULL;
    uint64_t version = s->version;
    pthread_mutex_lock(&rd->mu);
    rd_cache *c = rd->cache;
    if (c && c->snap == s) {
        atomic_fetch_add(&c->refs, 1);
        pthread_mutex_unlock(&rd->mu);
        rt_snapshot_put(s);
        return c;
    }
    pthread_mutex_unlock(&rd->mu);
    c = cache_build(r, rd, s); /* takes the snapshot reference */
    if (!c) {
        rt_inflight_done(r, version);
        return NULL;
    }
    pthread_mutex_lock(&rd->mu);
    rd_cache *old = NULL;
    if (!rd->cache || rd->cache->snap->version <= c->snap->version) {
        old = rd->cache;
        rd->cache = c;
        atomic_fetch_add(&c->refs, 1);
    }
    pthread_mutex_unlock(&rd->mu);
    rd_cache_put(old);
    return c;
}

/* ---- published partial results -------------------------------------------------------------- */

/* Publishes segs (taken over) and returns it with a reference held by the caller (who
 * unpublishes it with rd_partial_unpublish). */
rt_partial *rd_partial_publish(rt_reads *rd, ferry_buf *segs, size_t n_segs)
{
    rt_partial *p = calloc(1, sizeof *p);
    unsigned char rnd[16];
    if (!p || RAND_bytes(rnd, sizeof rnd) != 1) {
        free(p);
        return NULL;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(p->token + 2 * i, 3, "%02x", rnd[i]);
    p->segs = segs;
    p->n_segs = n_segs;
    atomic_init(&p->refs, 2); /* the registry's and the caller's */
    pthread_mutex_lock(&rd->mu);
    p->next = rd->partials;
    rd->partials = p;
    pthread_mutex_unlock(&rd->mu);
    return p;
}

void rd_partial_unpublish(rt_reads *rd, rt_partial *p)
{
    if (!p)
        return;
    if (p->live)
        rd_live_end(p, true); /* no-op when it ended; else its readers must not wait any longer */
    pthread_mutex_lock(&rd->mu);
    for (rt_partial **pp = &rd->partials; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            partial_put(p); /* the registry's reference */
            break;
        }
    pthread_mutex_unlock(&rd->mu);
    partial_put(p);
}

/* Reading a live partial: waits for the next complete segment; ends when the partial is done,
 * breaks the transfer (-1: the reader cannot take it for complete) when it failed. */
static ssize_t live_partial_read(partial_reader *pr, char *buf, size_t max)
{
    rt_partial *p = pr->p;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (pr->seg >= p->n_segs && !p->done && !p->failed)
            pthread_cond_wait(&p->cond, &p->mu);
        bool failed = p->failed, have = pr->seg < p->n_segs;
        /* a complete segment is never written again; segs itself may be reallocated */
        const char *data = have ? p->segs[pr->seg].data : NULL;
        size_t len = have ? p->segs[pr->seg].len : 0;
        pthread_mutex_unlock(&p->mu);
        if (failed)
            return -1;
        if (!have)
            return 0;
        if (pr->off < len) {
            size_t n = len - pr->off < max ? len - pr->off : max;
            memcpy(buf, data + pr->off, n);
            pr->off += n;
            return (ssize_t)n;
        }
        pr->seg++;
        pr->off = 0;
    }
}

static ssize_t partial_read(void *cls, char *buf, size_t max)
{
    partial_reader *pr = cls;
    if (pr->p->live)
        return live_partial_read(pr, buf, max);
    while (pr->seg < pr->p->n_segs) {
        const ferry_buf *b = &pr->p->segs[pr->seg];
        if (pr->off < b->len) {
            size_t n = b->len - pr->off < max ? b->len - pr->off : max;
            memcpy(buf, b->data + pr->off, n);
            pr->off += n;
            return (ssize_t)n;
        }
        pr->seg++;
        pr->off = 0;
    }
    return 0;
}

static void partial_reader_free(void *cls)
{
    partial_reader *pr = cls;
    partial_put(pr->p);
    free(pr);
}

void rt_partial_on_complete(ferry_http_req *req, void *ctx)
{
    ferry_router *r = ctx;
    rt_reads *rd = r->reads;
    const char *path = ferry_http_path(req);
    const char *tok = strrchr(path, '/');
    tok = tok ? tok + 1 : "";
    /* the shards read it with the signature the url() they were given carries; anyone else
     * needs an admin user or the cluster's token */
    if (!rt_partial_sig_ok(r, tok, ferry_http_arg(req, "sig")) && !rt_auth_internal(r, req))
        return;
    rt_partial *p = NULL;
    pthread_mutex_lock(&rd->mu);
    for (rt_partial *q = rd->partials; q; q = q->next)
        if (!strcmp(q->token, tok)) {
            p = q;
            atomic_fetch_add(&p->refs, 1);
            break;
        }
    pthread_mutex_unlock(&rd->mu);
    if (!p) {
        ferry_http_respond_text(req, 404, "no such partial result (it ended with its query)\n");
        return;
    }
    partial_reader *pr = calloc(1, sizeof *pr);
    if (!pr) {
        partial_put(p);
        ferry_http_respond_text(req, 500, "out of memory\n");
        return;
    }
    pr->p = p;
    ferry_http_respond_stream(req, 200, "application/octet-stream", partial_read, pr,
                              partial_reader_free);
}

void rt_reads_metrics(ferry_router *r, ferry_buf *out)
{
    rt_reads *rd = r->reads;
    if (!rd)
        return;
    pthread_mutex_lock(&rd->mu);
    uint64_t single = rd->single, merged = rd->merged, pipelined = rd->pipelined;
    pthread_mutex_unlock(&rd->mu);
    ferry_metrics_family(out, "ferry_router_reads_total", FERRY_METRIC_COUNTER,
                         "routed reads by plan: one server, merged, merged pipelined");
    ferry_metrics_sample(out, "ferry_router_reads_total", (const char *[]){"plan", "single", NULL},
                         (double)single);
    ferry_metrics_sample(out, "ferry_router_reads_total", (const char *[]){"plan", "merged", NULL},
                         (double)merged);
    ferry_metrics_sample(out, "ferry_router_reads_total",
                         (const char *[]){"plan", "pipelined", NULL}, (double)pipelined);
    ferry_metrics_family(out, "ferry_router_read_seconds", FERRY_METRIC_HISTOGRAM,
                         "routed reads by plan (single: one server; merged: several, pipelined "
                         "or not), from the plan's start to the end of its answer");
    ferry_histogram_render(&rd->plan_seconds[0], out, "ferry_router_read_seconds",
                           (const char *[]){"plan", "single", NULL});
    ferry_histogram_render(&rd->plan_seconds[1], out, "ferry_router_read_seconds",
                           (const char *[]){"plan", "merged", NULL});
    pthread_mutex_lock(&rd->sel_mu);
    ferry_metrics_family(out, "ferry_router_read_failovers_total", FERRY_METRIC_COUNTER,
                         "reads that went to another replica after one failed");
    ferry_metrics_sample(out, "ferry_router_read_failovers_total", NULL, (double)rd->failovers);
    ferry_metrics_family(out, "ferry_router_stale_replica_reads_total", FERRY_METRIC_COUNTER,
                         "slices read from a replica that missed acknowledged writes (awaiting "
                         "ferry repair) because no up-to-date replica answered, by outcome "
                         "(read: [router] fallback_to_stale_replicas = true; refused: false)");
    ferry_metrics_sample(out, "ferry_router_stale_replica_reads_total",
                         (const char *[]){"outcome", "read", NULL}, (double)rd->stale_reads);
    ferry_metrics_sample(out, "ferry_router_stale_replica_reads_total",
                         (const char *[]){"outcome", "refused", NULL}, (double)rd->stale_refused);
    size_t n = r->n_shards;
    ferry_metrics_family(out, "ferry_router_shard_queries_total", FERRY_METRIC_COUNTER,
                         "read queries sent to a shard, by outcome");
    for (size_t i = 0; i < n; i++) {
        const char *name = r->shards[i]->name;
        ferry_metrics_sample(out, "ferry_router_shard_queries_total",
                             (const char *[]){"shard", name, "outcome", "ok", NULL},
                             (double)(rd->shard_queries[i] - rd->shard_errors[i]));
        ferry_metrics_sample(out, "ferry_router_shard_queries_total",
                             (const char *[]){"shard", name, "outcome", "error", NULL},
                             (double)rd->shard_errors[i]);
    }
    ferry_metrics_family(out, "ferry_router_replica_errors", FERRY_METRIC_GAUGE,
                         "a shard's decayed error count in replica selection (ClickHouse's "
                         "errors_count)");
    for (size_t i = 0; i < n; i++)
        ferry_metrics_sample(out, "ferry_router_replica_errors",
                             (const char *[]){"shard", r->shards[i]->name, NULL},
                             (double)(rd->rsets ? ferry_rsets_errors(rd->rsets, (uint32_t)i) : 0));
    pthread_mutex_unlock(&rd->sel_mu);
}

/* The router's read path (docs/routing.md, "Reads"): a SELECT over managed tables is analysed and
 * planned with lib/sql against the router's routing snapshot, then executed:
 *
 *   single   one server serves everything the query reads: its rewritten query (with the
 *            client's SETTINGS and FORMAT put back) is sent on a pooled keep-alive client and
 *            the answer streamed back;
 *   merged   several servers: every server's partial query runs in parallel (Native format,
 *            buffered in the router, bounded by [router] max_partial_bytes); the partials are
 *            published at GET /ferry/partial/<token> and the plan's initiator query, with its
 *            placeholders replaced by url('<router>/ferry/partial/<token>', 'Native'), runs on
 *            one of the servers, which merges them with ClickHouse's own machinery
 *            (-State/-Merge, ORDER BY/LIMIT, joins ...). Its answer is streamed back.
 *            From a statement's second run on (its partials' structure learned), the merge is
 *            pipelined: the initiator starts with the partial queries and reads their answers
 *            while they arrive (run_merged_pipelined; failover kept exact there).
 *   GLOBAL   the right-hand side of GLOBAL IN / JOIN is routed like any query, once, into a
 *            bounded buffer ([router] global_max_rows / global_max_bytes) and read by every
 *            server through the same url() mechanism.
 *
 * The per-snapshot data the planner needs (each server's served slices) is built once per
 * routing snapshot and shared by the requests that use it. */
#include "router_int.h"

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

/* Per routing snapshot: every slice's read candidates (rt_read_set), grouped by tenant
 * in the snapshot's tenant order (immutable once built). The per-query choice among them is
 * made by pick_build. */
typedef struct rd_cslice {
    uint32_t split;
    uint32_t n_cand;
    const uint32_t *cand; /* into rd_cache.cand_store */
} rd_cslice;

typedef struct rd_cache {
    atomic_int refs;
    rt_snapshot *snap;        /* a reference; slice tenant names point into it */
    size_t n_servers;         /* == router shards */
    size_t *tenant_first;     /* per snapshot tenant: its first slice in cslices; [n_tenants] */
    rd_cslice *cslices;
    size_t n_cslices;
    uint32_t *cand_store;
    char **unrouted;          /* tenants with a slice no known shard serves */
    size_t n_unrouted;
    char **held;              /* tenants with a slice a move is publishing (rt_read_set) */
    const char **held_move;   /* the move of each */
    size_t n_held;
    ferry_sql_tenant_splits *tenant_splits; /* per snapshot tenant, sorted (names borrowed) */
} rd_cache;

/* One published partial result: the bytes of one or more servers' Native answers. A live one
 * (pipelined merges, live_*) is read while its queries still run: segs[0..n_segs) are complete
 * answers, more are appended until it is done (or failed: its readers get a broken transfer). */
typedef struct rt_partial {
    char token[40];
    ferry_buf *segs;
    size_t n_segs;
    atomic_int refs;
    struct rt_partial *next;
    bool live, done, failed;
    size_t cap;
    pthread_mutex_t mu; /* live only: segs, n_segs, done, failed */
    pthread_cond_t cond;
} rt_partial;

struct rt_reads {
    bool allow_fanout;
    uint64_t global_max_rows, global_max_bytes, max_partial_bytes;
    char advertise[FERRY_URL_MAX]; /* "" until the port is known (then derived) */
    char listen_host[64];
    ferry_sql_table *tables;
    size_t n_tables;
    pthread_mutex_t mu; /* partials, cache, counters */
    rt_partial *partials;
    rd_cache *cache;
    uint64_t single, merged;
    ferry_histogram plan_seconds[2]; /* single, merged: from the plan's start to its answer's end */
    /* replica choice per slice (docs/replicas.md): selectors per candidate list, error counts
     * kept across queries and routing versions */
    pthread_mutex_t sel_mu; /* rsets, rng, the per-shard counters */
    ferry_rsets *rsets;
    ferry_rsel_rng rng;
    uint64_t *shard_queries, *shard_errors; /* per router shard: read queries sent, failed */
    uint64_t failovers;
    /* pipelined merges: the partials' column structures by statement (merge_struct_key) */
    rt_qcache *structs;
    uint64_t pipelined;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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
        snprintf(rd->advertise, sizeof rd->advertise, "%.*s", (int)(adv[l - 1] == '/' ? l - 1 : l),
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

static void cache_put(rd_cache *c)
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
    cache_put(rd->cache);
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
                          "\"failovers\":%llu,\"shards\":{",
                     (unsigned long long)single, (unsigned long long)merged,
                     (unsigned long long)pipelined, hits, lookups,
                     (unsigned long long)rd->failovers);
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

#define RD_MAX_CAND 64

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
     * ONE: a slice every candidate holds whole; the query picks one of them (pick_build) and
     * fails over to the next. UNION: every member holds a disjoint part, so each member is a
     * slice entry of its own with that one candidate (each server's query is restricted to the
     * slices listed for it; a member that fails has no replacement). HOLD: reads of the tenant
     * wait for a newer snapshot (plan_analyzed). Count first, then fill. */
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
                    (rd_cslice){.split = k, .n_cand = n, .cand = c->cand_store + used};
                used += n;
            } else if (rs.mode == RT_READ_UNION) {
                for (uint32_t j = 0; j < rs.n; j++) {
                    c->cand_store[used] = rs.shards[j];
                    c->cslices[c->n_cslices++] =
                        (rd_cslice){.split = k, .n_cand = 1, .cand = c->cand_store + used};
                    used++;
                }
            }
        }
    }
    c->tenant_first[s->n_tenants] = c->n_cslices;
    return c;
oom:
    cache_put(c);
    return NULL;
}

/* The cache for the current snapshot, with a reference (cache_put), and a read registered in
 * flight under its version (taken with the snapshot, atomically: rt_read_begin); the caller
 * ends it with rt_inflight_done(r, cache->snap->version). NULL: out of memory (nothing in
 * flight). */
static rd_cache *cache_get(ferry_router *r, rt_reads *rd)
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
    cache_put(old);
    return c;
}

/* ---- published partial results -------------------------------------------------------------- */

/* Publishes segs (taken over) and returns it with a reference held by the caller (who
 * unpublishes it with partial_unpublish). */
static rt_partial *partial_publish(rt_reads *rd, ferry_buf *segs, size_t n_segs)
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

static void live_end(rt_partial *p, bool failed);

static void partial_unpublish(rt_reads *rd, rt_partial *p)
{
    if (!p)
        return;
    if (p->live)
        live_end(p, true); /* no-op when it ended; else its readers must not wait any longer */
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

typedef struct partial_reader {
    rt_partial *p;
    size_t seg, off;
} partial_reader;

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

/* ---- executing on a shard ------------------------------------------------------------------- */

/* Runs q on a replica of the shard (in the selector's order, the next one only when a replica
 * could not be reached and no byte was delivered). A shard that cannot be reached fails with a
 * message naming it and its URL (credentials redacted). */
static int shard_exec(ferry_router *r, size_t shard, const ferry_ch_query *q, ferry_ch_status *st,
                      ferry_err *err)
{
    rt_shard *s = r->shards[shard];
    size_t order[64];
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    int rc = ferry_rsel_select(s->sel, now_ms(), &s->rng, order, err);
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return rc;
    size_t rep = 0;
    for (size_t a = 0; a < s->n_replicas && a < 64; a++) {
        rep = order[a];
        ferry_ch_client *c = NULL;
        ferry_err_clear(err);
        rc = rt_client_take(r, s, rep, &c, err);
        if (rc)
            break;
        pthread_mutex_lock(&s->mu);
        ferry_rsel_begin(s->sel, rep, NULL);
        pthread_mutex_unlock(&s->mu);
        rc = ferry_ch_exec(c, q, st, err);
        pthread_mutex_lock(&s->mu);
        ferry_rsel_end(s->sel, rep, NULL);
        if (rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT)
            ferry_rsel_report_error(s->sel, rep, NULL);
        else if (!rc)
            ferry_rsel_report_success(s->sel, rep, NULL);
        pthread_mutex_unlock(&s->mu);
        if (!rc || rc == FERRY_EREMOTE) {
            rt_client_give(s, rep, c); /* an exception leaves the connection usable */
            break;
        }
        ferry_ch_client_free(c);
        if ((rc != FERRY_ECONNECT && rc != FERRY_ETIMEOUT) || st->bytes_received)
            break;
    }
    if (rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT) {
        char red[FERRY_URL_MAX], msg[FERRY_ERR_MSG_MAX];
        ferry_redact_url(s->urls[rep], red, sizeof red);
        snprintf(msg, sizeof msg, "%s", err->msg);
        ferry_err_set(err, rc, "shard %s (%s) %s: %s", s->name, red,
                      rc == FERRY_ETIMEOUT ? "timed out" : "cannot be reached", msg);
    }
    return rc;
}

/* ---- requests ------------------------------------------------------------------------------- */

/* The client's side of a request: its settings and query parameters, database, format. */
typedef struct rd_opts {
    ferry_ch_setting *all;    /* owned names/values: settings and param_* */
    size_t n_all;
    ferry_ch_setting *server; /* the same without initiator-only settings (borrowed strings) */
    size_t n_server;
    char *database;
    char *default_format;
    char *query_id;
} rd_opts;

static void opts_free(rd_opts *o)
{
    for (size_t i = 0; i < o->n_all; i++) {
        free((char *)o->all[i].name);
        free((char *)o->all[i].value);
    }
    free(o->all);
    free(o->server);
    free(o->database);
    free(o->default_format);
    free(o->query_id);
    memset(o, 0, sizeof *o);
}

static int collect_arg(void *cls, const char *name, const char *value)
{
    rd_opts *o = cls;
    char **slot = !strcmp(name, "database")         ? &o->database
                  : !strcmp(name, "default_format") ? &o->default_format
                  : !strcmp(name, "query_id")       ? &o->query_id
                                                    : NULL;
    if (slot) {
        free(*slot);
        *slot = strdup(value ? value : "");
        return *slot ? 0 : FERRY_ENOMEM;
    }
    enum ferry_ch_param_kind k = ferry_ch_param_kind(name);
    if (k == FERRY_CH_PARAM_PROTOCOL || !ferry_ch_name_ok(name))
        return 0;
    void *p = realloc(o->all, (o->n_all + 1) * sizeof *o->all);
    if (!p)
        return FERRY_ENOMEM;
    o->all = p;
    o->all[o->n_all].name = strdup(name);
    o->all[o->n_all].value = strdup(value ? value : "");
    if (!o->all[o->n_all].name || !o->all[o->n_all].value)
        return FERRY_ENOMEM;
    o->n_all++;
    return 0;
}

static int opts_collect(ferry_http_req *req, rd_opts *o)
{
    int rc = ferry_http_args_foreach(req, collect_arg, o);
    if (rc)
        return FERRY_ENOMEM;
    if (!o->database) {
        const char *h = ferry_http_header(req, "X-ClickHouse-Database");
        if (h && *h && !(o->database = strdup(h)))
            return FERRY_ENOMEM;
    }
    if (!o->default_format) {
        const char *h = ferry_http_header(req, "X-ClickHouse-Format");
        if (h && *h && !(o->default_format = strdup(h)))
            return FERRY_ENOMEM;
    }
    o->server = calloc(o->n_all + 1, sizeof *o->server);
    if (!o->server)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < o->n_all; i++)
        if (!ferry_sql_setting_initiator_only(o->all[i].name))
            o->server[o->n_server++] = o->all[i];
    return FERRY_OK;
}

/* Why a request failed, as it goes back to the client. */
typedef struct rd_fail {
    int rc;
    bool remote;       /* a server's exception: pass message and status through */
    long http_status;
    int ch_code;
    char name[64];     /* ClickHouse error name for our own errors */
    bool held;         /* the query reads a slice being published: retry with a newer table */
    ferry_err err;
    ferry_ch_status st;
} rd_fail;

static int fail_set(rd_fail *f, int rc, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_set(rd_fail *f, int rc, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[FERRY_ERR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f->rc = rc;
    f->remote = false;
    snprintf(f->name, sizeof f->name, "%s", name);
    ferry_err_set(&f->err, rc, "%s", msg);
    return rc;
}

/* From a shard_exec failure. */
static int fail_from_exec(rd_fail *f, int rc, const ferry_ch_status *st, const ferry_err *err)
{
    f->rc = rc;
    f->err = *err;
    if (rc == FERRY_EREMOTE && st->message[0]) {
        f->remote = true;
        f->st = *st;
        f->http_status = st->http_status;
        f->ch_code = st->ch_code;
        return rc;
    }
    f->remote = false;
    snprintf(f->name, sizeof f->name, "%s",
             rc == FERRY_ETIMEOUT    ? "TIMEOUT_EXCEEDED"
             : rc == FERRY_ECONNECT  ? "ALL_CONNECTION_TRIES_FAILED"
             : rc == FERRY_ENOMEM    ? "CANNOT_ALLOCATE_MEMORY"
             : rc == FERRY_EAUTH     ? "AUTHENTICATION_FAILED"
                                     : "NETWORK_ERROR");
    return rc;
}

static void respond_fail(ferry_http_req *req, const rd_fail *f)
{
    if (f->remote) {
        char name[64] = "", c[16];
        int code = ferry_ch_error_parse(f->st.message, name, sizeof name);
        if (!code)
            code = f->ch_code;
        long status = f->http_status && f->http_status != 200 ? f->http_status
                      : name[0]                                 ? ferry_ch_error_http_status(name)
                                                                : 500;
        snprintf(c, sizeof c, "%d", code);
        ferry_http_add_header(req, "X-ClickHouse-Exception-Code", c);
        size_t l = strlen(f->st.message);
        char *body = malloc(l + 2);
        if (body) {
            memcpy(body, f->st.message, l);
            body[l] = '\n';
            ferry_http_respond(req, (unsigned)status, "text/plain; charset=UTF-8", body,
                               l && f->st.message[l - 1] == '\n' ? l : l + 1);
            free(body);
            return;
        }
    }
    const char *name = f->name[0] ? f->name : "NETWORK_ERROR";
    int code = rt_error_code(name);
    char body[FERRY_ERR_MSG_MAX + 256], c[16];
    snprintf(body, sizeof body, "Code: %d. DB::Exception: ferry router: %s. (%s) (version ferry router)\n",
             code, f->err.msg, name);
    snprintf(c, sizeof c, "%d", code);
    ferry_http_add_header(req, "X-ClickHouse-Exception-Code", c);
    ferry_http_respond(req, ferry_ch_error_http_status(name), "text/plain; charset=UTF-8", body,
                       strlen(body));
}

/* ---- planning and running ------------------------------------------------------------------- */

typedef struct rd_ctx {
    ferry_router *r;
    rt_reads *rd;
    rd_cache *cache;
    const rd_opts *o;
    rt_partial **pubs; /* published for this request; unpublished when it ends */
    size_t n_pubs;
    char plan_kind[16];
    char shards[512];
    int depth;
    /* the query being run: its analysis, the replica picked per slice (pick_build; failover
     * moves slices on), whether the plan was made with materialized GLOBAL subqueries, and
     * their replacements (_data_ name -> expression) for queries planned again on failover */
    const ferry_sql_analysis *a;
    ferry_rpick *pick;
    ferry_sql_slice *pick_slices; /* per pick slice: tenant (into the snapshot), split */
    bool planned_mat;
    char **repl; /* pairs: name, expression (owned) */
    size_t n_repl;
    /* a user bound to tenants (auth.c): every managed reference restricted to its tenants'
     * slices, in every plan and GLOBAL subquery; NULL for admins */
    const ferry_sql_scope *scope;
    /* the user's max_execution_time (limits.c): every server query carries the deadline's tag
     * in its query id and text, so it can be cancelled on every shard; NULL: no limit */
    rt_deadline *deadline;
} rd_ctx;

static void ctx_pick_free(rd_ctx *cx)
{
    ferry_rpick_free(cx->pick);
    free(cx->pick_slices);
    cx->pick = NULL;
    cx->pick_slices = NULL;
    for (size_t i = 0; i < 2 * cx->n_repl; i++)
        free(cx->repl[i]);
    free(cx->repl);
    cx->repl = NULL;
    cx->n_repl = 0;
}

/* Picks one replica per slice the analysis reads (every slice when a managed reference has no
 * tenant filter), in [router] load_balancing order with the router's error counts. */
static int pick_build(rd_ctx *cx, const ferry_sql_analysis *a)
{
    rd_cache *c = cx->cache;
    const rt_snapshot *snap = c->snap;
    ctx_pick_free(cx);
    cx->a = a;
    bool all = false;
    bool *want = calloc(snap->n_tenants + 1, sizeof *want);
    if (!want)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < a->n_refs && !all; i++) {
        const ferry_sql_ref *ref = &a->refs[i];
        if (ref->table < 0)
            continue;
        if (!ref->has_filter) {
            all = true;
            break;
        }
        for (size_t k = 0; k < ref->n_tenants; k++) {
            const rt_tenant *t = rt_find_tenant(snap, ref->tenants[k], strlen(ref->tenants[k]));
            if (t)
                want[t - snap->tenants] = true;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < snap->n_tenants; i++)
        if (all || want[i])
            n += c->tenant_first[i + 1] - c->tenant_first[i];
    int rc = ferry_rpick_new(c->n_servers, &cx->pick);
    cx->pick_slices = calloc(n + 1, sizeof *cx->pick_slices);
    if (rc || !cx->pick_slices) {
        free(want);
        return FERRY_ENOMEM;
    }
    uint32_t order[RD_MAX_CAND];
    uint64_t now = now_ms();
    ferry_err err = {0};
    pthread_mutex_lock(&cx->rd->sel_mu);
    for (size_t i = 0; i < snap->n_tenants && !rc; i++) {
        if (!all && !want[i])
            continue;
        for (size_t k = c->tenant_first[i]; k < c->tenant_first[i + 1] && !rc; k++) {
            const rd_cslice *cs = &c->cslices[k];
            rc = ferry_rsets_order(cx->rd->rsets, cs->cand, cs->n_cand, now, &cx->rd->rng,
                                   order, &err);
            size_t idx = 0;
            if (!rc)
                rc = ferry_rpick_add(cx->pick, order, cs->n_cand, &idx);
            if (!rc)
                cx->pick_slices[idx] = (ferry_sql_slice){snap->tenants[i].name, cs->split};
        }
    }
    pthread_mutex_unlock(&cx->rd->sel_mu);
    free(want);
    return rc;
}

/* Per-server targets for the planner, built from the pick. Normal: n_servers targets, each
 * serving the slices currently picked on it. Retry: 2 x n_servers targets: the first half a
 * filler serving every slice on every candidate (so the planner sees the same multi-server
 * query and makes the same plan kind; its queries are not run), then target n_servers + s
 * serving exactly the unanswered slices now on server s. */
typedef struct rd_targets {
    size_t n;
    ferry_sql_slice *store;
    ferry_sql_served *served;
    ferry_sql_target *t;
} rd_targets;

static void targets_free(rd_targets *t)
{
    free(t->store);
    free(t->served);
    free(t->t);
    memset(t, 0, sizeof *t);
}

static int targets_build(rd_ctx *cx, bool mat, bool retry, rd_targets *out)
{
    size_t ns = cx->cache->n_servers, nt = cx->rd->n_tables ? cx->rd->n_tables : 1;
    size_t n = retry ? 2 * ns : ns, np = ferry_rpick_count(cx->pick);
    memset(out, 0, sizeof *out);
    size_t *cnt = calloc(n + 1, sizeof *cnt), *at = calloc(n + 1, sizeof *at);
    out->n = n;
    out->served = calloc(n * nt + 1, sizeof *out->served);
    out->t = calloc(n + 1, sizeof *out->t);
    int rc = FERRY_OK;
    if (!cnt || !at || !out->served || !out->t) {
        rc = FERRY_ENOMEM;
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < np; i++) {
            size_t no;
            const uint32_t *ord = ferry_rpick_order(cx->pick, i, &no);
            uint32_t cur = ferry_rpick_server(cx->pick, i);
            size_t tg[RD_MAX_CAND + 1], ntg = 0;
            if (!retry) {
                if (cur != FERRY_RPICK_NONE)
                    tg[ntg++] = cur;
            } else {
                for (size_t k = 0; k < no && ntg < RD_MAX_CAND; k++)
                    tg[ntg++] = ord[k];
                if (cur != FERRY_RPICK_NONE && !ferry_rpick_is_answered(cx->pick, i))
                    tg[ntg++] = ns + cur;
            }
            for (size_t k = 0; k < ntg; k++) {
                if (pass == 0)
                    cnt[tg[k]]++;
                else
                    out->store[at[tg[k]]++] = cx->pick_slices[i];
            }
        }
        if (pass == 0) {
            size_t total = 0;
            for (size_t k = 0; k < n; k++) {
                at[k] = total;
                total += cnt[k];
            }
            out->store = calloc(total + 1, sizeof *out->store);
            if (!out->store) {
                rc = FERRY_ENOMEM;
                goto out;
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        const ferry_sql_slice *first = out->store + (at[k] - cnt[k]);
        for (size_t t = 0; t < nt; t++)
            out->served[k * nt + t] = (ferry_sql_served){first, cnt[k]};
        out->t[k] = (ferry_sql_target){&out->served[k * nt], NULL, mat, cx->cache->tenant_splits,
                                       cx->cache->snap->n_tenants, cx->scope};
    }
out:
    free(cnt);
    free(at);
    if (rc)
        targets_free(out);
    return rc;
}

/* Runs q on a router shard, bracketed for the replica selectors (in flight, errors). */
static bool conn_error(int rc)
{
    return rc == FERRY_ECONNECT || rc == FERRY_ETIMEOUT;
}

/* shard_exec for the request: with a deadline, the query gets an id and a leading comment
 * carrying the deadline's tag (limits.c cancels by either: ClickHouse keeps the id, a server
 * that makes its own ids, like the lab's node, keeps the text). */
static int shard_exec_cx(rd_ctx *cx, size_t server, const ferry_ch_query *q,
                         ferry_ch_status *st, ferry_err *err)
{
    if (!cx->deadline)
        return shard_exec(cx->r, server, q, st, err);
    if (rt_deadline_expired(cx->deadline)) {
        memset(st, 0, sizeof *st);
        return ferry_err_set(err, FERRY_ETIMEOUT, "the read ran past its deadline");
    }
    ferry_ch_query t = *q;
    char id[64];
    rt_deadline_query_id(cx->deadline, id, sizeof id);
    ferry_buf text = FERRY_BUF_INIT;
    ferry_buf_printf(&text, "/* %s */ %s", rt_deadline_tag(cx->deadline), q->sql);
    if (!text.data) {
        memset(st, 0, sizeof *st);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    t.sql = text.data;
    t.query_id = id;
    int rc = shard_exec(cx->r, server, &t, st, err);
    ferry_buf_free(&text);
    return rc;
}

static int server_exec(rd_ctx *cx, size_t server, const ferry_ch_query *q, ferry_ch_status *st,
                       ferry_err *err)
{
    rt_reads *rd = cx->rd;
    pthread_mutex_lock(&rd->sel_mu);
    if (rd->rsets)
        ferry_rsets_begin(rd->rsets, (uint32_t)server);
    rd->shard_queries[server]++;
    pthread_mutex_unlock(&rd->sel_mu);
    int rc = shard_exec_cx(cx, server, q, st, err);
    pthread_mutex_lock(&rd->sel_mu);
    if (rd->rsets) {
        ferry_rsets_end(rd->rsets, (uint32_t)server);
        if (conn_error(rc))
            ferry_rsets_error(rd->rsets, (uint32_t)server);
        else if (!rc)
            ferry_rsets_success(rd->rsets, (uint32_t)server);
    }
    if (conn_error(rc))
        rd->shard_errors[server]++;
    pthread_mutex_unlock(&rd->sel_mu);
    return rc;
}

/* Server `server` could not be reached in this query: its unanswered slices move to their next
 * replicas. Logs the failover; when a slice has no replica left, fails with the shards tried. */
static int fail_over(rd_ctx *cx, size_t server, const ferry_err *why, rd_fail *f)
{
    size_t lost = 0, moved = 0, np = ferry_rpick_count(cx->pick);
    for (size_t i = 0; i < np; i++)
        moved += !ferry_rpick_is_answered(cx->pick, i) &&
                 ferry_rpick_server(cx->pick, i) == (uint32_t)server;
    int rc = ferry_rpick_fail(cx->pick, (uint32_t)server, &lost);
    pthread_mutex_lock(&cx->rd->sel_mu);
    cx->rd->failovers++;
    pthread_mutex_unlock(&cx->rd->sel_mu);
    if (rc == FERRY_ENOTFOUND) {
        uint32_t tried[RD_MAX_CAND];
        size_t nt = ferry_rpick_tried(cx->pick, lost, tried, RD_MAX_CAND);
        char names[512] = "";
        size_t used = 0;
        for (size_t k = 0; k < nt && k < RD_MAX_CAND && used + 2 < sizeof names; k++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", k ? ", " : "",
                                     cx->r->shards[tried[k]]->name);
        const ferry_sql_slice *sl = &cx->pick_slices[lost];
        FLOG_WARN("msg=\"router: read failed, no replica left\" tenant=%s split=%u tried=\"%s\"",
                  sl->tenant, sl->split, names);
        fail_set(f, why->code ? why->code : FERRY_ECONNECT, "ALL_CONNECTION_TRIES_FAILED",
                 "no replica of slice %s/%u could be reached (tried %s): %s", sl->tenant,
                 sl->split, names, why->msg);
        return f->rc;
    }
    FLOG_WARN("msg=\"router: read failover\" shard=%s slices=%zu err=\"%s\"",
              cx->r->shards[server]->name, moved, why->msg);
    return FERRY_OK;
}

/* Replaces every occurrence of needle in *s (owned) by rep. */
static int replace_all(char **s, const char *needle, const char *rep)
{
    size_t nl = strlen(needle);
    if (!strstr(*s, needle))
        return FERRY_OK;
    ferry_buf b = {0};
    const char *p = *s, *hit;
    while ((hit = strstr(p, needle))) {
        ferry_buf_append(&b, p, (size_t)(hit - p));
        ferry_buf_puts(&b, rep);
        p = hit + nl;
    }
    ferry_buf_puts(&b, p);
    char *n = ferry_buf_detach(&b);
    if (!n)
        return FERRY_ENOMEM;
    free(*s);
    *s = n;
    return FERRY_OK;
}

static void advertise(rd_ctx *cx, char *out, size_t outsz)
{
    if (cx->rd->advertise[0])
        snprintf(out, outsz, "%s", cx->rd->advertise);
    else
        snprintf(out, outsz, "http://%s:%u", cx->rd->listen_host,
                 (unsigned)ferry_router_port(cx->r));
}

/* The table expression that reads a published partial. */
static int partial_expr(rd_ctx *cx, rt_partial *p, ferry_buf *out)
{
    char base[FERRY_URL_MAX], url[FERRY_URL_MAX + 160], sig[65];
    advertise(cx, base, sizeof base);
    /* the signature lets the servers read it without credentials (auth.c) */
    rt_partial_sign(cx->r, p->token, sig);
    snprintf(url, sizeof url, "%s/ferry/partial/%s?sig=%s", base, p->token, sig);
    ferry_buf_puts(out, "url(");
    ferry_sql_quote(url, out);
    return ferry_buf_puts(out, ", 'Native')");
}

static int pub_keep(rd_ctx *cx, rt_partial *p)
{
    void *n = realloc(cx->pubs, (cx->n_pubs + 1) * sizeof *cx->pubs);
    if (!n) {
        partial_unpublish(cx->rd, p);
        return FERRY_ENOMEM;
    }
    cx->pubs = n;
    cx->pubs[cx->n_pubs++] = p;
    return FERRY_OK;
}

/* A sink collecting into a bounded buffer. */
typedef struct buf_sink {
    ferry_buf *b;
    uint64_t max;
    atomic_uint_fast64_t *shared_total; /* across the partials of one plan, or NULL */
    bool over;
} buf_sink;

static int buf_sink_write(const void *data, size_t len, void *arg)
{
    buf_sink *s = arg;
    if (s->shared_total) {
        uint64_t t = atomic_fetch_add(s->shared_total, len) + len;
        if (t > s->max) {
            s->over = true;
            return FERRY_EINVAL;
        }
    } else if (s->b->len + len > s->max) {
        s->over = true;
        return FERRY_EINVAL;
    }
    return ferry_buf_append(s->b, data, len) ? FERRY_ENOMEM : FERRY_OK;
}

/* " SETTINGS a = v, ..." for the statement's settings (all, or only those servers may get). */
static void settings_tail(const ferry_read_plan *p, bool server_only, ferry_buf *out)
{
    bool first = true;
    for (size_t i = 0; i < p->n_settings; i++) {
        if (server_only && ferry_sql_setting_initiator_only(p->settings[i].name))
            continue;
        ferry_buf_printf(out, "%s%s = %s", first ? " SETTINGS " : ", ", p->settings[i].name,
                         p->settings[i].value);
        first = false;
    }
}

typedef struct partial_job {
    rd_ctx *cx;
    size_t server;
    int ref;           /* GATHER: the managed reference; else -1 */
    const char *plain; /* the server query as planned (borrowed from a plan) */
    char *sql;         /* with the statement's server SETTINGS */
    ferry_buf out;
    buf_sink sink;
    int rc;
    ferry_ch_status st;
    ferry_err err;
    bool dropped;      /* its server failed in its round: output discarded, slices moved on */
    bool grouped;
    /* pipelined merges (pipe_job_main): the live partial its answer joins, its round */
    struct rt_partial *live;
    struct pipe_round *pipe;
    bool ended;
} partial_job;

static void *partial_main(void *arg)
{
    partial_job *j = arg;
    const rd_opts *o = j->cx->o;
    ferry_ch_query q = {.sql = j->sql,
                        .database = o->database,
                        .format = "Native",
                        .settings = o->server,
                        .n_settings = o->n_server,
                        .on_data = buf_sink_write,
                        .on_data_arg = &j->sink};
    j->rc = server_exec(j->cx, j->server, &q, &j->st, &j->err);
    return NULL;
}

static int run_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, const char *format,
                        const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                        void *arg, rd_fail *f);
static int run_final(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                     const char *format, const ferry_ch_setting *extra, size_t n_extra,
                     ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received);

/* Whether the analysis reads a managed table. */
static bool reads_managed(const ferry_sql_analysis *a)
{
    for (size_t i = 0; i < a->n_refs; i++)
        if (a->refs[i].table >= 0)
            return true;
    return false;
}

/* Routes sql (a GLOBAL subquery) into a bounded Native buffer. */
static int run_global(rd_ctx *cx, const char *sql, ferry_buf *out, rd_fail *f)
{
    ferry_sql_analysis a;
    ferry_err err = {0};
    int rc = ferry_sql_analyze(sql, strlen(sql), cx->rd->tables, cx->rd->n_tables, &a, &err);
    if (rc) {
        ferry_sql_analysis_free(&a);
        return fail_set(f, rc, "BAD_ARGUMENTS", "GLOBAL subquery: %s", err.msg);
    }
    char rows[32];
    snprintf(rows, sizeof rows, "%llu", (unsigned long long)cx->rd->global_max_rows);
    ferry_ch_setting lim[] = {{"max_result_rows", rows}, {"result_overflow_mode", "throw"}};
    buf_sink s = {.b = out, .max = cx->rd->global_max_bytes};
    rd_ctx sub = *cx;
    sub.depth = cx->depth + 1;
    sub.plan_kind[0] = sub.shards[0] = '\0';
    /* the subquery picks its own replicas */
    sub.a = NULL;
    sub.pick = NULL;
    sub.pick_slices = NULL;
    sub.repl = NULL;
    sub.n_repl = 0;
    if (!a.understood) {
        rc = fail_set(f, FERRY_EUNSUPPORTED, "NOT_IMPLEMENTED",
                      "cannot route the GLOBAL subquery: %s", a.why);
    } else if (sub.depth > 4) {
        rc = fail_set(f, FERRY_EUNSUPPORTED, "NOT_IMPLEMENTED", "GLOBAL subqueries nested too deep");
    } else if (!reads_managed(&a)) {
        /* Only tables every server has (e.g. a dimension table): any server computes it. */
        ferry_read_plan none = {0};
        rc = run_final(&sub, 0, sql, &none, "Native", lim, 2, buf_sink_write, &s, f, NULL);
    } else {
        rc = run_analyzed(&sub, &a, "Native", lim, 2, buf_sink_write, &s, f);
    }
    ctx_pick_free(&sub);
    cx->pubs = sub.pubs; /* what the subquery published lives as long as the request */
    cx->n_pubs = sub.n_pubs;
    ferry_sql_analysis_free(&a);
    if (s.over)
        return fail_set(f, FERRY_EINVAL, "TOO_MANY_ROWS_OR_BYTES",
                        "the result of a GLOBAL IN / GLOBAL JOIN subquery is larger than [router] "
                        "global_max_bytes (%llu bytes); raise the limit or narrow the subquery",
                        (unsigned long long)cx->rd->global_max_bytes);
    if (rc && f->remote && (f->ch_code == 396 || strstr(f->st.message, "TOO_MANY_ROWS_OR_BYTES")))
        return fail_set(f, FERRY_EINVAL, "TOO_MANY_ROWS_OR_BYTES",
                        "the result of a GLOBAL IN / GLOBAL JOIN subquery has more than [router] "
                        "global_max_rows (%llu) rows; raise the limit or narrow the subquery",
                        (unsigned long long)cx->rd->global_max_rows);
    return rc;
}

/* Remembers a GLOBAL replacement for queries planned again on failover. */
static int repl_keep(rd_ctx *cx, const char *name, const char *expr)
{
    char **n = realloc(cx->repl, 2 * (cx->n_repl + 1) * sizeof *n);
    if (!n)
        return FERRY_ENOMEM;
    cx->repl = n;
    n[2 * cx->n_repl] = strdup(name);
    n[2 * cx->n_repl + 1] = strdup(expr);
    cx->n_repl++;
    return n[2 * cx->n_repl - 2] && n[2 * cx->n_repl - 1] ? FERRY_OK : FERRY_ENOMEM;
}

/* Computes the plan's GLOBAL subqueries and replaces their _data_ names in every query. */
static int materialize_globals(rd_ctx *cx, ferry_read_plan *p, rd_fail *f)
{
    for (size_t g = 0; g < p->n_globals; g++) {
        if (p->globals[g].nested)
            continue;
        ferry_buf *seg = calloc(1, sizeof *seg);
        if (!seg)
            return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        int rc = run_global(cx, p->global_sql[g], seg, f);
        if (rc) {
            ferry_buf_free(seg);
            free(seg);
            return rc;
        }
        ferry_buf expr = {0};
        if (seg->len == 0) {
            /* No rows, so no Native header to read the structure from: the subquery itself,
             * run for its shape only. */
            ferry_buf_printf(&expr, "(SELECT * FROM (%s) LIMIT 0)", p->global_sql[g]);
            ferry_buf_free(seg);
            free(seg);
        } else {
            rt_partial *pub = partial_publish(cx->rd, seg, 1);
            if (!pub || pub_keep(cx, pub)) {
                if (!pub) {
                    ferry_buf_free(seg);
                    free(seg);
                }
                return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            }
            ferry_buf_puts(&expr, "(SELECT * FROM ");
            partial_expr(cx, pub, &expr);
            ferry_buf_puts(&expr, ")");
        }
        int rc2 = expr.data ? repl_keep(cx, p->globals[g].name, ferry_buf_cstr(&expr))
                            : FERRY_ENOMEM;
        for (size_t i = 0; i < p->n_queries && !rc2; i++)
            rc2 = replace_all(&p->queries[i].sql, p->globals[g].name, ferry_buf_cstr(&expr));
        if (!rc2 && p->initiator_sql)
            rc2 = replace_all(&p->initiator_sql, p->globals[g].name, ferry_buf_cstr(&expr));
        ferry_buf_free(&expr);
        if (rc2)
            return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    }
    return FERRY_OK;
}

/* The final query of a plan on server `server`: text + SETTINGS + FORMAT, streamed to sink.
 * *received (may be NULL) gets the answer bytes the server delivered to sink. read_timeout_ms:
 * the longest wait for the next byte (0: [router] shard_timeout). */
static int run_final_ex(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                        const char *format, const ferry_ch_setting *extra, size_t n_extra,
                        ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received,
                        long read_timeout_ms)
{
    const rd_opts *o = cx->o;
    ferry_buf text = {0};
    ferry_buf_puts(&text, sql);
    settings_tail(p, false, &text);
    if (p->format)
        ferry_buf_printf(&text, " FORMAT %s", p->format);
    ferry_ch_setting *set = calloc(o->n_all + n_extra + 1, sizeof *set);
    if (received)
        *received = 0;
    if (!text.data || !set) {
        ferry_buf_free(&text);
        free(set);
        return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < o->n_all; i++)
        set[n++] = o->all[i];
    for (size_t i = 0; i < n_extra; i++)
        set[n++] = extra[i];
    ferry_ch_query q = {.sql = ferry_buf_cstr(&text),
                        .database = o->database,
                        .query_id = cx->depth == 0 ? o->query_id : NULL,
                        .format = p->format ? p->format : format,
                        .settings = set,
                        .n_settings = n,
                        .on_data = sink,
                        .on_data_arg = arg,
                        .read_timeout_ms = read_timeout_ms};
    ferry_ch_status st;
    ferry_err err = {0};
    int rc = server_exec(cx, server, &q, &st, &err);
    if (received)
        *received = st.bytes_received;
    if (rc)
        fail_from_exec(f, rc, &st, &err);
    ferry_buf_free(&text);
    free(set);
    return rc;
}

static int run_final(rd_ctx *cx, size_t server, const char *sql, const ferry_read_plan *p,
                     const char *format, const ferry_ch_setting *extra, size_t n_extra,
                     ferry_ch_write_fn sink, void *arg, rd_fail *f, uint64_t *received)
{
    return run_final_ex(cx, server, sql, p, format, extra, n_extra, sink, arg, f, received, 0);
}

/* Adds a partial job (jobs grow by pointer: a job's sink points into the job). */
static int job_add(rd_ctx *cx, const ferry_read_plan *p, partial_job ***jobs, size_t *n,
                   size_t *cap, size_t server, int ref, const char *plain,
                   atomic_uint_fast64_t *total)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        partial_job **nj = realloc(*jobs, c * sizeof *nj);
        if (!nj)
            return FERRY_ENOMEM;
        *jobs = nj;
        *cap = c;
    }
    partial_job *j = calloc(1, sizeof *j);
    if (!j)
        return FERRY_ENOMEM;
    ferry_buf b = {0};
    ferry_buf_puts(&b, plain);
    settings_tail(p, true, &b);
    j->cx = cx;
    j->server = server;
    j->ref = ref;
    j->plain = plain;
    j->sql = ferry_buf_detach(&b);
    j->sink = (buf_sink){.b = &j->out, .max = cx->rd->max_partial_bytes, .shared_total = total};
    (*jobs)[(*n)++] = j;
    return j->sql ? FERRY_OK : FERRY_ENOMEM;
}

/* Runs jobs[from..n) in parallel (a thread each beyond the first) with fn (partial_main). */
static void run_jobs(partial_job **jobs, size_t from, size_t n, void *(*fn)(void *))
{
    size_t m = n - from;
    pthread_t *th = calloc(m, sizeof *th);
    bool *started = calloc(m, sizeof *started);
    for (size_t i = 1; th && started && i < m; i++)
        started[i] = pthread_create(&th[i], NULL, fn, jobs[from + i]) == 0;
    fn(jobs[from]);
    for (size_t i = 1; i < m; i++) {
        if (started && started[i])
            pthread_join(th[i], NULL);
        else
            fn(jobs[from + i]);
    }
    free(th);
    free(started);
}

/* After a round of partial jobs: servers that answered keep their slices; a server that could
 * not be reached has its output dropped and its unanswered slices moved to their next replicas;
 * the queries for exactly those slices are planned (same plan kind) into *retry and added as new
 * jobs. *again: new jobs were added. */
/* After a round of partial queries: a result over max_partial_bytes, or a server's own query
 * error (the user's: passed on as ClickHouse reported it), fails the query (non-zero, f set).
 * Connection errors are left for round_end's failover. */
static int round_check(rd_ctx *cx, partial_job **jobs, size_t from, size_t n, rd_fail *f)
{
    for (size_t i = from; i < n; i++)
        if (jobs[i]->sink.over)
            return fail_set(f, FERRY_EINVAL, "TOO_MANY_ROWS_OR_BYTES",
                            "the servers' partial results are larger than [router] "
                            "max_partial_bytes (%llu bytes); narrow the query or raise the "
                            "limit",
                            (unsigned long long)cx->rd->max_partial_bytes);
    for (size_t i = from; i < n; i++)
        if (jobs[i]->rc && !conn_error(jobs[i]->rc))
            return fail_from_exec(f, jobs[i]->rc, &jobs[i]->st, &jobs[i]->err);
    return FERRY_OK;
}

/* One more (zeroed) failover plan at the end of *retries. */
static int retries_push(ferry_read_plan **retries, size_t *n_retries, rd_fail *f)
{
    ferry_read_plan *nr = realloc(*retries, (*n_retries + 1) * sizeof *nr);
    if (!nr)
        return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    *retries = nr;
    memset(&nr[(*n_retries)++], 0, sizeof *nr);
    return FERRY_OK;
}

static int round_end(rd_ctx *cx, const ferry_read_plan *p, partial_job ***jobs, size_t from,
                     size_t *n, size_t *cap, atomic_uint_fast64_t *total, ferry_read_plan *retry,
                     bool *again, rd_fail *f)
{
    size_t ns = cx->cache->n_servers;
    bool *failed = calloc(ns + 1, sizeof *failed);
    const ferry_err **why = calloc(ns + 1, sizeof *why);
    int rc = FERRY_OK;
    *again = false;
    if (!failed || !why) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    bool any = false;
    for (size_t i = from; i < *n; i++) {
        partial_job *j = (*jobs)[i];
        if (conn_error(j->rc) && !j->sink.over) {
            failed[j->server] = any = true;
            why[j->server] = &j->err;
        }
    }
    if (!any)
        goto out;
    for (size_t i = from; i < *n; i++) {
        partial_job *j = (*jobs)[i];
        if (!failed[j->server])
            continue;
        j->dropped = true;
        atomic_fetch_sub(total, j->out.len);
        ferry_buf_free(&j->out);
    }
    for (size_t i = from; i < *n; i++)
        if (!failed[(*jobs)[i]->server])
            ferry_rpick_answered(cx->pick, (uint32_t)(*jobs)[i]->server);
    for (size_t s = 0; s < ns && !rc; s++)
        if (failed[s])
            rc = fail_over(cx, s, why[s], f);
    if (rc)
        goto out;
    rd_targets tg;
    ferry_err err = {0};
    if (targets_build(cx, cx->planned_mat, true, &tg)) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    rc = ferry_sql_plan(cx->a, cx->rd->tables, tg.t, tg.n, retry, &err);
    targets_free(&tg);
    if (rc) {
        rc = fail_set(f, rc, "NOT_IMPLEMENTED", "cannot plan the failover query: %s", err.msg);
        goto out;
    }
    if (retry->kind != p->kind) {
        rc = fail_set(f, FERRY_EINTERNAL, "NOT_IMPLEMENTED",
                      "the failover plan is a %s plan, the query's a %s plan",
                      ferry_plan_kind_name(retry->kind), ferry_plan_kind_name(p->kind));
        goto out;
    }
    for (size_t q = 0; q < retry->n_queries && !rc; q++) {
        ferry_plan_server_query *sq = &retry->queries[q];
        if (sq->server < ns)
            continue; /* the filler (see targets_build) */
        for (size_t k = 0; k < cx->n_repl && !rc; k++)
            rc = replace_all(&sq->sql, cx->repl[2 * k], cx->repl[2 * k + 1]);
        if (!rc)
            rc = job_add(cx, p, jobs, n, cap, sq->server - ns,
                         p->kind == FERRY_PLAN_GATHER ? sq->ref : -1, sq->sql, total);
        *again = true;
    }
    if (rc)
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
out:
    free(failed);
    free(why);
    return rc;
}

/* Runs the partial queries in parallel (failing over per server), publishes them and runs the
 * initiator query. */
static int run_merged(rd_ctx *cx, ferry_read_plan *p, const char *format,
                      const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                      void *arg, rd_fail *f)
{
    size_t n = 0, cap = 0, from = 0, n_retries = 0;
    size_t ns = cx->cache->n_servers;
    partial_job **jobs = NULL;
    ferry_read_plan *retries = NULL;
    atomic_uint_fast64_t total;
    atomic_init(&total, 0);
    char *init = NULL;
    int rc = FERRY_OK;
    for (size_t i = 0; i < p->n_queries && !rc; i++)
        rc = job_add(cx, p, &jobs, &n, &cap, p->queries[i].server,
                     p->kind == FERRY_PLAN_GATHER ? p->queries[i].ref : -1, p->queries[i].sql,
                     &total);
    if (rc) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    for (;;) {
        run_jobs(jobs, from, n, partial_main);
        if ((rc = round_check(cx, jobs, from, n, f)) ||
            (rc = retries_push(&retries, &n_retries, f)))
            goto out;
        bool again;
        size_t before = n;
        rc = round_end(cx, p, &jobs, from, &n, &cap, &total, &retries[n_retries - 1], &again,
                       f);
        if (rc)
            goto out;
        if (!again)
            break;
        from = before;
    }
    init = strdup(p->initiator_sql);
    if (!init) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    /* One published partial per placeholder: {{ferry.partial}}, or {{ferry.rows.N}} per
     * managed reference of a gather plan. */
    for (size_t i = 0; i < n; i++) {
        if (jobs[i]->dropped || jobs[i]->grouped)
            continue;
        int ref = jobs[i]->ref;
        size_t cnt = 0, bytes = 0;
        for (size_t k = i; k < n; k++)
            if (!jobs[k]->dropped && !jobs[k]->grouped && jobs[k]->ref == ref)
                cnt++, bytes += jobs[k]->out.len;
        ferry_buf expr = {0};
        if (bytes == 0) {
            ferry_buf_printf(&expr, "(SELECT * FROM (%s) LIMIT 0)", jobs[i]->plain);
        } else {
            ferry_buf *segs = calloc(cnt, sizeof *segs);
            if (!segs) {
                rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                goto out;
            }
            size_t m = 0;
            for (size_t k = i; k < n; k++)
                if (!jobs[k]->dropped && !jobs[k]->grouped && jobs[k]->ref == ref) {
                    segs[m++] = jobs[k]->out;
                    memset(&jobs[k]->out, 0, sizeof jobs[k]->out);
                }
            rt_partial *pub = partial_publish(cx->rd, segs, m);
            if (!pub || pub_keep(cx, pub)) {
                if (!pub) {
                    for (size_t k = 0; k < m; k++)
                        ferry_buf_free(&segs[k]);
                    free(segs);
                }
                rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                goto out;
            }
            partial_expr(cx, pub, &expr);
        }
        char ph[64];
        if (ref >= 0)
            snprintf(ph, sizeof ph, "{{ferry.rows.%d}}", ref);
        else
            snprintf(ph, sizeof ph, "%s", FERRY_PLAN_PARTIAL);
        rc = expr.data ? replace_all(&init, ph, ferry_buf_cstr(&expr)) : FERRY_ENOMEM;
        ferry_buf_free(&expr);
        if (rc) {
            rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            goto out;
        }
        for (size_t k = i; k < n; k++)
            if (!jobs[k]->dropped && jobs[k]->ref == ref)
                jobs[k]->grouped = true;
    }
    /* The initiator: the first server of the plan that answered keeps it predictable (the
     * server with the largest partial share would save little: every partial goes through the
     * router). When it cannot be reached before any byte of the answer, the next one. */
    size_t tried = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < (pass ? ns : n); k++) {
            size_t sv = pass ? k : jobs[k]->server;
            if ((!pass && jobs[k]->dropped) || ferry_rpick_server_failed(cx->pick, (uint32_t)sv))
                continue;
            uint64_t got = 0;
            tried++;
            rc = run_final(cx, sv, init, p, format, extra, n_extra, sink, arg, f, &got);
            if (!conn_error(rc) || got)
                goto out;
            FLOG_WARN("msg=\"router: read failover (initiator)\" shard=%s err=\"%s\"",
                      cx->r->shards[sv]->name, f->err.msg);
            ferry_rpick_fail(cx->pick, (uint32_t)sv, NULL);
            pthread_mutex_lock(&cx->rd->sel_mu);
            cx->rd->failovers++;
            pthread_mutex_unlock(&cx->rd->sel_mu);
        }
    }
    if (!tried)
        rc = fail_set(f, FERRY_ECONNECT, "ALL_CONNECTION_TRIES_FAILED",
                      "no server is left to merge the partial results");
out:
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i]->sql);
        ferry_buf_free(&jobs[i]->out);
        free(jobs[i]);
    }
    free(jobs);
    for (size_t i = 0; i < n_retries; i++)
        ferry_read_plan_free(&retries[i]);
    free(retries);
    free(init);
    return rc;
}

/* Plans the analysed query (cx->a) over the replicas currently picked (cx->pick); GLOBAL
 * subqueries of a plan that needs several servers are computed and published. */
static int plan_for_pick(rd_ctx *cx, ferry_read_plan *plan, rd_fail *f)
{
    rt_reads *rd = cx->rd;
    rd_targets tg;
    ferry_err err = {0};
    memset(plan, 0, sizeof *plan);
    if (targets_build(cx, false, false, &tg))
        return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    int rc = ferry_sql_plan(cx->a, rd->tables, tg.t, tg.n, plan, &err);
    targets_free(&tg);
    cx->planned_mat = false;
    if (!rc && plan->kind != FERRY_PLAN_SINGLE && plan->n_globals) {
        ferry_read_plan_free(plan);
        memset(plan, 0, sizeof *plan);
        if (targets_build(cx, true, false, &tg))
            return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        rc = ferry_sql_plan(cx->a, rd->tables, tg.t, tg.n, plan, &err);
        targets_free(&tg);
        if (rc)
            return fail_set(f, rc, "NOT_IMPLEMENTED", "cannot plan the query: %s", err.msg);
        cx->planned_mat = true;
        rc = materialize_globals(cx, plan, f);
        if (rc)
            return rc;
    } else if (rc) {
        return fail_set(f, rc, "NOT_IMPLEMENTED", "cannot plan the query: %s", err.msg);
    }
    if (plan->n_queries == 0)
        return fail_set(f, FERRY_EINTERNAL, "NOT_IMPLEMENTED", "the plan has no server query");
    return FERRY_OK;
}

/* Checks the query against the router's rules, picks a replica per slice and plans it; GLOBAL
 * subqueries of a plan that needs several servers are computed and published. *plan is the
 * caller's to free. */
static int plan_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, ferry_read_plan *plan,
                         rd_fail *f)
{
    rt_reads *rd = cx->rd;
    rd_cache *c = cx->cache;
    int rc;
    memset(plan, 0, sizeof *plan);
    for (size_t i = 0; i < a->n_refs; i++) {
        const ferry_sql_ref *ref = &a->refs[i];
        if (ref->table < 0)
            continue;
        const ferry_sql_table *t = &rd->tables[ref->table];
        if (!ref->has_filter && !rd->allow_fanout)
            return fail_set(f, FERRY_EINVAL, "BAD_ARGUMENTS",
                            "the query reads the managed table %s.%s without a tenant filter, "
                            "which would fan out to every server, and [router] allow_fanout = "
                            "false; add `%s = 'T'` or `%s IN ('T1', ...)` to its WHERE",
                            t->database ? t->database : "default", t->name, t->tenant_column,
                            t->tenant_column);
        for (size_t u = 0; u < c->n_unrouted; u++) {
            bool reads = !ref->has_filter;
            for (size_t k = 0; k < ref->n_tenants && !reads; k++)
                reads = !strcmp(ref->tenants[k], c->unrouted[u]);
            if (reads)
                return fail_set(f, FERRY_ENOTFOUND, "ALL_CONNECTION_TRIES_FAILED",
                                "tenant '%s' has a slice that no shard in the router's config "
                                "serves (routing version %llu); the answer would miss its rows",
                                c->unrouted[u], (unsigned long long)c->snap->version);
        }
        for (size_t u = 0; u < c->n_held; u++) {
            bool reads = !ref->has_filter;
            for (size_t k = 0; k < ref->n_tenants && !reads; k++)
                reads = !strcmp(ref->tenants[k], c->held[u]);
            if (reads) {
                fail_set(f, FERRY_ETIMEOUT, "TIMEOUT_EXCEEDED",
                         "tenant '%s' has a slice that move %s is publishing (routing version "
                         "%llu) and it was not done within [router] publish_wait; no server "
                         "holds all of its rows until then (resume the move if it stopped: "
                         "ferry move --resume %s)",
                         c->held[u], c->held_move[u], (unsigned long long)c->snap->version,
                         c->held_move[u]);
                f->held = true;
                return f->rc;
            }
        }
    }
    if (!c->n_servers)
        return fail_set(f, FERRY_EINVAL, "NOT_IMPLEMENTED", "the router has no shards");
    if (pick_build(cx, a))
        return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    rc = plan_for_pick(cx, plan, f);
    if (rc)
        return rc;
    if (cx->depth == 0) {
        snprintf(cx->plan_kind, sizeof cx->plan_kind, "%s", ferry_plan_kind_name(plan->kind));
        size_t used = 0;
        for (size_t i = 0; i < plan->n_queries; i++) {
            const char *name = cx->r->shards[plan->queries[i].server]->name;
            bool seen = false;
            for (size_t k = 0; k < i && !seen; k++)
                seen = plan->queries[k].server == plan->queries[i].server;
            if (!seen && used + strlen(name) + 2 < sizeof cx->shards)
                used += (size_t)snprintf(cx->shards + used, sizeof cx->shards - used, "%s%s",
                                         used ? "," : "", name);
        }
    }
    return FERRY_OK;
}

/* Runs a single-server plan; when its server cannot be reached before any byte of the answer
 * was delivered, its slices move to their next replicas and the query is planned again (it may
 * then need several servers). */
static int run_single(rd_ctx *cx, ferry_read_plan *plan, const char *format,
                      const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                      void *arg, rd_fail *f)
{
    size_t ns = cx->cache->n_servers;
    for (;;) {
        if (plan->kind != FERRY_PLAN_SINGLE)
            return run_merged(cx, plan, format, extra, n_extra, sink, arg, f);
        size_t sv = plan->queries[0].server;
        uint64_t got = 0;
        int rc = run_final(cx, sv, plan->queries[0].sql, plan, format, extra, n_extra, sink, arg,
                           f, &got);
        if (!conn_error(rc) || got || !cx->pick)
            return rc;
        ferry_err why = f->err;
        if (ferry_rpick_count(cx->pick) == 0) {
            /* the query reads no slice: any server answers it */
            ferry_rpick_fail(cx->pick, (uint32_t)sv, NULL);
            size_t next = 0;
            while (next < ns && ferry_rpick_server_failed(cx->pick, (uint32_t)next))
                next++;
            if (next == ns)
                return rc;
            FLOG_WARN("msg=\"router: read failover\" shard=%s slices=0 err=\"%s\"",
                      cx->r->shards[sv]->name, why.msg);
            plan->queries[0].server = next;
            continue;
        }
        rc = fail_over(cx, sv, &why, f);
        if (rc)
            return rc;
        ferry_read_plan_free(plan);
        rc = plan_for_pick(cx, plan, f);
        if (rc)
            return rc;
    }
}

/* ---- pipelined merges: the initiator starts with the partials -------------------------------
 *
 * run_merged runs every partial query to its end, buffers them, and only then starts the
 * initiator, whose url() first asks the router for the partials' schema and then reads them.
 * When the partials' column structure is known (learned beside an earlier run of the same
 * statement: merge_learn), run_merged_pipelined instead starts the initiator at once: it computes
 * its own server's partials itself, as subqueries, and reads the other servers' through
 * url(.., 'Native', 'structure') from a live partial that the router fills while they run. No
 * schema request, no transfer of the initiator's own partial, its scan overlaps the others'.
 *
 * Failover is kept exact because a server's answers enter the live partial only once all of
 * that server's queries of the round have ended successfully: the initiator never reads a byte
 * of an answer that could still fail. A server that cannot be reached has its unanswered
 * slices planned again on their next replicas (round_end, as in run_merged), and those answers
 * join the same live partial; the initiator waits for them. When a slice has no replica left,
 * or a server reports an error, the live partials fail: the initiator's read breaks and the
 * query fails with the partial's error (after the first byte: a broken answer, never a short
 * one). The initiator server itself failing before any byte reached the client runs the query
 * again without pipelining, with that server failed over (run_merged_again). */

/* The placeholder group of query i: the managed reference (gather) or -1 (one for all). */
static int merge_group_ref(const ferry_read_plan *p, size_t i)
{
    return p->kind == FERRY_PLAN_GATHER ? p->queries[i].ref : -1;
}

/* The distinct groups of the plan in order of appearance, and the first query of each. */
static size_t merge_groups(const ferry_read_plan *p, int *refs, size_t *first)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_queries; i++) {
        int ref = merge_group_ref(p, i);
        size_t g = 0;
        while (g < n && refs[g] != ref)
            g++;
        if (g == n) {
            refs[n] = ref;
            first[n++] = i;
        }
    }
    return n;
}

static void merge_placeholder(int ref, char *out, size_t outsz)
{
    if (ref >= 0)
        snprintf(out, outsz, "{{ferry.rows.%d}}", ref);
    else
        snprintf(out, outsz, "%s", FERRY_PLAN_PARTIAL);
}

/* The cache key of a group's partial structure: what the partial's columns depend on (the
 * statement, the database, the client's settings, the plan kind and the group), not which
 * slices or replicas a query picked. */
static int merge_struct_key(const rd_ctx *cx, const ferry_read_plan *p, int ref, ferry_buf *key)
{
    const rd_opts *o = cx->o;
    ferry_buf_printf(key, "%s\x1f%d\x1f%d\x1f", o->database ? o->database : "", (int)p->kind, ref);
    for (size_t i = 0; i < o->n_all; i++)
        ferry_buf_printf(key, "%s=%s\x1e", o->all[i].name, o->all[i].value);
    ferry_buf_putc(key, '\x1f');
    return ferry_buf_append(key, cx->a->toks.text, cx->a->toks.text_len) ? FERRY_ENOMEM
                                                                          : FERRY_OK;
}

/* Statements longer than this are not kept as structure keys (256 of them at most). */
#define MERGE_STRUCT_TEXT_MAX (64u << 10)

/* Whether the plan can run pipelined: no GLOBAL data (its result limits must not bound the
 * initiator's own partials, and its URLs change per request) and no initiator-only setting (the
 * initiator's own partials run inside the initiator query, under its settings). */
static bool merge_pipelinable(const rd_ctx *cx, const ferry_read_plan *p, size_t n_extra)
{
    if (n_extra || p->n_globals || cx->o->n_all != cx->o->n_server || !cx->pick || !cx->a ||
        cx->a->toks.text_len > MERGE_STRUCT_TEXT_MAX)
        return false;
    for (size_t i = 0; i < p->n_settings; i++)
        if (ferry_sql_setting_initiator_only(p->settings[i].name))
            return false;
    for (size_t i = 0; i < p->n_queries; i++)
        if (strstr(p->queries[i].sql, "/ferry/partial/"))
            return false;
    return true;
}

/* DESCRIBE of one group's partial query, run beside the first (not pipelined) execution. */
typedef struct describe_job {
    rd_ctx *cx;
    size_t server;
    char *sql;
    ferry_buf out;
    int rc;
} describe_job;

static int describe_collect(const void *data, size_t len, void *arg)
{
    return ferry_buf_append(arg, data, len) ? FERRY_ENOMEM : FERRY_OK;
}

static void *describe_main(void *arg)
{
    describe_job *j = arg;
    const rd_opts *o = j->cx->o;
    ferry_ch_setting *set = calloc(o->n_server + 1, sizeof *set);
    if (!set) {
        j->rc = FERRY_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < o->n_server; i++)
        set[i] = o->server[i];
    /* DESCRIBE's answer is small; buffered, which the lab's ferry-node needs for DESCRIBE */
    set[o->n_server] = (ferry_ch_setting){"wait_end_of_query", "1"};
    ferry_ch_query q = {.sql = j->sql,
                        .database = o->database,
                        .format = "TabSeparated",
                        .settings = set,
                        .n_settings = o->n_server + 1,
                        .on_data = describe_collect,
                        .on_data_arg = &j->out};
    ferry_ch_status st;
    ferry_err err = {0};
    j->rc = shard_exec_cx(j->cx, j->server, &q, &st, &err);
    free(set);
    return NULL;
}

/* "`name` Type, ..." from DESCRIBE's TabSeparated rows (name, type, ...). */
static int structure_from_describe(ferry_buf *tsv, ferry_buf *out)
{
    ferry_ch_rows rows;
    ferry_err err = {0};
    size_t len = tsv->len;
    char *text = ferry_buf_detach(tsv);
    if (!text || ferry_ch_rows_parse(text, len, &rows, &err))
        return FERRY_EINVAL;
    int rc = rows.n_rows && rows.n_cols >= 2 ? FERRY_OK : FERRY_EINVAL;
    for (size_t i = 0; i < rows.n_rows && !rc; i++) {
        if (i)
            ferry_buf_puts(out, ", ");
        ferry_sql_ident(ferry_ch_rows_get(&rows, i, 0), out);
        ferry_buf_putc(out, ' ');
        rc = ferry_buf_puts(out, ferry_ch_rows_get(&rows, i, 1)) ? FERRY_ENOMEM : FERRY_OK;
    }
    ferry_ch_rows_free(&rows);
    return rc;
}

/* run_merged, with the partials' structures learned beside it (a DESCRIBE per group on the
 * group's first server) and kept for the next run of the same statement. */
static int merge_learn(rd_ctx *cx, ferry_read_plan *p, const size_t *first, size_t n_groups,
                       ferry_buf *keys, const char *format, ferry_ch_write_fn sink, void *arg,
                       rd_fail *f)
{
    describe_job *jobs = calloc(n_groups, sizeof *jobs);
    pthread_t *th = calloc(n_groups, sizeof *th);
    bool *started = calloc(n_groups, sizeof *started);
    for (size_t g = 0; jobs && th && started && g < n_groups; g++) {
        ferry_buf b = {0};
        ferry_buf_printf(&b, "DESCRIBE TABLE (%s)", p->queries[first[g]].sql);
        jobs[g] = (describe_job){.cx = cx, .server = p->queries[first[g]].server,
                                 .sql = ferry_buf_detach(&b)};
        started[g] = jobs[g].sql && pthread_create(&th[g], NULL, describe_main, &jobs[g]) == 0;
    }
    int rc = run_merged(cx, p, format, NULL, 0, sink, arg, f);
    for (size_t g = 0; jobs && th && started && g < n_groups; g++) {
        if (!started[g])
            continue;
        pthread_join(th[g], NULL);
        ferry_buf st = {0};
        if (!rc && !jobs[g].rc && !structure_from_describe(&jobs[g].out, &st) && st.data)
            rt_qcache_put(cx->rd->structs, keys[g].data, keys[g].len, st.data);
        ferry_buf_free(&st);
    }
    for (size_t g = 0; jobs && g < n_groups; g++) {
        free(jobs[g].sql);
        ferry_buf_free(&jobs[g].out);
    }
    free(jobs);
    free(th);
    free(started);
    return rc;
}

/* A published live partial (a reference kept for the request, unpublished with it). */
static rt_partial *live_publish(rd_ctx *cx)
{
    rt_partial *p = partial_publish(cx->rd, NULL, 0);
    if (!p)
        return NULL;
    /* set before any reader: the token is random and not yet handed out */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->live = true;
    return pub_keep(cx, p) ? NULL : p;
}

/* Appends a complete answer (taken over) to a live partial. */
static int live_append(rt_partial *p, ferry_buf *b)
{
    int rc = FERRY_OK;
    pthread_mutex_lock(&p->mu);
    if (p->n_segs == p->cap) {
        size_t c = p->cap ? 2 * p->cap : 4;
        ferry_buf *n = realloc(p->segs, c * sizeof *n);
        if (n) {
            p->segs = n;
            p->cap = c;
        }
    }
    if (p->n_segs < p->cap) {
        p->segs[p->n_segs++] = *b;
        memset(b, 0, sizeof *b);
        pthread_cond_broadcast(&p->cond);
    } else {
        rc = FERRY_ENOMEM;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* No more segments: done (its readers end) or failed (their transfer breaks). Only the first
 * call counts. */
static void live_end(rt_partial *p, bool failed)
{
    pthread_mutex_lock(&p->mu);
    if (!p->done && !p->failed) {
        p->done = !failed;
        p->failed = failed;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->mu);
}

/* The round of partial jobs running now (see pipe_job_main). */
typedef struct pipe_round {
    pthread_mutex_t mu;
    partial_job **jobs;
    size_t from, n;
    bool append_failed;
} pipe_round;

/* A partial job of a pipelined merge: when it ends, and every job of its server in this round
 * has ended without an error, their answers join their live partials (all or none: a server
 * that fails is failed over whole, so none of its answers may have been read). */
static void *pipe_job_main(void *arg)
{
    partial_job *j = arg;
    partial_main(j);
    pipe_round *pr = j->pipe;
    pthread_mutex_lock(&pr->mu);
    j->ended = true;
    bool all = true, ok = true;
    for (size_t i = pr->from; i < pr->n; i++) {
        const partial_job *k = pr->jobs[i];
        if (k->server != j->server)
            continue;
        all = all && k->ended;
        ok = ok && !k->rc && !k->sink.over;
    }
    for (size_t i = pr->from; all && ok && i < pr->n; i++) {
        partial_job *k = pr->jobs[i];
        if (k->server == j->server && live_append(k->live, &k->out))
            pr->append_failed = true;
    }
    pthread_mutex_unlock(&pr->mu);
    return NULL;
}

/* Whether the statement's SETTINGS or the client's URL settings name the setting. */
static bool setting_given(const ferry_read_plan *p, const rd_opts *o, const char *name)
{
    for (size_t i = 0; i < p->n_settings; i++)
        if (!strcmp(p->settings[i].name, name))
            return true;
    for (size_t i = 0; i < o->n_all; i++)
        if (!strcmp(o->all[i].name, name))
            return true;
    return false;
}

/* The initiator of a pipelined merge, on its own thread. */
typedef struct init_job {
    rd_ctx *cx;
    size_t server;
    const char *sql;
    const ferry_read_plan *p;
    const char *format;
    ferry_ch_write_fn sink;
    void *arg;
    uint64_t delivered; /* bytes that reached sink */
    long read_timeout_ms;
    int rc;
    rd_fail f;
} init_job;

static int init_sink(const void *data, size_t len, void *arg)
{
    init_job *j = arg;
    j->delivered += len;
    return j->sink(data, len, j->arg);
}

static void *init_main(void *arg)
{
    init_job *j = arg;
    j->rc = run_final_ex(j->cx, j->server, j->sql, j->p, j->format, NULL, 0, init_sink, j, &j->f,
                         NULL, j->read_timeout_ms);
    return NULL;
}

/* The merge failed before any byte reached the client and must run again without pipelining:
 * replicas picked anew (a failed server, `failed` unless SIZE_MAX, is failed over at once), the
 * query planned again, run_merged (or one server, when the pick now allows it). */
static int run_merged_again(rd_ctx *cx, size_t failed, const ferry_err *why, const char *format,
                            ferry_ch_write_fn sink, void *arg, rd_fail *f)
{
    ferry_read_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = pick_build(cx, cx->a);
    if (rc)
        return fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
    if (failed != SIZE_MAX && (rc = fail_over(cx, failed, why, f)))
        return rc;
    rc = plan_for_pick(cx, &plan, f);
    if (!rc)
        rc = run_single(cx, &plan, format, NULL, 0, sink, arg, f);
    ferry_read_plan_free(&plan);
    return rc;
}

/* See the section comment. structs[g]: the structure of group g's partials. *fallback: the
 * initiator failed before any byte reached the client while every partial was fine (a stale
 * structure, e.g. after ALTER TABLE): the caller forgets the structures and runs it again. */
static int run_merged_pipelined(rd_ctx *cx, ferry_read_plan *p, const int *refs, size_t n_groups,
                                char **structs, const char *format, ferry_ch_write_fn sink,
                                void *arg, rd_fail *f, bool *fallback)
{
    size_t init_server = p->queries[0].server, n = 0, cap = 0, from = 0, n_retries = 0;
    partial_job **jobs = NULL;
    ferry_read_plan *retries = NULL;
    rt_partial **lives = calloc(n_groups + 1, sizeof *lives);
    atomic_uint_fast64_t total;
    atomic_init(&total, 0);
    pipe_round pr = {0};
    pthread_mutex_init(&pr.mu, NULL);
    init_job ij = {0};
    pthread_t init_th;
    bool init_started = false;
    char *init = strdup(p->initiator_sql);
    ferry_sql_setting *set = calloc(p->n_settings + 3, sizeof *set);
    int rc = FERRY_OK;
    *fallback = false;
    if (!lives || !init || !set) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    /* Per group: the initiator's own partials as subqueries, the others' through a live
     * partial read with an explicit structure. */
    for (size_t g = 0; g < n_groups && !rc; g++) {
        ferry_buf expr = {0};
        size_t parts = 0, remote = 0;
        ferry_buf_putc(&expr, '(');
        for (size_t i = 0; i < p->n_queries; i++) {
            if (merge_group_ref(p, i) != refs[g])
                continue;
            if (p->queries[i].server != init_server) {
                remote++;
                continue;
            }
            ferry_buf_printf(&expr, "%sSELECT * FROM (%s)", parts++ ? " UNION ALL " : "",
                             p->queries[i].sql);
        }
        if (remote) {
            if (!(lives[g] = live_publish(cx))) {
                ferry_buf_free(&expr);
                rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
                break;
            }
            ferry_buf_printf(&expr, "%sSELECT * FROM ", parts++ ? " UNION ALL " : "");
            partial_expr(cx, lives[g], &expr);
            expr.len -= 1; /* reopen "url(.., 'Native')" to add the structure */
            ferry_buf_puts(&expr, ", ");
            ferry_sql_quote(structs[g], &expr);
            ferry_buf_putc(&expr, ')');
        }
        ferry_buf_putc(&expr, ')');
        char ph[64];
        merge_placeholder(refs[g], ph, sizeof ph);
        if (!expr.data || replace_all(&init, ph, ferry_buf_cstr(&expr)))
            rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        ferry_buf_free(&expr);
        for (size_t i = 0; i < p->n_queries && !rc; i++) {
            if (merge_group_ref(p, i) != refs[g] || p->queries[i].server == init_server)
                continue;
            if (job_add(cx, p, &jobs, &n, &cap, p->queries[i].server, refs[g],
                        p->queries[i].sql, &total))
                rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            else
                jobs[n - 1]->live = lives[g];
        }
    }
    if (rc)
        goto out;
    /* the initiator's own slices are answered by the initiator query: a failover round must not
     * plan them again (a server failed over onto the initiator gets queries of its own) */
    ferry_rpick_answered(cx->pick, (uint32_t)init_server);
    /* The initiator's url() read waits for whole partials, which may take longer than the
     * server's receive timeout (30 s); the router ends the read itself when one fails, and a
     * router that is gone closes the connection. In the statement's SETTINGS (a URL setting
     * costs the lab's ferry-node a session of its own), unless the client chose one. */
    ferry_read_plan ip = *p;
    for (size_t i = 0; i < p->n_settings; i++)
        set[i] = p->settings[i];
    ip.settings = set;
    ip.n_settings = p->n_settings;
    if (!setting_given(p, cx->o, "http_receive_timeout"))
        set[ip.n_settings++] = (ferry_sql_setting){"http_receive_timeout", "3600"};
    /* url() with a structure first sends a HEAD request (for ranged parallel reads, which a
     * live partial cannot serve); ClickHouse 26.7 then spent ~100 ms before its GET, measured
     * against the lab's servers (10 ms without it for a one-row read) */
    if (!setting_given(p, cx->o, "http_make_head_request"))
        set[ip.n_settings++] = (ferry_sql_setting){"http_make_head_request", "0"};
    /* Its first byte comes after its own partials and every other server's, failover rounds
     * included (each bounded by shard_timeout, at most one round per server): the read timeout
     * covers them all. A hanging initiator is noticed that much later. */
    long shard_to = cx->r->shard_timeout_ms > 0 ? cx->r->shard_timeout_ms : 30000;
    ij = (init_job){.cx = cx, .server = init_server, .sql = init, .p = &ip, .format = format,
                    .sink = sink, .arg = arg,
                    .read_timeout_ms = shard_to * (long)(cx->cache->n_servers + 2)};
    init_started = pthread_create(&init_th, NULL, init_main, &ij) == 0;
    if (!init_started) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_SCHEDULE_TASK", "cannot start a thread");
        goto out;
    }
    /* The partial queries, in rounds: a server that cannot be reached is failed over and its
     * slices' queries planned again (round_end). */
    while (from < n) {
        pr.jobs = jobs;
        pr.from = from;
        pr.n = n;
        for (size_t i = from; i < n; i++)
            jobs[i]->pipe = &pr;
        run_jobs(jobs, from, n, pipe_job_main);
        if (pr.append_failed) {
            rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            goto out;
        }
        if ((rc = round_check(cx, jobs, from, n, f)) ||
            (rc = retries_push(&retries, &n_retries, f)))
            goto out;
        bool again;
        size_t before = n;
        rc = round_end(cx, p, &jobs, from, &n, &cap, &total, &retries[n_retries - 1], &again,
                       f);
        if (rc)
            goto out;
        for (size_t i = before; i < n; i++) {
            /* the failover queries' answers join their group's live partial */
            for (size_t g = 0; g < n_groups; g++)
                if (refs[g] == jobs[i]->ref)
                    jobs[i]->live = lives[g];
            if (!jobs[i]->live) {
                /* a group that had no remote partial (its slices were all on the initiator,
                 * which is never failed over here): cannot happen, but never read it short */
                rc = fail_set(f, FERRY_EINTERNAL, "NOT_IMPLEMENTED",
                              "a failover query has no partial to join");
                goto out;
            }
        }
        from = before;
    }
    for (size_t g = 0; g < n_groups; g++)
        if (lives[g])
            live_end(lives[g], false);
out:
    /* a partial that failed: the initiator must not take what it read for complete */
    for (size_t g = 0; lives && g < n_groups; g++)
        if (lives[g])
            live_end(lives[g], true); /* no-op for those that ended */
    if (init_started) {
        pthread_join(init_th, NULL);
        if (!rc && ij.rc) {
            if (ij.delivered || !(conn_error(ij.rc) || ij.f.remote)) {
                *f = ij.f; /* after the first byte: the answer breaks */
                rc = ij.rc;
            } else if (conn_error(ij.rc)) {
                FLOG_WARN("msg=\"router: read failover (pipelined initiator)\" shard=%s "
                          "err=\"%s\"",
                          cx->r->shards[init_server]->name, ij.f.err.msg);
                rc = run_merged_again(cx, init_server, &ij.f.err, format, sink, arg, f);
            } else {
                *f = ij.f;
                rc = ij.rc;
                *fallback = true;
            }
        } else if (!rc && !ij.rc) {
            pthread_mutex_lock(&cx->rd->mu);
            cx->rd->pipelined++;
            pthread_mutex_unlock(&cx->rd->mu);
        }
    }
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i]->sql);
        ferry_buf_free(&jobs[i]->out);
        free(jobs[i]);
    }
    free(jobs);
    for (size_t i = 0; i < n_retries; i++)
        ferry_read_plan_free(&retries[i]);
    free(retries);
    pthread_mutex_destroy(&pr.mu);
    free(lives);
    free(init);
    free(set);
    return rc;
}

/* A merged plan: pipelined when the partials' structures are known, else run_merged, learning
 * them for the next time. */
static int run_merged_best(rd_ctx *cx, ferry_read_plan *p, const char *format,
                           const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                           void *arg, rd_fail *f)
{
    /* extra settings (a GLOBAL subquery's result limits) must bound only the final result, not
     * the initiator's own partials: such plans run the first way */
    if (!merge_pipelinable(cx, p, n_extra))
        return run_merged(cx, p, format, extra, n_extra, sink, arg, f);
    size_t n = p->n_queries, n_groups;
    int *refs = calloc(n + 1, sizeof *refs);
    size_t *first = calloc(n + 1, sizeof *first);
    ferry_buf *keys = calloc(n + 1, sizeof *keys);
    char **structs = calloc(n + 1, sizeof *structs);
    int rc;
    if (!refs || !first || !keys || !structs) {
        rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        goto out;
    }
    n_groups = merge_groups(p, refs, first);
    bool known = true;
    for (size_t g = 0; g < n_groups; g++) {
        if (merge_struct_key(cx, p, refs[g], &keys[g])) {
            rc = fail_set(f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
            goto out;
        }
        if (known && !rt_qcache_get(cx->rd->structs, keys[g].data, keys[g].len, &structs[g]))
            known = false;
    }
    if (known) {
        bool fallback = false;
        rc = run_merged_pipelined(cx, p, refs, n_groups, structs, format, sink, arg, f,
                                  &fallback);
        if (!fallback)
            goto out;
        FLOG_INFO("msg=\"router: a pipelined merge failed before its answer began; forgetting "
                  "its partial structure and running it again\" err=\"%s\"",
                  f->remote ? f->st.message : f->err.msg);
        for (size_t g = 0; g < n_groups; g++)
            rt_qcache_drop(cx->rd->structs, keys[g].data, keys[g].len);
        memset(f, 0, sizeof *f);
        rc = run_merged_again(cx, SIZE_MAX, NULL, format, sink, arg, f);
        goto out;
    }
    rc = merge_learn(cx, p, first, n_groups, keys, format, sink, arg, f);
out:
    for (size_t g = 0; keys && structs && g < n; g++) {
        ferry_buf_free(&keys[g]);
        free(structs[g]);
    }
    free(refs);
    free(first);
    free(keys);
    free(structs);
    return rc;
}

/* Runs a plan; the final answer goes to sink. */
static int exec_plan(rd_ctx *cx, ferry_read_plan *plan, const char *format,
                     const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                     void *arg, rd_fail *f)
{
    rt_reads *rd = cx->rd;
    int rc;
    uint64_t t0 = now_ms();
    if (plan->kind == FERRY_PLAN_SINGLE)
        rc = run_single(cx, plan, format, extra, n_extra, sink, arg, f);
    else
        rc = run_merged_best(cx, plan, format, extra, n_extra, sink, arg, f);
    ferry_histogram_observe(&rd->plan_seconds[plan->kind == FERRY_PLAN_SINGLE ? 0 : 1],
                            (double)(now_ms() - t0) / 1e3);
    pthread_mutex_lock(&rd->mu);
    if (plan->kind == FERRY_PLAN_SINGLE)
        rd->single++;
    else
        rd->merged++;
    pthread_mutex_unlock(&rd->mu);
    return rc;
}

static int run_analyzed(rd_ctx *cx, const ferry_sql_analysis *a, const char *format,
                        const ferry_ch_setting *extra, size_t n_extra, ferry_ch_write_fn sink,
                        void *arg, rd_fail *f)
{
    ferry_read_plan plan;
    int rc = plan_analyzed(cx, a, &plan, f);
    if (!rc)
        rc = exec_plan(cx, &plan, format, extra, n_extra, sink, arg, f);
    ferry_read_plan_free(&plan);
    return rc;
}

/* ---- the HTTP side: one routed SELECT, streamed -------------------------------------------- */

typedef struct rd_stream {
    ferry_router *r;
    char *sql; /* the statement text the analysis points into */
    ferry_sql_analysis a;
    rd_opts o;
    ferry_sql_scope scope;    /* a bound user's (the principal's, with this request's database
                               * and query parameters) */
    ferry_sql_param *params;  /* the request's param_* (strings borrowed from o) */
    rd_ctx cx;
    ferry_read_plan plan;
    ferry_buf small; /* the fast path's answer */
    int pipe_rd, pipe_wr;
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool inflight; /* a read is registered in flight under cx.cache's version (cache_get) */
    bool started;  /* the first byte of the answer is on its way: status 200 */
    bool finished;
    rd_fail fail;
    int rc;
} rd_stream;

/* Ends the request's in-flight registration (once): its servers are no longer read. */
static void read_done(rd_stream *s)
{
    if (s->inflight)
        rt_inflight_done(s->r, s->cx.cache->snap->version);
    s->inflight = false;
}

static int pipe_sink(const void *data, size_t len, void *arg)
{
    rd_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    if (!s->started) {
        s->started = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->mu);
    const char *p = data;
    while (len) {
        ssize_t w = write(s->pipe_wr, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return FERRY_EIO; /* the client went away */
        p += w;
        len -= (size_t)w;
    }
    return FERRY_OK;
}

static void deadline_fail(rd_ctx *cx, rd_fail *f);

static void *stream_main(void *arg)
{
    rd_stream *s = arg;
    int rc = exec_plan(&s->cx, &s->plan, s->o.default_format, NULL, 0, pipe_sink, s, &s->fail);
    if (rc)
        deadline_fail(&s->cx, &s->fail);
    read_done(s);
    for (size_t i = 0; i < s->cx.n_pubs; i++)
        partial_unpublish(s->cx.rd, s->cx.pubs[i]);
    free(s->cx.pubs);
    s->cx.pubs = NULL;
    s->cx.n_pubs = 0;
    if (rc && s->started)
        FLOG_WARN("msg=\"router: a routed query failed after its answer began\" err=\"%s\"",
                  s->fail.remote ? s->fail.st.message : s->fail.err.msg);
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    s->finished = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    close(s->pipe_wr);
    s->pipe_wr = -1;
    return NULL;
}

static void stream_free(void *arg)
{
    rd_stream *s = arg;
    if (!s)
        return;
    if (s->pipe_rd >= 0)
        close(s->pipe_rd); /* a worker still writing fails and stops */
    if (s->th_started)
        pthread_join(s->th, NULL);
    if (s->pipe_wr >= 0)
        close(s->pipe_wr);
    read_done(s);
    for (size_t i = 0; i < s->cx.n_pubs; i++)
        partial_unpublish(s->cx.rd, s->cx.pubs[i]);
    free(s->cx.pubs);
    ctx_pick_free(&s->cx);
    cache_put(s->cx.cache);
    ferry_read_plan_free(&s->plan);
    ferry_buf_free(&s->small);
    ferry_sql_analysis_free(&s->a);
    rt_deadline_end(s->r->limits, s->cx.deadline);
    free(s->params);
    opts_free(&s->o);
    free(s->sql);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}

static ssize_t stream_read(void *cls, char *buf, size_t max)
{
    rd_stream *s = cls;
    for (;;) {
        ssize_t n = read(s->pipe_rd, buf, max);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 0)
            return n < 0 ? -1 : n;
        pthread_mutex_lock(&s->mu);
        while (!s->finished)
            pthread_cond_wait(&s->cond, &s->mu);
        int rc = s->rc;
        pthread_mutex_unlock(&s->mu);
        return rc ? -1 : 0; /* a broken answer must not look complete */
    }
}

static const char *content_type_for(const char *format)
{
    if (!format || !*format)
        return "text/tab-separated-values; charset=UTF-8";
    static const struct {
        const char *prefix;
        const char *type;
    } types[] = {{"JSONEachRow", "application/x-ndjson; charset=UTF-8"},
                 {"JSONLines", "application/x-ndjson; charset=UTF-8"},
                 {"NDJSON", "application/x-ndjson; charset=UTF-8"},
                 {"JSON", "application/json; charset=UTF-8"},
                 {"TabSeparated", "text/tab-separated-values; charset=UTF-8"},
                 {"TSV", "text/tab-separated-values; charset=UTF-8"},
                 {"CSV", "text/csv; charset=UTF-8; header=absent"},
                 {"Pretty", "text/plain; charset=UTF-8"},
                 {"Vertical", "text/plain; charset=UTF-8"},
                 {"XML", "application/xml; charset=UTF-8"}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strncasecmp(format, types[i].prefix, strlen(types[i].prefix)))
            return types[i].type;
    return "application/octet-stream";
}


/* The fast path buffers answers up to this size (beyond, the query runs again, streamed). */
#define SMALL_ANSWER_MAX (1u << 20)

/* Whether the statement's answer is expected to be small and cheap to produce again: the outer
 * SELECT has a LIMIT, or neither GROUP BY nor ORDER BY (a plain aggregate, or rows that stream
 * as they are read, so an oversized first attempt costs little). */
static bool small_answer(const ferry_sql_analysis *a)
{
    for (size_t i = 0; i < a->n_levels; i++) {
        const ferry_sql_level *l = &a->levels[i];
        if (l->parent != SIZE_MAX)
            continue;
        if (l->cl[FERRY_CL_LIMIT].present)
            continue;
        if (l->cl[FERRY_CL_GROUP_BY].present || l->cl[FERRY_CL_ORDER_BY].present)
            return false;
    }
    return true;
}

/* X-Ferry-Explain: the plan this request got (routing version, kind, the replica picked per
 * slice as the per-server queries show, the initiator's query), as JSON, instead of running it.
 * A read held by a move being published is reported at once (held: true), not waited for. */
static void respond_explain(ferry_http_req *req, rd_ctx *cx, const ferry_read_plan *plan,
                            const rd_fail *held)
{
    json_t *o = json_object();
    json_t *qs = json_array();
    if (!o || !qs) {
        ferry_http_respond(req, 500, "text/plain", "out of memory\n", 14);
        goto out;
    }
    json_object_set_new(o, "routing_version", json_integer((json_int_t)cx->cache->snap->version));
    if (cx->scope) {
        /* the restriction every managed reference got (the per-server queries show it) */
        json_t *ts = json_array();
        for (size_t i = 0; ts && i < cx->scope->n_tenants; i++)
            json_array_append_new(ts, json_string(cx->scope->tenants[i]));
        json_object_set_new(o, "restricted_to_tenants", ts ? ts : json_null());
    }
    json_object_set_new(o, "held", json_boolean(held != NULL));
    if (held) {
        json_object_set_new(o, "why", json_string(held->err.msg));
    } else {
        json_object_set_new(o, "plan", json_string(ferry_plan_kind_name(plan->kind)));
        json_object_set_new(o, "why", json_string(plan->why));
        for (size_t i = 0; i < plan->n_queries; i++) {
            json_t *q = json_object();
            json_object_set_new(q, "server",
                                json_string(cx->r->shards[plan->queries[i].server]->name));
            json_object_set_new(q, "sql", json_string(plan->queries[i].sql));
            json_array_append_new(qs, q);
        }
        json_object_set_new(o, "initiator",
                            plan->initiator_sql ? json_string(plan->initiator_sql) : json_null());
        json_t *gl = json_array();
        for (size_t i = 0; gl && i < plan->n_globals; i++)
            json_array_append_new(gl, json_string(plan->global_sql[i]));
        json_object_set_new(o, "globals", gl ? gl : json_null());
    }
    json_object_set(o, "queries", qs);
    char *text = json_dumps(o, JSON_INDENT(2));
    if (text) {
        ferry_http_respond(req, 200, "application/json", text, strlen(text));
        free(text);
        goto out;
    }
    ferry_http_respond(req, 500, "text/plain", "out of memory\n", 14);
out:
    json_decref(qs);
    json_decref(o);
}

/* A read that failed because its deadline passed (the KILLs made the servers' queries fail):
 * the client gets ClickHouse's TIMEOUT_EXCEEDED rather than the cancellation. */
static void deadline_fail(rd_ctx *cx, rd_fail *f)
{
    if (!rt_deadline_expired(cx->deadline))
        return;
    fail_set(f, FERRY_ETIMEOUT, "TIMEOUT_EXCEEDED",
             "Timeout exceeded: elapsed %.3f seconds, maximum: %.3f (the user's "
             "max_execution_time; the query was cancelled on every shard)",
             (double)rt_deadline_ms(cx->deadline) / 1000.0,
             (double)rt_deadline_ms(cx->deadline) / 1000.0);
}

/* A bound user's scope for this request: the principal's tenants and tables, the request's
 * database and query parameters. false (answered) when the request names a database that holds
 * no managed table (unqualified names would read another database's tables). */
static bool scope_for(rd_stream *s, ferry_http_req *req, const rt_principal *who)
{
    rt_reads *rd = s->r->reads;
    s->scope = who->scope;
    const char *db = s->o.database && *s->o.database ? s->o.database : "default";
    bool known = !s->o.database || !*s->o.database;
    for (size_t i = 0; i < rd->n_tables && !known; i++)
        known = rd->tables[i].database && !strcmp(rd->tables[i].database, db);
    if (!known) {
        rd_fail f = {0};
        fail_set(&f, FERRY_EACCESS, "ACCESS_DENIED",
                 "user %s is bound to tenants and may only use the databases of managed tables "
                 "(not %s)", who->name, db);
        respond_fail(req, &f);
        return false;
    }
    s->scope.database = db;
    s->params = calloc(s->o.n_all + 1, sizeof *s->params);
    if (!s->params) {
        rd_fail f = {0};
        fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of memory");
        respond_fail(req, &f);
        return false;
    }
    for (size_t i = 0; i < s->o.n_all; i++)
        if (!strncmp(s->o.all[i].name, "param_", 6))
            s->params[s->scope.n_params++] =
                (ferry_sql_param){s->o.all[i].name + 6, s->o.all[i].value};
    s->scope.params = s->params;
    return true;
}

static bool select_route(ferry_router *r, ferry_http_req *req, rt_principal *who,
                         bool query_in_url, const void *body, size_t body_len, bool *may_pass)
{
    rt_reads *rd = r->reads;
    bool bound = who && !who->admin;
    *may_pass = !bound;
    if (!rd || !rd->n_tables)
        return false;
    const char *ct = ferry_http_header(req, "Content-Type");
    if (ct && !strncasecmp(ct, "multipart/", 10)) {
        if (bound) {
            rd_fail f = {0};
            fail_set(&f, FERRY_EACCESS, "ACCESS_DENIED",
                     "user %s is bound to tenants: the client's own external data (a multipart "
                     "body) is not routed", who->name);
            respond_fail(req, &f);
            return true;
        }
        return false; /* the client's own external data: not routed */
    }
    ferry_buf text = {0};
    if (query_in_url) {
        ferry_buf_puts(&text, ferry_http_arg(req, "query"));
        if (body_len) {
            ferry_buf_putc(&text, '\n');
            ferry_buf_append(&text, body, body_len);
        }
    } else {
        ferry_buf_append(&text, body, body_len);
    }
    if (!text.data) {
        ferry_buf_free(&text);
        return false;
    }
    /* Only SELECT-like statements are analysed (a large DDL or INSERT body is not tokenized):
     * classified as the router classifies bodies (ClickHouse's comment rules; it stops at the
     * first word). */
    ferry_rt_insert probe;
    bool more = false;
    enum ferry_rt_stmt kind = ferry_rt_classify(text.data, text.len, true, &probe, &more);
    ferry_rt_insert_free(&probe);
    if (kind != FERRY_RT_STMT_SELECT) {
        ferry_buf_free(&text);
        return false;
    }
    rd_stream *s = calloc(1, sizeof *s);
    if (!s) {
        ferry_buf_free(&text);
        return false;
    }
    s->r = r;
    s->pipe_rd = s->pipe_wr = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    size_t len = text.len;
    s->sql = ferry_buf_detach(&text);
    ferry_err err = {0};
    rd_fail f = {0};
    int rc = ferry_sql_analyze(s->sql, len, rd->tables, rd->n_tables, &s->a, &err);
    if (rc && bound) {
        /* never passed through unchecked: answered as the syntax error it is */
        fail_set(&f, rc, "SYNTAX_ERROR", "%s", err.msg);
        respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    if (rc || (!bound && !reads_managed(&s->a))) {
        /* Not valid SQL (the server reports the error as ClickHouse does) or no managed table:
         * unchanged to the passthrough server. */
        stream_free(s);
        return false;
    }
    if (opts_collect(req, &s->o)) {
        fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of resources");
        respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    if (bound) {
        /* what a bound user may name (ACCESS_DENIED otherwise); what passes is restricted to
         * its tenants' slices in planning (cx.scope) */
        if (!scope_for(s, req, who)) {
            stream_free(s);
            return true;
        }
        if (ferry_sql_scope_check(&s->a, rd->tables, rd->n_tables, &s->scope, &err)) {
            fail_set(&f, FERRY_EACCESS, err.code == FERRY_ENOMEM ? "CANNOT_ALLOCATE_MEMORY"
                                                                 : "ACCESS_DENIED",
                     "user %s: %s", who->name, err.msg);
            respond_fail(req, &f);
            stream_free(s);
            return true;
        }
        if (!reads_managed(&s->a)) {
            *may_pass = true; /* only the tables its user lists: as each server has them */
            stream_free(s);
            return false;
        }
        s->cx.scope = &s->scope;
    }
    if (!s->a.understood) {
        fail_set(&f, FERRY_EUNSUPPORTED, "NOT_IMPLEMENTED",
                 "this query reads a managed table but cannot be routed: %s", s->a.why);
        respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    s->cx.r = r;
    s->cx.rd = rd;
    s->cx.o = &s->o;
    bool explain = ferry_http_header(req, "X-Ferry-Explain") != NULL;
    if (who && who->user && who->user->rec.max_execution_ms && !explain)
        s->cx.deadline = rt_deadline_start(r->limits, who->user->rec.max_execution_ms);
    /* Plan with the current table; a query reading a slice that a move is publishing waits for
     * a newer table (rt_read_set: no server holds the slice exactly then), at most
     * publish_wait. Nothing was sent to a server before planning succeeds. */
    bool failed;
    uint64_t hold_deadline = now_ms() + (uint64_t)r->publish_wait_ms;
    if (s->cx.deadline && hold_deadline > now_ms() + rt_deadline_ms(s->cx.deadline))
        hold_deadline = now_ms() + rt_deadline_ms(s->cx.deadline);
    for (;;) {
        if (!(s->cx.cache = cache_get(r, rd))) {
            fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of resources");
            respond_fail(req, &f);
            stream_free(s);
            return true;
        }
        s->inflight = true;
        failed = plan_analyzed(&s->cx, &s->a, &s->plan, &s->fail) != FERRY_OK;
        if (!failed || !s->fail.held || explain || now_ms() >= hold_deadline)
            break;
        uint64_t held_version = s->cx.cache->snap->version;
        read_done(s);
        cache_put(s->cx.cache);
        s->cx.cache = NULL;
        ferry_read_plan_free(&s->plan);
        memset(&s->plan, 0, sizeof s->plan);
        memset(&s->fail, 0, sizeof s->fail);
        s->cx.plan_kind[0] = s->cx.shards[0] = '\0';
        rt_wait_newer(r, held_version, hold_deadline);
    }
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)s->cx.cache->snap->version);
    ferry_http_add_header(req, "X-Ferry-Routing-Version", v);
    if (s->cx.plan_kind[0])
        ferry_http_add_header(req, "X-Ferry-Plan", s->cx.plan_kind);
    if (s->cx.shards[0])
        ferry_http_add_header(req, "X-Ferry-Shards", s->cx.shards);
    if (explain && (!failed || s->fail.held)) {
        respond_explain(req, &s->cx, &s->plan, failed ? &s->fail : NULL);
        stream_free(s);
        return true;
    }
    const char *fmt = s->a.format ? s->a.format : s->o.default_format;
    if (!failed && s->plan.kind == FERRY_PLAN_SINGLE && small_answer(&s->a)) {
        /* The fast path: one server, an answer expected to be small: run it on this thread
         * (no thread hand-offs) into memory. An answer beyond SMALL_ANSWER_MAX is run again,
         * streamed. */
        buf_sink b = {.b = &s->small, .max = SMALL_ANSWER_MAX};
        rc = exec_plan(&s->cx, &s->plan, s->o.default_format, NULL, 0, buf_sink_write, &b,
                       &s->fail);
        if (rc)
            deadline_fail(&s->cx, &s->fail);
        if (!rc || !b.over) {
            if (!rc) {
                if (fmt)
                    ferry_http_add_header(req, "X-ClickHouse-Format", fmt);
                if (s->o.query_id)
                    ferry_http_add_header(req, "X-ClickHouse-Query-Id", s->o.query_id);
                ferry_http_respond(req, 200, content_type_for(fmt), s->small.data,
                                   s->small.len);
            } else {
                respond_fail(req, &s->fail);
            }
            stream_free(s);
            return true;
        }
        memset(&s->fail, 0, sizeof s->fail);
        ferry_buf_free(&s->small);
    }
    if (failed) {
        if (s->fail.held)
            deadline_fail(&s->cx, &s->fail);
        respond_fail(req, &s->fail);
        stream_free(s);
        return true;
    }
    int fds[2];
    if (pipe(fds) != 0) {
        fail_set(&f, FERRY_ENOMEM, "CANNOT_ALLOCATE_MEMORY", "out of resources");
        respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    s->pipe_rd = fds[0];
    s->pipe_wr = fds[1];
    s->th_started = pthread_create(&s->th, NULL, stream_main, s) == 0;
    if (!s->th_started) {
        fail_set(&f, FERRY_ENOMEM, "CANNOT_SCHEDULE_TASK", "cannot start a thread");
        respond_fail(req, &f);
        stream_free(s);
        return true;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->started && !s->finished)
        pthread_cond_wait(&s->cond, &s->mu);
    failed = !s->started && s->rc;
    pthread_mutex_unlock(&s->mu);
    if (failed) {
        respond_fail(req, &s->fail);
        stream_free(s);
        return true;
    }
    if (fmt)
        ferry_http_add_header(req, "X-ClickHouse-Format", fmt);
    if (s->o.query_id)
        ferry_http_add_header(req, "X-ClickHouse-Query-Id", s->o.query_id);
    ferry_http_respond_stream(req, 200, content_type_for(fmt), stream_read, s, stream_free);
    return true;
}

bool rt_select_route(ferry_router *r, ferry_http_req *req, rt_principal *who,
                     bool query_in_url, const void *body, size_t body_len, bool *may_pass)
{
    if (select_route(r, req, who, query_in_url, body, body_len, may_pass))
        return true;
    if (!*may_pass)
        return false; /* the caller refuses it */
    if (!ferry_http_header(req, "X-Ferry-Explain"))
        return false;
    /* An explained statement is never run, also when it is not routed. */
    static const char passthrough[] =
        "{\n  \"held\": false,\n  \"plan\": \"passthrough\",\n  \"why\": \"reads no managed "
        "table (or is not valid SQL): sent unchanged to [router] passthrough\",\n  \"queries\": "
        "[]\n}";
    ferry_http_respond(req, 200, "application/json", passthrough, sizeof passthrough - 1);
    return true;
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

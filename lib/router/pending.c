/* Slices awaiting a client's retry (docs/routing.md, "Retries and moves").
 *
 * A request that wrote some of its rows and then failed - or succeeded but whose answer never
 * reached the client - will be sent again with the same query_id or insert_deduplication_token.
 * The shards that stored rows of the first attempt drop them again by their deduplication log,
 * but only if the retry's rows reach the same shards. So the router remembers, for [router]
 * retry_window, every slice such a request touched, and a move asks every router before it
 * switches a slice (GET /ferry/router?tenant=T&split=K: "pending_retry_ms") and waits while one
 * still expects a retry for it. A retry within the window therefore lands where the first
 * attempt's rows are, and is deduplicated there, even while slices move.
 *
 * Two parts: rt_touched, the set of slices one request sent rows of (per request, no lock), and
 * the router's table of pending slices (under its own mutex), which is small: only failed
 * requests add to it, and entries expire. */
#include "router_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ferry/clock.h"
#include "ferry/log.h"

/* ---- the slices one request touched ---------------------------------------------------------- */

static uint64_t slice_hash(const char *tenant, uint32_t split)
{
    return XXH3_64bits_withSeed(tenant, strlen(tenant), split);
}

/* Adds the slots to the slice's shard set; a slot it had not seen marks it mixed. */
static void touched_shards(rt_touched_slice *it, const uint32_t *shards, uint32_t n, bool first)
{
    for (uint32_t k = 0; k < n; k++) {
        uint32_t j;
        for (j = 0; j < it->n_shards && it->shards[j] != shards[k]; j++)
            ;
        if (j < it->n_shards)
            continue;
        if (!first)
            it->mixed = true;
        if (it->n_shards < RT_TOUCHED_SHARDS)
            it->shards[it->n_shards++] = shards[k];
        else
            it->mixed = true; /* more shards than tracked: never acknowledged with one failed */
    }
    if (!first && n != it->n_shards)
        it->mixed = true;
}

int rt_touched_add(rt_touched *t, const char *tenant, uint32_t split, const uint32_t *shards,
                   uint32_t n_shards)
{
    if (t->n * 2 >= t->cap) {
        /* grow the open-addressed index (kept at most half full) and rehash */
        size_t cap = t->cap ? t->cap * 2 : 16;
        uint32_t *idx = malloc(cap * sizeof *idx);
        rt_touched_slice *items = realloc(t->items, (cap / 2) * sizeof *items);
        if (!idx || !items) {
            free(idx);
            if (items)
                t->items = items;
            return FERRY_ENOMEM;
        }
        t->items = items;
        memset(idx, 0xff, cap * sizeof *idx);
        for (size_t i = 0; i < t->n; i++) {
            size_t h = (size_t)t->items[i].hash & (cap - 1);
            while (idx[h] != UINT32_MAX)
                h = (h + 1) & (cap - 1);
            idx[h] = (uint32_t)i;
        }
        free(t->index);
        t->index = idx;
        t->cap = cap;
    }
    uint64_t hv = slice_hash(tenant, split);
    size_t h = (size_t)hv & (t->cap - 1);
    for (; t->index[h] != UINT32_MAX; h = (h + 1) & (t->cap - 1)) {
        const rt_touched_slice *it = &t->items[t->index[h]];
        if (it->hash == hv && it->split == split && !strcmp(it->tenant, tenant)) {
            touched_shards(&t->items[t->index[h]], shards, n_shards, false);
            return FERRY_OK;
        }
    }
    rt_touched_slice *it = &t->items[t->n];
    memset(it, 0, sizeof *it);
    it->tenant = strdup(tenant);
    if (!it->tenant)
        return FERRY_ENOMEM;
    it->split = split;
    it->hash = hv;
    touched_shards(it, shards, n_shards, true);
    t->index[h] = (uint32_t)t->n++;
    return FERRY_OK;
}

void rt_touched_free(rt_touched *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->items[i].tenant);
    free(t->items);
    free(t->index);
    memset(t, 0, sizeof *t);
}

/* ---- the router's pending slices ------------------------------------------------------------- */

typedef struct rt_pending_slice {
    char *tenant;
    uint32_t split;
    uint64_t until_ms; /* CLOCK_MONOTONIC */
} rt_pending_slice;

struct rt_pending {
    pthread_mutex_t mu;
    rt_pending_slice *items;
    size_t n, cap;
    uint64_t window_ms;
};

int rt_pending_new(uint64_t window_ms, rt_pending **out)
{
    rt_pending *p = calloc(1, sizeof *p);
    if (!p)
        return FERRY_ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    p->window_ms = window_ms;
    *out = p;
    return FERRY_OK;
}

void rt_pending_free(rt_pending *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i].tenant);
    free(p->items);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Drops expired entries; with p->mu held. */
static void purge_locked(rt_pending *p, uint64_t now)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->items[i].until_ms > now)
            p->items[k++] = p->items[i];
        else
            free(p->items[i].tenant);
    }
    p->n = k;
}

/* Holds the slice until `until` (CLOCK_MONOTONIC ms) unless it is held longer already; with
 * p->mu held. 1 when it was added, 0 when it was there, -1 when it cannot be (out of memory, or
 * RT_PENDING_MAX slices held). */
static int hold_locked(rt_pending *p, const char *tenant, uint32_t split, uint64_t until)
{
    for (size_t k = 0; k < p->n; k++)
        if (p->items[k].split == split && !strcmp(p->items[k].tenant, tenant)) {
            if (p->items[k].until_ms < until)
                p->items[k].until_ms = until; /* a newer failure: the window starts again */
            return 0;
        }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        rt_pending_slice *items = cap <= RT_PENDING_MAX ? realloc(p->items, cap * sizeof *items)
                                                         : NULL;
        if (!items)
            return -1;
        p->items = items;
        p->cap = cap;
    }
    char *name = strdup(tenant);
    if (!name)
        return -1;
    p->items[p->n++] = (rt_pending_slice){name, split, until};
    return 1;
}

void rt_pending_mark(rt_pending *p, const rt_touched *t)
{
    if (!p || !p->window_ms || !t->n)
        return;
    uint64_t now = ferry_clock_ms_u64(), until = now + p->window_ms;
    size_t added = 0, lost = 0;
    pthread_mutex_lock(&p->mu);
    purge_locked(p, now);
    for (size_t i = 0; i < t->n; i++) {
        int rc = hold_locked(p, t->items[i].tenant, t->items[i].split, until);
        if (rc < 0)
            lost++;
        else
            added += (size_t)rc;
    }
    size_t n = p->n;
    pthread_mutex_unlock(&p->mu);
    if (lost)
        FLOG_WARN("msg=\"router: cannot remember every slice awaiting a retry; a move of these "
                  "slices may not wait for it\" lost=%zu pending=%zu",
                  lost, n);
    if (added)
        FLOG_INFO("msg=\"router: slices held for a client's retry\" slices=%zu window_ms=%llu",
                  added, (unsigned long long)p->window_ms);
}

int rt_pending_hold(rt_pending *p, const char *tenant, uint32_t split, uint64_t left_ms)
{
    if (!p || !p->window_ms || !left_ms)
        return FERRY_OK;
    if (left_ms > p->window_ms)
        left_ms = p->window_ms; /* a clock set back while the router was down */
    pthread_mutex_lock(&p->mu);
    int rc = hold_locked(p, tenant, split, ferry_clock_ms_u64() + left_ms);
    pthread_mutex_unlock(&p->mu);
    return rc < 0 ? FERRY_ENOMEM : FERRY_OK;
}

int rt_pending_each(rt_pending *p, rt_pending_fn fn, void *ctx)
{
    if (!p)
        return 0;
    uint64_t now = ferry_clock_ms_u64();
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    purge_locked(p, now);
    for (size_t k = 0; k < p->n && !rc; k++)
        rc = fn(ctx, p->items[k].tenant, p->items[k].split, p->items[k].until_ms - now);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

uint64_t rt_pending_window_ms(const rt_pending *p)
{
    return p ? p->window_ms : 0;
}

uint64_t rt_pending_left_ms(rt_pending *p, const char *tenant, uint32_t split)
{
    if (!p)
        return 0;
    uint64_t now = ferry_clock_ms_u64(), left = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t k = 0; k < p->n; k++)
        if (p->items[k].split == split && p->items[k].until_ms > now &&
            !strcmp(p->items[k].tenant, tenant))
            left = p->items[k].until_ms - now;
    pthread_mutex_unlock(&p->mu);
    return left;
}

size_t rt_pending_count(rt_pending *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    purge_locked(p, ferry_clock_ms_u64());
    size_t n = p->n;
    pthread_mutex_unlock(&p->mu);
    return n;
}

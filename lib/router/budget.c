/* The router's bounds against heavy and slow clients (docs/security.md, "What the router
 * bounds"): the [router] keys for connections and deadlines (handed to the HTTP server), and a
 * process-wide memory budget over the bytes the router holds for requests that must be read
 * whole before they are answered (a statement's head, a passthrough or SELECT body). Inserts
 * stream and are bounded per request by flush_bytes and stream_buffer_bytes instead. */
#include "router_int.h"

#include "ferry/config.h"
#include "ferry/strutil.h"

static int duration_key(const ferry_config *cfg, const char *key, uint64_t def, uint64_t max,
                        unsigned *out, ferry_err *err)
{
    const char *v = ferry_config_get(cfg, "router", NULL, key);
    uint64_t secs = def;
    if (v && (!ferry_parse_duration(v, &secs) || secs > max))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [router] %s = '%s': expected a duration such as 30s (at most "
                             "%llus; 0: no limit)",
                             cfg->path, key, v, (unsigned long long)max);
    *out = (unsigned)secs;
    return FERRY_OK;
}

int rt_budget_config(ferry_router *r, const ferry_config *cfg, ferry_err *err)
{
    uint64_t v = 0;
    int rc = ferry_config_bytes(cfg, "router", NULL, "max_buffered_bytes", 64u << 20, &v, err);
    if (!rc && v < 4096)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] max_buffered_bytes must be at least "
                           "4K", cfg->path);
    r->max_buffered_bytes = (size_t)v;
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "memory_budget", 1ULL << 30, &v, err);
    if (!rc && v < r->max_buffered_bytes)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] memory_budget (%llu bytes) is "
                           "smaller than max_buffered_bytes (%zu): no request could be read",
                           cfg->path, (unsigned long long)v, r->max_buffered_bytes);
    r->memory_budget = (size_t)v;
    if (!rc)
        rc = ferry_config_u64(cfg, "router", NULL, "max_connections", 256, &v, err);
    if (!rc && (v < 1 || v > 65536))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] max_connections must be 1..65536",
                           cfg->path);
    r->max_connections = (unsigned)v;
    if (!rc)
        rc = ferry_config_u64(cfg, "router", NULL, "max_connections_per_address", 64, &v, err);
    if (!rc && v > r->max_connections)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] max_connections_per_address is "
                           "above max_connections", cfg->path);
    r->max_per_address = (unsigned)v;
    if (!rc)
        rc = duration_key(cfg, "idle_timeout", 60, 86400, &r->idle_timeout_s, err);
    if (!rc && !r->idle_timeout_s)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] idle_timeout must be above 0",
                           cfg->path);
    if (!rc)
        rc = duration_key(cfg, "header_timeout", 10, 3600, &r->header_timeout_s, err);
    if (!rc)
        rc = duration_key(cfg, "receive_timeout", 600, 86400, &r->receive_timeout_s, err);
    return rc;
}

bool rt_mem_reserve(ferry_router *r, size_t n)
{
    size_t cur = atomic_load(&r->mem_used);
    do {
        if (n > r->memory_budget || cur > r->memory_budget - n)
            return false;
    } while (!atomic_compare_exchange_weak(&r->mem_used, &cur, cur + n));
    return true;
}

void rt_mem_release(ferry_router *r, size_t n)
{
    atomic_fetch_sub(&r->mem_used, n);
}

/* The router's bounds against heavy and slow clients (docs/security.md, "What the router
 * bounds"): the [router] keys for connections and deadlines (handed to the HTTP server), and a
 * process-wide memory budget over the bytes the router holds for requests: bodies read whole
 * before they are answered (a statement's head, a SELECT or DDL text up to max_query_size:
 * server.c; the read path's analysis of a SELECT: select.c), the ring of a
 * streamed passthrough body (passthrough.c), and what routed reads buffer (merged reads'
 * partials, GLOBAL subqueries, the fast path's answer: select_merge.c). Past it a request gets
 * ClickHouse's MEMORY_LIMIT_EXCEEDED and the process goes on. Routed inserts stream and are
 * bounded per request by flush_bytes and stream_buffer_bytes instead. */
#include "router_int.h"

#include "ferry/config.h"
#include "ferry/httpd.h"

int rt_budget_config(ferry_router *r, const ferry_config *cfg, ferry_err *err)
{
    uint64_t v = 0;
    int rc = ferry_config_bytes(cfg, "router", NULL, "max_buffered_bytes", 64u << 20, &v, err);
    if (!rc && v < 4096)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] max_buffered_bytes must be at least "
                           "4K", cfg->path);
    r->max_buffered_bytes = (size_t)v;
    /* ClickHouse's own default: a server refuses a longer statement unless the request (or the
     * user's profile there) raises max_query_size, so the router holds no more of one */
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "max_query_size", 256u << 10, &v, err);
    if (!rc && v < 1)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] max_query_size must be at least 1",
                           cfg->path);
    r->max_query_size = (size_t)v;
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "memory_budget", 1ULL << 30, &v, err);
    if (!rc && v < r->max_buffered_bytes)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] memory_budget (%llu bytes) is "
                           "smaller than max_buffered_bytes (%zu): no request could be read",
                           cfg->path, (unsigned long long)v, r->max_buffered_bytes);
    r->memory_budget = (size_t)v;
    /* connections and deadlines: the keys every server section has (lib/net/httpd_config.c) */
    r->http = (ferry_httpd_options){.max_connections = 256,
                                    .max_per_address = 64,
                                    .idle_timeout_s = 60,
                                    .header_timeout_s = 10,
                                    .receive_timeout_s = 600};
    if (!rc)
        rc = ferry_httpd_config_read(cfg, "router", &r->http, err);
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

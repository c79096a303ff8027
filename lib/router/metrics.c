/* The router's GET /metrics (Prometheus text): requests by kind and outcome with their latency,
 * rows and bytes written per shard, the read path's failovers and per-shard errors (select.c), the routing
 * version and the oldest version a request still uses, the slices awaiting a client's retry, and
 * the process's resident memory. Labels are bounded: kind, outcome, shard. */
#include "router_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rt_metrics_init(ferry_router *r)
{
    rt_metrics *m = &r->metrics;
    pthread_mutex_init(&m->mu, NULL);
    for (int k = 0; k < RT_KINDS; k++)
        ferry_histogram_init(&m->seconds[k]);
    m->rows_by_slot = calloc(RT_SHARDS_MAX, sizeof *m->rows_by_slot);
    m->bytes_by_slot = calloc(RT_SHARDS_MAX, sizeof *m->bytes_by_slot);
    if (!m->rows_by_slot || !m->bytes_by_slot) {
        free(m->rows_by_slot);
        free(m->bytes_by_slot);
        m->rows_by_slot = m->bytes_by_slot = NULL;
        return FERRY_ENOMEM;
    }
    return FERRY_OK;
}

void rt_metrics_free(ferry_router *r)
{
    rt_metrics *m = &r->metrics;
    if (!m->rows_by_slot)
        return;
    free(m->rows_by_slot);
    free(m->bytes_by_slot);
    m->rows_by_slot = m->bytes_by_slot = NULL;
    for (int k = 0; k < RT_KINDS; k++)
        ferry_histogram_destroy(&m->seconds[k]);
    pthread_mutex_destroy(&m->mu);
}

void rt_metrics_request(ferry_router *r, enum rt_kind kind, unsigned status, double seconds)
{
    rt_metrics *m = &r->metrics;
    ferry_histogram_observe(&m->seconds[kind], seconds);
    pthread_mutex_lock(&m->mu);
    m->requests[kind][status >= 200 && status < 300 ? 0 : 1]++;
    pthread_mutex_unlock(&m->mu);
}

void rt_metrics_refused(ferry_router *r, enum rt_refusal why)
{
    atomic_fetch_add(&r->metrics.refused[why], 1);
}

static uint64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void rt_on_metrics(ferry_http_req *req, void *ctx)
{
    static const char *const kinds[RT_KINDS] = {"insert", "read", "passthrough"};
    ferry_router *r = ctx;
    rt_metrics *m = &r->metrics;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_metrics_family(&b, "ferry_router_requests_total", FERRY_METRIC_COUNTER,
                         "requests by kind (insert into a managed table, routed read, "
                         "passthrough) and outcome (a 2xx answer or not)");
    pthread_mutex_lock(&m->mu);
    uint64_t req_counts[RT_KINDS][2];
    memcpy(req_counts, m->requests, sizeof req_counts);
    pthread_mutex_unlock(&m->mu);
    for (int k = 0; k < RT_KINDS; k++)
        for (int o = 0; o < 2; o++)
            ferry_metrics_sample(&b, "ferry_router_requests_total",
                                 (const char *[]){"kind", kinds[k], "outcome",
                                                  o ? "error" : "ok", NULL},
                                 (double)req_counts[k][o]);
    ferry_metrics_family(&b, "ferry_router_request_seconds", FERRY_METRIC_HISTOGRAM,
                         "time from a request's headers to the end of its answer");
    for (int k = 0; k < RT_KINDS; k++)
        ferry_histogram_render(&m->seconds[k], &b, "ferry_router_request_seconds",
                               (const char *[]){"kind", kinds[k], NULL});
    ferry_metrics_family(&b, "ferry_router_rows_written_total", FERRY_METRIC_COUNTER,
                         "rows the router's inserts wrote, per shard");
    size_t n = r->n_shards;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&m->mu);
        uint64_t rows = m->rows_by_slot[i];
        pthread_mutex_unlock(&m->mu);
        ferry_metrics_sample(&b, "ferry_router_rows_written_total",
                             (const char *[]){"shard", r->shards[i]->name, NULL}, (double)rows);
    }
    ferry_metrics_family(&b, "ferry_router_bytes_written_total", FERRY_METRIC_COUNTER,
                         "body bytes of those rows (in the format forwarded), per shard");
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&m->mu);
        uint64_t bytes = m->bytes_by_slot[i];
        pthread_mutex_unlock(&m->mu);
        ferry_metrics_sample(&b, "ferry_router_bytes_written_total",
                             (const char *[]){"shard", r->shards[i]->name, NULL}, (double)bytes);
    }
    pthread_mutex_lock(&r->mu);
    uint64_t version = r->snap ? r->snap->version : 0, oldest = 0, reroutes = r->reroutes;
    uint64_t loads[2] = {r->loads_full, r->loads_incremental};
    for (size_t i = 0; i < r->n_inflight; i++)
        if (!oldest || r->inflight[i].version < oldest)
            oldest = r->inflight[i].version;
    pthread_mutex_unlock(&r->mu);
    ferry_metrics_family(&b, "ferry_router_routing_version", FERRY_METRIC_GAUGE,
                         "the newest routing table the router published");
    ferry_metrics_sample(&b, "ferry_router_routing_version", NULL, (double)version);
    ferry_metrics_family(&b, "ferry_router_inflight_oldest_version", FERRY_METRIC_GAUGE,
                         "the oldest routing version a request still reads or writes with (the "
                         "published one when none is in flight)");
    ferry_metrics_sample(&b, "ferry_router_inflight_oldest_version", NULL,
                         (double)(oldest ? oldest : version));
    ferry_metrics_family(&b, "ferry_router_reroutes_total", FERRY_METRIC_COUNTER,
                         "requests that took a newer routing table part-way");
    ferry_metrics_sample(&b, "ferry_router_reroutes_total", NULL, (double)reroutes);
    ferry_metrics_family(&b, "ferry_router_routing_loads_total", FERRY_METRIC_COUNTER,
                         "routing tables published: read in full, or only the tenants the "
                         "routing change log named (docs/routing.md)");
    ferry_metrics_sample(&b, "ferry_router_routing_loads_total",
                         (const char *[]){"kind", "full", NULL}, (double)loads[0]);
    ferry_metrics_sample(&b, "ferry_router_routing_loads_total",
                         (const char *[]){"kind", "incremental", NULL}, (double)loads[1]);
    ferry_metrics_family(&b, "ferry_router_pending_retry_slices", FERRY_METRIC_GAUGE,
                         "slices a move must not switch yet: a client may retry a failed write");
    ferry_metrics_sample(&b, "ferry_router_pending_retry_slices", NULL,
                         (double)rt_pending_count(r->pending));
    if (rt_journal_has_file(r->journal)) {
        ferry_metrics_family(&b, "ferry_router_retry_journal_write_errors_total",
                             FERRY_METRIC_COUNTER,
                             "records the retry journal could not write ([router] retry_journal): "
                             "a restart of this router may forget retries clients will send");
        ferry_metrics_sample(&b, "ferry_router_retry_journal_write_errors_total", NULL,
                             (double)rt_journal_write_errors(r->journal));
    }
    rt_reads_metrics(r, &b);
    ferry_httpd_metrics(r->httpd, &b, "ferry_router_http_refused_total");
    static const char *const refusals[RT_REFUSALS] = {"authentication", "user_limit",
                                                      "memory_budget"};
    ferry_metrics_family(&b, "ferry_router_refused_total", FERRY_METRIC_COUNTER,
                         "requests the router refused: wrong credentials or token "
                         "(AUTHENTICATION_FAILED), a user's limits, the memory budget "
                         "(MEMORY_LIMIT_EXCEEDED)");
    for (int i = 0; i < RT_REFUSALS; i++)
        ferry_metrics_sample(&b, "ferry_router_refused_total",
                             (const char *[]){"reason", refusals[i], NULL},
                             (double)atomic_load(&m->refused[i]));
    ferry_metrics_family(&b, "ferry_router_memory_budget_used_bytes", FERRY_METRIC_GAUGE,
                         "bytes of [router] memory_budget held now: bodies read whole, streamed "
                         "passthrough rings, reads' buffered results");
    ferry_metrics_sample(&b, "ferry_router_memory_budget_used_bytes", NULL,
                         (double)atomic_load(&r->mem_used));
    ferry_metrics_family(&b, "ferry_router_resident_memory_bytes", FERRY_METRIC_GAUGE,
                         "the router process's resident memory");
    ferry_metrics_sample(&b, "ferry_router_resident_memory_bytes", NULL,
                         (double)resident_bytes());
    if (b.data)
        ferry_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    else
        ferry_http_respond_text(req, 500, "out of memory\n");
    ferry_buf_free(&b);
}

/* GET /ferry/router: the router's state as JSON for operators and for movers' fences (the
 * routing version and the oldest one in flight, the slices awaiting a client's retry, the shards
 * it can send to, the read path's counters, authentication and limits; docs/routing.md). */
#include "router_int.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/chhttp.h"
#include "ferry/strutil.h"

void rt_on_status(ferry_http_req *req, void *ctx)
{
    ferry_router *r = ctx;
    if (!rt_auth_internal(r, req))
        return;
    ferry_buf body = {0};
    pthread_mutex_lock(&r->mu);
    uint64_t oldest = 0;
    for (size_t i = 0; i < r->n_inflight; i++)
        if (!oldest || r->inflight[i].version < oldest)
            oldest = r->inflight[i].version;
    char oldest_s[32] = "null";
    if (r->n_inflight)
        snprintf(oldest_s, sizeof oldest_s, "%llu", (unsigned long long)oldest);
    ferry_buf_printf(&body,
                     "{\"routing_version\":%llu,\"inflight_oldest_version\":%s,"
                     "\"insert_requests\":%llu,\"rows_routed\":%llu,\"reroutes\":%llu",
                     (unsigned long long)(r->snap ? r->snap->version : 0), oldest_s,
                     (unsigned long long)r->requests, (unsigned long long)r->rows_routed,
                     (unsigned long long)r->reroutes);
    pthread_mutex_unlock(&r->mu);
    /* slices awaiting a client's retry; for ?tenant=T&split=K, how long that one still is (what
     * a move asks before it switches the slice) */
    ferry_buf_printf(&body, ",\"pending_retry_slices\":%zu,\"retry_journal\":%s",
                     rt_pending_count(r->pending), rt_journal_has_file(r->journal) ? "true" : "false");
    ferry_buf_printf(&body, ",\"inflight_write_oldest_ms\":%llu",
                     (unsigned long long)rt_journal_inflight_ms(r->journal, NULL, 0));
    const char *pt = ferry_http_arg(req, "tenant"), *ps = ferry_http_arg(req, "split");
    uint64_t split = 0;
    if (pt && ps && ferry_parse_u64(ps, &split) && split <= UINT32_MAX)
        ferry_buf_printf(&body, ",\"pending_retry_ms\":%llu,\"inflight_write_ms\":%llu",
                         (unsigned long long)rt_pending_left_ms(r->pending, pt, (uint32_t)split),
                         (unsigned long long)rt_journal_inflight_ms(r->journal, pt,
                                                                    (uint32_t)split));
    /* the shards this router can send to (live slots): what the move's shard fence asks */
    ferry_buf_puts(&body, ",\"shards\":{");
    size_t n = r->n_shards, listed = 0;
    for (size_t i = 0; i < n; i++) {
        rt_shard *s = r->shards[i];
        if (rt_shard_retired(s))
            continue;
        ferry_buf_printf(&body, "%s\"%s\":{\"slot\":%zu,\"state\":\"%s\",\"replicas\":%zu,"
                                "\"usable\":%s",
                         listed++ ? "," : "", s->name, i, ferry_shard_state_name(s->rec.state),
                         s->n_replicas, s->conn_error[0] ? "false" : "true");
        if (s->conn_error[0]) {
            json_t *e = json_string(s->conn_error);
            char *q = e ? json_dumps(e, JSON_ENCODE_ANY) : NULL;
            ferry_buf_printf(&body, ",\"error\":%s", q ? q : "\"?\"");
            free(q);
            json_decref(e);
        }
        ferry_buf_putc(&body, '}');
    }
    ferry_buf_putc(&body, '}');
    rt_reads_status(r, &body);
    ferry_buf_printf(&body, ",\"memory_budget\":{\"bytes\":%zu,\"used\":%zu}", r->memory_budget,
                     atomic_load(&r->mem_used));
    ferry_buf_printf(&body, ",\"auth\":\"%s\"", r->auth == RT_AUTH_NONE ? "none" : "catalog");
    rt_limits_status(r->limits, &body);
    ferry_buf_putc(&body, '}');
    if (body.data)
        ferry_http_respond(req, 200, "application/json", body.data, body.len);
    else
        ferry_http_respond_text(req, 500, "out of memory\n");
    ferry_buf_free(&body);
}

/* The router's [router] section (docs/config.md): every key checked, every value range-checked
 * with a message naming the file, the key and what is expected; the listen address split into
 * address and port. The memory budget's keys are read by budget.c (rt_budget_config). */
#include "router_int.h"

#include <stdio.h>
#include <string.h>

#include "ferry/config.h"
#include "ferry/strutil.h"

int rt_read_config(ferry_router *r, const ferry_config *cfg, const char *listen,
                   const char *journal, char *addr, size_t addrsz, uint16_t *port, ferry_err *err)
{
    static const char *const keys[] = {"listen", "passthrough", "flush_bytes", "stream_buffer_bytes",
                                       "max_request_bytes", "max_row_bytes", "shard_timeout",
                                       "load_balancing", "allow_fanout", "global_max_rows",
                                       "global_max_bytes", "max_partial_bytes", "advertise_url",
                                       "publish_wait", "replica_error_half_life", "route_wait",
                                       "retry_window", "auth", "passthrough_user",
                                       "passthrough_password_file", "bound_insert_max_bytes",
                                       "login_free_failures", "login_max_delay",
                                       "login_failure_decay", "max_buffered_bytes", "max_query_size",
                                       "memory_budget", "passthrough_timeout", "min_insert_replicas",
                                       "fallback_to_stale_replicas", "retry_journal",
                                       FERRY_HTTPD_CONFIG_KEYS, NULL};
    uint64_t v;
    int rc = ferry_config_check_keys(cfg, "router", keys, err);
    if (rc)
        return rc;
    const char *l = listen ? listen : ferry_config_get(cfg, "router", NULL, "listen");
    if (!l)
        l = "127.0.0.1:8124";
    const char *colon = strrchr(l, ':');
    uint64_t p;
    if (!colon || (size_t)(colon - l) >= addrsz || !ferry_parse_u64(colon + 1, &p) || p > 65535)
        return ferry_err_set(err, FERRY_EINVAL, "listen address '%s': expected ADDR:PORT", l);
    memcpy(addr, l, (size_t)(colon - l));
    addr[colon - l] = '\0';
    *port = (uint16_t)p;
    const char *pt = ferry_config_get(cfg, "router", NULL, "passthrough");
    if (pt && *pt && !ferry_starts_with(pt, "http://") && !ferry_starts_with(pt, "https://"))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [router] passthrough = '%s': expected a ClickHouse HTTP URL",
                             cfg->path, pt);
    snprintf(r->passthrough, sizeof r->passthrough, "%s", pt ? pt : "");
    rc = ferry_config_bytes(cfg, "router", NULL, "flush_bytes", 256u << 10, &v, err);
    if (!rc && (v < 1024 || v > (256ULL << 20)))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] flush_bytes must be 1K..256M", cfg->path);
    r->flush_bytes = (size_t)v;
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "stream_buffer_bytes", 1u << 20, &v, err);
    if (!rc && (v < 1024 || v > (1ULL << 30)))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] stream_buffer_bytes must be 1K..1G",
                           cfg->path);
    r->stream_buffer_bytes = (size_t)v;
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "max_request_bytes", 256ULL << 20, &v, err);
    r->max_request_bytes = (size_t)v;
    if (!rc)
        rc = ferry_config_bytes(cfg, "router", NULL, "max_row_bytes", 64u << 20, &v, err);
    r->max_row_bytes = (size_t)v;
    const char *to = ferry_config_get(cfg, "router", NULL, "shard_timeout");
    uint64_t secs = 30;
    if (!rc && to && (!ferry_parse_duration(to, &secs) || secs == 0))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] shard_timeout = '%s': expected a duration such as 30s",
                           cfg->path, to);
    r->shard_timeout_ms = (long)secs * 1000;
    const char *pto = ferry_config_get(cfg, "router", NULL, "passthrough_timeout");
    uint64_t pto_secs = 300;
    if (!rc && pto && (!ferry_parse_duration(pto, &pto_secs) || pto_secs > 86400))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] passthrough_timeout = '%s': expected a duration such as "
                           "300s (at most 24h; 0: no limit)", cfg->path, pto);
    r->passthrough_timeout_s = (unsigned)pto_secs;
    const char *pw = ferry_config_get(cfg, "router", NULL, "publish_wait");
    uint64_t pw_secs = 30;
    if (!rc && pw && (!ferry_parse_duration(pw, &pw_secs) || pw_secs == 0))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] publish_wait = '%s': expected a duration such as 30s",
                           cfg->path, pw);
    r->publish_wait_ms = (long)pw_secs * 1000;
    const char *rw = ferry_config_get(cfg, "router", NULL, "route_wait");
    uint64_t rw_secs = 10;
    if (!rc && rw && !ferry_parse_duration(rw, &rw_secs))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] route_wait = '%s': expected a duration such as 10s",
                           cfg->path, rw);
    r->route_wait_ms = (long)rw_secs * 1000;
    const char *rwin = ferry_config_get(cfg, "router", NULL, "retry_window");
    uint64_t rwin_secs = 300;
    if (!rc && rwin && !ferry_parse_duration(rwin, &rwin_secs))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] retry_window = '%s': expected a duration such as 5m "
                           "(0: moves never wait for a client's retry)",
                           cfg->path, rwin);
    if (!rc && rt_pending_new(rwin_secs * 1000, &r->pending))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    const char *rj = journal ? journal : ferry_config_get(cfg, "router", NULL, "retry_journal");
    if (!rc && rj && *rj && strlen(rj) >= sizeof r->journal_path)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [router] retry_journal: the path is longer "
                           "than %zu bytes", cfg->path, sizeof r->journal_path - 1);
    if (!rc && rj && *rj && rwin_secs) /* without a window nothing is held: nothing to keep */
        snprintf(r->journal_path, sizeof r->journal_path, "%s", rj);
    const char *mir = ferry_config_get(cfg, "router", NULL, "min_insert_replicas");
    uint64_t mir_v = 0;
    if (!rc && mir && (!ferry_parse_u64(mir, &mir_v) || mir_v > 16))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] min_insert_replicas = '%s': expected 0 (every replica "
                           "of a slice must take a write) or 1..16",
                           cfg->path, mir);
    r->min_insert_replicas = (unsigned)mir_v;
    if (!rc)
        rc = ferry_config_bool(cfg, "router", NULL, "fallback_to_stale_replicas", true,
                               &r->fallback_to_stale, err);
    const char *lb = ferry_config_get(cfg, "router", NULL, "load_balancing");
    r->load_balancing = FERRY_LB_RANDOM;
    if (!rc && lb && !ferry_lb_parse(lb, &r->load_balancing))
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "%s: [router] load_balancing = '%s': expected a ClickHouse "
                           "load_balancing value (random, in_order, round_robin, ...)",
                           cfg->path, lb);
    if (!rc)
        rc = rt_budget_config(r, cfg, err);
    return rc;
}

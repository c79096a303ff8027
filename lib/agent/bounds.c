/* The bounds of the `ferry agent` daemon's HTTP server ([agent] keys of the ferry config,
 * docs/config.md): connections and deadlines (the keys every server section has,
 * lib/net/httpd_config.c) and the size of a request body, with defaults that fit the agent's
 * real transfers: a part streamed to receive may be as large as ClickHouse's largest merged part
 * and take hours, so it has no total deadline but a minimum rate; JSON operations are small. */
#include "ferry/agent.h"

#include "ferry/config.h"

int ferry_agent_bounds_read(const char *config_path, ferry_agent_bounds *b, ferry_err *err)
{
    *b = (ferry_agent_bounds){.http = {.max_connections = 128,
                                       .max_per_address = 64,
                                       .idle_timeout_s = 60,
                                       .header_timeout_s = 10,
                                       .receive_timeout_s = 0,
                                       .min_receive_rate = 1024},
                              .max_request_bytes = 4u << 20,
                              .max_receive_bytes = 200ULL << 30};
    if (!config_path)
        return FERRY_OK;
    static const char *const keys[] = {FERRY_HTTPD_CONFIG_KEYS, "max_request_bytes",
                                       "max_receive_bytes", NULL};
    ferry_config cfg = {0};
    uint64_t v = 0;
    int rc = ferry_config_load(config_path, &cfg, err);
    if (!rc)
        rc = ferry_config_check_keys(&cfg, "agent", keys, err);
    if (!rc)
        rc = ferry_httpd_config_read(&cfg, "agent", &b->http, err);
    if (!rc)
        rc = ferry_config_bytes(&cfg, "agent", NULL, "max_request_bytes", b->max_request_bytes,
                                &v, err);
    if (!rc && (v < 4096 || v > (1ULL << 30)))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [agent] max_request_bytes must be 4K..1G "
                           "(the JSON body of one operation)", cfg.path);
    if (!rc)
        b->max_request_bytes = (size_t)v;
    if (!rc)
        rc = ferry_config_bytes(&cfg, "agent", NULL, "max_receive_bytes", b->max_receive_bytes,
                                &v, err);
    if (!rc && v < (1u << 20))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [agent] max_receive_bytes must be at least "
                           "1M (one part streamed to receive)", cfg.path);
    if (!rc)
        b->max_receive_bytes = (size_t)v;
    ferry_config_free(&cfg);
    return rc;
}

void ferry_agent_bounds_apply(const ferry_agent_bounds *b, ferry_http_route *routes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (routes[i].on_body)
            routes[i].max_body = b->max_receive_bytes; /* the streamed receive */
        else if (routes[i].max_body)
            routes[i].max_body = b->max_request_bytes; /* the JSON operations */
    }
}

/* The config keys that bound one of ferry's HTTP servers (include/ferry/httpd.h,
 * FERRY_HTTPD_CONFIG_KEYS): the same names and checks in [router], [agent] and [coordinator],
 * read into the server's options over the defaults each server picks. */
#include "ferry/httpd.h"

#include "ferry/config.h"
#include "ferry/strutil.h"

static int duration_key(const ferry_config *cfg, const char *section, const char *key,
                        uint64_t max, unsigned *inout, ferry_err *err)
{
    const char *v = ferry_config_get(cfg, section, NULL, key);
    uint64_t secs = *inout;
    if (v && (!ferry_parse_duration(v, &secs) || secs > max))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s: [%s] %s = '%s': expected a duration such as 30s (at most "
                             "%llus; 0: no limit)",
                             cfg->path, section, key, v, (unsigned long long)max);
    *inout = (unsigned)secs;
    return FERRY_OK;
}

int ferry_httpd_config_read(const ferry_config *cfg, const char *section, ferry_httpd_options *o,
                            ferry_err *err)
{
    uint64_t v = 0;
    int rc = ferry_config_u64(cfg, section, NULL, "max_connections",
                              o->max_connections ? o->max_connections : 256, &v, err);
    if (!rc && (v < 1 || v > 65536))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [%s] max_connections must be 1..65536",
                           cfg->path, section);
    if (!rc)
        o->max_connections = (unsigned)v;
    if (!rc)
        rc = ferry_config_u64(cfg, section, NULL, "max_connections_per_address",
                              o->max_per_address, &v, err);
    if (!rc && v > o->max_connections)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [%s] max_connections_per_address (%llu) is "
                           "above max_connections (%u)", cfg->path, section,
                           (unsigned long long)v, o->max_connections);
    if (!rc)
        o->max_per_address = (unsigned)v;
    if (!rc)
        rc = duration_key(cfg, section, "idle_timeout", 86400, &o->idle_timeout_s, err);
    if (!rc && !o->idle_timeout_s)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [%s] idle_timeout must be above 0",
                           cfg->path, section);
    if (!rc)
        rc = duration_key(cfg, section, "header_timeout", 3600, &o->header_timeout_s, err);
    if (!rc)
        rc = duration_key(cfg, section, "receive_timeout", 86400, &o->receive_timeout_s, err);
    if (!rc)
        rc = ferry_config_bytes(cfg, section, NULL, "min_receive_rate", o->min_receive_rate, &v,
                                err);
    if (!rc && v > (1ULL << 30))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [%s] min_receive_rate must be at most 1G "
                           "(bytes per second; 0: none)", cfg->path, section);
    if (!rc)
        o->min_receive_rate = (unsigned)v;
    if (!rc)
        rc = ferry_config_u64(cfg, section, NULL, "max_requests_per_second_per_address",
                              o->max_requests_per_address, &v, err);
    if (!rc && v > 1000000)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [%s] max_requests_per_second_per_address "
                           "must be at most 1000000 (0: no limit)", cfg->path, section);
    if (!rc)
        o->max_requests_per_address = (unsigned)v;
    return rc;
}

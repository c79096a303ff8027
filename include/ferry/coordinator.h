/* The coordinator daemon's core: one active coordinator per cluster (it holds the catalog lease
 * "coordinator"), and it serves the routing table over HTTP so applications and routers can cache
 * it and refresh when its version changes.
 *
 *   GET /routing[?tenant=T[&split=K]]   {"version":N,"slices":[{"tenant","split","shards"}]}
 *                                       with header X-Ferry-Routing-Version: N
 *   GET /routing?known=N&wait=S         long poll: answers as soon as the version differs from N,
 *                                       or after S seconds (max 60) with 304 and no body
 *   GET /health                         {"lease":true,"routing_version":N,"owner":"host:pid"}
 *   GET /metrics                        Prometheus text: lease, routing version, shards' bytes,
 *                                       fill and slices, moves in flight by state, tier backlog
 *   GET /                               the status page (HTML, inline SVG: shards' fill against
 *                                       the target, fill over 24 h, moves in flight, largest
 *                                       tenants, tiering, the pause and the autopilot's runs)
 *
 * One watcher thread follows the routing version (a ZooKeeper watch, or SQLite polling, through
 * ferry_catalog_routing_wait) and keeps the whole table in memory; requests are served from that
 * copy, so readers never load the catalog. */
#ifndef FERRY_COORDINATOR_H
#define FERRY_COORDINATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

typedef struct ferry_coord ferry_coord;
struct ferry_httpd_options;
struct ferry_config;

/* One scheduled job: fn(arg) every every_s seconds (first after one interval). */
typedef struct ferry_coord_job {
    const char *name; /* for logs */
    void (*fn)(void *arg);
    void *arg;
    unsigned every_s;
} ferry_coord_job;

typedef struct ferry_coord_options {
    const char *catalog_url; /* required */
    const char *bind_addr;   /* NULL: 127.0.0.1 */
    uint16_t port;           /* 0: any free port */
    const char *owner;       /* lease owner description; NULL: "hostname:pid" */
    /* Scheduled work (e.g. tiering): periodic(periodic_arg) is called from its own thread every
     * periodic_s seconds (first after one interval) while the lease is held; a call that runs
     * longer delays the next one. NULL or 0: none. */
    void (*periodic)(void *arg);
    void *periodic_arg;
    unsigned periodic_s;
    /* More scheduled work, the same way (each job on its own thread, e.g. tiering and the split
     * manager). */
    const struct ferry_coord_job *jobs;
    size_t n_jobs;
    /* The status page's fill history: one sample of every shard every history_every_s seconds
     * (0: 300), the last 24 h kept, and saved to history_file when not NULL (read back at
     * start, so another coordinator taking over keeps it). */
    unsigned history_every_s;
    const char *history_file;
    /* The autopilot's maintenance window, shown on the status page and in /metrics (whether
     * open, when it opens next); NULL: none. Copied. */
    const struct ferry_ap_window *window;
    /* The HTTP server's bounds ([coordinator] keys, FERRY_HTTPD_CONFIG_KEYS; bind_addr and port
     * are taken from above). NULL: ferry_coord_http_defaults. Every route is a GET: a body
     * over 64 KiB is refused (413). */
    const struct ferry_httpd_options *http;
} ferry_coord_options;

/* The coordinator's default bounds: 256 connections, 64 per address, idle 60 s, headers within
 * 10 s, a body within 60 s. */
void ferry_coord_http_defaults(struct ferry_httpd_options *o);

/* The [coordinator] section of cfg into o: history_interval (a duration from 1s to 24h) and
 * history_file, and the HTTP server's bounds (FERRY_HTTPD_CONFIG_KEYS) into *http, which starts
 * from ferry_coord_http_defaults and becomes o->http. Strings are borrowed from cfg. An unknown
 * key or a bad value is FERRY_EINVAL naming the file. */
int ferry_coord_config_read(const struct ferry_config *cfg, ferry_coord_options *o,
                            struct ferry_httpd_options *http, ferry_err *err);

/* Takes the lease (FERRY_ECONFLICT naming the holder when another coordinator runs), loads the
 * routing table and starts serving. The caller owns *out (ferry_coord_stop). */
int ferry_coord_start(const ferry_coord_options *opt, ferry_coord **out, ferry_err *err);
uint16_t ferry_coord_port(const ferry_coord *c);
/* False once the lease was lost (e.g. a ZooKeeper session expired): the caller must stop. */
bool ferry_coord_healthy(ferry_coord *c);
/* Replaces the maintenance window the status page and /metrics show (a config reload). */
void ferry_coord_set_window(ferry_coord *c, const struct ferry_ap_window *w);
/* Stops serving, releases the lease, frees c. NULL is fine. */
void ferry_coord_stop(ferry_coord *c);

#endif

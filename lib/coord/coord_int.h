/* The coordinator's internals shared by its files: the daemon (coordinator.c: lease, routing
 * table, scheduled jobs) and its operator view (status_page.c: GET /metrics, GET /, the fill
 * history). */
#ifndef FERRY_COORD_INT_H
#define FERRY_COORD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferry/autopilot.h"
#include "ferry/catalog.h"
#include "ferry/coordinator.h"
#include "ferry/httpd.h"
#include "ferry/metrics.h"

struct ferry_cluster_status;

typedef struct coord_point {
    int64_t t;      /* unix seconds */
    uint64_t bytes;
    double fill;    /* negative: no capacity */
} coord_point;

typedef struct coord_series {
    char shard[FERRY_NAME_MAX];
    coord_point *points; /* history_points entries, oldest first */
    size_t n;
} coord_series;

#define COORD_MAX_SERIES 256 /* shards plotted (the history of more is not kept) */

typedef struct coord_view {
    /* the cluster status, cached a few seconds (status_page.c, status_get); under status_mu,
     * read from the catalog under the coordinator's cat_mu */
    pthread_mutex_t status_mu;
    struct ferry_cluster_status *status;
    double status_at;
    bool refresh_wanted; /* a request found it older than its refresh age */
    uint64_t status_errors;
    ferry_histogram catalog_read;
    /* the fill history, under mu */
    pthread_mutex_t mu;
    coord_series series[COORD_MAX_SERIES];
    size_t n_series;
    unsigned history_every_s;
    size_t history_points;
    char history_file[1024];
    ferry_ap_window window; /* the autopilot's maintenance window (unset: none), under mu */
} coord_view;

struct ferry_coord {
    ferry_catalog *cat;       /* lease and filtered reads, under cat_mu */
    ferry_catalog *watch_cat; /* the watcher thread's own handle */
    ferry_lease *lease;
    pthread_mutex_t cat_mu;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    char *cache;      /* routing JSON, under mu */
    uint64_t version; /* under mu */
    bool stopping;    /* under mu */
    bool lease_lost;  /* under mu */
    pthread_t watcher;
    bool watcher_started;
    ferry_httpd *httpd;
    char owner[256];
    struct ticker {
        ferry_coord *c;
        ferry_coord_job job;
        pthread_t th;
        bool started;
    } tickers[12]; /* scheduled work, each job on its own thread */
    size_t n_tickers;
    coord_view view;
    bool view_ready;
};


int coord_view_init(ferry_coord *c, const ferry_coord_options *opt, ferry_err *err);
void coord_view_free(ferry_coord *c);
/* A scheduled job: records every shard's bytes and fill (arg: the coordinator). */
void coord_history_sample(void *arg);
/* A scheduled job (every second): reads the cluster status again when a request found the
 * cached one old (arg: the coordinator). */
void coord_status_refresh(void *arg);
void coord_on_metrics(ferry_http_req *req, void *ctx);
void coord_on_page(ferry_http_req *req, void *ctx);

/* The maintenance window shown (a copy, read under view.mu). */
ferry_ap_window coord_window(ferry_coord *c);

#endif

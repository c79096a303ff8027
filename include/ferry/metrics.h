/* Prometheus text exposition (format 0.0.4) for ferry's servers: families with HELP and TYPE,
 * samples with escaped labels, and histograms with fixed buckets (seconds). The router, the
 * agent and the coordinator each render their GET /metrics with it. Pure apart from the
 * histogram's mutex: no I/O.
 *
 * Names follow Prometheus conventions: a `ferry_` prefix, base units (seconds, bytes), `_total`
 * for counters. Labels carry bounded sets only (shard, table, state, kind, outcome): never a
 * tenant or a query, so a series count does not grow with the data. */
#ifndef FERRY_METRICS_H
#define FERRY_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"

enum ferry_metric_type { FERRY_METRIC_COUNTER, FERRY_METRIC_GAUGE, FERRY_METRIC_HISTOGRAM };

/* "# HELP name help" and "# TYPE name type" (help escaped: \ and newline). */
int ferry_metrics_family(ferry_buf *out, const char *name, enum ferry_metric_type type,
                         const char *help);
/* One sample: name{k1="v1",...} value. labels: NULL-terminated pairs {k1, v1, k2, v2, ..., NULL}
 * (may be NULL); values escaped (\, ", newline). Integral values print without a fraction. */
int ferry_metrics_sample(ferry_buf *out, const char *name, const char *const *labels,
                         double value);

#define FERRY_HIST_BUCKETS 14
/* A histogram of durations in seconds with the buckets 0.0005 .. 30 (and +Inf). Thread-safe. */
typedef struct ferry_histogram {
    pthread_mutex_t mu;
    uint64_t counts[FERRY_HIST_BUCKETS + 1]; /* per bucket, not cumulative; last: +Inf */
    uint64_t count;
    double sum;
} ferry_histogram;

void ferry_histogram_init(ferry_histogram *h);
void ferry_histogram_destroy(ferry_histogram *h);
void ferry_histogram_observe(ferry_histogram *h, double seconds);
/* The histogram's _bucket (cumulative, le="..."), _sum and _count samples with labels (as for
 * ferry_metrics_sample; "le" is added). The family line is the caller's. */
int ferry_histogram_render(ferry_histogram *h, ferry_buf *out, const char *name,
                           const char *const *labels);

#endif

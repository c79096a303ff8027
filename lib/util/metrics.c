/* Prometheus text exposition (include/ferry/metrics.h). */
#include "ferry/metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const double BOUNDS[FERRY_HIST_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                                  10,     30};

static int escaped(ferry_buf *out, const char *s, bool quote)
{
    int rc = 0;
    for (; *s && !rc; s++) {
        if (*s == '\\')
            rc = ferry_buf_puts(out, "\\\\");
        else if (*s == '\n')
            rc = ferry_buf_puts(out, "\\n");
        else if (*s == '"' && quote)
            rc = ferry_buf_puts(out, "\\\"");
        else
            rc = ferry_buf_putc(out, *s);
    }
    return rc;
}

int ferry_metrics_family(ferry_buf *out, const char *name, enum ferry_metric_type type,
                         const char *help)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    int rc = ferry_buf_printf(out, "# HELP %s ", name);
    if (!rc)
        rc = escaped(out, help, false);
    if (!rc)
        rc = ferry_buf_printf(out, "\n# TYPE %s %s\n", name, types[type]);
    return rc;
}

static int labels_out(ferry_buf *out, const char *const *labels, const char *le)
{
    int rc = 0, n = 0;
    if ((!labels || !labels[0]) && !le)
        return 0;
    rc = ferry_buf_putc(out, '{');
    for (size_t i = 0; labels && labels[i] && labels[i + 1] && !rc; i += 2) {
        rc = ferry_buf_printf(out, "%s%s=\"", n++ ? "," : "", labels[i]);
        if (!rc)
            rc = escaped(out, labels[i + 1], true);
        if (!rc)
            rc = ferry_buf_putc(out, '"');
    }
    if (le && !rc)
        rc = ferry_buf_printf(out, "%sle=\"%s\"", n++ ? "," : "", le);
    if (!rc)
        rc = ferry_buf_putc(out, '}');
    return rc;
}

static int value_out(ferry_buf *out, double v)
{
    if (isnan(v))
        return ferry_buf_puts(out, " NaN\n");
    if (isinf(v))
        return ferry_buf_puts(out, v > 0 ? " +Inf\n" : " -Inf\n");
    if (v == floor(v) && fabs(v) < 9.0e15)
        return ferry_buf_printf(out, " %.0f\n", v);
    return ferry_buf_printf(out, " %.9g\n", v);
}

int ferry_metrics_sample(ferry_buf *out, const char *name, const char *const *labels,
                         double value)
{
    int rc = ferry_buf_puts(out, name);
    if (!rc)
        rc = labels_out(out, labels, NULL);
    if (!rc)
        rc = value_out(out, value);
    return rc;
}

void ferry_histogram_init(ferry_histogram *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
}

void ferry_histogram_destroy(ferry_histogram *h) { pthread_mutex_destroy(&h->mu); }

void ferry_histogram_observe(ferry_histogram *h, double seconds)
{
    size_t i = 0;
    while (i < FERRY_HIST_BUCKETS && seconds > BOUNDS[i])
        i++;
    pthread_mutex_lock(&h->mu);
    h->counts[i]++;
    h->count++;
    h->sum += seconds;
    pthread_mutex_unlock(&h->mu);
}

int ferry_histogram_render(ferry_histogram *h, ferry_buf *out, const char *name,
                           const char *const *labels)
{
    uint64_t counts[FERRY_HIST_BUCKETS + 1], count;
    double sum;
    pthread_mutex_lock(&h->mu);
    memcpy(counts, h->counts, sizeof counts);
    count = h->count;
    sum = h->sum;
    pthread_mutex_unlock(&h->mu);
    char n[256], le[32];
    int rc = 0;
    uint64_t cum = 0;
    snprintf(n, sizeof n, "%s_bucket", name);
    for (size_t i = 0; i <= FERRY_HIST_BUCKETS && !rc; i++) {
        cum += counts[i];
        if (i < FERRY_HIST_BUCKETS)
            snprintf(le, sizeof le, "%g", BOUNDS[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        rc = ferry_buf_puts(out, n);
        if (!rc)
            rc = labels_out(out, labels, le);
        if (!rc)
            rc = value_out(out, (double)cum);
    }
    snprintf(n, sizeof n, "%s_sum", name);
    if (!rc)
        rc = ferry_metrics_sample(out, n, labels, sum);
    snprintf(n, sizeof n, "%s_count", name);
    if (!rc)
        rc = ferry_metrics_sample(out, n, labels, (double)count);
    return rc;
}

/* Read throughput of one slice served by N replicas, with each query sent to ONE replica chosen
 * by lib/route's selector (ferry_rsel_select, then begin/end around the request) DIRECTLY, not
 * through ferry's router (its SELECT path is being built separately). Client threads loop for
 * the given time sending the same query; errors are reported to the selector (a failed replica
 * sorts last until its count decays). Prints one JSON object.
 *
 *   bench_replica_read --urls URL[,URL...] --query SQL [--seconds S] [--threads T]
 *                      [--policy random|round_robin|least_request|in_order|...]
 *
 * Label: "selector-direct". bench/replicas_read.sh runs it against a lab with rf 1 and rf 2. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/replica_select.h"
#include "ferry/strutil.h"

#define MAX_REPLICAS 16
#define MAX_THREADS 64

typedef struct shared {
    ferry_replica_selector *sel;
    pthread_mutex_t lock;
    const char *urls[MAX_REPLICAS];
    size_t n;
    const char *query;
    double deadline;
    uint64_t done[MAX_REPLICAS], errors[MAX_REPLICAS];
    uint64_t latency_us_sum;
} shared;

typedef struct worker {
    shared *s;
    unsigned id;
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    worker *w = arg;
    shared *s = w->s;
    ferry_ch_client *cl[MAX_REPLICAS] = {0};
    ferry_rsel_rng rng;
    ferry_rsel_rng_seed(&rng, 0x5eed + w->id);
    for (size_t i = 0; i < s->n; i++) {
        ferry_ch_options o = {.url = s->urls[i], .max_attempts = 1};
        ferry_err err = {0};
        if (ferry_ch_client_new(&o, &cl[i], &err)) {
            fprintf(stderr, "bench_replica_read: %s\n", err.msg);
            goto out;
        }
    }
    ferry_buf out = FERRY_BUF_INIT;
    while (now_s() < s->deadline) {
        size_t order[MAX_REPLICAS];
        ferry_err err = {0};
        pthread_mutex_lock(&s->lock);
        int rc = ferry_rsel_select(s->sel, (uint64_t)(now_s() * 1000), &rng, order, &err);
        if (!rc)
            rc = ferry_rsel_begin(s->sel, order[0], &err);
        pthread_mutex_unlock(&s->lock);
        if (rc) {
            fprintf(stderr, "bench_replica_read: %s\n", err.msg);
            break;
        }
        size_t r = order[0];
        double t0 = now_s();
        ferry_buf_reset(&out);
        rc = ferry_ch_query_buf(cl[r], s->query, "TabSeparated", &out, NULL, &err);
        double t1 = now_s();
        pthread_mutex_lock(&s->lock);
        ferry_err e2 = {0};
        (void)ferry_rsel_end(s->sel, r, &e2);
        if (rc) {
            (void)ferry_rsel_report_error(s->sel, r, &e2);
            s->errors[r]++;
        } else {
            (void)ferry_rsel_report_success(s->sel, r, &e2);
            s->done[r]++;
            s->latency_us_sum += (uint64_t)((t1 - t0) * 1e6);
        }
        pthread_mutex_unlock(&s->lock);
    }
    ferry_buf_free(&out);
out:
    for (size_t i = 0; i < s->n; i++)
        ferry_ch_client_free(cl[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *urls = NULL, *query = NULL, *policy = "random";
    uint64_t seconds = 10, threads = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--urls"))
            urls = argv[i + 1];
        else if (!strcmp(argv[i], "--query"))
            query = argv[i + 1];
        else if (!strcmp(argv[i], "--policy"))
            policy = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds") && ferry_parse_u64(argv[i + 1], &seconds))
            ;
        else if (!strcmp(argv[i], "--threads") && ferry_parse_u64(argv[i + 1], &threads))
            ;
        else {
            fprintf(stderr, "bench_replica_read: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!urls || !query || threads < 1 || threads > MAX_THREADS || seconds < 1) {
        fprintf(stderr, "usage: bench_replica_read --urls URL[,URL...] --query SQL [--seconds S] "
                        "[--threads 1..%d] [--policy P]\n", MAX_THREADS);
        return 2;
    }
    shared s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    s.query = query;
    char *copy = strdup(urls), *save = NULL;
    const char *hosts[MAX_REPLICAS];
    for (char *u = strtok_r(copy, ",", &save); u && s.n < MAX_REPLICAS;
         u = strtok_r(NULL, ",", &save)) {
        s.urls[s.n] = u;
        hosts[s.n] = u; /* the host name policies are not used here: any non-empty name */
        s.n++;
    }
    ferry_rsel_options opt;
    ferry_rsel_options_default(&opt);
    if (!ferry_lb_parse(policy, &opt.query.policy) || ferry_lb_uses_hostname(opt.query.policy)) {
        fprintf(stderr, "bench_replica_read: policy '%s' unknown or needs a host name\n", policy);
        return 2;
    }
    ferry_err err = {0};
    if (ferry_rsel_create(hosts, NULL, s.n, &opt, &s.sel, &err)) {
        fprintf(stderr, "bench_replica_read: %s\n", err.msg);
        return 1;
    }
    pthread_t th[MAX_THREADS];
    worker w[MAX_THREADS];
    double t0 = now_s();
    s.deadline = t0 + (double)seconds;
    for (unsigned i = 0; i < threads; i++) {
        w[i] = (worker){&s, i};
        pthread_create(&th[i], NULL, run, &w[i]);
    }
    for (unsigned i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double secs = now_s() - t0;
    uint64_t total = 0, errs = 0;
    json_t *per = json_array();
    for (size_t i = 0; i < s.n; i++) {
        total += s.done[i];
        errs += s.errors[i];
        json_array_append_new(per, json_pack("{s:s, s:I, s:I}", "url", s.urls[i], "queries",
                                             (json_int_t)s.done[i], "errors",
                                             (json_int_t)s.errors[i]));
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:o}", "mode",
                          "selector-direct (not through the router)", "policy", policy,
                          "replicas", (json_int_t)s.n, "threads", (json_int_t)threads, "seconds",
                          secs, "queries", (json_int_t)total, "errors", (json_int_t)errs, "qps",
                          (double)total / secs, "mean_latency_ms",
                          total ? (double)s.latency_us_sum / (double)total / 1000.0 : 0.0,
                          "per_replica", per);
    json_dumpf(o, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(o);
    ferry_rsel_free(s.sel);
    free(copy);
    pthread_mutex_destroy(&s.lock);
    return errs && !total ? 1 : 0;
}

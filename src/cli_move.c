/* Shared pieces of `ferry move`, `ferry rebalance` and `ferry shard`: config and catalog,
 * progress display, the parallel runner, plan printing. */
#include "cli_move.h"

#include "ferry/clock.h"
#include "ferry/plan_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ferry/pause.h"
#include "ferry/replica.h"
#include "ferry/strutil.h"

static void on_progress(const ferry_move_progress *p, void *arg)
{
    cli_move_env *e = arg;
    pthread_mutex_lock(&e->lock);
    if (e->json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f}",
                              "event", "progress", "move", p->id, "tenant", p->tenant, "split",
                              (json_int_t)p->split, "from", p->from, "to", p->to, "state",
                              p->state, "bytes_done", (json_int_t)p->bytes_done, "bytes_total",
                              (json_int_t)p->bytes_total, "parts_done", (json_int_t)p->parts_done,
                              "parts_total", (json_int_t)p->parts_total, "elapsed_s",
                              p->elapsed_s);
        json_dumpf(o, stdout, JSON_COMPACT);
        putchar('\n');
        fflush(stdout);
        json_decref(o);
    } else if (e->bar) {
        double now = ferry_clock_s();
        if (now - e->last_bar >= 0.1 || p->parts_done == p->parts_total) {
            e->last_bar = now;
            double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 0;
            if (frac > 1)
                frac = 1;
            char bar[31], a[32], b[32], eta[32] = "--";
            int fill = (int)(frac * 30);
            for (int i = 0; i < 30; i++)
                bar[i] = i < fill ? '#' : '.';
            bar[30] = '\0';
            if (frac > 0.01 && frac < 1)
                snprintf(eta, sizeof eta, "%.0fs", p->elapsed_s * (1 - frac) / frac);
            fprintf(stderr, "\r%s/%u %-8s [%s] %s/%s %zu/%zu parts ETA %s   ", p->tenant,
                    p->split, p->state, bar, ferry_fmt_bytes(p->bytes_done, a, sizeof a),
                    ferry_fmt_bytes(p->bytes_total, b, sizeof b), p->parts_done, p->parts_total,
                    eta);
            fflush(stderr);
        }
    }
    pthread_mutex_unlock(&e->lock);
}

int cli_move_env_init(cli_move_env *e, const char *cmd, const char *config, bool json,
                      ferry_err *err)
{
    memset(e, 0, sizeof *e);
    e->cmd = cmd;
    e->json = json;
    e->bar = !json && isatty(2);
    pthread_mutex_init(&e->lock, NULL);
    const char *path = cli_config_path(config);
    if (!path)
        return ferry_err_set(err, FERRY_EINVAL, "needs --config FILE (or FERRY_CONFIG)");
    int rc = ferry_config_load(path, &e->cfg, err);
    const char *url = NULL;
    if (!rc)
        rc = ferry_config_require(&e->cfg, "cluster", NULL, "catalog", &url, err);
    if (rc)
        return rc;
    snprintf(e->catalog_url, sizeof e->catalog_url, "%s", url);
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(e->owner, sizeof e->owner, "%.60s:%ld", host, (long)getpid());
    e->opts.catalog_url = e->catalog_url;
    e->opts.cfg = &e->cfg;
    e->opts.owner = e->owner;
    e->opts.progress = on_progress;
    e->opts.progress_arg = e;
    return FERRY_OK;
}

void cli_move_env_free(cli_move_env *e)
{
    ferry_config_free(&e->cfg);
    pthread_mutex_destroy(&e->lock);
}

json_t *cli_move_result_json(const ferry_move_result *r)
{
    double cold_ratio = r->cold_bytes ? (double)r->cold_copied / (double)r->cold_bytes : 0;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:f, s:I, s:f}",
                     "move", r->id, "tenant", r->tenant, "split", (json_int_t)r->split, "from",
                     r->from, "to", r->to, "state", ferry_move_state_name(r->state), "resumed",
                     r->resumed, "partitions", (json_int_t)r->partitions, "hot_parts",
                     (json_int_t)r->hot_parts, "cold_parts", (json_int_t)r->cold_parts,
                     "hot_bytes", (json_int_t)r->hot_bytes, "hot_copied_bytes",
                     (json_int_t)r->hot_copied, "cold_bytes", (json_int_t)r->cold_bytes,
                     "cold_copied_bytes", (json_int_t)r->cold_copied, "cold_copied_ratio",
                     cold_ratio, "rows", (json_int_t)r->rows, "seconds", r->seconds);
    json_t *ms = json_object();
    for (int s = 0; s < FERRY_MOVE_STATES; s++)
        if (r->state_ms[s] > 0)
            json_object_set_new(ms, ferry_move_state_name((enum ferry_move_state)s),
                                json_integer((json_int_t)(r->state_ms[s] + 0.5)));
    json_object_set_new(o, "state_ms", ms);
    json_object_set_new(o, "statements", json_integer((json_int_t)r->statements));
    json_object_set_new(o, "agent_requests", json_integer((json_int_t)r->agent_requests));
    json_object_set_new(o, "catalog_writes", json_integer((json_int_t)r->catalog_writes));
    json_object_set_new(o, "freezes", json_integer((json_int_t)r->freezes));
    json_object_set_new(o, "parts_sent_live", json_integer((json_int_t)r->parts_sent_live));
    return o;
}

void cli_move_print_result(cli_move_env *e, const ferry_move_result *r, int rc,
                           const ferry_err *err)
{
    pthread_mutex_lock(&e->lock);
    if (e->bar)
        fprintf(stderr, "\n");
    if (e->json) {
        json_t *o = cli_move_result_json(r);
        json_object_set_new(o, "event", json_string("move"));
        if (rc)
            json_object_set_new(o, "error", json_string(err->msg));
        json_dumpf(o, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar('\n');
        json_decref(o);
    } else if (!rc) {
        char a[32], b[32], c[32], d[32];
        printf("moved %s/%u %s -> %s: %zu partitions, %llu rows; cold %s real, %s copied; hot %s "
               "real, %s copied; %.1fs%s\n",
               r->tenant, r->split, r->from, r->to, r->partitions, (unsigned long long)r->rows,
               ferry_fmt_bytes(r->cold_bytes, a, sizeof a),
               ferry_fmt_bytes(r->cold_copied, b, sizeof b),
               ferry_fmt_bytes(r->hot_bytes, c, sizeof c),
               ferry_fmt_bytes(r->hot_copied, d, sizeof d), r->seconds,
               r->resumed ? " (resumed)" : "");
    }
    fflush(stdout);
    pthread_mutex_unlock(&e->lock);
}

json_t *cli_plan_json(const ferry_rebalance_plan *p)
{
    json_t *moves = json_array();
    for (size_t i = 0; i < p->n_moves; i++) {
        const ferry_planned_move *m = &p->moves[i];
        json_array_append_new(moves, json_pack("{s:s, s:s, s:I, s:s, s:s, s:I}", "kind",
                                               ferry_rebalance_step_name(m->kind), "tenant", m->tenant,
                                               "split", (json_int_t)m->split, "from", m->from,
                                               "to", m->to, "bytes", (json_int_t)m->bytes));
    }
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:f, s:o}", "slices", (json_int_t)p->slices,
                          "total_bytes", (json_int_t)p->total_bytes, "moved",
                          (json_int_t)p->n_moves, "moved_bytes", (json_int_t)p->moved_bytes,
                          "fill", p->fill, "moves", moves);
    if (o && p->spread >= 0) /* with --skew */
        json_object_set_new(o, "spread", json_real(p->spread));
    if (o && p->evened)
        json_object_set_new(o, "evened", json_true());
    return o;
}

void cli_plan_print(const ferry_rebalance_plan *p)
{
    char a[32], b[32];
    printf("plan: %zu slices, %zu moves, %s of %s moved\n", p->slices, p->n_moves,
           ferry_fmt_bytes(p->moved_bytes, a, sizeof a),
           ferry_fmt_bytes(p->total_bytes, b, sizeof b));
    if (p->evened)
        printf("  the shards' fill spread %.2f is above the skew: placed by a fill target of "
               "%.2f to even it\n", p->spread, p->fill);
    for (size_t i = 0; i < p->n_moves; i++) {
        const ferry_planned_move *m = &p->moves[i];
        if (m->kind == FERRY_PLAN_DROP)
            printf("  %s/split%u drop replica on %s\n", m->tenant, m->split, m->from);
        else
            printf("  %s/split%u %s -> %s  %s%s\n", m->tenant, m->split, m->from, m->to,
                   ferry_fmt_bytes(m->bytes, a, sizeof a),
                   m->kind == FERRY_PLAN_CLONE ? "  (new replica, source kept)" : "");
    }
}

typedef struct plan_print {
    cli_move_env *e;
    json_t *results;
    ferry_catalog *cat; /* for the pause; NULL with --force */
    bool paused;
} plan_print;

/* No step starts once the cluster is paused (ferry pause); the running ones finish. */
static bool may_start(const ferry_planned_move *m, void *arg)
{
    (void)m;
    plan_print *pp = arg;
    ferry_err err = {0};
    if (!pp->cat || pp->paused)
        return !pp->paused;
    if (ferry_pause_check(pp->cat, pp->e->cmd, &err) == FERRY_ECONFLICT) {
        pp->paused = true;
        fprintf(stderr, "ferry %s: %s\n", pp->e->cmd, err.msg);
    }
    return !pp->paused;
}

/* Each finished step: printed, and its JSON kept for the summary (ferry_plan_run serialises
 * the calls). */
static void on_step(const ferry_planned_move *m, const ferry_move_result *res, int rc,
                    const ferry_err *err, void *arg)
{
    (void)m;
    plan_print *pp = arg;
    cli_move_print_result(pp->e, res, rc, err);
    if (pp->results)
        json_array_append_new(pp->results, cli_move_result_json(res));
}

int cli_run_plan(cli_move_env *e, const ferry_rebalance_plan *p, unsigned max_parallel,
                 unsigned max_per_shard, uint64_t max_bytes_per_second,
                 uint64_t max_bytes_per_second_per_shard, size_t *done, size_t *failed,
                 json_t *results, ferry_err *err)
{
    plan_print pp = {e, results, NULL, false};
    if (!e->force) {
        int orc = ferry_catalog_open(e->catalog_url, &pp.cat, err);
        if (orc)
            return orc;
    }
    ferry_plan_run_opts o = {.max_parallel = max_parallel, .max_per_shard = max_per_shard,
                             .max_bytes_per_second = max_bytes_per_second,
                             .max_bytes_per_second_per_shard = max_bytes_per_second_per_shard,
                             .batch = e->batch, .on_step = on_step,
                             .may_start = may_start, .arg = &pp};
    ferry_plan_run_result r;
    int rc = ferry_plan_run(&e->opts, p, &o, &r, err);
    ferry_catalog_close(pp.cat);
    *done = r.done;
    *failed = r.failed + r.deferred;
    if (!rc && r.deferred)
        rc = ferry_err_set(err, FERRY_ECONFLICT, "the cluster was paused: %zu step(s) not "
                           "started (ferry resume, then run it again)", r.deferred);
    return rc;
}

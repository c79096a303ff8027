/* The coordinator's view for operators: GET /metrics (Prometheus text) and GET / (an HTML status
 * page with inline SVG plots, no external assets), both from one cluster status
 * (ferry_cluster_status_read) cached for a few seconds and refreshed in the background while
 * requests come (status_get), and the fill history the page plots: a
 * sampler records every shard's bytes and fill every history_every_s seconds, bounded to the
 * last 24 h (288 samples at the default 5 min), in memory and, when a history file is given, in
 * that file (rewritten atomically) so a restarted or newly elected coordinator keeps it.
 *
 * Metric names and labels are bounded by the cluster's shape (shards, move states): no tenant is
 * ever a label. The page lists the largest tenants by name: it is an operator's page. */
#include "coord_int.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"
#include "ferry/cluster_status.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/metrics.h"
#include "ferry/strutil.h"

#define STATUS_MAX_AGE_S 5 /* older: refreshed in the background (coord_status_refresh) */
#define STATUS_STALE_S 60  /* older: read before answering */
#define HISTORY_SPAN_S (24 * 3600)
#define TOP_TENANTS 10

/* ---- the cached status ------------------------------------------------------------------------ */

/* Reads the status from the catalog (under cat_mu) and makes it the cached one (under
 * status_mu, so requests that only copy the cache never wait for a read). */
static int status_refresh(ferry_coord *c, ferry_err *err)
{
    coord_view *v = &c->view;
    ferry_cluster_status *s = calloc(1, sizeof *s);
    if (!s)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    pthread_mutex_lock(&c->cat_mu);
    double t0 = ferry_clock_s();
    int rc = ferry_cluster_status_read(c->cat, TOP_TENANTS, s, err);
    ferry_histogram_observe(&v->catalog_read, ferry_clock_s() - t0);
    pthread_mutex_unlock(&c->cat_mu);
    pthread_mutex_lock(&v->status_mu);
    if (!rc) {
        ferry_cluster_status *old = v->status;
        v->status = s;
        v->status_at = ferry_clock_s();
        s = old;
    } else {
        v->status_errors++;
    }
    pthread_mutex_unlock(&v->status_mu);
    if (s) {
        if (!rc)
            ferry_cluster_status_free(s);
        free(s);
    }
    return rc;
}

/* A copy of the cached status (under status_mu); *out NULL on allocation failure. */
static int status_copy(coord_view *v, ferry_cluster_status **out, ferry_err *err)
{
    ferry_cluster_status *cp = calloc(1, sizeof *cp);
    if (cp) {
        *cp = *v->status;
        cp->shards = calloc(v->status->n_shards + 1, sizeof *cp->shards);
        cp->unknown = calloc(v->status->n_unknown + 1, sizeof *cp->unknown);
        cp->top = calloc(v->status->n_top + 1, sizeof *cp->top);
        memset(&cp->moves, 0, sizeof cp->moves);
        cp->moves.items = calloc(v->status->moves.n + 1, sizeof *cp->moves.items);
        cp->autopilot = calloc(v->status->n_autopilot + 1, sizeof *cp->autopilot);
        cp->repair_needed = calloc(v->status->n_repair_needed + 1, sizeof *cp->repair_needed);
    }
    if (!cp || !cp->shards || !cp->unknown || !cp->top || !cp->moves.items || !cp->autopilot ||
        !cp->repair_needed) {
        if (cp)
            ferry_cluster_status_free(cp);
        free(cp);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    memcpy(cp->shards, v->status->shards, v->status->n_shards * sizeof *cp->shards);
    if (v->status->n_unknown)
        memcpy(cp->unknown, v->status->unknown, v->status->n_unknown * sizeof *cp->unknown);
    memcpy(cp->top, v->status->top, v->status->n_top * sizeof *cp->top);
    memcpy(cp->autopilot, v->status->autopilot, v->status->n_autopilot * sizeof *cp->autopilot);
    if (v->status->n_repair_needed) /* the records own no memory */
        memcpy(cp->repair_needed, v->status->repair_needed,
               v->status->n_repair_needed * sizeof *cp->repair_needed);
    for (size_t i = 0; i < v->status->moves.n; i++)
        cp->moves.items[i] = v->status->moves.items[i]; /* moves own no memory */
    cp->moves.n = v->status->moves.n;
    *out = cp;
    return FERRY_OK;
}

/* The cached status, as a copy the caller frees. A request never waits for the catalog while
 * the cache is at most STATUS_STALE_S old: one older than STATUS_MAX_AGE_S is served and a
 * refresh is asked of the status job (coord_status_refresh, every second), so a page or a scrape
 * answers in milliseconds at any cluster size and sees the catalog of a few seconds ago; only
 * without a status that recent (the first request, or after a quiet minute) is it read now. */
static int status_get(ferry_coord *c, ferry_cluster_status **out, ferry_err *err)
{
    coord_view *v = &c->view;
    *out = NULL;
    pthread_mutex_lock(&v->status_mu);
    double age = v->status ? ferry_clock_s() - v->status_at : 0;
    if (v->status && age <= STATUS_STALE_S) {
        if (age > STATUS_MAX_AGE_S)
            v->refresh_wanted = true;
        int rc = status_copy(v, out, err);
        pthread_mutex_unlock(&v->status_mu);
        return rc;
    }
    pthread_mutex_unlock(&v->status_mu);
    int rc = status_refresh(c, err);
    pthread_mutex_lock(&v->status_mu);
    if (!rc)
        rc = v->status ? status_copy(v, out, err)
                       : ferry_err_set(err, FERRY_EINTERNAL, "no cluster status");
    pthread_mutex_unlock(&v->status_mu);
    return rc;
}

void coord_status_refresh(void *arg)
{
    ferry_coord *c = arg;
    pthread_mutex_lock(&c->view.status_mu);
    bool wanted = c->view.refresh_wanted;
    c->view.refresh_wanted = false;
    pthread_mutex_unlock(&c->view.status_mu);
    ferry_err err = {0};
    if (wanted && status_refresh(c, &err))
        FLOG_WARN("msg=\"coordinator: reading the cluster status failed\" err=\"%s\"", err.msg);
}

static void status_put(ferry_cluster_status *s)
{
    if (!s)
        return;
    ferry_cluster_status_free(s);
    free(s);
}

/* ---- the fill history ------------------------------------------------------------------------- */

static coord_series *series_of(coord_view *v, const char *shard)
{
    for (size_t i = 0; i < v->n_series; i++)
        if (!strcmp(v->series[i].shard, shard))
            return &v->series[i];
    if (v->n_series == COORD_MAX_SERIES)
        return NULL;
    coord_series *s = &v->series[v->n_series++];
    memset(s, 0, sizeof *s);
    snprintf(s->shard, sizeof s->shard, "%s", shard);
    return s;
}

static void series_add(coord_view *v, coord_series *s, int64_t t, uint64_t bytes, double fill)
{
    size_t cap = v->history_points;
    if (!s->points && !(s->points = calloc(cap, sizeof *s->points)))
        return;
    if (s->n == cap) {
        memmove(s->points, s->points + 1, (cap - 1) * sizeof *s->points);
        s->n--;
    }
    s->points[s->n++] = (coord_point){t, bytes, fill};
}

static void history_save(coord_view *v)
{
    if (!v->history_file[0])
        return;
    json_t *root = json_object(), *shards = json_object();
    for (size_t i = 0; root && shards && i < v->n_series; i++) {
        json_t *a = json_array();
        for (size_t k = 0; a && k < v->series[i].n; k++) {
            const coord_point *p = &v->series[i].points[k];
            json_array_append_new(a, json_pack("[I, I, f]", (json_int_t)p->t,
                                               (json_int_t)p->bytes, p->fill));
        }
        json_object_set_new(shards, v->series[i].shard, a);
    }
    json_object_set_new(root, "shards", shards);
    char tmp[sizeof v->history_file + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", v->history_file);
    if (root && json_dump_file(root, tmp, JSON_COMPACT) == 0 && rename(tmp, v->history_file) != 0)
        unlink(tmp);
    json_decref(root);
}

static void history_load(coord_view *v)
{
    if (!v->history_file[0])
        return;
    json_t *root = json_load_file(v->history_file, 0, NULL);
    const char *shard;
    json_t *a;
    int64_t oldest = (int64_t)time(NULL) - HISTORY_SPAN_S;
    json_object_foreach(json_object_get(root, "shards"), shard, a) {
        coord_series *s = series_of(v, shard);
        size_t i;
        json_t *p;
        json_array_foreach(a, i, p) {
            int64_t t = json_integer_value(json_array_get(p, 0));
            if (s && t >= oldest)
                series_add(v, s, t, (uint64_t)json_integer_value(json_array_get(p, 1)),
                           json_number_value(json_array_get(p, 2)));
        }
    }
    json_decref(root);
}

void coord_history_sample(void *arg)
{
    ferry_coord *c = arg;
    ferry_err err = {0};
    ferry_cluster_status *s = NULL;
    if (status_refresh(c, &err) == FERRY_OK) { /* a fresh read for the sample */
        pthread_mutex_lock(&c->view.status_mu);
        status_copy(&c->view, &s, &err);
        pthread_mutex_unlock(&c->view.status_mu);
    }
    if (!s) {
        FLOG_WARN("msg=\"coordinator: fill history sample failed\" err=\"%s\"", err.msg);
        return;
    }
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&c->view.mu);
    for (size_t i = 0; i < s->n_shards; i++) {
        if (s->shards[i].shard.state == FERRY_SHARD_GONE)
            continue;
        coord_series *se = series_of(&c->view, s->shards[i].shard.name);
        if (se)
            series_add(&c->view, se, now, s->shards[i].bytes, s->shards[i].fill);
    }
    history_save(&c->view);
    pthread_mutex_unlock(&c->view.mu);
    status_put(s);
}

int coord_view_init(ferry_coord *c, const ferry_coord_options *opt, ferry_err *err)
{
    coord_view *v = &c->view;
    pthread_mutex_init(&v->mu, NULL);
    pthread_mutex_init(&v->status_mu, NULL);
    ferry_histogram_init(&v->catalog_read);
    v->history_every_s = opt->history_every_s ? opt->history_every_s : 300;
    v->history_points = HISTORY_SPAN_S / v->history_every_s;
    if (v->history_points < 2)
        v->history_points = 2;
    if (v->history_points > 100000)
        return ferry_err_set(err, FERRY_EINVAL, "history interval %u s is too short (24 h of "
                             "samples must fit 100,000 points)", v->history_every_s);
    if (opt->history_file)
        snprintf(v->history_file, sizeof v->history_file, "%s", opt->history_file);
    if (opt->window)
        v->window = *opt->window;
    history_load(v);
    return FERRY_OK;
}

void coord_view_free(ferry_coord *c)
{
    coord_view *v = &c->view;
    for (size_t i = 0; i < v->n_series; i++)
        free(v->series[i].points);
    status_put(v->status);
    ferry_histogram_destroy(&v->catalog_read);
    pthread_mutex_destroy(&v->mu);
    pthread_mutex_destroy(&v->status_mu);
}

/* ---- GET /metrics ----------------------------------------------------------------------------- */

ferry_ap_window coord_window(ferry_coord *c)
{
    pthread_mutex_lock(&c->view.mu);
    ferry_ap_window w = c->view.window;
    pthread_mutex_unlock(&c->view.mu);
    return w;
}

void ferry_coord_set_window(ferry_coord *c, const ferry_ap_window *w)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->view.mu);
    if (w)
        c->view.window = *w;
    else
        memset(&c->view.window, 0, sizeof c->view.window);
    pthread_mutex_unlock(&c->view.mu);
}

/* The pause, the window and each autopilot action's last run. */
static void autopilot_metrics(ferry_buf *b, const ferry_cluster_status *s,
                              const ferry_ap_window *w)
{
    time_t now = time(NULL);
    ferry_metrics_family(b, "ferry_slices_awaiting_repair", FERRY_METRIC_GAUGE,
                         "slices written while a replica missed the write (min_insert_replicas), "
                         "until a repair makes the replicas equal");
    ferry_metrics_sample(b, "ferry_slices_awaiting_repair", NULL, (double)s->n_repair_needed);
    ferry_metrics_family(b, "ferry_autopilot_paused", FERRY_METRIC_GAUGE,
                         "1 while the cluster is paused (ferry pause)");
    ferry_metrics_sample(b, "ferry_autopilot_paused", NULL, s->pause.paused ? 1 : 0);
    ferry_metrics_family(b, "ferry_autopilot_window_open", FERRY_METRIC_GAUGE,
                         "1 while moves may start (the maintenance window is open or unset)");
    ferry_metrics_sample(b, "ferry_autopilot_window_open", NULL,
                         ferry_ap_window_open(w, now) ? 1 : 0);
    ferry_metrics_family(b, "ferry_autopilot_window_next_open_timestamp_seconds",
                         FERRY_METRIC_GAUGE, "when the maintenance window opens next (now "
                         "while open)");
    ferry_metrics_sample(b, "ferry_autopilot_window_next_open_timestamp_seconds", NULL,
                         (double)ferry_ap_window_next(w, now));
    if (!s->n_autopilot)
        return;
    ferry_metrics_family(b, "ferry_autopilot_last_run_timestamp_seconds", FERRY_METRIC_GAUGE,
                         "when each autopilot action last finished, labelled with its result");
    for (size_t i = 0; i < s->n_autopilot; i++)
        ferry_metrics_sample(b, "ferry_autopilot_last_run_timestamp_seconds",
                             (const char *[]){"action", s->autopilot[i].action, "result",
                                              s->autopilot[i].result, NULL},
                             (double)s->autopilot[i].finished);
    ferry_metrics_family(b, "ferry_autopilot_next_run_timestamp_seconds", FERRY_METRIC_GAUGE,
                         "when each autopilot action runs next");
    for (size_t i = 0; i < s->n_autopilot; i++)
        ferry_metrics_sample(b, "ferry_autopilot_next_run_timestamp_seconds",
                             (const char *[]){"action", s->autopilot[i].action, NULL},
                             (double)s->autopilot[i].next);
}

/* The tallies the flows keep in the catalog (ferry/tally.h): moves ended and bytes copied by
 * every process, the last sweep and each doctor check. */
static void tally_metrics(ferry_buf *b, const ferry_tallies *t)
{
    const ferry_tally_moves *m = &t->moves;
    ferry_metrics_family(b, "ferry_moves_ended_total", FERRY_METRIC_COUNTER,
                         "moves that ended, by outcome (every mover: autopilot and commands)");
    ferry_metrics_sample(b, "ferry_moves_ended_total", (const char *[]){"outcome", "done", NULL},
                         (double)m->done);
    ferry_metrics_sample(b, "ferry_moves_ended_total",
                         (const char *[]){"outcome", "failed", NULL}, (double)m->failed);
    ferry_metrics_family(b, "ferry_move_copied_bytes_total", FERRY_METRIC_COUNTER,
                         "bytes moves sent between agents: cold = the pointer files of cold "
                         "parts, hot = the files of hot parts");
    ferry_metrics_sample(b, "ferry_move_copied_bytes_total",
                         (const char *[]){"tier", "cold", NULL}, (double)m->cold_copied);
    ferry_metrics_sample(b, "ferry_move_copied_bytes_total",
                         (const char *[]){"tier", "hot", NULL}, (double)m->hot_copied);
    ferry_metrics_family(b, "ferry_move_run_seconds_total", FERRY_METRIC_COUNTER,
                         "wall seconds of every run of every move");
    ferry_metrics_sample(b, "ferry_move_run_seconds_total", NULL, m->seconds);

    const ferry_tally_tier *tt = &t->tier;
    static const struct {
        const char *name, *help;
    } tier[] = {
        {"ferry_tier_runs_total", "tiering runs (the autopilot's and commands')"},
        {"ferry_tier_partitions_tiered_total", "partitions tiering moved to the object store"},
        {"ferry_tier_jobs_failed_total", "tier jobs that failed (each is resumed by a later run)"},
        {"ferry_tier_uploaded_bytes_total", "bytes tiering uploaded to the object store"},
        {"ferry_tier_pointer_bytes_total", "bytes of the pointer files tiering left on servers"},
    };
    double tv[] = {(double)tt->runs, (double)tt->partitions_tiered, (double)tt->jobs_failed,
                   (double)tt->bytes_uploaded, (double)tt->pointer_bytes};
    for (size_t i = 0; i < sizeof tier / sizeof tier[0]; i++) {
        ferry_metrics_family(b, tier[i].name, FERRY_METRIC_COUNTER, tier[i].help);
        ferry_metrics_sample(b, tier[i].name, NULL, tv[i]);
    }
    if (tt->last_run) {
        ferry_metrics_family(b, "ferry_tier_last_run_timestamp_seconds", FERRY_METRIC_GAUGE,
                             "when the last tiering run ended");
        ferry_metrics_sample(b, "ferry_tier_last_run_timestamp_seconds", NULL,
                             (double)tt->last_run);
    }

    const ferry_tally_sweep *sw = &t->sweep;
    if (sw->present) {
        static const struct {
            const char *name, *help;
        } last[] = {
            {"ferry_sweep_last_timestamp_seconds", "when the last sweep ended"},
            {"ferry_sweep_complete", "1 when the last sweep read every server and the whole "
                                     "store (an incomplete one deletes nothing)"},
            {"ferry_sweep_orphans", "objects no pointer file names, at the last sweep"},
            {"ferry_sweep_orphan_bytes", "bytes of those orphans"},
            {"ferry_sweep_dangling_pointers", "pointer files naming an object the store lacks, "
                                              "at the last sweep (data loss: investigate)"},
            {"ferry_sweep_drift_parts", "parts whose objects differ from the catalog's record, "
                                        "at the last sweep"},
            {"ferry_sweep_deleted_objects", "orphans the last sweep deleted"},
            {"ferry_sweep_delete_failures", "orphans the last sweep failed to delete"},
        };
        double v[] = {(double)sw->at,       sw->complete ? 1 : 0,   (double)sw->orphans,
                      (double)sw->orphan_bytes, (double)sw->dangling, (double)sw->drift,
                      (double)sw->deleted,  (double)sw->delete_failed};
        for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
            ferry_metrics_family(b, last[i].name, FERRY_METRIC_GAUGE, last[i].help);
            ferry_metrics_sample(b, last[i].name, NULL, v[i]);
        }
        if (sw->last_complete) {
            ferry_metrics_family(b, "ferry_sweep_last_complete_timestamp_seconds",
                                 FERRY_METRIC_GAUGE, "when the last complete sweep ended");
            ferry_metrics_sample(b, "ferry_sweep_last_complete_timestamp_seconds", NULL,
                                 (double)sw->last_complete);
            ferry_metrics_family(b, "ferry_sweep_last_complete_age_seconds", FERRY_METRIC_GAUGE,
                                 "seconds since the last complete sweep ended");
            ferry_metrics_sample(b, "ferry_sweep_last_complete_age_seconds", NULL,
                                 (double)(time(NULL) - sw->last_complete));
        }
    }

    const ferry_tally_doctor *d = &t->doctor;
    if (d->present) {
        static const char *const statuses[] = {"pass", "warn", "fail", "unsupported", "skipped"};
        ferry_metrics_family(b, "ferry_doctor_last_run_timestamp_seconds", FERRY_METRIC_GAUGE,
                             "when ferry doctor last ran (the autopilot or a command)");
        ferry_metrics_sample(b, "ferry_doctor_last_run_timestamp_seconds", NULL, (double)d->at);
        ferry_metrics_family(b, "ferry_doctor_check", FERRY_METRIC_GAUGE,
                             "each check of the last doctor run: 1 for its status, 0 for the "
                             "others (a check fails when any of its findings fails)");
        for (size_t i = 0; i < d->n_checks; i++)
            for (size_t k = 0; k < sizeof statuses / sizeof statuses[0]; k++)
                ferry_metrics_sample(b, "ferry_doctor_check",
                                     (const char *[]){"check", d->checks[i].check, "status",
                                                      statuses[k], NULL},
                                     !strcmp(d->checks[i].status, statuses[k]) ? 1 : 0);
    }
}

void coord_on_metrics(ferry_http_req *req, void *ctx)
{
    ferry_coord *c = ctx;
    ferry_err err = {0};
    ferry_cluster_status *s = NULL;
    ferry_buf b = FERRY_BUF_INIT;
    pthread_mutex_lock(&c->mu);
    bool lost = c->lease_lost;
    uint64_t version = c->version;
    pthread_mutex_unlock(&c->mu);
    int rc = status_get(c, &s, &err);
    ferry_metrics_family(&b, "ferry_coordinator_lease", FERRY_METRIC_GAUGE,
                         "1 while this coordinator holds the catalog lease");
    ferry_metrics_sample(&b, "ferry_coordinator_lease", (const char *[]){"owner", c->owner, NULL},
                         lost ? 0 : 1);
    ferry_metrics_family(&b, "ferry_routing_version", FERRY_METRIC_GAUGE,
                         "the catalog's routing version");
    ferry_metrics_sample(&b, "ferry_routing_version", NULL, (double)version);
    ferry_metrics_family(&b, "ferry_catalog_read_seconds", FERRY_METRIC_HISTOGRAM,
                         "time to read the cluster status from the catalog");
    ferry_histogram_render(&c->view.catalog_read, &b, "ferry_catalog_read_seconds", NULL);
    ferry_metrics_family(&b, "ferry_catalog_read_errors_total", FERRY_METRIC_COUNTER,
                         "cluster status reads that failed");
    ferry_metrics_sample(&b, "ferry_catalog_read_errors_total", NULL,
                         (double)c->view.status_errors);
    if (!rc) {
        ferry_metrics_family(&b, "ferry_tenants", FERRY_METRIC_GAUGE, "tenants registered");
        ferry_metrics_sample(&b, "ferry_tenants", NULL, (double)s->tenants);
        ferry_metrics_family(&b, "ferry_slices", FERRY_METRIC_GAUGE, "slices (tenant splits)");
        ferry_metrics_sample(&b, "ferry_slices", NULL, (double)s->slices);
        ferry_metrics_family(&b, "ferry_fill_target_ratio", FERRY_METRIC_GAUGE,
                             "the cluster's fill target");
        ferry_metrics_sample(&b, "ferry_fill_target_ratio", NULL, s->settings.fill);
        static const struct {
            const char *name, *help;
        } per_shard[] = {
            {"ferry_shard_bytes", "bytes of the slices routed to the shard"},
            {"ferry_shard_capacity_bytes", "the shard's capacity (0: none set)"},
            {"ferry_shard_fill_ratio", "bytes / capacity (absent without a capacity)"},
            {"ferry_shard_slices", "slices routed to the shard"},
            {"ferry_shard_up", "1 for an active or draining shard, 0 for a gone one"},
        };
        for (size_t f = 0; f < sizeof per_shard / sizeof per_shard[0]; f++) {
            ferry_metrics_family(&b, per_shard[f].name, FERRY_METRIC_GAUGE, per_shard[f].help);
            for (size_t i = 0; i < s->n_shards; i++) {
                const ferry_shard_status *ss = &s->shards[i];
                const char *labels[] = {"shard", ss->shard.name, "state",
                                        ferry_shard_state_name(ss->shard.state), "zone",
                                        ss->shard.zone, NULL};
                double v = f == 0   ? (double)ss->bytes
                           : f == 1 ? (double)ss->shard.capacity
                           : f == 2 ? ss->fill
                           : f == 3 ? (double)ss->slices
                                    : (ss->shard.state != FERRY_SHARD_GONE);
                if (f == 2 && ss->fill < 0)
                    continue;
                ferry_metrics_sample(&b, per_shard[f].name, labels, v);
            }
        }
        ferry_metrics_family(&b, "ferry_moves_in_flight", FERRY_METRIC_GAUGE,
                             "moves not DONE or FAILED, by state");
        for (int st = FERRY_MOVE_PLANNED; st <= FERRY_MOVE_CLEANUP; st++)
            ferry_metrics_sample(
                &b, "ferry_moves_in_flight",
                (const char *[]){"state", ferry_move_state_name((enum ferry_move_state)st), NULL},
                (double)s->moves_by_state[st]);
        int64_t oldest = 0, now = (int64_t)time(NULL);
        for (size_t i = 0; i < s->moves.n; i++)
            if (!oldest || s->moves.items[i].u.move.updated < oldest)
                oldest = s->moves.items[i].u.move.updated;
        ferry_metrics_family(&b, "ferry_move_oldest_update_age_seconds", FERRY_METRIC_GAUGE,
                             "seconds since the least recently advanced unfinished move "
                             "changed (0: none in flight); a stuck move grows it");
        ferry_metrics_sample(&b, "ferry_move_oldest_update_age_seconds", NULL,
                             oldest ? (double)(now - oldest) : 0);
        ferry_metrics_family(&b, "ferry_partitions", FERRY_METRIC_GAUGE,
                             "partition copies recorded in the catalog, by tier");
        ferry_metrics_sample(&b, "ferry_partitions", (const char *[]){"tier", "hot", NULL},
                             (double)s->partitions_hot);
        ferry_metrics_sample(&b, "ferry_partitions", (const char *[]){"tier", "cold", NULL},
                             (double)s->partitions_cold);
        ferry_metrics_family(&b, "ferry_tier_backlog_partitions", FERRY_METRIC_GAUGE,
                             "hot partitions older than hot_days: tiering still to do");
        ferry_metrics_sample(&b, "ferry_tier_backlog_partitions", NULL, (double)s->tier_backlog);
        ferry_ap_window w = coord_window(c);
        autopilot_metrics(&b, s, &w);
        tally_metrics(&b, &s->tallies);
    }
    ferry_httpd_metrics(c->httpd, &b, "ferry_coordinator_http_refused_total");
    if (rc)
        FLOG_WARN("msg=\"coordinator: metrics without the cluster status\" err=\"%s\"", err.msg);
    if (b.data)
        ferry_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    else
        ferry_http_respond_text(req, 500, "out of memory\n");
    ferry_buf_free(&b);
    status_put(s);
}

/* ---- GET / ----------------------------------------------------------------------------------- */

static void html_text(ferry_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': ferry_buf_puts(b, "&lt;"); break;
        case '>': ferry_buf_puts(b, "&gt;"); break;
        case '&': ferry_buf_puts(b, "&amp;"); break;
        case '"': ferry_buf_puts(b, "&quot;"); break;
        default: ferry_buf_putc(b, *s);
        }
    }
}

static const char *const PALETTE[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

/* One horizontal bar per shard: its fill, with the target as a line. */
static void fill_bars(ferry_buf *b, const ferry_cluster_status *s)
{
    const int W = 520, H = 22;
    ferry_buf_printf(b, "<svg id=\"fill-bars\" width=\"%d\" height=\"%zu\" role=\"img\">", W + 200,
                     (size_t)H * s->n_shards + 10);
    for (size_t i = 0; i < s->n_shards; i++) {
        const ferry_shard_status *ss = &s->shards[i];
        double f = ss->fill < 0 ? 0 : ss->fill > 1.2 ? 1.2 : ss->fill;
        int y = (int)i * H + 4, w = (int)(f / 1.2 * W);
        const char *color = ss->fill > s->settings.fill ? "#d62728" : "#2ca02c";
        ferry_buf_printf(b, "<g class=\"shard\" data-shard=\"");
        html_text(b, ss->shard.name);
        ferry_buf_printf(b, "\"><text x=\"0\" y=\"%d\" font-size=\"12\">", y + 13);
        html_text(b, ss->shard.name);
        ferry_buf_printf(b, "</text><rect x=\"110\" y=\"%d\" width=\"%d\" height=\"%d\" "
                            "fill=\"#eee\"/><rect class=\"fill\" x=\"110\" y=\"%d\" width=\"%d\" "
                            "height=\"%d\" fill=\"%s\"/>",
                         y, W, H - 6, y, w, H - 6, color);
        ferry_buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text></g>", W + 120,
                         y + 13,
                         ss->fill < 0 ? "no capacity" : "");
        if (ss->fill >= 0) {
            b->len -= strlen("</text></g>");
            ferry_buf_printf(b, "%.1f%% (%s)</text></g>", 100 * ss->fill,
                             ferry_shard_state_name(ss->shard.state));
        }
    }
    int tx = 110 + (int)(s->settings.fill / 1.2 * W);
    ferry_buf_printf(b, "<line class=\"target\" x1=\"%d\" y1=\"0\" x2=\"%d\" y2=\"%zu\" "
                        "stroke=\"#000\" stroke-dasharray=\"4 3\"/></svg>",
                     tx, tx, (size_t)H * s->n_shards + 6);
}

/* The fill of each shard over the last 24 h: one polyline per shard. */
static void history_plot(ferry_buf *b, coord_view *v, double target)
{
    const int W = 720, H = 220, L = 40;
    int64_t now = (int64_t)time(NULL), t0 = now - HISTORY_SPAN_S;
    ferry_buf_printf(b, "<svg id=\"fill-history\" width=\"%d\" height=\"%d\" role=\"img\">"
                        "<rect x=\"%d\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" "
                        "stroke=\"#ccc\"/>",
                     W + 10, H + 30, L, W - L, H);
    double top = 1.0;
    pthread_mutex_lock(&v->mu);
    for (size_t i = 0; i < v->n_series; i++)
        for (size_t k = 0; k < v->series[i].n; k++)
            if (v->series[i].points[k].fill > top)
                top = v->series[i].points[k].fill;
    int ty = H - (int)(target / top * H);
    ferry_buf_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\" "
                        "stroke-dasharray=\"4 3\"/><text x=\"0\" y=\"%d\" font-size=\"11\">"
                        "%.0f%%</text><text x=\"0\" y=\"%d\" font-size=\"11\">0%%</text>"
                        "<text x=\"%d\" y=\"%d\" font-size=\"11\">24 h ago</text>"
                        "<text x=\"%d\" y=\"%d\" font-size=\"11\">now</text>",
                     L, ty, W, ty, 12, 100 * top, H, L, H + 16, W - 24, H + 16);
    for (size_t i = 0; i < v->n_series; i++) {
        const coord_series *se = &v->series[i];
        if (!se->n)
            continue;
        ferry_buf_printf(b, "<path class=\"series\" data-shard=\"");
        html_text(b, se->shard);
        ferry_buf_printf(b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" d=\"",
                         PALETTE[i % (sizeof PALETTE / sizeof PALETTE[0])]);
        for (size_t k = 0; k < se->n; k++) {
            const coord_point *p = &se->points[k];
            double fx = (double)(p->t - t0) / HISTORY_SPAN_S, fy = p->fill < 0 ? 0 : p->fill / top;
            int x = L + (int)(fx * (W - L)), y = H - (int)(fy * H);
            ferry_buf_printf(b, "%s%d %d", k ? " L" : "M", x < L ? L : x, y);
        }
        if (se->n == 1) /* a single sample still draws a visible mark */
            ferry_buf_puts(b, " l 3 0");
        ferry_buf_puts(b, "\"/>");
        ferry_buf_printf(b, "<text x=\"%d\" y=\"%zu\" font-size=\"11\" fill=\"%s\">", W - 90,
                         14 + 14 * i, PALETTE[i % (sizeof PALETTE / sizeof PALETTE[0])]);
        html_text(b, se->shard);
        ferry_buf_puts(b, "</text>");
    }
    pthread_mutex_unlock(&v->mu);
    ferry_buf_puts(b, "</svg>");
}

static void utc(int64_t t, char *out, size_t sz)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!t || !gmtime_r(&tt, &tm))
        snprintf(out, sz, "-");
    else
        strftime(out, sz, "%Y-%m-%d %H:%M:%SZ", &tm);
}

/* The autopilot: paused or not, the window, each action's last run and why. */
static void autopilot_page(ferry_buf *b, const ferry_cluster_status *s, const ferry_ap_window *w)
{
    char t1[32], t2[32];
    time_t now = time(NULL);
    ferry_buf_puts(b, "<h2>Autopilot</h2><p id=\"pause\">");
    if (s->pause.paused) {
        utc(s->pause.since, t1, sizeof t1);
        ferry_buf_printf(b, "<b>Paused</b> since %s by ", t1);
        html_text(b, s->pause.by);
        if (s->pause.reason[0]) {
            ferry_buf_puts(b, ": ");
            html_text(b, s->pause.reason);
        }
        ferry_buf_puts(b, " (ferry resume)");
    } else {
        ferry_buf_puts(b, "Not paused");
    }
    ferry_ap_window_fmt(w, t2, sizeof t2);
    utc((int64_t)ferry_ap_window_next(w, now), t1, sizeof t1);
    ferry_buf_printf(b, ".</p><p id=\"window\">Maintenance window (UTC): %s; %s%s.</p>", t2,
                     ferry_ap_window_open(w, now) ? "open now" : "next opens ",
                     ferry_ap_window_open(w, now) ? "" : t1);
    ferry_buf_puts(b, "<table id=\"autopilot\"><tr><th>action</th><th>result</th><th>last "
                      "run</th><th>next</th><th>reason</th><th>what it did</th></tr>");
    for (size_t i = 0; i < s->n_autopilot; i++) {
        const ferry_ap_run *r = &s->autopilot[i];
        utc(r->finished, t1, sizeof t1);
        utc(r->next, t2, sizeof t2);
        ferry_buf_puts(b, "<tr class=\"run\"><td>");
        html_text(b, r->action);
        ferry_buf_puts(b, "</td><td>");
        html_text(b, r->result);
        ferry_buf_printf(b, "</td><td>%s</td><td>%s</td><td>", t1, t2);
        html_text(b, r->reason);
        ferry_buf_puts(b, "</td><td>");
        html_text(b, r->summary);
        ferry_buf_puts(b, "</td></tr>");
    }
    if (!s->n_autopilot)
        ferry_buf_puts(b, "<tr><td colspan=\"6\">no run recorded yet</td></tr>");
    ferry_buf_puts(b, "</table>");
}

/* The moves that ended last, whoever ran them, with what they copied and their time. */
static void recent_moves_page(ferry_buf *b, const ferry_tally_moves *tm)
{
    char t1[32], t2[32], t3[32];
    ferry_buf_printf(b, "<h2>Recent moves</h2><p id=\"move-totals\">%llu done, %llu failed; "
                        "copied %s of cold pointer files and %s of hot parts in all.</p>"
                        "<table id=\"recent-moves\"><tr><th>move</th><th>slice</th><th>from"
                        "</th><th>to</th><th>result</th><th>cold copied</th><th>hot copied</th>"
                        "<th>time</th><th>ended (UTC)</th></tr>",
                     (unsigned long long)tm->done, (unsigned long long)tm->failed,
                     ferry_fmt_bytes(tm->cold_copied, t1, sizeof t1),
                     ferry_fmt_bytes(tm->hot_copied, t2, sizeof t2));
    for (size_t i = 0; i < tm->n_recent; i++) {
        const ferry_tally_move *m = &tm->recent[i];
        ferry_buf_puts(b, "<tr class=\"recent-move\"><td>");
        html_text(b, m->id);
        ferry_buf_puts(b, "</td><td>");
        html_text(b, m->tenant);
        ferry_buf_printf(b, "/%u</td><td>", m->split);
        html_text(b, m->from);
        ferry_buf_puts(b, "</td><td>");
        html_text(b, m->to);
        ferry_buf_puts(b, "</td><td>");
        html_text(b, m->state);
        char when[32] = "-";
        time_t at = (time_t)m->finished;
        struct tm tmv;
        if (at && gmtime_r(&at, &tmv))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
        ferry_buf_printf(b, "</td><td>%s</td><td>%s</td><td>%.2fs</td><td>%s</td></tr>",
                         ferry_fmt_bytes(m->cold_copied, t1, sizeof t1),
                         ferry_fmt_bytes(m->hot_copied, t3, sizeof t3), m->seconds, when);
    }
    if (!tm->n_recent)
        ferry_buf_puts(b, "<tr><td colspan=\"9\">none yet</td></tr>");
    ferry_buf_puts(b, "</table>");
}

/* The last sweep and each check of the last doctor run. */
static void checks_page(ferry_buf *b, const ferry_tallies *t)
{
    char t1[32];
    int64_t now = (int64_t)time(NULL);
    const ferry_tally_sweep *sw = &t->sweep;
    ferry_buf_puts(b, "<h2>Sweep and doctor</h2><p id=\"sweep\">");
    if (!sw->present)
        ferry_buf_puts(b, "No sweep has run yet.");
    else
        ferry_buf_printf(b, "Last sweep %llds ago, %s: %llu orphan(s) (%s), %llu dangling "
                            "pointer(s), %llu drift(s), %llu deleted, %llu failed deletes; the "
                            "last complete sweep ended %s",
                         (long long)(now - sw->at), sw->complete ? "complete" : "INCOMPLETE",
                         (unsigned long long)sw->orphans,
                         ferry_fmt_bytes(sw->orphan_bytes, t1, sizeof t1),
                         (unsigned long long)sw->dangling, (unsigned long long)sw->drift,
                         (unsigned long long)sw->deleted, (unsigned long long)sw->delete_failed,
                         sw->last_complete ? "" : "never.");
    if (sw->present && sw->last_complete)
        ferry_buf_printf(b, "%llds ago.", (long long)(now - sw->last_complete));
    ferry_buf_puts(b, "</p><table id=\"doctor\"><tr><th>doctor check</th><th>status</th></tr>");
    for (size_t i = 0; i < t->doctor.n_checks; i++) {
        const ferry_tally_check *c = &t->doctor.checks[i];
        ferry_buf_printf(b, "<tr class=\"check\" data-status=\"%s\"><td>",
                         !strcmp(c->status, "fail") ? "fail" : "ok");
        html_text(b, c->check);
        ferry_buf_puts(b, "</td><td>");
        html_text(b, c->status);
        ferry_buf_puts(b, "</td></tr>");
    }
    if (!t->doctor.present)
        ferry_buf_puts(b, "<tr><td colspan=\"2\">doctor has not run yet</td></tr>");
    else
        ferry_buf_printf(b, "<tr><td colspan=\"2\">ran %llds ago</td></tr>",
                         (long long)(now - t->doctor.at));
    ferry_buf_puts(b, "</table>");
}

void coord_on_page(ferry_http_req *req, void *ctx)
{
    ferry_coord *c = ctx;
    ferry_err err = {0};
    ferry_cluster_status *s = NULL;
    ferry_buf b = FERRY_BUF_INIT;
    int rc = status_get(c, &s, &err);
    ferry_buf_puts(&b, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>ferry</title>"
                       "<meta http-equiv=\"refresh\" content=\"30\"><style>body{font-family:"
                       "sans-serif;margin:20px}table{border-collapse:collapse}td,th{padding:2px "
                       "10px;border-bottom:1px solid #ddd;text-align:left}</style></head><body>");
    if (rc) {
        ferry_buf_puts(&b, "<h1>ferry</h1><p id=\"error\">The catalog cannot be read: ");
        html_text(&b, err.msg);
        ferry_buf_puts(&b, "</p></body></html>");
        ferry_http_respond(req, 503, "text/html; charset=utf-8", b.data, b.len);
        ferry_buf_free(&b);
        return;
    }
    char t1[32], t2[32];
    ferry_buf_puts(&b, "<h1>ferry: cluster ");
    html_text(&b, s->settings.name);
    ferry_buf_printf(&b, "</h1><p id=\"summary\">%zu tenants, %zu slices, %zu shards, routing "
                         "version %llu, %zu move(s) in flight, %zu partition(s) waiting to be "
                         "tiered; catalog %s; coordinator ",
                     s->tenants, s->slices, s->n_shards, (unsigned long long)s->routing_version,
                     s->moves.n, s->tier_backlog, s->backend);
    html_text(&b, c->owner);
    ferry_buf_printf(&b, "</p><h2>Shards: fill against the target (%.0f%%)</h2>",
                     100 * s->settings.fill);
    fill_bars(&b, s);
    ferry_buf_puts(&b, "<table id=\"shards\"><tr><th>shard</th><th>state</th><th>zone</th>"
                       "<th>bytes</th><th>capacity</th><th>slices</th></tr>");
    for (size_t i = 0; i < s->n_shards; i++) {
        const ferry_shard_status *ss = &s->shards[i];
        ferry_buf_puts(&b, "<tr class=\"shard\"><td>");
        html_text(&b, ss->shard.name);
        ferry_buf_printf(&b, "</td><td>%s</td><td>", ferry_shard_state_name(ss->shard.state));
        html_text(&b, ss->shard.zone);
        ferry_buf_printf(&b, "</td><td>%s</td><td>%s</td><td>%zu</td></tr>",
                         ferry_fmt_bytes(ss->bytes, t1, sizeof t1),
                         ss->shard.capacity ? ferry_fmt_bytes(ss->shard.capacity, t2, sizeof t2)
                                            : "-",
                         ss->slices);
    }
    for (size_t i = 0; i < s->n_unknown; i++) { /* named by routes, without a shard record */
        const ferry_shard_status *ss = &s->unknown[i];
        ferry_buf_puts(&b, "<tr class=\"shard unknown\"><td>");
        html_text(&b, ss->shard.name);
        ferry_buf_printf(&b, "</td><td>no shard record</td><td></td><td>%s</td><td>-</td>"
                             "<td>%zu</td></tr>",
                         ferry_fmt_bytes(ss->bytes, t1, sizeof t1), ss->slices);
    }
    ferry_buf_puts(&b, "</table><h2>Fill over the last 24 hours</h2>");
    history_plot(&b, &c->view, s->settings.fill);
    /* progress is the state's place in PLANNED, CLONE, VERIFY, SWITCH, CLEANUP (the journal
     * keeps no byte counts); the ETA is the mean wall time of the recent moves less what this
     * one has run, when there are recent moves to take it from */
    const ferry_tally_moves *tm = &s->tallies.moves;
    double mean_s = 0;
    for (size_t i = 0; i < tm->n_recent; i++)
        mean_s += tm->recent[i].seconds / (double)tm->n_recent;
    ferry_buf_puts(&b, "<h2>Moves in flight</h2><table id=\"moves\"><tr><th>move</th>"
                       "<th>slice</th><th>from</th><th>to</th><th>state</th><th>step</th>"
                       "<th>progress</th><th>running for</th><th>ETA</th></tr>");
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < s->moves.n; i++) {
        const ferry_move *m = &s->moves.items[i].u.move;
        ferry_buf_puts(&b, "<tr class=\"move\"><td>");
        html_text(&b, m->id);
        ferry_buf_puts(&b, "</td><td>");
        html_text(&b, m->tenant);
        ferry_buf_printf(&b, "/%u</td><td>", m->split);
        char text[FERRY_SHARDS_TEXT_MAX];
        html_text(&b, ferry_shard_set_str(&m->from, text));
        ferry_buf_puts(&b, "</td><td>");
        html_text(&b, ferry_shard_set_str(&m->to, text));
        long long ran = (long long)(m->created ? now - m->created : 0);
        unsigned ord = m->state <= FERRY_MOVE_CLEANUP ? (unsigned)m->state : 5;
        ferry_buf_printf(&b, "</td><td>%s</td><td>%u</td><td class=\"progress\">%u%% (state "
                             "%u of 5)</td><td>%llds</td><td class=\"eta\">",
                         ferry_move_state_name(m->state), m->step, ord * 20, ord + 1, ran);
        if (mean_s > (double)ran)
            ferry_buf_printf(&b, "~%.0fs", mean_s - (double)ran);
        else if (mean_s > 0)
            ferry_buf_printf(&b, "overdue (recent moves took ~%.0fs)", mean_s);
        else
            ferry_buf_puts(&b, "unknown (no move has ended yet)");
        ferry_buf_puts(&b, "</td></tr>");
    }
    if (!s->moves.n)
        ferry_buf_puts(&b, "<tr><td colspan=\"9\">none</td></tr>");
    ferry_buf_puts(&b, "</table>");
    recent_moves_page(&b, tm);
    ferry_buf_puts(&b, "<h2>Largest tenants</h2><table id=\"tenants\"><tr><th>tenant"
                       "</th><th>bytes</th><th>splits</th><th>shards</th></tr>");
    for (size_t i = 0; i < s->n_top; i++) {
        ferry_buf_puts(&b, "<tr class=\"tenant\"><td>");
        html_text(&b, s->top[i].name);
        ferry_buf_printf(&b, "</td><td>%s</td><td>%u</td><td>",
                         ferry_fmt_bytes(s->top[i].bytes, t1, sizeof t1), s->top[i].splits);
        html_text(&b, s->top[i].shards);
        ferry_buf_puts(&b, "</td></tr>");
    }
    ferry_buf_printf(&b, "</table><h2>Tiering</h2><p id=\"tiering\">%zu hot and %zu cold "
                         "partition copies recorded; %zu hot partition(s) older than %u days "
                         "wait to be tiered.</p>",
                     s->partitions_hot, s->partitions_cold, s->tier_backlog,
                     s->settings.hot_days);
    checks_page(&b, &s->tallies);
    ferry_ap_window w = coord_window(c);
    autopilot_page(&b, s, &w);
    ferry_buf_puts(&b, "</body></html>");
    if (b.data)
        ferry_http_respond(req, 200, "text/html; charset=utf-8", b.data, b.len);
    else
        ferry_http_respond_text(req, 500, "out of memory\n");
    ferry_buf_free(&b);
    status_put(s);
}

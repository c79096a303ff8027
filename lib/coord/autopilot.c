/* The autopilot's actions as the coordinator runs them (include/ferry/autopilot.h): each one
 * reads the pause first, runs its flow, and records what it did and why in the catalog. The
 * rebalance pass, the one with limits, is in autopilot_rebalance.c. */
#include "autopilot_int.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/clock.h"
#include "ferry/coordinator.h"
#include "ferry/doctor.h"
#include "ferry/fleet.h"
#include "ferry/log.h"
#include "ferry/move.h"
#include "ferry/pause.h"
#include "ferry/repair_need.h"
#include "ferry/replica.h"
#include "ferry/retention.h"
#include "ferry/split.h"
#include "ferry/strutil.h"
#include "ferry/sweep.h"
#include "ferry/tier.h"

void ap_move_opts(ferry_autopilot *ap, ferry_move_opts *mo)
{
    memset(mo, 0, sizeof *mo);
    mo->catalog_url = ap->catalog_url;
    mo->cfg = ap->cfg;
    mo->owner = ap->owner;
}

/* ---- the actions --------------------------------------------------------------------------- */

static int do_splits(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    ferry_splits_options o = {.config_path = ap->config_path};
    json_t *report = NULL;
    int rc = ferry_splits_run(&o, &report, err);
    snprintf(run->reason, sizeof run->reason, "scheduled ([splits]: tenants that outgrew "
             "their split count)");
    if (report) {
        json_int_t raised = json_integer_value(json_object_get(report, "raised"));
        /* the line docs/routing.md names, kept for those who watch for it */
        FLOG_INFO("msg=\"scheduled splits\" tenants=%lld raised=%lld routing_version=%lld",
                  (long long)json_integer_value(json_object_get(report, "tenants_total")),
                  (long long)raised,
                  (long long)json_integer_value(json_object_get(report, "routing_version")));
        snprintf(run->summary, sizeof run->summary, "%lld tenant(s), %lld raised",
                 (long long)json_integer_value(json_object_get(report, "tenants_total")),
                 (long long)raised);
        if (!raised)
            snprintf(run->result, sizeof run->result, "idle");
    }
    json_decref(report);
    return rc;
}

static int do_tier(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    ferry_tier_options o = {.config_path = ap->config_path};
    json_t *report = NULL;
    int rc = ferry_tier_run(&o, &report, err);
    snprintf(run->reason, sizeof run->reason, "scheduled (partitions older than hot_days)");
    if (report) {
        json_int_t tiered = json_integer_value(json_object_get(report, "partitions_tiered"));
        json_int_t failed = json_integer_value(json_object_get(report, "jobs_failed"));
        FLOG_INFO("msg=\"scheduled tiering\" partitions_tiered=%lld jobs_failed=%lld "
                  "bytes_uploaded=%lld",
                  (long long)tiered, (long long)failed,
                  (long long)json_integer_value(json_object_get(report, "bytes_uploaded")));
        snprintf(run->summary, sizeof run->summary,
                 "%lld partition(s) tiered, %lld job(s) failed, %lld bytes uploaded",
                 (long long)tiered, (long long)failed,
                 (long long)json_integer_value(json_object_get(report, "bytes_uploaded")));
        if (!tiered && !failed)
            snprintf(run->result, sizeof run->result, "idle");
    }
    json_decref(report);
    return rc;
}

static int do_repair(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    ferry_move_opts mo;
    ap_move_opts(ap, &mo);
    ferry_repair_summary sum = {0};
    /* slices written while a replica was down (min_insert_replicas) are the reason to name */
    size_t needs = 0;
    ferry_repair_need *nl = NULL;
    ferry_catalog *cat = NULL;
    ferry_err nerr = {0};
    if (!ferry_catalog_open(ap->catalog_url, &cat, &nerr))
        (void)ferry_repair_need_list(cat, &nl, &needs, &nerr);
    ferry_catalog_close(cat);
    free(nl);
    int rc = ferry_repair_run(&mo, NULL, false, NULL, NULL, &sum, err);
    /* the line docs/replicas.md names */
    FLOG_INFO("msg=\"scheduled repair\" slices=%zu partitions=%zu in_sync=%zu repaired=%zu "
              "failed=%zu unreachable=%zu busy=%zu hot_copied=%llu cold_copied=%llu",
              sum.slices, sum.partitions, sum.in_sync, sum.repaired, sum.failed, sum.unreachable,
              sum.busy,
              (unsigned long long)sum.hot_copied, (unsigned long long)sum.cold_copied);
    if (needs)
        snprintf(run->reason, sizeof run->reason, "scheduled (every replicated slice; %zu "
                 "written while a replica was down)", needs);
    else
        snprintf(run->reason, sizeof run->reason, "scheduled (every replicated slice)");
    snprintf(run->summary, sizeof run->summary,
             "%zu slice(s), %zu partition(s): %zu in sync, %zu repaired, %zu failed, %zu "
             "unreachable, %zu busy (another flow)",
             sum.slices, sum.partitions, sum.in_sync, sum.repaired, sum.failed, sum.unreachable,
             sum.busy);
    if (!sum.repaired && !sum.failed && !sum.unreachable && !sum.busy)
        snprintf(run->result, sizeof run->result, "idle");
    return rc;
}

static int do_retention(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    ferry_fleet *fl = NULL;
    json_t *report = NULL;
    ferry_retention_options o = {.keep_s = ap->ac.keep_s, .owner = ap->owner};
    char keep[32];
    snprintf(keep, sizeof keep, "%llud", (unsigned long long)(ap->ac.keep_s / 86400));
    snprintf(run->reason, sizeof run->reason, "scheduled (partitions older than keep = %s)",
             ap->ac.keep_s % 86400 ? "the keep period" : keep);
    int rc = ferry_fleet_open(ap->config_path, &fl, err);
    if (!rc)
        rc = ferry_retention_run(fl, &o, &report, err);
    ferry_fleet_close(fl);
    if (report) {
        size_t jobs = json_array_size(json_object_get(report, "jobs")), done = 0, i;
        json_t *j;
        json_array_foreach(json_object_get(report, "jobs"), i, j)
            done += !strcmp(json_string_value(json_object_get(j, "state")) ?
                            json_string_value(json_object_get(j, "state")) : "", "DONE");
        snprintf(run->summary, sizeof run->summary,
                 "%zu partition(s) expired, %zu removed, %zu problem(s); cutoff day %lld", jobs,
                 done, json_array_size(json_object_get(report, "problems")),
                 (long long)json_integer_value(json_object_get(report, "cutoff")));
        if (!jobs)
            snprintf(run->result, sizeof run->result, "idle");
        else if (!json_is_true(json_object_get(report, "complete")))
            snprintf(run->result, sizeof run->result, "partial");
    }
    json_decref(report);
    return rc;
}

static int do_sweep(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    ferry_fleet *fl = NULL;
    ferry_sweep_result res;
    /* outside the window the sweep still reports, but deletes nothing */
    char held[200];
    bool closed = ap->ac.delete_orphans &&
                  ferry_ap_window_holds(&ap->ac, FERRY_AP_SWEEP, time(NULL), held, sizeof held);
    ferry_sweep_options o = {.delete_orphans = ap->ac.delete_orphans && !closed,
                             .min_age_s = ap->ac.min_age_s};
    memset(&res, 0, sizeof res);
    if (closed)
        snprintf(run->reason, sizeof run->reason, "scheduled (report only: deletes held, %s)",
                 held);
    else
        snprintf(run->reason, sizeof run->reason, "scheduled (%s)",
                 ap->ac.delete_orphans ? "deletes orphans older than min_age" : "report only");
    int rc = ferry_fleet_open(ap->config_path, &fl, err);
    if (!rc) {
        rc = ferry_sweep_run(fl, &o, &res, err);
        char b[32];
        snprintf(run->summary, sizeof run->summary,
                 "%zu orphan(s) (%s), %zu dangling pointer(s), %zu drift(s), %zu deleted%s%s",
                 res.report.n_orphans, ferry_fmt_bytes(res.report.orphan_bytes, b, sizeof b),
                 res.report.n_dangling, res.report.n_drift, res.deleted,
                 res.complete ? "" : "; incomplete", res.deletion_skipped ?
                 "; deletion skipped" : "");
        if (!rc && (res.report.n_dangling || res.report.n_drift || !res.complete ||
                    res.delete_failed))
            snprintf(run->result, sizeof run->result, "attention");
        ferry_sweep_result_free(&res);
    }
    ferry_fleet_close(fl);
    return rc;
}

static int do_doctor(ferry_autopilot *ap, ferry_ap_run *run, ferry_err *err)
{
    ferry_fleet *fl = NULL;
    json_t *report = NULL;
    snprintf(run->reason, sizeof run->reason, "scheduled (the safety rules)%s%.200s",
             ap->ac.doctor_skip[0] ? ", skipping " : "", ap->ac.doctor_skip);
    int rc = ferry_fleet_open(ap->config_path, &fl, err);
    if (!rc)
        rc = ferry_doctor_run_skip(fl, ap->ac.doctor_skip[0] ? ap->ac.doctor_skip : NULL,
                                   &report, err);
    ferry_fleet_close(fl);
    if (report) {
        size_t failed = 0, i;
        json_t *c;
        json_array_foreach(json_object_get(report, "checks"), i, c)
        {
            const char *st = json_string_value(json_object_get(c, "status"));
            if (st && !strcmp(st, "fail")) {
                size_t used = strlen(run->summary);
                snprintf(run->summary + used, sizeof run->summary - used, "%s%s: %s",
                         failed ? "; " : "failed ",
                         json_string_value(json_object_get(c, "check")),
                         json_string_value(json_object_get(c, "message")));
                failed++;
            }
        }
        if (!failed)
            snprintf(run->summary, sizeof run->summary, "%zu check(s), all passed",
                     json_array_size(json_object_get(report, "checks")));
        else
            snprintf(run->result, sizeof run->result, "attention");
    }
    json_decref(report);
    return rc;
}

ferry_autopilot *ap_current(struct ap_shared *sh)
{
    pthread_mutex_lock(&sh->mu);
    ferry_autopilot *ap = sh->cur;
    pthread_mutex_unlock(&sh->mu);
    return ap;
}

/* One scheduled action: the pause, the flow, the record. Its job ticks every second; the action
 * runs when its interval (from the current config) has passed since its last run ended. */
static void run_action(void *arg)
{
    struct ap_slot *slot = arg;
    ferry_autopilot *ap = ap_current(slot->sh);
    unsigned every = ap->ac.enabled ? ap->ac.interval_s[slot->action] : 0;
    if (!every || ferry_clock_s() < slot->last_end + every || atomic_load(&slot->sh->stopping))
        return;
    ferry_ap_run run;
    ferry_err err = {0};
    int rc = FERRY_OK;
    memset(&run, 0, sizeof run);
    snprintf(run.action, sizeof run.action, "%s", ferry_ap_action_name(slot->action));
    snprintf(run.owner, sizeof run.owner, "%s", ap->owner);
    run.started = (int64_t)time(NULL);
    snprintf(run.result, sizeof run.result, "ok");
    ferry_catalog *cat = NULL;
    ferry_pause p = {0};
    if ((rc = ferry_catalog_open(ap->catalog_url, &cat, &err)) ||
        (rc = ferry_pause_get(cat, &p, &err)))
        goto done;
    if (p.paused && slot->action != FERRY_AP_DOCTOR) { /* doctor only reads */
        snprintf(run.result, sizeof run.result, "paused");
        snprintf(run.reason, sizeof run.reason, "paused by %.60s%s%.150s", p.by[0] ? p.by : "?",
                 p.reason[0] ? ": " : "", p.reason);
        goto done;
    }
    /* the maintenance window: an action that changes data does not start outside it (the
     * rebalance asks before every move, the sweep only holds its deletes) */
    if (slot->action != FERRY_AP_REBALANCE && slot->action != FERRY_AP_SWEEP &&
        ferry_ap_window_holds(&ap->ac, slot->action, time(NULL), run.reason,
                              sizeof run.reason)) {
        snprintf(run.result, sizeof run.result, "outside window");
        goto done;
    }
    switch (slot->action) {
    case FERRY_AP_REBALANCE: rc = ferry_autopilot_rebalance(ap, &run, &err); break;
    case FERRY_AP_SPLITS: rc = do_splits(ap, &run, &err); break;
    case FERRY_AP_TIER: rc = do_tier(ap, &run, &err); break;
    case FERRY_AP_REPAIR: rc = do_repair(ap, &run, &err); break;
    case FERRY_AP_RETENTION: rc = do_retention(ap, &run, &err); break;
    case FERRY_AP_SWEEP: rc = do_sweep(ap, &run, &err); break;
    case FERRY_AP_DOCTOR: rc = do_doctor(ap, &run, &err); break;
    default: break;
    }
done:
    run.finished = (int64_t)time(NULL);
    run.next = run.finished + (int64_t)ap->ac.interval_s[slot->action];
    if (rc) {
        snprintf(run.result, sizeof run.result, "failed");
        size_t used = strlen(run.summary);
        snprintf(run.summary + used, sizeof run.summary - used, "%serror: %s",
                 used ? "; " : "", err.msg);
    }
    /* idle passes, and a pause or a closed window said once already, are logged at debug
     * level: a quiet or held cluster does not fill the log every interval */
    char now_said[sizeof slot->last];
    snprintf(now_said, sizeof now_said, "%s|%s", run.result, run.reason);
    bool repeat = !strcmp(now_said, slot->last) && strcmp(run.result, "ok");
    snprintf(slot->last, sizeof slot->last, "%s", now_said);
    ferry_log(strcmp(run.result, "idle") && !repeat ? FERRY_LOG_INFO : FERRY_LOG_DEBUG,
              "msg=\"autopilot\" action=%s result=\"%s\" reason=\"%s\" summary=\"%s\"",
              run.action, run.result, run.reason, run.summary);
    ferry_err lerr = {0};
    if (cat && ferry_ap_log_put(cat, &run, &lerr))
        FLOG_WARN("msg=\"autopilot could not record its run\" action=%s err=\"%s\"", run.action,
                  lerr.msg);
    ferry_catalog_close(cat);
    slot->last_end = ferry_clock_s();
}

/* ---- the handle ----------------------------------------------------------------------------- */

int ferry_autopilot_new(const ferry_autopilot_config *ac, const struct ferry_config *cfg,
                        const char *config_path, const char *catalog_url, const char *owner,
                        ferry_autopilot **out, ferry_err *err)
{
    ferry_autopilot *ap = calloc(1, sizeof *ap);
    struct ap_shared *sh = calloc(1, sizeof *sh);
    if (!ap || !sh) {
        free(ap);
        free(sh);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    ap->ac = *ac;
    ap->cfg = cfg;
    snprintf(ap->config_path, sizeof ap->config_path, "%s", config_path ? config_path : "");
    snprintf(ap->catalog_url, sizeof ap->catalog_url, "%s", catalog_url);
    snprintf(ap->owner, sizeof ap->owner, "%s", owner ? owner : "autopilot");
    ap->sh = sh;
    pthread_mutex_init(&sh->mu, NULL);
    sh->cur = ap;
    atomic_init(&sh->stopping, false);
    double now = ferry_clock_s(); /* each action runs first one interval after the start */
    for (int a = 0; a < FERRY_AP_ACTIONS; a++)
        sh->slots[a] = (struct ap_slot){.sh = sh, .action = (enum ferry_ap_action)a,
                                        .last_end = now};
    *out = ap;
    return FERRY_OK;
}

void ap_log_schedule(const ferry_autopilot *ap)
{
    if (!ap->ac.enabled) {
        FLOG_INFO("msg=\"autopilot disabled ([autopilot] enabled = false)\"");
        return;
    }
    for (int a = 0; a < FERRY_AP_ACTIONS; a++)
        if (ap->ac.interval_s[a])
            FLOG_INFO("msg=\"autopilot action scheduled\" action=%s every_s=%u",
                      ferry_ap_action_name((enum ferry_ap_action)a), ap->ac.interval_s[a]);
}

size_t ferry_autopilot_jobs(ferry_autopilot *ap, ferry_coord_job *jobs, size_t max)
{
    /* every action ticks each second and runs on its interval from the config of the moment,
     * so a reload can change intervals, or turn actions (or the autopilot) on and off */
    size_t n = 0;
    for (int a = 0; a < FERRY_AP_ACTIONS && n < max; a++)
        jobs[n++] = (ferry_coord_job){ferry_ap_action_name((enum ferry_ap_action)a), run_action,
                                      &ap->sh->slots[a], 1};
    ap_log_schedule(ap_current(ap->sh));
    return n;
}

void ferry_autopilot_stop(ferry_autopilot *ap)
{
    if (ap)
        atomic_store(&ap->sh->stopping, true);
}

void ferry_autopilot_free(ferry_autopilot *ap)
{
    if (!ap)
        return;
    struct ap_shared *sh = ap->sh;
    for (ferry_autopilot *g = sh->cur; g;) {
        ferry_autopilot *older = g->older;
        if (g->own_cfg) {
            ferry_config_free(g->own_cfg);
            free(g->own_cfg);
        }
        free(g);
        g = older;
    }
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

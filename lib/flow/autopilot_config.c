/* The autopilot's configuration ([autopilot], with the older [cluster] *_interval keys as
 * aliases) and its maintenance window (include/ferry/autopilot.h). */
#include "ferry/autopilot.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ferry/config.h"
#include "ferry/strutil.h"

static const char *const action_names[FERRY_AP_ACTIONS] = {
    "rebalance", "splits", "tier", "repair", "retention", "sweep", "doctor"};

const char *ferry_ap_action_name(enum ferry_ap_action a)
{
    return (unsigned)a < FERRY_AP_ACTIONS ? action_names[a] : "?";
}

static int hhmm(const char *s, unsigned *min)
{
    unsigned h, m;
    int used = 0;
    if (sscanf(s, "%2u:%2u%n", &h, &m, &used) != 2 || used != 5 || h > 24 || m > 59 ||
        (h == 24 && m))
        return -1;
    *min = h * 60 + m;
    return 0;
}

int ferry_ap_window_parse(const char *s, ferry_ap_window *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    char a[8], b[8];
    const char *dash = strchr(s, '-');
    if (!dash || dash - s != 5 || strlen(dash + 1) != 5)
        goto bad;
    memcpy(a, s, 5);
    a[5] = '\0';
    memcpy(b, dash + 1, 6);
    if (hhmm(a, &out->start_min) || hhmm(b, &out->end_min) || out->start_min == out->end_min)
        goto bad;
    out->set = true;
    return FERRY_OK;
bad:
    return ferry_err_set(err, FERRY_EINVAL, "window '%s': expected HH:MM-HH:MM in UTC, e.g. "
                         "01:00-05:00 (start and end differ; 22:00-02:00 crosses midnight)", s);
}

static unsigned minute_of_day(time_t now)
{
    struct tm tm;
    gmtime_r(&now, &tm);
    return (unsigned)(tm.tm_hour * 60 + tm.tm_min);
}

bool ferry_ap_window_open(const ferry_ap_window *w, time_t now)
{
    if (!w->set)
        return true;
    unsigned m = minute_of_day(now);
    if (w->start_min < w->end_min)
        return m >= w->start_min && m < w->end_min;
    return m >= w->start_min || m < w->end_min; /* across midnight */
}

void ferry_ap_window_fmt(const ferry_ap_window *w, char *out, size_t sz)
{
    if (!w->set)
        snprintf(out, sz, "always");
    else
        snprintf(out, sz, "%02u:%02u-%02u:%02u", (w->start_min / 60) % 100, w->start_min % 60,
                 (w->end_min / 60) % 100, w->end_min % 60);
}

time_t ferry_ap_window_next(const ferry_ap_window *w, time_t now)
{
    if (ferry_ap_window_open(w, now))
        return now;
    time_t day = now - now % 86400;
    time_t at = day + (time_t)w->start_min * 60;
    return at > now ? at : at + 86400;
}

bool ferry_ap_window_holds(const ferry_autopilot_config *ac, enum ferry_ap_action a, time_t now,
                           char *why, size_t whysz)
{
    if (why && whysz)
        why[0] = '\0';
    if (a == FERRY_AP_DOCTOR || (unsigned)a >= FERRY_AP_ACTIONS ||
        !(ac->window_actions & (1u << a)) || ferry_ap_window_open(&ac->window, now))
        return false;
    if (why) {
        time_t next = ferry_ap_window_next(&ac->window, now);
        struct tm tm;
        char at[32] = "?", win[32];
        if (gmtime_r(&next, &tm))
            strftime(at, sizeof at, "%Y-%m-%dT%H:%MZ", &tm);
        ferry_ap_window_fmt(&ac->window, win, sizeof win);
        snprintf(why, whysz, "outside the window %s UTC (next opens %s)", win, at);
    }
    return true;
}

/* [autopilot] window_actions: the actions the window holds, comma-separated. */
static int window_actions(const ferry_config *cfg, unsigned *mask, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(cfg, "autopilot", NULL, "window_actions");
    *mask = 0;
    for (int a = 0; a < FERRY_AP_ACTIONS; a++)
        if (a != FERRY_AP_DOCTOR)
            *mask |= 1u << a;
    if (!e)
        return FERRY_OK;
    *mask = 0;
    char copy[256], *save = NULL;
    snprintf(copy, sizeof copy, "%s", e->value);
    for (char *s = strtok_r(copy, ", ", &save); s; s = strtok_r(NULL, ", ", &save)) {
        int a;
        for (a = 0; a < FERRY_AP_ACTIONS && strcmp(s, action_names[a]); a++)
            ;
        if (a == FERRY_AP_ACTIONS || a == FERRY_AP_DOCTOR)
            return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [autopilot] window_actions: '%s' is "
                                 "not one of rebalance, splits, tier, repair, retention, sweep "
                                 "(doctor only reads and is never held)", cfg->path, e->line, s);
        *mask |= 1u << a;
    }
    return FERRY_OK;
}

/* One interval key: [autopilot] KEY, or its alias [cluster] KEY. */
static int interval(const ferry_config *cfg, const char *key, unsigned *out, char *notes,
                    size_t notesz, ferry_err *err)
{
    const ferry_config_entry *a = ferry_config_find(cfg, "autopilot", NULL, key);
    const ferry_config_entry *c = ferry_config_find(cfg, "cluster", NULL, key);
    const ferry_config_entry *e = a ? a : c;
    *out = 0;
    if (a && c)
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: %s is given in [autopilot] and (line "
                             "%d) in [cluster]: keep the [autopilot] one ([cluster] %s is its "
                             "older alias)", cfg->path, a->line, key, c->line, key);
    if (!e || !e->value[0])
        return FERRY_OK;
    uint64_t s;
    if (!ferry_parse_duration(e->value, &s) || s > 365 * 86400)
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [%s] %s = '%s': expected a duration "
                             "such as 10m (0: off)", cfg->path, e->line, e->section, key,
                             e->value);
    *out = (unsigned)s;
    if (!a && s) {
        size_t used = strlen(notes);
        snprintf(notes + used, notesz - used, "%s[cluster] %s (alias of [autopilot] %s)",
                 used ? ", " : "", key, key);
    }
    return FERRY_OK;
}

/* [autopilot] KEY = DURATION (> 0) or absent (0). */
static int duration_key(const ferry_config *cfg, const char *key, uint64_t *out, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(cfg, "autopilot", NULL, key);
    *out = 0;
    if (!e || !e->value[0])
        return FERRY_OK;
    if (!ferry_parse_duration(e->value, out) || !*out)
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [autopilot] %s = '%s': expected a "
                             "duration greater than 0 such as 90d or 24h", cfg->path, e->line,
                             key, e->value);
    return FERRY_OK;
}

int ferry_autopilot_config_read(const ferry_config *cfg, ferry_autopilot_config *out,
                                ferry_err *err)
{
    static const char *const keys[] = {
        "enabled", "rebalance_interval", "splits_interval", "tier_interval", "repair_interval",
        "retention_interval", "sweep_interval", "doctor_interval", "max_moves_per_shard",
        "max_moves", "move_batch", "bandwidth", "bandwidth_per_shard", "window", "window_actions",
        "skew", "keep", "delete_orphans", "min_age", "doctor_skip", NULL};
    memset(out, 0, sizeof *out);
    uint64_t per_shard = 0, total = 0, batch = 0;
    int rc = ferry_config_check_keys(cfg, "autopilot", keys, err);
    if (!rc)
        rc = ferry_config_bool(cfg, "autopilot", NULL, "enabled", true, &out->enabled, err);
    for (int a = 0; !rc && a < FERRY_AP_ACTIONS; a++) {
        char key[48];
        snprintf(key, sizeof key, "%s_interval", action_names[a]);
        rc = interval(cfg, key, &out->interval_s[a], out->notes, sizeof out->notes, err);
    }
    if (!rc)
        rc = ferry_config_u64(cfg, "autopilot", NULL, "max_moves_per_shard", 1, &per_shard, err);
    if (!rc)
        rc = ferry_config_u64(cfg, "autopilot", NULL, "max_moves", 2, &total, err);
    if (!rc)
        rc = ferry_config_u64(cfg, "autopilot", NULL, "move_batch", FERRY_AP_MOVE_BATCH, &batch,
                              err);
    if (!rc)
        rc = ferry_config_bytes(cfg, "autopilot", NULL, "bandwidth", 0, &out->bandwidth, err);
    if (!rc)
        rc = ferry_config_bytes(cfg, "autopilot", NULL, "bandwidth_per_shard", 0,
                                &out->bandwidth_per_shard, err);
    if (!rc)
        rc = ferry_config_double(cfg, "autopilot", NULL, "skew", 0.2, &out->skew, err);
    if (!rc)
        rc = ferry_config_bool(cfg, "autopilot", NULL, "delete_orphans", false,
                               &out->delete_orphans, err);
    if (!rc)
        rc = window_actions(cfg, &out->window_actions, err);
    if (!rc)
        rc = duration_key(cfg, "keep", &out->keep_s, err);
    if (!rc)
        rc = duration_key(cfg, "min_age", &out->min_age_s, err);
    if (rc)
        return rc;
    const char *skip = ferry_config_get(cfg, "autopilot", NULL, "doctor_skip");
    snprintf(out->doctor_skip, sizeof out->doctor_skip, "%s", skip ? skip : "");
    if (out->interval_s[FERRY_AP_RETENTION] && !out->keep_s)
        return ferry_err_set(err, FERRY_EINVAL, "%s: [autopilot] retention_interval needs keep "
                             "= DURATION (e.g. 90d): how long partitions are kept", cfg->path);
    if (out->delete_orphans && !out->min_age_s)
        return ferry_err_set(err, FERRY_EINVAL, "%s: [autopilot] delete_orphans = true needs "
                             "min_age = DURATION (e.g. 24h): younger objects may be uploads in "
                             "flight", cfg->path);
    const ferry_config_entry *e;
    if (per_shard < 1 || per_shard > 64 || total < 1 || total > 64) {
        e = ferry_config_find(cfg, "autopilot", NULL, per_shard < 1 || per_shard > 64 ?
                              "max_moves_per_shard" : "max_moves");
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [autopilot] %s: expected 1..64 moves",
                             cfg->path, e ? e->line : 0, e ? e->key : "max_moves");
    }
    if (batch < 1 || batch > 64) {
        e = ferry_config_find(cfg, "autopilot", NULL, "move_batch");
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [autopilot] move_batch: expected 1..64 "
                             "moves between the same two shards run as one batch (1: each "
                             "alone)", cfg->path, e ? e->line : 0);
    }
    if (out->skew <= 0 || out->skew > 1) {
        e = ferry_config_find(cfg, "autopilot", NULL, "skew");
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [autopilot] skew: expected a fill "
                             "difference between 0 and 1, e.g. 0.2", cfg->path, e ? e->line : 0);
    }
    out->max_moves_per_shard = (unsigned)per_shard;
    out->max_moves = (unsigned)total;
    out->move_batch = (unsigned)batch;
    if ((e = ferry_config_find(cfg, "autopilot", NULL, "window")) && e->value[0] &&
        ferry_ap_window_parse(e->value, &out->window, err)) {
        ferry_err_prefix(err, "%s:%d: [autopilot] ", cfg->path, e->line);
        return FERRY_EINVAL;
    }
    return FERRY_OK;
}

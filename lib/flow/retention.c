/* Retention's pure pieces: its journal's declared states (the flow engine's table,
 * include/ferry/flow_journal.h), calendar days, the cut-off, which partitions are selected, and the
 * deletion verdict for recorded objects (include/ferry/retention.h). No I/O. */
#include "ferry/retention.h"

#include <stdio.h>
#include <string.h>

#define DAY_S 86400

#define TO(s) FERRY_FLOW_TO(FERRY_RETENTION_##s)
static const ferry_flow_state retention_states[FERRY_RETENTION_STATE_COUNT] = {
    [FERRY_RETENTION_SCAN] = {"SCAN", TO(DETACH), false},
    [FERRY_RETENTION_DETACH] = {"DETACH", TO(REMOVE) | TO(SCAN), false}, /* SCAN: found on */
    [FERRY_RETENTION_REMOVE] = {"REMOVE", TO(DELETE) | TO(SCAN), false}, /* another server */
    [FERRY_RETENTION_DELETE] = {"DELETE", TO(DONE) | TO(SCAN), false},
    [FERRY_RETENTION_DONE] = {"DONE", TO(SCAN), true}, /* a new run of the partition */
};
#undef TO

const ferry_flow_kind ferry_retention_flow = {
    .kind = "retention",
    .states = retention_states,
    .n_states = FERRY_RETENTION_STATE_COUNT,
    .start = FERRY_RETENTION_SCAN,
    .failed = -1, /* none: a job that cannot go on stays in its state with a detail */
    .crash_before = "FERRY_TEST_CRASH_BEFORE",
    .crash_after = "FERRY_TEST_CRASH_AFTER",
};

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static uint32_t civil_from_days(int64_t z)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t y = (int64_t)yoe + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    return (uint32_t)((y + (m <= 2)) * 10000 + m * 100 + d);
}

bool ferry_ymd_valid(uint32_t ymd)
{
    uint32_t y = ymd / 10000, m = ymd / 100 % 100, d = ymd % 100;
    if (y < 1900 || y > 9999 || m < 1 || m > 12 || d < 1)
        return false;
    return civil_from_days(days_from_civil(y, m, d)) == ymd;
}

uint32_t ferry_ymd_add(uint32_t ymd, int64_t days)
{
    return civil_from_days(days_from_civil(ymd / 10000, ymd / 100 % 100, ymd % 100) + days);
}

uint32_t ferry_ymd_of_time(time_t t)
{
    int64_t s = (int64_t)t;
    int64_t days = s >= 0 ? s / DAY_S : -((-s + DAY_S - 1) / DAY_S);
    return civil_from_days(days);
}

int ferry_retention_cutoff(time_t now, uint64_t keep_s, uint32_t hot_days, uint32_t *cutoff,
                           ferry_err *err)
{
    if (keep_s == 0 || keep_s % DAY_S)
        return ferry_err_set(err, FERRY_EINVAL, "--keep must be a whole number of days (e.g. "
                             "90d), at least 1d");
    uint64_t keep_days = keep_s / DAY_S;
    if (keep_days > 36500)
        return ferry_err_set(err, FERRY_EINVAL, "--keep %llud is more than 100 years",
                             (unsigned long long)keep_days);
    if (keep_days < hot_days)
        return ferry_err_set(err, FERRY_EINVAL, "--keep %llud is shorter than the hot window "
                             "([cluster] hot_days = %u): data would be deleted while still hot; "
                             "keep at least %ud", (unsigned long long)keep_days, hot_days,
                             hot_days);
    *cutoff = ferry_ymd_add(ferry_ymd_of_time(now), -(int64_t)keep_days + 1);
    return FERRY_OK;
}

bool ferry_retention_selects(const ferry_retention_select *sel, const ferry_partition_key *key)
{
    if (sel->tenant && (!key->tenant[0] || strcmp(sel->tenant, key->tenant)))
        return false;
    if (sel->all)
        return sel->tenant != NULL;
    return key->day < sel->cutoff;
}

void ferry_retention_decide(const char *const *keys, size_t n, const ferry_refset *live,
                            const ferry_record *parts, size_t n_parts,
                            ferry_retention_verdict *verdicts)
{
    for (size_t i = 0; i < n; i++) {
        ferry_retention_verdict *v = &verdicts[i];
        v->key = keys[i];
        v->deletable = true;
        v->blocker[0] = '\0';
        const ferry_sweep_ref *r = ferry_refset_find(live, keys[i]);
        if (r) {
            v->deletable = false;
            snprintf(v->blocker, sizeof v->blocker, "pointer file %s:%s:%s", r->server, r->disk,
                     r->path);
            continue;
        }
        for (size_t p = 0; p < n_parts && v->deletable; p++) {
            const ferry_part *part = &parts[p].u.part;
            if (!part->servers[0])
                continue;
            for (size_t k = 0; k < part->n_objects; k++)
                if (!strcmp(part->objects[k].key, keys[i])) {
                    v->deletable = false;
                    snprintf(v->blocker, sizeof v->blocker, "catalog part %s/%s/%s on %s",
                             part->table, part->partition_id, part->name, part->servers);
                    break;
                }
        }
    }
}

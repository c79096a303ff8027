/* Tiering's pure pieces (tier.h): its journal's declared states and transitions (the flow
 * engine's table, include/ferry/flow_journal.h), job ids, freeze names,
 * the age rule and the names of the staging table and the empty twin. No I/O. */
#define _DEFAULT_SOURCE
#include "ferry/tier.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define TO(s) FERRY_FLOW_TO(FERRY_TIER_##s)
#define FAIL TO(FAILED)
static const ferry_flow_state tier_states[FERRY_TIER_STATE_COUNT] = {
    [FERRY_TIER_PLANNED] = {"PLANNED", TO(FREEZE) | FAIL, false},
    [FERRY_TIER_FREEZE] = {"FREEZE", TO(FREEZE) | TO(UPLOAD) | FAIL, false}, /* a fresh attempt */
    [FERRY_TIER_UPLOAD] = {"UPLOAD", TO(POINTERS) | FAIL, false},
    [FERRY_TIER_POINTERS] = {"POINTERS", TO(ATTACH) | FAIL, false},
    [FERRY_TIER_ATTACH] = {"ATTACH", TO(REPLACE) | FAIL, false},
    [FERRY_TIER_REPLACE] = {"REPLACE", TO(VERIFY) | FAIL, false},
    [FERRY_TIER_VERIFY] = {"VERIFY", TO(CLEANUP) | FAIL, false},
    [FERRY_TIER_CLEANUP] = {"CLEANUP", TO(DONE) | FAIL, false},
    [FERRY_TIER_DONE] = {"DONE", TO(PLANNED), true},   /* a new run of the partition */
    [FERRY_TIER_FAILED] = {"FAILED", TO(PLANNED), true},
};
#undef FAIL
#undef TO

const ferry_flow_kind ferry_tier_flow = {
    .kind = "tier",
    .states = tier_states,
    .n_states = FERRY_TIER_STATE_COUNT,
    .start = FERRY_TIER_PLANNED,
    .failed = FERRY_TIER_FAILED,
    .crash_before = "FERRY_TEST_CRASH_BEFORE",
    .crash_after = "FERRY_TEST_CRASH_AFTER",
    .owner_clears_when_finished = true,
};

const char *ferry_tier_state_name(enum ferry_tier_state s)
{
    return ferry_flow_state_name(&ferry_tier_flow, (int)s);
}

int ferry_tier_state_parse(const char *name, enum ferry_tier_state *out, ferry_err *err)
{
    int s = ferry_flow_state_parse(&ferry_tier_flow, name);
    if (s >= 0) {
        *out = (enum ferry_tier_state)s;
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_EINVAL, "unknown tiering state '%s' (PLANNED, FREEZE, "
                         "UPLOAD, POINTERS, ATTACH, REPLACE, VERIFY, CLEANUP, DONE, FAILED)",
                         name ? name : "");
}

bool ferry_tier_transition_ok(enum ferry_tier_state from, enum ferry_tier_state to)
{
    return ferry_flow_transition_ok(&ferry_tier_flow, (int)from, (int)to);
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

int ferry_tier_job_id(const char *server, const char *table, const char *partition_id, char *out,
                      size_t outsz, ferry_err *err)
{
    int n = snprintf(out, outsz, "tier.%s.%s.%s", server, table, partition_id);
    if (n < 0 || (size_t)n >= outsz || n > 127)
        return ferry_err_set(err, FERRY_EINVAL, "job id for %s/%s/%s is longer than 127 "
                             "characters", server, table, partition_id);
    for (const char *p = out; *p; p++)
        if (!name_char(*p))
            return ferry_err_set(err, FERRY_EINVAL, "job id '%s': server, table and partition id "
                                 "must be characters of A-Z a-z 0-9 _ . -", out);
    return FERRY_OK;
}

void ferry_tier_freeze_name(const char *job_id, unsigned attempt, char *out, size_t outsz)
{
    unsigned long long h = (unsigned long long)XXH3_64bits(job_id, strlen(job_id));
    snprintf(out, outsz, "ferry_tier_%016llx_%u", h, attempt);
}

bool ferry_tier_day_due(uint32_t day, int64_t now, uint64_t older_than)
{
    int y = (int)(day / 10000), m = (int)(day / 100 % 100), d = (int)(day % 100);
    if (y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
        return false;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
    time_t start = timegm(&tm);
    struct tm back;
    if (start == (time_t)-1 || !gmtime_r(&start, &back) || back.tm_mday != d || back.tm_mon != m - 1)
        return false; /* 20260230 and the like */
    int64_t end = (int64_t)start + 86400;
    if (older_than > (uint64_t)INT64_MAX / 2)
        return false;
    return end + (int64_t)older_than <= now;
}

int ferry_tier_staging_name(const char *table, char *out, size_t outsz, ferry_err *err)
{
    int n = snprintf(out, outsz, "%s_ferry_staging", table);
    if (n < 0 || (size_t)n >= outsz)
        return ferry_err_set(err, FERRY_EINVAL, "table name '%s' is too long for a staging "
                             "table name", table);
    return FERRY_OK;
}

int ferry_tier_empty_name(const char *table, char *out, size_t outsz, ferry_err *err)
{
    int n = snprintf(out, outsz, "%s_ferry_empty", table);
    if (n < 0 || (size_t)n >= outsz)
        return ferry_err_set(err, FERRY_EINVAL, "table name '%s' is too long for ferry's empty "
                             "twin table name", table);
    return FERRY_OK;
}

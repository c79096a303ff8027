/* Tiering's pure pieces (tier.h): journal state names and transitions, job ids, freeze names,
 * the age rule and the names of the staging table and the empty twin. No I/O. */
#define _DEFAULT_SOURCE
#include "ferry/tier.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

static const char *const state_names[FERRY_TIER_STATE_COUNT] = {
    "PLANNED", "FREEZE", "UPLOAD", "POINTERS", "ATTACH", "REPLACE",
    "VERIFY",  "CLEANUP", "DONE",  "FAILED"};

const char *ferry_tier_state_name(enum ferry_tier_state s)
{
    return (unsigned)s < FERRY_TIER_STATE_COUNT ? state_names[s] : "?";
}

int ferry_tier_state_parse(const char *name, enum ferry_tier_state *out, ferry_err *err)
{
    for (int i = 0; i < FERRY_TIER_STATE_COUNT; i++)
        if (name && !strcmp(name, state_names[i])) {
            *out = (enum ferry_tier_state)i;
            return FERRY_OK;
        }
    return ferry_err_set(err, FERRY_EINVAL, "unknown tiering state '%s' (PLANNED, FREEZE, "
                         "UPLOAD, POINTERS, ATTACH, REPLACE, VERIFY, CLEANUP, DONE, FAILED)",
                         name ? name : "");
}

bool ferry_tier_transition_ok(enum ferry_tier_state from, enum ferry_tier_state to)
{
    if ((unsigned)from >= FERRY_TIER_STATE_COUNT || (unsigned)to >= FERRY_TIER_STATE_COUNT)
        return false;
    if (from == FERRY_TIER_DONE || from == FERRY_TIER_FAILED)
        return to == FERRY_TIER_PLANNED;
    if (to == FERRY_TIER_FAILED)
        return true;
    if (from == FERRY_TIER_FREEZE && to == FERRY_TIER_FREEZE)
        return true;
    return to == from + 1;
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

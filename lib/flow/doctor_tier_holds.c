/* ferry doctor's tier_holds check (doctor_int.h): unfinished tier jobs whose swap may have run and
 * is not verified. Each keeps its table's merges stopped on its server until a run verifies it
 * (I6 in lib/flow/tier.c), and ClickHouse shows no trace of a stopped table (only OPTIMIZE
 * answers "Cancelled merging parts"): while inserts go on, the table piles up parts until the
 * server refuses them or runs out of inodes. A job left so for long (a run that fails at its
 * verification, a server or store away) is what an operator must hear of before that. */
#define _DEFAULT_SOURCE
#include "flow/doctor_int.h"
#include "flow/tier_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/flow_journal.h"
#include "ferry/testknob.h"
#include "ferry/tier.h"

#define CHECK "tier_holds"
/* A swap and its verification take seconds; a cut one waits for the next run (the coordinator's
 * tiering interval, minutes). Past these ages the hold is reported, then fails the doctor. */
#define HOLD_WARN_S (10 * 60)
#define HOLD_FAIL_S (60 * 60)

/* Since when job j (state and record) has held its table's merges, in unix seconds: its freeze
 * (the swap comes after it; a job frozen by a version that did not record it: its last journal
 * write). */
static int64_t held_since(const tier_job *j)
{
    if (j->st.has_frozen_at)
        return (int64_t)(j->st.frozen_at / 1000);
    return j->rec.u.job.updated;
}

void doctor_check_tier_holds(ferry_fleet *fl, json_t *checks)
{
    ferry_flow_journal fj;
    ferry_record_list l = {0};
    ferry_err err = {0};
    size_t holds = 0;
    const char *test_now = ferry_test_knob("FERRY_TEST_NOW"); /* test-only: a fixed clock */
    int64_t now = test_now ? strtoll(test_now, NULL, 10) : (int64_t)time(NULL);
    ferry_flow_journal_init(&fj, fl->cat, &ferry_tier_flow, "doctor");
    if (ferry_flow_list_unfinished(&fj, &l, &err)) {
        doctor_finding(checks, CHECK, "fail", NULL, NULL, "the tier jobs could not be listed: %s",
                       err.msg);
        return;
    }
    for (size_t i = 0; i < l.n; i++) {
        tier_job j = {.rec = l.items[i]};
        ferry_err de = {0};
        if (ferry_tier_state_parse(j.rec.u.job.state, &j.state, &de) ||
            tier_state_decode(ferry_job_data(&j.rec.u.job), &j.st, &de)) {
            doctor_finding(checks, CHECK, "warn", NULL, NULL, "tier job %s cannot be read (%s): "
                           "whether it holds its table's merges is not known",
                           j.rec.u.job.id, de.msg);
            tier_state_free(&j.st);
            continue;
        }
        if (tier_job_swap_unverified(&j)) {
            holds++;
            int64_t age = now - held_since(&j);
            const char *status = age >= HOLD_FAIL_S ? "fail" : age >= HOLD_WARN_S ? "warn" : "pass";
            char fix[512];
            snprintf(fix, sizeof fix, "run `ferry tier --server %s` (it resumes the job and "
                     "verifies its swap); if it fails again, its error says what stops it",
                     j.st.server);
            doctor_finding(checks, CHECK, status, j.st.server, age >= HOLD_WARN_S ? fix : NULL,
                           "tier job %s (%s.%s partition %s, state %s) holds the table's merges "
                           "stopped until its swap is verified, frozen %lld s ago%s%s",
                           j.rec.u.job.id, j.st.db, j.st.table, j.st.partition,
                           j.rec.u.job.state, (long long)(age > 0 ? age : 0),
                           j.rec.u.job.detail[0] ? "; last error: " : "",
                           j.rec.u.job.detail);
        }
        tier_state_free(&j.st);
    }
    if (!holds)
        doctor_finding(checks, CHECK, "pass", NULL, NULL, "no tier job holds a table's merges "
                       "stopped (%zu unfinished)", l.n);
    ferry_record_list_free(&l);
}

/* The autopilot's configuration (lib/coord/autopilot_config.c): [autopilot] and its [cluster]
 * aliases, the limits' bounds, the keys an action needs, and the maintenance window (parsing,
 * open or not at a given time, when it opens next, across midnight). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ferry/autopilot.h"
#include "ferry/config.h"

/* 2026-12-02 at hh:mm UTC */
static time_t at(int hh, int mm) { return (time_t)1796169600 + hh * 3600 + mm * 60; }

static void test_window(void **state)
{
    (void)state;
    ferry_ap_window w;
    ferry_err err = {0};
    char s[32];
    assert_int_equal(ferry_ap_window_parse("01:00-05:00", &w, &err), FERRY_OK);
    ferry_ap_window_fmt(&w, s, sizeof s);
    assert_string_equal(s, "01:00-05:00");
    assert_false(ferry_ap_window_open(&w, at(0, 59)));
    assert_true(ferry_ap_window_open(&w, at(1, 0)));
    assert_true(ferry_ap_window_open(&w, at(4, 59)));
    assert_false(ferry_ap_window_open(&w, at(5, 0)));
    assert_true(ferry_ap_window_next(&w, at(3, 0)) == at(3, 0)); /* open: now */
    assert_true(ferry_ap_window_next(&w, at(0, 30)) == at(1, 0)); /* later today */
    assert_true(ferry_ap_window_next(&w, at(6, 0)) == at(1, 0) + 86400); /* tomorrow */
    /* across midnight */
    assert_int_equal(ferry_ap_window_parse("22:30-02:00", &w, &err), FERRY_OK);
    assert_true(ferry_ap_window_open(&w, at(23, 0)));
    assert_true(ferry_ap_window_open(&w, at(1, 59)));
    assert_false(ferry_ap_window_open(&w, at(2, 0)));
    assert_false(ferry_ap_window_open(&w, at(22, 29)));
    assert_true(ferry_ap_window_next(&w, at(12, 0)) == at(22, 30));
    /* unset: always open */
    ferry_ap_window none = {0};
    assert_true(ferry_ap_window_open(&none, at(12, 0)));
    ferry_ap_window_fmt(&none, s, sizeof s);
    assert_string_equal(s, "always");
    const char *bad[] = {"1:00-5:00", "01:00", "01:00-01:00", "25:00-02:00", "01:60-02:00",
                         "01:00-05:00x", "aa:bb-cc:dd", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ferry_ap_window_parse(bad[i], &w, &err), FERRY_EINVAL);
        assert_non_null(strstr(err.msg, "HH:MM-HH:MM"));
    }
}

static int read_text(const char *text, ferry_autopilot_config *ac, ferry_err *err)
{
    ferry_config cfg = {0};
    int rc = ferry_config_parse(text, "t.conf", &cfg, err);
    if (!rc)
        rc = ferry_autopilot_config_read(&cfg, ac, err);
    ferry_config_free(&cfg);
    return rc;
}

static void test_config(void **state)
{
    (void)state;
    ferry_autopilot_config ac;
    ferry_err err = {0};
    /* nothing: enabled, nothing scheduled, the default limits */
    assert_int_equal(read_text("[cluster]\nname = x\n", &ac, &err), FERRY_OK);
    assert_true(ac.enabled);
    for (int a = 0; a < FERRY_AP_ACTIONS; a++)
        assert_int_equal(ac.interval_s[a], 0);
    assert_int_equal(ac.max_moves, 2);
    assert_int_equal(ac.max_moves_per_shard, 1);
    assert_int_equal(ac.move_batch, FERRY_AP_MOVE_BATCH);
    assert_false(ac.window.set);
    /* everything */
    assert_int_equal(read_text("[autopilot]\nenabled = false\nrebalance_interval = 1m\n"
                               "splits_interval = 10m\ntier_interval = 1h\nrepair_interval = 30s\n"
                               "retention_interval = 1d\nkeep = 90d\nsweep_interval = 2h\n"
                               "delete_orphans = true\nmin_age = 24h\ndoctor_interval = 1h\n"
                               "doctor_skip = shard_grants\nmax_moves = 4\n"
                               "max_moves_per_shard = 2\nmove_batch = 1\nbandwidth = 50M\n"
                               "window = 01:00-05:00\nskew = 0.3\n",
                               &ac, &err),
                     FERRY_OK);
    assert_false(ac.enabled);
    assert_int_equal(ac.interval_s[FERRY_AP_REBALANCE], 60);
    assert_int_equal(ac.interval_s[FERRY_AP_SPLITS], 600);
    assert_int_equal(ac.interval_s[FERRY_AP_TIER], 3600);
    assert_int_equal(ac.interval_s[FERRY_AP_REPAIR], 30);
    assert_int_equal(ac.interval_s[FERRY_AP_RETENTION], 86400);
    assert_int_equal(ac.interval_s[FERRY_AP_SWEEP], 7200);
    assert_int_equal(ac.interval_s[FERRY_AP_DOCTOR], 3600);
    assert_int_equal(ac.keep_s, 90 * 86400);
    assert_true(ac.delete_orphans);
    assert_int_equal(ac.min_age_s, 86400);
    assert_string_equal(ac.doctor_skip, "shard_grants");
    assert_int_equal(ac.max_moves, 4);
    assert_int_equal(ac.max_moves_per_shard, 2);
    assert_int_equal(ac.move_batch, 1);
    assert_true(ac.bandwidth == 50ull * 1024 * 1024 || ac.bandwidth == 50000000ull);
    assert_true(ac.window.set);
    assert_true(ac.skew > 0.29 && ac.skew < 0.31);
    assert_string_equal(ac.notes, "");
    /* the older [cluster] keys are aliases, and said to be */
    assert_int_equal(read_text("[cluster]\ntier_interval = 2s\nrepair_interval = 5m\n", &ac, &err),
                     FERRY_OK);
    assert_int_equal(ac.interval_s[FERRY_AP_TIER], 2);
    assert_int_equal(ac.interval_s[FERRY_AP_REPAIR], 300);
    assert_non_null(strstr(ac.notes, "[cluster] tier_interval (alias of [autopilot] "
                                     "tier_interval)"));
    /* refused, naming what and where */
    struct { const char *text, *needle; } bad[] = {
        {"[cluster]\ntier_interval = 1h\n[autopilot]\ntier_interval = 2h\n",
         "t.conf:4: tier_interval is given in [autopilot] and (line 2) in [cluster]"},
        {"[autopilot]\nrebalance_interval = soon\n", "t.conf:2: [autopilot] rebalance_interval"},
        {"[autopilot]\nmax_moves = 0\n", "[autopilot] max_moves: expected 1..64"},
        {"[autopilot]\nmax_moves_per_shard = 65\n", "max_moves_per_shard: expected 1..64"},
        {"[autopilot]\nmove_batch = 0\n", "t.conf:2: [autopilot] move_batch: expected 1..64"},
        {"[autopilot]\nskew = 2\n", "skew: expected a fill difference"},
        {"[autopilot]\nwindow = 1-5\n", "t.conf:2: [autopilot] window '1-5'"},
        {"[autopilot]\nretention_interval = 1d\n", "retention_interval needs keep"},
        {"[autopilot]\ndelete_orphans = true\n", "delete_orphans = true needs min_age"},
        {"[autopilot]\nmin_age = 0\n", "[autopilot] min_age = '0'"},
        {"[autopilot]\nrebalance = 1m\n", "rebalance"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(read_text(bad[i].text, &ac, &err), FERRY_EINVAL);
        if (!strstr(err.msg, bad[i].needle))
            fail_msg("case %zu: '%s' not in '%s'", i, bad[i].needle, err.msg);
    }
}

/* Which actions the window holds: every action but doctor by default, the ones window_actions
 * lists when given; nothing while the window is open or not set; the reason names the window. */
static void test_window_actions(void **state)
{
    (void)state;
    ferry_autopilot_config ac;
    ferry_err err = {0};
    char why[200];
    assert_int_equal(read_text("[autopilot]\nwindow = 01:00-05:00\n", &ac, &err), FERRY_OK);
    for (int a = 0; a < FERRY_AP_ACTIONS; a++) {
        bool held = ferry_ap_window_holds(&ac, (enum ferry_ap_action)a, at(12, 0), why,
                                          sizeof why);
        assert_int_equal(held, a != FERRY_AP_DOCTOR);
        if (held)
            assert_string_equal(why, "outside the window 01:00-05:00 UTC (next opens "
                                     "2026-12-03T01:00Z)");
        /* inside the window nothing is held */
        assert_false(ferry_ap_window_holds(&ac, (enum ferry_ap_action)a, at(2, 0), why,
                                           sizeof why));
        assert_string_equal(why, "");
    }
    assert_int_equal(read_text("[autopilot]\nwindow = 01:00-05:00\n"
                               "window_actions = rebalance, tier\n", &ac, &err), FERRY_OK);
    assert_true(ferry_ap_window_holds(&ac, FERRY_AP_REBALANCE, at(12, 0), NULL, 0));
    assert_true(ferry_ap_window_holds(&ac, FERRY_AP_TIER, at(12, 0), NULL, 0));
    assert_false(ferry_ap_window_holds(&ac, FERRY_AP_REPAIR, at(12, 0), NULL, 0));
    assert_false(ferry_ap_window_holds(&ac, FERRY_AP_SWEEP, at(12, 0), NULL, 0));
    /* no window: never held */
    assert_int_equal(read_text("[autopilot]\nrepair_interval = 1m\n", &ac, &err), FERRY_OK);
    assert_false(ferry_ap_window_holds(&ac, FERRY_AP_REPAIR, at(12, 0), NULL, 0));
    assert_int_equal(read_text("[autopilot]\nwindow_actions = tier, doctor\n", &ac, &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "t.conf:2: [autopilot] window_actions: 'doctor'"));
    assert_int_equal(read_text("[autopilot]\nwindow_actions = tiering\n", &ac, &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "'tiering' is not one of"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_window_actions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The cluster-wide tallies (include/ferry/tally.h) in a SQLite catalog in a temporary
 * directory: four threads, each with its own catalog handle (as separate processes would have),
 * add moves at once and no count is lost to a lost compare-and-set; the recent list keeps the
 * newest moves and fits the record; a run that did not end the move adds its bytes only; an
 * incomplete sweep keeps the time of the last complete one; a doctor check is as bad as its
 * worst finding; absent tallies read as zeros. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "ferry/catalog.h"
#include "ferry/tally.h"

static char dir[256];
static char url[512];

#define THREADS 4
#define MOVES_EACH 25

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

static void *mover(void *arg)
{
    long t = (long)arg;
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    if (ferry_catalog_open(url, &c, &err))
        return strdup(err.msg);
    char *bad = NULL;
    for (int i = 0; i < MOVES_EACH && !bad; i++) {
        ferry_move_result r = {0};
        snprintf(r.id, sizeof r.id, "mv-%ld-%d", t, i);
        snprintf(r.tenant, sizeof r.tenant, "tenant-with-a-fairly-long-name-%ld-%d", t, i);
        snprintf(r.from, sizeof r.from, "shard-a");
        snprintf(r.to, sizeof r.to, "shard-b");
        r.state = i % 5 == 4 ? FERRY_MOVE_FAILED : FERRY_MOVE_DONE;
        r.hot_copied = 1000;
        r.cold_copied = 10;
        r.seconds = 0.5;
        if (ferry_tally_move_add(c, &r, &err))
            bad = strdup(err.msg);
    }
    ferry_catalog_close(c);
    return bad;
}

static void test_concurrent_moves(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, mover, (void *)t), 0);
    for (int t = 0; t < THREADS; t++) {
        void *bad = NULL;
        pthread_join(th[t], &bad);
        if (bad) {
            fprintf(stderr, "thread %d: %s\n", t, (char *)bad);
            free(bad);
            fail();
        }
    }
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    must(ferry_catalog_open(url, &c, &err), &err);
    /* a stopped run (not ended) adds its bytes, not a move */
    ferry_move_result r = {.state = FERRY_MOVE_SWITCH, .hot_copied = 7, .cold_copied = 3};
    snprintf(r.id, sizeof r.id, "mv-stopped");
    must(ferry_tally_move_add(c, &r, &err), &err);
    ferry_tallies t;
    must(ferry_tallies_read(c, &t, &err), &err);
    uint64_t n = THREADS * MOVES_EACH;
    assert_int_equal(t.moves.done, n - n / 5);
    assert_int_equal(t.moves.failed, n / 5);
    assert_int_equal(t.moves.hot_copied, n * 1000 + 7);
    assert_int_equal(t.moves.cold_copied, n * 10 + 3);
    assert_true(t.moves.seconds > 0.5 * (double)n - 0.01);
    assert_int_equal(t.moves.n_recent, FERRY_TALLY_RECENT_MOVES);
    for (size_t i = 0; i < t.moves.n_recent; i++) {
        assert_string_not_equal(t.moves.recent[i].id, "mv-stopped");
        assert_int_equal(t.moves.recent[i].hot_copied, 1000);
    }
    ferry_catalog_close(c);
}

static void test_sweep_and_doctor(void **state)
{
    (void)state;
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    must(ferry_catalog_open(url, &c, &err), &err);
    ferry_tallies t;
    must(ferry_tallies_read(c, &t, &err), &err);
    assert_false(t.sweep.present);
    assert_false(t.doctor.present);

    ferry_sweep_result res = {0};
    res.complete = true;
    res.report.n_orphans = 3;
    res.report.orphan_bytes = 300;
    must(ferry_tally_sweep_put(c, &res, 1000, &err), &err);
    res.complete = false;
    res.report.n_dangling = 2;
    must(ferry_tally_sweep_put(c, &res, 2000, &err), &err);
    must(ferry_tallies_read(c, &t, &err), &err);
    assert_true(t.sweep.present);
    assert_false(t.sweep.complete);
    assert_int_equal(t.sweep.at, 2000);
    assert_int_equal(t.sweep.last_complete, 1000);
    assert_int_equal(t.sweep.dangling, 2);
    assert_int_equal(t.sweep.orphan_bytes, 300);

    json_t *report = json_pack(
        "{s:[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]}",
        "checks", "check", "versioning", "status", "pass", "check", "versioning", "status",
        "fail", "check", "versioning", "status", "pass", "check", "catalog_acl", "status",
        "skipped", "check", "tier_holds", "status", "pass", "check", "tier_holds", "status",
        "warn", "check", "object_access", "status", "warn", "check", "object_access", "status",
        "fail");
    assert_non_null(report);
    must(ferry_tally_doctor_put(c, report, 3000, &err), &err);
    json_decref(report);
    must(ferry_tallies_read(c, &t, &err), &err);
    assert_true(t.doctor.present);
    assert_int_equal(t.doctor.at, 3000);
    assert_int_equal(t.doctor.n_checks, 4);
    for (size_t i = 0; i < t.doctor.n_checks; i++) {
        const char *name = t.doctor.checks[i].check;
        /* a warning is worse than a pass and better than a failure */
        assert_string_equal(t.doctor.checks[i].status,
                            !strcmp(name, "versioning") || !strcmp(name, "object_access") ? "fail"
                            : !strcmp(name, "tier_holds")                                 ? "warn"
                                                                                          : "skipped");
    }
    ferry_catalog_close(c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ferry_tally_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(url, sizeof url, "sqlite:%s/c.db", dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_moves),
        cmocka_unit_test(test_sweep_and_doctor),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

/* The router's retry journal (lib/router/retry_journal.c) on real files in a temporary folder:
 * what a router started on a journal an earlier one left holds (a request that never ended: its
 * slices for a whole window; a failed one: the rest of its window; a finished one: nothing),
 * that the file stays bounded while its content survives compaction, that a line cut short or a
 * foreign file is handled, that two routers cannot share one journal, and that request ids grow
 * across lives. A router "killed" here is a copy of its journal taken while it runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "router/router_int.h"

#define WINDOW_MS 60000u

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/ferry-unit-journal.XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/retries", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* The journal as a router killed now would leave it: a copy at path.copy, returned. */
static const char *kill_copy(const fixture *f, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s.copy", f->path);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", f->path, out);
    assert_int_equal(system(cmd), 0);
    return out;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void touch(rt_journal *j, rt_journal_req *q, const char *tenant, uint32_t split)
{
    ferry_err err = {0};
    assert_int_equal(rt_journal_touch(j, q, tenant, split, &err), FERRY_OK);
}

/* A router's journal started on path: its pending table and the journal, both the caller's. */
static void start(const char *path, rt_pending **p, rt_journal **j)
{
    ferry_err err = {0};
    assert_int_equal(rt_pending_new(WINDOW_MS, p), FERRY_OK);
    assert_int_equal(rt_journal_open(path, *p, j, &err), FERRY_OK);
}

static void stop(rt_pending *p, rt_journal *j)
{
    rt_journal_close(j);
    rt_pending_free(p);
}

/* A router started on what a killed one left: held slices as the killed router expected. */
static void test_restart_holds_what_was_expected(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL, *p2 = NULL;
    rt_journal *j = NULL, *j2 = NULL;
    start(f->path, &p, &j);
    rt_journal_req inflight = {0}, done = {0}, failed = {0};
    touch(j, &inflight, "a", 0);
    touch(j, &inflight, "b", 1);
    touch(j, &done, "c", 0);
    rt_journal_end(j, &done, false); /* answered 200: nothing to hold */
    touch(j, &failed, "d", 2);
    rt_journal_end(j, &failed, true); /* failed: its client retries */
    char copy[256];
    kill_copy(f, copy, sizeof copy);

    start(copy, &p2, &j2);
    uint64_t a = rt_pending_left_ms(p2, "a", 0), b = rt_pending_left_ms(p2, "b", 1);
    uint64_t d = rt_pending_left_ms(p2, "d", 2);
    assert_true(a > WINDOW_MS - 5000 && a <= WINDOW_MS); /* in flight: a whole window from now */
    assert_true(b > WINDOW_MS - 5000 && b <= WINDOW_MS);
    assert_true(d > WINDOW_MS - 5000 && d <= WINDOW_MS); /* failed: what was left of it */
    assert_int_equal(rt_pending_left_ms(p2, "c", 0), 0); /* finished: not held */
    assert_int_equal(rt_pending_left_ms(p2, "a", 1), 0);
    assert_int_equal(rt_pending_count(p2), 3);
    stop(p2, j2);

    /* the restarted router rewrote the file: a third life holds the same without the records */
    start(copy, &p2, &j2);
    assert_int_equal(rt_pending_count(p2), 3);
    assert_true(rt_pending_left_ms(p2, "a", 0) > 0);
    stop(p2, j2);

    rt_journal_end(j, &inflight, false);
    stop(p, j);
}

/* A failed request's slices held in the file expire with their window, across a restart. */
static void test_expired_not_held(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL;
    rt_journal *j = NULL;
    write_file(f->path, "ferry-router-retries 1\n"
                        "P 1000 0 old\n"             /* 1970: long expired */
                        "P 99999999999999 3 future\n" /* far ahead: clamped to the window */
                        "I 7 1 ended\n"
                        "D 7\n");
    start(f->path, &p, &j);
    assert_int_equal(rt_pending_left_ms(p, "old", 0), 0);
    assert_int_equal(rt_pending_left_ms(p, "ended", 1), 0);
    uint64_t fut = rt_pending_left_ms(p, "future", 3);
    assert_true(fut > 0 && fut <= WINDOW_MS);
    stop(p, j);
}

/* Many requests: the file is rewritten before it grows past the limit by much, and what is
 * true (an open request's slices, a held slice) survives every rewrite. */
static void test_compaction_keeps_the_truth(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL, *p2 = NULL;
    rt_journal *j = NULL, *j2 = NULL;
    start(f->path, &p, &j);
    rt_journal_req longrun = {0}, failed = {0};
    touch(j, &longrun, "long", 5);
    touch(j, &failed, "held", 4);
    rt_pending_hold(p, "held", 4, WINDOW_MS); /* what the server's rt_pending_mark does */
    rt_journal_end(j, &failed, true);
    char name[32];
    for (int i = 0; i < 60000; i++) { /* about 3 MB of records */
        rt_journal_req q = {0};
        snprintf(name, sizeof name, "tenant%05d", i % 1000);
        touch(j, &q, name, (uint32_t)(i % 7));
        rt_journal_end(j, &q, false);
    }
    touch(j, &longrun, "long", 6); /* after the rewrites, the same request goes on */
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_true(sb.st_size < RT_JOURNAL_COMPACT_BYTES + 4096);
    char copy[256];
    kill_copy(f, copy, sizeof copy);
    start(copy, &p2, &j2);
    assert_true(rt_pending_left_ms(p2, "long", 5) > 0);
    assert_true(rt_pending_left_ms(p2, "long", 6) > 0);
    assert_true(rt_pending_left_ms(p2, "held", 4) > 0);
    assert_int_equal(rt_pending_count(p2), 3); /* none of the 60,000 finished ones */
    stop(p2, j2);
    rt_journal_end(j, &longrun, false);
    stop(p, j);
}

/* A record cut short by the kill is skipped; the whole ones before it count. */
static void test_cut_short_line(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL;
    rt_journal *j = NULL;
    write_file(f->path, "ferry-router-retries 1\nI 5 0 whole\nI 6 0 cu");
    start(f->path, &p, &j);
    assert_true(rt_pending_left_ms(p, "whole", 0) > 0);
    assert_int_equal(rt_pending_left_ms(p, "cu", 0), 0);
    assert_int_equal(rt_pending_count(p), 1);
    stop(p, j);
}

/* Another file at the path is not taken for a journal (nor overwritten); one journal, one router. */
static void test_foreign_file_and_lock(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL;
    rt_journal *j = NULL, *j2 = NULL;
    ferry_err err = {0};
    assert_int_equal(rt_pending_new(WINDOW_MS, &p), FERRY_OK);
    write_file(f->path, "[cluster]\ncatalog = sqlite:x.db\n");
    assert_int_equal(rt_journal_open(f->path, p, &j, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "is not a ferry router's retry journal"));
    FILE *fp = fopen(f->path, "r");
    char first[64] = "";
    assert_non_null(fp);
    assert_non_null(fgets(first, sizeof first, fp));
    fclose(fp);
    assert_string_equal(first, "[cluster]\n"); /* left as it was */
    unlink(f->path);

    assert_int_equal(rt_journal_open(f->path, p, &j, &err), FERRY_OK);
    assert_int_equal(rt_journal_open(f->path, p, &j2, &err), FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "in use by another router"));
    assert_null(j2);
    rt_journal_close(j);
    /* released with the first router */
    assert_int_equal(rt_journal_open(f->path, p, &j2, &err), FERRY_OK);
    rt_journal_close(j2);

    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/folder/retries", f->dir);
    assert_int_equal(rt_journal_open(missing, p, &j, &err), FERRY_EIO);
    assert_non_null(strstr(err.msg, "the folder must exist"));
    rt_pending_free(p);
}

/* A later life's request ids are above every id of the earlier ones, so a D never ends a request
 * of an earlier life. */
static void test_ids_grow_across_lives(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL;
    rt_journal *j = NULL;
    write_file(f->path, "ferry-router-retries 1\nI 9000000000000000000 0 x\n");
    start(f->path, &p, &j);
    rt_journal_req q = {0};
    touch(j, &q, "y", 0);
    assert_true(q.id > 9000000000000000000ull);
    rt_journal_end(j, &q, false);
    stop(p, j);
}

/* A record that cannot be written (the file may not grow: RLIMIT_FSIZE) fails the touch, so the
 * request fails before its rows go out; the failures are counted for the metric; the journal
 * works again once it can write. */
static void test_write_failure(void **state)
{
    fixture *f = *state;
    rt_pending *p = NULL;
    rt_journal *j = NULL;
    ferry_err err = {0};
    start(f->path, &p, &j);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)sb.st_size; /* not one byte more */
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    rt_journal_req q = {0};
    int rc = rt_journal_touch(j, &q, "full", 0, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(rc, FERRY_EIO);
    assert_non_null(strstr(err.msg, "cannot write its retry journal"));
    assert_int_equal(rt_journal_write_errors(j), 1);
    rt_journal_end(j, &q, false);
    rt_journal_req q2 = {0};
    touch(j, &q2, "again", 1);
    rt_journal_end(j, &q2, false);
    stop(p, j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_holds_what_was_expected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_not_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_keeps_the_truth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_short_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_file_and_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_grow_across_lives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_failure, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

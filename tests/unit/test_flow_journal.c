/* The flow engine's journal (include/ferry/flow_journal.h) against a real SQLite catalog in a
 * temporary directory: the declared tables of the flows are well formed and a bad one is
 * refused; create-if-absent, and a finished record taken back; declared transitions accepted,
 * an undeclared one refused with an error naming both states (nothing written); two writers
 * with their own catalog handles race on one job and the second loses its compare-and-set; the
 * resume listing holds the unfinished jobs of its kind only; a batch of jobs and another record
 * commits all or nothing; the crash hook is called at the named points and the progress
 * callback after each transition; the default hook (ferry_fault_point) kills a child
 * process at the knob's point, with the journal as the point says; and the move kind over move
 * records (moves/ID): its table, transitions checked and written by CAS with the step, owner
 * and detail, the data record in the same batch, the unfinished ones listed from the index. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ferry/catalog.h"
#include "ferry/flow_journal.h"
#include "ferry/move.h"
#include "ferry/retention.h"
#include "ferry/rewrite.h"
#include "ferry/testknob.h"
#include "ferry/tier.h"
#include "shards_text.h"

static char dir[256];
static int n_catalogs;

enum { T_A, T_B, T_C, T_DONE, T_FAILED, T_COUNT };
static const ferry_flow_state t_states[T_COUNT] = {
    [T_A] = {"A", FERRY_FLOW_TO(T_B) | FERRY_FLOW_TO(T_FAILED), false},
    [T_B] = {"B", FERRY_FLOW_TO(T_B) | FERRY_FLOW_TO(T_C) | FERRY_FLOW_TO(T_FAILED), false},
    [T_C] = {"C", FERRY_FLOW_TO(T_DONE) | FERRY_FLOW_TO(T_FAILED), false},
    [T_DONE] = {"DONE", FERRY_FLOW_TO(T_A), true},
    [T_FAILED] = {"FAILED", FERRY_FLOW_TO(T_A), true},
};
static const ferry_flow_kind t_kind = {
    .kind = "test",
    .states = t_states,
    .n_states = T_COUNT,
    .start = T_A,
    .failed = T_FAILED,
    .crash_before = "FERRY_TEST_CRASH_BEFORE",
    .crash_after = "FERRY_TEST_CRASH_AFTER",
    .owner_clears_when_finished = true,
};
static const ferry_flow_kind other_kind = {
    .kind = "other", .states = t_states, .n_states = T_COUNT, .start = T_A, .failed = T_FAILED};

static void must(int rc, const ferry_err *err)
{
    if (rc)
        fail_msg("unexpected error %d: %s", rc, err->msg);
}

static ferry_catalog *open_catalog(char *url, size_t size)
{
    if (!url[0])
        snprintf(url, size, "sqlite:%s/c%d.db", dir, ++n_catalogs);
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    must(ferry_catalog_open(url, &c, &err), &err);
    return c;
}

/* What the hooks saw. */
typedef struct seen {
    char calls[32][64];
    int n;
    int progress[8][2];
    int np;
} seen;

static void record_crash(const char *knob, const char *point, void *arg)
{
    seen *s = arg;
    if (s->n < 32)
        snprintf(s->calls[s->n++], 64, "%s=%s",
                 strstr(knob, "BEFORE") ? "before" : "after", point);
}

static void record_progress(const ferry_record *rec, int from, int to, void *arg)
{
    (void)rec;
    seen *s = arg;
    if (s->np < 8) {
        s->progress[s->np][0] = from;
        s->progress[s->np][1] = to;
        s->np++;
    }
}

static void journal(ferry_flow_journal *fj, ferry_catalog *c, const char *owner, seen *s)
{
    ferry_flow_journal_init(fj, c, &t_kind, owner);
    fj->crash = record_crash;
    fj->crash_arg = s;
    fj->progress = record_progress;
    fj->progress_arg = s;
}

/* The job as stored. */
/* The job as stored. It shares its data with a copy kept here until the next call (or
 * stored_done), so callers read it by value and free nothing. */
static ferry_record last_stored;

static void stored_done(void) { ferry_record_free(&last_stored); }

static ferry_record stored(ferry_catalog *c, const char *id)
{
    stored_done();
    ferry_record_init(&last_stored, FERRY_REC_JOB);
    snprintf(last_stored.u.job.id, sizeof last_stored.u.job.id, "%s", id);
    ferry_err err = {0};
    must(ferry_catalog_get(c, &last_stored, &err), &err);
    return last_stored;
}

static void test_tables(void **state)
{
    (void)state;
    ferry_err err = {0};
    must(ferry_flow_kind_check(&t_kind, &err), &err);
    must(ferry_flow_kind_check(&ferry_tier_flow, &err), &err);
    must(ferry_flow_kind_check(&ferry_rewrite_flow, &err), &err);
    must(ferry_flow_kind_check(&ferry_retention_flow, &err), &err);
    /* a terminal state that goes anywhere but start */
    ferry_flow_state bad[T_COUNT];
    memcpy(bad, t_states, sizeof bad);
    bad[T_DONE].next |= FERRY_FLOW_TO(T_C);
    ferry_flow_kind k = t_kind;
    k.states = bad;
    assert_int_equal(FERRY_EINVAL, ferry_flow_kind_check(&k, &err));
    assert_non_null(strstr(err.msg, "terminal DONE may only go back to A"));
    /* a state named twice, a transition to nowhere */
    memcpy(bad, t_states, sizeof bad);
    bad[T_C].name = "B";
    assert_int_equal(FERRY_EINVAL, ferry_flow_kind_check(&k, &err));
    memcpy(bad, t_states, sizeof bad);
    bad[T_C].next |= FERRY_FLOW_TO(9);
    assert_int_equal(FERRY_EINVAL, ferry_flow_kind_check(&k, &err));
    assert_true(ferry_flow_transition_ok(&t_kind, T_B, T_B));
    assert_false(ferry_flow_transition_ok(&t_kind, T_A, T_A));
    assert_false(ferry_flow_transition_ok(&t_kind, T_A, 42));
    assert_int_equal(T_C, ferry_flow_state_parse(&t_kind, "C"));
    assert_int_equal(-1, ferry_flow_state_parse(&t_kind, "SWAP"));
    /* the flows' tables say what their old checks said */
    assert_true(ferry_flow_transition_ok(&ferry_tier_flow, FERRY_TIER_FREEZE, FERRY_TIER_FREEZE));
    assert_false(ferry_flow_transition_ok(&ferry_tier_flow, FERRY_TIER_DONE, FERRY_TIER_FAILED));
    assert_true(ferry_flow_transition_ok(&ferry_rewrite_flow, FERRY_REWRITE_SWAP,
                                         FERRY_REWRITE_TIER));
    assert_false(ferry_flow_transition_ok(&ferry_rewrite_flow, FERRY_REWRITE_BUILD,
                                          FERRY_REWRITE_RECORD));
}

static void test_transitions(void **state)
{
    (void)state;
    char url[512] = "";
    ferry_catalog *c = open_catalog(url, sizeof url);
    seen s = {0};
    ferry_flow_journal fj;
    journal(&fj, c, "w1", &s);
    ferry_err err = {0};
    ferry_record r;
    must(ferry_flow_job_init(&fj, &r, "test.j1", &err), &err);
    assert_false(ferry_flow_job_stored(&r));
    must(ferry_flow_create(&fj, &r, "{\"n\":1}", &err), &err);
    assert_true(ferry_flow_job_stored(&r));
    assert_int_equal(T_A, ferry_flow_job_state(&fj, &r));
    ferry_record back = stored(c, "test.j1");
    assert_string_equal("A", back.u.job.state);
    assert_string_equal("test", back.u.job.kind);
    assert_string_equal("w1", back.u.job.owner);
    assert_string_equal("{\"n\":1}", ferry_job_data(&back.u.job));
    assert_int_equal(back.version, r.version);
    /* creating it again while it is unfinished is refused */
    ferry_record again;
    must(ferry_flow_job_init(&fj, &again, "test.j1", &err), &err);
    assert_int_equal(FERRY_ECONFLICT, ferry_flow_create(&fj, &again, NULL, &err));
    assert_non_null(strstr(err.msg, "unfinished"));

    /* declared: A -> B, B -> B (a declared repeat), B -> C */
    must(ferry_flow_advance(&fj, &r, T_B, NULL, NULL, &err), &err);
    must(ferry_flow_advance(&fj, &r, T_B, "again", "{\"n\":2}", &err), &err);
    back = stored(c, "test.j1");
    assert_string_equal("B", back.u.job.state);
    assert_string_equal("again", back.u.job.detail);
    assert_string_equal("{\"n\":2}", ferry_job_data(&back.u.job));
    /* undeclared: B -> DONE; refused, nothing written */
    int64_t v = r.version;
    int n_calls = s.n;
    assert_int_equal(FERRY_EINTERNAL, ferry_flow_advance(&fj, &r, T_DONE, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "job test.j1: B -> DONE is not a declared test transition"));
    assert_int_equal(v, stored(c, "test.j1").version);
    assert_int_equal(n_calls, s.n); /* no crash point for a refused transition */
    assert_string_equal("B", stored(c, "test.j1").u.job.state);
    /* a note keeps the state, calls no hook */
    must(ferry_flow_note(&fj, &r, "waiting", NULL, &err), &err);
    assert_int_equal(n_calls, s.n);
    assert_string_equal("waiting", stored(c, "test.j1").u.job.detail);
    /* data that does not fit a record */
    char *big = malloc(FERRY_JOB_DATA_MAX + 10);
    assert_non_null(big);
    memset(big, 'x', FERRY_JOB_DATA_MAX + 9);
    big[FERRY_JOB_DATA_MAX + 9] = '\0';
    v = r.version;
    assert_int_equal(FERRY_EINVAL, ferry_flow_advance(&fj, &r, T_C, NULL, big, &err));
    assert_non_null(strstr(err.msg, "too large"));
    assert_int_equal(v, r.version);
    assert_string_equal("{\"n\":2}", ferry_job_data(&r.u.job)); /* the caller's is intact */
    free(big);
    /* fail with detail: the kind's failed state, owner cleared (a terminal state) */
    must(ferry_flow_fail(&fj, &r, "it broke", NULL, &err), &err);
    back = stored(c, "test.j1");
    assert_string_equal("FAILED", back.u.job.state);
    assert_string_equal("it broke", back.u.job.detail);
    assert_string_equal("", back.u.job.owner);

    /* the crash hook before and after each transition, named by the state; progress after */
    const char *want[] = {"before=A", "after=A", "before=B", "after=B", "before=B", "after=B",
                          "before=FAILED", "after=FAILED"};
    assert_int_equal(8, s.n);
    for (int i = 0; i < 8; i++)
        assert_string_equal(want[i], s.calls[i]);
    assert_int_equal(4, s.np);
    assert_int_equal(-1, s.progress[0][0]);
    assert_int_equal(T_A, s.progress[0][1]);
    assert_int_equal(T_A, s.progress[1][0]);
    assert_int_equal(T_B, s.progress[1][1]);
    assert_int_equal(T_FAILED, s.progress[3][1]);

    /* a finished job is taken back to start by create, keeping when it was created */
    must(ferry_flow_job_init(&fj, &again, "test.j1", &err), &err);
    must(ferry_flow_create(&fj, &again, "{}", &err), &err);
    back = stored(c, "test.j1");
    assert_string_equal("A", back.u.job.state);
    assert_int_equal(r.u.job.created, back.u.job.created);
    /* a record of another kind under that id is not ours */
    ferry_flow_journal oj;
    ferry_flow_journal_init(&oj, c, &other_kind, "w9");
    ferry_record o;
    must(ferry_flow_job_init(&oj, &o, "test.j1", &err), &err);
    assert_int_equal(FERRY_EINVAL, ferry_flow_get(&oj, &o, &err));
    ferry_record_free(&o);
    ferry_record_free(&again);
    ferry_record_free(&r);
    stored_done();
    ferry_catalog_close(c);
}

static void test_cas_conflict(void **state)
{
    (void)state;
    char url[512] = "";
    ferry_catalog *c1 = open_catalog(url, sizeof url);
    ferry_catalog *c2 = open_catalog(url, sizeof url); /* the same file, its own handle */
    seen s1 = {0}, s2 = {0};
    ferry_flow_journal w1, w2;
    journal(&w1, c1, "w1", &s1);
    journal(&w2, c2, "w2", &s2);
    ferry_err err = {0};
    ferry_record a, b;
    must(ferry_flow_job_init(&w1, &a, "test.race", &err), &err);
    must(ferry_flow_create(&w1, &a, NULL, &err), &err);
    b = stored(c2, "test.race"); /* both have read version v */
    assert_int_equal(a.version, b.version);
    must(ferry_flow_advance(&w1, &a, T_B, NULL, NULL, &err), &err);
    int calls = s2.n;
    assert_int_equal(FERRY_ECONFLICT, ferry_flow_advance(&w2, &b, T_B, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "another worker"));
    assert_int_equal(calls + 1, s2.n); /* the point before it, not the one after */
    ferry_record now = stored(c1, "test.race");
    assert_string_equal("w1", now.u.job.owner);
    assert_int_equal(a.version, now.version);
    /* a second create of the same new id loses too */
    ferry_record x, y;
    must(ferry_flow_job_init(&w1, &x, "test.new", &err), &err);
    must(ferry_flow_job_init(&w2, &y, "test.new", &err), &err);
    ferry_flow_change cx = {.rec = &x, .to = T_A}, cy = {.rec = &y, .to = T_A};
    must(ferry_flow_write(&w1, NULL, &cx, 1, FERRY_FLOW_CREATE, &err), &err);
    assert_int_equal(FERRY_ECONFLICT, ferry_flow_write(&w2, NULL, &cy, 1, FERRY_FLOW_CREATE, &err));
    ferry_catalog_close(c1);
    ferry_catalog_close(c2);
}

static void test_batch_and_resume(void **state)
{
    (void)state;
    char url[512] = "";
    ferry_catalog *c = open_catalog(url, sizeof url);
    seen s = {0};
    ferry_flow_journal fj;
    journal(&fj, c, "w1", &s);
    ferry_err err = {0};
    const char *ids[] = {"test.b", "test.a", "test.c", "test.d"};
    ferry_record r[4];
    ferry_flow_change ch[4];
    for (int i = 0; i < 4; i++) {
        must(ferry_flow_job_init(&fj, &r[i], ids[i], &err), &err);
        ch[i] = (ferry_flow_change){.rec = &r[i], .to = T_A};
    }
    /* without FERRY_FLOW_CREATE a job not in the catalog cannot be written */
    assert_int_equal(FERRY_EINTERNAL, ferry_flow_write(&fj, NULL, ch, 4, 0, &err));
    must(ferry_flow_write(&fj, NULL, ch, 4, FERRY_FLOW_CREATE, &err), &err);
    assert_int_equal(2, s.n); /* one point before and one after for the batch's one state */
    /* a batch with another record in it: all of it or nothing */
    ferry_batch *b = ferry_batch_new();
    ferry_flow_journal oj;
    ferry_flow_journal_init(&oj, c, &other_kind, "w1");
    ferry_record other;
    must(ferry_flow_job_init(&oj, &other, "other.1", &err), &err);
    snprintf(other.u.job.state, sizeof other.u.job.state, "A");
    must(ferry_batch_create(b, &other, &err), &err);
    ch[0].to = T_B;
    ch[1].to = T_FAILED;
    ferry_record stale = r[2];
    ch[2].to = T_B;
    must(ferry_flow_write(&fj, b, ch, 3, 0, &err), &err);
    ferry_batch_free(b);
    assert_string_equal("B", stored(c, "test.b").u.job.state);
    assert_string_equal("FAILED", stored(c, "test.a").u.job.state);
    assert_string_equal("A", stored(c, "other.1").u.job.state);
    /* a batch with a stale record: nothing of it is written */
    ferry_record before = r[0];
    ch[0] = (ferry_flow_change){.rec = &r[0], .to = T_C};
    ch[1] = (ferry_flow_change){.rec = &stale, .to = T_B};
    assert_int_equal(FERRY_ECONFLICT, ferry_flow_write(&fj, NULL, ch, 2, 0, &err));
    assert_string_equal("B", stored(c, "test.b").u.job.state);
    assert_int_equal(before.version, r[0].version);
    /* resume: the unfinished jobs of the kind, sorted by id; not FAILED, not other kinds */
    ferry_record_list l = {0};
    must(ferry_flow_list_unfinished(&fj, &l, &err), &err);
    assert_int_equal(3, l.n);
    assert_string_equal("test.b", l.items[0].u.job.id);
    assert_string_equal("test.c", l.items[1].u.job.id);
    assert_string_equal("test.d", l.items[2].u.job.id);
    assert_int_equal(stored(c, "test.c").version, l.items[1].version);
    ferry_record_list_free(&l);
    must(ferry_flow_list_unfinished(&oj, &l, &err), &err);
    assert_int_equal(1, l.n);
    ferry_record_list_free(&l);
    ferry_catalog_close(c);
}

/* In a child: the default hook with knob set to point, then a -> B. Returns the wait status. */
static int crash_child(const char *url, const char *knob, const char *point)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        ferry_test_knob_set(knob, point);
        ferry_catalog *c = NULL;
        ferry_err err = {0};
        if (ferry_catalog_open(url, &c, &err))
            _exit(3);
        ferry_flow_journal fj;
        ferry_flow_journal_init(&fj, c, &t_kind, "child");
        ferry_record r;
        ferry_flow_job_init(&fj, &r, "test.crash", &err);
        if (ferry_flow_get(&fj, &r, &err) || ferry_flow_advance(&fj, &r, T_B, NULL, NULL, &err))
            _exit(4);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void test_default_crash_hook(void **state)
{
    (void)state;
    char url[512] = "";
    ferry_catalog *c = open_catalog(url, sizeof url);
    ferry_flow_journal fj;
    ferry_flow_journal_init(&fj, c, &t_kind, "parent");
    ferry_err err = {0};
    ferry_record r;
    must(ferry_flow_job_init(&fj, &r, "test.crash", &err), &err);
    must(ferry_flow_create(&fj, &r, NULL, &err), &err); /* no knob installed: nothing happens */
    /* killed before B is journaled: still A */
    int st = crash_child(url, "FERRY_TEST_CRASH_BEFORE", "B");
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_string_equal("A", stored(c, "test.crash").u.job.state);
    /* a point of another state: the child runs through */
    st = crash_child(url, "FERRY_TEST_CRASH_AFTER", "C");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* killed after B is journaled: B (B -> B is declared) */
    st = crash_child(url, "FERRY_TEST_CRASH_AFTER", "B");
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_string_equal("B", stored(c, "test.crash").u.job.state);
    assert_string_equal("child", stored(c, "test.crash").u.job.owner);
    ferry_catalog_close(c);
}

/* A move record as ferry_move_begin journals it. */
static ferry_record planned_move(const char *id)
{
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_MOVE);
    ferry_move *m = &r.u.move;
    snprintf(m->id, sizeof m->id, "%s", id);
    snprintf(m->tenant, sizeof m->tenant, "acme");
    m->split = 2;
    shards_printf(&m->from, "node1");
    shards_printf(&m->to, "node2");
    m->state = FERRY_MOVE_PLANNED;
    m->step = 3;
    snprintf(m->detail, sizeof m->detail, "planned");
    m->created = m->updated = 1700000000;
    return r;
}

static ferry_record stored_move(ferry_catalog *c, const char *id)
{
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_MOVE);
    snprintf(r.u.move.id, sizeof r.u.move.id, "%s", id);
    ferry_err err = {0};
    must(ferry_catalog_get(c, &r, &err), &err);
    return r;
}

static void test_move_records(void **state)
{
    (void)state;
    ferry_err err = {0};
    const ferry_flow_kind *k = &ferry_move_flow;
    /* the table: the enum's numbers and names; finished is what the catalog indexes as such */
    must(ferry_flow_kind_check(k, &err), &err);
    assert_int_equal(FERRY_REC_MOVE, ferry_flow_record_kind(k));
    assert_int_equal(FERRY_REC_JOB, ferry_flow_record_kind(&t_kind));
    for (int i = 0; i < FERRY_MOVE_STATES; i++) {
        assert_string_equal(ferry_move_state_name((enum ferry_move_state)i),
                            ferry_flow_state_name(k, i));
        assert_int_equal(ferry_move_finished((enum ferry_move_state)i), ferry_flow_terminal(k, i));
    }
    assert_true(ferry_flow_transition_ok(k, FERRY_MOVE_PLANNED, FERRY_MOVE_CLONE));
    assert_true(ferry_flow_transition_ok(k, FERRY_MOVE_CLEANUP, FERRY_MOVE_DONE));
    assert_true(ferry_flow_transition_ok(k, FERRY_MOVE_VERIFY, FERRY_MOVE_FAILED));
    assert_true(ferry_flow_transition_ok(k, FERRY_MOVE_PLANNED, FERRY_MOVE_FAILED));
    assert_false(ferry_flow_transition_ok(k, FERRY_MOVE_CLONE, FERRY_MOVE_SWITCH));
    assert_false(ferry_flow_transition_ok(k, FERRY_MOVE_SWITCH, FERRY_MOVE_FAILED)); /* commit point */
    assert_false(ferry_flow_transition_ok(k, FERRY_MOVE_CLEANUP, FERRY_MOVE_FAILED));
    assert_false(ferry_flow_transition_ok(k, FERRY_MOVE_DONE, FERRY_MOVE_FAILED));
    assert_false(ferry_flow_transition_ok(k, FERRY_MOVE_FAILED, FERRY_MOVE_CLONE));
    /* a move kind whose states are not the enum's is refused */
    ferry_flow_kind bad = t_kind;
    bad.record = FERRY_REC_MOVE;
    assert_int_equal(FERRY_EINVAL, ferry_flow_kind_check(&bad, &err));
    bad.record = FERRY_REC_PART;
    assert_int_equal(FERRY_EINVAL, ferry_flow_kind_check(&bad, &err));

    char url[512] = "";
    ferry_catalog *c = open_catalog(url, sizeof url);
    ferry_record m = planned_move("m1");
    must(ferry_catalog_create(c, &m, &err), &err);
    seen s = {0};
    ferry_flow_journal fj;
    ferry_flow_journal_init(&fj, c, k, "mover-1");
    fj.crash = record_crash;
    fj.crash_arg = &s;
    assert_int_equal(FERRY_MOVE_PLANNED, ferry_flow_job_state(&fj, &m));
    assert_string_equal("m1", ferry_flow_job_id(&m));
    /* a transition: the enum written, step back to 0, owner stamped, detail; the crash point
     * before it only (a move declares no point after a transition: move_flow.c) */
    must(ferry_flow_advance(&fj, &m, FERRY_MOVE_CLONE, "cloning", NULL, &err), &err);
    ferry_record got = stored_move(c, "m1");
    assert_int_equal(FERRY_MOVE_CLONE, got.u.move.state);
    assert_int_equal(0, got.u.move.step);
    assert_string_equal("mover-1", got.u.move.owner);
    assert_string_equal("cloning", got.u.move.detail);
    assert_string_equal("acme", got.u.move.tenant);
    assert_int_equal(got.version, m.version);
    assert_int_equal(1, s.n);
    assert_string_equal("before=CLONE", s.calls[0]);
    assert_string_equal("FERRY_TEST_CRASH_BEFORE", k->crash_before);
    assert_null(k->crash_after);
    /* a note keeps the state and the step the caller set (no crash point) */
    m.u.move.step = 5;
    must(ferry_flow_note(&fj, &m, "attempt 5", NULL, &err), &err);
    assert_int_equal(1, s.n);
    got = stored_move(c, "m1");
    assert_int_equal(FERRY_MOVE_CLONE, got.u.move.state);
    assert_int_equal(5, got.u.move.step);
    /* refused, nothing written: an undeclared transition, data on a move record, a job record */
    int64_t v = m.version;
    assert_int_equal(FERRY_EINTERNAL, ferry_flow_advance(&fj, &m, FERRY_MOVE_SWITCH, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "CLONE -> SWITCH"));
    assert_int_equal(FERRY_EINVAL, ferry_flow_advance(&fj, &m, FERRY_MOVE_VERIFY, NULL, "{}", &err));
    ferry_record job;
    ferry_flow_journal tj;
    ferry_flow_journal_init(&tj, c, &t_kind, "x");
    must(ferry_flow_job_init(&tj, &job, "move.m1", &err), &err);
    assert_int_equal(FERRY_EINTERNAL, ferry_flow_advance(&fj, &job, FERRY_MOVE_VERIFY, NULL, NULL, &err));
    assert_int_equal(v, stored_move(c, "m1").version);
    /* the data record in the same batch: both written, its new version handed back */
    snprintf(job.u.job.kind, sizeof job.u.job.kind, "move");
    snprintf(job.u.job.state, sizeof job.u.job.state, "CLONE");
    must(ferry_job_set_data(&job.u.job, "{}", &err), &err);
    must(ferry_catalog_create(c, &job, &err), &err);
    ferry_batch *b = ferry_batch_new();
    assert_non_null(b);
    snprintf(job.u.job.state, sizeof job.u.job.state, "VERIFY");
    must(ferry_batch_update(b, &job, &err), &err);
    int64_t bv[1] = {-7};
    ferry_flow_change ch = {.rec = &m, .to = FERRY_MOVE_VERIFY};
    must(ferry_flow_write_versions(&fj, b, bv, NULL, &ch, 1, 0, &err), &err);
    ferry_batch_free(b);
    ferry_record jgot = stored(c, "move.m1");
    assert_string_equal("VERIFY", jgot.u.job.state);
    assert_int_equal(jgot.version, bv[0]);
    assert_int_equal(FERRY_MOVE_VERIFY, stored_move(c, "m1").u.move.state);
    /* resume: the unfinished moves (from the catalog's index) */
    ferry_record m2 = planned_move("m2");
    must(ferry_catalog_create(c, &m2, &err), &err);
    ferry_record_list l;
    must(ferry_flow_list_unfinished(&fj, &l, &err), &err);
    assert_int_equal(2, l.n);
    assert_string_equal("m1", l.items[0].u.move.id);
    ferry_record_list_free(&l);
    /* a stale copy loses its compare-and-set */
    ferry_record stale = m;
    must(ferry_flow_fail(&fj, &m, "rolled back", NULL, &err), &err);
    assert_int_equal(FERRY_ECONFLICT, ferry_flow_advance(&fj, &stale, FERRY_MOVE_SWITCH, NULL, NULL, &err));
    must(ferry_flow_list_unfinished(&fj, &l, &err), &err);
    assert_int_equal(1, l.n);
    assert_string_equal("m2", l.items[0].u.move.id);
    ferry_record_list_free(&l);
    ferry_record_free(&job);
    stored_done();
    ferry_catalog_close(c);
}

/* A move journal naming another count of source or target shards than one (ferry writes none:
 * another writer may have) is refused when the run opens it, before it reaches any shard. */
static void test_move_one_pair(void **state)
{
    (void)state;
    ferry_err err = {0};
    char url[256] = "";
    ferry_catalog *c = open_catalog(url, sizeof url);
    ferry_record m = planned_move("m-two"), job;
    shards_printf(&m.u.move.from, "node1,node3");
    must(ferry_catalog_create(c, &m, &err), &err);
    ferry_record_init(&job, FERRY_REC_JOB);
    snprintf(job.u.job.id, sizeof job.u.job.id, "move.m-two");
    snprintf(job.u.job.kind, sizeof job.u.job.kind, "move");
    snprintf(job.u.job.state, sizeof job.u.job.state, "PLANNED");
    must(ferry_job_set_data(&job.u.job, "{\"freezes\":[],\"fp\":{}}", &err), &err);
    must(ferry_catalog_create(c, &job, &err), &err);
    ferry_move_opts o = {.catalog_url = url, .owner = "test"};
    ferry_move_result res;
    assert_int_equal(ferry_move_run(&o, "m-two", &res, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "source 'node1,node3' and target 'node2'; a move goes from "
                                    "one shard to one"));
    assert_int_equal(FERRY_MOVE_PLANNED, stored_move(c, "m-two").u.move.state);
    ferry_record_free(&job);
    ferry_catalog_close(c);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ferry_flow_journal_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_cas_conflict),
        cmocka_unit_test(test_batch_and_resume),
        cmocka_unit_test(test_default_crash_hook),
        cmocka_unit_test(test_move_records),
        cmocka_unit_test(test_move_one_pair),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

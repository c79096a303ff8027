/* The flow engine's journal: the one way a journaled flow (tiering, retention, rewrite, moves)
 * keeps its jobs in the catalog: in job records (ferry_job in catalog.h, kind FERRY_REC_JOB:
 * the state by name, the flow's data in the record), or for moves in the move records
 * (ferry_move, FERRY_REC_MOVE: the state as enum ferry_move_state, its step, owner and detail;
 * routers and the catalog's index of unfinished moves read them, so that kind stays; a move's
 * data is its side record jobs/move.ID, which the move writes in the same batch).
 *
 * Each flow declares its states once (ferry_flow_kind: names, the transitions each state
 * allows, which states are terminal, where a new job starts and where a failed one goes, the
 * test knobs of its crash points). The engine then:
 *   - creates a job if absent, or takes a finished record of the same id back to the start
 *     state (a declared transition from a terminal state), and refuses an unfinished one;
 *   - advances a job by compare-and-set on its record's version, refusing a transition the
 *     kind does not declare (FERRY_EINTERNAL naming the job and both states): the flows' bugs
 *     stop there instead of journaling a state the resume code does not expect;
 *   - writes many jobs' transitions in one catalog batch, with whatever else must commit with
 *     them (tiering's waves: part records, the part-list records);
 *   - records a failure with its detail (the kind's failed state) or a note (same state);
 *   - lists the unfinished jobs of a kind, for resume;
 *   - stamps the owner on each write (the flows' leases are theirs: this is who wrote last);
 *   - calls an optional progress callback after each journaled transition;
 *   - calls the crash hook before and after each journaled transition with the knob names the
 *     kind declares and the state's name as the point. The default hook is ferry_fault_point
 *     (include/ferry/testknob.h: kill -9 of the process when the knob names the point, one
 *     crash semantics for every flow; library code reads no environment); a unit test may
 *     install its own.
 * A job record owns its data (ferry_job_data, catalog.h): a write copies the data it is given,
 * and on success frees the caller's record's old data and puts the written record in its place
 * (a pointer into the old data is then stale). ferry_record_free releases a job record.
 * A lost compare-and-set is FERRY_ECONFLICT: another worker advanced the job and owns it now.
 * Not thread-safe per journal (one per flow run). docs/architecture.md, "Flow engine". */
#ifndef FERRY_FLOW_JOURNAL_H
#define FERRY_FLOW_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

#define FERRY_FLOW_STATES_MAX 32
/* The bit of state s in ferry_flow_state.next. */
#define FERRY_FLOW_TO(s) (1u << (unsigned)(s))

/* One state of a kind; its index in ferry_flow_kind.states is its number (the flows' enums). */
typedef struct ferry_flow_state {
    const char *name; /* as journaled in ferry_job.state, e.g. "FREEZE" */
    uint32_t next;    /* FERRY_FLOW_TO(t) | ...: the states it may go to (itself: a declared
                       * repeat, e.g. tiering's fresh FREEZE attempt) */
    bool terminal;    /* a finished job: never resumed, only taken back to start */
} ferry_flow_state;

typedef struct ferry_flow_kind {
    const char *kind;                /* ferry_job.kind, e.g. "tier" */
    const ferry_flow_state *states;  /* static table, n_states <= FERRY_FLOW_STATES_MAX */
    int n_states;
    int start;                       /* the state a new job is created in */
    int failed;                      /* the state ferry_flow_fail writes; -1: none (a job
                                      * that cannot go on stays where it is, with a detail) */
    const char *crash_before;        /* test knob of the point before a transition, or NULL */
    const char *crash_after;         /* test knob of the point after it, or NULL */
    bool owner_clears_when_finished; /* a terminal state is written with an empty owner */
    enum ferry_record_kind record;   /* where the jobs are kept: FERRY_REC_MOVE (a state's number
                                      * is its enum ferry_move_state), or FERRY_REC_JOB, which
                                      * is also what a kind leaving it 0 means */
} ferry_flow_kind;

/* The state named name (-1 when the kind has none). */
int ferry_flow_state_parse(const ferry_flow_kind *k, const char *name);
/* Its name, "?" for a number out of range. */
const char *ferry_flow_state_name(const ferry_flow_kind *k, int s);
/* Whether the kind declares from -> to. */
bool ferry_flow_transition_ok(const ferry_flow_kind *k, int from, int to);
bool ferry_flow_terminal(const ferry_flow_kind *k, int s);
/* The kind's table is well formed: names unique and present, start and failed in range, no
 * transition out of range, a terminal state goes at most to start. FERRY_EINVAL says what is
 * wrong (for the flows' unit tests). */
int ferry_flow_kind_check(const ferry_flow_kind *k, ferry_err *err);

/* Called before and after each journaled transition: knob is the kind's crash_before or
 * crash_after, point the name of the state the job goes to. */
typedef void (*ferry_flow_crash_fn)(const char *knob, const char *point, void *arg);
/* Called after each journaled transition (rec: the record as written, its new version). */
typedef void (*ferry_flow_progress_fn)(const ferry_record *rec, int from, int to, void *arg);

/* A flow run's journal. Fill it with ferry_flow_journal_init; the hooks may be set after. */
typedef struct ferry_flow_journal {
    ferry_catalog *cat;            /* borrowed */
    const ferry_flow_kind *kind;   /* borrowed (static) */
    char owner[FERRY_NAME_MAX];    /* stamped on every write */
    ferry_flow_crash_fn crash;     /* NULL: ferry_fault_point */
    void *crash_arg;
    ferry_flow_progress_fn progress; /* NULL: none */
    void *progress_arg;
    unsigned long writes;          /* catalog commits made through this journal */
} ferry_flow_journal;

void ferry_flow_journal_init(ferry_flow_journal *fj, ferry_catalog *cat,
                             const ferry_flow_kind *kind, const char *owner);

/* The record kind the kind's jobs are kept in (FERRY_REC_JOB or FERRY_REC_MOVE). */
enum ferry_record_kind ferry_flow_record_kind(const ferry_flow_kind *k);
/* The id of a job record of either kind (points into rec). */
const char *ferry_flow_job_id(const ferry_record *rec);

/* A fresh job record of the journal's kind with that id (rec->version FERRY_VERSION_ANY: not
 * in the catalog yet; a move record with only its id set). FERRY_EINVAL when the id does not
 * fit. */
int ferry_flow_job_init(const ferry_flow_journal *fj, ferry_record *rec, const char *id,
                        ferry_err *err);
/* The state of a job record (-1: not in the catalog yet, or a state the kind does not name). */
int ferry_flow_job_state(const ferry_flow_journal *fj, const ferry_record *rec);
/* Whether the record exists in the catalog (it was read or written: rec->version >= 0). */
bool ferry_flow_job_stored(const ferry_record *rec);

/* Reads the job ferry_flow_job_id(rec) into rec. FERRY_ENOTFOUND when absent (rec then stays a fresh
 * record of the kind, id kept); FERRY_EINVAL when the record there is of another kind. */
int ferry_flow_get(ferry_flow_journal *fj, ferry_record *rec, ferry_err *err);

/* Writes the job in the start state: created when absent, or (read first when rec is not
 * stored) a finished record of the same id taken back to start by CAS. FERRY_ECONFLICT when it
 * exists unfinished or another worker wrote it first. data: the job's JSON text (NULL: rec's).
 * Crash points around it, like a transition. On success rec holds the written record. */
int ferry_flow_create(ferry_flow_journal *fj, ferry_record *rec, const char *data,
                      ferry_err *err);

/* Moves the job to state `to` by CAS on rec->version, with detail (NULL: "") and data (NULL:
 * rec's; a move record has none: non-NULL is FERRY_EINVAL). A move record's step goes back to
 * 0 with a transition (a note keeps the step the caller set). An undeclared transition is
 * FERRY_EINTERNAL and writes nothing. On success rec holds the written record. */
int ferry_flow_advance(ferry_flow_journal *fj, ferry_record *rec, int to, const char *detail,
                       const char *data, ferry_err *err);
/* ferry_flow_advance to the kind's failed state with detail (why). */
int ferry_flow_fail(ferry_flow_journal *fj, ferry_record *rec, const char *detail,
                    const char *data, ferry_err *err);
/* Rewrites the job in its own state (a note: detail, data, owner) by CAS: no transition, no
 * crash point. */
int ferry_flow_note(ferry_flow_journal *fj, ferry_record *rec, const char *detail,
                    const char *data, ferry_err *err);

/* One job's write in a batch (ferry_flow_write). */
typedef struct ferry_flow_change {
    ferry_record *rec;  /* the job as last written; on success the written record */
    int to;             /* the state to write */
    const char *detail; /* NULL: "" */
    const char *data;   /* NULL: rec's */
} ferry_flow_change;

enum {
    FERRY_FLOW_NOTE = 1u << 0,   /* no transition: no check, no crash point, no progress call */
    FERRY_FLOW_CREATE = 1u << 1, /* records not stored are created (to must be start) */
};

/* Writes ch[0..n) in one atomic catalog batch: b (may be NULL) holds what must commit with the
 * jobs; the jobs' writes are appended to it and the whole batch committed (the caller still
 * frees b). Each job's write is a CAS on its version (FERRY_FLOW_CREATE: a create for one not
 * stored). Every transition is checked first (FERRY_EINTERNAL, nothing written); the crash
 * hook runs before the commit for each distinct target state, and after it the same, after
 * the progress calls. FERRY_ECONFLICT when any record moved on (nothing written, every rec
 * as it was). */
int ferry_flow_write(ferry_flow_journal *fj, ferry_batch *b, ferry_flow_change *ch, size_t n,
                     unsigned flags, ferry_err *err);
/* ferry_flow_write, and bv (NULL, or room for the entries b held when called) gets the versions
 * those entries have after the commit: what the caller's next CAS of them compares (a move's
 * data record, written in the batch of its state); info (may be NULL) gets the commit's
 * (ferry_catalog_commit: the routing version a batch with a route raised). */
int ferry_flow_write_versions(ferry_flow_journal *fj, ferry_batch *b, int64_t *bv,
                              ferry_commit_info *info, ferry_flow_change *ch, size_t n,
                              unsigned flags, ferry_err *err);

/* The jobs of the kind that are not in a terminal state (in a state the kind names), sorted by
 * id (moves: read from the catalog's index of unfinished moves). The caller frees out with
 * ferry_record_list_free. */
int ferry_flow_list_unfinished(ferry_flow_journal *fj, ferry_record_list *out, ferry_err *err);

#endif

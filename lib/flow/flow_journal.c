/* The flow engine's journal (include/ferry/flow_journal.h): declared states and transitions
 * per flow kind, job records (or move records) written by compare-and-set, one at a time or
 * many in one batch, the resume listing, and the crash hook and progress callback at each
 * journaled transition. */
#include "ferry/flow_journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/log.h"
#include "ferry/testknob.h"

/* ---- the declared table --------------------------------------------------------------------- */

int ferry_flow_state_parse(const ferry_flow_kind *k, const char *name)
{
    for (int i = 0; name && i < k->n_states; i++)
        if (!strcmp(k->states[i].name, name))
            return i;
    return -1;
}

const char *ferry_flow_state_name(const ferry_flow_kind *k, int s)
{
    return s >= 0 && s < k->n_states ? k->states[s].name : "?";
}

static bool in_range(const ferry_flow_kind *k, int s) { return s >= 0 && s < k->n_states; }

bool ferry_flow_transition_ok(const ferry_flow_kind *k, int from, int to)
{
    return in_range(k, from) && in_range(k, to) &&
           (k->states[from].next & FERRY_FLOW_TO(to)) != 0;
}

bool ferry_flow_terminal(const ferry_flow_kind *k, int s)
{
    return in_range(k, s) && k->states[s].terminal;
}

enum ferry_record_kind ferry_flow_record_kind(const ferry_flow_kind *k)
{
    return k->record == FERRY_REC_MOVE ? FERRY_REC_MOVE : FERRY_REC_JOB;
}

static bool is_move(const ferry_flow_kind *k) { return k->record == FERRY_REC_MOVE; }

const char *ferry_flow_job_id(const ferry_record *rec)
{
    return rec->kind == FERRY_REC_MOVE ? rec->u.move.id : rec->u.job.id;
}

int ferry_flow_kind_check(const ferry_flow_kind *k, ferry_err *err)
{
    if (k->record != 0 && k->record != FERRY_REC_JOB && k->record != FERRY_REC_MOVE)
        return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: jobs kept in %s records (job or "
                             "move records only)", k->kind ? k->kind : "?",
                             ferry_record_kind_name(k->record));
    /* a move record's state is the enum: the kind's numbers must be those (names too, for
     * what reads the record as JSON) */
    for (int i = 0; is_move(k) && i < k->n_states; i++)
        if (i >= FERRY_MOVE_STATES || !k->states[i].name ||
            strcmp(k->states[i].name, ferry_move_state_name((enum ferry_move_state)i)))
            return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: state %d is not the move "
                                 "state of that number", k->kind ? k->kind : "?", i);
    if (!k->kind || !*k->kind || strlen(k->kind) >= sizeof((ferry_job *)0)->kind)
        return ferry_err_set(err, FERRY_EINVAL, "flow kind: a name of 1 to %zu characters",
                             sizeof((ferry_job *)0)->kind - 1);
    if (k->n_states < 1 || k->n_states > FERRY_FLOW_STATES_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: %d states (1 to %d)", k->kind,
                             k->n_states, FERRY_FLOW_STATES_MAX);
    if (!in_range(k, k->start) || (k->failed != -1 && !in_range(k, k->failed)))
        return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: start or failed state out of range",
                             k->kind);
    if (k->states[k->start].terminal)
        return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: it starts in a terminal state",
                             k->kind);
    uint32_t all = k->n_states == 32 ? ~0u : (1u << k->n_states) - 1;
    for (int i = 0; i < k->n_states; i++) {
        const ferry_flow_state *s = &k->states[i];
        if (!s->name || !*s->name || strlen(s->name) >= sizeof((ferry_job *)0)->state)
            return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: state %d has no usable name",
                                 k->kind, i);
        if (ferry_flow_state_parse(k, s->name) != i)
            return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: state %s named twice",
                                 k->kind, s->name);
        if (s->next & ~all)
            return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: %s goes to a state that does "
                                 "not exist", k->kind, s->name);
        if (s->terminal && (s->next & ~FERRY_FLOW_TO(k->start)))
            return ferry_err_set(err, FERRY_EINVAL, "flow kind %s: terminal %s may only go back "
                                 "to %s", k->kind, s->name, k->states[k->start].name);
    }
    return FERRY_OK;
}

/* ---- job records ---------------------------------------------------------------------------- */

void ferry_flow_journal_init(ferry_flow_journal *fj, ferry_catalog *cat,
                             const ferry_flow_kind *kind, const char *owner)
{
    memset(fj, 0, sizeof *fj);
    fj->cat = cat;
    fj->kind = kind;
    snprintf(fj->owner, sizeof fj->owner, "%s", owner ? owner : "");
}

int ferry_flow_job_init(const ferry_flow_journal *fj, ferry_record *rec, const char *id,
                        ferry_err *err)
{
    if (is_move(fj->kind)) {
        ferry_record_init(rec, FERRY_REC_MOVE);
        ferry_move *m = &rec->u.move;
        if (!id || !*id || strlen(id) >= sizeof m->id)
            return ferry_err_set(err, FERRY_EINVAL, "move id '%s': 1 to %zu characters",
                                 id ? id : "", sizeof m->id - 1);
        memcpy(m->id, id, strlen(id) + 1);
        return FERRY_OK;
    }
    ferry_record_init(rec, FERRY_REC_JOB);
    ferry_job *j = &rec->u.job;
    if (!id || !*id || strlen(id) >= sizeof j->id)
        return ferry_err_set(err, FERRY_EINVAL, "%s job id '%s': 1 to %zu characters",
                             fj->kind->kind, id ? id : "", sizeof j->id - 1);
    memcpy(j->id, id, strlen(id) + 1);
    snprintf(j->kind, sizeof j->kind, "%s", fj->kind->kind);
    return FERRY_OK;
}

bool ferry_flow_job_stored(const ferry_record *rec) { return rec->version >= 0; }

int ferry_flow_job_state(const ferry_flow_journal *fj, const ferry_record *rec)
{
    if (!ferry_flow_job_stored(rec))
        return -1;
    if (rec->kind == FERRY_REC_MOVE)
        return in_range(fj->kind, (int)rec->u.move.state) ? (int)rec->u.move.state : -1;
    return ferry_flow_state_parse(fj->kind, rec->u.job.state);
}

/* The journaled state's name as stored (also one the kind does not name), for messages. */
static const char *stored_state_name(const ferry_record *rec)
{
    return rec->kind == FERRY_REC_MOVE ? ferry_move_state_name(rec->u.move.state)
                                       : rec->u.job.state;
}

int ferry_flow_get(ferry_flow_journal *fj, ferry_record *rec, ferry_err *err)
{
    ferry_record r;
    ferry_record_init(&r, ferry_flow_record_kind(fj->kind));
    if (rec->kind != r.kind)
        return ferry_err_set(err, FERRY_EINVAL, "%s jobs are %s records, not %s records",
                             fj->kind->kind, ferry_record_kind_name(r.kind),
                             ferry_record_kind_name(rec->kind));
    if (r.kind == FERRY_REC_MOVE)
        memcpy(r.u.move.id, rec->u.move.id, sizeof r.u.move.id);
    else
        memcpy(r.u.job.id, rec->u.job.id, sizeof r.u.job.id);
    int rc = ferry_catalog_get(fj->cat, &r, err);
    if (rc)
        return rc;
    if (r.kind == FERRY_REC_JOB && strcmp(r.u.job.kind, fj->kind->kind)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "job %s is of kind '%s', not %s", r.u.job.id,
                           r.u.job.kind, fj->kind->kind);
        ferry_record_free(&r);
        return rc;
    }
    ferry_record_free(rec); /* a job's data: r's takes its place */
    *rec = r;
    return FERRY_OK;
}

static void crash(ferry_flow_journal *fj, const char *knob, int state)
{
    if (!knob)
        return;
    const char *point = ferry_flow_state_name(fj->kind, state);
    if (fj->crash)
        fj->crash(knob, point, fj->crash_arg);
    else
        ferry_fault_point(knob, point);
}

/* compose() of a move record: the enum for the state; a transition starts the new state at
 * step 0 (a note keeps the step the caller set: an attempt counted, the publish step). The
 * move's data is its own record, written by the caller in the same batch. */
static int compose_move(ferry_flow_journal *fj, const ferry_record *rec, int to, bool note,
                        const char *detail, const char *data, ferry_record *next, ferry_err *err)
{
    if (data)
        return ferry_err_set(err, FERRY_EINVAL, "move %s: a move record has no data field (its "
                             "data record goes in the batch)", rec->u.move.id);
    *next = *rec;
    ferry_move *m = &next->u.move;
    m->state = (enum ferry_move_state)to;
    if (!note)
        m->step = 0;
    bool clear = fj->kind->owner_clears_when_finished && ferry_flow_terminal(fj->kind, to);
    snprintf(m->owner, sizeof m->owner, "%s", clear ? "" : fj->owner);
    snprintf(m->detail, sizeof m->detail, "%.*s", (int)sizeof m->detail - 1,
             detail ? detail : "");
    m->updated = (int64_t)time(NULL);
    if (!ferry_flow_job_stored(rec) && !m->created)
        m->created = m->updated;
    return FERRY_OK;
}

/* The record rec would be in state `to`, into *next (version kept: what the CAS compares). */
static int compose(ferry_flow_journal *fj, const ferry_record *rec, int to, bool note,
                   const char *detail, const char *data, ferry_record *next, ferry_err *err)
{
    if (rec->kind == FERRY_REC_MOVE)
        return compose_move(fj, rec, to, note, detail, data, next, err);
    int rc = ferry_record_copy(next, rec, err); /* next owns its data: rec keeps its own */
    if (!rc && data)
        rc = ferry_job_set_data(&next->u.job, data, err);
    if (rc) {
        ferry_record_free(next);
        return rc;
    }
    ferry_job *nj = &next->u.job;
    snprintf(nj->kind, sizeof nj->kind, "%s", fj->kind->kind);
    snprintf(nj->state, sizeof nj->state, "%s", ferry_flow_state_name(fj->kind, to));
    bool clear = fj->kind->owner_clears_when_finished && ferry_flow_terminal(fj->kind, to);
    snprintf(nj->owner, sizeof nj->owner, "%s", clear ? "" : fj->owner);
    snprintf(nj->detail, sizeof nj->detail, "%.*s", (int)sizeof nj->detail - 1,
             detail ? detail : "");
    nj->updated = (int64_t)time(NULL);
    if (!ferry_flow_job_stored(rec) && !nj->created)
        nj->created = nj->updated;
    return FERRY_OK;
}

/* Whether writing `to` on rec is allowed: a declared transition from its journaled state, or
 * (not stored, with create) the start state. */
static int check(ferry_flow_journal *fj, const ferry_record *rec, int to, unsigned flags,
                 ferry_err *err)
{
    const ferry_flow_kind *k = fj->kind;
    const char *id = ferry_flow_job_id(rec);
    if (rec->kind != ferry_flow_record_kind(k))
        return ferry_err_set(err, FERRY_EINTERNAL, "job %s: a %s record, %s jobs are %s records",
                             id, ferry_record_kind_name(rec->kind), k->kind,
                             ferry_record_kind_name(ferry_flow_record_kind(k)));
    if (!in_range(k, to))
        return ferry_err_set(err, FERRY_EINTERNAL, "job %s: state %d is not a %s state",
                             id, to, k->kind);
    if (!ferry_flow_job_stored(rec)) {
        if ((flags & FERRY_FLOW_CREATE) && to == k->start)
            return FERRY_OK;
        return ferry_err_set(err, FERRY_EINTERNAL, "job %s: not in the catalog yet, so only "
                             "created in %s, not written in %s", id,
                             k->states[k->start].name, k->states[to].name);
    }
    int from = ferry_flow_job_state(fj, rec);
    if (flags & FERRY_FLOW_NOTE)
        return from == to ? FERRY_OK
                          : ferry_err_set(err, FERRY_EINTERNAL, "job %s: a note keeps the "
                                          "state (%s), it cannot write %s", id,
                                          stored_state_name(rec), k->states[to].name);
    if (!ferry_flow_transition_ok(k, from, to))
        return ferry_err_set(err, FERRY_EINTERNAL, "job %s: %s -> %s is not a declared %s "
                             "transition", id, from < 0 ? stored_state_name(rec)
                                                        : k->states[from].name,
                             k->states[to].name, k->kind);
    return FERRY_OK;
}

int ferry_flow_write(ferry_flow_journal *fj, ferry_batch *b, ferry_flow_change *ch, size_t n,
                     unsigned flags, ferry_err *err)
{
    return ferry_flow_write_versions(fj, b, NULL, NULL, ch, n, flags, err);
}

int ferry_flow_write_versions(ferry_flow_journal *fj, ferry_batch *b, int64_t *bv,
                              ferry_commit_info *info, ferry_flow_change *ch, size_t n,
                              unsigned flags, ferry_err *err)
{
    if (n == 0 && !b)
        return FERRY_OK;
    for (size_t i = 0; i < n; i++) {
        int rc = check(fj, ch[i].rec, ch[i].to, flags, err);
        if (rc)
            return rc;
    }
    ferry_batch *own = b ? NULL : ferry_batch_new();
    ferry_batch *batch = b ? b : own;
    ferry_record *next = calloc(n + 1, sizeof *next);
    int *from = calloc(n + 1, sizeof *from);
    int64_t *nv = NULL;
    size_t base = batch ? ferry_batch_size(batch) : 0;
    uint32_t targets = 0;
    int rc = batch && next && from ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        from[i] = ferry_flow_job_state(fj, ch[i].rec);
        targets |= FERRY_FLOW_TO(ch[i].to);
        rc = compose(fj, ch[i].rec, ch[i].to, (flags & FERRY_FLOW_NOTE) != 0, ch[i].detail,
                     ch[i].data, &next[i], err);
        if (!rc)
            rc = ferry_flow_job_stored(ch[i].rec) ? ferry_batch_update(batch, &next[i], err)
                                                  : ferry_batch_create(batch, &next[i], err);
    }
    if (!rc && !(nv = calloc(ferry_batch_size(batch) + 1, sizeof *nv)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    bool hooks = !(flags & FERRY_FLOW_NOTE);
    for (int s = 0; !rc && hooks && s < fj->kind->n_states; s++)
        if (targets & FERRY_FLOW_TO(s))
            crash(fj, fj->kind->crash_before, s);
    if (!rc) {
        fj->writes++;
        rc = ferry_catalog_commit_versions(fj->cat, batch, nv, info, err);
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "%s: changed by another worker (it owns the job now): ",
                             n == 1 ? ferry_flow_job_id(ch[0].rec) : "a job of the batch");
    }
    for (size_t i = 0; !rc && bv && i < base; i++)
        bv[i] = nv[i];
    for (size_t i = 0; !rc && i < n; i++) {
        next[i].version = nv[base + i];
        ferry_record_free(ch[i].rec); /* its data: next[i]'s takes its place */
        *ch[i].rec = next[i];
        memset(&next[i], 0, sizeof next[i]); /* moved: the cleanup below frees nothing of it */
    }
    for (size_t i = 0; !rc && hooks && i < n; i++) {
        FLOG_DEBUG("msg=\"job state\" kind=%s job=%s from=%s state=%s", fj->kind->kind,
                   ferry_flow_job_id(ch[i].rec), ferry_flow_state_name(fj->kind, from[i]),
                   ferry_flow_state_name(fj->kind, ch[i].to));
        if (fj->progress)
            fj->progress(ch[i].rec, from[i], ch[i].to, fj->progress_arg);
    }
    for (int s = 0; !rc && hooks && s < fj->kind->n_states; s++)
        if (targets & FERRY_FLOW_TO(s))
            crash(fj, fj->kind->crash_after, s);
    for (size_t i = 0; next && i < n; i++)
        ferry_record_free(&next[i]); /* not written (a failure): the copies' data */
    free(nv);
    free(from);
    free(next);
    ferry_batch_free(own);
    return rc;
}

int ferry_flow_advance(ferry_flow_journal *fj, ferry_record *rec, int to, const char *detail,
                       const char *data, ferry_err *err)
{
    ferry_flow_change c = {.rec = rec, .to = to, .detail = detail, .data = data};
    return ferry_flow_write(fj, NULL, &c, 1, 0, err);
}

int ferry_flow_fail(ferry_flow_journal *fj, ferry_record *rec, const char *detail,
                    const char *data, ferry_err *err)
{
    if (fj->kind->failed < 0)
        return ferry_err_set(err, FERRY_EINTERNAL, "job %s: %s jobs have no failed state",
                             ferry_flow_job_id(rec), fj->kind->kind);
    return ferry_flow_advance(fj, rec, fj->kind->failed, detail, data, err);
}

int ferry_flow_note(ferry_flow_journal *fj, ferry_record *rec, const char *detail,
                    const char *data, ferry_err *err)
{
    ferry_flow_change c = {.rec = rec, .to = ferry_flow_job_state(fj, rec), .detail = detail,
                           .data = data};
    return ferry_flow_write(fj, NULL, &c, 1, FERRY_FLOW_NOTE, err);
}

int ferry_flow_create(ferry_flow_journal *fj, ferry_record *rec, const char *data,
                      ferry_err *err)
{
    const ferry_flow_kind *k = fj->kind;
    if (!ferry_flow_job_stored(rec)) {
        ferry_record old;
        int g = ferry_flow_job_init(fj, &old, ferry_flow_job_id(rec), err);
        if (!g)
            g = ferry_flow_get(fj, &old, err);
        if (g == FERRY_OK && rec->kind == FERRY_REC_MOVE) {
            rec->version = old.version;
            rec->u.move.created = old.u.move.created;
            rec->u.move.state = old.u.move.state;
        } else if (g == FERRY_OK) {
            rec->version = old.version;
            rec->u.job.created = old.u.job.created;
            snprintf(rec->u.job.state, sizeof rec->u.job.state, "%s", old.u.job.state);
        } else if (g == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
        }
        ferry_record_free(&old);
        if (g && g != FERRY_ENOTFOUND)
            return g;
    }
    if (ferry_flow_job_stored(rec)) {
        int s = ferry_flow_job_state(fj, rec);
        if (!ferry_flow_terminal(k, s))
            return ferry_err_set(err, FERRY_ECONFLICT, "job %s is unfinished (%s): it is "
                                 "resumed, not created again", ferry_flow_job_id(rec),
                                 stored_state_name(rec));
    }
    ferry_flow_change c = {.rec = rec, .to = k->start, .data = data};
    return ferry_flow_write(fj, NULL, &c, 1, FERRY_FLOW_CREATE, err);
}

typedef struct unfinished_arg {
    ferry_flow_journal *fj;
    ferry_record_list *out;
    size_t cap;
} unfinished_arg;

static int keep_unfinished(const ferry_record *rec, void *arg, ferry_err *err)
{
    unfinished_arg *a = arg;
    const ferry_flow_kind *k = a->fj->kind;
    if (strcmp(rec->u.job.kind, k->kind))
        return FERRY_OK;
    int s = ferry_flow_state_parse(k, rec->u.job.state);
    if (s < 0 || k->states[s].terminal)
        return FERRY_OK;
    if (a->out->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        ferry_record *v = realloc(a->out->items, cap * sizeof *v);
        if (!v)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        a->out->items = v;
        a->cap = cap;
    }
    return ferry_record_copy(&a->out->items[a->out->n++], rec, err); /* the data: the scan
                                                                         * frees rec's */
}

int ferry_flow_list_unfinished(ferry_flow_journal *fj, ferry_record_list *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    if (is_move(fj->kind)) {
        /* the catalog keeps an index of these (routers and the sweep read it); unfinished
         * there is what the kind calls unfinished, ferry_move_finished being its terminals */
        int rc = ferry_catalog_list_unfinished_moves(fj->cat, out, err);
        size_t w = 0;
        for (size_t i = 0; !rc && i < out->n; i++)
            if (!ferry_flow_terminal(fj->kind, ferry_flow_job_state(fj, &out->items[i])) &&
                ferry_flow_job_state(fj, &out->items[i]) >= 0)
                out->items[w++] = out->items[i];
        if (!rc)
            out->n = w;
        return rc;
    }
    unfinished_arg a = {.fj = fj, .out = out};
    int rc = ferry_catalog_each(fj->cat, FERRY_REC_JOB, NULL, 0, keep_unfinished, &a, err);
    if (rc)
        ferry_record_list_free(out);
    return rc;
}

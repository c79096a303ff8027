/* The tiering job's state machine (tier.h): one (server, table, partition) from hot parts on the
 * local disk to pointer parts on the cold disk, journaled in a catalog job record. The jobs of one
 * (server, table) run as a *wave*: each step is done for all the wave's jobs in that state at
 * once (one statement, one agent request or a few in parallel, one catalog batch), while every
 * job keeps its own journal record, state and invariants.
 *
 * States and what each step does (every step is idempotent: a job resumed after kill -9 simply
 * runs its journaled state's step again; tier_steps.c and tier_cleanup.c):
 *
 *   PLANNED   nothing touched yet.
 *   FREEZE    FREEZE PARTITION under the job's attempt name, all partitions of the wave in one
 *             ALTER. The table's merges run on (a wave's upload may take minutes, and a busy
 *             table that cannot merge piles up parts until inserts fail); a merge that takes a
 *             frozen part before the swap is found by ATTACH's or the swap's check, the job is
 *             rolled back and run again at once in a wave that holds merges stopped from its
 *             FREEZE (tier_run.c); a partition with late rows (cold parts beside its hot ones:
 *             fresh inserts, merged within seconds) runs in such a wave from the start. A FREEZE
 *             found journaled but not finished by this process may
 *             have been cut short, so it is redone under a fresh name (attempt + 1) after the old
 *             one is removed.
 *   UPLOAD    every file of every frozen hot part uploaded unchanged (agent, uploader role),
 *             several requests at once; the agent hashes every file on the way and checks it
 *             against the part's checksums.txt (`hashed`); files already there with the same
 *             bytes are skipped.
 *   POINTERS  the pinned pointer format checked against the server; the staging table created
 *             (CREATE TABLE IF NOT EXISTS ... AS the table: same structure and storage policy)
 *             and its merges stopped too (a merge there would change the parts' hashes before
 *             the swap); one pointer part per frozen hot part written into staging's detached/
 *             on the cold disk (the agent checks every object first).
 *   ATTACH    ATTACH PARTITION in staging for every partition of the wave that staging does not
 *             hold yet (one ALTER); staging must hold what was frozen: with `hashed`, the same
 *             multiset of (hash_of_all_files, rows) as the frozen hot parts (the pointer part's
 *             checksums.txt is the hot part's, and every object's bytes were checked against it
 *             on upload and its size before the pointer part was written); without, the same row
 *             fingerprint. What the swap must bring in is kept as `fp`.
 *   REPLACE   SYSTEM STOP MERGES on the table, and a wait until none runs (one that was
 *             committing goes on after the stop); then the swap, one ALTER for the wave: REPLACE PARTITION ... FROM staging when the
 *             partition holds exactly the frozen hot parts (atomic for readers); otherwise (cold
 *             parts from an earlier run, or rows that arrived since the freeze) ATTACH PARTITION
 *             ... FROM staging and DETACH PART of each frozen hot part, which never replaces the
 *             cold parts or the new rows. Before a swap is chosen, staging must still hold what
 *             ATTACH checked (with part hashes: the same digest; a restarted server may have
 *             merged there). The choices and the highest block numbers before the
 *             swap are journaled first (one batch); a resumed swap looks at which parts are
 *             active to finish it. When the ALTER fails, each job's swap is looked at and run
 *             again on its own, so one bad partition holds up only itself.
 *   VERIFY    none of the frozen hot parts active; the parts the swap added (on the object
 *             disk, blocks above max_block) match `fp` (part hashes, or rows); for REPLACE, no
 *             part other than the frozen ones was dropped (a row inserted between the check and
 *             the swap would have been: reported, never silent).
 *   CLEANUP   staging's partitions emptied (never DROP or TRUNCATE): by REPLACE PARTITION
 *             from the table's always-empty twin when staging holds exactly the job's pointer
 *             parts (ClickHouse then removes them later, lowering ref_counts ferry keeps above
 *             0), else by DETACH; their detached folders removed; the real table's detached hot
 *             parts removed
 *             (local files); the cold parts, their objects with sizes and checksums, and the
 *             partitions (tier cold) recorded in the catalog in one batch with the journals
 *             (recorded = true); the freeze folders removed. Merges of the table are started again
 *             first, when no job of the table needs them stopped (I6).
 *   DONE / FAILED.
 *
 * The wave runs its lowest state first, for all jobs in it, until every job is DONE, FAILED or
 * left for the next run; a job failure takes that job out (rolled back before its swap, kept in
 * its state after it), the others go on. A step that fails as a whole fails every job in it.
 *
 * Invariants:
 *   I1  Only the worker whose compare-and-set on the job record succeeded runs a step; a lost
 *       CAS (one batch for the wave) stops the worker's wave at once (ECONFLICT).
 *   I2  Before `swapped` is journaled the real table is untouched (apart from STOP MERGES and
 *       FREEZE's hard links): any failure rolls back (staging cleaned, freezes removed, merges
 *       started unless another job of the wave still needs them stopped) and leaves the
 *       partition hot and intact. From then on a job only goes forward, apart from VERIFY's
 *       undoing of an attach swap a broken part spoiled (tier_mend.c), which brings the table
 *       back to what it was before the swap and then rolls the job back.
 *   I3  The staging partition holds nothing but this job's pointer parts: a job starts by
 *       cleaning it, and it is cleaned before DONE or FAILED.
 *   I4  Every object ferry uploaded for a part that was swapped in is recorded in the catalog
 *       (FERRY_REC_PART with this server) before the freeze that could re-list it is removed.
 *   I5  No statement of the flow can remove parts: all SQL goes through ferry_guarded_exec.
 *   I6  Merges of the table are stopped from the swap's check until its verification (and,
 *       in a wave that holds merges, from FREEZE): a frozen part must stay as it is while a
 *       swap may name it. They are started again when no job of the table is between its swap
 *       and a passed VERIFY (the wave's, from memory, and the journal's unfinished jobs left by
 *       an earlier run or wave): at the start of CLEANUP, in a rollback, and at the end of a
 *       wave that stopped them (a rollback that failed too: a full disk). A job left after its
 *       swap for the next run (a failure there, a crash) keeps them stopped until that run
 *       verifies it. A run cut between STOP MERGES and the journal write that records it leaves
 *       no trace; the next run that finds a partition of the table piled up (more hot parts than
 *       compaction takes) starts them again, unless the journal holds them (tier_run.c). So a
 *       job killed or failed before its swap never leaves a table unable to merge for long. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"
#include "flow/staging_load.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"
#include "ferry/log.h"
#include "ferry/stop.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"

/* ---- small helpers -------------------------------------------------------------------------- */

int tier_sql(tier_server *srv, const char *sql, ferry_buf *out, ferry_err *err)
{
    srv->conn.n_sql++;
    int rc = ferry_guarded_exec(srv->conn.ch, sql, out, err);
    if (rc)
        ferry_err_prefix(err, "%s: ", srv->shard.name);
    return rc;
}

static tier_policy *find_policy(tier_server *srv, const char *db, const char *table)
{
    for (size_t i = 0; i < srv->n_policies; i++)
        if (!strcmp(srv->policies[i].db, db) && !strcmp(srv->policies[i].table, table))
            return &srv->policies[i];
    return NULL;
}

void tier_forget_policy(tier_server *srv, const char *db, const char *table)
{
    tier_policy *p = find_policy(srv, db, table);
    if (p)
        *p = srv->policies[--srv->n_policies];
}

static void remember_policy(tier_server *srv, const char *db, const char *table, bool exists,
                            const char *policy, bool remote)
{
    tier_policy *v = realloc(srv->policies, (srv->n_policies + 1) * sizeof *v);
    if (!v)
        return; /* not cached: asked again next time */
    srv->policies = v;
    tier_policy *p = &v[srv->n_policies++];
    snprintf(p->db, sizeof p->db, "%s", db);
    snprintf(p->table, sizeof p->table, "%s", table);
    snprintf(p->policy, sizeof p->policy, "%s", policy);
    p->exists = exists;
    p->remote = remote;
}

int tier_table_policy(tier_server *srv, const char *db, const char *table, bool *exists,
                      char *policy, size_t policysz, bool *has_remote, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    *exists = *has_remote = false;
    const tier_policy *known = find_policy(srv, db, table);
    if (known) {
        *exists = known->exists;
        *has_remote = known->remote;
        snprintf(policy, policysz, "%s", known->policy);
        return FERRY_OK;
    }
    policy[0] = '\0';
    ferry_buf_puts(&sql, "SELECT storage_policy FROM system.tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND name = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    int rc = tier_sql(srv, ferry_buf_cstr(&sql), &res, err);
    if (rc || res.len == 0)
        goto out;
    *exists = true;
    ferry_chomp(res.data);
    snprintf(policy, policysz, "%s", res.data);
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT count() FROM system.disks WHERE is_remote AND has((SELECT "
                         "groupArrayArray(disks) FROM system.storage_policies WHERE policy_name "
                         "= ");
    ferry_sql_quote(policy, &sql);
    ferry_buf_puts(&sql, "), name) FORMAT TabSeparated");
    ferry_buf_reset(&res);
    if ((rc = tier_sql(srv, ferry_buf_cstr(&sql), &res, err)))
        goto out;
    *has_remote = res.data && res.data[0] != '0';
out:
    if (!rc)
        remember_policy(srv, db, table, *exists, policy, *has_remote);
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

/* The staging table: an existing one must have the table's storage policy (REPLACE/ATTACH FROM
 * need it) and a disk on object storage. */
int tier_check_staging(tier_server *srv, const char *db, const char *table, bool must_exist,
                       ferry_err *err)
{
    char staging[FERRY_NAME_MAX], pol[FERRY_NAME_MAX], spol[FERRY_NAME_MAX];
    bool exists, sexists, remote, sremote;
    int rc = ferry_tier_staging_name(table, staging, sizeof staging, err);
    if (!rc) /* read-only mode: a staging load cut by a crash left it detached */
        rc = stg_recover(&srv->conn, db, staging, err);
    if (!rc)
        rc = tier_table_policy(srv, db, table, &exists, pol, sizeof pol, &remote, err);
    if (!rc)
        rc = tier_table_policy(srv, db, staging, &sexists, spol, sizeof spol, &sremote, err);
    if (rc)
        return rc;
    if (!exists || (must_exist && !sexists))
        return ferry_err_set(err, FERRY_ENOTFOUND, "%s: table %s.%s or its staging table %s is "
                             "missing", srv->shard.name, db, table, staging);
    if (!sexists)
        return FERRY_OK;
    if (strcmp(pol, spol))
        return ferry_err_set(err, FERRY_EINVAL, "%s: staging table %s.%s has storage policy '%s' "
                             "but %s has '%s': its cold disk is missing, and REPLACE PARTITION "
                             "needs the same policy (rename the staging table away; ferry creates "
                             "it again AS the table)", srv->shard.name, db, staging, spol, table,
                             pol);
    if (!sremote)
        return ferry_err_set(err, FERRY_EINVAL, "%s: staging table %s.%s has no object-storage "
                             "disk (storage policy '%s'); tiering needs a cold volume on one",
                             srv->shard.name, db, staging, spol);
    return FERRY_OK;
}

int tier_job_fail(tier_job *job, int rc, const ferry_err *err)
{
    assert(rc != FERRY_OK);
    if (!job->rc) {
        job->rc = rc;
        job->err = *err;
        job->err.code = rc;
    }
    return rc;
}

/* ---- the journal ------------------------------------------------------------------------------ */

/* Writes the jobs js[0..n) in state `to` through the flow engine (flow_journal.h) in one catalog
 * batch, with the part-list records each needs (tier_hot.c); flags as ferry_flow_write
 * (FERRY_FLOW_NOTE: every job stays in its state). detail: each job's failure, else empty. On
 * success each job's record and state follow; a lost compare-and-set sets ctx->lost. */
static int journal_write(tier_ctx *ctx, tier_job **js, size_t n, enum ferry_tier_state to,
                         bool detail, unsigned flags, ferry_err *err)
{
    if (n == 0)
        return FERRY_OK;
    ferry_batch *b = ferry_batch_new();
    ferry_flow_change *ch = calloc(n, sizeof *ch);
    char **text = calloc(n, sizeof *text);
    int rc = b && ch && text ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        rc = tier_hot_stage(ctx, js[i], b, err); /* the part list's records, when it needs them */
        if (!rc)
            rc = tier_hot_text(js[i], &text[i], err);
        ch[i] = (ferry_flow_change){.rec = &js[i]->rec, .to = (int)to, .data = text[i],
                                    .detail = detail && js[i]->rc ? js[i]->err.msg : NULL};
    }
    if (!rc) {
        ctx->catalog_writes++;
        rc = ferry_flow_write(&ctx->journal, b, ch, n, flags, err);
        if (rc == FERRY_ECONFLICT)
            ctx->lost = true;
    }
    for (size_t i = 0; i < n; i++) {
        tier_hot_committed(js[i], rc == FERRY_OK);
        if (!rc)
            js[i]->state = to;
        if (text)
            free(text[i]);
    }
    free(text);
    free(ch);
    ferry_batch_free(b);
    return rc;
}

int tier_journal(tier_ctx *ctx, tier_job **js, size_t n, enum ferry_tier_state to,
                 ferry_err *err)
{
    if (n == 0)
        return FERRY_OK;
    int rc = journal_write(ctx, js, n, to, false, 0, err);
    if (rc)
        return rc;
    FLOG_INFO("msg=\"tier wave state\" server=%s table=%s state=%s jobs=%zu first=%s",
              js[0]->srv->shard.name, js[0]->table, ferry_tier_state_name(to), n,
              js[0]->rec.u.job.id);
    return FERRY_OK;
}

int tier_journal_detail(tier_ctx *ctx, tier_job **js, size_t n, enum ferry_tier_state to,
                        ferry_err *err)
{
    bool stay = true;
    for (size_t i = 0; i < n; i++)
        stay = stay && js[i]->state == to;
    return journal_write(ctx, js, n, to, true, stay ? FERRY_FLOW_NOTE : 0, err);
}

/* ---- merges ----------------------------------------------------------------------------------- */

static bool in_list(tier_job *const *js, size_t n, const tier_job *job)
{
    for (size_t i = 0; i < n; i++)
        if (js[i] == job)
            return true;
    return false;
}

bool tier_job_swap_unverified(const tier_job *j)
{
    return j->state == FERRY_TIER_VERIFY ||
           (j->state == FERRY_TIER_REPLACE && j->st.swapped);
}

/* Whether job j needs its table's merges stopped now (I6): its swap may have run and is not
 * verified (a merge would take a frozen part that must still be detached, or change what VERIFY
 * compares), or, in a wave that holds merges, it is frozen and not swapped yet. */
static bool job_needs_stop(const tier_wave *w, const tier_job *j)
{
    if (tier_job_swap_unverified(j))
        return true;
    if (!w->hold_merges || j->state < FERRY_TIER_FREEZE || j->state > FERRY_TIER_REPLACE)
        return false;
    return !j->out; /* out before its swap: rolled back (or about to be), its parts may merge */
}

bool tier_wave_needs_stop(const tier_wave *w, tier_job *const *js, size_t n)
{
    for (size_t i = 0; i < w->n; i++)
        if (!in_list(js, n, w->jobs[i]) && job_needs_stop(w, w->jobs[i]))
            return true;
    return false;
}

/* The key of a table in ctx->held: server, database and table joined by a unit separator. */
static void held_key(const char *server, const char *db, const char *table, char *out,
                     size_t size)
{
    snprintf(out, size, "%s\x1f%s\x1f%s", server, db, table);
}

void tier_held_note(tier_ctx *ctx, const char *job_id, const char *server, const char *db,
                    const char *table, bool unverified)
{
    if (!ctx->held)
        return; /* not read yet: the journal, read when first needed, has it */
    if (!unverified) {
        json_object_del(ctx->held, job_id);
        return;
    }
    char key[3 * FERRY_NAME_MAX + 3];
    held_key(server, db, table, key, sizeof key);
    json_object_set_new(ctx->held, job_id, json_string(key));
}

int tier_held_seed(tier_ctx *ctx, const ferry_record_list *unfinished, ferry_err *err)
{
    json_t *held = json_object();
    if (!held)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < unfinished->n; i++) {
        const ferry_job *rj = &unfinished->items[i].u.job;
        tier_job j = {0};
        ferry_err e = {0};
        /* a record that does not decode is left to its own resume, which reports it */
        if (!tier_state_decode(ferry_job_data(rj), &j.st, &e) &&
            !ferry_tier_state_parse(rj->state, &j.state, &e) && tier_job_swap_unverified(&j)) {
            char key[3 * FERRY_NAME_MAX + 3];
            held_key(j.st.server, j.st.db, j.st.table, key, sizeof key);
            json_object_set_new(held, rj->id, json_string(key));
        }
        tier_state_free(&j.st);
    }
    json_decref(ctx->held);
    ctx->held = held;
    return FERRY_OK;
}

bool tier_journal_holds_merges(tier_ctx *ctx, const tier_server *srv, const char *db,
                               const char *table, const tier_wave *w, char *job_id,
                               size_t job_id_size)
{
    if (!ctx->held) {
        ferry_record_list l = {0};
        ferry_err err = {0};
        int rc = ferry_flow_list_unfinished(&ctx->journal, &l, &err);
        if (!rc)
            rc = tier_held_seed(ctx, &l, &err);
        ferry_record_list_free(&l);
        if (rc) {
            FLOG_WARN("msg=\"tier: the journal could not be read; merges of the table left as "
                      "they are\" server=%s table=%s err=\"%s\"", srv->shard.name, table,
                      err.msg);
            snprintf(job_id, job_id_size, "?");
            return true;
        }
    }
    char key[3 * FERRY_NAME_MAX + 3];
    held_key(srv->shard.name, db, table, key, sizeof key);
    const char *id;
    json_t *v;
    json_object_foreach(ctx->held, id, v)
    {
        bool in_wave = false;
        for (size_t k = 0; w && !in_wave && k < w->n; k++)
            in_wave = !strcmp(w->jobs[k]->rec.u.job.id, id);
        /* the wave's own jobs: tier_wave_needs_stop decides for them, from memory */
        if (!in_wave && !strcmp(json_string_value(v), key)) {
            snprintf(job_id, job_id_size, "%s", id);
            return true;
        }
    }
    return false;
}

bool tier_merges_needed(tier_ctx *ctx, const tier_wave *w, tier_job *const *js, size_t n)
{
    char job[FERRY_NAME_MAX];
    if (tier_wave_needs_stop(w, js, n))
        return true;
    if (!tier_journal_holds_merges(ctx, w->srv, w->db, w->table, w, job, sizeof job))
        return false;
    FLOG_INFO("msg=\"tier: merges of the table stay stopped: a tier job's swap is not verified "
              "yet\" server=%s table=%s job=%s", w->srv->shard.name, w->table, job);
    return true;
}

int tier_wait_none(tier_wave *w, const char *count_sql, const char *timeout_msg, ferry_err *err)
{
    int rc = FERRY_OK;
    double until = ferry_clock_ms() + 60e3;
    for (unsigned sleep_ms = 5;; sleep_ms = sleep_ms < 200 ? sleep_ms * 2 : 200) {
        ferry_buf out = FERRY_BUF_INIT;
        rc = tier_sql(w->srv, count_sql, &out, err);
        bool some = !rc && out.data && out.data[0] != '0';
        ferry_buf_free(&out);
        if (rc || !some)
            return rc;
        if (ferry_clock_ms() > until)
            return ferry_err_set(err, FERRY_ETIMEOUT, "%s: %s", w->srv->shard.name, timeout_msg);
        usleep(sleep_ms * 1000);
    }
}

/* Waits (bounded) until no merge or mutation of db.table runs: SYSTEM STOP MERGES stops new
 * ones and cancels running ones, but one that was committing its result goes on, and would
 * replace a frozen part the swap is about to name. */
static int wait_merges_idle(tier_wave *w, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "SELECT count() FROM system.merges WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->table, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    char msg[3 * FERRY_NAME_MAX];
    snprintf(msg, sizeof msg, "a merge of %s.%s still runs 60 s after SYSTEM STOP MERGES; "
             "nothing was swapped, the next run tries again", w->db, w->table);
    int rc = tier_wait_none(w, ferry_buf_cstr(&sql), msg, err);
    ferry_buf_free(&sql);
    return rc;
}

static int merges_stmt(tier_wave *w, bool start, const char *table, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, start ? "SYSTEM START MERGES " : "SYSTEM STOP MERGES ");
    ferry_sql_db_table(w->db, table, &sql);
    int rc = tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    return rc;
}

int tier_table_merges(tier_wave *w, bool start, ferry_err *err)
{
    if (!start) /* set before it is sent: a lost answer may still have stopped them */
        w->merges_stopped_here = true;
    int rc = merges_stmt(w, start, w->table, err);
    if (!rc && start)
        w->merges_stopped_here = false;
    return rc || start ? rc : wait_merges_idle(w, err);
}

/* The end of a wave: merges this process stopped on the table start again unless a job of the
 * wave, left for a later run, has a swap that may have run and is not verified (I6). Without
 * this, a wave that failed after STOP MERGES and whose rollback failed too (a full disk: the
 * rollback cannot clean staging either) left the table unable to merge until a later run
 * finished a job of it; in the chaos soak, hundreds of parts a partition piled up meanwhile. */
static void settle_merges(tier_ctx *ctx, tier_wave *w)
{
    /* lost (I1): another worker owns the jobs */
    if (!(w->merges_stopped_here || w->merges_owed) || ctx->lost)
        return;
    if (tier_merges_needed(ctx, w, NULL, 0))
        return;
    ferry_err e = {0};
    if (tier_table_merges(w, true, &e))
        FLOG_WARN("msg=\"tier: merges of the table not started again; the next run does it\" "
                  "server=%s table=%s err=\"%s\"", w->srv->shard.name, w->table, e.msg);
}

int tier_staging_merges_stop(tier_wave *w, ferry_err *err)
{
    /* a merge of pointer parts there between ATTACH's check and the swap would swap in a part
     * of other hashes (same rows), which VERIFY refuses; staging never needs merges, so they
     * are never started again (a server restart does) */
    char policy[FERRY_NAME_MAX];
    bool exists = false, remote = false;
    int rc = tier_table_policy(w->srv, w->db, w->staging, &exists, policy, sizeof policy, &remote,
                               err);
    return rc || !exists ? rc : merges_stmt(w, false, w->staging, err);
}

/* ---- failures ---------------------------------------------------------------------------------- */

/* Takes the failed jobs of js out of the wave: before their swap they are rolled back and
 * journaled FAILED (I2); after it they keep their state, with the error as detail, and the next
 * run resumes them. */
static int settle_failures(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    tier_job **back = calloc(n + 1, sizeof *back), **keep = calloc(n + 1, sizeof *keep);
    size_t nb = 0, nk = 0;
    int rc = back && keep ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        tier_job *j = js[i];
        if (!j->rc || j->out)
            continue;
        j->out = true;
        FLOG_WARN("msg=\"tier job failed\" job=%s state=%s err=\"%s\"", j->rec.u.job.id,
                  ferry_tier_state_name(j->state), j->err.msg);
        if (j->st.swapped)
            keep[nk++] = j;
        else
            back[nb++] = j;
    }
    if (!rc && nb) {
        ferry_err rb = {0};
        if (tier_rollback(ctx, w, back, nb, &rb) != FERRY_OK) {
            /* the journal keeps each job where it is: the next run resumes and finishes it */
            FLOG_WARN("msg=\"tier rollback failed; the next run resumes the jobs\" server=%s "
                      "table=%s jobs=%zu err=\"%s\"", w->srv->shard.name, w->table, nb, rb.msg);
            for (size_t i = 0; i < nb; i++)
                keep[nk++] = back[i];
        }
    }
    /* each keeps its own state: one batch per state */
    for (size_t i = 0; !rc && i < nk; i++) {
        if (!keep[i])
            continue;
        enum ferry_tier_state s = keep[i]->state;
        tier_job **same = calloc(nk, sizeof *same);
        size_t ns = 0;
        if (!same) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        for (size_t k = i; k < nk; k++)
            if (keep[k] && keep[k]->state == s) {
                same[ns++] = keep[k];
                keep[k] = NULL;
            }
        ferry_err ignored = {0};
        tier_journal_detail(ctx, same, ns, s, &ignored);
        free(same);
    }
    free(back);
    free(keep);
    return rc;
}

/* ---- the wave ---------------------------------------------------------------------------------- */

static int run_step(tier_ctx *ctx, tier_wave *w, enum ferry_tier_state s, tier_job **js,
                    size_t n, ferry_err *err)
{
    switch (s) {
    case FERRY_TIER_PLANNED: {
        /* I3: a job starts with its staging partition empty */
        for (size_t i = 0; i < n; i++)
            js[i]->freeze_started_here = false;
        int rc = tier_clean_staging(ctx, w, js, n, err);
        return rc ? rc : tier_step_freeze(ctx, w, js, n, err);
    }
    case FERRY_TIER_FREEZE: return tier_step_freeze(ctx, w, js, n, err);
    case FERRY_TIER_UPLOAD: return tier_step_upload(ctx, w, js, n, err);
    case FERRY_TIER_POINTERS: return tier_step_pointers(ctx, w, js, n, err);
    case FERRY_TIER_ATTACH: return tier_step_attach(ctx, w, js, n, err);
    case FERRY_TIER_REPLACE: return tier_step_replace(ctx, w, js, n, err);
    case FERRY_TIER_VERIFY: return tier_step_verify(ctx, w, js, n, err);
    case FERRY_TIER_CLEANUP: return tier_step_cleanup(ctx, w, js, n, err);
    default: return ferry_err_set(err, FERRY_EINTERNAL, "bad state");
    }
}

/* Takes a moving job (tier_job.moving) out of its wave once its swap is verified: its CLEANUP
 * waits for the move's end (the move hands over the part records that exist then). CLEANUP
 * would have started the merges its swap stopped (I6 no longer needs them stopped for it), so
 * the wave's end does (settle_merges). */
static void leave_verified(tier_wave *w, tier_job *j)
{
    assert(j->moving && j->state == FERRY_TIER_CLEANUP && !tier_job_swap_unverified(j));
    j->out = true;
    w->merges_owed = w->merges_owed || j->st.merges_stopped;
    FLOG_INFO("msg=\"tier job verified while its slice moves; its CLEANUP waits for the move's "
              "end\" job=%s", j->rec.u.job.id);
}

int tier_wave_run(tier_ctx *ctx, tier_wave *w, ferry_err *err)
{
    tier_job **sel = calloc(w->n + 1, sizeof *sel);
    if (!sel)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    ctx->waves++;
    ctx->lost = false;
    for (size_t i = 0; i < w->n; i++) {
        tier_job *j = w->jobs[i];
        if (!j->objects && !(j->objects = json_object()))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        j->out = j->out || j->state == FERRY_TIER_DONE || j->state == FERRY_TIER_FAILED;
    }
    while (!rc) {
        if (ferry_stop_requested()) {
            /* a safe point: every job's journal holds the state it reached; the next run
             * resumes them (as after a crash, without one) */
            for (size_t i = 0; i < w->n; i++)
                w->jobs[i]->out = true;
            FLOG_INFO("msg=\"tier wave left between steps: the process is stopping\" server=%s "
                      "table=%s", w->srv->shard.name, w->table);
            break;
        }
        /* the lowest state among the jobs still in the wave runs next, for all jobs in it */
        enum ferry_tier_state s = FERRY_TIER_STATE_COUNT;
        for (size_t i = 0; i < w->n; i++) {
            tier_job *j = w->jobs[i];
            j->out = j->out || j->state == FERRY_TIER_DONE || j->state == FERRY_TIER_FAILED;
            if (!j->out && j->moving && j->state == FERRY_TIER_CLEANUP)
                leave_verified(w, j);
            if (!j->out && j->state < s)
                s = j->state;
        }
        if (s == FERRY_TIER_STATE_COUNT)
            break;
        size_t k = 0;
        for (size_t i = 0; i < w->n; i++)
            if (!w->jobs[i]->out && w->jobs[i]->state == s)
                sel[k++] = w->jobs[i];
        double t0 = ferry_clock_ms();
        ferry_err serr = {0};
        int src = run_step(ctx, w, s, sel, k, &serr);
        double ms = ferry_clock_ms() - t0;
        /* PLANNED's step is the staging check and then FREEZE's: counted as FREEZE */
        enum ferry_tier_state counted = s == FERRY_TIER_PLANNED ? FERRY_TIER_FREEZE : s;
        ctx->step_ms[counted] += ms;
        for (size_t i = 0; i < k; i++)
            sel[i]->step_ms[counted] += ms / (double)k;
        if (ctx->lost) {
            /* I1: another worker owns a job now; touch nothing more */
            for (size_t i = 0; i < w->n; i++)
                if (!w->jobs[i]->out) {
                    tier_job_fail(w->jobs[i], src, &serr);
                    w->jobs[i]->out = true;
                }
            *err = serr;
            rc = FERRY_ECONFLICT;
            break;
        }
        for (size_t i = 0; i < k; i++) {
            if (src)
                tier_job_fail(sel[i], src, &serr);
            else if (!sel[i]->rc && sel[i]->state == s && !sel[i]->out) {
                ferry_err e;
                ferry_err_set(&e, FERRY_EINTERNAL, "job %s: step %s left it where it was",
                              sel[i]->rec.u.job.id, ferry_tier_state_name(s));
                tier_job_fail(sel[i], FERRY_EINTERNAL, &e);
            }
        }
        rc = settle_failures(ctx, w, sel, k, err);
    }
    for (size_t i = 0; !ctx->lost && i < w->n; i++) /* the jobs as the journal now has them */
        tier_held_note(ctx, w->jobs[i]->rec.u.job.id, w->srv->shard.name, w->db, w->table,
                       tier_job_swap_unverified(w->jobs[i]));
    settle_merges(ctx, w);
    free(sel);
    return rc;
}

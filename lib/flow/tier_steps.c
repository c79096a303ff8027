/* Tiering's steps FREEZE to VERIFY for a wave of jobs (tier.c has the states and invariants):
 * each step looks at all the wave's partitions with one system.parts query, changes them with
 * one statement or agent request (or a few in parallel), and journals the jobs it moved on in
 * one catalog batch. A check that fails for one partition fails only that job. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"
#include "flow/staging_load.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ferry/clock.h"
#include "ferry/fence.h"
#include "ferry/log.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

/* ---- what the server holds ------------------------------------------------------------------- */

int tier_list(tier_wave *w, const char *table, tier_job **js, size_t n, bool active_only,
              mv_slice *out, ferry_err *err)
{
    const char **ids = calloc(n + 1, sizeof *ids);
    if (!ids)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        ids[i] = js[i]->pid;
    int rc = mv_pids_list(&w->srv->conn, w->db, table, ids, n, active_only, out, err);
    free(ids);
    return rc;
}

/* The jobs of js without a failure and still in the wave (a step may leave one for a later
 * run: swap_jobs), into ok (n slots); returns how many. */
static size_t healthy(tier_job **js, size_t n, tier_job **ok)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!js[i]->rc && !js[i]->out)
            ok[k++] = js[i];
    return k;
}

/* Journals `to` for the jobs of js that did not fail. */
static int advance_healthy(tier_ctx *ctx, tier_job **js, size_t n, enum ferry_tier_state to,
                           ferry_err *err)
{
    tier_job **ok = calloc(n + 1, sizeof *ok);
    if (!ok)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t k = healthy(js, n, ok);
    int rc = tier_journal(ctx, ok, k, to, err);
    free(ok);
    return rc;
}

static int fail_job(tier_job *job, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_job(tier_job *job, int code, const char *fmt, ...)
{
    ferry_err e = {0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    e.code = code;
    return tier_job_fail(job, code, &e);
}

/* ---- fingerprints and part digests ------------------------------------------------------------ */

/* The digest of a partition's parts by their content: rows, sum and xor of XXH64 over each
 * hash_of_all_files (ClickHouse's hash of every file checksum of the part), and the number of
 * parts in `distinct`. Equal digests of the frozen hot parts and of the pointer parts are equal
 * data: a pointer part's checksums.txt is the hot part's, uploaded unchanged, and the agent
 * checked every uploaded file against it (docs/tiering.md, "Verification"). */
void tier_parts_digest(const mv_part *const *ps, size_t n, ferry_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = XXH64(ps[i]->hash, strlen(ps[i]->hash), 0x66657272u);
        fp->rows += ps[i]->rows;
        fp->hash_sum += h;
        fp->hash_xor ^= h;
        fp->distinct++;
        fp->parts++;
        fp->bytes += ps[i]->bytes;
    }
}

/* Fingerprint of the rows of the job's partition in the wave's table, in the parts names[0..n):
 * the same quantities as ferry_fingerprint_partition. Reads every row: used only for jobs whose
 * uploads were not checked against checksums.txt (an agent of API version 1, or a journal
 * written by an older ferry). */
static int fingerprint_parts(tier_job *job, const char *const *names, size_t n,
                             ferry_fingerprint *fp, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    memset(fp, 0, sizeof *fp);
    if (n == 0)
        return FERRY_OK; /* no parts, no rows */
    ferry_buf_puts(&sql, "SELECT count(), sum(h), groupBitXor(h), uniqExact(h) FROM (SELECT "
                         "cityHash64(*) AS h FROM ");
    ferry_sql_db_table(job->db, job->table, &sql);
    ferry_buf_puts(&sql, " WHERE _partition_id = ");
    ferry_sql_quote(job->pid, &sql);
    ferry_buf_puts(&sql, " AND _part IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(&sql, ',');
        ferry_sql_quote(names[i], &sql);
    }
    ferry_buf_puts(&sql, ")) SETTINGS max_threads = 4 FORMAT TabSeparated");
    int rc = tier_sql(job->srv, ferry_buf_cstr(&sql), &res, err);
    if (!rc) {
        char *f[8];
        char *line = res.data ? res.data : (char *)"";
        ferry_chomp(line);
        if (ferry_split(line, '\t', f, 8) != 4 || !ferry_parse_u64(f[0], &fp->rows) ||
            !ferry_parse_u64(f[1], &fp->hash_sum) || !ferry_parse_u64(f[2], &fp->hash_xor) ||
            !ferry_parse_u64(f[3], &fp->distinct))
            rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected fingerprint answer");
    }
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

/* ---- FREEZE ------------------------------------------------------------------------------------ */

int tier_step_freeze(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    tier_job **fresh = calloc(n + 1, sizeof *fresh);
    ferry_agent_frozen fz = {0};
    size_t nf = 0;
    int rc = fresh ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        if (!js[i]->freeze_started_here)
            fresh[nf++] = js[i];
    if (!rc && nf) {
        /* A journaled FREEZE not finished by this process: the old attempt may be partial. */
        if ((rc = tier_agent_remove_freezes(w, fresh, nf, err)))
            goto out;
        for (size_t i = 0; i < nf; i++) {
            tier_job *j = fresh[i];
            j->st.attempt++;
            j->st.has_attempt = true;
            ferry_tier_freeze_name(j->rec.u.job.id, j->st.attempt, j->st.freeze,
                                   sizeof j->st.freeze);
            if (w->hold_merges)
                j->st.merges_stopped = true;
        }
        if ((rc = tier_journal(ctx, fresh, nf, FERRY_TIER_FREEZE, err)))
            goto out;
        for (size_t i = 0; i < nf; i++)
            fresh[i]->freeze_started_here = true;
    }
    /* The table's merges run on while the wave uploads (they are stopped only around the swap,
     * so a slow store cannot keep a busy table from merging): a merge that takes a frozen part
     * before then sends the job round again, in a wave that holds them from here (tier_run.c). */
    if (rc || (w->hold_merges && (rc = tier_table_merges(w, false, err))) ||
        (rc = tier_agent_freeze(w, js, n, &fz, err)))
        goto out;
    uint64_t frozen = ferry_clock_wall_ms(); /* after the freeze: see tier_state.frozen_at */
    for (size_t i = 0; i < n; i++) {
        tier_job *j = js[i];
        if (j->rc)
            continue;
        j->st.frozen_at = frozen;
        j->st.has_frozen_at = true;
        tier_state_hot_clear(&j->st);
        json_decref(j->sizes);
        j->sizes = json_object();
        for (size_t k = 0; k < fz.n; k++) {
            const ferry_agent_frozen_part *p = &fz.parts[k];
            if (!p->freeze || strcmp(p->freeze, j->st.freeze) || !p->kind ||
                strcmp(p->kind, "hot"))
                continue;
            if ((rc = tier_state_hot_add(&j->st, p->name, err)))
                goto out;
            json_object_set_new(j->sizes, p->name, json_integer((json_int_t)p->bytes));
        }
        if (j->st.n_hot == 0) /* no "hot" in its data: the job fails, rolled back */
            fail_job(j, FERRY_ENOTFOUND, "%s: partition %s of %s.%s is gone: FREEZE found no "
                     "hot part in it", w->srv->shard.name, j->pid, w->db, w->table);
    }
    rc = advance_healthy(ctx, js, n, FERRY_TIER_UPLOAD, err);
out:
    ferry_agent_frozen_free(&fz);
    free(fresh);
    return rc;
}

/* ---- UPLOAD ------------------------------------------------------------------------------------ */

/* Fails (merged_away: the run tiers it again, holding merges) every job of js[0..n) not failed
 * yet one of whose frozen parts is no longer active in the table: a merge (or a DETACH) took it
 * since the freeze, so its upload, pointer parts and ATTACH would be thrown away at the swap's
 * check. Merges held (w->hold_merges) nothing can be taken: nothing to look at. Errors only
 * for the listing. */
static int fail_merged_away(tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    if (w->hold_merges || !n)
        return FERRY_OK;
    mv_slice live = {0};
    int rc = tier_list(w, w->table, js, n, true, &live, err);
    for (size_t i = 0; !rc && i < n; i++) {
        const tier_state *st = &js[i]->st;
        if (js[i]->rc)
            continue;
        mv_parts lv = mv_slice_parts(&live, js[i]->pid);
        const char *gone = NULL;
        for (size_t k = 0; !gone && k < st->n_hot; k++)
            if (!mv_parts_find(&lv, st->hot[k]))
                gone = st->hot[k];
        if (!gone)
            continue;
        ferry_err e = {0};
        ferry_err_set(&e, FERRY_EINVAL, "%s: frozen part %s of %s.%s is no longer active "
                      "(merged or detached since the freeze); nothing was attached or swapped, "
                      "the partition is tiered again", w->srv->shard.name, gone, w->db, w->table);
        js[i]->merged_away = true;
        tier_job_fail(js[i], FERRY_EINVAL, &e);
    }
    mv_slice_free(&live);
    return rc;
}

/* Object keys carry the job's freeze name, so no other server's part (even one of the same
 * name) owns them; a record under this origin can only be another server's if two job ids
 * hashed alike: never overwrite its objects. */
static int check_not_taken(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    ferry_record_list l = {0};
    const char *prefix[3] = {job->table, job->pid, job->st.freeze};
    int rc = ferry_catalog_list(ctx->cat, FERRY_REC_PART, prefix, 3, &l, err);
    for (size_t i = 0; !rc && i < l.n; i++) {
        const ferry_part *p = &l.items[i].u.part;
        if (tier_state_hot_has(&job->st, p->name) &&
            !ferry_list_has(p->servers, job->srv->shard.name))
            fail_job(job, FERRY_ECONFLICT, "%s: part %s of %s under freeze %s is already "
                     "recorded for %s; uploading would overwrite its objects (run the tiering "
                     "again: a new attempt freezes under a new name)", job->srv->shard.name,
                     p->name, job->table, job->st.freeze, p->servers);
    }
    ferry_record_list_free(&l);
    return rc;
}

int tier_step_upload(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    int rc = FERRY_OK;
    bool resumed = false;
    for (size_t i = 0; i < n; i++)
        resumed = resumed || js[i]->resumed;
    /* a resumed wave's freeze may be old: the ZooKeeper soak at 51932ec resumed 21 jobs of
     * about 6,000 small parts frozen during its faults, uploaded and wrote pointers for all of
     * them (7 minutes), and only the ATTACH found them merged away (already at the resume or
     * during the upload: its log does not say) */
    if (resumed)
        rc = fail_merged_away(w, js, n, err);
    for (size_t i = 0; !rc && i < n; i++)
        rc = check_not_taken(ctx, js[i], err);
    if (rc || (rc = tier_agent_upload(ctx, w, js, n, true, err)))
        return rc;
    for (size_t i = 0; i < n; i++) {
        tier_job *j = js[i];
        bool hashed = true;
        for (size_t k = 0; k < j->st.n_hot; k++) {
            json_t *a = json_object_get(j->objects, j->st.hot[k]);
            hashed = hashed && json_is_true(json_object_get(a, "verified"));
        }
        j->st.hashed = hashed;
        j->st.has_hashed = true;
    }
    return advance_healthy(ctx, js, n, FERRY_TIER_POINTERS, err);
}

/* ---- POINTERS ---------------------------------------------------------------------------------- */

/* CREATE TABLE IF NOT EXISTS db.name AS db.table, unless the policy cache knows it exists. */
static int create_as(tier_wave *w, const char *name, ferry_err *err)
{
    char policy[FERRY_NAME_MAX];
    bool exists = false, remote = false;
    int rc = tier_table_policy(w->srv, w->db, name, &exists, policy, sizeof policy, &remote, err);
    if (rc || exists)
        return rc;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    ferry_sql_db_table(w->db, name, &sql);
    ferry_buf_puts(&sql, " AS ");
    ferry_sql_db_table(w->db, w->table, &sql);
    rc = tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, err);
    tier_forget_policy(w->srv, w->db, name); /* it exists now */
    ferry_buf_free(&sql);
    return rc;
}

/* The staging table and the empty twin: created AS the table when missing, then staging checked
 * (once per wave; the twin is checked where it is used: tier_cleanup.c). */
static int ensure_staging(tier_wave *w, ferry_err *err)
{
    if (w->staging_ready)
        return FERRY_OK;
    /* read-only mode: a staging table detached by a load (another flow's, or one a crash cut)
     * is waited for or attached again before CREATE could make a second one */
    int rc = stg_recover(&w->srv->conn, w->db, w->staging, err);
    if (!rc)
        rc = create_as(w, w->staging, err);
    if (!rc && w->empty[0])
        rc = create_as(w, w->empty, err);
    if (!rc)
        rc = tier_check_staging(w->srv, w->db, w->table, true, err);
    w->staging_ready = rc == FERRY_OK;
    return rc;
}

int tier_step_pointers(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    int rc;
    if ((rc = tier_server_check(ctx, w->srv, err)) || (rc = ensure_staging(w, err)) ||
        (rc = tier_staging_merges_stop(w, err)) || /* its parts stay as attached until the swap */
        /* the objects of parts uploaded by another process (a resumed job): the agent finds
         * them uploaded and uploads nothing */
        (rc = tier_agent_upload(ctx, w, js, n, false, err)) ||
        (rc = tier_agent_pointers(ctx, w, js, n, err)))
        return rc;
    return advance_healthy(ctx, js, n, FERRY_TIER_ATTACH, err);
}

/* ---- ATTACH ------------------------------------------------------------------------------------ */

/* [cluster] clickhouse_object_access = read-only: the wave's pointer parts loaded through a
 * re-attached load table (staging_load.h), for all partitions at once; a failure fails every
 * job of js (the route works on a whole table). */
static void attach_staging_readonly(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n)
{
    ferry_err e = {0};
    const char **pids = calloc(n + 1, sizeof *pids);
    int rc = pids ? FERRY_OK : ferry_err_set(&e, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; pids && i < n; i++)
        pids[i] = js[i]->pid;
    double t0 = ferry_clock_ms();
    if (!rc)
        rc = stg_load(&w->srv->conn, w->db, w->staging, pids, n, &e);
    ctx->load_ms += ferry_clock_ms() - t0;
    free(pids);
    for (size_t i = 0; rc && i < n; i++)
        tier_job_fail(js[i], rc, &e);
}

/* The parts of the jobs' partitions waiting in staging's detached/ that ATTACH PART takes (no
 * prefix such as broken- or ignored_): (partition_id, name) rows, sorted. */
static int staging_detached(tier_wave *w, tier_job **js, size_t n, ferry_ch_rows *out,
                            ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "SELECT partition_id, name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->staging, &sql);
    ferry_buf_puts(&sql, " AND ifNull(reason, '') = '' AND partition_id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_puts(&sql, ", ");
        ferry_sql_quote(js[i]->pid, &sql);
    }
    ferry_buf_puts(&sql, ") ORDER BY partition_id, name");
    int rc = mv_sql(&w->srv->conn, ferry_buf_cstr(&sql), out, err);
    ferry_buf_free(&sql);
    return rc;
}

/* How many rows of det (staging_detached) belong to partition pid. */
static size_t detached_of(const ferry_ch_rows *det, const char *pid)
{
    size_t k = 0;
    for (size_t r = 0; r < det->n_rows; r++)
        k += !strcmp(ferry_ch_rows_get(det, r, 0), pid);
    return k;
}

static int wait_swaps_finished(tier_wave *w, ferry_err *err);

/* ALTER TABLE staging ATTACH PART for the detached pointer parts of the jobs js[0..n), at most
 * TIER_STATEMENT_PARTS parts a statement (several partitions in one, a big partition over
 * several). A statement that fails with the server's error: each job it touched is attached on
 * its own (alone, so a bad partition fails only its job; a job whose ATTACH fails is failed).
 * Without an answer (a timeout, a lost connection: the statement may still run on the server)
 * that job and every one after it fail in this run, nothing more is sent; the next run resumes
 * the ATTACH once no statement on staging runs any more (wait_swaps_finished) and attaches what is
 * still detached. alone: js is one job retried after such an error (no further fallback). */
static void attach_staging(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, bool alone)
{
    ferry_ch_rows det = {0};
    ferry_err e = {0};
    int rc = staging_detached(w, js, n, &det, &e);
    /* the parts in job order: job[k] is the index in js of the part in row[k] of det */
    size_t m = 0, *job = NULL, *row = NULL;
    if (!rc && (!(job = calloc(det.n_rows + 1, sizeof *job)) ||
                !(row = calloc(det.n_rows + 1, sizeof *row))))
        rc = ferry_err_set(&e, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        for (size_t r = 0; r < det.n_rows; r++)
            if (!strcmp(ferry_ch_rows_get(&det, r, 0), js[i]->pid))
                job[m] = i, row[m++] = r;
    for (size_t a = 0; !rc && a < m;) {
        size_t b = a + TIER_STATEMENT_PARTS < m ? a + TIER_STATEMENT_PARTS : m;
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(w->db, w->staging, &sql);
        for (size_t k = a; k < b; k++) {
            ferry_buf_puts(&sql, k > a ? ", ATTACH PART " : " ATTACH PART ");
            ferry_sql_quote(ferry_ch_rows_get(&det, row[k], 1), &sql);
        }
        FLOG_INFO("msg=\"tier attach statement\" server=%s table=%s.%s parts=%zu partitions=%zu",
                  w->srv->shard.name, w->db, w->staging, b - a, job[b - 1] - job[a] + 1);
        double t0 = ferry_clock_ms();
        int src = tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, &e);
        ctx->load_ms += ferry_clock_ms() - t0;
        ferry_buf_free(&sql);
        if (!src) {
            ferry_fault_point("FERRY_TEST_CRASH_AFTER", "ATTACH:statement");
            a = b;
            continue;
        }
        size_t first = job[a], last = job[b - 1];
        if (src == FERRY_EREMOTE && !alone) {
            FLOG_WARN("msg=\"an ATTACH statement of the wave failed; its partitions one at a "
                      "time\" server=%s table=%s err=\"%s\"", w->srv->shard.name, w->staging,
                      e.msg);
            for (size_t k = first; k <= last; k++)
                attach_staging(ctx, w, &js[k], 1, true);
            while (a < m && job[a] <= last)
                a++;
            continue;
        }
        /* the server's error for a job alone, or no answer: this job (and, without an answer,
         * every later one: nothing more goes to that server in this run) fails in this run */
        for (size_t k = first; k < (src == FERRY_EREMOTE ? last + 1 : n); k++)
            tier_job_fail(js[k], src, &e);
        break;
    }
    if (rc)
        for (size_t i = 0; i < n; i++)
            tier_job_fail(js[i], rc, &e);
    free(job);
    free(row);
    ferry_ch_rows_free(&det);
}

/* The parts of list (a partition's parts) that are active and, when hot_of is set, in its hot
 * list, into out (n slots); returns how many. */
static size_t pick(const mv_parts *list, const tier_state *hot_of, const mv_part **out)
{
    size_t k = 0;
    for (size_t i = 0; i < list->n; i++)
        if (list->p[i].active && (!hot_of || tier_state_hot_has(hot_of, list->p[i].name)))
            out[k++] = &list->p[i];
    return k;
}

/* The checks of ATTACH for one job: staging holds as many parts as were frozen, all on the
 * object disk; every frozen part is still active; staging holds the frozen data (*fp). */
static int check_staged(tier_ctx *ctx, tier_wave *w, tier_job *job, const mv_slice *stg,
                        const mv_slice *live, ferry_fingerprint *fp, bool *by_parts,
                        ferry_err *err)
{
    const tier_state *st = &job->st;
    mv_parts sg = mv_slice_parts(stg, job->pid), lv = mv_slice_parts(live, job->pid);
    const mv_part **a = calloc(sg.n + 1, sizeof *a), **b = calloc(lv.n + 1, sizeof *b);
    int rc = a && b ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t na = rc ? 0 : pick(&sg, NULL, a), nb = rc ? 0 : pick(&lv, st, b);
    if (!rc && na != st->n_hot)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: staging %s.%s holds %zu parts of partition %s "
                           "after ATTACH, expected %zu (the pointer parts written); nothing was "
                           "swapped", w->srv->shard.name, w->db, w->staging, na, job->pid,
                           st->n_hot);
    for (size_t i = 0; !rc && i < na; i++)
        if (!a[i]->cold)
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: staging part %s is not on the object-"
                               "storage disk", w->srv->shard.name, a[i]->name);
    /* Every frozen hot part must still be active: a merge may have taken one (the job goes
     * round again, tier_run.c). */
    if (!rc && nb != st->n_hot) {
        for (size_t i = 0; i < st->n_hot; i++) {
            if (mv_parts_find(&lv, st->hot[i]))
                continue;
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: frozen part %s of %s.%s is no longer "
                               "active (merged or detached since the freeze); nothing was "
                               "swapped, the partition is tiered again", w->srv->shard.name,
                               st->hot[i], w->db, w->table);
            job->merged_away = true;
            break;
        }
    }
    ferry_fingerprint src = {0}, got = {0}; /* *fp is set on failure too */
    char why[256];
    *by_parts = st->hashed;
    if (!rc && *by_parts) {
        tier_parts_digest(b, nb, &src);
        tier_parts_digest(a, na, &got);
    } else if (!rc) {
        double f0 = ferry_clock_ms();
        rc = fingerprint_parts(job, (const char *const *)st->hot, st->n_hot, &src, err);
        if (!rc)
            rc = ferry_fingerprint_partition(w->srv->conn.ch, w->db, w->staging, job->pid, &got,
                                             err);
        ctx->fingerprint_ms += ferry_clock_ms() - f0;
    }
    if (!rc && !ferry_fingerprint_same(&src, &got, why, sizeof why))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: the pointer parts in staging do not hold the "
                           "frozen %s (%s); nothing was swapped", w->srv->shard.name,
                           *by_parts ? "parts" : "rows", why);
    *fp = src;
    free(a);
    free(b);
    return rc;
}

int tier_step_attach(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    mv_slice stg = {0}, live = {0};
    tier_job **need = calloc(n + 1, sizeof *need);
    size_t nn = 0;
    /* again: a resumed job's server may have restarted */
    int rc = need ? tier_staging_merges_stop(w, err)
                  : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && w->hold_merges)
        rc = tier_table_merges(w, false, err);
    bool resumed = false;
    for (size_t i = 0; i < n; i++)
        resumed = resumed || js[i]->resumed;
    if (!rc && resumed) /* an ATTACH statement of the killed run may still be attaching */
        rc = wait_swaps_finished(w, err);
    ferry_ch_rows det = {0};
    if (!rc && w->srv->conn.ro_objects) /* parts may wait in the load table (staging_load.h) */
        rc = tier_list(w, w->staging, js, n, true, &stg, err);
    else if (!rc)
        rc = staging_detached(w, js, n, &det, err);
    for (size_t i = 0; !rc && i < n; i++)
        if (w->srv->conn.ro_objects ? mv_slice_parts(&stg, js[i]->pid).n == 0
                                    : detached_of(&det, js[i]->pid) > 0)
            need[nn++] = js[i]; /* a resumed ATTACH attaches what is still detached */
    ferry_ch_rows_free(&det);
    mv_slice_free(&stg);
    /* a job whose frozen parts a merge took meanwhile (a long upload, merges running) goes
     * round again without its ATTACH: attaching pointer parts reads each part's small files
     * through the object store, and check_staged would refuse the swap after it anyway */
    if (!rc)
        rc = fail_merged_away(w, need, nn, err);
    for (size_t i = 0; !rc && i < nn;)
        if (need[i]->merged_away && need[i]->rc)
            need[i] = need[--nn];
        else
            i++;
    if (!rc && nn) {
        if (w->srv->conn.ro_objects)
            attach_staging_readonly(ctx, w, need, nn);
        else
            attach_staging(ctx, w, need, nn, false);
    }
    if (!rc)
        rc = tier_list(w, w->staging, js, n, true, &stg, err);
    if (rc || (rc = tier_list(w, w->table, js, n, true, &live, err)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        tier_job *j = js[i];
        ferry_fingerprint fp;
        ferry_err e = {0};
        bool by_parts = false;
        if (j->rc)
            continue;
        int jrc = check_staged(ctx, w, j, &stg, &live, &fp, &by_parts, &e);
        if (jrc == FERRY_EREMOTE || jrc == FERRY_ECONNECT || jrc == FERRY_ETIMEOUT) {
            *err = e; /* the server went away: the whole step fails */
            rc = jrc;
            goto out;
        }
        if (jrc)
            tier_job_fail(j, jrc, &e);
        else
            tier_state_set_fp(&j->st, &fp, by_parts);
    }
    rc = advance_healthy(ctx, js, n, FERRY_TIER_REPLACE, err);
out:
    mv_slice_free(&stg);
    mv_slice_free(&live);
    free(need);
    return rc;
}

/* ---- REPLACE ----------------------------------------------------------------------------------- */

/* What one job's swap needs now, from the partition's active parts. */
enum swap_need {
    SWAP_DONE,
    SWAP_DETACH_REST,
    SWAP_ATTACH_REST,
    SWAP_CHOOSE,
    SWAP_FAILED,
    /* a swap_finish_only job's (tier_job.swap_finish_only): */
    SWAP_TAKE_BACK, /* the journaled swap did not run: taken back, the job waits, unswapped */
    SWAP_WAIT,      /* anything else: the job waits for the move's end, as it is */
};

/* The attach-mode swap is one ALTER on the table: DETACH PART of every frozen part FIRST, then
 * ATTACH PARTITION ... FROM staging. Its commands commit one by one, so the order is what makes
 * it safe to repeat: run a second time (a statement of a killed or timed-out run that reaches the
 * server late, a per-partition retry), its first DETACH PART finds the frozen part gone and the
 * statement stops before its ATTACH; attached first (as before), the second run attached the
 * staged parts again and doubled the partition (the chaos soak, docs/reliability.md). Readers see
 * the frozen rows missing for the microseconds between the commands instead of twice. When the
 * DETACH half ran and the ATTACH did not (a crash or an error between the commands), the missing
 * half is `ALTER TABLE staging MOVE PARTITION ... TO TABLE t`, which takes the parts out of staging
 * as it adds them: run twice, the second finds staging's partition empty and adds nothing. */
static void put_detach(ferry_buf *cmds, size_t *ncmds, const char *part)
{
    ferry_buf_puts(cmds, (*ncmds)++ ? ", DETACH PART " : " DETACH PART ");
    ferry_sql_quote(part, cmds);
}

/* Whether rows (partition_id, name of system.detached_parts) hold part name of pid. */
static bool is_detached(const ferry_ch_rows *rows, const char *pid, const char *name)
{
    for (size_t r = 0; r < rows->n_rows; r++)
        if (!strcmp(ferry_ch_rows_get(rows, r, 0), pid) &&
            !strcmp(ferry_ch_rows_get(rows, r, 1), name))
            return true;
    return false;
}

/* How many frozen parts of st are in neither ps's active parts nor detached/ (rows: as in
 * is_detached) while no active part of ps covers their block range. Such a part left the table
 * without a copy in detached/ and without a merge holding its rows: a DETACH PART that failed
 * half-way (the chaos soak: NOT_ENOUGH_SPACE on a full hot disk), or a DROP PART by hand. Its
 * rows are then in staging's cold copy alone. A merge's part covers the range of the parts it
 * took (parts without rows, such as the empty part a drop leaves, are not listed); a part whose
 * range some active part covers is not counted, whatever the reason. */
static size_t frozen_lost(const tier_state *st, const mv_parts *ps, const ferry_ch_rows *detached,
                          const char *pid)
{
    size_t plen = strlen(pid), lost = 0;
    for (size_t i = 0; i < st->n_hot; i++) {
        const char *name = st->hot[i];
        const mv_part *p = mv_parts_find(ps, name);
        if ((p && p->active) || is_detached(detached, pid, name))
            continue;
        long long lo, hi;
        if (strncmp(name, pid, plen) || name[plen] != '_' ||
            sscanf(name + plen + 1, "%lld_%lld_", &lo, &hi) != 2)
            continue; /* not a part name of pid: nothing to say about it */
        bool covered = false;
        for (size_t k = 0; k < ps->n && !covered; k++)
            covered = ps->p[k].active && ps->p[k].min_block <= lo && ps->p[k].max_block >= hi;
        lost += !covered;
    }
    return lost;
}

/* Whether the server still lists a frozen part of st that ps does not hold active (an outdated
 * part: its folder is still on disk, and a restart without the covering part a cut-short DETACH
 * PART never wrote would load it again). *err: the listing failed. */
static bool frozen_outdated_listed(tier_wave *w, const tier_state *st, const mv_parts *ps,
                                   ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, out = FERRY_BUF_INIT;
    size_t n = 0;
    ferry_buf_puts(&sql, "SELECT count() FROM system.parts WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->table, &sql);
    ferry_buf_puts(&sql, " AND name IN (");
    for (size_t i = 0; i < st->n_hot; i++) {
        const mv_part *p = mv_parts_find(ps, st->hot[i]);
        if (p && p->active)
            continue;
        ferry_buf_puts(&sql, n++ ? ", " : "");
        ferry_sql_quote(st->hot[i], &sql);
    }
    ferry_buf_puts(&sql, ") FORMAT TSV");
    bool listed = n && (tier_sql(w->srv, ferry_buf_cstr(&sql), &out, err) ||
                        strtoull(ferry_buf_cstr(&out), NULL, 10) > 0);
    ferry_buf_free(&sql);
    ferry_buf_free(&out);
    return listed;
}

/* DETACH PART of each frozen part of st still active in ps. */
static void detach_active(const tier_state *st, const mv_parts *ps, ferry_buf *cmds,
                          size_t *ncmds)
{
    for (size_t i = 0; i < st->n_hot; i++) {
        const mv_part *p = mv_parts_find(ps, st->hot[i]);
        if (p && p->active)
            put_detach(cmds, ncmds, st->hot[i]);
    }
}

static enum swap_need swap_look(tier_wave *w, tier_job *job, const mv_slice *live,
                                const mv_slice *stg, const ferry_ch_rows *detached, ferry_buf *cmds,
                                size_t *ncmds, ferry_buf *moves, size_t *nmoves)
{
    tier_state *st = &job->st;
    mv_parts ps = mv_slice_parts(live, job->pid);
    size_t hot_active = 0, added = 0, others = 0;
    int64_t max_block = 0;
    for (size_t i = 0; i < ps.n; i++) {
        if (!ps.p[i].active)
            continue;
        if (tier_state_hot_has(st, ps.p[i].name))
            hot_active++;
        else if (st->has_max_block && ps.p[i].cold && ps.p[i].min_block > st->max_block)
            added++;
        else
            others++;
        if (ps.p[i].max_block > max_block)
            max_block = ps.p[i].max_block;
    }
    const char *swap = st->swap;
    if (job->swap_finish_only && !(*swap && added > 0)) {
        /* Its slice moves to this server, or has switched away: choosing the swap again,
         * finishing its ATTACH half from staging or rolling it back (which empties staging's
         * partition) could take or drop the parts a move put there. Every frozen part active
         * and none added: the journaled swap did not run (no ALTER of it runs:
         * wait_swaps_finished), so the choice is taken back and the job is swapped after the
         * move, like a job that never chose. */
        assert(job->moving);
        return *swap && hot_active == st->n_hot ? SWAP_TAKE_BACK : SWAP_WAIT;
    }
    if (*swap && added > 0 && hot_active == 0) /* the swap ran before a crash */
        return SWAP_DONE;
    if (*swap && added > 0) {
        /* attach: ATTACH FROM ran, the DETACH PART half did not (or not all of it): a statement
         * of a version that attached first. replace: REPLACE committed in memory, then failed to
         * write the empty part that covers the replaced ones (ClickHouse 26.7 reserves 1 MiB for
         * it on the policy: NOT_ENOUGH_SPACE with the hot disk full), and a restart loaded the
         * replaced frozen parts again (tests/integration/hot_full_cold_guard.sh). Either way the
         * frozen parts still active are detached now; VERIFY checks what was added. */
        if (strcmp(swap, "attach"))
            FLOG_WARN("msg=\"frozen parts active again after REPLACE (a restart before the "
                      "replaced parts were removed); detaching them\" server=%s table=%s.%s "
                      "partition=%s", w->srv->shard.name, w->db, w->table, job->pid);
        detach_active(st, &ps, cmds, ncmds);
        return SWAP_DETACH_REST;
    }
    if (*swap && !strcmp(swap, "attach") && hot_active != st->n_hot) {
        /* Nothing added, frozen parts gone: detached by the swap's first half, or merged away
         * (someone started merges). detached/ tells which. */
        size_t in_detached = 0;
        for (size_t i = 0; i < st->n_hot; i++) {
            const mv_part *p = mv_parts_find(&ps, st->hot[i]);
            if (!(p && p->active) && is_detached(detached, job->pid, st->hot[i]))
                in_detached++;
        }
        /* A part gone from the table without a merge (frozen_lost) is not in detached/ either,
         * and its rows are in staging alone: the ATTACH half finishes the swap without losing
         * them. When every frozen part not active is detached or so lost, nothing of the
         * partition's frozen rows is in the table twice after it. A part a merge took (its
         * range covered) would be: left to a person (below). */
        size_t lost = frozen_lost(st, &ps, detached, job->pid);
        ferry_err lerr = {0};
        if (lost && in_detached + lost == st->n_hot - hot_active &&
            frozen_outdated_listed(w, st, &ps, &lerr)) {
            /* not yet: while the server lists such a part (outdated) its folder is on disk, and
             * a restart would load it again beside staging's copy; ClickHouse removes it after
             * old_parts_lifetime, and a later run finishes the swap. Not rolled back: that
             * would drop staging's copy, the only one of its rows. */
            fail_job(job, lerr.code ? lerr.code : FERRY_ETIMEOUT,
                     "%s: frozen parts of %s.%s partition %s left the table without a copy in "
                     "detached/ (a DETACH PART cut short) and the server still lists them as "
                     "outdated%s%s; the swap is finished from staging once they are removed "
                     "(old_parts_lifetime): run ferry tier again then",
                     w->srv->shard.name, w->db, w->table, job->pid, lerr.code ? ": " : "",
                     lerr.code ? lerr.msg : "");
            return SWAP_FAILED;
        }
        if (in_detached + lost == st->n_hot - hot_active) {
            if (lost)
                FLOG_WARN("msg=\"frozen parts left the table without a copy in detached/ or a "
                          "merge holding them (a DETACH PART cut short); the swap's ATTACH half "
                          "brings their rows back from staging\" server=%s table=%s.%s "
                          "partition=%s detached=%zu active=%zu frozen=%zu",
                          w->srv->shard.name, w->db, w->table, job->pid, in_detached, hot_active,
                          st->n_hot);
            detach_active(st, &ps, cmds, ncmds);
            ferry_buf_puts(moves, (*nmoves)++ ? ", MOVE PARTITION ID " : " MOVE PARTITION ID ");
            ferry_sql_quote(job->pid, moves);
            ferry_buf_puts(moves, " TO TABLE ");
            ferry_sql_db_table(w->db, w->table, moves);
            return SWAP_ATTACH_REST;
        }
        if (in_detached > 0) {
            fail_job(job, FERRY_EINTERNAL, "%s: of the frozen parts of %s.%s partition %s, %zu "
                     "are detached, %zu active and the others neither (merged?), and no cold part "
                     "was added: look at detached/ and ATTACH PART the frozen parts back",
                     w->srv->shard.name, w->db, w->table, job->pid, in_detached, hot_active);
            return SWAP_FAILED;
        }
    }
    if (*swap && hot_active != st->n_hot) {
        /* nothing was swapped, but the frozen parts changed: safe to roll back and redo */
        st->swapped = false;
        st->has_swapped = true;
        job->merged_away = true;
        fail_job(job, FERRY_EINVAL, "%s: frozen parts of %s.%s partition %s changed before the "
                 "swap ran; nothing was swapped, the next run tiers the partition again",
                 w->srv->shard.name, w->db, w->table, job->pid);
        return SWAP_FAILED;
    }
    if (hot_active != st->n_hot) {
        job->merged_away = true; /* merged away before the merges were stopped */
        fail_job(job, FERRY_EINVAL, "%s: only %zu of the %zu frozen parts of %s.%s partition %s "
                 "are active before the swap (merged away); nothing was swapped, the "
                 "partition is tiered again", w->srv->shard.name, hot_active, st->n_hot, w->db,
                 w->table, job->pid);
        return SWAP_FAILED;
    }
    /* Nothing swapped yet. Staging must still hold what ATTACH checked (its merges are stopped,
     * but a server restart starts them again): with part hashes, the same digest. */
    if (st->fp_by_parts) {
        mv_parts sg = mv_slice_parts(stg, job->pid);
        const mv_part **a = calloc(sg.n + 1, sizeof *a);
        ferry_fingerprint got;
        char why[256];
        if (!a) {
            fail_job(job, FERRY_ENOMEM, "out of memory");
            return SWAP_FAILED;
        }
        tier_parts_digest(a, pick(&sg, NULL, a), &got);
        free(a);
        if (!ferry_fingerprint_same(&st->fp, &got, why, sizeof why)) {
            st->swapped = false;
            st->has_swapped = true;
            fail_job(job, FERRY_EINVAL, "%s: staging's parts of %s.%s partition %s changed "
                     "since ATTACH checked them (%s: merged?); nothing was swapped, the next run "
                     "tiers the partition again", w->srv->shard.name, w->db, w->table, job->pid,
                     why);
            return SWAP_FAILED;
        }
    }
    /* Choose (journaled by the caller before the statement runs). REPLACE PARTITION swaps
     * atomically for readers, but it drops every part of the partition, also one inserted
     * between the look above and the statement: the ZooKeeper soak of session 13 lost 1,383
     * acknowledged rows that way (VERIFY saw the dropped part; ClickHouse removed its files
     * before anyone attached them back). So it is used only for a caller that keeps writes away
     * (atomic_swap: a rewrite); tiering's own swaps take the attach form, which never removes a
     * part it does not name (a reader between its commands misses the frozen rows for that
     * instant). */
    const char *mode = others == 0 && !w->no_replace && w->atomic_swap ? "replace" : "attach";
    if (hot_active == 0 && strcmp(mode, "replace")) {
        /* the attach form is safe to repeat only through its first DETACH PART */
        fail_job(job, FERRY_EINVAL, "%s: %s.%s partition %s has no frozen hot part to swap",
                 w->srv->shard.name, w->db, w->table, job->pid);
        return SWAP_FAILED;
    }
    snprintf(st->swap, sizeof st->swap, "%s", mode);
    st->max_block = max_block;
    st->has_max_block = true;
    st->swapped = st->has_swapped = true;
    if (strcmp(mode, "replace"))
        for (size_t i = 0; i < st->n_hot; i++)
            put_detach(cmds, ncmds, st->hot[i]);
    ferry_buf_puts(cmds, (*ncmds)++ ? ", " : " ");
    ferry_buf_puts(cmds, !strcmp(mode, "replace") ? "REPLACE PARTITION ID "
                                                   : "ATTACH PARTITION ID ");
    ferry_sql_quote(job->pid, cmds);
    ferry_buf_puts(cmds, " FROM ");
    ferry_sql_db_table(w->db, w->staging, cmds);
    return SWAP_CHOOSE;
}

/* A swap statement of an earlier run may still be running on the server (its process killed,
 * or its request timed out while the server was paused): looking at the parts before it
 * finished would choose a swap it is about to make. Waits (bounded) until no ALTER naming the
 * staging table runs there. */
static int wait_swaps_finished(tier_wave *w, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "SELECT count() FROM system.processes WHERE query_kind = 'Alter' AND "
                         "position(query, ");
    ferry_sql_quote(w->staging, &sql);
    ferry_buf_puts(&sql, ") > 0 FORMAT TabSeparated");
    char msg[3 * FERRY_NAME_MAX];
    snprintf(msg, sizeof msg, "an earlier swap statement on %s.%s is still running after 60 s; "
             "the next run resumes the swap", w->db, w->table);
    int rc = tier_wait_none(w, ferry_buf_cstr(&sql), msg, err);
    ferry_buf_free(&sql);
    return rc;
}

/* The detached parts of the jobs' partitions of the wave's table: (partition_id, name) rows. */
static int list_detached(tier_wave *w, tier_job **js, size_t n, ferry_ch_rows *out,
                         ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "SELECT partition_id, name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->table, &sql);
    ferry_buf_puts(&sql, " AND partition_id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_puts(&sql, ", ");
        ferry_sql_quote(js[i]->pid, &sql);
    }
    ferry_buf_puts(&sql, ")");
    int rc = mv_sql(&w->srv->conn, ferry_buf_cstr(&sql), out, err);
    ferry_buf_free(&sql);
    return rc;
}

/* Runs ALTER TABLE table <cmds> for the wave; the time counts as load time. */
static int run_alter(tier_ctx *ctx, tier_wave *w, const char *table, const ferry_buf *cmds,
                     ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_db_table(w->db, table, &sql);
    ferry_buf_puts(&sql, ferry_buf_cstr(cmds));
    /* the statement itself: what ran is what a person needs after a failed swap */
    FLOG_INFO("msg=\"tier swap statement\" server=%s sql=\"%s\"", w->srv->shard.name,
              ferry_buf_cstr(&sql));
    double t0 = ferry_clock_ms();
    int rc = tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, err);
    ctx->load_ms += ferry_clock_ms() - t0;
    ferry_buf_free(&sql);
    return rc;
}

/* One job's share of the swap statements: its commands on the table (DETACH PARTs, then
 * REPLACE or ATTACH PARTITION FROM staging) and on staging (MOVE PARTITION, the second half of an
 * attach swap cut short), and how many parts they name or bring in (the packing's weight). */
typedef struct swap_item {
    tier_job *job;
    ferry_buf cmds, moves;
    size_t ncmds, nmoves;
    size_t weight;
    bool alone_done; /* run on its own after a statement with it failed */
} swap_item;

static int swap_jobs(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err);

/* Runs the items' commands (on the table, or with on_staging their MOVEs on staging), whole jobs
 * packed into statements of at most TIER_STATEMENT_PARTS parts (a job with more goes alone).
 * The server's error for a statement of several jobs: each of them is looked at again and run on
 * its own (the commands of an ALTER commit one by one). No answer: that statement's jobs and every
 * later one fail in this run, keeping their journaled choice (the next run waits for the
 * statement and resumes). *stop: nothing more may be sent. */
static void run_swap_items(tier_ctx *ctx, tier_wave *w, swap_item *it, size_t n, bool on_staging,
                           bool *stop, ferry_err *why)
{
    for (size_t a = 0; a < n && !*stop;) {
        ferry_buf stmt = FERRY_BUF_INIT;
        size_t weight = 0, b = a, jobs = 0;
        for (; b < n; b++) {
            const ferry_buf *c = on_staging ? &it[b].moves : &it[b].cmds;
            if (it[b].job->rc || it[b].alone_done || !c->len)
                continue;
            if (jobs && weight + it[b].weight > TIER_STATEMENT_PARTS)
                break;
            ferry_buf_puts(&stmt, jobs++ ? "," : "");
            ferry_buf_puts(&stmt, ferry_buf_cstr(c));
            weight += it[b].weight;
        }
        if (!jobs) {
            ferry_buf_free(&stmt);
            break;
        }
        ferry_err e = {0};
        int rc = run_alter(ctx, w, on_staging ? w->staging : w->table, &stmt, &e);
        ferry_buf_free(&stmt);
        if (!rc && !on_staging)
            ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWAP:ran"); /* ran, not journaled */
        for (size_t k = a; rc && k < b; k++) {
            const ferry_buf *c = on_staging ? &it[k].moves : &it[k].cmds;
            if (it[k].job->rc || it[k].alone_done || !c->len)
                continue;
            if (rc == FERRY_EREMOTE && jobs > 1) {
                ferry_err je = {0};
                it[k].alone_done = true;
                if (swap_jobs(ctx, w, &it[k].job, 1, &je))
                    tier_job_fail(it[k].job, je.code ? je.code : FERRY_EINTERNAL, &je);
            } else {
                tier_job_fail(it[k].job, rc, &e);
            }
        }
        if (rc == FERRY_EREMOTE && jobs > 1)
            FLOG_WARN("msg=\"a swap statement of the wave failed; its partitions were run one at "
                      "a time\" server=%s table=%s jobs=%zu err=\"%s\"", w->srv->shard.name,
                      w->table, jobs, e.msg);
        if (rc && rc != FERRY_EREMOTE) {
            /* No answer (a timeout, a connection lost after the request went out): the statement
             * may still run on the server (a paused server runs it when it wakes up). Each job
             * keeps its journaled choice; the next run waits for the statement to finish
             * (wait_swaps_finished), then looks. */
            for (size_t k = b; k < n; k++)
                if (!it[k].job->rc && !it[k].alone_done)
                    tier_job_fail(it[k].job, rc, &e);
            *why = e;
            *stop = true;
        }
        a = b;
    }
}

/* Whether a router expects a client's retry of a failed write to job's slice (ferry/fence.h):
 * then the swap waits for a later run (*why says so, code FERRY_ETIMEOUT), since DETACH PART
 * drops the block ids of the frozen parts from ClickHouse's deduplication log of a plain
 * MergeTree, and the attached cold copies carry none: the retry of a write whose first attempt
 * reached this server would be stored a second time (the SQLite soak at 0c4fb19,
 * docs/reliability.md; tests/integration/tier_retry_window.sh). The same holds for a write still
 * open since before the freeze: its rows may be in the frozen parts, and it may still fail. */
static void retry_pending(tier_ctx *ctx, const tier_job *job, ferry_err *why)
{
    char what[400];
    if (!job->st.tenant[0] ||
        !ferry_router_retry_pending(&ctx->cfg, job->st.tenant, job->st.split,
                                    tier_job_open_since(job), what, sizeof what))
        return;
    ferry_err_set(why, FERRY_ETIMEOUT, "%s: swap of %s.%s partition %s held back: %s (its "
                  "deduplication would not survive the swap); the next run swaps it",
                  job->srv->shard.name, job->db, job->table, job->pid, what);
    FLOG_INFO("msg=\"tier swap held back: a client's retry is expected\" job=%s why=\"%s\"",
              job->rec.u.job.id, what);
}

/* Looks at each job's partition, journals the swaps it chooses (one batch), then runs the swaps
 * in ALTERs of at most TIER_STATEMENT_PARTS parts each, whole partitions each (and the second
 * halves of attach swaps cut short in more, on staging). When a statement fails for several
 * jobs, each job is looked at again and run on its own (the commands of an ALTER commit one by
 * one, so some may have run). */
static int swap_jobs(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    mv_slice live = {0}, stg = {0};
    ferry_ch_rows det = {0};
    size_t nchosen = 0, nit = 0;
    bool resumed = false, stop = false;
    tier_job **chosen = calloc(n + 1, sizeof *chosen);
    swap_item *it = calloc(n + 1, sizeof *it);
    int rc = chosen && it ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        resumed = resumed || (!js[i]->rc && js[i]->st.swap[0]);
    if (!rc && resumed)
        rc = wait_swaps_finished(w, err);
    /* No room (bytes or inodes) holds back only the swaps not begun: each such job keeps its
     * journal and is resumed when there is room. A swap already begun goes on: it needs no room
     * to be verified, and its remaining statements (DETACH PART, MOVE PARTITION from staging)
     * change nothing when they fail for room. Held back too, it would keep the table's merges
     * stopped until the disk had room again, which the parts piling up meanwhile never give
     * back (the ZooKeeper soak of session 16: node4 out of inodes, its merges stopped for good). */
    ferry_err room = {0};
    int room_rc = rc ? FERRY_OK : tier_check_room(ctx, w, &room);
    if (room_rc && room_rc != FERRY_EIO) {
        *err = room;
        rc = room_rc;
    }
    for (size_t i = 0; !rc && room_rc && i < n; i++)
        if (!js[i]->rc && !js[i]->st.swap[0])
            tier_job_fail(js[i], room_rc, &room);
    if (!rc)
        rc = tier_list(w, w->table, js, n, true, &live, err);
    if (!rc)
        rc = tier_list(w, w->staging, js, n, true, &stg, err);
    if (!rc && resumed)
        rc = list_detached(w, js, n, &det, err);
    /* one look at each router first: the slices' own questions only when one expects a retry
     * at all */
    char any_why[400];
    uint64_t since = 0; /* the latest freeze among the jobs: the shortest time open that counts */
    for (size_t i = 0; i < n; i++)
        if (!js[i]->rc && (!since || tier_job_open_since(js[i]) < since))
            since = tier_job_open_since(js[i]);
    bool any_retry = !rc && !room_rc &&
                     ferry_router_retry_pending(&ctx->cfg, NULL, 0, since, any_why, sizeof any_why);
    for (size_t i = 0; !rc && i < n; i++) {
        if (js[i]->rc)
            continue;
        swap_item *x = &it[nit];
        x->job = js[i];
        enum swap_need need = swap_look(w, js[i], &live, &stg, &det, &x->cmds, &x->ncmds,
                                        &x->moves, &x->nmoves);
        ferry_err retry = {0};
        if (need == SWAP_CHOOSE && any_retry)
            retry_pending(ctx, js[i], &retry);
        if (need == SWAP_CHOOSE && (room_rc || retry.code)) {
            /* held back: a choice journaled by an earlier run whose statement never ran (no
             * ALTER of it runs: wait_swaps_finished) is taken back, so no unverified swap keeps
             * the table's merges stopped while the disk has no room, or while a client's retry
             * is expected */
            tier_state_take_back(&js[i]->st);
            tier_job_fail(js[i], room_rc ? room_rc : retry.code, room_rc ? &room : &retry);
            ferry_buf_free(&x->cmds), ferry_buf_free(&x->moves);
            x->ncmds = x->nmoves = 0;
            continue;
        }
        if (need == SWAP_TAKE_BACK || need == SWAP_WAIT) {
            /* out of the wave, not failed: no rollback (it would empty staging's partition) */
            js[i]->out = true;
            if (need == SWAP_TAKE_BACK) {
                tier_state_take_back(&js[i]->st);
                chosen[nchosen++] = js[i]; /* journaled with the choices, below */
                w->merges_owed = w->merges_owed || js[i]->st.merges_stopped;
            }
            FLOG_INFO("msg=\"tier swap %s while its slice moves\" job=%s", need == SWAP_WAIT ?
                      "left as it is (it cannot be finished from what is active)" :
                      "taken back (it did not run)", js[i]->rec.u.job.id);
            ferry_buf_free(&x->cmds), ferry_buf_free(&x->moves);
            x->ncmds = x->nmoves = 0;
            continue;
        }
        if (need == SWAP_CHOOSE)
            chosen[nchosen++] = js[i];
        /* the commands (DETACH PARTs), plus the staged parts ATTACH FROM / REPLACE / MOVE add */
        x->weight = x->ncmds + mv_slice_parts(&stg, js[i]->pid).n;
        if (x->ncmds || x->nmoves)
            nit++;
        else
            ferry_buf_free(&x->cmds), ferry_buf_free(&x->moves);
    }
    if (rc || (rc = tier_journal_detail(ctx, chosen, nchosen, FERRY_TIER_REPLACE, err)))
        goto out;
    if (nchosen)
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "SWAP"); /* the choices journaled, not run */
    ferry_err why = {0};
    run_swap_items(ctx, w, it, nit, false, &stop, &why);
    if (stop) /* the second halves of jobs whose first half ran wait for the next run too */
        for (size_t i = 0; i < nit; i++)
            if (it[i].moves.len && !it[i].job->rc && !it[i].alone_done)
                tier_job_fail(it[i].job, why.code ? why.code : FERRY_ETIMEOUT, &why);
    run_swap_items(ctx, w, it, nit, true, &stop, &why);
out:
    mv_slice_free(&live);
    mv_slice_free(&stg);
    ferry_ch_rows_free(&det);
    for (size_t i = 0; it && i < nit; i++)
        ferry_buf_free(&it[i].cmds), ferry_buf_free(&it[i].moves);
    free(it);
    free(chosen);
    return rc;
}

int tier_step_replace(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    /* The table's merges stop here, and start again when the swaps are verified (CLEANUP): from
     * now on a frozen part must stay as it is (I6). Recorded in each job's data, journaled with
     * the swap choices. */
    for (size_t i = 0; i < n; i++)
        js[i]->st.merges_stopped = true;
    int rc = tier_staging_merges_stop(w, err);
    if (!rc)
        rc = tier_table_merges(w, false, err);
    if (!rc)
        rc = swap_jobs(ctx, w, js, n, err);
    if (ctx->lost)
        return rc;
    if (rc) {
        /* the server failed under the whole step: each job's journal says what it chose */
        for (size_t i = 0; i < n; i++)
            tier_job_fail(js[i], rc, err);
        return FERRY_OK;
    }
    return advance_healthy(ctx, js, n, FERRY_TIER_VERIFY, err);
}

/* ---- VERIFY ------------------------------------------------------------------------------------ */

static int verify_job(tier_ctx *ctx, tier_wave *w, tier_job *job, const mv_slice *all,
                      ferry_err *err)
{
    const tier_state *st = &job->st;
    mv_parts ps = mv_slice_parts(all, job->pid);
    int64_t max_block = st->max_block;
    const mv_part **added = calloc(ps.n + 1, sizeof *added);
    const char **names = calloc(ps.n + 1, sizeof *names); /* borrowed from ps */
    size_t na = 0;
    int rc = added && names ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < ps.n; i++) {
        const mv_part *p = &ps.p[i];
        if (!p->active)
            continue;
        if (tier_state_hot_has(st, p->name))
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: frozen hot part %s is still active after "
                               "the swap (its rows would count twice)", w->srv->shard.name,
                               p->name);
        else if (p->cold && p->min_block > max_block) {
            names[na] = p->name;
            added[na++] = p;
        }
    }
    ferry_fingerprint got;
    char why[256];
    bool by_parts = st->fp_by_parts;
    if (!rc && by_parts) {
        tier_parts_digest(added, na, &got);
    } else if (!rc) {
        double f0 = ferry_clock_ms();
        rc = fingerprint_parts(job, names, na, &got, err);
        ctx->fingerprint_ms += ferry_clock_ms() - f0;
    }
    if (!rc && !ferry_fingerprint_same(&st->fp, &got, why, sizeof why))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: after the swap the new cold parts of %s.%s "
                           "partition %s do not hold the frozen %s: %s", w->srv->shard.name,
                           w->db, w->table, job->pid, by_parts ? "parts" : "rows", why);
    /* REPLACE drops the whole partition: a part inserted between the check and the swap would
     * have been dropped with the frozen ones. Merges are stopped from before the check, so any
     * dropped part above max_block is such a part. */
    if (!rc && !strcmp(st->swap, "replace"))
        for (size_t i = 0; !rc && i < ps.n; i++) {
            const mv_part *p = &ps.p[i];
            if (!p->active && !p->cold && p->min_block > max_block)
                rc = ferry_err_set(err, FERRY_EINTERNAL, "%s: part %s (%llu rows) of %s.%s was "
                                   "inserted during REPLACE PARTITION and dropped by it; its "
                                   "files stay in the table's folder until ClickHouse removes "
                                   "outdated parts: copy them to detached/ and ATTACH PART now",
                                   w->srv->shard.name, p->name, (unsigned long long)p->rows,
                                   w->db, w->table);
        }
    free(names);
    free(added);
    return rc;
}

int tier_step_verify(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    mv_slice all = {0};
    int rc = tier_list(w, w->table, js, n, false, &all, err);
    for (size_t i = 0; !rc && i < n; i++) {
        ferry_err e = {0};
        bool served = true;
        if (!js[i]->rc && js[i]->resumed && (rc = tier_job_served(ctx, js[i], &served, err)))
            break;
        if (!js[i]->rc && !served) {
            /* resumed after a move took the slice away: the partition left this server with
             * the move, which verified its own copy of it; nothing here to compare */
            FLOG_INFO("msg=\"tier job's verification skipped: its slice moved to another shard "
                      "since the swap\" job=%s", js[i]->rec.u.job.id);
            continue;
        }
        if (!js[i]->rc && js[i]->st.mend && js[i]->moving) {
            /* undoing the swap (tier_mend.c) would empty staging's partition, which the move
             * shares: it waits for the move's end, the job as it is */
            ferry_err_set(&e, FERRY_ETIMEOUT, "%s: undoing the swap of %s.%s partition %s waits "
                          "for the end of the move of its slice", w->srv->shard.name, w->db,
                          w->table, js[i]->pid);
            tier_job_fail(js[i], FERRY_ETIMEOUT, &e);
        }
        int jrc = js[i]->rc || js[i]->st.mend ? FERRY_OK : verify_job(ctx, w, js[i], &all, &e);
        if (!js[i]->rc && !js[i]->moving && (js[i]->st.mend || jrc == FERRY_EINVAL)) {
            /* a part the swap brought in may have been detached as broken: undone then (the job
             * failed either way, unless the server or the catalog failed under the mend) */
            ferry_err me = {0};
            jrc = tier_mend_broken(ctx, w, js[i], &all, jrc ? &e : NULL, &me);
            e = me;
            if (jrc && jrc != FERRY_EREMOTE && jrc != FERRY_ECONNECT && jrc != FERRY_ETIMEOUT) {
                *err = e;
                rc = jrc;
                break;
            }
        }
        if (jrc == FERRY_EREMOTE || jrc == FERRY_ECONNECT || jrc == FERRY_ETIMEOUT) {
            *err = e;
            rc = jrc;
        } else if (jrc) {
            tier_job_fail(js[i], jrc, &e);
        }
    }
    mv_slice_free(&all);
    return rc ? rc : advance_healthy(ctx, js, n, FERRY_TIER_CLEANUP, err);
}

/* A tiering run (ferry_tier_run): reads the cluster from the config and the catalog, takes its
 * leases (below), resumes unfinished tier jobs of the journal, then finds the hot partitions older
 * than the threshold on every server and runs a job for each. The jobs of one (server, table) run
 * together as waves of at most TIER_WAVE_MAX (tier.c has the job and the wave). */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/agent.h"
#include "ferry/clock.h"
#include "ferry/lines.h"
#include "ferry/fleet.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/strutil.h"
#include "ferry/tally.h"
#include "ferry/testknob.h"

/* ---- servers ---------------------------------------------------------------------------------- */

int tier_server_open(tier_ctx *ctx, tier_server *srv, ferry_err *err)
{
    if (srv->opened)
        return FERRY_OK;
    int rc = mv_conn_open(&srv->shard, &ctx->cfg, &srv->conn, err);
    if (rc)
        return ferry_err_prefix(err, "tiering runs FREEZE, uploads and pointer parts through "
                                     "the node agent: ");
    srv->conn.cat = ctx->cat; /* the staging loads' lease (staging_load.h) */
    ferry_agent_client_set_timeout(srv->conn.ag, tier_agent_timeout_ms());
    srv->opened = true;
    return FERRY_OK;
}

/* The pointer format pinned in the catalog must be one the server's ClickHouse reads, the
 * server must run the pinned ClickHouse version (pointer files are an internal format), and the
 * agent must write that format. */
int tier_server_check(tier_ctx *ctx, tier_server *srv, ferry_err *err)
{
    if (srv->checked) {
        if (srv->check_rc)
            ferry_err_set(err, srv->check_rc, "%s", srv->check_msg);
        return srv->check_rc;
    }
    int rc = tier_server_open(ctx, srv, err);
    if (rc)
        return rc;
    ferry_agent_status_info st;
    if ((rc = ferry_agent_status(srv->conn.ag, &st, err)))
        return ferry_err_prefix(err, "%s: agent status: ", srv->shard.name);
    const char *vtext = st.clickhouse_version;
    ferry_ch_version v;
    const ferry_settings *s = &ctx->settings;
    int pinned = (int)(s->pointer_format > 1000 ? 1000 : s->pointer_format);
    bool parsed = vtext && !ferry_ch_parse_version(vtext, &v, err);
    if (parsed) { /* kept even when the checks below fail (tier_replace_unsafe) */
        srv->version_known = true;
        srv->ch_major = v.major;
        srv->ch_minor = v.minor;
    }
    if (!parsed) {
        rc = ferry_err_set(err, FERRY_EREMOTE, "%s: the agent did not report the ClickHouse "
                           "version", srv->shard.name);
    } else if ((rc = ferry_agent_pointer_version_ok(pinned, &v, err))) {
        ferry_err_prefix(err, "%s (ClickHouse %s) cannot read the pointer format the catalog "
                         "pins (pointer_format = %d): ", srv->shard.name, v.text, pinned);
    } else {
        int pmaj = 0, pmin = 0;
        if (sscanf(s->clickhouse_version, "%d.%d", &pmaj, &pmin) != 2 || pmaj != v.major ||
            pmin != v.minor) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s runs ClickHouse %s but the catalog pins "
                               "%s: pointer files are an internal format, so tiering refuses "
                               "before ATTACH; test the new version in a lab and pin it",
                               srv->shard.name, v.text, s->clickhouse_version);
        } else {
            const char *aerr = st.pointer_format_error;
            if (aerr)
                rc = ferry_err_set(err, FERRY_EINVAL, "%s: the agent cannot write pointer files: "
                                   "%s", srv->shard.name, aerr);
            else if (st.pointer_format != pinned)
                rc = ferry_err_set(err, FERRY_EINVAL, "%s: the agent writes pointer format %d "
                                   "(its config's [cluster] pointer_format) but the catalog pins "
                                   "%d", srv->shard.name, st.pointer_format, pinned);
        }
    }
    ferry_agent_status_info_free(&st);
    srv->checked = true;
    srv->check_rc = rc;
    snprintf(srv->check_msg, sizeof srv->check_msg, "%s", rc ? err->msg : "");
    return rc;
}

bool tier_replace_unsafe(tier_ctx *ctx, tier_server *srv)
{
    if (!srv->checked) {
        ferry_err e = {0};
        (void)tier_server_check(ctx, srv, &e); /* the version is kept even when the check fails */
    }
    ferry_ch_version v = {.major = srv->ch_major, .minor = srv->ch_minor};
    return ferry_ch_replace_keeps_replaced(srv->version_known ? &v : NULL);
}

/* ---- jobs -------------------------------------------------------------------------------------- */

static tier_server *find_server(tier_ctx *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->n_servers; i++)
        if (!strcmp(ctx->servers[i].shard.name, name))
            return &ctx->servers[i];
    return NULL;
}

static void job_free(tier_job *job)
{
    tier_state_free(&job->st);
    json_decref(job->objects);
    json_decref(job->sizes);
    ferry_record_free(&job->rec);
    memset(job, 0, sizeof *job);
}

/* Fills the job's working fields from its record. */
static int job_load(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    ferry_job *j = &job->rec.u.job;
    int rc = ferry_tier_state_parse(j->state, &job->state, err);
    if (rc)
        return rc;
    if ((rc = tier_state_decode(ferry_job_data(j)[0] ? ferry_job_data(j) : "{}", &job->st, err)))
        return ferry_err_prefix(err, "job %s: ", j->id);
    job->srv = find_server(ctx, job->st.server);
    if (!job->srv)
        return ferry_err_set(err, FERRY_ENOTFOUND, "job %s: server '%s' is not a shard of the "
                             "catalog", j->id, job->st.server);
    snprintf(job->db, sizeof job->db, "%s", job->st.db);
    snprintf(job->table, sizeof job->table, "%s", job->st.table);
    snprintf(job->pid, sizeof job->pid, "%s", job->st.pid);
    if ((rc = ferry_tier_staging_name(job->table, job->staging, sizeof job->staging, err)) ||
        (rc = tier_hot_load(ctx, job, err)))
        return rc;
    return tier_server_open(ctx, job->srv, err);
}

static json_t *job_summary(const tier_job *job, unsigned long wave, int rc, const ferry_err *err)
{
    json_t *steps = json_object();
    for (int s = 0; s < FERRY_TIER_STATE_COUNT; s++)
        if (job->step_ms[s] > 0)
            json_object_set_new(steps, ferry_tier_state_name((enum ferry_tier_state)s),
                                json_real(job->step_ms[s]));
    const tier_state *st = &job->st;
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:o}", "id",
        job->rec.u.job.id, "server", job->srv ? job->srv->shard.name : "", "table", job->table,
        "partition_id", job->pid, "tenant", st->tenant, "day", (json_int_t)st->day, "state",
        ferry_tier_state_name(job->state), "swap", st->swap, "rows",
        st->has_fp ? (json_int_t)st->fp.rows : 0, "hot_parts", (json_int_t)st->n_hot,
        "bytes_uploaded",
        (json_int_t)job->bytes_uploaded, "files_uploaded", (json_int_t)job->files_uploaded,
        "pointer_bytes", (json_int_t)job->pointer_bytes, "resumed", job->resumed, "wave",
        (json_int_t)wave, "step_ms", steps);
    if (o && st->has_fp)
        json_object_set_new(o, "verified_by", json_string(st->fp_by_parts ? "parts" : "rows"));
    if (o && rc)
        json_object_set_new(o, "error", json_string(err->msg));
    if (o && job->left_with_move)
        json_object_set_new(o, "note", json_string("rolled back: its slice moved to another "
                                                   "shard since the job began"));
    return o;
}

typedef struct run_totals {
    int first_rc;
    ferry_err first_err;
    json_int_t tiered, resumed, failed, retried, late, compacted, piled;
    uint64_t bytes, files, pbytes, pfiles;
    double check_ms;
} run_totals;

static void note_failure(run_totals *t, int rc, const ferry_err *err)
{
    t->failed++;
    if (!t->first_rc) {
        t->first_rc = rc;
        t->first_err = *err;
    }
}

/* Takes a job whose frozen parts a merge took before its swap (rolled back, FAILED) back to
 * PLANNED for its second try: the record by CAS on its version, the working fields as a new job
 * of the partition has them (what it uploaded stays counted). */
static int requeue_job(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    tier_state fresh;
    char *text = NULL;
    tier_state_identity(&job->st, &fresh); /* owns nothing */
    int rc = tier_state_encode(&fresh, &text, err);
    ferry_flow_change ch = {.rec = &job->rec, .to = FERRY_TIER_PLANNED, .data = text};
    if (!rc) {
        ctx->catalog_writes++;
        rc = ferry_flow_write(&ctx->journal, NULL, &ch, 1, 0, err);
    }
    free(text);
    if (rc)
        return rc;
    tier_state_free(&job->st);
    job->st = fresh;
    json_decref(job->objects);
    json_decref(job->sizes);
    job->objects = job->sizes = NULL;
    job->state = FERRY_TIER_PLANNED;
    job->freeze_started_here = job->out = job->merged_away = job->swap_undone = false;
    job->rc = 0;
    memset(&job->err, 0, sizeof job->err);
    return FERRY_OK;
}

/* Runs one wave of the jobs ptrs[0..k) of one server and table. */
static void run_wave(tier_ctx *ctx, tier_job **ptrs, size_t k, bool hold_merges)
{
    ferry_err err = {0};
    tier_job *first = ptrs[0];
    tier_wave w = {.srv = first->srv, .jobs = ptrs, .n = k, .hold_merges = hold_merges,
                   .atomic_swap = ctx->opt->atomic_swap};
    snprintf(w.db, sizeof w.db, "%s", first->db);
    snprintf(w.table, sizeof w.table, "%s", first->table);
    snprintf(w.staging, sizeof w.staging, "%s", first->staging);
    if (ferry_tier_empty_name(w.table, w.empty, sizeof w.empty, &err))
        w.empty[0] = '\0'; /* no twin: staging is emptied by DETACH */
    if ((w.no_replace = tier_replace_unsafe(ctx, w.srv))) {
        w.empty[0] = '\0';
        FLOG_INFO("msg=\"ClickHouse before 26.7: swaps by DETACH PART and ATTACH, no "
                  "REPLACE PARTITION (a restart would load the replaced parts again)\" "
                  "server=%s", w.srv->shard.name);
    }
    int wrc = tier_wave_run(ctx, &w, &err);
    if (wrc)
        FLOG_WARN("msg=\"tier wave stopped\" server=%s table=%s err=\"%s\"", w.srv->shard.name,
                  w.table, err.msg);
}

/* Whether job (rolled back before its swap: its frozen parts were gone) was resumed on a server
 * that no longer serves its slice: the partition left with a move (a swap taken back while the
 * slice moved, tier_steps.c), so there is nothing to tier here and the job is not run again. Its
 * rollback is then no failure of the run; the report says why in "note". */
static bool left_with_move(tier_ctx *ctx, tier_job *job)
{
    bool served = true;
    ferry_err e = {0};
    if (!job->resumed || tier_job_served(ctx, job, &served, &e) || served)
        return false;
    FLOG_INFO("msg=\"tier job rolled back and not run again: its slice moved to another shard "
              "since it began\" job=%s", job->rec.u.job.id);
    job->left_with_move = true;
    job->rc = 0;
    memset(&job->err, 0, sizeof job->err);
    return true;
}

/* Runs the jobs js[0..n) (all of one server and table, loaded) as waves of at most TIER_WAVE_MAX
 * and reports each job. A wave's jobs whose frozen parts a merge took before the swap, or whose
 * swap was undone for a broken part (tier_mend.c), run once more at once, in a wave that holds
 * the table's merges stopped from FREEZE (tier.c, I6). The
 * jobs of partitions with late rows (tier_job.late_rows) run in such a wave from the start,
 * after the others: their fresh parts are what ClickHouse merges next, and a first wave that
 * let merges run lost them nearly every time (the chaos soak: 78 of one run's 87 jobs retried),
 * each after a whole upload. */
static void run_jobs(tier_ctx *ctx, tier_job *js, size_t n, run_totals *t)
{
    tier_job **plain = calloc(n + 1, sizeof *plain), **late = calloc(n + 1, sizeof *late),
             **again = calloc(n + 1, sizeof *again);
    ferry_err err = {0};
    if (!plain || !late || !again) {
        ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
        note_failure(t, FERRY_ENOMEM, &err);
        free(plain);
        free(late);
        free(again);
        return;
    }
    for (size_t first = 0; first < n; first += TIER_WAVE_MAX) {
        size_t k = n - first < TIER_WAVE_MAX ? n - first : TIER_WAVE_MAX;
        size_t nplain = 0, nlate = 0;
        for (size_t i = first; i < first + k; i++) {
            if (js[i].late_rows)
                late[nlate++] = &js[i];
            else
                plain[nplain++] = &js[i];
        }
        if (nplain)
            run_wave(ctx, plain, nplain, false);
        size_t nagain = 0;
        for (size_t i = 0; i < nplain && !ctx->lost; i++) {
            tier_job *job = plain[i];
            if (!(job->merged_away || job->swap_undone) || job->state != FERRY_TIER_FAILED)
                continue;
            if (left_with_move(ctx, job))
                continue;
            FLOG_INFO("msg=\"tier job runs again, merges held: %s\" job=%s",
                      job->merged_away ? "a merge took a frozen part before the swap"
                                       : "its swap was undone (a part it brought in was broken)",
                      job->rec.u.job.id);
            ferry_err rerr = {0};
            int rrc = requeue_job(ctx, job, &rerr);
            if (rrc)
                FLOG_WARN("msg=\"tier job not run again\" job=%s err=\"%s\"",
                          job->rec.u.job.id, rerr.msg);
            else
                again[nagain++] = job;
        }
        if (nagain) {
            t->retried += (json_int_t)nagain;
            run_wave(ctx, again, nagain, true);
        }
        if (nlate) {
            FLOG_INFO("msg=\"tier: partitions with late rows tier in a wave that holds merges "
                      "from its freeze\" server=%s table=%s jobs=%zu", late[0]->srv->shard.name,
                      late[0]->table, nlate);
            t->late += (json_int_t)nlate;
            run_wave(ctx, late, nlate, true);
        }
        for (size_t i = first; i < first + k; i++) {
            tier_job *job = &js[i];
            if (job->rc)
                note_failure(t, job->rc, &job->err);
            else if (job->state == FERRY_TIER_DONE)
                t->tiered++;
            t->bytes += job->bytes_uploaded;
            t->files += job->files_uploaded;
            t->pbytes += job->pointer_bytes;
            t->pfiles += job->pointer_files;
            t->check_ms += job->check_ms;
            json_array_append_new(json_object_get(ctx->report, "jobs"),
                                  job_summary(job, ctx->waves, job->rc, &job->err));
        }
    }
    free(plain);
    free(late);
    free(again);
}

/* Whether options.partition_ids lets partition pid in (always, without the filter). */
static bool pid_wanted(const ferry_tier_options *o, const char *pid)
{
    if (!o->partition_ids)
        return true;
    for (size_t i = 0; pid && i < o->n_partition_ids; i++)
        if (!strcmp(o->partition_ids[i], pid))
            return true;
    return false;
}

static bool job_matches(tier_ctx *ctx, const tier_state *st)
{
    const ferry_tier_options *o = ctx->opt;
    return pid_wanted(o, st->pid) && (!o->server || !strcmp(o->server, st->server)) &&
           (!o->table || !strcmp(o->table, st->catalog_table)) &&
           (!o->tenant || !strcmp(o->tenant, st->tenant));
}

/* Orders loaded jobs by server, database and table, so the jobs of a wave are neighbours. */
static int job_group_cmp(const void *a, const void *b)
{
    const tier_job *x = a, *y = b;
    int d = strcmp(x->srv->shard.name, y->srv->shard.name);
    if (!d)
        d = strcmp(x->db, y->db);
    if (!d)
        d = strcmp(x->table, y->table);
    return d ? d : strcmp(x->rec.u.job.id, y->rec.u.job.id);
}

/* Runs the loaded jobs js[0..n), one group of waves per (server, table). */
static void run_grouped(tier_ctx *ctx, tier_job *js, size_t n, run_totals *t)
{
    if (n == 0)
        return;
    qsort(js, n, sizeof *js, job_group_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && js[j].srv == js[i].srv && !strcmp(js[j].db, js[i].db) &&
               !strcmp(js[j].table, js[i].table))
            j++;
        run_jobs(ctx, js + i, j - i, t);
        i = j;
    }
}

static const ferry_move *slice_moving(const ferry_record_list *moves, const char *server,
                                     const char *tenant, uint32_t split);

/* Resumes every unfinished tier job of the journal (that the filters select). A job whose slice
 * is being moved to or from its server waits for the move to end, as a new job would: a move
 * hands over the part records that exist when it ends, and a job resumed meanwhile (in the
 * ZooKeeper soak, a CLEANUP cut by a lost connection) would write its records behind it.
 * Except a job whose swap may have run and is not verified: it holds its table's merges
 * stopped (I6), and a move of its slice that needs them (its freezes failed for the inodes the
 * piled-up parts took, in the ZooKeeper soak of session 26) would wait for it for ever while it
 * waits for the move. It runs as far as its verification (tier_job.moving). */
static void resume_jobs(tier_ctx *ctx, run_totals *t)
{
    ferry_record_list l = {0}, moves = {0};
    ferry_err err = {0};
    tier_job *js = NULL;
    size_t n = 0;
    int lrc = ferry_flow_list_unfinished(&ctx->journal, &l, &err);
    if (!lrc)
        lrc = tier_held_seed(ctx, &l, &err);
    if (!lrc && l.n)
        lrc = ferry_catalog_list_unfinished_moves(ctx->cat, &moves, &err);
    if (lrc) {
        note_failure(t, lrc, &err);
        return;
    }
    if (l.n && !(js = calloc(l.n, sizeof *js))) {
        ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
        note_failure(t, FERRY_ENOMEM, &err);
        goto out;
    }
    for (size_t i = 0; i < l.n; i++) {
        ferry_job *j = &l.items[i].u.job;
        tier_state st;
        ferry_err de = {0};
        if (tier_state_decode(ferry_job_data(j), &st, &de)) {
            /* a newer ferry's record of another shape, or a damaged one: left as it is */
            FLOG_WARN("msg=\"tier job not resumed: its data cannot be read\" job=%s err=\"%s\"",
                      j->id, de.msg);
            continue;
        }
        bool match = job_matches(ctx, &st);
        char ten[FERRY_NAME_MAX];
        uint32_t split = st.split;
        snprintf(ten, sizeof ten, "%s", st.tenant);
        tier_state_free(&st);
        if (!match)
            continue;
        if (ctx->opt->dry_run) {
            json_array_append_new(json_object_get(ctx->report, "planned"),
                                  json_pack("{s:s, s:s, s:b}", "id", j->id, "state", j->state,
                                            "resume", 1));
            continue;
        }
        /* the slice's lease first: a repair of the slice runs on (its next pass resumes it) */
        ferry_err le = {0};
        int src = ten[0] ? ferry_slice_lease_take(ctx->cat, &ctx->slices, ten, split, ctx->owner,
                                                  &le)
                         : FERRY_OK;
        if (src == FERRY_ECONFLICT) {
            FLOG_INFO("msg=\"tier job not resumed: its slice is held by a repair or a move\" "
                      "job=%s holder=\"%s\"", j->id, le.msg);
            continue;
        }
        if (src) {
            note_failure(t, src, &le);
            continue;
        }
        tier_job *job = &js[n];
        memset(job, 0, sizeof *job);
        ferry_record_copy(&job->rec, &l.items[i], &err);
        job->resumed = true;
        int rc = job_load(ctx, job, &err);
        if (rc) {
            note_failure(t, rc, &err);
            json_array_append_new(json_object_get(ctx->report, "jobs"),
                                  job_summary(job, 0, rc, &err));
            job_free(job);
            continue;
        }
        const ferry_move *m = slice_moving(&moves, job->srv->shard.name, job->st.tenant,
                                           job->st.split);
        if (m && !tier_job_swap_unverified(job)) {
            FLOG_INFO("msg=\"tier job not resumed: its slice is moving\" job=%s", j->id);
            job_free(job);
            continue;
        }
        if (m) {
            job->moving = true;
            job->swap_finish_only = !ferry_shard_set_has(&m->from, job->srv->shard.name) ||
                                    m->state >= FERRY_MOVE_SWITCH;
            FLOG_INFO("msg=\"tier job resumed as far as its verification while its slice moves: "
                      "its unverified swap holds the table's merges\" job=%s state=%s move=%s "
                      "move_state=%s swap_finish_only=%d", j->id, j->state, m->id,
                      ferry_move_state_name(m->state), job->swap_finish_only);
        }
        FLOG_INFO("msg=\"resuming tier job\" job=%s state=%s", j->id, j->state);
        t->resumed++;
        n++;
    }
    run_grouped(ctx, js, n, t);
out:
    ferry_slice_leases_release(ctx->cat, &ctx->slices);
    for (size_t i = 0; i < n; i++)
        job_free(&js[i]);
    free(js);
    ferry_record_list_free(&l);
    ferry_record_list_free(&moves);
}

/* Prepares the job of one due partition: *job filled (its data; not written yet: a new record,
 * or a finished one read back to be taken back to PLANNED). Returns false when there is nothing
 * to run (unfinished: resume_jobs ran it; a dry run; a failure, noted). */
static bool prepare_job(tier_ctx *ctx, tier_server *srv, const ferry_table_def *def,
                        const char *table, const char *pid, const char *literal,
                        const ferry_partition_key *key, tier_job *job, run_totals *t)
{
    ferry_err err = {0};
    char id[FERRY_NAME_MAX];
    memset(job, 0, sizeof *job);
    int rc = ferry_tier_job_id(srv->shard.name, table, pid, id, sizeof id, &err);
    if (rc) {
        note_failure(t, rc, &err);
        return false;
    }
    ferry_flow_job_init(&ctx->journal, &job->rec, id, NULL); /* checked: it fits */
    if (ferry_flow_get(&ctx->journal, &job->rec, &err) == FERRY_OK) {
        enum ferry_tier_state s = FERRY_TIER_PLANNED;
        ferry_tier_state_parse(job->rec.u.job.state, &s, NULL);
        tier_state old = {0};
        bool swapped_failure = s == FERRY_TIER_FAILED &&
                               !tier_state_decode(ferry_job_data(&job->rec.u.job), &old, NULL) && old.swapped;
        tier_state_free(&old);
        if (s != FERRY_TIER_DONE && s != FERRY_TIER_FAILED)
            goto skip; /* unfinished: resume_jobs ran it (or another worker holds it) */
        if (swapped_failure) {
            ferry_err_set(&err, FERRY_EINVAL, "job %s failed after its swap (%s); it needs an "
                          "operator: look at the partition, then reset the job",
                          id, job->rec.u.job.detail);
            note_failure(t, FERRY_EINVAL, &err);
            goto skip;
        }
    }
    if (ctx->opt->dry_run) {
        json_array_append_new(json_object_get(ctx->report, "planned"),
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", id, "server",
                                        srv->shard.name, "table", table, "partition_id", pid,
                                        "tenant", key->tenant, "day", (json_int_t)key->day));
        goto skip;
    }
    job->srv = srv;
    char *text = NULL;
    snprintf(job->db, sizeof job->db, "%s", def->database);
    snprintf(job->table, sizeof job->table, "%s", table);
    snprintf(job->pid, sizeof job->pid, "%s", pid);
    if ((rc = tier_state_plan(&job->st, srv->shard.name, def->database, table, def->name, pid,
                              literal, key->tenant, key->day, key->split, &err)) ||
        (rc = ferry_tier_staging_name(table, job->staging, sizeof job->staging, &err)) ||
        (rc = tier_state_encode(&job->st, &text, &err))) {
        note_failure(t, rc, &err);
        goto skip;
    }
    /* plan_jobs writes it in PLANNED (flow_journal.h) */
    rc = ferry_job_set_data(&job->rec.u.job, text, &err);
    free(text);
    if (rc) {
        note_failure(t, rc, &err);
        goto skip;
    }
    job->state = FERRY_TIER_PLANNED;
    return true;
skip:
    job_free(job);
    return false;
}

/* Writes the PLANNED records of the prepared jobs through the flow engine: created new, or a
 * finished record taken back to PLANNED by CAS on its version, all in one batch. When another
 * worker changed one of them, one at a time, and the ones it took are left out (*n shrinks). */
static void plan_jobs(tier_ctx *ctx, tier_job *js, size_t *n, run_totals *t)
{
    ferry_flow_change *ch = calloc(*n + 1, sizeof *ch);
    ferry_err err = {0};
    int rc = ch ? FERRY_OK : ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < *n; i++)
        ch[i] = (ferry_flow_change){.rec = &js[i].rec, .to = FERRY_TIER_PLANNED};
    if (!rc) {
        ctx->catalog_writes++;
        rc = ferry_flow_write(&ctx->journal, NULL, ch, *n, FERRY_FLOW_CREATE, &err);
    }
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        int jrc = FERRY_OK;
        if (rc == FERRY_ECONFLICT) {
            ctx->catalog_writes++;
            jrc = ferry_flow_write(&ctx->journal, NULL, &ch[i], 1, FERRY_FLOW_CREATE, &err);
            if (jrc == FERRY_ECONFLICT)
                FLOG_INFO("msg=\"tier job taken by another worker\" job=%s", js[i].rec.u.job.id);
            else if (jrc)
                note_failure(t, jrc, &err);
        } else if (rc) {
            jrc = rc;
            if (i == 0)
                note_failure(t, rc, &err);
        }
        if (jrc) {
            job_free(&js[i]);
            continue;
        }
        if (kept != i)
            js[kept] = js[i];
        kept++;
    }
    *n = kept;
    free(ch);
}

/* ---- discovery --------------------------------------------------------------------------------- */

/* Checks the table on the server: it exists, and its storage policy has an object-storage disk.
 * *exists false (and FERRY_OK) for a missing table when missing_ok. */
static int check_table(tier_server *srv, const char *db, const char *table, bool missing_ok,
                       bool *exists, ferry_err *err)
{
    char policy[FERRY_NAME_MAX];
    bool remote = false;
    int rc = tier_table_policy(srv, db, table, exists, policy, sizeof policy, &remote, err);
    if (rc)
        return rc;
    if (!*exists)
        return missing_ok ? FERRY_OK
                          : ferry_err_set(err, FERRY_ENOTFOUND, "%s: table %s.%s does not exist "
                                          "(the catalog lists it; create it, or remove it from "
                                          "the catalog)", srv->shard.name, db, table);
    if (!remote)
        return ferry_err_set(err, FERRY_EINVAL, "%s: table %s.%s has storage policy '%s', which "
                             "has no object-storage disk; tiering needs a policy with a cold "
                             "volume on one (e.g. SETTINGS storage_policy = 'tiered')",
                             srv->shard.name, db, table, policy);
    return FERRY_OK;
}

/* Whether a move not yet DONE or FAILED has server among its sources or targets for the slice
 * (tenant, split). Until it ends, neither side's partition is the slice's whole truth: the
 * target's table lacks what its staging still holds (the publish step), and the source's
 * parts are being copied. A swap chosen from such a partition (REPLACE of "exactly the frozen
 * parts") threw away the rows MOVE PARTITION then brought in (rows lost in the chaos soak). */
/* The unfinished move of slice (tenant, split) to or from server, or NULL. */
static const ferry_move *slice_moving(const ferry_record_list *moves, const char *server,
                                     const char *tenant, uint32_t split)
{
    for (size_t i = 0; i < moves->n; i++) {
        const ferry_move *m = &moves->items[i].u.move;
        if (m->split == split && !strcmp(m->tenant, tenant) &&
            (ferry_shard_set_has(&m->from, server) || ferry_shard_set_has(&m->to, server)))
            return m;
    }
    return NULL;
}

/* A due partition of many small hot parts is merged into one before its (fresh) job freezes it:
 * ATTACH of a pointer part reads it through the object store (about 0.5 s a part against the
 * soak's s3rver), and the cold copy keeps whatever part count it was given for good (each part
 * its own objects, read by every query). In the chaos soak a node left unable to merge for a
 * while (a full disk) tiered 21 partitions of about 80 parts each: 1,700 ATTACHes, 15 minutes.
 * Only partitions whose parts are all hot (a merge must not read cold parts back) and small
 * enough to rewrite on the spot; a failure (merges stopped on the table, no room) only logs:
 * the partition tiers as it is. */
static void maybe_compact(tier_server *srv, const char *db, const char *table, const char *pid,
                          const char *hot_parts, const char *hot_bytes, const char *cold_parts,
                          run_totals *t)
{
    unsigned long long parts = strtoull(hot_parts, NULL, 10), bytes = strtoull(hot_bytes, NULL, 10);
    if (parts <= TIER_COMPACT_PARTS || bytes > TIER_COMPACT_BYTES || strcmp(cold_parts, "0"))
        return;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_err err = {0};
    ferry_buf_puts(&sql, "OPTIMIZE TABLE ");
    ferry_sql_db_table(db, table, &sql);
    ferry_buf_puts(&sql, " PARTITION ID ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, " FINAL");
    double t0 = ferry_clock_ms();
    if (tier_sql(srv, ferry_buf_cstr(&sql), NULL, &err))
        FLOG_WARN("msg=\"tier: partition not compacted before tiering; it tiers as it is\" "
                  "server=%s table=%s partition=%s parts=%llu err=\"%s\"", srv->shard.name,
                  table, pid, parts, err.msg);
    else {
        t->compacted++;
        FLOG_INFO("msg=\"tier: partition compacted before tiering\" server=%s table=%s "
                  "partition=%s parts=%llu bytes=%llu ms=%.0f", srv->shard.name, table, pid,
                  parts, bytes, ferry_clock_ms() - t0);
    }
    ferry_buf_free(&sql);
}

/* A due partition whose late rows piled up in hot parts waits for the table's merges rather
 * than tiering them one by one: logged and counted, the caller skips it. */
static void wait_for_merges(tier_server *srv, const char *table, const char *literal,
                            unsigned long long hot, run_totals *t)
{
    t->piled++;
    FLOG_INFO("msg=\"partition skipped: its late rows piled up in hot parts; the table's merges "
              "take them down first and a later run tiers them\" server=%s table=%s "
              "partition=%s hot_parts=%llu", srv->shard.name, table, literal, hot);
}

/* A table with a partition of more hot parts than compaction takes (rows: scan_table's, column 2
 * the hot part count) may be one whose merges a cut run left stopped: a tiering killed between
 * SYSTEM STOP MERGES and the journal write that records it, which no later run starts again
 * (the chaos soak's node2 piled up about 900 parts a partition so, and each became an ATTACH
 * through the object store). Unless a job's unverified swap needs them stopped, merges start
 * again here, before compaction. ferry owns the merges of the tables it tiers (a swap's CLEANUP
 * starts them too): docs/tiering.md "Merges a cut run left stopped". Cheap: one statement, and only on
 * a table whose parts piled up. */
static void restart_piled_merges(tier_ctx *ctx, tier_server *srv, const char *db,
                                 const char *table, const ferry_ch_rows *rows)
{
    unsigned long long most = 0;
    for (size_t i = 0; i < rows->n_rows && rows->n_cols == 5; i++) {
        unsigned long long hot = strtoull(ferry_ch_rows_get(rows, i, 2), NULL, 10);
        most = hot > most ? hot : most;
    }
    if (most <= TIER_COMPACT_PARTS || ctx->opt->dry_run)
        return;
    char job[FERRY_NAME_MAX] = "";
    if (tier_journal_holds_merges(ctx, srv, db, table, NULL, job, sizeof job)) {
        FLOG_INFO("msg=\"tier: merges of the table stay as they are: a tier job's swap is not "
                  "verified yet\" server=%s table=%s job=%s", srv->shard.name, table, job);
        return;
    }
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_err err = {0};
    ferry_buf_puts(&sql, "SYSTEM START MERGES ");
    ferry_sql_db_table(db, table, &sql);
    if (tier_sql(srv, ferry_buf_cstr(&sql), NULL, &err))
        FLOG_WARN("msg=\"tier: merges of the table not started\" server=%s table=%s err=\"%s\"",
                  srv->shard.name, table, err.msg);
    else
        FLOG_INFO("msg=\"tier: merges of a table of piled-up parts started (no tier job needs "
                  "them stopped)\" server=%s table=%s most_hot_parts=%llu", srv->shard.name,
                  table, most);
    ferry_buf_free(&sql);
}

/* The hot partitions of one ClickHouse table on one server that are due, tiered in waves. */
static void scan_table(tier_ctx *ctx, tier_server *srv, const ferry_table_def *def,
                       const char *table, const char *tenant, bool missing_ok, run_totals *t)
{
    ferry_record_list moves = {0};
    ferry_err err = {0};
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    tier_job *js = NULL;
    bool table_exists = false, checked = false;
    size_t n = 0;
    int rc = check_table(srv, def->database, table, missing_ok, &table_exists, &err);
    if (rc || !table_exists)
        goto out;
    if ((rc = tier_check_staging(srv, def->database, table, false, &err)))
        goto out;
    if ((rc = ferry_catalog_list_unfinished_moves(ctx->cat, &moves, &err)))
        goto out;
    ferry_buf_puts(&sql, "SELECT partition_id, any(partition), countIf(NOT remote), "
                         "sumIf(bytes_on_disk, NOT remote), countIf(remote) FROM (SELECT "
                         "partition_id, partition, bytes_on_disk, disk_name IN (SELECT name FROM "
                         "system.disks WHERE is_remote) AS remote FROM system.parts WHERE active "
                         "AND database = ");
    ferry_sql_quote(def->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, ") GROUP BY partition_id ORDER BY partition_id FORMAT TabSeparated");
    if ((rc = tier_sql(srv, ferry_buf_cstr(&sql), &res, &err)) || res.len == 0)
        goto out;
    rc = ferry_ch_rows_parse(res.data, res.len, &rows, &err);
    res.data = NULL;
    res.len = res.cap = 0;
    if (rc)
        goto out;
    restart_piled_merges(ctx, srv, def->database, table, &rows);
    if (rows.n_rows && !(js = calloc(rows.n_rows, sizeof *js))) {
        rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rows.n_rows && rows.n_cols == 5; i++) {
        const char *pid = ferry_ch_rows_get(&rows, i, 0);
        const char *literal = ferry_ch_rows_get(&rows, i, 1);
        if (!strcmp(ferry_ch_rows_get(&rows, i, 2), "0") || !pid_wanted(ctx->opt, pid))
            continue; /* no hot part, or not asked for */
        ferry_partition_key key;
        ferry_err perr = {0};
        if (ferry_partition_parse(def->layout, literal, &key, &perr)) {
            FLOG_WARN("msg=\"partition not in the table's layout; skipped\" server=%s table=%s "
                      "partition=%s err=\"%s\"", srv->shard.name, table, literal, perr.msg);
            continue;
        }
        if (tenant)
            snprintf(key.tenant, sizeof key.tenant, "%s", tenant);
        if (ctx->opt->tenant && strcmp(ctx->opt->tenant, key.tenant))
            continue;
        if (!ferry_tier_day_due(key.day, ctx->now, ctx->older_than))
            continue;
        unsigned long long hot = strtoull(ferry_ch_rows_get(&rows, i, 2), NULL, 10);
        bool has_cold = strcmp(ferry_ch_rows_get(&rows, i, 4), "0") != 0;
        if (has_cold && hot > TIER_PILED_PARTS && !ctx->opt->no_compact &&
            strtoull(ferry_ch_rows_get(&rows, i, 3), NULL, 10) <= TIER_COMPACT_BYTES) {
            /* late rows are never compacted (the merge would read the cold parts back) */
            wait_for_merges(srv, table, literal, hot, t);
            continue;
        }
        if (slice_moving(&moves, srv->shard.name, key.tenant, key.split) != NULL) {
            FLOG_INFO("msg=\"partition skipped: its slice is moving\" server=%s table=%s "
                      "partition=%s", srv->shard.name, table, literal);
            continue;
        }
        if (!ctx->opt->dry_run) { /* held until the jobs ran (below); repairs, moves keep off */
            ferry_err le = {0};
            int lrc = ferry_slice_lease_take(ctx->cat, &ctx->slices, key.tenant, key.split,
                                             ctx->owner, &le);
            if (lrc == FERRY_ECONFLICT) {
                FLOG_INFO("msg=\"partition skipped: its slice is held by a repair or a move\" "
                          "server=%s table=%s partition=%s holder=\"%s\"", srv->shard.name,
                          table, literal, le.msg);
                continue;
            }
            if (lrc) {
                note_failure(t, lrc, &le);
                continue;
            }
        }
        if (!ctx->opt->dry_run && !checked) {
            if ((rc = tier_server_check(ctx, srv, &err)))
                goto out;
            checked = true;
        }
        if (prepare_job(ctx, srv, def, table, pid, literal, &key, &js[n], t)) {
            /* a few fresh parts only: a partition whose hot parts piled up (merges stopped
             * for a while) would hold the table's merges for an upload of hundreds of parts,
             * and the table piles up more meanwhile (the ZooKeeper soak of session 27: waves
             * of 18-21 such partitions of 269-373 hot parts each); let merges take those
             * down first, as a plain wave does */
            js[n].late_rows = has_cold && hot <= TIER_LATE_HOLD_PARTS;
            if (!ctx->opt->no_compact)
                maybe_compact(srv, def->database, table, pid, ferry_ch_rows_get(&rows, i, 2),
                              ferry_ch_rows_get(&rows, i, 3), ferry_ch_rows_get(&rows, i, 4), t);
            n++;
        }
    }
    if (n) {
        plan_jobs(ctx, js, &n, t);
        run_jobs(ctx, js, n, t);
    }
out:
    ferry_slice_leases_release(ctx->cat, &ctx->slices);
    if (rc)
        note_failure(t, rc, &err);
    for (size_t i = 0; i < n; i++)
        job_free(&js[i]);
    free(js);
    ferry_ch_rows_free(&rows);
    ferry_record_list_free(&moves);
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
}

static void scan_server(tier_ctx *ctx, tier_server *srv, run_totals *t)
{
    ferry_err err = {0};
    int rc = tier_server_open(ctx, srv, &err);
    if (rc) {
        note_failure(t, rc, &err);
        return;
    }
    for (size_t i = 0; i < ctx->tables.n; i++) {
        const ferry_table_def *def = &ctx->tables.items[i].u.table;
        if (ctx->opt->table && strcmp(ctx->opt->table, def->name))
            continue;
        if (def->layout == FERRY_LAYOUT_SHARED) {
            scan_table(ctx, srv, def, def->name, NULL, false, t);
            continue;
        }
        /* per_tenant: one table <name>_<tenant> per tenant of the catalog */
        for (size_t k = 0; k < ctx->tenants.n; k++) {
            const char *tn = ctx->tenants.items[k].u.tenant.name;
            if (ctx->opt->tenant && strcmp(ctx->opt->tenant, tn))
                continue;
            char table[FERRY_NAME_MAX];
            if (snprintf(table, sizeof table, "%s_%s", def->name, tn) >= (int)sizeof table)
                continue;
            scan_table(ctx, srv, def, table, tn, true, t);
        }
    }
}

/* ---- the run ------------------------------------------------------------------------------------ */

static void ctx_free(tier_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n_servers; i++) {
        tier_agent_close(&ctx->servers[i]);
        mv_conn_close(&ctx->servers[i].conn);
        free(ctx->servers[i].policies);
    }
    free(ctx->servers);
    ferry_record_list_free(&ctx->tables);
    ferry_record_list_free(&ctx->tenants);
    ferry_objstore_close(ctx->store);
    json_decref(ctx->held);
    ferry_catalog_close(ctx->cat);
    ferry_config_free(&ctx->cfg);
}

static int ctx_open(tier_ctx *ctx, const ferry_tier_options *opt, ferry_err *err)
{
    ferry_cluster_config cc = {0};
    ferry_record_list shards = {0};
    ctx->opt = opt;
    int rc = ferry_config_load(opt->config_path, &ctx->cfg, err);
    if (!rc)
        rc = ferry_cluster_config_read(&ctx->cfg, &cc, err);
    if (!rc)
        rc = ferry_catalog_open(cc.catalog, &ctx->cat, err);
    if (rc)
        goto out;
    ferry_record s;
    ferry_record_init(&s, FERRY_REC_SETTINGS);
    if ((rc = ferry_catalog_get(ctx->cat, &s, err))) {
        if (rc == FERRY_ENOTFOUND)
            rc = ferry_err_set(err, FERRY_EINVAL, "the catalog %s has no cluster yet: run "
                               "'ferry init --config %s' first", cc.catalog, opt->config_path);
        goto out;
    }
    ctx->settings = s.u.settings;
    if ((rc = ferry_catalog_list(ctx->cat, FERRY_REC_TABLE, NULL, 0, &ctx->tables, err)) ||
        (rc = ferry_catalog_list(ctx->cat, FERRY_REC_TENANT, NULL, 0, &ctx->tenants, err)) ||
        (rc = ferry_catalog_list(ctx->cat, FERRY_REC_SHARD, NULL, 0, &shards, err)))
        goto out;
    if (opt->table) {
        bool found = false;
        for (size_t i = 0; i < ctx->tables.n && !found; i++)
            found = !strcmp(ctx->tables.items[i].u.table.name, opt->table);
        if (!found) {
            rc = ferry_err_set(err, FERRY_EINVAL, "--table %s: no such table in the catalog (add "
                               "a [table \"%s\"] section and run ferry init)", opt->table,
                               opt->table);
            goto out;
        }
    }
    ctx->servers = calloc(shards.n ? shards.n : 1, sizeof *ctx->servers);
    if (!ctx->servers) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    bool server_found = !opt->server;
    for (size_t i = 0; i < shards.n; i++) {
        if (shards.items[i].u.shard.state == FERRY_SHARD_GONE)
            continue;
        ctx->servers[ctx->n_servers++].shard = shards.items[i].u.shard;
        server_found |= opt->server && !strcmp(opt->server, shards.items[i].u.shard.name);
    }
    if (!server_found) {
        rc = ferry_err_set(err, FERRY_EINVAL, "--server %s: no such shard in the catalog",
                           opt->server);
        goto out;
    }
    ctx->now = opt->now ? opt->now : (int64_t)time(NULL);
    const char *test_now = ferry_test_knob("FERRY_TEST_NOW"); /* test-only: a fixed clock */
    int64_t tn = 0;
    if (!opt->now && test_now && ferry_parse_i64(test_now, &tn) && tn > 0)
        ctx->now = tn;
    ctx->older_than = opt->older_than ? opt->older_than : (uint64_t)ctx->settings.hot_days * 86400;
    if (opt->owner) {
        snprintf(ctx->owner, sizeof ctx->owner, "%s", opt->owner);
    } else {
        char host[64] = "localhost";
        gethostname(host, sizeof host - 1);
        snprintf(ctx->owner, sizeof ctx->owner, "%s:%d", host, (int)getpid());
    }
    ferry_flow_journal_init(&ctx->journal, ctx->cat, &ferry_tier_flow, ctx->owner);
out:
    ferry_record_list_free(&shards);
    ferry_cluster_config_free(&cc);
    return rc;
}

/* The leases of a run: one per server it works on ("tier.<server>"), so runs restricted to
 * different servers (--server) work side by side while two runs never touch one server's jobs at
 * once; a run over every server also takes "tier" first, so two such runs exclude each other
 * before either holds a server. On a conflict the leases taken so far are released. */
static int take_leases(tier_ctx *ctx, ferry_lease **leases, size_t *n, ferry_err *err)
{
    int rc = FERRY_OK;
    *n = 0;
    if (!ctx->opt->server)
        rc = ferry_catalog_lease_acquire(ctx->cat, "tier", ctx->owner, &leases[(*n)++], err);
    for (size_t i = 0; !rc && i < ctx->n_servers; i++) {
        const char *name = ctx->servers[i].shard.name;
        if (ctx->opt->server && strcmp(ctx->opt->server, name))
            continue;
        char lease[FERRY_NAME_MAX + 8];
        snprintf(lease, sizeof lease, "tier.%s", name);
        rc = ferry_catalog_lease_acquire(ctx->cat, lease, ctx->owner, &leases[(*n)++], err);
    }
    if (rc) {
        (*n)--; /* the failed one was not taken */
        while (*n)
            ferry_catalog_lease_release(ctx->cat, leases[--(*n)]);
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "another tiering run is in progress: ");
    }
    return rc;
}

int ferry_tier_run(const ferry_tier_options *opt, json_t **report, ferry_err *err)
{
    tier_ctx ctx = {0};
    ferry_lease **leases = NULL;
    size_t n_leases = 0;
    run_totals t = {0};
    double t0 = ferry_clock_ms();
    *report = NULL;
    int rc = ctx_open(&ctx, opt, err);
    if (rc)
        goto out;
    if (!opt->dry_run) {
        leases = calloc(ctx.n_servers + 1, sizeof *leases);
        if (!leases) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = take_leases(&ctx, leases, &n_leases, err)))
            goto out;
    }
    ctx.report = json_pack("{s:b, s:I, s:[], s:[]}", "dry_run", opt->dry_run, "older_than_s",
                           (json_int_t)ctx.older_than, "jobs", "planned");
    resume_jobs(&ctx, &t);
    for (size_t i = 0; i < ctx.n_servers; i++)
        if (!opt->server || !strcmp(opt->server, ctx.servers[i].shard.name))
            scan_server(&ctx, &ctx.servers[i], &t);
    json_t *steps = json_object();
    for (int s = 0; s < FERRY_TIER_STATE_COUNT; s++)
        if (ctx.step_ms[s] > 0)
            json_object_set_new(steps, ferry_tier_state_name((enum ferry_tier_state)s),
                                json_real(ctx.step_ms[s]));
    json_object_set_new(ctx.report, "partitions_tiered", json_integer(t.tiered));
    json_object_set_new(ctx.report, "jobs_resumed", json_integer(t.resumed));
    json_object_set_new(ctx.report, "jobs_retried", json_integer(t.retried));
    json_object_set_new(ctx.report, "jobs_late_rows", json_integer(t.late));
    json_object_set_new(ctx.report, "partitions_compacted", json_integer(t.compacted));
    json_object_set_new(ctx.report, "partitions_waiting_merges", json_integer(t.piled));
    json_object_set_new(ctx.report, "jobs_failed", json_integer(t.failed));
    json_object_set_new(ctx.report, "bytes_uploaded", json_integer((json_int_t)t.bytes));
    json_object_set_new(ctx.report, "files_uploaded", json_integer((json_int_t)t.files));
    json_object_set_new(ctx.report, "pointer_bytes", json_integer((json_int_t)t.pbytes));
    json_object_set_new(ctx.report, "pointer_files", json_integer((json_int_t)t.pfiles));
    json_object_set_new(ctx.report, "step_ms", steps);
    json_object_set_new(ctx.report, "load_sql_ms", json_real(ctx.load_ms));
    json_object_set_new(ctx.report, "fingerprint_ms", json_real(ctx.fingerprint_ms));
    json_object_set_new(ctx.report, "upload_check_ms", json_real(t.check_ms));
    unsigned long statements = 0, agent_requests = 0;
    for (size_t i = 0; i < ctx.n_servers; i++) {
        statements += ctx.servers[i].conn.n_sql;
        agent_requests += mv_agent_requests(&ctx.servers[i].conn);
    }
    json_object_set_new(ctx.report, "waves", json_integer((json_int_t)ctx.waves));
    json_object_set_new(ctx.report, "statements", json_integer((json_int_t)statements));
    json_object_set_new(ctx.report, "agent_requests", json_integer((json_int_t)agent_requests));
    json_object_set_new(ctx.report, "catalog_writes",
                        json_integer((json_int_t)ctx.catalog_writes));
    json_object_set_new(ctx.report, "wall_ms", json_real(ferry_clock_ms() - t0));
    *report = ctx.report;
    ctx.report = NULL;
    if (!opt->dry_run) { /* the cluster's tally (include/ferry/tally.h) is bookkeeping */
        ferry_tally_tier tt = {.partitions_tiered = (uint64_t)t.tiered,
                               .jobs_failed = (uint64_t)t.failed,
                               .bytes_uploaded = t.bytes,
                               .pointer_bytes = t.pbytes};
        ferry_err terr = {0};
        if (ferry_tally_tier_add(ctx.cat, &tt, (int64_t)time(NULL), &terr))
            ferry_log(FERRY_LOG_WARN, "msg=\"tiering not counted in the cluster's tally\" "
                                      "error=\"%s\"", terr.msg);
    }
    if (t.first_rc) {
        rc = t.first_rc;
        *err = t.first_err;
    }
out:
    while (n_leases)
        ferry_catalog_lease_release(ctx.cat, leases[--n_leases]);
    free(leases);
    json_decref(ctx.report);
    ctx_free(&ctx);
    return rc;
}
